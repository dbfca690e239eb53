"""What every route needs from a request: the engine, the caller's scope, the journaling of a create,
and the contract-warning header. Shared by the HTTP, SSE, WebSocket and admin routes."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from fastapi import Depends, Query, Request
from pydantic import BeforeValidator
from pydantic_core import PydanticCustomError

from ptc_emulator.api.journaling import Journaling
from ptc_emulator.emulator import messages
from ptc_emulator.emulator.responses.engine import Engine, Prepared
from ptc_emulator.emulator.wire.request import CreateRequest, Includable
from ptc_emulator.names import SCOPE_HEADER, SCOPE_METADATA_KEY

__all__ = [
    "CONTRACT_HEADER",
    "HEALTH_PATH",
    "KEYLESS_HEALTH",
    "Include",
    "Limit",
    "QueryInt",
    "Order",
    "SCOPE_HEADER",
    "SCOPE_METADATA_KEY",
    "contract_headers",
    "engine_of",
    "journaling_of",
    "scope_of",
]

HEALTH_PATH = "/_emulator/health"
KEYLESS_HEALTH = "ptc_emulator.keyless_health"
"""Set in the ASGI scope of a health check that came without the server's `--api-key` (a load
balancer's): it is answered with the status alone, none of the server's figures."""


def _digits(value: object) -> object:
    """A query's integer written as digits (a `-` before them kept, for the bound's wording):
    pydantic's own parsing also takes `1_0`, `+5` and ` 5`, which the hosted API calls a string."""
    if isinstance(value, str) and _DIGITS.fullmatch(value) is None:
        raise PydanticCustomError(
            "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
        )
    return value


_DIGITS = re.compile(r"-?[0-9]+")
Limit = Annotated[int, Query(ge=1, le=100), BeforeValidator(_digits)]
"""A list endpoint's `limit`: digits only."""
QueryInt = Annotated[int, BeforeValidator(_digits)]
"""Any other integer in a query (`starting_after`): digits only, as `limit`."""
Order = Literal["asc", "desc"]
"""A list endpoint's `order`."""
_INCLUDABLE = get_args(Includable)


def _included(
    include: Annotated[list[str] | None, Query()] = None,
    listed: Annotated[list[str] | None, Query(alias="include[]")] = None,
) -> list[str] | None:
    """`include` of a read, as `include=` (repeated or comma-separated) or as the Python and Node
    SDKs send it (`include[]=`): each value one a create takes (`Includable`), another the 400 a
    create's body gets (`include[i]`)."""
    values = [value for given in (*(include or ()), *(listed or ())) for value in given.split(",")]
    for index, value in enumerate(values):
        if value not in _INCLUDABLE:
            raise messages.include_value_invalid(value, _INCLUDABLE, index)
    return values or None


Include = Annotated[list[str] | None, Depends(_included)]
"""`include`: its values checked as a create's; the emulator has nothing extra to include."""


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


def journaling_of(request: Request, body: CreateRequest, scope: str | None, raw: bytes | None = None) -> Journaling:
    """`raw`: the request's body bytes, which `body` was validated from (the journal keeps them)."""
    return Journaling(
        request.app.state.emulator.journal,
        method=request.method,
        path=_path(request),
        headers=request.headers,
        body=body,
        scope=scope,
        raw=raw,
    )


def _path(request: Request) -> str:
    """`request.url.path` without building the URL: the scope's path is that very text when it
    starts with one `/` and holds nothing the URL escapes (`?`, `#`, `\\`) or drops (tab, CR, LF)."""
    path: str = request.scope["path"]
    if path[:1] == "/" and path[:2] != "//" and not any(c in path for c in "?#\\\t\r\n"):
        return path
    return request.url.path


CONTRACT_HEADER = "x-ptc-emulator-contract-warning"


def contract_headers(prepared: Prepared) -> dict[str, str]:
    """A warning header naming the first schema violation of this request, if any."""
    violations = prepared.trace.contract
    if not violations:
        return {}
    text = f"{len(violations)} violation(s); first: {violations[0].describe()}"
    return {CONTRACT_HEADER: text.encode("ascii", "replace").decode("ascii")[:1000]}
