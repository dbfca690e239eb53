"""The `/v1/responses` endpoints. Routes only translate; the engine decides."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ptc_emulator.api.bodies import OFF_LOOP_BYTES, BodyRequest, BodyRoute
from ptc_emulator.api.context import (
    CONTRACT_HEADER,
    SCOPE_HEADER,
    SCOPE_METADATA_KEY,
    Include,
    Limit,
    Order,
    QueryInt,
    contract_headers,
    engine_of,
    journaling_of,
    scope_of,
)
from ptc_emulator.api.disconnect import unless_disconnected
from ptc_emulator.api.replies import json_reply
from ptc_emulator.api.routes.streaming import stream_create, stream_stored
from ptc_emulator.emulator import collector, jsonpieces, jsonreply
from ptc_emulator.emulator.release import dismantle, release
from ptc_emulator.emulator.wire.request import CompactRequest, CountTokensRequest, CreateRequest

__all__ = [
    "CONTRACT_HEADER",
    "SCOPE_HEADER",
    "SCOPE_METADATA_KEY",
    "contract_headers",
    "engine_of",
    "journaling_of",
    "router",
    "scope_of",
]


router = APIRouter(prefix="/v1", route_class=BodyRoute)


@router.post("/responses")
async def create_response(body: CreateRequest, request: Request) -> Response:
    prepared = None
    large = len(await request.body()) >= OFF_LOOP_BYTES
    try:
        cursor = request.cursor if isinstance(request, BodyRequest) else None  # what the body reader recognised
        engine = engine_of(request)
        scope = scope_of(request.headers, body)
        await engine.read_ahead(body, len(await request.body()))
        if body.stream:
            return await stream_create(request, engine, body, scope, cursor)
        # An MCP server's listing (up to 8 MiB) makes as many objects as a large body: full
        # collections are held off meanwhile (a 7 MB one started a 90-150 ms one), as for a large body.
        held = collector.held_off() if _lists_remote_tools(body) else contextlib.nullcontext()
        with held, journaling_of(request, body, scope, await request.body()) as journaling:
            size = len(await request.body())
            prepared = journaling.admit(await engine.attempt_off_loop(body, scope=scope, cursor=cursor, size=size))
            journaling.response = await unless_disconnected(request, engine.run(prepared))
            # A long reply (megabytes of output) is encoded in a worker thread, a piece at a time.
            reply = await json_reply(journaling.response, headers=contract_headers(prepared))
            journaling.rendered = bytes(reply.body)  # the journal keeps these bytes when they are its own JSON text
            if len(journaling.rendered) >= jsonreply.LONG_CHARS or len(await request.body()) >= OFF_LOOP_BYTES:
                # A long reply or body is journaled in a worker thread too: their bytes copied into
                # the journal's (7 MB: 3-4 ms), or the reply's text made when they are not the journal's.
                await asyncio.to_thread(journaling.finish, journaling.response)
            journaling.finish(journaling.response)
            await journaling.stored()  # (a shared journal's write, in its own thread)
            return reply
    finally:
        # 200,000 items freed on the loop as the request's frames end held it 40-150 ms; so did a
        # continuation's stored history (200,000 messages read back: 100-250 ms).
        release(body.input)
        if prepared is not None:
            release(prepared.conversation.items)
        if large:  # the rest of a large body (a tool schema's millions of nested arrays) too
            dismantle(body)


def _lists_remote_tools(body: CreateRequest) -> bool:
    """Whether the create may list a hosted `mcp` tool's server."""
    return any(getattr(tool, "type", None) == "mcp" and getattr(tool, "server_url", None) for tool in body.tools or ())


@router.post("/responses/input_tokens")
async def count_input_tokens(body: CountTokensRequest, request: Request) -> dict[str, Any]:
    engine, scope = engine_of(request), scope_of(request.headers, None)
    return await engine.off_loop(body, lambda: engine.count_tokens(body, scope=scope))


@router.post("/responses/compact")
async def compact_response(body: CompactRequest, request: Request) -> Response:
    engine, scope = engine_of(request), scope_of(request.headers, None)
    # Rendered where it is made: a long window's compaction (200,000 items) is a long JSON text,
    # written a piece at a time in the worker thread, not encoded value by value on the event loop.
    return await engine.off_loop(body, lambda: _rendered(engine.compact(body, scope=scope)))


def _rendered(body: dict[str, Any]) -> Response:
    return Response(jsonpieces.dumps(body, separators=(",", ":")).encode(), media_type="application/json")


@router.get("/responses/{response_id}")
async def retrieve_response(
    response_id: str,
    request: Request,
    stream: bool = False,
    starting_after: QueryInt | None = None,
    include: Include = None,
    include_obfuscation: bool = True,
) -> Response:
    """`include_obfuscation` (the SDK's): the emulator pads no event with `obfuscation`, so a replayed
    stream is the same either way, as a hosted one is with it false."""
    engine, scope = engine_of(request), scope_of(request.headers, None)
    if stream:
        return await stream_stored(request, engine, response_id, starting_after, scope)
    # Reading a stored response reads its input items too: a long record's take their time (200,000
    # items: most of a second), in a worker thread so no other client waits on them.
    return await json_reply(await asyncio.to_thread(engine.retrieve, response_id, scope=scope))


@router.delete("/responses/{response_id}")
async def delete_response(response_id: str, request: Request) -> dict[str, Any]:
    return await engine_of(request).delete(response_id, scope=scope_of(request.headers, None))


@router.post("/responses/{response_id}/cancel")
async def cancel_response(response_id: str, request: Request) -> dict[str, Any]:
    return await engine_of(request).cancel(response_id, scope=scope_of(request.headers, None))


@router.get("/responses/{response_id}/input_items")
async def list_input_items(
    response_id: str,
    request: Request,
    after: str | None = None,
    limit: Limit = 20,
    order: Order = "desc",
    include: Include = None,
) -> Response:
    engine, scope = engine_of(request), scope_of(request.headers, None)
    # A page of a long record's input items is read in a worker thread, as `retrieve`, and a long
    # page (100 items of megabytes each) is encoded in one too.
    page = await asyncio.to_thread(engine.input_items, response_id, after=after, limit=limit, order=order, scope=scope)
    return await json_reply(page)
