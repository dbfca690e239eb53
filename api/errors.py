"""Every error leaves the server as OpenAI's envelope: `{"error": {message, type, param, code}}`.

One mapping from the engine's exception tree (`emulator.errors`), request validation (pydantic),
routing errors and anything unexpected. FastAPI's 422 `{"detail": ...}` never reaches a client.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError, InvalidRequest, StatusError
from ptc_emulator.emulator.storage import StoreBusy, StoreUnavailable

__all__ = ["database_away", "error_response", "install", "json_kind", "validation_error"]

log = logging.getLogger(__name__)

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


def json_kind(value: Any) -> str:
    """A JSON value's kind as the hosted type errors name it (`an array`, `a string`, `null`)."""
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
        return messages.invalid_request()
    errors = [dict(e) for e in errors]
    for e in errors:
        loc = tuple(e.get("loc", ()))
        if loc and loc[0] in ("body", "query", "path"):
            e["where"], e["loc"] = loc[0], loc[1:]
    json_error = next((e for e in errors if e.get("type") == "json_invalid"), None)
    if json_error is not None:
        return messages.json_parse_error()
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
            return messages.json_parse_error()
        return messages.missing_parameter(param)
    if kind == "extra_forbidden":
        return messages.unknown_parameter(param)
    if kind in ("union_tag_invalid", "invalid_type_tag", "union_tag_not_found"):
        tag = (error.get("ctx") or {}).get("tag", value.get("type") if isinstance(value, dict) else value)
        expected = (error.get("ctx") or {}).get("expected_tags", "")
        where_param = f"{param}.type" if param else "type"
        if isinstance(value, dict) and not isinstance(value.get("type", ""), str):  # a null or a number, say
            return messages.not_a_string(where_param, json_kind(value["type"]))
        if kind == "union_tag_not_found" or tag is None:
            return messages.missing_parameter(where_param)
        if expected:
            return messages.invalid_value(tag, expected, where_param)
        return messages.invalid_value_unlisted(tag, where_param)
    if kind in ("literal_error", "enum"):
        expected = (error.get("ctx") or {}).get("expected", "")
        if (isinstance(value, bool | list | dict) or value is None) and str(expected).startswith("'"):
            # A null, boolean, array or object where one of some values goes: the wrong type (its
            # Python spelling, 'None' or 'True', named no value the client sent). A number is an
            # invalid value, as it was: `Invalid value: '1'` is how the client wrote it.
            return messages.not_a_string(param or "body", json_kind(value))
        return messages.invalid_value(value, expected, param)
    if kind in ("int_parsing", "float_parsing", "bool_parsing") and where == "query" and isinstance(value, str):
        # A query's text that is not its parameter's type (`?limit=1.5`): worded as a body's wrong type.
        return messages.wrong_type(param, [_QUERY_EXPECTED[kind]], _query_kind(value), param)
    if kind in _EXPECTED:
        expected_kinds = []
        for e in [error, *same_place]:
            want = _EXPECTED.get(e.get("type", ""))
            if want and want not in expected_kinds:
                expected_kinds.append(want)
        return messages.wrong_type(param or "body", expected_kinds, json_kind(value), param or None)
    bound = error.get("ctx") or {}
    if kind == "string_too_long":  # the hosted wording of a string's length bound
        length = len(value) if isinstance(value, str) else value
        return messages.string_too_long(param, bound.get("max_length"), length)
    if kind == "too_long" and str(bound.get("field_type", "")).lower() in ("list", "tuple", "set"):
        # An array past its length bound (a Conversations create's or add's 21st item), as a string's.
        length = bound.get("actual_length", len(value) if isinstance(value, list) else value)
        return messages.array_too_long(param or "body", bound.get("max_length"), length)
    if kind == "too_short" and str(bound.get("field_type", "")).lower() in ("list", "tuple", "set") and not value:
        # An empty array where one item is required (a session's `events`, a namespace's `tools`).
        return messages.empty_array(param or "body", bound.get("min_length"))
    if kind == "string_pattern_mismatch":
        return messages.pattern_mismatch(param, str(bound.get("pattern")))
    if kind == "string_too_short" and value == "" and bound.get("min_length") == 1:
        return messages.empty_string(param)
    if kind in ("greater_than_equal", "greater_than"):  # and of a number's lower bound
        least = bound.get("ge", bound.get("gt"))
        sign = ">=" if kind == "greater_than_equal" else ">"
        return messages.below_minimum(param, _number(least), sign, _shown(least), value)
    if kind in ("less_than_equal", "less_than"):  # and of its upper bound
        most = bound.get("le", bound.get("lt"))
        sign = "<=" if kind == "less_than_equal" else "<"
        return messages.above_maximum(param, _number(most), sign, _shown(most), value)
    message = str(error.get("msg", "invalid value"))
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    return messages.invalid_reason(param or "body", message, param or None)


_QUERY_EXPECTED = {"int_parsing": "an integer", "float_parsing": "a number", "bool_parsing": "a boolean"}


def _query_kind(text: str) -> str:
    """What a query parameter's text reads as, named as `json_kind` names a body's value (`1.5`: a
    decimal; `true`: a boolean; `abc`: a string)."""
    if text in ("true", "false"):
        return "a boolean"
    if _DECIMAL.fullmatch(text) is None and text.lower().lstrip("-") not in ("nan", "inf", "infinity"):
        return "a string"  # `1_0`, `+5`, ` 5`: Python reads them as numbers, JSON does not
    return "a decimal"


_DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _number(bound: object) -> str:
    """How the hosted API names a bounded number: by its parameter's type, which the bound is
    written in (`ge=16` for an integer, `le=2.0` for a decimal), not by the value sent."""
    return "decimal" if isinstance(bound, float) else "integer"


def _shown(bound: object) -> object:
    """A bound as the hosted message prints it: `2`, not `2.0`."""
    return int(bound) if isinstance(bound, float) and bound.is_integer() else bound


def error_response(error: EmulatorError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


def database_away(problem: BaseException | None = None) -> StatusError:
    """The 503 of a store that failed: its connections all busy (`StoreBusy`: the database
    answers), or the database away."""
    return messages.database_busy() if isinstance(problem, StoreBusy) else messages.database_away()


def install(app: FastAPI) -> None:
    @app.exception_handler(StoreUnavailable)
    async def _away(request: Request, exc: StoreUnavailable) -> JSONResponse:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return error_response(database_away(exc))

    @app.exception_handler(EmulatorError)
    async def _emulator(request: Request, exc: EmulatorError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(validation_error(exc.errors(), exc.body))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return error_response(messages.invalid_url(request.method, request.url.path))
        if exc.status_code == 405:
            return error_response(messages.invalid_method(request.method, request.url.path))
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            return error_response(messages.json_parse_error())  # invalid UTF-8, or JSON nested too deep
        return error_response(messages.http_refusal(exc.status_code, str(exc.detail)))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, StoreUnavailable):  # raised outside the routes (a middleware's read)
            log.warning("%s %s: %s", request.method, request.url.path, exc)
            return error_response(database_away(exc))
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(messages.server_error())
