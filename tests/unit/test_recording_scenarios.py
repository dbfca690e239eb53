"""Unit tests of emulator/recording.py: conversations in, scenario files out (no server)."""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml

from ptc_emulator.emulator.model.scripted.recording import (
    Tape,
    file_name,
    full_match,
    match_context,
    scenario_from,
    template_for,
    to_yaml,
)
from ptc_emulator.emulator.model.scripted.scenario import NOT_JSON, load_scenario
from ptc_emulator.emulator.model.scripted.script import Script

TOOLS = [{"type": "function", "name": "b"}, {"type": "function", "name": "a"}, {"type": "programmatic_tool_calling"}]


def message(text: str, mid: str = "msg_1") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "message", "id": mid, "role": "assistant", "status": "completed", "content": content}


def program(code: str, call_id: str = "call_p") -> dict[str, Any]:
    return {"type": "program", "id": "prog_1", "call_id": call_id, "code": code, "fingerprint": "fp-upstream"}


def program_call(n: int) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{n}",
        "call_id": f"call_{n}",
        "name": "a",
        "arguments": "{}",
        "caller": {"type": "program", "caller_id": "call_p"},
    }


def response(rid: str, output: list[dict[str, Any]], previous: str | None = None) -> dict[str, Any]:
    return {"id": rid, "object": "response", "status": "completed", "output": output, "previous_response_id": previous}


def render(template: str, **context: Any) -> str:
    return Script("t", []).text(0, template, context)


@pytest.mark.parametrize("text", ["What is 2+2? (in $)", "a.b*c [x] {y} ^z|w\\", "line one\nline two", "Ünïcode: ok"])
def test_full_match_finds_exactly_the_text(text: str) -> None:
    pattern = full_match(text)
    assert re.search(pattern, text)
    assert not re.search(pattern, text + " more")
    assert not re.search(pattern, "x" + text)


def test_a_message_quoting_the_program_result_becomes_a_template() -> None:
    result = '{"sku":"sku_123","units":42,"short":0,"nested":{"city":"Porto"}}'
    sources = [("result", result), ("data.sku", "sku_123"), ("data.units", "42"), ("data.short", "0")]
    sources.append(("data.nested.city", "Porto"))
    text = "sku_123 has 42 units in Porto; short by 0 (since 2042)."
    template = template_for(text, sources)
    assert template == (
        "{{ data.sku }} has {{ data.units }} units in {{ data.nested.city }}; short by {{ data.short }} (since 2042)."
    )
    data = {"sku": "sku_123", "units": 42, "short": 0, "nested": {"city": "Porto"}}
    assert render(template, data=data) == text


def test_a_message_that_quotes_nothing_stays_verbatim_and_jinja_syntax_stays_literal() -> None:
    text = "Use {{ braces }} and {% tags %} freely."
    template = template_for(text, [("result", "unrelated")])
    assert render(template) == text


@pytest.mark.parametrize("text", ["{42}", "{{42}}", "{% 42 %}", "a {#42#} b", "{ 42 }"])
def test_braces_next_to_a_quoted_value_stay_literal(text: str) -> None:
    template = template_for(text, [("data.n", "42")])
    assert "{{ data.n }}" in template
    assert render(template, data={"n": 42}) == text


def test_a_whole_result_quoted_is_the_result() -> None:
    assert template_for("The answer: forty-two.", [("result", "forty-two")]) == "The answer: {{ result }}."


def test_a_chain_with_pauses_becomes_a_program_and_a_message() -> None:
    tape = Tape()
    first = {"model": "m", "input": "Sum it up.", "tools": TOOLS}
    out1 = [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Plan."}]},
        program("const x = await tools.a({});\nconst y = await tools.a({});\ntext(`${x.n + y.n}`);\n"),
        program_call(1),
    ]
    assert tape.exchange(first, response("resp_1", out1)) is None
    answer1 = [{"type": "function_call_output", "call_id": "call_1", "output": '{"n": 2}'}]
    second = {"input": answer1, "previous_response_id": "resp_1", "tools": TOOLS}
    assert tape.exchange(second, response("resp_2", [program_call(2)], "resp_1")) is None
    answer2 = [{"type": "function_call_output", "call_id": "call_2", "output": '{"n": 3}'}]
    third = {"input": answer2, "previous_response_id": "resp_2", "tools": TOOLS}
    out3 = [
        {"type": "program_output", "id": "po_1", "call_id": "call_p", "result": "5", "status": "completed"},
        message("The sum is 5."),
    ]
    finished = tape.exchange(third, response("resp_3", out3, "resp_2"))
    assert finished is not None
    scenario = scenario_from(finished, model="m")
    assert scenario == {
        "description": "Recorded from m.",
        "priority": 1,
        "match": {"input": r"^Sum it up\.$", "tools": ["a", "b"]},
        "turns": [
            {"reasoning": "Plan.", "program": out1[1]["code"]},
            {"message": "The sum is {{ result }}."},
        ],
    }
    loaded = load_scenario(to_yaml(scenario), default_name="t")
    assert loaded.turns[0].program == out1[1]["code"] and loaded.turns[0].with_output
    assert file_name(scenario) == file_name(scenario_from(finished, model="other"))
    assert re.fullmatch(r"recorded__sum_it_up__[0-9a-f]{8}\.yaml", file_name(scenario))


def test_a_program_output_in_its_own_response_keeps_the_message_for_the_next() -> None:
    tape = Tape()
    tape.exchange({"input": "Go.", "tools": TOOLS}, response("r1", [program("text('ok')")]))
    po = {"type": "program_output", "id": "po_1", "call_id": "call_p", "result": "ok", "status": "completed"}
    tape.exchange({"input": [], "previous_response_id": "r1"}, response("r2", [po], "r1"))
    finished = tape.exchange({"input": [], "previous_response_id": "r2"}, response("r3", [message("ok")], "r2"))
    assert finished is not None
    turns = scenario_from(finished)["turns"]  # type: ignore[index]
    assert turns[0]["with_output"] is False


def test_a_store_false_replay_needs_no_history() -> None:
    """The last request resends every item; the parallel direct calls become one call turn. As in a
    scenario's templates, `outputs.<name>` is that tool's latest output."""
    calls = [
        {"type": "function_call", "id": f"fc_{n}", "call_id": f"c{n}", "name": "a", "arguments": f'{{"n": {n}}}'}
        for n in (1, 2)
    ]
    outputs = [{"type": "function_call_output", "call_id": f"c{n}", "output": f"v{n}0"} for n in (1, 2)]
    request = {"input": [{"role": "user", "content": "Both?"}, *calls, *outputs], "tools": TOOLS, "store": False}
    finished = Tape().exchange(request, response("r9", [message("v10 and v20.")]))
    assert finished is not None
    turns = scenario_from(finished)["turns"]  # type: ignore[index]
    assert turns == [
        {"call": [{"name": "a", "arguments": {"n": 1}}, {"name": "a", "arguments": {"n": 2}}]},
        {"message": "v10 and {{ outputs.a }}."},
    ]


def test_code_with_jinja_openers_replays_exactly() -> None:
    code = "const o = {{a: 1}};\n// {% not a tag %}\ntext('x');\n"
    finished = Tape().exchange({"input": "x", "tools": TOOLS}, response("r", [program(code), message("done")]))
    assert finished is not None
    loaded = load_scenario(to_yaml(scenario_from(finished)), default_name="t")  # type: ignore[arg-type]
    assert loaded.turns[0].program is not None
    assert Script("t", loaded.turns, scenario=loaded).code(0, {}) == code


def test_unfinished_and_unknown_chains_write_nothing() -> None:
    tape = Tape()
    assert tape.exchange({"input": "x"}, response("r", [program_call(1)])) is None
    assert tape.exchange({"input": [], "previous_response_id": "unknown"}, response("r2", [message("hi")])) is None
    failed = {**response("r3", [message("hi")]), "status": "incomplete"}
    assert tape.exchange({"input": "x"}, failed) is None


def test_the_tape_keeps_histories_by_bytes_too() -> None:
    tape = Tape(max_bytes=1_000_000)
    big = "x" * 300_000
    for n in range(10):  # ten unfinished chains of 300 KB each: three fit, the oldest leave first
        assert tape.exchange({"input": f"{n} {big}"}, response(f"r{n}", [program_call(n)])) is None
    assert 0 < tape.bytes <= 1_000_000
    gone = {"input": [], "previous_response_id": "r0"}
    assert tape.exchange(gone, response("r10", [message("hi")])) is None  # r0 was forgotten
    finished = tape.exchange({"input": [], "previous_response_id": "r9"}, response("r11", [message("hi")]))
    assert finished is not None and finished.items[0]["content"].endswith(big)


def test_the_tape_keeps_no_text_of_unclean_responses_beyond_its_histories() -> None:
    """What links a resent message to an unclean response is a digest, not the text: the tape's
    memory stays within its histories' bound however much text unclean responses said. Before, the
    full text of each unclean response's messages was kept beside the histories (2,000 of them, each
    up to the 1 MiB a recording may say: 0.88 MB held per 0.9 MB `incomplete` answer)."""
    tracemalloc.start()
    try:
        tape = Tape(keep=2_000, max_bytes=1_000_000)
        before = tracemalloc.get_traced_memory()[0]
        for n in range(40):  # 4 MB of text, every response `incomplete`
            cut = {**response(f"r{n}", [message(f"{n} " + "B" * 100_000, f"msg_{n}")]), "status": "incomplete"}
            assert tape.exchange({"input": f"question {n}"}, cut) is None
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0 < tape.bytes <= 1_000_000
    assert held < 1_600_000, held  # the histories' 1 MB, and the links' few kilobytes


def test_the_yaml_is_for_people() -> None:
    finished = Tape().exchange(
        {"input": "Hi there", "tools": TOOLS}, response("r", [program("a();\nb();\n"), message("done")])
    )
    assert finished is not None
    text = to_yaml(scenario_from(finished))  # type: ignore[arg-type]
    assert text.index("match:") < text.index("turns:")
    assert "  tools: [a, b]\n" in text
    assert "  - program: |\n      a();\n      b();\n" in text
    assert yaml.safe_load(text)["turns"][1] == {"message": "done"}


def test_the_documented_recording_is_a_valid_scenario() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "record-replay.md").read_text(encoding="utf-8")
    block = doc[doc.index("```yaml\n# Recorded") + len("```yaml\n") :]
    scenario = load_scenario(block[: block.index("```")], default_name="documented")
    assert scenario.priority == 1 and scenario.match.tools == ["get_demand", "get_inventory"]
    assert re.search(scenario.match.input or "", "Compare inventory with demand for sku_123.")


def test_match_context_reads_a_create_body_as_the_matchers_do() -> None:
    """The recording proxy's view of a request for `match.instructions`, `history`, `outputs` and
    `tool_choice`: what the emulator reads from the same request."""
    body = {
        "instructions": "Be brief.",
        "tool_choice": {"type": "function", "name": "a"},
        "input": [
            {"role": "developer", "content": [{"type": "input_text", "text": "You are a clerk."}]},
            {"role": "user", "content": "My name is Ada."},
            message("Hi Ada."),
            {"role": "user", "content": "Stock of sku_1?"},
            {"type": "function_call", "call_id": "c1", "name": "a", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": '{"units": 0}'},
            {"type": "custom_tool_call", "call_id": "c2", "name": "b", "input": "x"},
            {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "done"}]},
        ],
    }

    context = match_context(body)

    assert context.instructions == ("Be brief.", "You are a clerk.")
    assert [(s.role, s.text) for s in context.history] == [("user", "My name is Ada."), ("assistant", "Hi Ada.")]
    assert [(o.tool, o.text, o.data) for o in context.outputs] == [
        ("a", '{"units": 0}', {"units": 0}),
        ("b", "done", NOT_JSON),
    ]
    assert context.tool_choice == {"type": "function", "name": "a"}
    assert match_context({"input": "hello"}).tool_choice == "auto"


def test_a_long_run_of_messages_is_joined_and_templated_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, each message of a run was joined onto the text so far (`before + message`) and the
    whole templated again: quadratic (20,000 messages 2.5 s, a 100,000-message answer held its own
    client a minute). The work is counted here, not timed: one templating of the joined text."""
    from ptc_emulator.emulator.model.scripted import recording

    seen: list[int] = []
    real = recording.template_for

    def counted(text: str, sources: list[tuple[str, str]]) -> str:
        seen.append(len(text))
        return real(text, sources)

    monkeypatch.setattr(recording, "template_for", counted)
    output = [message(f"part {n}. ", f"msg_{n}") for n in range(2_000)]
    finished = Tape().exchange({"input": "Say it all."}, response("r", output))
    assert finished is not None
    turns = scenario_from(finished)["turns"]  # type: ignore[index]
    assert turns == [{"message": "".join(f"part {n}. " for n in range(2_000))}]
    assert seen == [len(turns[0]["message"])]
