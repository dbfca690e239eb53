"""The recording proxy's client socket to the upstream (`api/proxy.py`, `_upstream_socket`): the
websockets library's, fed a read a slice at a time.

The library feeds each socket read (up to 256 KiB) to its frame parser whole and queues every
message in it before anything else runs; its queue's bound (`max_queue`) only stops further reads.
Compressed (permessage-deflate, which the socket offered before), a run of alike small messages takes a
few bytes each: one read held some 25,000 of them, all decompressed in one step of the event loop,
and the proxy's relay then took them from the queue without a suspension. An upstream sending
200,000 small events held every client about 8 s (30,000: 1.5 s). Here a read is fed to the
parser `FEED_BYTES` at a time, one slice a step of the event loop, and no slice is fed while the
queue is over its bound; the socket is not read while bytes are kept unfed or the queue is full.
The relay yields every `RELAY_YIELD_EVERY` messages (a slice may hold some hundreds).

The socket offers no compression (permessage-deflate): the library inflates a compressed message in
one step whatever its length, up to the proxy's bound (64 MiB of a repeated byte took 0.27 s on the
event loop). An upstream then sends every message as it is; the proxy's local client may still
negotiate compression with the proxy (`api/wsflow.py`)."""

from __future__ import annotations

import asyncio

from websockets.asyncio.client import ClientConnection

FEED_BYTES = 1024
"""The largest slice of a read fed to the frame parser in one go: at most 512 messages (the smallest
frame from a server is 2 bytes), each a few microseconds to parse and decompress."""

RELAY_YIELD_EVERY = 16
"""The relay lets the event loop in after this many upstream messages taken without a suspension."""


class SlicedConnection(ClientConnection):
    """A `ClientConnection` whose reads are fed to the parser in slices, one a step of the event loop."""

    _unfed = b""
    _feeding: asyncio.Handle | None = None
    _queue_full = False
    _reading = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # The queue's bound pauses reading through here, with the bytes kept unfed.
        self.recv_messages.pause = self._queue_over
        self.recv_messages.resume = self._queue_under

    def _queue_over(self) -> None:
        self._queue_full = True
        self._read_or_not()

    def _queue_under(self) -> None:
        self._queue_full = False
        if self._unfed and self._feeding is None:
            self._feeding = self.loop.call_soon(self._feed)
        self._read_or_not()

    def _read_or_not(self) -> None:
        """Read from the socket only while nothing is kept unfed and the queue has room."""
        want = not self._unfed and not self._queue_full
        if want == self._reading or self.transport.is_closing():
            return
        self._reading = want
        if want:
            self.transport.resume_reading()
        else:
            self.transport.pause_reading()

    def data_received(self, data: bytes) -> None:
        self._unfed = self._unfed + data if self._unfed else data
        if self._feeding is None:
            self._feed()

    def _feed(self) -> None:
        """One slice to the parser; the rest in a later step, once the queue has room."""
        self._feeding = None
        if not self._unfed:
            return
        if self.transport.is_closing():
            self._unfed = b""
            return
        piece, self._unfed = self._unfed[:FEED_BYTES], self._unfed[FEED_BYTES:]
        super().data_received(piece)
        if self._unfed and not self._queue_full:
            self._feeding = self.loop.call_soon(self._feed)
        self._read_or_not()

    def eof_received(self) -> None:
        # Not read while bytes are kept, so none should be; any left go to the parser first.
        if self._unfed:
            if self._feeding is not None:
                self._feeding.cancel()
                self._feeding = None
            rest, self._unfed = self._unfed, b""
            super().data_received(rest)
        super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._feeding is not None:
            self._feeding.cancel()
            self._feeding = None
        self._unfed = b""
        super().connection_lost(exc)
