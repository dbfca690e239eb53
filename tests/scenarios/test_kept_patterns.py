"""A scenario's and a hosted entry's patterns are compiled once, as they are added, and kept with
them (`Match.compiled`, the hosted entries' own): a match never compiles. Before, every match went
through the shared 512-entry cache of `compile_pattern`, which any client's patterns can flush: 600
scenarios (or hosted entries) of distinct patterns were all compiled again at every request (3 s
each), and 140 requests of another client's schema patterns made the next hosted call compile its
150 entries on the event loop. And a program's hosted calls of one step share one budget for what
they match on the event loop: 280 calls in one `Promise.all`, each within its own, held every other
client 3 s. No clock: compiles are counted, and the thread each match ran on recorded.
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
import re2

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator import patterns
from tests.support import js

JSON = {"content-type": "application/json"}
pytestmark = pytest.mark.anyio
SLOW = "(a|b)*a(a|b){20}c"
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
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The patterns RE2 is asked to compile, from here on."""
    seen: list[str] = []
    real = re2.compile

    def counted(pattern: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(pattern)
        return real(pattern, *args, **kwargs)

    monkeypatch.setattr(patterns.re2, "compile", counted)
    return seen


async def test_a_scenarios_patterns_are_not_compiled_again_after_the_shared_cache_is_flushed(
    tmp_path: Path, compiles: list[str]
) -> None:
    scenario = {
        "name": "refund",
        "match": {"input": r"refund (?P<id>r_\d+)", "instructions": "(?i)support"},
        "turns": [{"message": "{{ id }}"}],
    }
    async with app_client(tmp_path) as http:
        assert (await http.post("/_emulator/scenarios", json=scenario, headers=JSON)).status_code == 201
        patterns._compiled.cache_clear()  # another client's patterns pushed them out
        compiles.clear()
        body = {"model": "m", "input": "refund r_42", "instructions": "Support desk", "store": False}
        answered = await http.post("/v1/responses", json=body, headers=JSON)
    assert answered.status_code == 200, answered.text
    assert answered.json()["output"][-1]["content"][0]["text"] == "r_42"
    assert compiles == [], "a match compiled its pattern again"


async def test_a_hosted_entrys_pattern_is_not_compiled_again_after_the_shared_cache_is_flushed(
    tmp_path: Path, compiles: list[str]
) -> None:
    hosted = {"code_interpreter": [*({"code": f"^q{i}z$", "logs": f"{i}"} for i in range(20)), {"logs": "y"}]}
    program = js("const r = await tools.code_interpreter({code: 'q7z'}); text(r.logs);")
    async with app_client(tmp_path) as http:
        assert (await http.put("/_emulator/hosted", json=hosted, headers=JSON)).status_code == 200
        patterns._compiled.cache_clear()
        compiles.clear()
        answered = await http.post("/v1/responses", json={"model": "m", "input": program, "tools": [PTC, CI]})
    assert answered.status_code == 200, answered.text
    assert answered.json()["output"][-1]["content"][0]["text"] == "7"
    assert compiles == [], "a hosted call compiled the entries' patterns again"


async def test_a_steps_hosted_calls_share_one_budget_on_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thirty calls of 1,000 bytes each, each within `MATCH_BUDGET`, thirty together past it: those
    past it are matched in a worker thread."""
    size = patterns.compile_pattern(SLOW).size
    text = ab(1100, 5)
    assert size * 1100 < patterns.MATCH_BUDGET < 30 * size * 1070
    on_loop: list[int] = []
    off_loop: list[int] = []
    loop_thread = threading.current_thread()
    real = patterns.Pattern.search

    def noted(self: patterns.Pattern, found_in: str) -> Any:
        if self.pattern == SLOW:
            (on_loop if threading.current_thread() is loop_thread else off_loop).append(len(found_in))
        return real(self, found_in)

    monkeypatch.setattr(patterns.Pattern, "search", noted)
    program = js(
        f"const s = '{text}';"
        "const rs = await Promise.all(Array.from({length: 30}, (_, i) => tools.code_interpreter({code: s.slice(i)})));"
        "text(String(rs.length));"
    )
    async with app_client(tmp_path) as http:
        hosted = {"code_interpreter": [{"code": SLOW, "logs": "x"}, {"logs": "y"}]}
        assert (await http.put("/_emulator/hosted", json=hosted, headers=JSON)).status_code == 200
        answered = await http.post("/v1/responses", json={"model": "m", "input": program, "tools": [PTC, CI]})
    assert answered.status_code == 200, answered.text
    assert answered.json()["output"][-1]["content"][0]["text"] == "30"
    assert len(on_loop) + len(off_loop) == 30
    assert sum(on_loop) * size <= patterns.MATCH_BUDGET, "the step's calls matched past one budget on the loop"
    assert off_loop, "no call of the step was matched off the event loop"


async def test_adds_are_read_on_the_checking_threads_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scenario adds each folding up to 0.5 s of constants, sent at once, filled the worker threads
    every request shares: they queue on `CHECK_THREADS` threads of their own."""
    import asyncio

    from ptc_emulator.api.routes import admin
    from ptc_emulator.emulator import checking

    threads: list[str] = []
    real_scenario, real_hosted = admin.load_scenario, admin._hosted_of

    def noted_scenario(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real_scenario(*args, **kwargs)

    def noted_hosted(body: bytes) -> Any:
        threads.append(threading.current_thread().name)
        return real_hosted(body)

    monkeypatch.setattr(admin, "load_scenario", noted_scenario)
    monkeypatch.setattr(admin, "_hosted_of", noted_hosted)
    async with app_client(tmp_path) as http:
        adds = [
            http.post(
                "/_emulator/scenarios",
                json={"name": f"s{i}", "match": {"input": f"^s{i}$"}, "turns": [{"message": "{{ 1 + 1 }}"}]},
                headers=JSON,
            )
            for i in range(12)
        ]
        hosted = http.put("/_emulator/hosted", json={"code_interpreter": [{"logs": "x"}]}, headers=JSON)
        answered = await asyncio.gather(*adds, hosted)
    assert [a.status_code for a in answered] == [201] * 12 + [200]
    assert len(threads) == 13
    assert all(name.startswith("ptc-emulator-checks") for name in threads), set(threads)
    assert len(set(threads)) <= checking.CHECK_THREADS
