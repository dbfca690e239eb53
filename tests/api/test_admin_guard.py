"""The admin API cannot be driven by a web page: writes need a JSON content type (which no page can
send cross-origin without a CORS preflight), and the Host header must name this server (so a
DNS-rebinding page cannot read the journal). `--allowed-host` adds names.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from ptc_emulator.api.cli import parse
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import assert_envelope

SCENARIO = {"name": "planted", "turns": [{"message": "planted"}]}


def admin_url(server: EmulatorServer) -> str:
    return server.base_url[: -len("/v1")] + "/_emulator"


def test_a_text_plain_post_cannot_plant_or_reset_scenarios(make_server: Callable[..., EmulatorServer]) -> None:
    server = make_server()
    with httpx.Client(base_url=admin_url(server), timeout=30) as client:
        added = client.post("/scenarios", json=SCENARIO)
        assert added.status_code == 201, added.text
        body = json.dumps({**SCENARIO, "name": "other"})
        for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=z"):
            reply = client.post("/scenarios", content=body, headers={"content-type": content_type})
            assert_envelope(reply, 400, "Unsupported content type", code="unsupported_content_type")
            reply = client.post("/reset", content=b"", headers={"content-type": content_type})
            assert_envelope(reply, 400, "Unsupported content type", code="unsupported_content_type")
        bare = client.build_request("POST", "/reset")
        assert "content-type" not in bare.headers
        assert_envelope(client.send(bare), 400, code="unsupported_content_type")
        names = [s["name"] for s in client.get("/scenarios").json()["data"]]
        assert names == ["planted"]  # nothing planted, nothing reset
        assert client.post("/reset", headers={"content-type": "application/json"}).status_code == 200


def test_a_foreign_host_header_cannot_read_the_journal(make_server: Callable[..., EmulatorServer]) -> None:
    server = make_server()
    port = server.base_url.split(":")[-1].split("/")[0]
    with httpx.Client(base_url=admin_url(server), timeout=30) as client:
        for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.attacker.example"):
            reply = client.get("/journal", headers={"host": host})
            assert_envelope(reply, 403, "--allowed-host", code="host_not_allowed")
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
            assert client.get("/journal", headers={"host": host}).status_code == 200, host
    # The API itself is host-checked too: a rebinding page can neither list sessions nor run programs.
    with httpx.Client(base_url=server.base_url, timeout=30) as api:
        for method, path in (("GET", "/agents/sessions"), ("GET", "/responses/resp_missing"), ("POST", "/responses")):
            reply = api.request(method, path, headers={"host": "rebind.attacker.example", "OpenAI-Beta": "agents=v1"})
            assert_envelope(reply, 403, "The emulator does not answer to the host", code="host_not_allowed")
        assert api.get("/responses/resp_missing", headers={"host": f"localhost:{port}"}).status_code == 404


def test_allowed_host_adds_a_name(make_server: Callable[..., EmulatorServer]) -> None:
    server = make_server(allowed_hosts=("emulator.internal",))
    with httpx.Client(base_url=admin_url(server), timeout=30) as client:
        assert client.get("/health", headers={"host": "emulator.internal:8000"}).status_code == 200
        assert client.get("/health", headers={"host": "other.internal"}).status_code == 403
    with httpx.Client(base_url=server.base_url, timeout=30) as api:  # an SDK reaching it under that name
        assert api.get("/responses/resp_missing", headers={"host": "emulator.internal"}).status_code == 404
        assert api.get("/responses/resp_missing", headers={"host": "other.internal"}).status_code == 403


def test_a_foreign_origin_is_refused_and_allowed_origin_adds_one(make_server: Callable[..., EmulatorServer]) -> None:
    server = make_server(allowed_origins=("http://localhost:5173",))
    port = server.base_url.split(":")[-1].split("/")[0]
    with httpx.Client(base_url=server.base_url, timeout=30) as api:
        for origin in ("http://attacker.example", f"http://127.0.0.1:{int(port) + 1}", "null", "https://127.0.0.1"):
            reply = api.get("/responses/resp_missing", headers={"origin": origin})
            assert_envelope(reply, 403, "--allowed-origin", code="origin_not_allowed")
        for origin in (f"http://127.0.0.1:{port}", "http://localhost:5173", None):  # its own, an allowed one, SDKs
            headers = {"origin": origin} if origin else {}
            assert api.get("/responses/resp_missing", headers=headers).status_code == 404, origin
    with httpx.Client(base_url=admin_url(server), timeout=30) as admin:
        reply = admin.post("/reset", headers={"origin": "http://attacker.example", "content-type": "application/json"})
        assert_envelope(reply, 403, code="origin_not_allowed")
    settings, _ = parse(["serve", "--allowed-origin", "http://a.test:1", "--allowed-origin", "http://b.test:2"])
    assert settings.allowed_origins == ("http://a.test:1", "http://b.test:2")


def test_the_cli_takes_allowed_host_more_than_once() -> None:
    settings, _ = parse(["serve", "--allowed-host", "a.internal", "--allowed-host", "b.internal"])
    assert settings.allowed_hosts == ("a.internal", "b.internal")
    assert parse(["serve"])[0].allowed_hosts == ()


def _raw(server: EmulatorServer, head: bytes) -> tuple[int, Any]:
    """One request sent as its bytes; its status and its body's `error` (None when it has none)."""
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head_part, _, body = data.partition(b"\r\n\r\n")
    return int(head_part.split()[1]), json.loads(body).get("error")


def test_a_repeated_host_or_origin_or_a_missing_http_1_1_host_is_refused(
    make_server: Callable[..., EmulatorServer],
) -> None:
    """Before: the check read the last `Host` (and `Origin`) while the app's own readers take the
    first, so `Host: rebind.attacker.example` then `Host: localhost` passed; an HTTP/1.1 request with
    no `Host` at all was served."""
    server = make_server()
    ok = f"127.0.0.1:{server.port}".encode()
    end = b"Connection: close\r\n\r\n"
    status, error = _raw(
        server, b"GET /v1/models HTTP/1.1\r\nHost: rebind.attacker.example\r\nHost: " + ok + b"\r\n" + end
    )
    assert status == 400 and error["code"] == "header_repeated"
    assert error["message"] == "The 'host' header may come once: this request holds it more than once."
    origins = b"Origin: https://evil.example\r\nOrigin: http://" + ok + b"\r\n"
    status, error = _raw(server, b"GET /v1/models HTTP/1.1\r\nHost: " + ok + b"\r\n" + origins + end)
    assert status == 400 and error["code"] == "header_repeated"
    status, error = _raw(server, b"GET /v1/models HTTP/1.1\r\n" + end)
    assert status == 400 and error["message"] == "An HTTP/1.1 request must hold a 'Host' header."
    assert _raw(server, b"GET /v1/models HTTP/1.0\r\n" + end)[0] == 200  # HTTP/1.0 may leave it out
    assert _raw(server, b"GET /v1/models HTTP/1.1\r\nHost: " + ok + b"\r\n" + end)[0] == 200
