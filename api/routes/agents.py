"""The beta Agents API routes: `/v1/agents`, `/v1/agents/sessions` and their events, items and turns.

Every route requires `OpenAI-Beta: agents=v1`, as the SDK sends it. Routes only translate; the
harness (`emulator/harness.py`) decides. `GET .../events` is a live subscription: its first event
is the session's current state (`agent.session.idle`, `.in_progress`, `.requires_action` or
`.failed`), then everything that happens, with keep-alive comments in between, until the client
leaves. A `stream: true` session create streams from `agent.session.created` to the first
`agent.session.idle` (or `.failed`).

Every use of the store is in a worker thread (the harness's own, or `asyncio.to_thread` here for
the agents): a lock held on a table, or a very large stored session, holds the request that waits
for it, never the event loop and with it every other client.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import JSONResponse, Response

from ptc_emulator.api.bodies import BodyRoute
from ptc_emulator.api.context import SCOPE_HEADER, SCOPE_METADATA_KEY, Limit, Order
from ptc_emulator.api.sse import KEEP_ALIVE, EventStreamResponse, frame
from ptc_emulator.emulator import messages
from ptc_emulator.emulator.agents.harness import Harness, Subscription
from ptc_emulator.emulator.agents.wire import (
    AgentCreate,
    AgentToolParam,
    AgentUpdate,
    EventsBody,
    SessionCreate,
    SessionUpdate,
    check_schemas,
    holds_large_schemas,
)
from ptc_emulator.emulator.wire.pages import page

__all__ = ["open_harness", "router"]

BETA = "agents=v1"


def require_beta(openai_beta: Annotated[str | None, Header(alias="OpenAI-Beta")] = None) -> None:
    values = [v.strip() for v in (openai_beta or "").split(",")]
    if BETA not in values:
        raise messages.agents_beta_missing()


router = APIRouter(prefix="/v1/agents", dependencies=[Depends(require_beta)], route_class=BodyRoute)

_TERMINAL = ("agent.session.idle", "agent.session.failed")


def open_harness(state: Any) -> Harness:
    """The harness for an app's state (its engine, and its store's sessions), resumed."""
    store = state.store
    leases = store.leases if store.shared else None  # replicas share it: turns run under leases
    harness = Harness(state.engine, store.sessions, leases=leases, lease_s=state.settings.lease_s, events=store.events)
    harness.start()
    return harness


def harness_of(request: Request) -> Harness:
    harness: Harness | None = request.app.state.emulator.agents
    assert harness is not None, "the app's lifespan has not started"
    return harness


def _page(
    rows: list[dict[str, Any]], *, after: str | None, limit: int, order: str, what: str = "object"
) -> dict[str, Any]:
    return page(rows, after=after, limit=limit, order=order, missing=lambda at: messages.no_listed_after(what, at))


def _scope(request: Request, metadata: dict[str, str] | None) -> str | None:
    scope = request.headers.get(SCOPE_HEADER)
    if scope is None and metadata:
        scope = metadata.get(SCOPE_METADATA_KEY)
    return scope


async def _sse(subscription: Subscription, keepalive_s: float, *, until_idle: bool) -> AsyncIterator[bytes]:
    try:
        while True:
            try:
                event = await subscription.get(keepalive_s)
            except TimeoutError:
                yield KEEP_ALIVE
                continue
            if event is None:
                return
            yield frame(event)
            if until_idle and event["type"] in _TERMINAL:
                return
    finally:
        subscription.close()


def _stream(request: Request, subscription: Subscription, *, until_idle: bool) -> EventStreamResponse:
    keepalive = request.app.state.emulator.settings.keepalive_s
    return EventStreamResponse(_sse(subscription, keepalive, until_idle=until_idle), on_close=subscription.close)


async def _schemas_checked(tools: list[AgentToolParam] | None) -> None:
    """Large function schemas are checked against the meta-schema in a worker thread before the
    harness checks the body on the event loop (where their verdicts are then found, not made)."""
    if holds_large_schemas(tools):
        await asyncio.to_thread(check_schemas, tools)


# ---- sessions (before /agents/{agent_id}, which would match "sessions") ---------------------------


@router.post("/sessions")
async def create_session(body: SessionCreate, request: Request) -> Response:
    await _schemas_checked(body.agent.tools if body.agent is not None else None)
    harness = harness_of(request)
    session, subscription = await harness.create_session(
        body, _scope(request, body.metadata), subscribe=bool(body.stream)
    )
    if subscription is not None:
        return _stream(request, subscription, until_idle=True)
    return JSONResponse(session.object())


@router.get("/sessions")
async def list_sessions(
    request: Request,
    after: str | None = None,
    agent_id: str | None = None,
    limit: Limit = 20,
    order: Order = "desc",
) -> dict[str, Any]:
    metadata = {
        key[len("metadata[") : -1]: value
        for key, value in request.query_params.items()
        if key.startswith("metadata[") and key.endswith("]")
    }
    return await harness_of(request).list_sessions(
        agent_id, metadata, scope=_scope(request, None), after=after, limit=limit, order=order
    )


@router.get("/sessions/{session_id}")
async def retrieve_session(session_id: str, request: Request) -> dict[str, Any]:
    return await harness_of(request).session(session_id, scope=_scope(request, None))


@router.post("/sessions/{session_id}")
async def update_session(session_id: str, body: SessionUpdate, request: Request) -> dict[str, Any]:
    await _schemas_checked(body.agent.tools if body.agent is not None else None)
    return await harness_of(request).update_session(session_id, body, scope=_scope(request, None))


@router.delete("/sessions/{session_id}")
async def delete_session(session_id: str, request: Request) -> dict[str, Any]:
    return await harness_of(request).delete_session(session_id, scope=_scope(request, None))


@router.post("/sessions/{session_id}/events", status_code=202)
async def create_events(
    session_id: str,
    body: EventsBody,
    request: Request,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Response:
    await harness_of(request).submit(session_id, body, idempotency_key, scope=_scope(request, None))
    return Response(status_code=202)


@router.get("/sessions/{session_id}/events")
async def stream_events(session_id: str, request: Request, include_obfuscation: bool = True) -> Response:
    subscription = await harness_of(request).subscribe(session_id, scope=_scope(request, None))
    return _stream(request, subscription, until_idle=False)


@router.get("/sessions/{session_id}/items")
async def list_items(
    session_id: str, request: Request, after: str | None = None, limit: Limit = 20, order: Order = "asc"
) -> dict[str, Any]:
    rows = await harness_of(request).items(session_id, scope=_scope(request, None))
    return _page(rows, after=after, limit=limit, order=order, what="item")


@router.get("/sessions/{session_id}/turns")
async def list_turns(
    session_id: str, request: Request, after: str | None = None, limit: Limit = 20, order: Order = "asc"
) -> dict[str, Any]:
    rows = await harness_of(request).turns(session_id, scope=_scope(request, None))
    return _page(rows, after=after, limit=limit, order=order, what="turn")


@router.get("/sessions/{session_id}/turns/{turn_id}")
async def retrieve_turn(session_id: str, turn_id: str, request: Request) -> dict[str, Any]:
    return await harness_of(request).turn(session_id, turn_id, scope=_scope(request, None))


@router.get("/sessions/{session_id}/turns/{turn_id}/items")
async def list_turn_items(
    session_id: str,
    turn_id: str,
    request: Request,
    after: str | None = None,
    limit: Limit = 20,
    order: Order = "asc",
) -> dict[str, Any]:
    rows = await harness_of(request).items(session_id, turn_id, scope=_scope(request, None))
    return _page(rows, after=after, limit=limit, order=order, what="item")


# ---- agents -----------------------------------------------------------------------------------


@router.post("")
async def create_agent(body: AgentCreate, request: Request) -> dict[str, Any]:
    await _schemas_checked(body.tools)
    return await asyncio.to_thread(harness_of(request).create_agent, body, _scope(request, body.metadata))


@router.get("")
async def list_agents(
    request: Request, after: str | None = None, limit: Limit = 20, order: Order = "desc"
) -> dict[str, Any]:
    agents = await asyncio.to_thread(harness_of(request).list_agents, _scope(request, None))
    return _page(agents, after=after, limit=limit, order=order, what="agent")


@router.get("/{agent_id}")
async def retrieve_agent(agent_id: str, request: Request) -> dict[str, Any]:
    return await asyncio.to_thread(harness_of(request).agent, agent_id, _scope(request, None))


@router.post("/{agent_id}")
async def update_agent(agent_id: str, body: AgentUpdate, request: Request) -> dict[str, Any]:
    await _schemas_checked(body.tools)
    return await asyncio.to_thread(harness_of(request).update_agent, agent_id, body, _scope(request, None))


@router.delete("/{agent_id}")
async def delete_agent(agent_id: str, request: Request) -> dict[str, Any]:
    return await asyncio.to_thread(harness_of(request).delete_agent, agent_id, _scope(request, None))
