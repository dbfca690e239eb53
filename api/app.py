"""The FastAPI application: wiring of settings, store, scenarios, sandbox pool and engine."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException

from ptc_emulator import __version__
from ptc_emulator.api import errors, guards, inspector, scopes
from ptc_emulator.api.context import HEALTH_PATH, KEYLESS_HEALTH
from ptc_emulator.api.journaling import RequestLog
from ptc_emulator.api.replicas import OneSecret, SecretMismatch
from ptc_emulator.api.routes import admin, agents, conversations, models, websocket
from ptc_emulator.api.routes import responses as routes
from ptc_emulator.api.settings import Settings, bundled_fixtures, sealed_budget
from ptc_emulator.api.workers import Workers
from ptc_emulator.emulator import collector, messages
from ptc_emulator.emulator.agents.harness import Harness
from ptc_emulator.emulator.caches import PROCESS, Caches
from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.ids import new_id
from ptc_emulator.emulator.journal.entries import Journal
from ptc_emulator.emulator.model import (
    Fallback,
    HiddenResults,
    Runtime,
    ScenarioFiles,
    ScenarioRegistry,
    ScriptedModel,
    with_upstream,
)
from ptc_emulator.emulator.responses import usage
from ptc_emulator.emulator.responses.engine import Engine, Runner
from ptc_emulator.emulator.rules import contract
from ptc_emulator.emulator.signing import Signer, load_secret
from ptc_emulator.emulator.storage import Store, StoreUnavailable, open_store, view
from ptc_emulator.emulator.tools import mcp_child
from ptc_emulator.emulator.tools.egress import OwnAddresses
from ptc_emulator.sandbox import Pool, PoolConfig

WORKER_THREADS = 64
"""The server's worker threads (its event loop's default executor): enough that a few requests
with long work in them never hold the others' short hops (a store write, a read) behind them."""

__all__ = ["AppState", "create_app"]

log = logging.getLogger("ptc_emulator")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class AppState:
    settings: Settings
    store: Store
    """Every part of the state a second server process would share (see `emulator/storage`)."""
    signer: Signer
    scenarios: ScenarioRegistry
    journal: Journal = field(default_factory=Journal)
    engine: Engine | None = None
    pool: Pool | None = None
    proxy: Any = None
    """The recording proxy (`proxy.RecordingProxy`), when recording."""
    agents: Harness | None = None
    """The Agents API harness, made when the lifespan starts."""
    shared: Any = None
    """With a store replicas share: what keeps the registry in step with it (`admin.SharedScenarios`)."""
    hidden_results: HiddenResults = field(default_factory=HiddenResults)
    """Hidden call results kept for retries (`model/runtime/hidden_results.py`): a cache."""
    caches: Caches = field(default_factory=lambda: Caches(PROCESS))
    """Every cache the app and the process hold: `POST /_emulator/reset` clears them all."""
    own: OwnAddresses = field(default_factory=OwnAddresses)
    """The ports this app serves on: the MCP client never connects there."""
    scenario_files: ScenarioFiles | None = None
    """The scenario directories `scenarios` was loaded from (reloaded by --watch and reset)."""
    started_at: int = field(default_factory=lambda: int(time.time()))
    """When the app was made: the `created` of the models `GET /v1/models` lists."""
    secret: OneSecret | None = None
    """With a store replicas share: this replica's share of their one secret (`api/replicas.py`)."""
    health_checks: admin.HealthChecks = field(default_factory=lambda: admin.HealthChecks())
    """Health's look at the store, on threads of its own (`admin.HealthChecks`)."""
    warming: asyncio.Future[Any] | None = None
    """The tokenizer's load and the checkers' import, begun as the lifespan starts: a request waits
    for them at the edge (`_Edge`) until they are done."""


def _load_scenarios(settings: Settings) -> ScenarioFiles:
    """The scenario directories, loaded (`files.load` refuses a missing one, a bad file, a duplicate name)."""
    # The demos only when asked, and never beside recordings: recording, they would answer in the real
    # model's place; replaying, a question nothing recorded would get a demo's 200 instead of the 400.
    bundled = settings.bundled_fixtures and settings.record_dir is None
    directories = ([bundled_fixtures()] if bundled else []) + list(settings.fixtures)
    labels = (["bundled"] if bundled else []) + [""] * len(settings.fixtures)
    if settings.record_dir is not None and settings.record_dir.is_dir():
        directories.append(settings.record_dir)  # the recordings replay
        labels.append("recordings")
    return ScenarioFiles(ScenarioRegistry(), directories, labels).load()


def create_app(settings: Settings | None = None, *, runner: Runner | None = None) -> FastAPI:
    """The app for `settings`. With `runner`, programs run there instead of in a new worker pool."""
    settings = settings or Settings()
    files = _load_scenarios(settings)
    store = open_store(settings.store, settings.data_dir)
    state = AppState(
        settings=settings,
        store=store,
        signer=Signer(load_secret(settings.secret, settings.data_dir if settings.store == "sqlite" else None)),
        scenarios=admin.load_added(store, files.registry),
        scenario_files=files,
        journal=Journal(log=store.journal),
        hidden_results=HiddenResults(settings.mcp_memo_entries, settings.mcp_memo_bytes),
    )
    if store.shared:
        state.secret = _one_secret(state)
    state.caches = _caches(state)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The worker threads every `asyncio.to_thread` runs in (store writes, long reads, checks of
        # large schemas): asyncio's default of min(32, cores + 4), six on two cores, let six
        # requests with seconds of work each hold every other client's store write behind them.
        # A thread waiting for its part's turn of the database's connections is lent a spare
        # (`Workers`): more waiters than threads left none for the other parts' requests.
        asyncio.get_running_loop().set_default_executor(Workers(WORKER_THREADS))
        pool = None
        sandbox_runner = runner
        if sandbox_runner is None:
            pool = Pool(
                PoolConfig(
                    size=settings.pool_size,
                    spare_contexts=settings.spare_contexts,
                    live_cache=settings.live_cache,
                    max_jobs_per_worker=settings.max_jobs_per_worker,
                    heap_bytes=settings.limits.heap_bytes,
                )
            )
            await pool.start()
            sandbox_runner = pool
        # The tokenizer loads in a thread, and the schema and grammar checkers' modules are
        # imported in another: done on the event loop by the first request that needs them, they
        # held every client for 0.3 s or more. They start once the pool's workers have started
        # (both hold the interpreter for up to a fifth of a second at a time, which kept the
        # event loop from hearing the workers were ready), and the server is ready without
        # waiting for them: a request waits for both at the edge (`_Edge`) while they are still
        # loading, so every request is answered as before.
        tokenizer = asyncio.ensure_future(asyncio.to_thread(usage.encoding))
        checkers = asyncio.ensure_future(asyncio.to_thread(contract.import_checkers))
        warming = state.warming = asyncio.gather(tokenizer, checkers)
        state.pool = pool
        runtime = Runtime(
            signer=state.signer,
            limits=settings.limits,
            ids=new_id,
            seeds=lambda: secrets.randbits(128),
            clock=time.time,
            mcp=settings.mcp_policy,
            hidden_results=state.hidden_results,
            max_sealed_bytes=sealed_budget(settings),
        )
        model = ScriptedModel(
            state.scenarios, runtime, strict_contract=settings.strict_contract, fault_counts=state.store.counts
        )
        record = settings.record_dir if settings.record_mode != "none" else None
        playing = with_upstream(model, settings.model_upstream_config(), record=record)  # docs/any-model.md
        state.engine = Engine(
            runner=sandbox_runner,
            store=view(state.store),
            signer=state.signer,
            model=playing,
            limits=settings.limits,
            strict_contract=settings.strict_contract,
        )
        state.caches = _caches(state)
        if state.store.shared:  # replicas share the store: background responses run under leases
            background = state.engine.background
            background.share(state.store.leases, settings.lease_s, state.engine.cancelled, state.store.events)
        harness = state.agents = agents.open_harness(state)
        if state.shared is not None:  # a drive's steps play what the store holds (no request refreshed them)
            harness.refresh_scenarios = state.shared.refresh
        watching = (
            asyncio.create_task(_watch(state.scenario_files)) if settings.watch and state.scenario_files else None
        )
        renewing = asyncio.create_task(state.secret.keep()) if state.secret is not None else None
        await _routes_ready(app)
        mcp_child.enter()  # the MCP client's process starts with the first live listing, if any
        try:
            yield
        finally:
            if watching is not None:
                watching.cancel()
            if renewing is not None:
                renewing.cancel()
            state.own.release()
            await harness.aclose()
            await state.engine.aclose()
            if isinstance(playing, Fallback):
                await playing.aclose()
            if state.proxy is not None:
                await state.proxy.aclose()
            if pool is not None:
                await pool.close()
            await mcp_child.leave()
            await asyncio.gather(warming, return_exceptions=True)  # (its threads cannot be stopped)
            state.health_checks.close()
            state.store.close()

    app = FastAPI(
        title="ptc-emulator",
        summary="A local stand-in for OpenAI's Responses API with Programmatic Tool Calling.",
        version=__version__,
        lifespan=lifespan,
        # Swagger UI and ReDoc load their scripts from a CDN, which an offline test machine cannot
        # reach; the schema stays at /openapi.json.
        docs_url=None,
        redoc_url=None,
    )
    app.state.emulator = state
    errors.install(app)
    app.include_router(routes.router)
    app.include_router(conversations.router)
    app.include_router(admin.router)
    app.include_router(inspector.router)
    app.include_router(inspector.root_router)
    app.include_router(websocket.router)
    app.include_router(agents.router)
    app.include_router(models.router)
    app.router.default = _no_route(app.router.default)
    if settings.recording:
        _record(app, state)
    if store.shared:
        state.shared = admin.SharedScenarios(store, state.scenarios)
        app.add_middleware(_Shared, shared=state.shared)
    app.add_middleware(_Edge, settings=settings, own=state.own, state=state)
    app.add_middleware(RequestLog)  # outermost: the edge's refusals have their line too
    return app


def _no_route(not_found: ASGIApp) -> ASGIApp:
    """The router's answer to a path no route has: for a WebSocket upgrade the 404 a plain GET of
    that path gets, in OpenAI's envelope (Starlette closes the socket, which uvicorn answers with
    a 403 and no body)."""

    async def no_route(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await _reject(scope, receive, send, messages.invalid_url("GET", scope.get("path", "")))
            return
        await not_found(scope, receive, send)

    return no_route


async def _routes_ready(app: FastAPI) -> None:
    """Have the router set its routes up now: FastAPI builds every route's state (its parameters'
    validators) on the first request it matches, 15-20 ms of the event loop's CPU in which that
    first client, and every other, waited. A request for a path no route has, sent to the router
    alone (no middleware, no handler, nothing logged), matches against them all."""
    scope: dict[str, Any] = {"type": "http", "method": "GET", "path": "/_emulator/routes-ready", "root_path": ""}
    scope.update({"raw_path": b"", "query_string": b"", "headers": [], "http_version": "1.1", "scheme": "http"})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        pass

    await app.router(scope, receive, send)


def _one_secret(state: AppState) -> OneSecret:
    """Join the replicas on the store's database, or refuse to start (`SecretMismatch`)."""
    secret = OneSecret(state.store.leases, state.signer, state.settings.lease_s)
    try:
        secret.join()
    except SecretMismatch:
        state.store.close()
        raise
    return secret


def _caches(state: AppState) -> Caches:
    """The registry of every cache the app's parts own, and the process's (`emulator/caches.py`)."""
    caches = Caches(PROCESS)
    for name, cache in {**state.signer.caches(), "hidden call results": state.hidden_results}.items():
        caches.add(name, cache)
    if state.engine is not None:
        for name, cache in state.engine.caches().items():
            caches.add(name, cache)
    pool = state.pool
    if pool is not None:
        caches.add_async("live programs", pool.forget_live, lambda: pool.live_held)
    return caches


WATCH_S = 0.25
"""How often `--watch` looks at the scenario files: an edit is served well within a second."""


async def _watch(files: ScenarioFiles) -> None:
    """`--watch`: reload the scenario files when they change. The files are read and parsed off
    the event loop; the registry is replaced on it, between requests."""
    while True:
        await asyncio.sleep(WATCH_S)
        await files.recheck()


def _record(app: FastAPI, state: AppState) -> None:
    """Put the recording proxy in front of the routes (see `proxy`)."""
    from ptc_emulator.api.proxy import ProxyMiddleware, RecordingProxy

    state.proxy = RecordingProxy(state.settings, state.scenarios)
    app.add_middleware(ProxyMiddleware, proxy=state.proxy)


def _reads_scenarios(scope: Scope) -> bool | None:
    """What a request reads of the scenarios the replicas share: None, nothing (it waits on no
    read: a retrieve, a list, a delete, a conversation's change, an agent's); False, the scenarios
    and not the hosted scripts (`/v1/models` names the scenarios' models); True, both (a create,
    which the scripted model plays, a WebSocket's upgrade (a database away is its 503; each
    create on it reads them again, `websocket.py`), and the admin API's routes that read or remove
    the scenarios: theirs, `end` (which names those never used) and `reset` (which counts those it
    removes). (Every `/v1/` request read both: a lock on `records`, the hosted scripts' table,
    held `/v1/models` and every other route.)"""
    path = scope.get("path", "") if scope["type"] in ("http", "websocket") else ""
    if scope["type"] == "websocket":
        return True if path.startswith("/v1/") else None
    method = scope.get("method", "GET")
    if path.startswith("/_emulator/scenarios") or path in ("/_emulator/end", "/_emulator/reset"):
        return True
    if path == "/v1/models" or path.startswith("/v1/models/"):
        return False
    if method != "POST":
        return None
    if path.startswith("/v1/responses") and not path.endswith("/cancel"):
        return True
    if path.startswith("/v1/agents/sessions"):
        return True
    return None


class _Shared:
    """With a store replicas share: the registry takes the scenarios the other replicas were given
    before this one answers a request that reads them (`_reads_scenarios`)."""

    def __init__(self, app: ASGIApp, shared: admin.SharedScenarios) -> None:
        self.app = app
        self.shared = shared

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hosted = _reads_scenarios(scope)
        if hosted is not None:
            try:
                await self.shared.refresh(hosted=hosted)
            except StoreUnavailable as e:
                await _reject(scope, receive, send, errors.database_away(e))
                return
        await self.app(scope, receive, send)


class _Edge:
    """Request ids, the body size limit and the optional API key, for HTTP and WebSocket alike."""

    def __init__(
        self, app: ASGIApp, settings: Settings, own: OwnAddresses | None = None, state: AppState | None = None
    ) -> None:
        self.app = app
        self.settings = settings
        self.own = own or OwnAddresses()
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        warming = self.state.warming if self.state is not None else None
        if warming is not None:
            if not warming.done():
                # The first requests after the start: the tokenizer and the checkers are still loading.
                with contextlib.suppress(Exception):
                    await asyncio.shield(warming)
            failed = _warm_up_failure(warming)
            if failed is not None:
                await _reject(scope, receive, send, failed)
                return
        request_id = "req_" + secrets.token_hex(16)
        self.own.note(scope.get("server"))  # the MCP client never connects here

        async def send_with_id(message: Message) -> None:
            if message.get("type") == "http.response.start" and not any(
                k.lower() == b"x-request-id" for k, _ in message.get("headers", [])
            ):  # a proxied upstream answer keeps its own
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode("ascii"))]
            await send(message)

        unusable = scopes.unscope(scope)
        if unusable is not None:
            await _reject(
                scope,
                receive,
                send_with_id,
                unusable,
            )
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        key = self.settings.api_key
        # The inspector's page holds no data (its data comes from the admin API, with the key).
        reading = scope["type"] == "http" and scope.get("method") in ("GET", "HEAD")
        page = reading and _is_ui(scope.get("path", ""))
        keyless = key is not None and not _authorised(headers.get("authorization"), key)
        if keyless and reading and scope.get("path") == HEALTH_PATH:
            # A load balancer's check carries no key: it gets the status alone (admin.health).
            scope[KEYLESS_HEALTH] = True
        elif keyless and not page:
            await _reject(scope, receive, send_with_id, _unauthorised(headers.get("authorization")))
            return
        refused = guards.header_refusal(scope.get("http_version", "1.1"), scope.get("headers", [])) or guards.refusal(
            scope["type"],
            scope.get("method", "GET"),
            scope.get("path", ""),
            headers,
            self.settings.host,
            self.settings.allowed_hosts,
            self.settings.allowed_origins,
        )
        if refused is not None:
            await _reject(scope, receive, send_with_id, refused)
            return
        limit = self.settings.max_body_bytes
        declared = headers.get("content-length")
        if scope["type"] == "http" and declared is not None and declared.isdigit() and int(declared) > limit:
            await _reject(scope, receive, send_with_id, messages.body_too_large(limit))
            return
        received = 0
        # Until the request has been answered, however it ends: a large body, or a long stored
        # record read back in it (`jsonpieces.loads`), holds full collections off (`collector`).
        # (Not a WebSocket: its connection may last for hours.)
        with collector.request() if scope["type"] == "http" else contextlib.nullcontext():

            async def limited_receive() -> Message:
                nonlocal received
                message = await receive()
                if message.get("type") == "http.request":
                    chunk = message.get("body", b"")
                    large = received < collector.LARGE_BYTES <= received + len(chunk)
                    received += len(chunk)
                    if received > limit:
                        raise StarletteHTTPException(413, detail=messages.body_too_large(limit).message)
                    if large:
                        collector.hold_for_request()
                return message

            await self.app(scope, limited_receive if scope["type"] == "http" else receive, send_with_id)


def _warm_up_failure(warming: asyncio.Future[Any]) -> EmulatorError | None:
    """The 503 every request gets once the tokenizer's load or the checkers' import has failed."""
    if not warming.done() or warming.cancelled() or warming.exception() is None:
        return None
    problem = warming.exception()
    assert problem is not None
    return messages.warm_up_failed(problem)


def _is_ui(path: str) -> bool:
    return path in ("/", "/_emulator/ui") or path.startswith("/_emulator/ui/")


def _authorised(header: str | None, key: str) -> bool:
    if not header or not header.lower().startswith("bearer "):
        return False
    return hmac.compare_digest(header[7:].strip().encode("utf-8"), key.encode("utf-8"))


def _unauthorised(header: str | None) -> EmulatorError:
    if not header:
        return messages.api_key_missing()
    given = header[7:].strip() if header.lower().startswith("bearer ") else header
    shown = given[:3] + "*" * max(0, len(given) - 7) + given[-4:] if len(given) > 8 else "*" * len(given)
    return messages.api_key_incorrect(shown)


async def _reject(scope: Scope, receive: Receive, send: Send, error: EmulatorError) -> None:
    """Refuse before the app runs: an HTTP error response; a WebSocket handshake answered with that
    same response (its status and OpenAI's envelope) where the server can send one, else closed
    (1008: uvicorn then answers the handshake 403, with no body)."""
    if scope["type"] == "websocket":
        if "websocket.http.response" in (scope.get("extensions") or {}):
            reply = errors.error_response(error)
            headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers.items()]
            await send({"type": "websocket.http.response.start", "status": reply.status_code, "headers": headers})
            await send({"type": "websocket.http.response.body", "body": reply.body, "more_body": False})
            return
        await send({"type": "websocket.close", "code": 1008, "reason": error.message[:120]})
        return
    await errors.error_response(error)(scope, receive, send)
