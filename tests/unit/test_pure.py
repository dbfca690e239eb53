"""Pure functions of the engine and the transport, tested directly: no server, no V8."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

from ptc_emulator.api.sse import frame
from ptc_emulator.emulator.errors import InvalidRequest
from ptc_emulator.emulator.model.scripted.scenario import NearMiss, Request, ScenarioRegistry, load_scenario
from ptc_emulator.emulator.signing import ProgramSeal, Signer, code_digest
from ptc_emulator.emulator.wire.events import chunks

EVENTS = [
    {"type": "response.output_text.delta", "delta": "héllo ✓\nnext", "sequence_number": 1},
    {"type": "response.completed", "response": {"id": "resp_1", "output": []}, "sequence_number": 2},
]


def test_sse_frames_parse_back_however_the_bytes_are_split() -> None:
    """As openai-python's SSE decoder reads them, even one byte at a time."""
    stream = b"".join(frame(e) for e in EVENTS)
    for size in (1, 2, 3, 7, len(stream)):
        pieces = [stream[i : i + size] for i in range(0, len(stream), size)]
        decoded = list(SSEDecoder().iter_bytes(iter(pieces)))
        assert [(d.event, json.loads(d.data)) for d in decoded] == [(e["type"], e) for e in EVENTS]


@given(st.text())
def test_text_deltas_join_back_to_the_text(text: str) -> None:
    assert "".join(chunks(text)) == text


def _seal(**changes: object) -> ProgramSeal:
    fields: dict[str, object] = {
        "call_id": "call_1",
        "code_sha256": code_digest("text(1)"),
        "seed": 7,
        "clock_ms": 1_700_000_000_000,
        "tools": ("add",),
    }
    return ProgramSeal(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_fingerprint_opens_with_its_own_code_and_no_other() -> None:
    signer = Signer(b"secret")
    fingerprint = signer.fingerprint(_seal())
    assert signer.open_fingerprint(fingerprint, call_id="call_1", code="text(1)", param="input") == _seal()
    with pytest.raises(InvalidRequest):
        signer.open_fingerprint(fingerprint, call_id="call_1", code="text(2)", param="input")
    with pytest.raises(InvalidRequest):
        signer.open_fingerprint(fingerprint, call_id="call_2", code="text(1)", param="input")
    with pytest.raises(InvalidRequest):
        Signer(b"another secret").open_fingerprint(fingerprint, call_id="call_1", code="text(1)", param="input")


def test_derived_ids_depend_on_the_secret_and_the_call() -> None:
    one, two = Signer(b"a"), Signer(b"b")
    assert one.program_call_id("call_1", 0) == one.program_call_id("call_1", 0)
    assert (
        len({one.program_call_id("call_1", 0), one.program_call_id("call_1", 1), two.program_call_id("call_1", 0)}) == 3
    )


def _request(text: str, tools: frozenset[str] = frozenset()) -> Request:
    return Request(text=text, tools=tools, ptc=True, model="m", metadata={}, scope=None)


def test_scenarios_match_by_input_and_tools_and_report_near_misses() -> None:
    registry = ScenarioRegistry()
    registry.add(
        load_scenario(
            {
                "name": "weather",
                "match": {"input": "(?i)weather in (?P<city>\\w+)", "tools": ["forecast"]},
                "turns": [{"message": "rain"}],
            }
        )
    )
    matched = registry.match(_request("Weather in Oslo?", frozenset({"forecast"})))
    assert not isinstance(matched, list)
    scenario, captures = matched
    assert scenario.name == "weather" and captures["city"] == "Oslo"
    misses = registry.match(_request("Weather in Oslo?"))
    assert isinstance(misses, list) and [m.scenario for m in misses] == ["weather"]
    assert isinstance(misses[0], NearMiss) and misses[0].field == "tools" and "forecast" in misses[0].reason
