"""The `/v1/responses` endpoints. Routes only translate; the engine decides."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from ptc_emulator.emulator.engine import Engine, Prepared
from ptc_emulator.emulator.request import CountTokensRequest, CreateRequest

from .disconnect import unless_disconnected
from .journaling import Recorder

__all__ = [
    "CONTRACT_HEADER",
    "SCOPE_HEADER",
    "contract_headers",
    "SCOPE_METADATA_KEY",
    "engine_of",
    "recorder",
    "router",
    "scope_of",
]

router = APIRouter(prefix="/v1")

SCOPE_HEADER = "x-ptc-emulator-scope"
SCOPE_METADATA_KEY = "ptc_emulator_scope"


def engine_of(request: Request) -> Engine:
    engine = request.app.state.emulator.engine
    assert engine is not None, "the app's lifespan has not started"
    return engine  # type: ignore[no-any-return]


def scope_of(headers: Any, body: CreateRequest | None) -> str | None:
    """Which caller's scenarios a request may match: a header, or a metadata key."""
    scope = headers.get(SCOPE_HEADER)
    if scope is None and body is not None and body.metadata:
        scope = body.metadata.get(SCOPE_METADATA_KEY)
    return scope  # type: ignore[no-any-return]


def recorder(request: Request, body: CreateRequest, scope: str | None) -> Recorder:
    return Recorder(
        request.app.state.emulator.journal,
        method=request.method,
        path=request.url.path,
        headers=request.headers,
        body=body,
        scope=scope,
    )


CONTRACT_HEADER = "x-ptc-emulator-contract-warning"


def contract_headers(prepared: Prepared) -> dict[str, str]:
    """A warning header naming the first schema violation of this request, if any."""
    violations = prepared.trace.contract
    if not violations:
        return {}
    text = f"{len(violations)} violation(s); first: {violations[0].describe()}"
    return {CONTRACT_HEADER: text.encode("ascii", "replace").decode("ascii")[:1000]}


@router.post("/responses")
async def create_response(body: CreateRequest, request: Request) -> Response:
    engine = engine_of(request)
    scope = scope_of(request.headers, body)
    if body.stream:
        from .streaming import stream_create

        return await stream_create(request, engine, body, scope)
    with recorder(request, body, scope) as rec:
        rec.prepared = engine.prepare(body, scope=scope)
        rec.response = await unless_disconnected(request, engine.run(rec.prepared))
        return JSONResponse(rec.response, headers=contract_headers(rec.prepared))


@router.post("/responses/input_tokens")
async def count_input_tokens(body: CountTokensRequest, request: Request) -> dict[str, Any]:
    return engine_of(request).count_tokens(body)


@router.get("/responses/{response_id}")
async def retrieve_response(
    response_id: str,
    request: Request,
    stream: bool = False,
    starting_after: int | None = None,
    include: Annotated[list[str] | None, Query()] = None,
) -> Response:
    engine = engine_of(request)
    if stream:
        from .streaming import stream_stored

        return stream_stored(request, engine, response_id, starting_after)
    return JSONResponse(engine.retrieve(response_id))


@router.delete("/responses/{response_id}")
async def delete_response(response_id: str, request: Request) -> dict[str, Any]:
    return engine_of(request).delete(response_id)


@router.post("/responses/{response_id}/cancel")
async def cancel_response(response_id: str, request: Request) -> dict[str, Any]:
    return await engine_of(request).cancel(response_id)


@router.get("/responses/{response_id}/input_items")
async def list_input_items(
    response_id: str,
    request: Request,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Literal["asc", "desc"] = "desc",
    include: Annotated[list[str] | None, Query()] = None,
) -> dict[str, Any]:
    return engine_of(request).input_items(response_id, after=after, limit=limit, order=order)
