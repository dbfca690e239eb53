"""The HTTP protocol the server runs: uvicorn's (httptools), with the request head bounded and its
refusals in OpenAI's error envelope.

uvicorn puts no bound on a request's head: httptools hands each header over whole, so a client
that sent one header value without its end had the server keep all of it (a 200 MB `X-Big:` value,
230 MB more resident, as much again for each such client). Here the bytes a request's head takes
(its request line and headers) are counted as they arrive; past `HEAD_BYTES` the request is the 431
`header_fields_too_large` and the connection is closed. A request uvicorn's parser refuses (not
HTTP, a bad header) is the 400 `invalid_http_request` in the envelope, where uvicorn answered
`text/plain`.
"""

from __future__ import annotations

import json

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError

__all__ = ["HEAD_BYTES", "HttpProtocol"]

HEAD_BYTES = 64 * 1024
"""The most a request's line and headers may take together (node's default is 16 KiB, nginx's 32 KiB
in four buffers); an SDK's request head is well under 2 KiB."""

_REASONS = {400: b"Bad Request", 431: b"Request Header Fields Too Large"}


class HttpProtocol(HttpToolsProtocol):
    _in_head = True
    """Between a request's first byte (or the connection's start) and its headers' end."""
    _head_bytes = 0

    def data_received(self, data: bytes) -> None:
        counting = self._in_head
        if counting:
            self._head_bytes += len(data)
        super().data_received(data)
        if counting and self._in_head and self._head_bytes > HEAD_BYTES and not self.transport.is_closing():
            self._refuse(messages.header_fields_too_large(HEAD_BYTES))

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes = True, 0

    def send_400_response(self, msg: str) -> None:
        self._refuse(messages.invalid_http_request())

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
