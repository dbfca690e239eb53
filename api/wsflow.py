"""The WebSocket protocol the server runs: uvicorn's (websockets' sans-I/O), with pings under
backpressure.

uvicorn answers each ping with a pong written at once, whether or not the client reads: a client
that sends pings and never reads grew the server's write buffer without a bound (94 MB of pings,
86 MB more resident, for as long as it kept on). Here a ping that arrives while the write buffer
is over its high-water mark stops reading from that socket until the buffer drains; a client that
never reads then fills its own send buffer instead. Messages already had this bound (uvicorn reads
no further while the app has not taken the last one).
"""

from __future__ import annotations

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

__all__ = ["WebSocketProtocol"]


class WebSocketProtocol(WebSocketsSansIOProtocol):
    _paused_for_writes = False

    def handle_ping(self) -> None:
        super().handle_ping()
        if not self.writable.is_set() and not self.read_paused and not self.disconnected:
            self.read_paused = self._paused_for_writes = True
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._paused_for_writes:
            self._paused_for_writes = False
            if self.read_paused and self.queue.empty():  # otherwise the app's next receive resumes it
                self.read_paused = False
                self.transport.resume_reading()
