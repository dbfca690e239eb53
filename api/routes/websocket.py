"""WebSocket mode: a socket at `/v1/responses` carrying `response.create` and `response.steer`.

Each `response.create` frame is a create body plus `type`; it is validated as `CreateRequest`
and played exactly as `POST /v1/responses` plays it (same engine, same storage, same journal),
its events sent as frames. On top of HTTP:

* `stream` is accepted and ignored (a socket always streams); `background` is refused.
* Lanes, as the hosted mode has them: `stream_id` (1-256 of `[A-Za-z0-9_.-]`) names a lane, and
  every event of that lane's responses echoes it (the default lane's omit it). Each lane plays
  its creates in order, one at a time; lanes play at once and their events interleave. At most
  `MAX_ACTIVE` responses play at once per socket and further creates wait their turn; at most
  `MAX_NAMED_LANES` distinct named lanes per socket (the default lane does not count, and a lane
  once named stays counted). Errors: `invalid_stream_id`, `websocket_stream_limit_reached`,
  `previous_response_not_found` (from the engine) and, when the socket has lasted
  `Settings.websocket_lifetime_s` (60 minutes), `websocket_connection_limit_reached` before it is
  closed. A same-lane continuation that errors evicts the `store: false` parent it named from the
  socket's cache; an errored fork on another lane leaves it for its own lane.
* `generate: false` prepares state without model output: the response completes with an empty
  output and, when stored, its id works as `previous_response_id`. It needs no scenario.
* An error is a WebSocket `error` event, `{"type": "error", "status", "error": {message, type,
  code, param}}` (with `sequence_number` once the response's events began, and `stream_id`);
  the socket stays open for the next create.
* `store: false` works as over HTTP (replay the items), and, as the hosted mode does, the socket
  keeps its own `store: false` responses in memory while it is open, so `previous_response_id`
  continues them on the same socket (and nowhere else).
* `response.steer`: see `api.steering`.
* Closing the socket cancels the response being played (the sandbox worker running its program
  is replaced), as a disconnect does for an SSE stream.
* A turn's `cut_stream_after` fault closes the socket (code 1011) after that many events of the
  response; the response still finishes and is stored.

The API key check (in `api.app`) closes an unauthorised socket with code 1008 before this runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, WebSocket
from pydantic import ValidationError
from starlette.websockets import WebSocketDisconnect

from ptc_emulator.api import errors
from ptc_emulator.api.bodies import large_turn
from ptc_emulator.api.context import scope_of
from ptc_emulator.api.errors import validation_error
from ptc_emulator.api.journaling import Journaling
from ptc_emulator.api.routes.steering import Steer, Steering, Target, unsteerable
from ptc_emulator.api.routes.streaming import Play
from ptc_emulator.emulator import collector, jsonpieces, jsonreply, jsontext, messages
from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.release import dismantle
from ptc_emulator.emulator.responses.engine import OFF_LOOP_ITEMS, Engine, Prepared, Refused
from ptc_emulator.emulator.storage import ConnectionStore, StoreUnavailable
from ptc_emulator.emulator.wire import events
from ptc_emulator.emulator.wire.items import dump
from ptc_emulator.emulator.wire.request import CreateRequest, check_json

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter()

Event = dict[str, Any]

MAX_QUEUED_CREATES = 64
"""`response.create` frames one socket may have waiting; more are refused with an error event."""
MAX_QUEUED_CHARS = 32 * 2**20
"""The text of the `response.create` frames one socket may have waiting, in all (two largest
bodies' worth); more are refused with an error event. A large waiting frame is kept as its text
and parsed again when it plays: parsed, a 6 MB frame of 200,000 items took some 60 MB, so 64 of
them held 4 GB for one socket (issue 38)."""
MAX_ACTIVE = 16
"""Responses one socket plays at once; more creates wait."""
MAX_NAMED_LANES = 32
"""Distinct named lanes one socket may use; the default lane does not count."""
_STREAM_ID = re.compile(r"[A-Za-z0-9_.-]{1,256}")
_CUT_CODE = 1011
_LIFETIME_CODE = 1000


@router.websocket("/v1/responses")
async def responses_socket(websocket: WebSocket) -> None:
    await websocket.accept()
    engine = websocket.app.state.emulator.engine
    assert engine is not None, "the app's lifespan has not started"
    await Session(websocket, engine).serve()


async def frames(websocket: WebSocket) -> AsyncIterator[str | None]:
    """A socket's messages as text, until the client closes it: a binary one decoded as an HTTP
    body is (`json.detect_encoding`: UTF-8, a leading byte-order mark, UTF-16 or UTF-32; surrogates
    as they are), or None when its bytes do not decode so (refused as not JSON, as the same bytes
    are over HTTP; they were decoded with U+FFFD in place of what did not decode, and played so; a
    leading BOM or UTF-16 was refused, though the same body is accepted over HTTP). A text message
    that is not UTF-8 never gets here: the protocol closes the socket with 1007 (`wsflow`)."""
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        data = message.get("text")
        if data is None and message.get("bytes") is not None:
            try:
                raw = message["bytes"]
                data = raw.decode(json.detect_encoding(raw), "surrogatepass")
            except UnicodeDecodeError:
                yield None
                continue
        if data is not None:
            yield data


class _Cut(Exception):
    """A `cut_stream_after` fault: close the socket."""


@dataclass(slots=True)
class _Waiting:
    """A create waiting in its lane: its parsed frame, or (a large one) its text."""

    frame: dict[str, Any] | None
    text: str | None
    chars: int
    heavy: bool


class Session:
    """One socket: a reader that answers steers at once and hands each create to its lane, and a
    player per lane that plays that lane's creates one at a time, at most `MAX_ACTIVE` at once."""

    def __init__(self, websocket: WebSocket, engine: Engine) -> None:
        self.ws = websocket
        self.engine = engine
        self.lanes: dict[str | None, asyncio.Queue[_Waiting]] = {}
        self.players: set[asyncio.Task[None]] = set()
        self.named: set[str] = set()
        """Every named lane this socket has used (the count never goes down)."""
        self.waiting = 0
        """Creates handed to a lane that have not started playing."""
        self.waiting_chars = 0
        """Their frames' text, in all."""
        self.active = asyncio.Semaphore(MAX_ACTIVE)
        self.lane_of: dict[str, str | None] = {}
        """The lane that made each of this socket's responses (for the eviction rule)."""
        self.targets: dict[str, Target] = {}
        self.steering = Steering(lambda: engine.ids("steer"))
        self.local = ConnectionStore()
        """This socket's `store: false` responses, gone with the socket."""
        self._send_lock = asyncio.Lock()
        self.closed = asyncio.Event()

    async def serve(self) -> None:
        settings = self.ws.app.state.emulator.settings
        lifetime = asyncio.ensure_future(self._expire(settings.websocket_lifetime_s))
        reader = asyncio.ensure_future(self._read_all())
        closed = asyncio.ensure_future(self.closed.wait())
        try:
            await asyncio.wait([reader, closed], return_when=asyncio.FIRST_COMPLETED)
        finally:
            tasks = (reader, closed, lifetime, *self.players)
            for task in tasks:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _expire(self, after_s: float) -> None:
        await asyncio.sleep(after_s)
        limit = messages.socket_lifetime_reached(after_s)
        with contextlib.suppress(Exception):
            await self._error(limit, None)
            await self.ws.close(_LIFETIME_CODE, "connection lifetime reached")
        self.closed.set()

    # ---- reading ------------------------------------------------------------------------------

    async def _read_all(self) -> None:
        async for data in frames(self.ws):
            await self._dispatch(data)
            # A frame already received is handed over without a suspension: without this, a flood
            # of frames was answered back to back, every other client waiting (issue 38).
            await asyncio.sleep(0)

    async def _dispatch(self, data: str | None) -> None:
        """Answer a steer at once; queue a create; refuse anything else (None: bytes not UTF-8)."""
        if data is None:
            await self._error(messages.frame_not_json(), None)
            return
        large = len(data) >= OFF_LOOP_CHARS
        heavy = len(data) >= collector.LARGE_BYTES  # full collections held off while it is worked on
        if not large:
            frame, refused = _parsed(data)
        else:  # parsing a large frame takes its time: in a worker thread, as a large HTTP body
            with collector.held_off() if heavy else contextlib.nullcontext():
                async with large_turn(len(data)):
                    frame, refused = await asyncio.to_thread(_parsed, data)
        if refused is not None:
            await self._error(refused, None)
            return
        if not isinstance(frame, dict):  # an array, a string, a number: as HTTP answers such a body
            # (before, "Missing required parameter: 'type'", as if an object had come without it)
            got = errors.json_kind(frame)
            if large:
                dismantle(frame)
            await self._error(messages.frame_not_an_object(got), None)
            return
        kind = frame.get("type")
        # A large create is kept parsed when nothing waits on this socket (one such frame at most,
        # as an HTTP request holds its body); behind others, its text is queued and parsed again
        # when it plays. Whatever parsed frame is not kept is taken apart by the release thread,
        # not freed on the event loop (three sockets' 15 MB frames held every client 1.5-1.9 s).
        kept = large and kind == "response.create" and self.waiting == 0
        if large and kind != "response.steer" and not kept:
            head = {k: frame[k] for k in ("type", "stream_id") if k in frame}
            dismantle(frame)
            frame = head
        if kind == "response.steer":
            reference = frame.get("previous_response_id")
            target = self.targets.get(reference) if isinstance(reference, str) else None
            await self._send_all(self.steering.steer(frame, target))
        elif kind == "response.create":
            parsed = kept or not large
            queued = _Waiting(frame if parsed else None, None if parsed else data, len(data), heavy)
            if not await self._route(frame, queued) and kept:
                dismantle(frame)  # refused as routed
        elif kind is None:
            await self._error(messages.missing_parameter("type"), None)
        else:
            await self._error(messages.frame_type_invalid(kind), None)

    async def _route(self, frame: dict[str, Any], waiting: _Waiting) -> bool:
        """Hand a create to its lane (made on first use), or refuse it with the hosted code (False)."""
        given = frame.get("stream_id")
        if "stream_id" in frame and given is not None and not (isinstance(given, str) and _STREAM_ID.fullmatch(given)):
            await self._error(messages.stream_id_invalid(), None)
            return False
        lane: str | None = given
        if lane is not None and lane not in self.named:
            if len(self.named) >= MAX_NAMED_LANES:
                await self._error(messages.stream_limit_reached(MAX_NAMED_LANES), lane)
                return False
            self.named.add(lane)
        if self.waiting >= MAX_QUEUED_CREATES:
            busy = messages.too_many_queued(MAX_QUEUED_CREATES)
            await self._error(busy, lane)
            return False
        if self.waiting and self.waiting_chars + waiting.chars > MAX_QUEUED_CHARS:
            await self._error(messages.too_many_queued_chars(MAX_QUEUED_CHARS), lane)
            return False
        queue = self.lanes.get(lane)
        if queue is None:
            queue = self.lanes[lane] = asyncio.Queue()
            player = asyncio.ensure_future(self._play_lane(queue))
            self.players.add(player)
        self.waiting += 1
        self.waiting_chars += waiting.chars
        queue.put_nowait(waiting)
        return True

    # ---- playing ------------------------------------------------------------------------------

    async def _play_lane(self, queue: asyncio.Queue[_Waiting]) -> None:
        """One lane: its creates in order, each once a place among the active responses is free."""
        while True:
            waiting = await queue.get()
            frame, text, heavy, chars = waiting.frame, waiting.text, waiting.heavy, waiting.chars
            del waiting
            try:
                async with self.active:
                    self.waiting -= 1
                    self.waiting_chars -= chars
                    with collector.held_off() if heavy else contextlib.nullcontext():
                        if text is not None:  # parsed again (in a worker thread, as it first was) now it plays
                            async with large_turn(len(text)):
                                frame, _ = await asyncio.to_thread(_parsed, text)
                        large = chars >= OFF_LOOP_CHARS
                        await self._create(frame if isinstance(frame, dict) else {}, large, chars)
            except _Cut:
                with contextlib.suppress(Exception):
                    await self.ws.close(_CUT_CODE, "stream cut by a scenario fault")
                self.closed.set()
                return
            except (WebSocketDisconnect, OSError):
                self.closed.set()
                return  # the socket closed under us
            except Exception as e:
                if isinstance(e, StoreUnavailable):  # the database away: the 503 an HTTP request gets
                    log.warning("a WebSocket create: %s", e)
                else:
                    log.exception("unhandled error in a WebSocket create")
                try:
                    await self._error(e, None)
                except Exception:
                    self.closed.set()
                    return
            del frame, text  # not kept alive while the lane waits for its next create

    async def _create(self, frame: dict[str, Any], large: bool, chars: int = 0) -> None:
        """Play a create; a `large` frame's (see `OFF_LOOP_CHARS`) is validated in a worker thread,
        one of `chars` characters in its turn (`large_turn`)."""
        shared = getattr(self.ws.app.state.emulator, "shared", None)
        if shared is not None:
            # As before an HTTP request: the run-time scenarios the replicas share made the store's
            # (a read shared with the requests at once); the database away is the 503 at once.
            await shared.refresh()
        body = {k: v for k, v in frame.items() if k != "type"}
        stream_id = body.get("stream_id") if isinstance(body.get("stream_id"), str) else None
        raw: bytes | None = None
        if large:  # validated, and its text for the journal made, in a worker thread
            async with large_turn(chars):
                request, raw = await asyncio.to_thread(_validated_and_kept, body)
        else:
            request = _validated(body)
        if isinstance(request, EmulatorError):
            parent = body.get("previous_response_id")
            if large:  # taken apart by the release thread, not freed on the event loop
                dismantle(frame)
                del frame, body
            self._evict(parent if isinstance(parent, str) else None, stream_id)
            await self._error(request, stream_id)
            return
        if request.background:
            await self._error(messages.background_over_socket(), stream_id)
            return
        steers: list[Steer] = []
        if request.previous_response_id is not None:
            steers = self.steering.take(request.previous_response_id)
            if steers:
                request, raw = _prepend(body, steers), None
        await self._respond(request, body, stream_id, steers, raw)

    async def _respond(
        self,
        request: CreateRequest,
        body: dict[str, Any],
        stream_id: str | None,
        steers: list[Steer],
        raw: bytes | None = None,
    ) -> None:
        """Play one create (an explicit one, or an automatic successor carrying `steers`); `raw`:
        the body's JSON text, which the journal keeps instead of dumping a long request on the
        event loop."""
        scope = scope_of(self.ws.headers, request)
        journaling = Journaling(
            self.ws.app.state.emulator.journal,
            method="WS",
            path=self.ws.url.path,
            headers=self.ws.headers,
            body=request,
            scope=scope,
            raw=raw,
        )
        await self.engine.read_ahead(request)
        attempt = await self.engine.attempt_off_loop(
            request,
            scope=scope,
            generate=request.generate is not False,
            local=self.local,
            size=len(raw) if raw is not None else None,
        )
        if isinstance(attempt, Refused):
            journaling.refuse(attempt)
            self._evict(request.previous_response_id, stream_id)
            await self._failed(Target("", stream_id), attempt.error, stream_id, steers, None)
            return
        prepared = journaling.admit(attempt)
        if not prepared.store:  # only a socket-local parent can be evicted
            self.lane_of[prepared.response_id] = stream_id
        if request.previous_response_id in self.targets:
            self.targets[request.previous_response_id].continued = True
        target = Target(
            prepared.response_id,
            stream_id,
            unsteerable=unsteerable(prepared.response_id, request.conversation, request.context_management),
        )
        final: dict[str, Any] | None
        if request.generate is False:
            final = await self.engine.complete(prepared)
            journaling.finish(final)
            await self._send_all(self._numbered(events.replay(final), stream_id))
        else:
            final = await self._play(Play(self.engine, prepared, journaling), target, stream_id, steers)
        if final is None:
            self._evict(request.previous_response_id, stream_id)
            return
        target.final = final
        self.targets[target.id] = target
        notices, successors = self.steering.finished(target)
        await self._send_all(notices)
        if successors:
            await self._succeed(target, prepared, body, successors)

    async def _play(
        self, play: Play, target: Target, stream_id: str | None, steers: list[Steer]
    ) -> dict[str, Any] | None:
        """Send the response's events; its final response, or None after an error event."""
        self.targets[target.id] = target  # steerable while it plays
        try:
            try:
                await play.start()
            except EmulatorError as e:
                await self._failed(target, e, stream_id, steers, None)
                return None
            async for event in play.tell(None):
                assert event is not None
                await self._send(self._lane(event, stream_id))
            if play.error is not None:
                await self._failed(target, play.error, stream_id, steers, play.sequence.take())
                return None
            if play.cut:
                raise _Cut
            return play.final
        finally:
            play.cancel()

    async def _failed(
        self, target: Target, error: Exception, stream_id: str | None, steers: list[Steer], sequence_number: int | None
    ) -> None:
        """An error event; the steers this create carried, and any queued on it meanwhile, come back."""
        self.targets.pop(target.id, None)
        await self._error(error, stream_id, sequence_number)
        message = _reply(error).message
        await self._send_all(self.steering.lost(steers, message, stream_id))
        stranded = self.steering.take(target.id)
        await self._send_all(self.steering.lost(stranded, message, stream_id, code="response_not_active"))

    async def _succeed(self, target: Target, prepared: Prepared, body: dict[str, Any], steers: list[Steer]) -> None:
        """The automatic successor of a finished response, carrying the steers queued while it played."""
        final = target.final
        assert final is not None
        # A long conversation's successor (a store=false one replays it all) is made and validated
        # in a worker thread: 200,000 items took seconds of every client's time (issue 38).
        long = not final.get("store") and len(prepared.context) + len(final.get("output", [])) > OFF_LOOP_ITEMS
        made = _successor(target, final, prepared, body, steers, kept=long)
        successor, request, raw = await asyncio.to_thread(made) if long else made()
        if isinstance(request, EmulatorError):
            await self._send_all(self.steering.lost(steers, request.message, target.stream_id))
            return
        await self._respond(request, successor, target.stream_id, steers, raw)

    def _evict(self, parent: str | None, stream_id: str | None) -> None:
        """A continuation that errored on the lane that made its parent drops that parent from the
        socket's cache (a `store: false` parent is then gone); a fork from another lane keeps it."""
        if parent is not None and parent in self.lane_of and self.lane_of[parent] == stream_id:
            self.local.delete(parent)
            del self.lane_of[parent]

    # ---- sending ------------------------------------------------------------------------------

    def _numbered(self, numbered: list[Event], stream_id: str | None) -> list[Event]:
        return [self._lane(event, stream_id) for event in numbered]

    @staticmethod
    def _lane(event: Event, stream_id: str | None) -> Event:
        return {**event, "stream_id": stream_id} if stream_id is not None else event

    async def _send(self, event: Event) -> None:
        async with self._send_lock:  # held while a long event is written: the events keep their order
            await self.ws.send_text(await _text(event))

    async def _send_all(self, batch: list[Event]) -> None:
        for event in batch:
            await self._send(event)

    async def _error(self, error: BaseException, stream_id: str | None, sequence_number: int | None = None) -> None:
        error = _reply(error)
        event: Event = {"type": "error", "status": error.status, "error": error.body()["error"]}
        if error.headers:
            event["error"]["headers"] = dict(error.headers)
        if sequence_number is not None:
            event["sequence_number"] = sequence_number
        await self._send(self._lane(event, stream_id))


def _successor(
    target: Target,
    final: dict[str, Any],
    prepared: Prepared,
    body: dict[str, Any],
    steers: list[Steer],
    *,
    kept: bool,
) -> Callable[[], tuple[dict[str, Any], CreateRequest | EmulatorError, bytes | None]]:
    """The making of the automatic successor's body and its request (or the error refusing it),
    and when `kept`, its text for the journal."""

    def make() -> tuple[dict[str, Any], CreateRequest | EmulatorError, bytes | None]:
        items = [item for steer in steers for item in steer.items]
        successor = {k: v for k, v in body.items() if k not in ("generate",)}
        if final.get("store"):
            successor.update(input=items, previous_response_id=target.id)
        else:  # not stored: replay everything, as a store=false client would
            history = [dump(item) for item in prepared.context]
            successor.update(input=[*history, *final.get("output", []), *items], previous_response_id=None)
        if kept:
            return successor, *_validated_and_kept(successor)
        return successor, _validated(successor), None

    return make


def _prepend(body: dict[str, Any], steers: list[Steer]) -> CreateRequest:
    """The continuation of a steered response: the queued input goes first, in submission order."""
    given = body.get("input")
    if given is None:
        rest = []
    elif isinstance(given, str):
        rest = [{"type": "message", "role": "user", "content": given}]
    else:
        rest = list(given)
    return CreateRequest.model_validate({**body, "input": [*(item for s in steers for item in s.items), *rest]})


OFF_LOOP_CHARS = 16 * 2**10
"""A frame this long or longer is parsed, and its create validated (long lists a step at a time,
`wire.stepped`) and a refusal worded, in a worker thread, as an HTTP body of as many bytes."""


def _reply(error: BaseException) -> EmulatorError:
    """What the client is told of an error: its own wording, the database's 503 (as an HTTP request
    gets it, `database_unavailable` or `database_busy`), or the generic server error."""
    if isinstance(error, EmulatorError):
        return error
    if isinstance(error, StoreUnavailable):
        return errors.database_away(error)
    return messages.server_error()


def _validated_and_kept(body: dict[str, Any]) -> tuple[CreateRequest | EmulatorError, bytes | None]:
    """A long create's request (or its error), and the body's JSON text the journal keeps in the
    request's place (made a piece at a time): dumping a long request for the journal held the
    event loop a second for 200,000 items (issue 38)."""
    request = _validated(body)
    if isinstance(request, EmulatorError):
        return request, None
    return request, jsonpieces.dumps(body, separators=(",", ":")).encode("utf-8")


def _validated(body: dict[str, Any]) -> CreateRequest | EmulatorError:
    """A create's request, or the error that refuses it."""
    try:
        return CreateRequest.model_validate(body)
    except ValidationError as e:
        return validation_error(e.errors(), body)


async def _text(event: Event) -> str:
    """An event's JSON text; a long one (`response.completed` of a reply of megabytes) written in a
    worker thread, a piece at a time (`jsonreply`, as `api/sse.py`'s `framed` writes SSE): one
    `json.dumps` held the event loop throughout."""
    if not jsonreply.long(event):
        return json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return "".join(await asyncio.to_thread(jsonreply.texts, event, ensure_ascii=False))


def _parsed(data: str) -> tuple[Any, EmulatorError | None]:
    """A frame's JSON, or the error that refuses it."""
    try:
        if jsontext.depth(data) > jsontext.MAX_DEPTH:
            jsontext.loads(data)  # (raises `TooDeep`, as it words it)
        # A long frame a piece at a time, as a long HTTP body (`jsonpieces`): one `json.loads` of a
        # 15 MB frame held the interpreter, the event loop's turn too, for its whole length.
        frame = jsonpieces.loads(data)
    except jsontext.TooDeep as e:
        return None, messages.frame_too_deep(e.msg)
    except (ValueError, RecursionError):  # not JSON (an integer of over 4300 digits is a ValueError,
        return None, messages.frame_not_json()  # not a JSONDecodeError), or nested beyond the parser
    try:
        check_json(frame)  # a lone surrogate or NaN would fail only when echoed back
    except ValueError as e:
        return None, messages.frame_invalid(str(e))
    return frame, None
