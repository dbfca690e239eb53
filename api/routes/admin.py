"""`/_emulator/`: scenarios at run time, the request journal, reset, health.

The scenarios added here are kept in the store too (`Store.scenarios`, as they were sent), so a
server on the SQLite store has them again after a restart (`load_added`).

A caller scope (the `x-ptc-emulator-scope` header, or `?scope=`) confines every call here to
that caller's scenarios and journal entries, so tests running in parallel never see each other.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import itertools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter, ValidationError

from ptc_emulator.api.context import KEYLESS_HEALTH, SCOPE_HEADER
from ptc_emulator.emulator import jsonpieces, jsontext, messages
from ptc_emulator.emulator.checking import checked
from ptc_emulator.emulator.journal import evaluation, grouping
from ptc_emulator.emulator.model import (
    MAX_SCENARIO_JSON_VALUES,
    HostedScript,
    Scenario,
    ScenarioError,
    ScenarioRegistry,
    forget_fault_counts,
    load_scenario,
)
from ptc_emulator.emulator.responses import usage
from ptc_emulator.emulator.storage import Store, StoredScenario, ping
from ptc_emulator.emulator.wire.request import check_json

__all__ = ["load_added", "router"]

router = APIRouter(prefix="/_emulator", tags=["emulator admin"])
log = logging.getLogger("ptc_emulator")


HOSTED = "hosted_script"
"""The kind of the store's records (its `sessions` part: documents by kind and id) that keep the
hosted-tool scripts set through `PUT /_emulator/hosted`, one per scope (id: the scope, or "" for
none), so that they outlive a restart and reach every replica as added scenarios do."""


def load_added(store: Store, registry: ScenarioRegistry) -> ScenarioRegistry:
    """`registry` with the scenarios added at run time before (those the store kept), as they
    were added: after the scenario files, so they replace the files' scenarios of their names;
    and the hosted-tool scripts set at run time."""
    _set_kept_hosted(store.sessions.all(HOSTED), registry)
    return _add_kept(store.scenarios.list(), registry)


def _set_kept_hosted(documents: list[dict[str, Any]], registry: ScenarioRegistry) -> None:
    for document in documents:
        try:
            script = HostedScript.model_validate(document.get("script"), strict=False)
        except ValueError as e:  # kept by an older emulator, perhaps
            log.warning("ptc-emulator: a hosted script set at run time no longer loads: %s", e)
            continue
        registry.set_hosted(script, document.get("scope"))


def _clear_kept_hosted(store: Store, scope: str | None) -> None:
    for document in store.sessions.all(HOSTED):
        if scope is None or document.get("scope") == scope:
            store.sessions.delete(HOSTED, document.get("scope") or "")


def _add_kept(stored: list[StoredScenario], registry: ScenarioRegistry) -> ScenarioRegistry:
    for kept in stored:
        scenario = _loaded(kept)
        if scenario is not None:
            registry.add(scenario)
    return registry


def _loaded(kept: StoredScenario) -> Scenario | None:
    try:
        scenario = load_scenario(kept.document, default_name=kept.name)
    except ScenarioError as e:  # kept by an older emulator, perhaps: the others still load
        log.warning("ptc-emulator: the scenario %r added at run time no longer loads: %s", kept.name, e)
        return None
    if kept.scope is not None and scenario.scope is None:
        scenario = scenario.model_copy(update={"scope": kept.scope})
    return scenario


class _SharedReads:
    """One part's reads of the store (the scenarios, or the hosted scripts), shared by the calls at
    once: a call joins the read queued to begin once the one under way ends (it begins after the
    call, so it sees every write committed before it), or begins one; never more than one read
    under way and one queued. (Each request read every row itself: with the database slow and
    200 creates in flight, `/v1/models` waited 25-55 s behind their reads.) A read begun before
    another that was applied already is dropped, so a slow read never brings back an older state."""

    def __init__(self, read: Callable[[], Awaitable[Callable[[], None] | None]]) -> None:
        self._read_rows = read
        """Reads the rows (off the event loop); what applies them, or None when there is nothing to."""
        self._reads = itertools.count(1)
        self._last = 0
        self._under_way: asyncio.Future[None] | None = None
        self._queued: asyncio.Future[None] | None = None

    async def refresh(self) -> None:
        loop = asyncio.get_running_loop()
        queued = self._queued
        if queued is not None and queued.get_loop() is loop:
            await asyncio.shield(queued)
            return
        under_way = self._under_way
        if under_way is not None and under_way.get_loop() is loop and not under_way.done():
            self._queued = asyncio.ensure_future(self._read_after(under_way))
            await asyncio.shield(self._queued)
            return
        self._under_way = asyncio.ensure_future(self._read())
        await asyncio.shield(self._under_way)

    async def _read_after(self, before: asyncio.Future[None]) -> None:
        await asyncio.wait([before])
        self._under_way, self._queued = self._queued, None
        await self._read()

    async def _read(self) -> None:
        read = next(self._reads)
        apply = await self._read_rows()
        if read < self._last:
            return  # a read begun after this one was applied already
        self._last = read
        if apply is not None:
            apply()  # on the event loop's thread, between requests


class SharedScenarios:
    """With a store replicas share: this replica's run-time scenarios and hosted scripts made what
    the store holds, before it answers (`refresh`). The store's rows are the truth, ordered by the
    database (its last write of a (scope, name) is the one kept): whatever this replica applied
    itself, and whichever replica wrote last, each refresh makes the registry's run-time
    scenarios the rows it read. The scenarios (table `scenarios`) and the hosted scripts (rows of
    `records`) are read apart, each by the requests that use it, so a lock on one table holds up
    only the requests that read it (`refresh(hosted=False)`: `/v1/models` names the scenarios'
    models, and never waits on `records`).

    A refresh of the scenarios reads their version alone (`Scenarios.version`, one small row):
    the one it applied last, nothing more is read. Otherwise it reads every row's revision and the
    documents put since that version (`Scenarios.changes`), loads those in a worker thread, and on
    the event loop adds, replaces and removes scenarios by key, comparing no document. (Every
    refresh read, parsed and compared every document: with 20 scenarios of 1.5 MB, each create
    and `/v1/models` took 6-8 s, and the comparison on the loop held every other client over 1 s.)
    After this replica's own admin writes (`written`), which change the registry beside the store,
    the next refresh also reads again each scenario the registry holds otherwise than applied."""

    def __init__(self, store: Store, registry: ScenarioRegistry) -> None:
        self.store = store
        self.registry = registry
        self._applied: dict[tuple[str | None, str], Scenario] = {}
        """The scenario each row made here, as the registry was given it."""
        self._version = -1
        """The scenarios' version the registry was last made from (-1: none)."""
        self._written = 0
        """How many times this replica's admin API changed the registry itself (`written`)."""
        self._written_seen = 0
        """`_written` as of the read applied last."""
        self._applied_hosted: dict[str | None, tuple[Any, HostedScript]] = {}
        self._scenarios = _SharedReads(self._read_scenarios)
        self._hosted = _SharedReads(self._read_hosted)
        first = self._changes(-1, set())  # (the app's startup, on its own thread)
        if first is not None:
            self._apply_scenarios(*first, 0)
        self._apply_hosted(self._hosted_changes(store.sessions.all(HOSTED), {}))

    def written(self) -> None:
        """This replica's admin API changed the registry beside the store: the next refresh
        checks every scenario the registry holds, not the version alone."""
        self._written += 1

    async def refresh(self, hosted: bool = True) -> None:
        """Make the registry what the store holds as of this call: its scenarios, and (`hosted`)
        its hosted scripts."""
        if not hosted:
            await self._scenarios.refresh()
            return
        await asyncio.gather(self._scenarios.refresh(), self._hosted.refresh())

    async def _read_scenarios(self) -> Callable[[], None] | None:
        written = self._written
        keys = None if written == self._written_seen else self._strayed()
        changed = await asyncio.to_thread(self._changes, self._version, keys)
        if changed is None:
            return None
        return lambda: self._apply_scenarios(*changed, written)

    def _strayed(self) -> set[tuple[str | None, str]]:
        """The keys whose scenario the registry holds otherwise than this replica applied it (its
        admin API's own writes): read again whatever their revision."""
        present = self.registry.added()
        return {key for key in present.keys() | self._applied.keys() if present.get(key) is not self._applied.get(key)}

    def _changes(
        self, since: int, keys: set[tuple[str | None, str]] | None
    ) -> tuple[int, list[tuple[str | None, str, int]], dict[tuple[str | None, str], Scenario | None]] | None:
        """In a worker thread: None when the scenarios' version is still `since` (and no `keys`
        are asked for); otherwise the version, every row's key and revision, and the scenarios
        of the rows put since (and of `keys`) loaded (a scenario's check costs up to its bounds,
        which the event loop should not wait on). Their documents are freed here too."""
        scenarios = self.store.scenarios
        if keys is None and scenarios.version() == since:
            return None
        changes = scenarios.changes(since, keys or set())
        return changes.version, changes.rows, {key: _loaded(kept) for key, kept in changes.read.items()}

    def _apply_scenarios(
        self,
        version: int,
        rows: list[tuple[str | None, str, int]],
        made: dict[tuple[str | None, str], Scenario | None],
        written: int,
    ) -> None:
        """On the event loop's thread, between requests: by key and identity, no document read."""
        kept = {(scope, name) for scope, name, _ in rows}
        present = self.registry.added()
        for key in present.keys() - kept:
            self.registry.remove(key[1], key[0])
        for key in self._applied.keys() - kept:
            del self._applied[key]
        for scope, name, _ in rows:  # in the store's order: a scenario new here is added last
            scenario = made.get((scope, name))
            if scenario is not None:  # put since (a row that no longer loads leaves what was)
                self.registry.add(scenario)
                self._applied[(scope, name)] = scenario
        self._version, self._written_seen = version, written

    async def _read_hosted(self) -> Callable[[], None] | None:
        applied = dict(self._applied_hosted)
        hosted = await asyncio.to_thread(lambda: self._hosted_changes(self.store.sessions.all(HOSTED), applied))
        return lambda: self._apply_hosted(hosted)

    @staticmethod
    def _hosted_changes(
        hosted: list[dict[str, Any]], applied: dict[str | None, tuple[Any, HostedScript]]
    ) -> dict[str | None, tuple[Any, HostedScript | None] | None]:
        """In a worker thread: each scope's hosted script, None where it is the one `applied`
        holds (compared here, not on the event loop), else its document and script."""
        changes: dict[str | None, tuple[Any, HostedScript | None] | None] = {}
        for document in hosted:
            scope = document.get("scope")
            done = applied.get(scope)
            if done is not None and done[0] == document:
                changes[scope] = None
                continue
            try:
                script = HostedScript.model_validate(document.get("script"), strict=False)
            except ValueError as e:  # kept by an older emulator, perhaps
                log.warning("ptc-emulator: a hosted script set at run time no longer loads: %s", e)
                script = None
            changes[scope] = (document, script)
        return changes

    def _apply_hosted(self, hosted: dict[str | None, tuple[Any, HostedScript | None] | None]) -> None:
        scripts = self.registry.hosted_scripts()
        for scope in scripts.keys() - hosted.keys():
            self.registry.set_hosted(None, scope)
            self._applied_hosted.pop(scope, None)
        for scope, change in hosted.items():
            done = self._applied_hosted.get(scope)
            if change is None:  # the document applied before
                if done is not None and scripts.get(scope) is not done[1]:
                    self.registry.set_hosted(done[1], scope)
                continue
            document, script = change
            if script is not None:  # (one that no longer loads leaves what was)
                self.registry.set_hosted(script, scope)
                self._applied_hosted[scope] = (document, script)


async def _synced(state: Any) -> None:
    """After this replica wrote the shared store: take the store's state as seen, so that a later
    change by another replica is told apart from this one's own."""
    if state.shared is not None:
        state.shared.written()
        await state.shared.refresh()


def _scope(request: Request) -> str | None:
    return request.headers.get(SCOPE_HEADER) or request.query_params.get("scope") or None


def _stored_responses(store: Store, keyless: bool) -> int | None:
    """How many responses the store holds (0 when not asked for), or None when its database does
    not answer."""
    if keyless:
        return 0 if ping(store) else None
    bounded = getattr(store, "stored_count", None)  # a shared database's: bounded by health's wait
    if callable(bounded):
        counted = bounded()
        return int(counted) if counted is not None else None
    return store.responses.count() if ping(store) else None


class HealthChecks:
    """Health's look at the store, on threads of its own: in the worker threads every request
    shares, it queued behind the requests waiting on a database that answers nothing (a frozen
    server: each holds its thread up to `DEADLINE_S`), and with 150 of them in flight health took
    11 s, not the 2 s documented. A check under way is shared by the health requests that arrive
    meanwhile (one for the status alone, one with the count), so a load balancer asking often
    never holds more than those two threads."""

    def __init__(self) -> None:
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None
        self._running: dict[bool, asyncio.Future[int | None]] = {}

    async def stored(self, store: Store, keyless: bool) -> int | None:
        """`_stored_responses(store, keyless)`, from the check under way if there is one."""
        loop = asyncio.get_running_loop()
        running = self._running.get(keyless)
        if running is None or running.get_loop() is not loop:
            if self._threads is None:
                self._threads = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="ptc-emulator-health")
            running = self._running[keyless] = loop.run_in_executor(self._threads, _stored_responses, store, keyless)
            running.add_done_callback(lambda done: self._done(keyless, done))
        return await asyncio.shield(running)

    def _done(self, keyless: bool, done: asyncio.Future[int | None]) -> None:
        if self._running.get(keyless) is done:
            del self._running[keyless]

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=False)
            self._threads = None


@router.get("/health", response_model=None)
async def health(request: Request) -> dict[str, Any] | JSONResponse:
    """The status, the store and the sandbox's figures; asked without the key of a server started
    with `--api-key`, the status alone (200 `ok`, or 503 `unavailable`)."""
    state = request.app.state.emulator
    pool = state.pool
    # In a thread of health's own: a store's database may wait (for a shared one that does not
    # answer, or for a long write under way); the count reads the last commit, not waiting for the
    # write.
    keyless = bool(request.scope.get(KEYLESS_HEALTH))
    stored = await state.health_checks.stored(state.store, keyless)
    if stored is None:  # a shared database that does not answer
        if request.scope.get(KEYLESS_HEALTH):
            return JSONResponse({"status": "unavailable"}, 503)
        return JSONResponse({"status": "unavailable", "store": state.store.kind, "database": "unreachable"}, 503)
    if state.secret is not None and state.secret.problem is not None:  # replicas that disagree
        if request.scope.get(KEYLESS_HEALTH):
            return JSONResponse({"status": "unavailable"}, 503)
        return JSONResponse({"status": "unavailable", "store": state.store.kind, "reason": state.secret.problem}, 503)
    if request.scope.get(KEYLESS_HEALTH):  # no key (a load balancer's check): the status alone
        return {"status": "ok"}
    return {
        "status": "ok",
        "store": state.store.kind,
        **({"database": "ok"} if state.store.kind == "postgresql" else {}),
        "stored_responses": stored,
        "workers": pool.pids if pool else [],
        "sandbox_runs": pool.runs if pool else 0,
        "sandbox_crashes": pool.crashes if pool else 0,
        "sandbox_recovered": pool.recovered if pool else 0,
        "sandbox_live_hits": pool.live_hits if pool else 0,
        "sandbox_waiting": pool.waiting if pool else 0,
        "sandbox_bursts": pool.bursts if pool else 0,
        "hidden_results": state.hidden_results.size[0],
        "hidden_result_bytes": state.hidden_results.size[1],
    }


@router.get("/scenarios")
async def list_scenarios(request: Request) -> dict[str, Any]:
    """The scenarios the caller's scope sees, in matching order. Taken on the event loop (a list
    kept until one of them changes, and a copy of their uses), described in a worker thread (on
    the loop, 50,000 scenarios held every client 0.35-0.6 s)."""
    registry = request.app.state.emulator.scenarios
    held, uses = registry.listed(_scope(request))
    return {"object": "list", "data": await asyncio.to_thread(registry.described, held, uses)}


@router.post("/scenarios", status_code=201)
async def add_scenario(request: Request) -> JSONResponse:
    """Body: a scenario as JSON, or `{"yaml": "<scenario file text>", "name": optional}`.

    The caller's scope applies; a scenario without a name gets one."""
    added = await scenario_added(request.app.state.emulator, _scope(request), await request.body())
    return JSONResponse(added, 201)


async def scenario_added(state: Any, scope: str | None, body: bytes) -> dict[str, Any]:
    """`POST /_emulator/scenarios` without HTTP: the scenario of a request's `body` added in
    `scope`; what the route answers, or the `EmulatorError` it answers with. The pytest plugin
    calls it for the server it started in its own process (`testing/server.py`). The body is read
    and checked in a worker thread, whatever its size: not its size but what it holds sets the
    cost (a scenario of 20,000 turns, 2.4 MB of JSON, held the event loop 0.3 s; 16 KB of YAML
    0.8 s; the templates' constant expressions and RE2's compile of its patterns each up to their
    own bounds), and the hop costs less than a tenth of a millisecond. The threads are the checking
    threads (`emulator/checking.py`): adds sent at once queue behind each other there, never
    filling the worker threads every request shares."""
    scenario, document = await checked(_scenario_of, scope, body)  # queued behind other adds
    if not state.scenarios.has_room(scenario.scope, scenario.name):
        raise messages.too_many_scenarios(state.scenarios.most_added())
    if not state.scenarios.has_bytes(scenario.scope, scenario.name, len(body)):
        raise messages.scenarios_too_large(state.scenarios.most_added_bytes())
    # The store's writes in a worker thread: a shared database may be slow, and on the loop every
    # client waited on them.
    # Its faults fail afresh: their counts forgotten first (again, if retried), so a 503 of either
    # write leaves the scenario as it was (the scenario's write last; before, it came first, and
    # a 503 of the counts' write was answered over a scenario added on every replica).
    await asyncio.to_thread(forget_fault_counts, state.store.counts, scenario.scope, scenario.name)
    await asyncio.to_thread(state.store.scenarios.put, StoredScenario(scenario.scope, scenario.name, document))
    if not state.scenarios.has_room(scenario.scope, scenario.name):  # adds at once took the last room
        await asyncio.to_thread(state.store.scenarios.delete, scenario.scope, scenario.name)
        raise messages.too_many_scenarios(state.scenarios.most_added())
    if not state.scenarios.has_bytes(scenario.scope, scenario.name, len(body)):
        await asyncio.to_thread(state.store.scenarios.delete, scenario.scope, scenario.name)
        raise messages.scenarios_too_large(state.scenarios.most_added_bytes())
    state.scenarios.add(scenario, size=len(body))
    await _synced(state)
    return {"name": scenario.name, "scope": scenario.scope, "turns": len(scenario.turns)}


def _scenario_of(scope: str | None, body: bytes) -> tuple[Scenario, Any]:
    """The scenario a body adds in `scope`, and the document the store keeps (as sent)."""
    try:
        # a long body a piece at a time, as `/v1/responses` bodies are (`jsonpieces`)
        data = jsontext.loads_in_pieces(body, max_values=MAX_SCENARIO_JSON_VALUES)
    except jsontext.TooDeep as e:
        raise messages.scenario_body_refused(e.msg) from e
    except jsontext.TooMany as e:
        raise messages.scenario_body_refused(messages.scenario_json_too_many_values(MAX_SCENARIO_JSON_VALUES)) from e
    except ValueError as e:
        raise messages.scenario_body_not_json() from e
    try:
        check_json(data)  # lone surrogates and NaN: refused now, not when a response carries them
    except ValueError as e:
        raise messages.scenario_body_refused(str(e)) from e
    name = f"scenario-{uuid.uuid4().hex[:8]}"
    if isinstance(data, dict) and "yaml" in data and set(data) <= {"yaml", "name"}:
        name = data.get("name") or name
        data = data["yaml"]
        if not isinstance(data, str):
            raise messages.scenario_yaml_not_text()
    document = copy.deepcopy(data)  # what the store keeps, as sent
    try:
        scenario = load_scenario(data, default_name=name)
    except ScenarioError as e:
        raise messages.invalid_scenario(str(e)) from e
    if scope is not None and scenario.scope is None:
        scenario = scenario.model_copy(update={"scope": scope})
    return scenario, document


@router.put("/hosted")
async def set_hosted(request: Request) -> dict[str, Any]:
    """Body: results for the tools that run on OpenAI's side (a scenario's `hosted:` section), used by
    inline programs and by scenarios that script none; `{}` or DELETE removes them."""
    data, script = await checked(_hosted_of, await request.body())
    state, scope = request.app.state.emulator, _scope(request)
    await asyncio.to_thread(state.store.sessions.put, HOSTED, scope or "", {"scope": scope, "script": data})
    state.scenarios.set_hosted(script, scope)
    await _synced(state)
    return {"scope": _scope(request), "mcp_servers": sorted(script.mcp_servers)}


def _hosted_of(body: bytes) -> tuple[Any, HostedScript]:
    """The document a `PUT /_emulator/hosted` body sets and its script, read in a worker thread
    (its patterns are compiled by RE2 as it is checked)."""
    try:
        data = jsontext.loads(body)
        # lone surrogates and NaN: refused now, not when each response that uses them is a 500
        check_json(data)
        script = HostedScript.model_validate(data, strict=False)
    except jsontext.TooDeep as e:
        raise messages.invalid_hosted_script(e.msg) from e
    except ValidationError as e:  # its first error, by field, as a scenario's is said
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "hosted"
        raise messages.invalid_hosted_field(where, first["msg"]) from e
    except ValueError as e:
        raise messages.invalid_hosted_script(str(e)) from e
    return data, script


@router.delete("/hosted")
async def delete_hosted(request: Request) -> dict[str, Any]:
    state = request.app.state.emulator
    await asyncio.to_thread(state.store.sessions.delete, HOSTED, _scope(request) or "")
    state.scenarios.set_hosted(None, _scope(request))
    await _synced(state)
    return {"scope": _scope(request), "deleted": True}


@router.delete("/scenarios/{name}")
async def delete_scenario(name: str, request: Request) -> dict[str, Any]:
    state = request.app.state.emulator
    # added again, its faults fail afresh: the counts forgotten first, the scenario's write last
    await asyncio.to_thread(forget_fault_counts, state.store.counts, _scope(request), name)
    await asyncio.to_thread(state.store.scenarios.delete, _scope(request), name)
    removed = state.scenarios.remove(name, _scope(request))
    await _synced(state)
    if not removed:
        raise messages.scenario_not_found(name)
    return {"name": name, "deleted": True}


_ANY = TypeAdapter(Any)


@router.get("/journal", response_model=dict[str, Any])
async def read_journal(request: Request) -> Response:
    """`{"object": "list", "data": [entries]}`. A full journal is 64 MiB of bodies: the entries are
    read on the event loop, parsed, labelled and written out in a worker thread (on the loop,
    health waited 0.5-0.65 s for it)."""
    kept = await asyncio.to_thread(request.app.state.emulator.journal.entries, _scope(request))
    return Response(await asyncio.to_thread(_journal_text, kept), media_type="application/json")


def _journal_text(kept: list[Any]) -> bytes:
    """The bytes FastAPI wrote for the returned dict (pydantic's JSON of `dict[str, Any]`), an
    entry at a time: one call for the whole text held the interpreter, the loop included, for as
    long as it lasted. Between two entries the other threads run (`jsonpieces.between`)."""
    pieces = []
    for n, entry in enumerate(grouping.label(e.as_dict() for e in kept)):
        if n:
            jsonpieces.between()
        pieces.append(_ANY.dump_json(entry))
    return b'{"object":"list","data":[' + b",".join(pieces) + b"]}"


@router.get("/journal/conversations")
async def journal_conversations(request: Request) -> dict[str, Any]:
    """The journal's figures per conversation (one run of a task), oldest first. Worked out in a
    worker thread, as the journal is (every entry's bodies are parsed)."""
    kept = await asyncio.to_thread(request.app.state.emulator.journal.entries, _scope(request))
    data = await asyncio.to_thread(lambda: evaluation.conversations([e.as_dict() for e in kept]))
    return {"object": "list", "data": data}


@router.get("/journal/compare")
async def journal_compare(request: Request, direct: str | None = None, ptc: str | None = None) -> dict[str, Any]:
    """A direct-calling run and a programmatic run of the same task compared, as the guide's
    "Evaluate" section asks. `direct` and `ptc` name a conversation or any response in it;
    left out, the latest run without programs and the latest with. In a worker thread."""
    kept = await asyncio.to_thread(request.app.state.emulator.journal.entries, _scope(request))
    compared: dict[str, Any] = await asyncio.to_thread(
        lambda: evaluation.compare([e.as_dict() for e in kept], direct=direct, ptc=ptc)
    )
    return compared


@router.delete("/journal")
async def clear_journal(request: Request) -> dict[str, Any]:
    cleared = await asyncio.to_thread(request.app.state.emulator.journal.clear, _scope(request))
    usage.clear_cache()  # the token counts of what the journal held are not needed any more
    return {"cleared": cleared}


@router.post("/reset")
async def reset(request: Request) -> dict[str, Any]:
    """Forget the scenarios added at run time and the journal (of the caller's scope, or all), and
    free every cache of the process (docs/limits.md, "Memory": they only save work, so no answer
    changes), the hidden call results kept for retries among them (all of them)."""
    state = request.app.state.emulator
    removed, cleared = await _forget(state, _scope(request))
    await state.caches.clear()  # every cache the app and the process hold (`emulator/caches.py`)
    return {"scenarios_removed": removed, "journal_cleared": cleared}


async def _forget(state: Any, scope: str | None) -> tuple[int, int]:
    """The scenarios and hosted scripts added at run time and the journal, of `scope` (or all),
    forgotten: how many scenarios and journal entries went."""
    # The scenario files are read again: an edited, added or removed file is served from now on
    # (a file that cannot be used leaves the previous ones, and the log says why).
    if state.scenario_files is not None:
        await state.scenario_files.recheck()
    # fail afresh: the counts forgotten first, so a 503 there leaves the scenarios as they were
    await asyncio.to_thread(forget_fault_counts, state.store.counts, scope, every=scope is None)
    await asyncio.to_thread(state.store.scenarios.clear, scope)
    await asyncio.to_thread(_clear_kept_hosted, state.store, scope)
    dropped: list[Any] = []
    removed = state.scenarios.clear(scope, dropped)
    await asyncio.to_thread(dropped.clear)  # the scenarios freed there, not on the event loop
    cleared = await asyncio.to_thread(state.journal.clear, scope)
    if state.engine is not None and scope is not None:  # what a scope's prompts are served is state
        state.engine.prompt_cache.forget(scope)
    elif state.engine is not None:
        state.engine.prompt_cache.clear()
    await _synced(state)
    return removed, cleared


@router.post("/end")
async def end(request: Request, unmatched: bool = True, unused: bool = True) -> dict[str, Any]:
    """The end of a test in the caller's scope, in one call (the pytest plugin's teardown). The
    checks asked for: `unmatched`, no request of the scope matched no scenario; `unused`, every
    scenario added in the scope answered a request. When they pass, the scope is forgotten as
    `POST /reset` forgets it, but the process's caches stay (they only save work, and the next
    test wants the same templates, patterns and schemas); `ended` is true. When one fails, nothing
    is forgotten (the caller reads the journal to say what happened) and `ended` is false, with
    `unmatched` (how many requests) and `unused` (the scenarios' names)."""
    return await scope_ended(request.app.state.emulator, _scope(request), unmatched=unmatched, unused=unused)


async def scope_ended(state: Any, scope: str | None, *, unmatched: bool, unused: bool) -> dict[str, Any]:
    """`POST /_emulator/end` without HTTP: what the route answers (the pytest plugin calls it for
    the server it started in its own process, `testing/server.py`)."""
    entries = await asyncio.to_thread(state.journal.entries, scope) if unmatched or unused else []
    missed = sum(1 for e in entries if e.near_miss is not None) if unmatched else 0
    never: list[str] = []
    if unused:
        # the scope's own scenarios only: an empty scope's end costs nothing however many others hold
        never = state.scenarios.unused(scope, {e.scenario for e in entries if e.scenario is not None})
    if missed or never:
        return {"ended": False, "unmatched": missed, "unused": never}
    removed, cleared = await _forget(state, scope)
    return {"ended": True, "unmatched": 0, "unused": [], "scenarios_removed": removed, "journal_cleared": cleared}
