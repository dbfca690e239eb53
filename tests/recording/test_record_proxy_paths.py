"""The recording proxy forwards only the Responses routes it serves, and keeps the key to itself.

An upstream that logs every request it gets stands behind a recording emulator holding a key.
Paths that once reached other upstream routes with that key (dot segments after an allowed first
segment, the same with encoded slashes, which a browser sends as they are) and `OPTIONS`
preflights are answered by the emulator; the upstream's `access-control-*` headers never reach
the client, so a page on another origin cannot read what the upstream said.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ptc_emulator.api.proxy import ProxySettingsError
from tests.recording.recording_support import recorder

KEY = "sk-upstream-key-0123456789"
LOCAL = "sk-local-key-for-the-recorder"


class _Upstream(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str | None]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        self.seen.append((self.command, self.path, self.headers.get("authorization")))
        body = json.dumps({"object": "list", "data": [{"secret": "upstream data"}]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("access-control-allow-origin", "*")
        self.send_header("access-control-allow-headers", "*")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = do_OPTIONS = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def logged_upstream() -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    _Upstream.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", _Upstream.seen
    finally:
        server.shutdown()
        server.server_close()


def _raw(base_url: str, method: str, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    """A request with the path exactly as written (clients normalise dot segments away)."""
    host, port = base_url.split("//", 1)[1].split("/", 1)[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    body = b"{}" if method == "POST" else None
    conn.request(method, path, body=body, headers={"content-type": "application/json", **(headers or {})})
    reply = conn.getresponse()
    reply.read()
    conn.close()
    return reply


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/responses/input_tokens/../../files"),
        ("GET", "/v1/responses/compact/../../../admin/keys"),
        ("GET", "/v1/responses/input_tokens%2F..%2F..%2Forganization%2Fusers"),
        ("POST", "/v1/responses/compact/..%2F..%2Ffiles"),
        ("GET", "/v1/responses/resp_1/../../models"),
        ("OPTIONS", "/v1/responses"),
        ("OPTIONS", "/v1/responses/input_tokens"),
    ],
)
def test_no_other_upstream_route_is_reached_with_the_key(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    logged_upstream: tuple[str, list[tuple[str, str, str | None]]],
    method: str,
    path: str,
) -> None:
    url, seen = logged_upstream
    monkeypatch.setenv("PROXY_TEST_KEY", KEY)
    with recorder(tmp_path, url, tmp_path / "cassettes", upstream_api_key_env="PROXY_TEST_KEY", api_key=LOCAL) as rec:
        reply = _raw(rec.base_url, method, path, {"authorization": f"Bearer {LOCAL}"})
        assert reply.status in (400, 404, 405), (reply.status, path)
        assert seen == []  # the upstream was never asked
        assert not any(k.lower().startswith("access-control-") for k in reply.headers)


def test_a_recorder_holding_an_upstream_key_requires_a_key_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logged_upstream: tuple[str, list[tuple[str, str, str | None]]]
) -> None:
    url, seen = logged_upstream
    monkeypatch.setenv("PROXY_TEST_KEY", KEY)
    with pytest.raises(ProxySettingsError, match="must require a key of its own"):
        with recorder(tmp_path, url, tmp_path / "cassettes", upstream_api_key_env="PROXY_TEST_KEY"):
            pass
    with recorder(
        tmp_path, url, tmp_path / "cassettes", upstream_api_key_env="PROXY_TEST_KEY", allow_unguarded_upstream_key=True
    ) as rec:
        assert _raw(rec.base_url, "POST", "/v1/responses/input_tokens").status == 200  # the operator accepted it
    with recorder(tmp_path, url, tmp_path / "cassettes", upstream_api_key_env="PROXY_TEST_KEY", api_key=LOCAL) as rec:
        assert _raw(rec.base_url, "POST", "/v1/responses/input_tokens").status == 401  # no key, no upstream
    assert len(seen) == 1


def test_an_allowed_route_goes_upstream_without_its_cors_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logged_upstream: tuple[str, list[tuple[str, str, str | None]]]
) -> None:
    url, seen = logged_upstream
    monkeypatch.setenv("PROXY_TEST_KEY", KEY)
    with recorder(tmp_path, url, tmp_path / "cassettes", upstream_api_key_env="PROXY_TEST_KEY", api_key=LOCAL) as rec:
        reply = _raw(rec.base_url, "POST", "/v1/responses/input_tokens", {"authorization": f"Bearer {LOCAL}"})
        assert reply.status == 200
        assert seen == [("POST", "/v1/responses/input_tokens", f"Bearer {KEY}")]
        assert not any(k.lower().startswith("access-control-") for k in reply.headers)
