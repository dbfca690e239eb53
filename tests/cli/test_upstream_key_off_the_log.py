"""The upstream key never reaches the server's log, whatever `--log-level` says: an upstream that
writes it into its status line's reason phrase and its headers (which the HTTP library's own
loggers wrote, the status line at INFO, every header at DEBUG), for the model upstream and the
recording proxy alike (both send through that library)."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ptc_emulator.testing.process import ServerProcess

KEY = "sk-log/KEY+0123456789abcdef"
CLIENT_KEY = "sk-client-0123456789abcdef"
BODY = b'{"error": {"message": "no such model", "type": "invalid_request_error", "param": null, "code": null}}'


class _Hostile(socketserver.BaseRequestHandler):
    """Answers every request `400 <KEY>`, with the key in two headers too."""

    seen: list[bytes]

    def handle(self) -> None:
        read = b""
        while b"\r\n\r\n" not in read:
            chunk = self.request.recv(65536)
            if not chunk:
                return
            read += chunk
        head, _, body = read.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in lines if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            chunk = self.request.recv(65536)
            if not chunk:
                break
            body += chunk
        self.seen.append(head.split(b"\r\n", 1)[0])
        answer = (
            f"HTTP/1.1 400 {KEY}\r\n"
            f"X-Echo: Bearer {KEY}\r\n"
            f"Location: http://127.0.0.1/{KEY}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(BODY)}\r\n"
            "Connection: close\r\n\r\n"
        )
        self.request.sendall(answer.encode() + BODY)


@pytest.fixture
def hostile() -> Iterator[tuple[str, list[bytes]]]:
    seen: list[bytes] = []
    handler = type("Handler", (_Hostile,), {"seen": seen})
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("level", "form"), [("info", "text"), ("debug", "text"), ("debug", "json")])
@pytest.mark.parametrize("source", ["model-upstream", "proxy"])
def test_the_key_in_the_upstreams_status_line_and_headers_reaches_no_log(
    tmp_path: Path, hostile: tuple[str, list[bytes]], source: str, level: str, form: str
) -> None:
    """Before, at INFO: `httpx: HTTP Request: POST ... "HTTP/1.1 400 <the key>"`; at DEBUG every
    header too. The library's loggers stay at WARNING, and every handler takes the key out of
    what it writes besides."""
    url, seen = hostile
    if source == "model-upstream":
        args = ("--model-upstream", url, "--model-upstream-api-key-env", "THE_UPSTREAM_KEY")
    else:
        args = ("--upstream", url, "--upstream-api-key-env", "THE_UPSTREAM_KEY", "--record", str(tmp_path / "rec"))
    server = ServerProcess(
        tmp_path / "data",
        store="memory",
        api_key=CLIENT_KEY,
        args=(*args, "--log-level", level, "--log-format", form),
        env={"THE_UPSTREAM_KEY": KEY},
    )
    with server:
        answer = httpx.post(
            f"{server.base_url}/responses",
            json={"model": "m", "input": "Go."},
            headers=server.headers,
            timeout=60,
        )
    assert seen and seen[0].startswith(b"POST /v1/responses" if source == "proxy" else b"POST /v1/chat/completions")
    assert answer.status_code in (400, 502)
    log = server.log()
    assert "/v1/responses" in log  # the server's own request line is there: the log was written
    assert KEY not in log and KEY not in answer.text


@pytest.mark.parametrize("form", ["text", "json"])
def test_a_request_whose_path_holds_the_key_has_its_access_line_redacted_not_lost(
    tmp_path: Path, hostile: tuple[str, list[bytes]], form: str
) -> None:
    """Before, the filter set the access record's `args` to None: uvicorn's text formatter, which
    unpacks them, raised ("--- Logging error ---" and a traceback) and the access line was lost;
    the percent-encoded key (`sk-log%2FKEY%2B...`) was written plain in the access line too."""
    url, _ = hostile
    server = ServerProcess(
        tmp_path / "data",
        store="memory",
        api_key=CLIENT_KEY,
        args=("--model-upstream", url, "--model-upstream-api-key-env", "THE_UPSTREAM_KEY", "--log-format", form),
        env={"THE_UPSTREAM_KEY": KEY},
    )
    encoded = KEY.replace("/", "%2F").replace("+", "%2B")
    with server:
        for path in (f"/models?x={KEY}", f"/responses/{encoded}/input_items"):
            httpx.get(f"{server.base_url}{path}", headers=server.headers, timeout=60)
        httpx.get(f"{server.base_url}/models?after=the-last", headers=server.headers, timeout=60)
    log = server.log()
    assert "Logging error" not in log and "Traceback" not in log
    assert KEY not in log and encoded not in log
    assert "the-last" in log  # the log was written past the two lines
    assert "/v1/models?x=[redacted]" in log and "/v1/responses/[redacted]/input_items" in log


def test_a_key_shorter_than_eight_characters_is_named_at_start_as_a_dummy_key(
    tmp_path: Path, hostile: tuple[str, list[bytes]]
) -> None:
    url, _ = hostile
    server = ServerProcess(
        tmp_path / "data",
        store="memory",
        api_key=CLIENT_KEY,
        args=("--model-upstream", url, "--model-upstream-api-key-env", "THE_UPSTREAM_KEY"),
        env={"THE_UPSTREAM_KEY": "EMPTY"},
    )
    with server:
        httpx.get(f"{server.base_url}/models", headers=server.headers, timeout=60)
    said = [line for line in server.log().splitlines() if "dummy key" in line]
    assert said == [
        "ptc-emulator: $THE_UPSTREAM_KEY is shorter than 8 characters: taken as a dummy key (a local server's "
        "'EMPTY'), it is not redacted from answers, the log or recordings (docs/security.md)"
    ]
