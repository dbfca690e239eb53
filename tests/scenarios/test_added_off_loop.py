"""A scenario (JSON or YAML) and a hosted script are read and checked in a worker thread, however
short their body. Before, a body under 16 KiB was checked on the event loop, and its size does not
bound the cost: 850 bytes of `{{[0]*100000}}` templates held every other client 3.7 s while their
constants were folded, 16 KB of YAML 0.5-0.9 s, a history pattern RE2 compiled 0.3 s each. No
clock: the thread each check runs on is recorded, and must not be the event loop's.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.routes import admin
from ptc_emulator.api.settings import Settings

JSON = {"content-type": "application/json"}
pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def app_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=tmp_path, pool_size=1, bundled_fixtures=False))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=120) as http:
            yield http


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, threading.Thread]]:
    """The threads a scenario's load and a body's JSON check ran on, as the route calls them."""
    seen: list[tuple[str, threading.Thread]] = []
    for name in ("load_scenario", "check_json"):
        real = getattr(admin, name)

        def noted(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
            seen.append((_name, threading.current_thread()))
            return _real(*args, **kwargs)

        monkeypatch.setattr(admin, name, noted)
    return seen


@pytest.mark.parametrize(
    "body",
    [
        {"name": "t", "match": {"input": "^never$"}, "turns": [{"message": "{{ [0] * 10 }}"}]},
        {"name": "y", "yaml": "match: {input: '^never$'}\nturns: [{message: hi}]\n"},
    ],
    ids=["json", "yaml"],
)
async def test_a_short_scenario_is_checked_off_the_event_loop(
    tmp_path: Path, threads: list[tuple[str, threading.Thread]], body: dict[str, Any]
) -> None:
    loop_thread = threading.current_thread()
    async with app_client(tmp_path) as http:
        added = await http.post("/_emulator/scenarios", json=body, headers=JSON)
        assert added.status_code == 201, added.text
    assert {name for name, _ in threads} == {"load_scenario", "check_json"}
    on_loop = [name for name, thread in threads if thread is loop_thread]
    assert not on_loop, f"checked on the event loop: {on_loop}"


async def test_a_hosted_script_is_checked_off_the_event_loop(
    tmp_path: Path, threads: list[tuple[str, threading.Thread]]
) -> None:
    loop_thread = threading.current_thread()
    async with app_client(tmp_path) as http:
        script = {"code_interpreter": [{"code": "(a|b)*c", "logs": "x"}]}
        put = await http.put("/_emulator/hosted", json=script, headers=JSON)
        assert put.status_code == 200, put.text
    assert [name for name, _ in threads] == ["check_json"]
    assert threads[0][1] is not loop_thread, "the hosted script was checked on the event loop"
