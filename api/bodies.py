"""A JSON body read into its route's model by the emulator, a long one in a worker thread.

`BodyRoute` (a router's `route_class`) reads a route's body itself: parsed, and validated as the
route's body model (`CreateRequest`, `EventsBody`, ...). FastAPI is handed the validated model,
which it takes as it is. A body of `OFF_LOOP_BYTES` or more is read in a worker thread, and its
long lists are validated a step at a time (`wire.stepped`), so the event loop serves other clients
meanwhile, valid or not (issue 38: 100,000 invalid input items held every client 15.9 s).

A create's body over HTTP is read by the engine's body reader (`history/replayed.py`,
`PrefixCache.read_create`: the one function that reads a create body into the request and its
cursor); the route gets the `cursor`.

A body that does not validate is handed to FastAPI as null, which fails at once, and the route
raises the errors found here in its place (with FastAPI's own, of a query or a header): the 400
is worded by `api.errors.validation_error` as for any body, from these errors and the body as sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from ptc_emulator.api.context import engine_of
from ptc_emulator.emulator import jsonpieces
from ptc_emulator.emulator.history.cursor import Extension
from ptc_emulator.emulator.history.replayed import Refused
from ptc_emulator.emulator.release import dismantle

__all__ = ["AT_ONCE", "LARGE_BYTES", "OFF_LOOP_BYTES", "BodyRequest", "BodyRoute", "large_turn"]

OFF_LOOP_BYTES = 16 * 2**10
"""A body this long or longer is read (parsed, validated, its known prefix found) in a worker
thread; a shorter one (some hundred items at most) costs the loop less than the hop."""


LARGE_BYTES = 2**20
"""A body (or WebSocket create frame) this long or longer takes a turn to be parsed and validated
(`large_turn`)."""
AT_ONCE = 2
"""Large bodies parsed and validated at once on one server; the others wait their turn. A 15.6 MB
body of small arrays took some 330 MB while it was parsed and validated: three at once took 1 GB,
and nothing bounded how many."""
_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


def large_turn(size: int) -> contextlib.AbstractAsyncContextManager[Any]:
    """A turn for a body of `size` bytes or characters to be parsed and validated in: one of
    `AT_ONCE` for a body of `LARGE_BYTES` or more (waiting for it on the event loop), none needed
    for a smaller one."""
    if size < LARGE_BYTES:
        return contextlib.nullcontext()
    loop = asyncio.get_running_loop()
    turn = _turns.get(loop)
    if turn is None:
        turn = _turns[loop] = asyncio.Semaphore(AT_ONCE)
    return turn


class BodyRequest(Request):
    """A request whose `json()` is its body read into `model` (see the module)."""

    model: type[BaseModel] | None = None
    cursor: Extension | None = None
    refused: tuple[list[dict[str, Any]], Any] | None = None
    """The errors of a body that did not validate (located under `body`), and the body as sent."""

    async def body(self) -> bytes:
        """Starlette's `body()`, but a long body's chunks are joined in a worker thread: `b"".join`
        of 7 MB of chunks was one call of 3-4 ms on the event loop."""
        if not hasattr(self, "_body"):
            chunks: list[bytes] = []
            size = 0
            async with contextlib.aclosing(self.stream()) as stream:
                async for chunk in stream:
                    chunks.append(chunk)
                    size += len(chunk)
            self._body = _joined(chunks) if size < OFF_LOOP_BYTES else await asyncio.to_thread(_joined, chunks)
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            raw = await self.body()
            if len(raw) < OFF_LOOP_BYTES:
                self._read(raw)
            else:
                async with large_turn(len(raw)):
                    await asyncio.to_thread(self._read, raw)
        return self._json

    def _read(self, raw: bytes) -> None:
        if _replayable(self):
            try:
                self._json, self.cursor = engine_of(self).history.bodies.read_create(raw)
            except Refused as refused:
                self._refuse(refused.error, refused.body)
                dismantle(refused.body)
            return
        value = _parsed(raw)
        if self.model is None:
            self._json = value
            return
        try:
            self._json = self.model.model_validate(value)
        except ValidationError as e:
            self._refuse(e, value)
            dismantle(value)

    def _refuse(self, error: ValidationError, body: Any) -> None:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in error.errors(include_url=False)]
        # What the 400's wording reads of them, kept; the body itself is freed here, in the worker
        # thread that parsed it, not on the event loop (see `_kept`).
        self.refused = _kept(errors, body)
        self._json = None


def _parsed(raw: bytes) -> Any:
    """`json.loads(raw)`, a long body's outer levels a piece at a time (`jsonpieces.loads`): one
    `json.loads` of 15 MB of small arrays held the interpreter, the event loop's turn too, 0.2 s."""
    if len(raw) < OFF_LOOP_BYTES:
        return json.loads(raw)
    return jsonpieces.loads(jsonpieces.decode(raw, json.detect_encoding(raw), "surrogatepass"))


def _kept(errors: list[dict[str, Any]], body: Any) -> tuple[list[dict[str, Any]], Any]:
    """The refused body's errors and the body, cut down to what `api.errors.validation_error` reads
    of them: each error's `input` as its kind (an empty array or object, an object's `type`), and
    of the body only the arrays and objects on the errors' paths, each a shell of its length or keys.

    The errors and the body kept whole were freed on the event loop once the 400 was sent, and their
    exception's frames made a cycle, so a full collection freed them there: a body of 3,900,000
    small arrays held every client 2-4 s. Cut down here, the body itself is taken apart by the
    release thread a container at a time (`release.dismantle`): freed in one go, even in the
    worker, it held the interpreter 0.1-0.3 s."""
    shells: dict[int, Any] = {}

    def shell(node: Any) -> Any:
        if not isinstance(node, list | dict):
            return node
        if id(node) not in shells:
            shells[id(node)] = [None] * len(node) if isinstance(node, list) else dict.fromkeys(node)
        return shells[id(node)]

    def leaf(node: Any) -> Any:
        """A value at an error's end: the wording reads nothing in it (an object of 1,450,000
        members under an unknown key was copied as a shell of its keys, one long call)."""
        if id(node) in shells or not isinstance(node, list | dict):
            return shell(node)
        return [] if isinstance(node, list) else {}

    root = shell(body)
    for error in errors:
        node = body
        parts = error["loc"][1:]
        for n, part in enumerate(parts):  # (as `errors._param` walks it: a part it cannot follow is a union's label)
            if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                shell(node)[part] = (leaf if n == len(parts) - 1 else shell)(node[part])
                node = node[part]
            elif isinstance(node, dict) and isinstance(part, str) and part in node:
                shell(node)[part] = (leaf if n == len(parts) - 1 else shell)(node[part])
                node = node[part]
        if "input" in error:
            error["input"] = _small(error["input"])
    return errors, root


def _small(value: Any) -> Any:
    """An error's `input` as far as a 400's wording reads it (its kind, an object's `type`)."""
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {"type": _small(value["type"])} if "type" in value else {}
    return value


def _joined(chunks: list[bytes]) -> bytes:
    """A body's chunks, joined."""
    return b"".join(chunks)


def _replayable(request: Request) -> bool:
    """A create over HTTP whose body reaches the app as sent (the recording proxy may rewrite it)."""
    scope = request.scope
    return (
        scope.get("method") == "POST"
        and scope.get("path") == "/v1/responses"
        and not request.app.state.emulator.settings.recording
    )


class BodyRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        model = _body_model(self)

        async def route(request: Request) -> Response:
            reading = BodyRequest(request.scope, request.receive)
            reading.model = model
            try:
                return await handler(reading)
            except RequestValidationError as e:
                if reading.refused is None:
                    raise
                errors, body = reading.refused
                others = [err for err in e.errors() if tuple(err.get("loc", ()))[:1] != ("body",)]
                raise RequestValidationError([*others, *errors], body=body) from None

        return route


def _body_model(route: APIRoute) -> type[BaseModel] | None:
    """The model a route's whole body is (None: no body, or one FastAPI takes apart)."""
    field = route.body_field
    if field is None or route._embed_body_fields:
        return None
    model = field.field_info.annotation
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None
