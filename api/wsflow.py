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
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from ptc_emulator.api.httpflow import WRITE_PAUSE_S, PauseBound

__all__ = ["WebSocketProtocol"]


class WebSocketProtocol(WebSocketsSansIOProtocol):
    write_pause_s = WRITE_PAUSE_S
    _paused_for_writes = False
    _pause: PauseBound | None = None

    @classmethod
    def bounded(cls, *, write_pause_s: float) -> type[WebSocketProtocol]:
        """This protocol with the settings' write-pause limit."""
        return type(cls.__name__, (cls,), {"write_pause_s": write_pause_s})

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._pause = PauseBound(self.loop, self.write_pause_s)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._pause is not None:
            self._pause.resumed()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._pause is not None:
            self._pause.paused(self.transport)

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
            if self.read_paused and self.queue.empty():  # otherwise the app's next receive resumes it
                self.read_paused = False
                self.transport.resume_reading()
