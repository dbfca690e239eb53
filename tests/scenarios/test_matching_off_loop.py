"""Matching a request against the scenarios' patterns, and a hosted call's code or commands against
`hosted.*` entries, runs in a worker thread once it may cost more than a match on the event loop
may (`patterns.MATCH_BUDGET`: a few ms), and all the matches of one request (or one call) stay
within one budget together. Before, each match had a budget but a request none: 150 messages of
14,000 characters against one history pattern held every other client 3.7 s, 60 entries of
`hosted.code_interpreter` against one call's code 1.3 s. No clock: the thread each long match runs
on is recorded, and must not be the event loop's; the budgets are counted in instructions × bytes.
"""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator import patterns
from tests.support import js

JSON = {"content-type": "application/json"}
pytestmark = pytest.mark.anyio
SLOW = "(a|b)*a(a|b){20}c"
"""A pattern whose fast matcher overflows on a and b: RE2 simulates it, some 70 instructions a byte."""
CI = {"type": "code_interpreter", "container": {"type": "auto"}, "allowed_callers": ["programmatic"]}
PTC = {"type": "programmatic_tool_calling"}


def ab(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("ab") for _ in range(n))


@contextlib.asynccontextmanager
async def app_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=tmp_path, pool_size=1, bundled_fixtures=False))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=120) as http:
            yield http


@pytest.fixture
def long_matches(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The thread each match of a text of 1000 characters or more ran on."""
    seen: list[threading.Thread] = []
    for name in ("search", "fullmatch"):
        real = getattr(patterns.Pattern, name)

        def noted(self: patterns.Pattern, text: str, _real: Any = real) -> Any:
            if len(text) >= 1000:
                seen.append(threading.current_thread())
            return _real(self, text)

        monkeypatch.setattr(patterns.Pattern, name, noted)
    return seen


def _history_request(messages: int) -> dict[str, Any]:
    said = [{"role": "user" if i % 2 else "assistant", "content": ab(3000, i)} for i in range(messages)]
    return {"model": "m", "store": False, "input": [*said, {"role": "user", "content": "q"}]}


HISTORY = {"name": "hist", "match": {"input": "^q$", "history": [{"text": SLOW}]}, "turns": [{"message": "x"}]}


async def test_history_patterns_over_a_long_conversation_are_matched_off_the_event_loop(
    tmp_path: Path, long_matches: list[threading.Thread]
) -> None:
    loop_thread = threading.current_thread()
    async with app_client(tmp_path) as http:
        assert (await http.post("/_emulator/scenarios", json=HISTORY, headers=JSON)).status_code == 201
        answered = await http.post("/v1/responses", json=_history_request(8), headers=JSON)
    assert answered.status_code == 400, answered.text  # no message matches: no scenario
    assert len(long_matches) == 8
    assert loop_thread not in long_matches, "the history was matched on the event loop"


async def test_many_scenarios_input_patterns_are_matched_off_the_event_loop(
    tmp_path: Path, long_matches: list[threading.Thread]
) -> None:
    loop_thread = threading.current_thread()
    async with app_client(tmp_path) as http:
        for i in range(20):
            scenario = {"name": f"s{i}", "match": {"input": f"{SLOW}({i})?"}, "turns": [{"message": "x"}]}
            assert (await http.post("/_emulator/scenarios", json=scenario, headers=JSON)).status_code == 201
        answered = await http.post("/v1/responses", json={"model": "m", "input": ab(2000, 1)}, headers=JSON)
    assert answered.status_code == 400, answered.text
    assert len(long_matches) == 20
    assert loop_thread not in long_matches, "the scenarios were matched on the event loop"


async def test_a_requests_matches_together_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each match within its own budget, eight together past the request's (made small here)."""
    monkeypatch.setattr(patterns, "OFF_LOOP_MATCH_BUDGET", 1_000_000)
    assert patterns.compile_pattern(SLOW).size * 3000 < 1_000_000 < 8 * patterns.compile_pattern(SLOW).size * 3000
    async with app_client(tmp_path) as http:
        assert (await http.post("/_emulator/scenarios", json=HISTORY, headers=JSON)).status_code == 201
        answered = await http.post("/v1/responses", json=_history_request(8), headers=JSON)
    assert answered.status_code == 400, answered.text
    error = answered.json()["error"]
    assert error["code"] == "scenario_error" and error["type"] == "invalid_request_error"
    assert "Matching this request against the scenarios' patterns is too costly" in error["message"]
    assert "at most 1000000" in error["message"]


def _hosted(entries: int) -> dict[str, Any]:
    return {"code_interpreter": [*({"code": f"{SLOW}({i})?", "logs": "x"} for i in range(entries)), {"logs": "y"}]}


async def test_a_programs_hosted_call_is_matched_off_the_event_loop(
    tmp_path: Path, long_matches: list[threading.Thread]
) -> None:
    loop_thread = threading.current_thread()
    program = js(f"const r = await tools.code_interpreter({{code: '{ab(3000, 2)}'}}); text(r.logs);")
    async with app_client(tmp_path) as http:
        assert (await http.put("/_emulator/hosted", json=_hosted(10), headers=JSON)).status_code == 200
        answered = await http.post("/v1/responses", json={"model": "m", "input": program, "tools": [PTC, CI]})
    assert answered.status_code == 200, answered.text
    assert answered.json()["output"][-1]["content"][0]["text"] == "y"  # past the ten, the catch-all
    assert len(long_matches) == 10
    assert loop_thread not in long_matches, "the hosted entries were matched on the event loop"


async def test_a_hosted_calls_matches_together_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patterns, "OFF_LOOP_MATCH_BUDGET", 1_000_000)
    program = js(f"const r = await tools.code_interpreter({{code: '{ab(3000, 3)}'}}); text(r.logs);")
    async with app_client(tmp_path) as http:
        assert (await http.put("/_emulator/hosted", json=_hosted(10), headers=JSON)).status_code == 200
        answered = await http.post("/v1/responses", json={"model": "m", "input": program, "tools": [PTC, CI]})
    assert answered.status_code == 200, answered.text
    [program_output] = [item for item in answered.json()["output"] if item["type"] == "program_output"]
    assert program_output["status"] == "incomplete"
    assert (
        "matching it against the entries of the scenario's hosted.code_interpreter is too costly"
        in (program_output["result"])
    )
