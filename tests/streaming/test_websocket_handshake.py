"""Every refusal before a socket opens is answered in OpenAI's envelope (docs/limits.md): those of
the WebSocket layer too, made before the app sees the upgrade. They were a 400 in plain text
(`Failed to open a WebSocket connection: ...`), and an upgrade to a path no route has the 403 with
no body where a plain GET of that path is the 404."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import pytest

from ptc_emulator.testing.server import EmulatorServer

KEY = "dGhlIHNhbXBsZSBub25jZQ=="
UPGRADE = "Upgrade: websocket\r\nConnection: Upgrade\r\n"


def answer(server: EmulatorServer, path: str, headers: str) -> tuple[int, dict[str, str], Any]:
    """The server's answer to a GET of `path` with `headers` (each line ending in CRLF)."""
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(60)  # only so that a server that never answers fails the test, not hangs it
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{headers}\r\n".encode())
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    fields = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    assert fields.get("content-type", "").startswith("application/json"), (status_line, fields, body)
    return int(status_line.split()[1]), fields, json.loads(body)


def error(body: Any) -> dict[str, Any]:
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["type"] == "invalid_request_error", body
    return dict(body["error"])


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        (f"{UPGRADE}Sec-WebSocket-Version: 13\r\n", "missing Sec-WebSocket-Key header"),
        (f"{UPGRADE}Sec-WebSocket-Key: bad\r\nSec-WebSocket-Version: 13\r\n", "invalid Sec-WebSocket-Key header"),
        (
            f"{UPGRADE}Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n"
            "Origin: http://127.0.0.1\r\nOrigin: http://a.example\r\n",
            "invalid Origin header: multiple values",
        ),
    ],
    ids=["no key", "bad key", "two origins"],
)
def test_an_upgrade_the_websocket_layer_refuses_is_the_400_in_the_envelope(
    make_server: Callable[..., EmulatorServer], headers: str, problem: str
) -> None:
    server = make_server()
    status, _, body = answer(server, "/v1/responses", headers)
    assert status == 400
    assert error(body)["message"].startswith(f"Failed to open a WebSocket connection: {problem}"), body


def test_an_upgrade_to_another_version_is_the_426_naming_version_13(make_server: Callable[..., EmulatorServer]) -> None:
    server = make_server()
    status, fields, body = answer(
        server, "/v1/responses", f"{UPGRADE}Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 8\r\n"
    )
    assert status == 426 and fields["sec-websocket-version"] == "13", fields
    wording = (
        "Failed to open a WebSocket connection: unsupported Sec-WebSocket-Version '8'; this server speaks version 13."
    )
    assert error(body)["message"] == wording


def test_an_upgrade_to_a_path_no_route_has_is_the_404_a_plain_get_of_it_is(
    make_server: Callable[..., EmulatorServer],
) -> None:
    server = make_server()
    plain = answer(server, "/v1/nothing", "Connection: close\r\n")
    upgrade = answer(server, "/v1/nothing", f"{UPGRADE}Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n")
    assert plain[0] == upgrade[0] == 404
    assert (
        error(plain[2])
        == error(upgrade[2])
        == {
            "message": "Invalid URL (GET /v1/nothing)",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    )
