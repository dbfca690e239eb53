"""The HTTP protocol the server runs: uvicorn's (httptools), with the request head bounded and its
refusals in OpenAI's error envelope.

uvicorn puts no bound on a request's head: httptools hands each header over whole, so a client
that sent one header value without its end had the server keep all of it (a 200 MB `X-Big:` value,
230 MB more resident, as much again for each such client). Here the bytes a request's head takes
(its request line and headers) are counted as they arrive, and measured whole once they end (a head
that began and ended within one read was never counted unfinished, and was served at 64-130 KiB);
past `HEAD_BYTES` the request is the 431 `header_fields_too_large` and the connection is closed.
A request asking to switch to a protocol other than WebSocket (`Upgrade: h2c`) is the 400
`upgrade_not_supported`: the parser reads no body after such a head, so uvicorn served it without
its body and never read the requests after it. A request uvicorn's parser refuses (not HTTP, a
bad header) is the 400 `invalid_http_request` in the envelope, where uvicorn answered `text/plain`.
A head refused behind pipelined requests still unanswered waits for their answers (uvicorn wrote its
refusal at once and closed, so they were lost).

uvicorn bounds no connection in time either: its keep-alive timer is armed only after a response,
and any byte that arrives cancels it. A client that connected and sent nothing was held for good (five
thousand such connections were all still open 40 s on), one that sent its head a byte at a time held
it as long as it kept on, and one that never read kept its connection and its unsent reply until it
closed. Three deadlines bound them:

- the head deadline (`head_timeout_s`, `--head-timeout`): a request's line and headers must have
  arrived within it, counted from the connection's start for its first request and from a request's
  first byte for the next ones (between requests an idle connection is uvicorn's keep-alive's,
  `KEEP_ALIVE_S`). Past it a client that began a request, with no response of the connection's under
  way, is answered the 408 `request_timeout` in the envelope; otherwise (nothing sent, or an earlier
  response still being written) the connection is just closed;
- the body deadline (`body_timeout_s`, `--body-timeout`): a request's body must have arrived whole
  within it of its headers' end. A client that sent its head and then trickled its body (a byte every
  few seconds) or stopped held the connection, its buffered body and the request's app as long as it
  kept on. Time the server itself holds the body back is not the client's: while reading is paused
  (the app has not taken what came), a pipelined request waits for the one before it, or its
  `100 Continue` is not yet sent, the deadline starts again. Past it, with no response under way, the
  408 `request_timeout` in the envelope, the request's app told of the disconnect; otherwise the
  connection is just closed;
- the body's framing: after the headers, uvicorn hands a chunked body's trailer fields over whole
  too (httptools gathers a field's value by copying it at each piece that arrives), so one trailer
  value that never ended grew without bound and each piece of it held the event loop longer (a
  100 MB one stalled every other client for seconds). The bytes that arrive while no body comes
  (trailers, chunk size lines and their extensions) are counted, from the last piece of body; past
  `HEAD_BYTES` the request is the 431 (or, with its response begun, the connection is closed). A
  chunked body is fed in slices of `CHUNKED_FEED_BYTES` from its first byte (the parser says what
  of a slice was body, not where), and a slice's framing is all counted as if it came after its
  last piece of body, so the bound holds however the bytes were read (a 140 KiB trailer sent with
  its body in one write was served), give or take one such slice. Framing never fills the body's
  buffer, so reading never paused for it: chunks of one byte each behind 8,000 bytes of extension
  (each slice holding a piece of body) were read at full speed, 1.2-1.7 GB in 10 s. A chunked body's
  framing in all may take `HEAD_BYTES` and `FRAMING_PER_BODY_BYTE` bytes for each byte of its body
  (one-byte chunks take 5); past it, the 431 as above;
- the write-pause limit (`write_pause_s`, `--write-pause-timeout`): a connection whose transport
  is paused for writing (the server's write buffer over its high-water mark) and whose client reads
  nothing of it that long is aborted: its buffered reply is dropped and the request's app sees
  the disconnect, which ends its work. `api/wsflow.py` bounds a WebSocket peer that never reads so.

uvicorn fed each socket read (up to 256 KiB) to the parser whole, and queued every pipelined request
it held: 20,000 `GET /_emulator/health` sent in one write were parsed in a few steps of the event loop
(the longest 168 ms of its CPU) and all queued at once (19,994 requests, each with its scope and
cycle), and every other client waited behind them for up to 1.8 s. Here a read is fed to the parser
in slices cut so that no more than `PIPELINE_DEPTH` requests are ever queued on a connection (a head
ends with an empty line, CRLF CRLF, so a slice holding n of them ends at most n heads, and the one
begun before it); at the bound the rest of the read is kept unparsed and the socket is not read, and
parsing goes on once the queue has drained to half, the answers in their order. Deadlines do not run
against the client while its bytes wait so. A `Content-Length` body holds no head end the parser
would see: its slices are cut by the body's length (from the header, less the body come so far), and
head ends are looked for only after it (a body of `\r\n\r\n` repeated was cut at each, thousands of
4-byte slices a read: a 16 MiB one took 3.7-14 s, and held other clients up to 1.8 s). A chunked
body ends with a line of `0` (its last chunk): its chunks are walked from size line to size line (a
body fed from its first byte; a slice ends before a size line it does not hold whole, unless the line
is all it holds), their data skipped, and head ends are looked for only from its last chunk's line (a
chunked body's first head end there ends its slice, as the body's end is there). Where the walk is
lost, from the slice's first `\n0`: data of `\n0\r\n\r\n` repeated, or chunks written `02\r\n\r\n\r\n`,
cut every read into slices of a few bytes when that was all (an 8 MB body took 3-4.5 s of the
server's CPU, against 0.1-0.4 s framed plainly; walked, 0.02 s and 0.4 s). Runs of chunks of 1 to 15
bytes are skipped by one pattern; larger ones a line at a time (16-byte chunks: 0.6 s against 0.2 s).

A refusal found within a body (framing past its bound, bytes the parser cannot read) is the refused
request's: queued behind requests still unanswered, it takes that request's place in the queue (their
answers first, in order, then it; the refusal was written at once and the connection closed, so their
answers were lost), nothing after it read. A response begun before its request's body has all come
(the 413 for a `Content-Length` past the limit, any refusal of a body the app does not read) says
`connection: close`, and the connection is closed after it: the server read the unread body on,
discarding it, to find the next request (4.2 GB in 10 s of a `Content-Length` of 10^12).

A chunked body's chunks are each a piece of body, one call of the parser's (and of uvicorn's, which
copied the body gathered so far at each: `bytes +=`). A body of one-byte chunks was some 43,000 calls
a read, parsed in one step of the event loop (a 2 MB create held other clients 0.3-0.7 s). A step now
parses slices until `PIECES_PER_STEP` pieces have come (or `SLICES_PER_STEP` slices), then leaves the
rest of the read to the loop's next step, reading paused meanwhile (`HoldingFlow`: uvicorn resumes
reading each time the app asks for more body); the pieces a slice held reach uvicorn joined, once a
slice.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable

from uvicorn._types import ASGISendEvent
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError

__all__ = [
    "BODY_TIMEOUT_S",
    "CHUNKED_FEED_BYTES",
    "HEAD_BYTES",
    "HEAD_TIMEOUT_S",
    "PIECES_PER_STEP",
    "PIPELINE_DEPTH",
    "SLICES_PER_STEP",
    "WRITE_PAUSE_S",
    "HttpProtocol",
    "PauseBound",
]

HEAD_BYTES = 64 * 1024
"""The most a request's line and headers may take together (node's default is 16 KiB, nginx's 32 KiB
in four buffers); an SDK's request head is well under 2 KiB."""

HEAD_TIMEOUT_S = 30.0
"""The default head deadline: an SDK sends its head in one write, well within it on any link."""

BODY_TIMEOUT_S = 60.0
"""The default body deadline: an SDK writes its body right after its head; the largest body the
default `--max-body-bytes` allows (16 MiB) arrives within it at 300 KB/s."""

WRITE_PAUSE_S = 60.0
"""The default write-pause limit: a client that reads nothing for a minute while the server has a
reply's worth waiting for it is gone or hostile; a slow reader drains some and resets the clock."""

PIPELINE_DEPTH = 32
"""The most requests a connection may have parsed and waiting behind the one being answered; an SDK
sends its next request after the answer, so it never has one waiting."""

FEED_BYTES = 64 * 1024
"""The largest slice of a read fed to the parser in one go (a body's bytes pass through in these)."""

CHUNKED_FEED_BYTES = 8 * 1024
"""The largest slice of a chunked body fed in one go: the parser says what of a slice was body, not
where, so the bytes of framing before a slice's last piece of body may be counted as after it (the
framing bound is met within this)."""

PIECES_PER_STEP = 512
"""The pieces of body a step of the event loop hands to the app at most, give or take one slice: a
chunked body comes in as many pieces as it has chunks (each a call of the parser's, and of the
server's), and one of one-byte chunks held the loop for every read (256 KiB, some 43,000 pieces)."""

SLICES_PER_STEP = 64
"""The slices a step of the event loop parses at most: a read is cut at head ends (and a chunked body
at its first), and a body of `\r\n\r\n` repeated cut a read into thousands of 4-byte slices, all
parsed in one step (other clients waited up to 1.8 s behind a 16 MiB one)."""

FRAMING_PER_BODY_BYTE = 16
"""A chunked body's framing in all (chunk size lines, their extensions, trailers) may take at most
`HEAD_BYTES` and this many bytes for each byte of its body: one-byte chunks take 5 (`1\r\nx\r\n`),
and framing never fills the body's buffer, so reading never paused for it (a client sending chunks
of one byte each behind 8,000 bytes of extension had 1.2-1.7 GB read in 10 s)."""

_CHUNKED = (b"hunked", b"HUNKED")
"""What a head whose body comes chunked holds (`Transfer-Encoding: chunked`, in any case)."""

_HEAD_END = b"\r\n\r\n"
"""How every head the parser reads ends (uvicorn's parser is lenient only about data after a close)."""

_SIZE = re.compile(rb"[0-9a-fA-F]*+")
"""A chunk size line's size (hex digits, before its extensions or its CRLF)."""

_SIZE_LINE = re.compile(rb"([0-9a-fA-F]*+)[^\n]*+\n")
"""A chunk size line whole: its size, then its extensions and its CRLF (possessive: no backtracking)."""

_SMALL_CHUNKS = re.compile(
    rb"(?:"
    + b"|".join(
        rb"0*+%s(?![0-9a-fA-F])[^\n]*+\n[\s\S]{%d}\r\n" % (b"[%x%X]" % (size, size), size) for size in range(1, 16)
    )
    + rb")*+"
)
"""A run of chunks of 1 to 15 bytes each, skipped in one go: walked one at a time, a body of one-byte
chunks took twice the CPU time it takes to parse."""

_REASONS = {400: b"Bad Request", 408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


class PauseBound:
    """A transport's write pause, bounded: `paused()` when the transport pauses writing, `resumed()`
    when it resumes. A pause in which `seconds` go by with nothing of the write buffer taken aborts
    the transport (closing would wait for the buffer to drain, which is what never happens); a client
    that reads, however slowly, takes some each time and starts the count again, so a large reply
    to a slow link is not cut."""

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        self._loop, self._seconds = loop, seconds
        self._timer: asyncio.TimerHandle | None = None

    def paused(self, transport: asyncio.WriteTransport) -> None:
        if self._timer is None and not transport.is_closing():
            self._arm(transport)

    def resumed(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, transport: asyncio.WriteTransport) -> None:
        left = transport.get_write_buffer_size()
        self._timer = self._loop.call_later(self._seconds, self._expired, transport, left)

    def _expired(self, transport: asyncio.WriteTransport, left: int) -> None:
        self._timer = None
        if transport.is_closing() and not transport.get_write_buffer_size():
            return
        if transport.get_write_buffer_size() < left:  # taken since: the client reads, if slowly
            self._arm(transport)
        else:
            transport.abort()


class HoldingFlow(FlowControl):
    """uvicorn's flow control of a connection's reading, which also stays paused while the protocol
    holds bytes read and not yet parsed (`holding`): uvicorn resumes reading whenever the app asks
    for more of the body, and each read came on top of the bytes still held. `settle()` once the
    held bytes change: reading resumes when none are held, unless uvicorn itself paused it."""

    def __init__(self, transport: asyncio.Transport, holding: Callable[[], bool]) -> None:
        super().__init__(transport)
        self._holding = holding
        self._wanted_paused = False

    def pause_reading(self) -> None:
        self._wanted_paused = True
        self.settle()

    def resume_reading(self) -> None:
        self._wanted_paused = False
        self.settle()

    def settle(self) -> None:
        if self._wanted_paused or self._holding():
            super().pause_reading()
        else:
            super().resume_reading()


class HttpProtocol(HttpToolsProtocol):
    head_timeout_s = HEAD_TIMEOUT_S
    body_timeout_s = BODY_TIMEOUT_S
    write_pause_s = WRITE_PAUSE_S
    flow: HoldingFlow
    _in_head = True
    """Between a request's first byte (or the connection's start) and its headers' end."""
    _head_bytes = 0
    _head_begun = False
    _head_seen = 0
    """What the parser has handed over of the head being read (its target and fields, each with the
    bytes that frame it)."""
    _slice: bytes | None = None
    """The slice being parsed, when it began within a head (`_slice_before` of its bytes before it)."""
    _slice_before = 0
    _tail = b""
    """The last bytes of the slice before, when it ended within a head (where a head's end may begin)."""
    """A request's first byte has come and its headers have not ended."""
    _framing_bytes = 0
    _framing_total = 0
    """Framing bytes of the chunked body being read, in all (see `FRAMING_PER_BODY_BYTE`)."""
    _body_total = 0
    _content_length = 0
    """The `Content-Length` of the request whose head is being read (0 when it has none)."""
    _body_left = 0
    """Bytes of a `Content-Length` body still to come: a slice ends at most there, and head ends are
    looked for only after it (a body of `\r\n\r\n` repeated was cut at each)."""
    """Bytes that came after the headers since the last piece of body (trailers, chunk size lines)."""
    _body_came = False
    _chunked = False
    """The request whose body is being read came chunked (its framing is counted in smaller slices)."""
    _slice_len = 0
    _pieces: list[bytes]
    """The pieces of body the slice being parsed held so far (passed on at its end, or its request's)."""
    _slice_used = 0
    """Bytes of the slice being parsed that were a head or a piece of body (the rest is framing)."""
    _began_before = False
    """The slice being parsed began within a head, whose first `_slice_before` bytes came before it."""
    _head_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _pause: PauseBound | None = None
    _unparsed = b""
    """Bytes read and not yet fed to the parser (from `_at` on): the rest of a read held back while
    `PIPELINE_DEPTH` requests wait."""
    _at = 0
    _feeding = False
    _step_pieces = 0
    """Pieces of body parsed in this step of the event loop (see `PIECES_PER_STEP`)."""
    _feed_handle: asyncio.Handle | None = None
    _chunk_skip = -1
    """In a chunked body fed from its first byte: the bytes from `_at` on that are the rest of a chunk's
    data and its CRLF (the next size line follows them); -1 where this is not known."""
    _chunk_part = b""
    """The start of a size line begun before `_at` (its zeros but one dropped), to be read with its end."""
    _chunk_begins = False
    """The slice being parsed ends at a chunked head's end: its body begins with the next slice."""
    _upgraded = False
    _refusal: EmulatorError | None = None
    """A head refused while requests before it on the connection were still unanswered: sent once
    they have been (in their order), nothing of the connection read or parsed meanwhile."""

    @classmethod
    def bounded(
        cls, *, head_timeout_s: float, write_pause_s: float, body_timeout_s: float = BODY_TIMEOUT_S
    ) -> type[HttpProtocol]:
        """This protocol with the settings' deadlines (uvicorn makes the protocol from a class)."""
        deadlines = {"head_timeout_s": head_timeout_s, "write_pause_s": write_pause_s, "body_timeout_s": body_timeout_s}
        return type(cls.__name__, (cls,), deadlines)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._pieces = []
        super().connection_made(transport)
        self.flow = HoldingFlow(transport, self._held)
        self._pause = PauseBound(self.loop, self.write_pause_s)
        self._arm_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._unparsed, self._at = b"", 0
        if self._feed_handle is not None:
            self._feed_handle.cancel()
            self._feed_handle = None
        self._disarm_head()
        self._disarm_body()
        if self._pause is not None:
            self._pause.resumed()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._pause is not None:
            self._pause.paused(self.transport)

    def resume_writing(self) -> None:
        if self._pause is not None:
            self._pause.resumed()
        super().resume_writing()

    def _refused(self) -> bool:
        return self._refusal is not None or self.transport.is_closing()

    def handle_websocket_upgrade(self) -> None:
        if self._refused():
            return  # its head was refused as too large
        self._upgraded = True  # what followed the upgrade request in its read is dropped, as uvicorn did
        self._disarm_head()
        self._disarm_body()
        if self._pause is not None:
            self._pause.resumed()  # the WebSocket protocol bounds its own pauses
        super().handle_websocket_upgrade()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_begun, self._head_seen, self._chunked, self._content_length = True, 0, False, 0
        self._chunk_skip, self._chunk_part = -1, b""
        if not self._refused():
            self._arm_head()

    def _arm_head(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_expired)

    def _disarm_head(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_expired(self) -> None:
        self._head_timer = None
        if self._refused():
            return
        if self._held():
            self._arm_head()  # the server holds the client's bytes back, not the client: its clock starts again
            return
        underway = self.cycle is not None and not self.cycle.response_complete
        if self._head_begun and not underway and not self.pipeline:
            self._refuse(messages.head_timeout(self.head_timeout_s))
        else:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._refusal is not None:
            return  # refused after the requests before it: nothing more of the client's is read
        if self._at < len(self._unparsed):
            self._unparsed = self._unparsed[self._at :] + data
        else:
            self._unparsed = data
        self._at = 0
        self._feed()

    def _held(self) -> bool:
        """Bytes of the client's wait unparsed, the server answering the requests before them."""
        return self._at < len(self._unparsed)

    def _feed(self) -> None:
        """The unparsed bytes to the parser, a slice at a time, while fewer than `PIPELINE_DEPTH`
        requests wait; what is left waits, the socket unread, for the queue to drain to half."""
        self._feed_handle = None
        if self._feeding:  # a callback of the parser's ended a response: the running loop goes on
            return
        self._feeding, self._step_pieces = True, 0
        slices = 0
        try:
            while self._held() and not self._upgraded and self.parser is not None:
                if self._refused():
                    self._unparsed, self._at = b"", 0
                    return
                room = PIPELINE_DEPTH - len(self.pipeline) - 1  # the request begun may end in the slice too
                if room <= 0:
                    break
                if self._step_pieces >= PIECES_PER_STEP or slices >= SLICES_PER_STEP:  # the rest in the next step
                    self._feed_handle = self.loop.call_soon(self._feed)
                    break
                slices += 1
                end = self._slice_end(room)
                piece = self._unparsed[self._at : end]
                self._at = end
                self._parse(piece)
        finally:
            self._feeding = False
        if not self._held() or self._upgraded or self.parser is None:
            self._unparsed, self._at = b"", 0  # after an upgrade the transport is the WebSocket's
        if not self._upgraded and not self.transport.is_closing():
            self.flow.settle()  # paused while bytes are held, resumed once none are (unless uvicorn paused it)

    def _slice_end(self, room: int) -> int:
        """Where the next slice ends: at most `FEED_BYTES` on, and just after the `room`-th head end
        in it if there are that many (a body's bytes may hold some too: the slice is only shorter)."""
        most = CHUNKED_FEED_BYTES if self._chunked and not self._in_head else FEED_BYTES
        data, limit, end = self._unparsed, min(len(self._unparsed), self._at + most), self._at
        start = end
        if not self._in_head and self._body_left:  # a Content-Length body: no head ends in it
            if self._at + self._body_left >= limit:
                return limit
            end = self._at + self._body_left
        elif not self._in_head and self._chunked:  # a chunked body ends with a line of `0` (its last chunk)
            last, cut = self._last_chunk(limit)
            if last < 0:
                return cut
            start = last
        for _ in range(room):
            found = data.find(_HEAD_END, max(end, start), limit)
            if found < 0:
                return limit
            chunked = (self._chunked and end == self._at) or any(data.find(word, end, found) >= 0 for word in _CHUNKED)
            end = found + len(_HEAD_END)
            if chunked:  # its body is fed in the smaller slices from its first byte
                self._chunk_begins = self._in_head
                return end
        return end

    def _last_chunk(self, limit: int) -> tuple[int, int]:
        """Within a chunked body: where its last chunk's size line may begin in the slice up to `limit`
        (head ends are looked for from there), or -1 and where the slice ends. Its chunks are walked
        from size line to size line, their data skipped (data of `\\n0\\r\\n\\r\\n` repeated, or `02` chunks
        of a CRLF, had a read cut into slices of a few bytes); where the walk was lost (a body not fed
        from its first byte), from the slice's first `\\n0`."""
        data, at = self._unparsed, self._at
        if self._chunk_skip < 0:
            return (at if data.startswith(b"0", at) else data.find(b"\n0", at, limit)), limit
        pos, part = at + self._chunk_skip, self._chunk_part
        if part:  # a size line begun before the slice
            line = data.find(b"\n", at, limit)
            if line < 0:
                self._chunk_part = b"0" + (part + data[at:limit]).lstrip(b"0")[:32]
                return -1, limit
            self._chunk_part, size = b"", int(_SIZE.match(part + data[at:line])[0] or b"0", 16)  # type: ignore[index]
            if not size:  # the last chunk
                self._chunk_skip = -1
                return at, limit
            pos = line + 1 + size + 2
        while pos < limit:
            pos = _SMALL_CHUNKS.match(data, pos, limit).end()  # type: ignore[union-attr]
            if pos >= limit:
                break
            found = _SIZE_LINE.match(data, pos, limit)
            if found is None:  # the size line ends after the slice: it ends before it, or the line's start is kept
                if pos > at:
                    self._chunk_skip = 0
                    return -1, pos
                self._chunk_part = b"0" + data[pos:limit].lstrip(b"0")[:32]
                return -1, limit
            size = int(found[1] or b"0", 16)
            if not size:  # the last chunk (or no size, which the parser refuses)
                self._chunk_skip = -1
                return pos, limit
            pos = found.end() + size + 2  # its data and their CRLF
        self._chunk_skip = pos - limit
        return -1, limit

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._refusal is not None:
            if not self.transport.is_closing():
                self.flow.pause_reading()
                if not self.pipeline and (self.cycle is None or self.cycle.response_complete):
                    self._refuse(self._refusal)
            return
        if self._held() and not self.transport.is_closing():  # reading stays paused: the held bytes come first
            if len(self.pipeline) <= PIPELINE_DEPTH // 2 and self._feed_handle is None:
                self._feed_handle = self.loop.call_soon(self._feed)

    def _parse(self, data: bytes) -> None:
        counting = self._in_head
        if counting:
            self._slice, self._slice_before = data, self._head_bytes
            self._head_bytes += len(data)
        self._body_came, self._slice_used, self._began_before = False, 0, counting
        self._slice_len = len(data)
        try:
            super().data_received(data)
            self._pass_body()
            if self._chunk_begins:
                self._chunk_begins = False
                if self._chunked and not self._in_head:
                    self._chunk_skip, self._chunk_part = 0, b""
        finally:
            self._tail = data[-3:] if counting and self._in_head else b""
            self._slice = None
        if counting and self._in_head and self._head_bytes > HEAD_BYTES and not self._refused():
            self._refuse_head(messages.header_fields_too_large(HEAD_BYTES))
        elif not self._in_head and not self._refused():
            # What was neither head nor body is framing; all of it may have come before the slice's
            # last piece of body, so it is added to the framing before, and what follows is at most it.
            framing = max(0, len(data) - self._slice_used)
            self._framing_total += framing
            if self._framing_bytes + framing > HEAD_BYTES:
                self._framing_too_large()
            elif self._chunked and self._framing_total > HEAD_BYTES + FRAMING_PER_BODY_BYTE * self._body_total:
                self._refuse_body(messages.chunk_framing_too_large(HEAD_BYTES, FRAMING_PER_BODY_BYTE))
            else:
                self._framing_bytes = framing if self._body_came else self._framing_bytes + framing

    def on_body(self, body: bytes) -> None:
        if self._refused() and self._in_head:
            return  # the body of a head refused as too large
        self._body_came, self._step_pieces = True, self._step_pieces + 1
        self._slice_used += len(body)
        self._body_total += len(body)
        if self._body_left:
            self._body_left = max(0, self._body_left - len(body))
        self._pieces.append(body)

    def _pass_body(self) -> None:
        """The body's pieces the slice held, to uvicorn in one go: it appends each to the request's
        body (`bytes +=`), so a chunked body of 1-byte chunks copied the body gathered so far at
        every byte (some 43,000 chunks a read; other clients waited 0.7 s behind one such body)."""
        if self._pieces:
            pieces, self._pieces = self._pieces, []
            super().on_body(pieces[0] if len(pieces) == 1 else b"".join(pieces))

    def _framing_too_large(self) -> None:
        self._refuse_body(messages.trailer_fields_too_large(HEAD_BYTES))

    def _refuse_body(self, error: EmulatorError) -> None:
        """`error` for the request whose body is being read: its app (if begun) sees the disconnect;
        queued behind requests still unanswered, the refusal takes its place in the queue (their
        answers first, in order, then it); begun, at once (or, its response begun, the connection
        closed). Nothing after it is read either way."""
        cycle = self.cycle
        self._disarm_body()
        if cycle is not None:
            cycle.disconnected = True  # the app's next receive is the disconnect, its sends go nowhere
            cycle.message_event.set()
        if cycle is not None and self.pipeline and self.pipeline[0][0] is cycle:
            self.pipeline[0] = (cycle, self._refuser(error))
            self._refusal = error
            self._unparsed, self._at = b"", 0
            self._disarm_head()
            self.flow.pause_reading()
        elif cycle is None or not cycle.response_started:
            self._refuse(error)
        else:
            self.transport.close()

    def _refuser(self, error: EmulatorError) -> Callable[..., Awaitable[None]]:
        """An app in the queue's place of a request refused while queued: it sends the refusal."""

        async def refuse(scope: object, receive: object, send: object) -> None:
            if not self.transport.is_closing():
                self._refuse(error)

        return refuse

    def on_url(self, url: bytes) -> None:
        self._head_seen += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_seen += len(name) + len(value) + 4  # `name: value` and its CRLF
        lowered = name.lower()
        if lowered == b"transfer-encoding":
            self._chunked = True
        elif lowered == b"content-length" and value.strip().isdigit():
            self._content_length = int(value)
        super().on_header(name, value)

    def _head_size(self) -> int:
        """The bytes the head just ended took: counted from the slices it came in when it began
        before the slice now parsed (from there to its end, an empty line), and at least what its
        line and fields hold (a head begun after another request within the slice is measured so)."""
        seen = self._head_seen + len(self.parser.get_method()) + len(" HTTP/1.1\r\n\r\n") + 1
        data = self._slice
        if data is None:
            return seen
        if self._slice_before:
            found = (self._tail + data).find(_HEAD_END)
            end = found + len(_HEAD_END) - len(self._tail) if found >= 0 else len(data)
        else:  # empty lines before a request line are skipped by the parser, and counted here
            found = data.find(_HEAD_END, len(data) - len(data.lstrip(b"\r\n")))
            end = found + len(_HEAD_END) if found >= 0 else len(data)
        return max(seen, self._slice_before + end)

    def on_headers_complete(self) -> None:
        if self._refused():
            return  # refused already: what follows in the read is not served
        size, self._head_seen = self._head_size(), 0
        if size > HEAD_BYTES:  # a head that ended within a read, however large the read
            self._refuse_head(messages.header_fields_too_large(HEAD_BYTES))
            return
        upgrade = self._get_upgrade()
        if upgrade is not None and upgrade != b"websocket":  # the parser would read no body after it
            self._refuse_head(messages.upgrade_not_supported())
            return
        if upgrade is not None:
            refused = self._websocket_refused()
            if refused is not None:
                self._refuse_head(messages.websocket_handshake_invalid(refused))
                return
        self._slice_used += size - self._slice_before if self._began_before else size
        self._began_before = False
        self._in_head, self._head_bytes, self._head_begun, self._framing_bytes = False, 0, False, 0
        self._disarm_head()
        before = self.cycle
        super().on_headers_complete()
        self._body_left = 0 if self._chunked else self._content_length
        self._framing_total = self._body_total = 0
        if self.cycle is not None and self.cycle is not before:
            self._closing_unread(self.cycle)
        self._arm_body()

    def _websocket_refused(self) -> str | None:
        """Why a WebSocket upgrade's head cannot open a socket here, or None: behind requests not yet
        answered (the 101 went out ahead of their answers, which then came inside the socket, or the
        connection was handed over with an answer lost), or not an HTTP/1.1 GET without a body (the
        WebSocket layer refused those in `text/plain`)."""
        if (self.cycle is not None and not self.cycle.response_complete) or self.pipeline:
            return "an upgrade sent behind requests not yet answered; open the socket on a connection of its own"
        if self.parser.get_method() != b"GET" or self.parser.get_http_version() != "1.1":
            return "an upgrade is an HTTP/1.1 GET"
        if self._chunked or self._content_length:
            return "an upgrade has no body"
        return None

    def _closing_unread(self, cycle: RequestResponseCycle) -> None:
        """A response begun before its request's body has all come (a 413 for a `Content-Length` past
        the limit, any refusal of a body the app does not read) says `connection: close` and the
        connection is closed after it: the server read the unread body on to find the next request
        (4.2 GB in 10 s of a `Content-Length` of 10^12), the app's answer long sent. (A `Content-Length`
        body read whole and held unparsed, behind pipelined requests, is no reason to close.)"""
        send = cycle.send

        async def sending(message: ASGISendEvent) -> None:
            started = message["type"] == "http.response.start" and not cycle.response_started
            if started and cycle.more_body and not (0 < self._body_left <= len(self._unparsed) - self._at):
                cycle.keep_alive = False
            await send(message)

        cycle.send = sending  # type: ignore[method-assign]

    def on_message_complete(self) -> None:
        if self._refused() and self._in_head:
            return  # a request refused as too large: its app was never begun
        self._pass_body()
        if self._chunked:  # trailers that ended within the slice (what follows them counted too)
            framing = max(0, self._slice_len - self._slice_used)
            if self._framing_bytes + framing > HEAD_BYTES:
                self._framing_too_large()
                return
            if self._framing_total + framing > HEAD_BYTES + FRAMING_PER_BODY_BYTE * self._body_total:
                self._refuse_body(messages.chunk_framing_too_large(HEAD_BYTES, FRAMING_PER_BODY_BYTE))
                return
        self._disarm_body()
        super().on_message_complete()
        self._in_head, self._head_bytes, self._chunked = True, 0, False

    def _arm_body(self) -> None:
        self._disarm_body()
        self._body_timer = self.loop.call_later(self.body_timeout_s, self._body_expired)

    def _disarm_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_expired(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None:
            return
        if self.flow.read_paused or self.pipeline or getattr(cycle, "waiting_for_100_continue", False):
            self._arm_body()  # the server holds the body back, not the client: its clock starts again
            return
        cycle.disconnected = True  # the app's next receive is the disconnect, its sends go nowhere
        cycle.message_event.set()
        if not cycle.response_started:
            self._refuse(messages.body_timeout(self.body_timeout_s))
        else:
            self.transport.close()

    def _unsupported_upgrade_warning(self) -> None:
        if not self._refused():  # an Upgrade other than WebSocket is refused in the envelope, not logged
            super()._unsupported_upgrade_warning()

    def send_400_response(self, msg: str) -> None:
        if self._refused():
            return  # refused already, the rest of the read unparsed
        if self._in_head:
            self._refuse_head(messages.invalid_http_request())
        else:  # within the body of a request: it is the one refused
            self._refuse_body(messages.invalid_http_request())

    def _refuse_head(self, error: EmulatorError) -> None:
        """`error` for a request whose head is refused: at once if every request before it on the
        connection has been answered, else after them (a pipelining client gets their answers, then
        this one); nothing after it is read either way."""
        underway = self.cycle is not None and not self.cycle.response_complete
        if not underway and not self.pipeline:
            self._refuse(error)
            return
        self._refusal = error
        self._unparsed, self._at = b"", 0
        self._disarm_head()
        self._disarm_body()
        self.flow.pause_reading()

    def _refuse(self, error: EmulatorError) -> None:
        """`error` in the envelope, then the connection closed (what follows cannot be read)."""
        body = json.dumps(error.body(), separators=(",", ":")).encode()
        head = [b"HTTP/1.1 %d %s\r\n" % (error.status, _REASONS.get(error.status, b"Error"))]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
