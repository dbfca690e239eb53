"""Every error leaves the server as OpenAI's envelope: `{"error": {message, type, param, code}}`.

One mapping from the engine's exception tree (`emulator.errors`), request validation (pydantic),
routing errors and anything unexpected. FastAPI's 422 `{"detail": ...}` never reaches a client.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError, InvalidRequest, StatusError
from ptc_emulator.emulator.storage import StoreUnavailable

__all__ = ["database_away", "error_response", "install", "validation_error"]

log = logging.getLogger(__name__)

JSON_PARSE_MESSAGE = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
    "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
)
SERVER_ERROR_MESSAGE = "The server had an error while processing your request. Sorry about that!"
"""A store replicas share that is away: a 503 (which the SDKs retry), as soon as it is known."""

_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "none_required": "null",
}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _param(loc: Sequence[Any], body: Any, missing_key: bool) -> str:
    """Render a pydantic location as OpenAI does (`input[2].call_id`), skipping union branch labels."""
    path = ""
    node = body
    for n, part in enumerate(loc):
        last = n == len(loc) - 1
        if isinstance(node, list) and isinstance(part, int):
            path += f"[{part}]"
            node = node[part] if 0 <= part < len(node) else None
        elif isinstance(node, dict) and isinstance(part, str) and (part in node or (last and missing_key)):
            path += f".{part}" if path else part
            node = node.get(part)
    return path


def validation_error(errors: Sequence[Any], body: Any) -> InvalidRequest:
    """The first (deepest) pydantic error as the hosted API would word it."""
    if not errors:
        return InvalidRequest("Invalid request.")
    errors = [dict(e) for e in errors]
    for e in errors:
        loc = tuple(e.get("loc", ()))
        if loc and loc[0] in ("body", "query", "path"):
            e["where"], e["loc"] = loc[0], loc[1:]
    json_error = next((e for e in errors if e.get("type") == "json_invalid"), None)
    if json_error is not None:
        return InvalidRequest(JSON_PARSE_MESSAGE)
    error = max(errors, key=lambda e: len(e.get("loc", ())))
    kind = error.get("type", "")
    where = error.get("where", "body")
    data = body if where == "body" else None
    loc = error.get("loc", ())
    if where != "body":
        param = ".".join(str(p) for p in loc)
    else:
        param = _param(loc, data, missing_key=kind == "missing")
    value = error.get("input")
    same_place = [e for e in errors if e is not error and _param(e.get("loc", ()), data, False) == param]
    if kind == "missing":
        if not param:
            return InvalidRequest(JSON_PARSE_MESSAGE)
        return InvalidRequest(f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")
    if kind == "extra_forbidden":
        return InvalidRequest(f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter")
    if kind in ("union_tag_invalid", "invalid_type_tag", "union_tag_not_found"):
        tag = (error.get("ctx") or {}).get("tag", value.get("type") if isinstance(value, dict) else value)
        expected = (error.get("ctx") or {}).get("expected_tags", "")
        where_param = f"{param}.type" if param else "type"
        if kind == "union_tag_not_found" or tag is None:
            return InvalidRequest(
                f"Missing required parameter: '{where_param}'.", param=where_param, code="missing_required_parameter"
            )
        supported = f" Supported values are: {expected}." if expected else ""
        return InvalidRequest(f"Invalid value: '{tag}'.{supported}", param=where_param, code="invalid_value")
    if kind in ("literal_error", "enum"):
        expected = (error.get("ctx") or {}).get("expected", "")
        return InvalidRequest(
            f"Invalid value: '{value}'. Supported values are: {expected}.", param=param, code="invalid_value"
        )
    if kind in _EXPECTED:
        expected_kinds = []
        for e in [error, *same_place]:
            want = _EXPECTED.get(e.get("type", ""))
            if want and want not in expected_kinds:
                expected_kinds.append(want)
        expected_text = expected_kinds[0] if len(expected_kinds) == 1 else "one of " + " or ".join(expected_kinds)
        name = param or "body"
        return InvalidRequest(
            f"Invalid type for '{name}': expected {expected_text}, but got {_kind(value)} instead.",
            param=param or None,
            code="invalid_type",
        )
    bound = error.get("ctx") or {}
    if kind == "string_too_long":  # the hosted wording of a string's length bound
        length = len(value) if isinstance(value, str) else value
        return InvalidRequest(
            f"Invalid '{param}': string too long. Expected a string with maximum length {bound.get('max_length')}, "
            f"but got a string with length {length} instead.",
            param=param,
            code="string_above_max_length",
        )
    if kind in ("greater_than_equal", "greater_than"):  # and of a number's lower bound
        least = bound.get("ge", bound.get("gt"))
        sign = ">=" if kind == "greater_than_equal" else ">"
        number = "integer" if isinstance(value, int) else "decimal"
        return InvalidRequest(
            f"Invalid '{param}': {number} below minimum value. Expected a value {sign} {least}, but got {value} "
            "instead.",
            param=param,
            code=f"{number}_below_min_value",
        )
    message = str(error.get("msg", "invalid value"))
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return InvalidRequest(f"Invalid '{param or 'body'}': {message}.", param=param or None, code="invalid_value")


def error_response(error: EmulatorError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


def database_away() -> StatusError:
    return messages.database_away()


def install(app: FastAPI) -> None:
    @app.exception_handler(StoreUnavailable)
    async def _away(request: Request, exc: StoreUnavailable) -> JSONResponse:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return error_response(database_away())

    @app.exception_handler(EmulatorError)
    async def _emulator(request: Request, exc: EmulatorError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(validation_error(exc.errors(), exc.body))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message = f"Invalid URL ({request.method} {request.url.path})"
        elif exc.status_code == 405:
            message = f"Invalid method for URL ({request.method} {request.url.path})"
        elif exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            message = JSON_PARSE_MESSAGE  # invalid UTF-8, or JSON nested beyond what the parser takes
        else:
            message = str(exc.detail)
        return error_response(StatusError(exc.status_code, message, type="invalid_request_error"))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, StoreUnavailable):  # raised outside the routes (a middleware's read)
            log.warning("%s %s: %s", request.method, request.url.path, exc)
            return error_response(database_away())
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(StatusError(500, SERVER_ERROR_MESSAGE, type="server_error"))
