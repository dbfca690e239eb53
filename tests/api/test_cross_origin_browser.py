"""A web page on another origin cannot drive the emulator, in a real browser (headless Chromium).

The page is served from another port of 127.0.0.1 (another origin), as any site a developer
visits could be. It tries what a browser lets any page try without asking: a WebSocket to
`/v1/responses` (browsers send no CORS preflight for WebSockets), a "simple" GET of the sessions
list, and a JSON POST to a recording server whose upstream answers preflights with
`Access-Control-Allow-Origin: *`. The emulator refuses every one on the page's `Origin`, so
no program runs and the upstream (with the developer's key) is never asked.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer
from tests.inspector.inspector_support import browser, wait_until
from tests.recording.test_record_proxy_paths import _Upstream

__all__ = ["browser"]  # the fixture, imported for this module

PAGE = """<!doctype html><title>elsewhere</title><pre id="out"></pre><script>
const EMU = %(emulator)s, REC = %(recorder)s, out = {};
const show = () => { document.getElementById('out').textContent = JSON.stringify(out); };
function socket() {
  return new Promise((done) => {
    const ws = new WebSocket(EMU.replace('http', 'ws') + '/v1/responses');
    ws.onopen = () => {
      out.ws_open = true;
      ws.send(JSON.stringify({type: 'response.create', model: 'm', input: '```js\\ntext("ran: " + 6 * 7)\\n```'}));
    };
    ws.onmessage = (e) => { out.ws_messages = (out.ws_messages || '') + e.data; };
    ws.onclose = (e) => { out.ws_closed = e.code; done(); };
    setTimeout(() => { try { ws.close(); } catch (e) {} done(); }, 8000);
  });
}
async function attempt(name, url, init) {
  try {
    const reply = await fetch(url, init);
    out[name] = 'read ' + reply.status + ': ' + (await reply.text()).slice(0, 300);
  } catch (e) { out[name] = 'blocked: ' + e.name; }
}
(async () => {
  await socket();
  await attempt('sessions', EMU + '/v1/agents/sessions', {headers: {}});
  await attempt('recorded', REC + '/v1/responses', {
    method: 'POST', headers: {'content-type': 'application/json'},
    body: JSON.stringify({model: 'm', input: 'hello upstream'}),
  });
  out.done = true; show();
})();
</script>"""


@pytest.fixture
def upstream() -> Iterator[tuple[str, list[tuple[str, str, str | None]]]]:
    _Upstream.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", _Upstream.seen
    finally:
        server.shutdown()
        server.server_close()


def _serve_page(html: str) -> tuple[ThreadingHTTPServer, str]:
    body = html.encode("utf-8")

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/"


def test_a_page_on_another_origin_can_neither_run_programs_nor_reach_the_upstream(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, upstream: tuple[str, list[Any]]
) -> None:
    url, seen = upstream
    monkeypatch.setenv("BROWSER_TEST_UPSTREAM_KEY", "sk-developer-key-0123456789")
    plain = EmulatorServer(Settings(data_dir=tmp_path / "plain", store="memory", pool_size=1)).start()
    recording = EmulatorServer(
        Settings(
            data_dir=tmp_path / "rec",
            store="memory",
            pool_size=1,
            bundled_fixtures=False,
            upstream=url,
            upstream_api_key_env="BROWSER_TEST_UPSTREAM_KEY",
            allow_unguarded_upstream_key=True,  # the worst case: the developer accepted the risk
            record_dir=tmp_path / "cassettes",
            record_mode="all",
        )
    ).start()
    page_server, page = _serve_page(
        PAGE
        % {
            "emulator": json.dumps(plain.base_url[: -len("/v1")]),
            "recorder": json.dumps(recording.base_url[: -len("/v1")]),
        }
    )
    try:
        browser.get(page)
        text = wait_until(lambda: _result(browser), "the page's attempts")
        result = json.loads(text)
        assert "ws_open" not in result and "ws_messages" not in result, result  # the upgrade was refused
        assert result["sessions"].startswith("blocked"), result  # refused, and nothing readable
        assert result["recorded"].startswith("blocked"), result
        assert seen == []  # the upstream never heard of the page, key or no key
        with plain_client(plain) as http:  # and no program ran
            assert http.get("/_emulator/journal").json()["data"] == []
    finally:
        page_server.shutdown()
        page_server.server_close()
        recording.stop()
        plain.stop()


def _result(browser: Any) -> str | None:
    text: str = browser.execute_script("return document.getElementById('out').textContent")
    return text if text and '"done":true' in text else None


def plain_client(server: EmulatorServer) -> Any:
    import httpx

    return httpx.Client(base_url=server.base_url[: -len("/v1")], timeout=30)
