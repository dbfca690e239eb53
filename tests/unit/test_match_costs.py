"""What matching a request against the scenarios costs beyond RE2: the near-miss ranking's
similarity and `match.outputs`' JSON comparisons are bounded and counted (`emulator/patterns.py`)."""

from __future__ import annotations

import difflib
from typing import Any

import pytest

from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.model.scripted import scenario as scenario_module
from ptc_emulator.emulator.model.scripted.scenario import (
    SIMILARITY_BUDGET,
    SIMILARITY_CHARS,
    Given,
    NearMiss,
    Request,
    ScenarioRegistry,
    ToolOutput,
    load_scenario,
)
from ptc_emulator.emulator.patterns import MATCH_BUDGET, metered


def _request(text: str, outputs: tuple[ToolOutput, ...] = ()) -> Request:
    return Request(
        text=text, tools=frozenset(), ptc=True, model="m", metadata={}, scope=None, context=Given(outputs=outputs)
    )


class _Recorded(difflib.SequenceMatcher):  # type: ignore[type-arg]
    seen: list[tuple[int, int]] = []

    def __init__(self, isjunk: Any, a: str, b: str) -> None:
        _Recorded.seen.append((len(a), len(b)))
        super().__init__(isjunk, a, b)


def test_the_near_miss_ranking_compares_bounded_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the pattern's whole literal text was compared with the whole message (quadratic, on
    the event loop, outside the match budget): a 2,041-character literal of a 4-instruction pattern
    against a 40,000-character message held every client 4 s."""
    _Recorded.seen = []
    monkeypatch.setattr(difflib, "SequenceMatcher", _Recorded)
    registry = ScenarioRegistry()
    cjk = "".join(chr(0x4E00 + i % 200) for i in range(1020))
    registry.add(
        load_scenario(
            {"name": "long", "match": {"input": "^Q" + "".join(c + "{0}" for c in cjk)}, "turns": [{"message": "x"}]}
        )
    )
    for i in range(70):
        registry.add(load_scenario({"name": f"s{i}", "match": {"input": "^" + "b" * 150}, "turns": [{"message": "x"}]}))
    registry.add(load_scenario({"name": "near", "match": {"input": "^hello there$"}, "turns": [{"message": "x"}]}))
    misses = registry.match(_request("hello there!" + "z" * 40_000))
    assert isinstance(misses, list) and all(isinstance(m, NearMiss) for m in misses)
    assert _Recorded.seen and max(max(a, b) for a, b in _Recorded.seen) <= SIMILARITY_CHARS
    assert sum(a * b for a, b in _Recorded.seen) <= SIMILARITY_BUDGET
    # a short message still ranks the most similar pattern first, as before
    _Recorded.seen = []
    misses = registry.match(_request("hello there!"))
    assert isinstance(misses, list) and misses[0].scenario == "near"
    assert (len("hello there"), len("hello there!")) in _Recorded.seen


def _outputs_scenario(n: int) -> Any:
    entries = [{"json": {"k": i}} for i in range(n)]
    return load_scenario({"name": "outs", "match": {"input": "^go$", "outputs": entries}, "turns": [{"message": "ok"}]})


def test_json_outputs_count_in_the_requests_match_budget() -> None:
    """Before, entry i compared outputs up to i (N²/2 comparisons) outside the budget: 4,000
    entries and outputs took 10 s of CPU. Now each comparison counts, and past the budget the
    request gets the documented too-costly 400 instead."""
    registry = ScenarioRegistry()
    registry.add(_outputs_scenario(300))
    outputs = tuple(ToolOutput("f", f'{{"k": {j}}}') for j in range(300))
    with pytest.raises(EmulatorError) as raised, metered(MATCH_BUDGET):
        registry.match(_request("go", outputs))
    assert "too costly" in str(raised.value)
    # a few entries and outputs match within it, as before
    registry.add(_outputs_scenario(20))
    with metered(MATCH_BUDGET) as meter:
        found = registry.match(_request("go", outputs[:20]))
    assert not isinstance(found, list) and found[0].name == "outs"
    # and the request's weight (what moves its matching off the event loop) bounds that cost:
    # each output brings at least 20 bytes of text to a request
    assert meter.spent <= registry.match_weight(None) * 20 * 20


def test_the_weight_counts_json_outputs() -> None:
    registry = ScenarioRegistry()
    registry.add(load_scenario({"name": "plain", "match": {"input": "^go$"}, "turns": [{"message": "ok"}]}))
    plain = registry.match_weight(None)
    registry.add(_outputs_scenario(50))
    assert registry.match_weight(None) - plain >= 50 * (scenario_module.OUTPUT_JSON_COST * 2) // 20


def test_many_scenarios_are_all_ranked_and_the_closest_named() -> None:
    """Past the ranking's budget (about a hundred scenarios compared in full), the scenarios after
    it were ranked 0: the request that was one scenario's text but for its last characters named
    another as the closest. With more scenarios than the budget compares, all are ranked by one
    linear measure."""
    import random

    words = random.Random(7)
    vocabulary = ["alpha", "bravo", "delta", "omega", "sigma", "lambda", "parcel", "invoice", "order", "ship"]
    registry = ScenarioRegistry()
    texts = []
    for i in range(260):
        text = " ".join(words.choice(vocabulary) for _ in range(14)) + f" item {i}"
        texts.append(text)
        registry.add(
            load_scenario({"name": f"nm{i:03d}", "match": {"input": f"^{text}$"}, "turns": [{"message": "x"}]})
        )
    for target in (5, 129, 241, 259):
        misses = registry.match(_request(texts[target][:-3] + "zzz"))
        assert isinstance(misses, list)
        assert misses[0].scenario == f"nm{target:03d}", (target, misses[0])


def test_history_entries_walk_the_earlier_messages_once_per_role_within_the_budget() -> None:
    """Each `match.history` entry walked every earlier message, outside the budget: 4,000 entries
    over 20,000 messages held every client 2-5 s. The walk is made once per role and counted."""
    from ptc_emulator.emulator.model.scripted.scenario import HISTORY_SCAN_COST, Said

    said = tuple(Said("user", "a") for _ in range(20_000))
    request = Request(
        text="hello", tools=frozenset(), ptc=True, model="m", metadata={}, scope=None, context=Given(history=said)
    )
    registry = ScenarioRegistry()
    history = [{"role": "user", "text": "a"}] * 4000
    registry.add(
        load_scenario({"name": "h", "match": {"input": "^hello$", "history": history}, "turns": [{"message": "x"}]})
    )
    with metered(10 * MATCH_BUDGET) as meter:
        found = registry.match(request)
    assert not isinstance(found, list), found
    walks = meter.spent // (HISTORY_SCAN_COST * len(said))
    assert walks == 1, f"the earlier messages were walked {walks} times"


def test_an_outputs_json_is_counted_once_when_the_scenario_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request counted the values of every reached entry's `json` again (six scenarios of a
    1,000,000-value `json`, four requests at once, held every client 0.5 s). They are counted once,
    as the scenario is read: no request counts any."""
    from ptc_emulator.emulator import jsontext

    registry = ScenarioRegistry()
    for i in range(3):
        registry.add(
            load_scenario(
                {
                    "name": f"j{i}",
                    "match": {"input": "^go$", "outputs": [{"json": [0] * 1000}]},
                    "turns": [{"message": "x"}],
                }
            )
        )
    weight = registry.match_weight(None)
    counted: list[int] = []
    real = jsontext.values
    monkeypatch.setattr(jsontext, "values", lambda value: counted.append(1) or real(value))
    for outputs in ((), (ToolOutput("f", "[0]"),), (ToolOutput("f", "[" + "0," * 999 + "0]"),)):
        with metered(MATCH_BUDGET):
            registry.match(_request("go", outputs))
    assert counted == []
    assert registry.match_weight(None) == weight
    # the comparison is still counted in the budget as before: a json of 1,000 values per output
    with metered(MATCH_BUDGET) as meter:
        registry.match(_request("go", (ToolOutput("f", "[1]"),)))
    assert meter.spent >= 3 * scenario_module.OUTPUT_JSON_COST * 1001
