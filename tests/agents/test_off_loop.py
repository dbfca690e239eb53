"""Every use of the store by an Agents API route runs in a worker thread, never on the event loop.

Creates and events in already did; a session's retrieve, the sessions' listing, its items and
turns, the start of its event stream, the loads and writes of an update and a delete, and the
agents' routes called the store on the event loop's thread: a lock held on the table, or a very
large stored session, held every client of the server while one of them waited. Checked by what
happens, not by how long: the thread each use of the store runs on (SQLite, over a data folder
written by an earlier server, so that nothing is read from memory; and PostgreSQL, shared, where
every read is of the store), and a read held in the store while health is answered meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.storage import pgpool
from ptc_emulator.emulator.storage.sql import SqlRecords
from tests.agents.agents_support import js
from tests.replicas.conftest import postgres_cluster, postgres_url  # noqa: F401 (the cluster's fixtures)
from tests.replicas.replicas_support import SECRET
from tests.support import in_process_http

BETA = {"OpenAI-Beta": "agents=v1"}
JSON = {**BETA, "content-type": "application/json"}


def _settings(data_dir: Path, store: str = "sqlite") -> Settings:
    return Settings(data_dir=data_dir, store=store, secret=SECRET, bundled_fixtures=False)


async def _idle(http: httpx.AsyncClient, sid: str) -> None:
    for _ in range(600):  # a guard: the scripted turn ends at once
        status = (await http.get(f"/v1/agents/sessions/{sid}", headers=BETA)).json()["status"]
        if status in ("idle", "failed"):
            assert status == "idle"
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"session {sid} stayed busy")


async def _made(http: httpx.AsyncClient) -> dict[str, str]:
    """An agent, and a session with one finished turn; their ids."""
    agent = await http.post("/v1/agents", headers=JSON, json={"model": "gpt-5", "name": "kept"})
    assert agent.status_code == 200, agent.text
    body = {"environment": {"type": "none"}, "agent": {"model": "gpt-5"}, "input": js('text("hi")')}
    created = await http.post("/v1/agents/sessions", headers=JSON, content=json.dumps(body))
    assert created.status_code == 200, created.text
    sid = created.json()["id"]
    await _idle(http, sid)
    turns = (await http.get(f"/v1/agents/sessions/{sid}/turns", headers=BETA)).json()["data"]
    return {"agent": agent.json()["id"], "session": sid, "turn": turns[0]["id"]}


async def _first_event(app: Any, path: str) -> tuple[int, bytes]:
    """The status of a `GET` of the event stream and its first frame, then the client leaves
    (the in-process transport would wait for the end of a live stream)."""
    sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    leave = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await leave.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await sent.put(message)

    headers = [(b"host", b"127.0.0.1"), (b"openai-beta", b"agents=v1")]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 80),
    }
    task = asyncio.ensure_future(app(scope, receive, send))
    try:
        start = await asyncio.wait_for(sent.get(), 60)  # a guard
        body = b""
        while b"\n\n" not in body:
            message = await asyncio.wait_for(sent.get(), 60)
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        return start["status"], body
    finally:
        leave.set()
        await asyncio.wait_for(task, 60)


def _routes(ids: dict[str, str]) -> dict[str, tuple[str, str, Any, int]]:
    """Each route's call: method, path, JSON body, the status it answers."""
    sid, tid, aid = ids["session"], ids["turn"], ids["agent"]
    session = f"/v1/agents/sessions/{sid}"
    return {
        "retrieve": ("GET", session, None, 200),
        "retrieve-unknown": ("GET", "/v1/agents/sessions/sess_missing", None, 404),
        "list": ("GET", "/v1/agents/sessions", None, 200),
        "items": ("GET", f"{session}/items", None, 200),
        "turns": ("GET", f"{session}/turns", None, 200),
        "turn": ("GET", f"{session}/turns/{tid}", None, 200),
        "turn-items": ("GET", f"{session}/turns/{tid}/items", None, 200),
        "events": ("STREAM", f"{session}/events", None, 200),
        "events-unknown": ("GET", "/v1/agents/sessions/sess_missing/events", None, 404),
        "update": ("POST", session, {"metadata": {"k": "v"}}, 200),
        "delete": ("DELETE", session, None, 200),
        "agent-create": ("POST", "/v1/agents", {"model": "gpt-5", "name": "other"}, 200),
        "agent-list": ("GET", "/v1/agents", None, 200),
        "agent-retrieve": ("GET", f"/v1/agents/{aid}", None, 200),
        "agent-update": ("POST", f"/v1/agents/{aid}", {"name": "renamed"}, 200),
        "agent-delete": ("DELETE", f"/v1/agents/{aid}", None, 200),
    }


async def _call(http: httpx.AsyncClient, app: Any, route: tuple[str, str, Any, int]) -> None:
    method, path, body, status = route
    if method == "STREAM":
        got, first = await _first_event(app, path)
        assert got == status and first.startswith(b"event: agent.session.idle"), first
        return
    reply = await http.request(method, path, headers=JSON if body is not None else BETA, json=body)
    assert reply.status_code == status, reply.text


ROUTES = list(_routes({"session": "s", "turn": "t", "agent": "a"}))


@contextlib.contextmanager
def _watched(monkeypatch: pytest.MonkeyPatch, record: Callable[[str], None]) -> Iterator[None]:
    """Each use of a SQLite store's records calls `record` with its name first."""
    for name in ("get", "read", "all", "heads", "put_head", "unheaded", "running", "page", "put", "delete"):
        used = getattr(SqlRecords, name)

        def watched(self: SqlRecords, *args: Any, _used: Any = used, _name: str = name, **kwargs: Any) -> Any:
            record(_name)
            return _used(self, *args, **kwargs)

        monkeypatch.setattr(SqlRecords, name, watched)
    yield


@contextlib.asynccontextmanager
async def _restarted(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Any, dict[str, str]]]:
    """A server over a data folder an earlier server wrote (an agent and a finished session),
    so that the session is read from the store, not from the harness's memory."""
    async with in_process_http(_settings(tmp_path)) as (http, _):
        ids = await _made(http)
    async with in_process_http(_settings(tmp_path)) as (http, app):
        yield http, app, ids


@pytest.mark.anyio
@pytest.mark.parametrize("name", ROUTES)
async def test_each_route_uses_the_store_in_a_worker_thread(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _restarted(tmp_path) as (http, app, ids):
        loop_thread = threading.current_thread()
        used: list[str] = []
        on_loop: list[str] = []

        def record(what: str) -> None:
            used.append(what)
            if threading.current_thread() is loop_thread:
                on_loop.append(what + ":\n" + "".join(traceback.format_stack(limit=10)))

        with _watched(monkeypatch, record):
            await _call(http, app, _routes(ids)[name])
        monkeypatch.undo()
    assert used, "the route used the store"
    assert on_loop == [], "uses of the store on the event loop's thread:\n" + "\n".join(on_loop)


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["retrieve", "list", "items", "events", "update", "delete", "agent-retrieve"])
async def test_health_is_answered_while_a_route_waits_for_the_store(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The route's read of the store is held (as a locked table would hold it) until health,
    asked meanwhile, has answered. On the event loop, the held read held health too: the hold
    gives up after a guard's time and the route goes on, health answered only after it."""
    async with _restarted(tmp_path) as (http, app, ids):
        entered = threading.Event()
        release = threading.Event()
        released: list[bool] = []

        def record(what: str) -> None:
            if what in ("get", "read", "all") and not entered.is_set():
                entered.set()
                released.append(release.wait(20))  # a guard: released at once once health answers

        with _watched(monkeypatch, record):
            call = asyncio.ensure_future(_call(http, app, _routes(ids)[name]))
            try:
                assert await asyncio.to_thread(entered.wait, 60), "the route read the store"
                health = await http.get("/_emulator/health")
                assert health.status_code == 200
                release.set()
            finally:
                release.set()
                await call
        monkeypatch.undo()
    assert released == [True], "health was answered only after the held read gave up"


@pytest.mark.anyio
async def test_no_connection_of_a_shared_database_is_used_on_the_event_loop(
    postgres_url: str,  # noqa: F811 (the cluster's fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Shared (PostgreSQL), every read of a session is of the store: each route, one after the
    other, and a connection of the database is never used on the event loop's thread."""
    on_loop: list[str] = []
    loop_thread: threading.Thread | None = None
    used = pgpool.Pool.connection

    @contextlib.contextmanager
    def watched(self: pgpool.Pool, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if threading.current_thread() is loop_thread:
            on_loop.append("".join(traceback.format_stack(limit=12)))
        with used(self, *args, **kwargs) as db:
            yield db

    async with in_process_http(_settings(tmp_path, postgres_url)) as (http, app):
        ids = await _made(http)
        loop_thread = threading.current_thread()
        monkeypatch.setattr(pgpool.Pool, "connection", watched)
        routes = _routes(ids)
        for name in ROUTES:
            if name not in ("delete", "agent-delete"):
                await _call(http, app, routes[name])
        await _call(http, app, routes["delete"])
        await _call(http, app, routes["agent-delete"])
        monkeypatch.undo()
    assert on_loop == [], "uses of a database connection on the event loop's thread:\n" + "\n".join(on_loop)
