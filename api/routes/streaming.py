"""Streamed responses: `POST /v1/responses` with `stream: true`, and resuming a stored one with
`GET /v1/responses/{id}?stream=true&starting_after=N`.

A streamed create plays exactly as a JSON one (`Engine.prepare`, then `Engine.complete`, which
also stores it); only the telling differs. The events come from `emulator.events`, a pure
function of the response, so a stored response replays the very events it was streamed with.

A model that writes its output as it arrives (the model upstream) reports it while it plays
(`Trace.live`, `responses/live.py`): its items and its text deltas go out as they come, and the rest
of the events once the response has finished. Those deltas are the upstream's own pieces, so a
replay of the stored response (`events.replay`, its text cut into words) can number the events
after a live text differently. A background response, and one whose output starts with a
compaction item (made after the model played), are told from the finished response only.

When the first byte goes out
----------------------------
The engine's work starts as a task and gets one turn of the event loop before anything is sent:
an error raised before the work first has to wait (validation, an injected HTTP fault, a
scripted `error` turn, an exhausted scenario) is still an ordinary HTTP error with OpenAI's
envelope. Then `response.created` and `response.in_progress` go out at once; an error after that
can only be an in-stream `error` event, followed by the end of the stream.

While a program runs
--------------------
`: keep-alive` comments every `Settings.keepalive_s`, so proxies and clients with idle timeouts
keep the connection. If the client disconnects, the work is cancelled: the sandbox pool kills
and replaces the worker that was running the program (`sandbox.Pool.run`), and the journal
records the request with status 499. A `background: true` create is not cancelled by a
disconnect: it finishes and can be read (or streamed again) later.

A turn's `cut_stream_after` fault ends the stream after that many events, without a terminal
event; the response still finishes and is stored, so `starting_after` can resume it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from ptc_emulator.api.context import contract_headers, journaling_of
from ptc_emulator.api.journaling import Journaling
from ptc_emulator.api.sse import KEEP_ALIVE, EventStreamResponse, frame, framed
from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.history.cursor import Extension
from ptc_emulator.emulator.responses.engine import Engine, Prepared
from ptc_emulator.emulator.responses.live import LiveTelling
from ptc_emulator.emulator.wire import events
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.emulator.wire.response import ResponseStatus

__all__ = ["Play", "error_event", "stream_create", "stream_stored"]

log = logging.getLogger(__name__)

_POLL_S = 0.05

Event = dict[str, Any]


class Play:
    """One create told as stream events: the engine's work runs in a task, its events follow it.

    `start()` begins the work; `tell()` is the one play loop both transports (SSE and WebSocket)
    send from: numbered events, `None` whenever a keep-alive is due, ending early at a scenario's
    `cut_stream_after` (`cut`) or at an error after the first event (`error`, which the transport
    renders as its own kind of error event). `cancel()` stops the work unless `detach()` let it run
    on. The outcome is recorded in the journal when the work ends, however the stream ends.
    """

    def __init__(self, engine: Engine, prepared: Prepared, journaling: Journaling) -> None:
        self.engine = engine
        self.prepared = prepared
        self.journaling = journaling
        self.sequence = events.Sequencer()
        self.task: asyncio.Task[dict[str, Any]] | None = None
        self._detached = False
        self.final: dict[str, Any] | None = None
        """The finished response, once its terminal event went out."""
        self.error: Exception | None = None
        """What failed after the first event, if anything did."""
        self.cut = False
        """Whether a scenario's `cut_stream_after` ended the telling."""
        self._wake = asyncio.Event()
        self.live = LiveTelling(self._wake.set)
        """What the model reports while it plays, and the rest once it has finished."""

    @property
    def background(self) -> bool:
        return self.prepared.background

    async def start(self) -> None:
        """Start the work; raise the error it raises before it first has to wait, if any."""
        if self.background:
            self.journaling.response = await self.engine.run(self.prepared)
            self.journaling.finish(self.journaling.response)
            return
        if not self.prepared.compacts:
            self.prepared.trace.live = self.live
        self.task = asyncio.ensure_future(self.engine.complete(self.prepared))
        self.task.add_done_callback(self._journal)
        try:
            await asyncio.sleep(0)  # one step: the work runs until it first waits, or ends
        except BaseException:
            self.task.cancel()
            raise
        if self.task.done() and not self.task.cancelled():
            error = self.task.exception()
            if error is not None:
                raise error

    async def tell(self, keepalive_s: float | None) -> AsyncIterator[Event | None]:
        """The events to send, and `None` when a keep-alive is due (see the class docstring)."""
        delivery = self.prepared.delivery
        cut = delivery.cut_stream_after if delivery is not None else None
        sent = 0
        try:
            async for event in self.events(keepalive_s):
                if event is None:
                    yield None
                    continue
                if cut is not None and sent >= cut:
                    self.detach()
                    self.cut = True
                    return
                yield event
                sent += 1
                if event["type"] in events.TERMINAL:
                    self.final = event["response"]
        except Exception as e:  # after the first event an error can only be an event
            if not isinstance(e, EmulatorError):
                log.exception("unhandled error in a streamed response")
            self.error = e

    async def events(self, keepalive_s: float | None) -> AsyncIterator[Event | None]:
        """The events, numbered; `None` each `keepalive_s` while waiting. Raises what the work raises."""
        start = events.skeleton(self.engine.response(self.prepared, [], status=ResponseStatus.IN_PROGRESS))
        for event in events.opening(start):
            yield self.sequence.number(event)
        while True:
            for event in self.live.take():
                yield self.sequence.number(event)
            if self.task is None:
                final = await wait_finished(self.engine, self.prepared.response_id, keepalive_s, self.prepared.scope)
            elif self.task.done():
                final = self.task.result()
            elif await self._woken(keepalive_s):
                continue
            else:
                final = None
            if final is not None:
                break
            yield None
        output = final.get("output", [])
        if not self.live.agrees(output):
            log.warning("response %s: its output differs from what was streamed live", self.prepared.response_id)
        for event in [*self.live.rest(output), events.closing(final)]:
            yield self.sequence.number(event)

    def detach(self) -> None:
        """Let the work finish (and be stored) even though nobody listens any more."""
        self._detached = True

    def cancel(self) -> None:
        if self.task is not None and not self.task.done() and not self._detached:
            self.task.cancel()

    async def _woken(self, keepalive_s: float | None) -> bool:
        """Wait until the work ends or the model reports live events; False if `keepalive_s`
        passed first."""
        assert self.task is not None
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            done, _ = await asyncio.wait({self.task, woken}, timeout=keepalive_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
        self._wake.clear()
        return bool(done)

    def _journal(self, task: asyncio.Task[dict[str, Any]]) -> None:
        """Journal how the play ended: finished, failed, or closed by the client."""
        if task.cancelled():
            self.journaling.fail(messages.client_closed())
            return
        error = task.exception()
        if error is None:
            self.journaling.finish(task.result())
        elif isinstance(error, EmulatorError):
            self.journaling.fail(error)
        else:
            log.error("unhandled error in a streamed response", exc_info=error)
            self.journaling.fail(messages.server_error())


async def wait_finished(
    engine: Engine, response_id: str, timeout: float | None, scope: str | None
) -> dict[str, Any] | None:
    """A background response once it has finished, or None if `timeout` passed first."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while True:
        # A long record's read takes its time (its input items read too): in a worker thread.
        current = await asyncio.to_thread(engine.retrieve, response_id, scope=scope)
        if current.get("status") not in (ResponseStatus.QUEUED, ResponseStatus.IN_PROGRESS):
            return current
        if deadline is not None and loop.time() >= deadline:
            return None
        wait = _POLL_S if deadline is None else min(_POLL_S, max(deadline - loop.time(), 0))
        await asyncio.sleep(wait)


def error_event(error: BaseException) -> Event:
    """The in-stream `error` event for an error after the first byte (not yet numbered)."""
    if isinstance(error, EmulatorError):
        code = error.code if error.code is not None else error.type
        return {"type": "error", "code": code, "message": error.message, "param": error.param}
    return {"type": "error", "code": "server_error", "message": messages.server_error().message, "param": None}


async def stream_create(
    request: Request, engine: Engine, body: CreateRequest, scope: str | None, cursor: Extension | None = None
) -> Response:
    """`POST /v1/responses` with `stream: true`."""
    journaling = journaling_of(request, body, scope, await request.body())
    size = len(await request.body())
    prepared = journaling.admit(await engine.attempt_off_loop(body, scope=scope, cursor=cursor, size=size))
    play = Play(engine, prepared, journaling)
    await play.start()
    keepalive_s = request.app.state.emulator.settings.keepalive_s
    return EventStreamResponse(_frames(play, keepalive_s), on_close=play.cancel, headers=contract_headers(prepared))


async def _frames(play: Play, keepalive_s: float) -> AsyncIterator[bytes]:
    async for event in play.tell(keepalive_s):
        yield KEEP_ALIVE if event is None else await framed(event)
    if play.error is not None:
        yield frame(play.sequence.number(error_event(play.error)))
    with contextlib.suppress(Exception):  # (a write that failed is logged by the journal)
        await play.journaling.stored()  # the stream ends once its entry is in a shared journal


async def stream_stored(
    request: Request, engine: Engine, response_id: str, starting_after: int | None, scope: str | None
) -> Response:
    """`GET /v1/responses/{id}?stream=true`: the stored response's events after `starting_after`
    (one made in another scope than `scope` is a 404, as for `retrieve`). The record is read in a
    worker thread, as the plain GET reads it (200,000 input items: most of a second)."""
    await asyncio.to_thread(engine.retrieve, response_id, scope=scope)  # a 404 before the first byte
    keepalive_s = request.app.state.emulator.settings.keepalive_s
    return EventStreamResponse(_replay(engine, response_id, starting_after, keepalive_s, scope))


async def _replay(
    engine: Engine, response_id: str, starting_after: int | None, keepalive_s: float, scope: str | None
) -> AsyncIterator[bytes]:
    sequence = events.Sequencer()
    try:
        while (final := await wait_finished(engine, response_id, keepalive_s, scope)) is None:
            yield KEEP_ALIVE
        for event in events.replay(final):
            sequence.next = event["sequence_number"] + 1
            if starting_after is None or event["sequence_number"] > starting_after:
                yield await framed(event)
    except Exception as e:
        if not isinstance(e, EmulatorError):
            log.exception("unhandled error while replaying a stream")
        yield frame(sequence.number(error_event(e)))
