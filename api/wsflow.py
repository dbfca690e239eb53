"""The WebSocket protocol the server runs: uvicorn's (websockets' sans-I/O), with pings under
backpressure.

uvicorn answers each ping with a pong written at once, whether or not the client reads: a client
that sends pings and never reads grew the server's write buffer without a bound (94 MB of pings,
86 MB more resident, for as long as it kept on). Here a ping that arrives while the write buffer
is over its high-water mark stops reading from that socket until the buffer drains; a client that
never reads then fills its own send buffer instead. Messages already had this bound (uvicorn reads
no further while the app has not taken the last one).

A peer that never reads is bounded in time as HTTP clients are (`api/httpflow.py`): a connection
whose transport stays paused for writing `write_pause_s` (`--write-pause-timeout`) is aborted, its
buffered frames dropped and the app told of the disconnect. The connection's own lifetime is left
alone (60 minutes, long by design).

uvicorn fed each socket read (up to 256 KiB, over 3,000 small frames) to the frame parser whole and
queued every message in it, and the app's reader takes a queued message without a suspension: one
client's flood of frames was answered back to back, every other client waiting 0.3-3 s (issue 38).
Here a read is fed to the parser in `FEED_BYTES` slices, one slice a step of the event loop; no
further slice is fed while `FRAME_DEPTH` messages wait for the app or while the client takes none of
the answers (the write buffer over its high-water mark), the rest kept and the socket not read until
then. The route's reader (`api/routes/websocket.py`) yields after each frame.

uvicorn kept each fragment of a message (a first frame with `fin` 0, then continuations) in a list
until the last: with 1-byte fragments some 50 bytes resident per byte of payload (a 16 MiB message
about 850 MB), and empty fragments, which count for nothing against `ws_max_size`, grew the list
without a bound for as long as the client sent them. Here a message's fragments are joined as they
come into one `bytearray` (what is kept is the payload, bounded by `ws_max_size`), and a message
may come in at most `MAX_FRAGMENTS` frames, empty ones counted: past it the socket is closed
(1009, the reason saying so) and the app told of the disconnect.

An upgrade the WebSocket layer cannot open (a missing or malformed `Sec-WebSocket-Key`, two `Origin`
headers, a version other than 13) was answered with a 400 in plain text; here it is answered as every
refusal before a socket opens is, OpenAI's envelope: the 400 with the same words, and a version
other than 13 the 426 with `Sec-WebSocket-Version: 13` (RFC 6455, 4.4).

A message over `COMPRESS_BYTES` goes to the client uncompressed, though the socket negotiated
permessage-deflate (which the websockets library, and so the SDK, offers): each message says
whether it is compressed (RFC 7692's RSV1 bit), and a client reads an uncompressed one as it is.
uvicorn compressed every message on the event loop in one step, about 20 MB a second for text that
compresses badly: one 16 MB message held every client about a second (60 MB: 5 s). Smaller
messages (every event of an ordinary answer) are compressed as before, and what the client sends
is inflated as before (bounded by `ws_max_size`; a frame over it is closed with 1009 before it
is read whole).

A client's compressed frame was inflated by the frame parser on the event loop in one step, some
16 MiB (the message limit) from a few KiB of text that compresses well: every other client waited
meanwhile. Here the bytes read are followed frame by frame (`_Frames`, the headers alone), and the
slice that ends a compressed frame of over `INFLATE_ON_LOOP` bytes is parsed (and so inflated) in
a worker thread, the socket read no further until it is done (zlib lets the other threads run
while it inflates); the parser's events are handled on the event loop after, in order, as ever.
"""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Any

from uvicorn._types import ASGIReceiveEvent
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.datastructures import Headers
from websockets.exceptions import InvalidHeaderValue, InvalidUpgrade
from websockets.frames import Frame
from websockets.http11 import Request, Response
from websockets.server import ServerProtocol

from ptc_emulator.api.httpflow import WRITE_PAUSE_S, PauseBound
from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError

__all__ = ["WebSocketProtocol"]


FEED_BYTES = 4 * 1024
"""The largest slice of a read fed to the frame parser in one go (at most 682 of the smallest frames,
6 bytes each; a 1 MiB frame arrives over 256 slices, each a step of the event loop's)."""

FRAME_DEPTH = 16
"""The most messages a socket may have parsed and waiting for the app; an SDK sends its next
create after the last one's events, so it has one waiting at most."""


COMPRESS_BYTES = 64 * 1024
"""The longest message compressed for the client (a few ms of deflate at worst); a longer one goes
uncompressed."""


INFLATE_ON_LOOP = 1024
"""The longest compressed frame (its bytes as sent) inflated on the event loop: some 1 MiB at most
once inflated (deflate packs 1,032 bytes to one at best), a millisecond or so. A longer one is
parsed in a worker thread."""


MAX_FRAGMENTS = 65_536
"""The most frames one message may come in (its first and its continuations, empty ones too); a
client that fragments at all sends a few per message."""


class WebSocketProtocol(WebSocketsSansIOProtocol):
    write_pause_s = WRITE_PAUSE_S
    _fragments = 0
    _joined: bytearray | None = None
    _paused_for_writes = False
    _pause: PauseBound | None = None
    _unfed = b""
    _feeding: asyncio.Handle | None = None
    _inflating: asyncio.Future[None] | None = None
    _frames: _Frames | None = None

    @classmethod
    def bounded(cls, *, write_pause_s: float) -> type[WebSocketProtocol]:
        """This protocol with the settings' write-pause limit."""
        return type(cls.__name__, (cls,), {"write_pause_s": write_pause_s})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn.accept = self._accept  # type: ignore[method-assign]

    def _accept(self, request: Request) -> Response:
        """The WebSocket layer's answer to the upgrade; a refusal in OpenAI's envelope."""
        response = ServerProtocol.accept(self.conn, request)
        if response.status_code == 101:
            return response
        return _in_envelope(_refusal(response.status_code, self.conn.handshake_exc), response)

    async def send(self, message: Any) -> None:
        """uvicorn's send; a message over `COMPRESS_BYTES` framed without the socket's compression."""
        if message["type"] != "websocket.send" or not self.conn.extensions or _size(message) <= COMPRESS_BYTES:
            await super().send(message)
            return
        await self.writable.wait()
        # From here uvicorn's send runs without a suspension (the wait returns at once now), so no
        # other message is framed while the extensions are set aside.
        extensions, self.conn.extensions = self.conn.extensions, []
        try:
            await super().send(message)
        finally:
            self.conn.extensions = extensions

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._pause = PauseBound(self.loop, self.write_pause_s)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._pause is not None:
            self._pause.resumed()
        self._unfed = b""
        if self._feeding is not None:
            self._feeding.cancel()
            self._feeding = None
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._pause is not None:
            self._pause.paused(self.transport)

    def data_received(self, data: bytes) -> None:
        """A read, fed to the parser a slice at a time while fewer than `FRAME_DEPTH` messages wait
        and the client takes the answers; the rest is kept and reading paused until they are."""
        self._unfed = self._unfed + data if self._unfed else data
        self._feed()

    def _feed(self) -> None:
        self._feeding = None
        if self._inflating is not None:  # fed on once the worker thread is done
            return
        while self._unfed:
            if self.disconnected or self.transport.is_closing():
                self._unfed = b""
                return
            if not self.close_sent and (self.queue.qsize() >= FRAME_DEPTH or not self.writable.is_set()):
                self._hold()
                return
            piece, self._unfed = self._unfed[:FEED_BYTES], self._unfed[FEED_BYTES:]
            if self.handshake_complete and self.conn.extensions:
                if self._frames is None:
                    self._frames = _Frames()
                end = self._frames.large_end(piece)
                if end is not None:  # a long compressed frame ends here: parsed (inflated) off the loop
                    piece, self._unfed = piece[:end], piece[end:] + self._unfed
                    self._inflate(piece)
                    return
            super().data_received(piece)
            if self._unfed and self.handshake_complete:  # the rest in a later step of the event loop
                self._hold()
                self._feeding = self.loop.call_soon(self._resume)
                return

    def _inflate(self, piece: bytes) -> None:
        """Parse `piece` in a worker thread (it ends a long compressed frame), reading no further
        meanwhile; its events are handled on the event loop once it is done (`_inflated`)."""
        self._hold()
        self._inflating = self.loop.run_in_executor(None, self.conn.receive_data, piece)
        self._inflating.add_done_callback(self._inflated)

    def _inflated(self, parsed: asyncio.Future[None]) -> None:
        """uvicorn's `data_received` after the parser has run: its events, then on to the rest."""
        self._inflating = None
        if self.disconnected or parsed.cancelled():
            return
        parsed.result()  # (the parser keeps its own errors in `parser_exc`: raised here, it is a bug)
        if self.conn.parser_exc is not None:
            self.handle_parser_exception()
            return
        self.handle_events()
        self._resume()

    def _hold(self) -> None:
        """Read no further while bytes are kept unparsed (or the client takes no answers)."""
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()
        if not self.writable.is_set():
            self._paused_for_writes = True

    def _resume(self) -> None:
        """Go on: feed what is kept, then read again once nothing is kept or waiting."""
        self._feeding = None
        if self.disconnected:
            return
        if self._unfed:
            self._feed()
        if (
            not self._unfed
            and self._feeding is None
            and self._inflating is None
            and self.read_paused
            and self.queue.empty()
            and self.writable.is_set()
        ):
            self.read_paused = False
            self.transport.resume_reading()

    async def receive(self) -> ASGIReceiveEvent:
        message = await self.queue.get()
        if self.queue.empty() and self._feeding is None:
            self._resume()
        return message

    def handle_ping(self) -> None:
        super().handle_ping()
        if not self.writable.is_set() and not self.read_paused and not self.disconnected:
            self.read_paused = self._paused_for_writes = True
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self._pause is not None:
            self._pause.resumed()
        super().resume_writing()
        if self._paused_for_writes:
            self._paused_for_writes = False
            if self.queue.empty() and self._feeding is None:  # otherwise the app's next receive resumes it
                self._resume()

    # A message's fragments, joined as they come (uvicorn listed them all until the last).

    def handle_text(self, event: Frame) -> None:
        self.curr_msg_data_type = "text"
        self._first_fragment(event)

    def handle_bytes(self, event: Frame) -> None:
        self.curr_msg_data_type = "bytes"
        self._first_fragment(event)

    def _first_fragment(self, event: Frame) -> None:
        self._fragments, self._joined = 1, None
        self.frames = [event.data]  # type: ignore[list-item]
        if event.fin:
            self.send_receive_event_to_app()

    def handle_cont(self, event: Frame) -> None:
        if self.close_sent or self.disconnected:
            return
        self._fragments += 1
        if self._fragments > MAX_FRAGMENTS:
            self._fail(1009, messages.socket_message_too_fragmented(MAX_FRAGMENTS))
            return
        if self._joined is None:
            self._joined = bytearray(self.frames[0] if self.frames else b"")
            self.frames = [self._joined]  # type: ignore[list-item]
        self._joined += event.data
        if event.fin:
            self.send_receive_event_to_app()

    def send_receive_event_to_app(self) -> None:
        if self._joined is not None and self.curr_msg_data_type == "bytes":
            self.frames = [bytes(self._joined)]
        self._fragments, self._joined = 0, None
        if self.curr_msg_data_type == "text" and not self.close_sent and not _utf8(self.frames):
            # A client's mistake, closed with 1007 and a reason, not logged as the server's error.
            self._fail(1007, messages.socket_text_not_utf8())
            return
        super().send_receive_event_to_app()

    def _fail(self, code: int, reason: str) -> None:
        """Close the socket at once (`code`, `reason`), dropping the message begun; the app sees the
        disconnect."""
        self.frames, self._fragments, self._joined = [], 0, None
        self.conn.fail(code, reason)
        self.handle_parser_exception()


class _Frames:
    """Where a client's frames end in the bytes it sends after the handshake, from their headers
    alone (RFC 6455 5.2), and which of them are compressed (RFC 7692: the RSV1 bit of a message's
    first frame). Only where a frame is parsed depends on it: the parser reads every byte itself."""

    def __init__(self) -> None:
        self.head = b""
        self.left = 0
        self.long = False
        """Whether the frame being read is compressed and longer than `INFLATE_ON_LOOP`."""
        self.compressed = False
        """Whether the message being read is compressed."""

    def large_end(self, data: bytes) -> int | None:
        """Where in `data` the first compressed frame longer than `INFLATE_ON_LOOP` to end in it
        ends (None: none ends in it)."""
        i = 0
        while i < len(data):
            if self.left:
                step = min(self.left, len(data) - i)
                self.left -= step
                i += step
                if not self.left and self.long:
                    self.long = False
                    return i
                continue
            self.head += data[i : i + 1]
            i += 1
            if len(self.head) < 2:
                continue
            first, second = self.head[0], self.head[1]
            extended = {126: 2, 127: 8}.get(second & 0x7F, 0)
            if len(self.head) < 2 + extended + (4 if second & 0x80 else 0):
                continue
            opcode = first & 0x0F
            self.left = int.from_bytes(self.head[2 : 2 + extended]) if extended else second & 0x7F
            self.head = b""
            if opcode in (1, 2):  # a message's first frame says whether it is compressed
                self.compressed = bool(first & 0x40)
            self.long = opcode < 8 and self.compressed and self.left > INFLATE_ON_LOOP
        return None


def _size(message: Any) -> int:
    """A `websocket.send` message's length (characters of its text, or bytes)."""
    data = message.get("bytes")
    if data is None:
        data = message.get("text") or ""
    return len(data)


def _utf8(frames: list[Any]) -> bool:
    """Whether a text message's bytes (one joined piece, or none) are UTF-8."""
    try:
        for piece in frames:
            bytes(piece).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _refusal(status: int, problem: Exception | None) -> EmulatorError:
    """The catalogue's error for an upgrade the WebSocket layer refused (`problem`, its reason)."""
    if isinstance(problem, InvalidHeaderValue) and problem.name.lower() == "sec-websocket-version":
        return messages.websocket_version_unsupported(problem.value or "")
    if problem is None or status >= 500:
        return messages.server_error()
    status = 426 if isinstance(problem, InvalidUpgrade) else 400
    return messages.websocket_handshake_invalid(str(problem).rstrip("."), status)


def _in_envelope(error: EmulatorError, refused: Response) -> Response:
    """`error` as the handshake's answer: its status, headers and envelope, and those headers of the
    WebSocket layer's refusal that say how to upgrade (`Upgrade`, `Connection`)."""
    body = json.dumps(error.body(), ensure_ascii=False, separators=(",", ":")).encode()
    headers = Headers(
        (k, v) for k, v in refused.headers.raw_items() if k.lower() not in ("content-type", "content-length")
    )
    for name, value in (error.headers or {}).items():
        headers[name] = value
    headers["Content-Type"] = "application/json"
    headers["Content-Length"] = str(len(body))
    return Response(error.status, HTTPStatus(error.status).phrase, headers, body)
