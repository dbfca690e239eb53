"""`POST /_emulator/reset` clears every cache the app and the process hold, through one call (the
app's registry, `emulator/caches.py`), and a cache nothing registers fails here: every cache an
app holds is found by walking its state, every memo and cache a module keeps by reading the
modules, and every class that evicts the least recently used is a cache or named below with why
it is not. `DELETE /_emulator/journal` frees the token counts of what the journal held. The
conversation cursors are bounded by the bytes they keep, not only by their count."""

from __future__ import annotations

import collections
import gc
import importlib
import inspect
import json
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.caches import PROCESS, Cache, Caches, Memo
from ptc_emulator.emulator.responses import usage
from ptc_emulator.emulator.wire.items import Message
from tests.support import ADD_TOOL, in_process_http, js

pytestmark = pytest.mark.anyio
JSON = {"content-type": "application/json"}
TOOLS: list[dict[str, Any]] = [ADD_TOOL, {"type": "programmatic_tool_calling"}]
PAUSING = js("const r = await tools.add({a: 1, b: 2});\ntext('r=' + r)")

CONSTANT_MEMOS = {
    "ptc_emulator.emulator.model.scripted.walk._kind_of_type": "by item class: as many entries as the code has",
    "ptc_emulator.emulator.responses.usage._may_have_caller": "by item class: as many entries as the code has",
    "ptc_emulator.emulator.storage.sql.Statements.of": "by SQL dialect: as many entries as the code has",
    "ptc_emulator.emulator.storage.sql.page_statements": "by dialect, agent filter or not, filter pairs (at most 16) "
    "and order: a few hundred entries at most",
}
"""Memos that are not caches of what requests send (a memo of a function without parameters is
one value made from the code, and is not listed)."""

NOT_CACHES = {
    "ptc_emulator.emulator.model.scripted.faults.FaultInjector": "how often a fault fired decides the next answer",
    "ptc_emulator.emulator.model.scripted.recording.Tape": "record mode: what it followed decides what is recorded",
    "ptc_emulator.emulator.model.scripted.recorder.Recorder": "record mode: what a later terminal event may withdraw",
    "ptc_emulator.api.proxy.RecordingProxy": "record mode: the upstream's ids decide where a request goes",
    "ptc_emulator.emulator.storage.memory.MemoryCounts": "a fault's `times`: a count forgotten would fire it again",
    "ptc_emulator.sandbox._live.LiveCache": "a worker's live programs, cleared by the pool (`live programs`)",
}
"""Classes that evict the least recently used but are state, not caches, or caches the registry
reaches through their owner; each says why."""


ROOMS = ("ptc_emulator.api", "ptc_emulator.emulator", "ptc_emulator.sandbox", "ptc_emulator.testing")
"""The packages under the root (each maps a folder of its own: `pkgutil` walks each)."""


def _modules() -> Iterator[Any]:
    yield importlib.import_module("ptc_emulator.names")
    for room in ROOMS:
        package = importlib.import_module(room)
        yield package
        for found in pkgutil.walk_packages(package.__path__, room + "."):
            yield importlib.import_module(found.name)


def _memos(module: Any) -> Iterator[tuple[str, Any]]:
    """(qualified name, wrapper) of every functools memo a module defines, its classes' included."""
    for name, value in vars(module).items():
        if hasattr(value, "cache_info") and getattr(value, "__module__", None) == module.__name__:
            yield f"{module.__name__}.{name}", value
        if inspect.isclass(value) and value.__module__ == module.__name__:
            for attribute, member in vars(value).items():
                member = getattr(member, "__func__", member)
                if hasattr(member, "cache_info"):
                    yield f"{module.__name__}.{name}.{attribute}", member


def test_every_memo_and_cache_a_module_keeps_is_registered() -> None:
    modules = list(_modules())  # imported first: a module registers its caches as it is imported
    memos = {id(cache.function) for _, cache in PROCESS if isinstance(cache, Memo)}
    unregistered = []
    for module in modules:
        for name, memo in _memos(module):
            constant = not inspect.signature(memo.__wrapped__).parameters
            if id(memo) not in memos and not constant and name not in CONSTANT_MEMOS:
                unregistered.append(name)
        for name, value in vars(module).items():
            if isinstance(value, Cache) and value not in PROCESS:
                unregistered.append(f"{module.__name__}.{name}")
    assert unregistered == [], "register them in `caches.PROCESS`, or say in CONSTANT_MEMOS why they are not caches"
    assert all(memo.function.cache_info().maxsize is not None for _, memo in PROCESS if isinstance(memo, Memo))


def test_every_class_that_evicts_the_least_recently_used_is_a_cache() -> None:
    found = []
    for module in _modules():
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                if "popitem(last=False)" in inspect.getsource(value) and not issubclass(value, Cache):
                    found.append(f"{module.__name__}.{name}")
    assert sorted(found) == sorted(NOT_CACHES)


def _caches_held(root: Any) -> list[Cache]:
    """Every `Cache` reachable from `root` through containers and the project's own objects."""
    seen: set[int] = set()
    found: list[Cache] = []
    queue = collections.deque([root])
    containers = (dict, list, tuple, set, frozenset, collections.OrderedDict, collections.deque)
    while queue:
        obj = queue.popleft()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Cache):
            found.append(obj)
        if isinstance(obj, type) or inspect.isroutine(obj) or inspect.ismodule(obj):
            continue
        if isinstance(obj, containers) or type(obj).__module__.startswith("ptc_emulator."):
            queue.extend(gc.get_referents(obj))
    return found


@pytest.mark.parametrize(("method", "path"), [("POST", "/_emulator/reset"), ("DELETE", "/_emulator/journal")])
async def test_reset_and_clearing_the_journal_free_the_token_cache(tmp_path: Path, method: str, path: str) -> None:
    app = create_app(Settings(data_dir=tmp_path, store="memory", pool_size=1, bundled_fixtures=False))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=120) as http:
            usage.clear_cache()
            big = "word " * 20_000
            reply = await http.post("/v1/responses/input_tokens", json={"model": "m", "input": big}, headers=JSON)
            assert reply.status_code == 200, reply.text[:300]
            assert usage.cached_chars() >= len(big)
            cleared = await http.request(method, path, headers=JSON)
            assert cleared.status_code == 200, cleared.text[:300]
            assert usage.cached_chars() == 0


def _big_messages(marker: str) -> int:
    """Message models alive in this process whose text holds `marker`."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Message) and marker in o.text())


def text(response: dict[str, Any]) -> str:
    message = [o for o in response["output"] if o["type"] == "message"][-1]
    return str(message["content"][0]["text"])


async def _post(http: httpx.AsyncClient, body: dict[str, Any], path: str = "/v1/responses") -> dict[str, Any]:
    reply = await http.post(path, content=json.dumps(body), headers=JSON)
    assert reply.status_code == 200, reply.text[:300]
    result: dict[str, Any] = reply.json()
    return result


FILLED = {
    "token counts",
    "output verdicts",
    "output schemas",
    "inline blocks' turns",
    "sandbox: programs' keys",
    "sandbox: limits as JSON",
    "opened fingerprints",
    "derived call ids",
    "replayed bodies",
    "stored items",
    "chains",
    "prompt cache",
    "compaction windows",
    "live programs",
}
"""The caches the conversations below fill (the rest need MCP servers, grammars or patterns)."""


async def test_the_cursors_are_bounded_by_bytes_and_reset_clears_every_cache(tmp_path: Path) -> None:
    # With the live cache on whatever PTC_EMULATOR_LIVE_CACHE says: the program-key memo it
    # checks is filled only for the live cache.
    settings = Settings(data_dir=tmp_path, store="memory", pool_size=1, bundled_fixtures=False, live_cache=64)
    async with in_process_http(settings) as (http, app):
        state = app.state.emulator
        registry: Caches = state.caches
        bodies = state.engine.history.bodies
        bodies.max_bytes = 40 * 2**20
        marker = "BIG-" * 250_000  # a megabyte of text in each request's first message
        for n in range(12):
            items = [{"role": "user", "content": f"{n} {marker}"}, {"role": "user", "content": js("text('ok')")}]
            await _post(http, {"model": "m", "input": items, "tools": TOOLS, "store": False})
        # Twelve conversations, each kept with its cursor; the bytes (9 MB a body) let at most
        # four stay alive.
        alive = _big_messages(marker)
        assert 1 <= alive <= 4, alive
        assert bodies.bytes <= bodies.max_bytes

        # Something in every cache: a paused program resumed (`store: false`, a body over the
        # body reader's minimum), a stored response continued, a compaction item replayed.
        padding = {"role": "user", "content": "pad " * 2000}
        history: list[Any] = [padding, {"role": "user", "content": PAUSING}]
        first = await _post(http, {"model": "m", "input": history, "tools": TOOLS, "store": False})
        call = next(o for o in first["output"] if o["type"] == "function_call")
        answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "3", "caller": call["caller"]}
        history = [*history, *first["output"], answer]
        await _post(http, {"model": "m", "input": history, "tools": TOOLS, "store": False})
        stored = await _post(http, {"model": "m", "input": PAUSING, "tools": TOOLS})
        call = next(o for o in stored["output"] if o["type"] == "function_call")
        answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "3", "caller": call["caller"]}
        after = stored["id"]
        done = await _post(http, {"model": "m", "input": [answer], "tools": TOOLS, "previous_response_id": after})
        await _post(http, {"model": "m", "input": js("text('again')"), "previous_response_id": done["id"]})
        compacted = await _post(http, {"model": "m", "input": "remember this"}, "/v1/responses/compact")
        then = [*compacted["output"], {"role": "user", "content": js("text('later')")}]
        await _post(http, {"model": "m", "input": then, "store": False})
        await _post(http, {"model": "m", "input": PAUSING, "tools": TOOLS, "store": False})  # left paused, live

        held = _caches_held(state)
        assert {id(state.engine.history.chains), id(state.signer.call_ids), id(state.hidden_results)} <= set(
            map(id, held)
        )
        assert [c for c in held if c not in registry] == [], "a cache the app holds that reset does not clear"
        sizes = registry.sizes()
        assert {name for name, size in sizes.items() if size} >= FILLED, sizes

        reply = await http.post("/_emulator/reset", headers=JSON)
        assert reply.status_code == 200, reply.text[:300]
        assert {name: size for name, size in registry.sizes().items() if size} == {}
        assert all(len(cache) == 0 for cache in held)
        assert bodies.bytes == 0 and state.engine.history.chains.bytes == 0 and usage.cached_chars() == 0
        assert _big_messages(marker) == 0


async def test_reset_closes_the_live_programs(tmp_path: Path) -> None:
    """A suspended program kept live in its worker holds its heap and its data: reset closes it,
    and its resume replays to the same result."""
    settings = Settings(data_dir=tmp_path, store="memory", pool_size=1, bundled_fixtures=False, live_cache=64)
    async with in_process_http(settings) as (http, app):
        pool = app.state.emulator.pool

        async def paused() -> list[Any]:
            first = await _post(http, {"model": "m", "input": PAUSING, "tools": TOOLS, "store": False})
            call = next(o for o in first["output"] if o["type"] == "function_call")
            output = {"type": "function_call_output", "call_id": call["call_id"], "output": "3"}
            return [{"role": "user", "content": PAUSING}, *first["output"], {**output, "caller": call["caller"]}]

        hits = pool.live_hits
        done = await _post(http, {"model": "m", "input": await paused(), "tools": TOOLS, "store": False})
        assert pool.live_hits == hits + 1  # kept live: resumed without a replay
        items = await paused()
        reply = await http.post("/_emulator/reset", headers=JSON)
        assert reply.status_code == 200, reply.text[:300]
        again = await _post(http, {"model": "m", "input": items, "tools": TOOLS, "store": False})
        assert pool.live_hits == hits + 1  # closed by the reset: replayed
        assert text(again) == text(done) == "r=3"
