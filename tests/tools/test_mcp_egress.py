"""Where the MCP client connects: only public addresses, unless a setting allows a host; never the
emulator itself; and nothing of a server's non-MCP answer in the error (docs/limits.md, "MCP").

Through the official SDK against real servers on loopback. The session's emulator here allows
127.0.0.1 (tests/conftest.py); a server started with the defaults allows nothing private.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openai
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.process import ServerProcess
from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, validating_client
from tests.tools.mcp_servers_support import misbehaving_server
from tests.tools.tools_support import DocsServer, docs_server, emulator_from

PTC = {"type": "programmatic_tool_calling"}


@pytest.fixture(scope="module")
def docs() -> Iterator[DocsServer]:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    with docs_server() as server:
        yield server


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PTCEmulator]:
    """An emulator with the default egress policy: no private address allowed."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("strict"), store="memory", pool_size=1)
    with emulator_from(settings) as emulator:
        yield emulator


def listing_error(emulator: PTCEmulator, url: str) -> openai.APIStatusError:
    tool = {"type": "mcp", "server_label": "target", "server_url": url, "allowed_callers": ["programmatic"]}
    with validating_client(emulator) as client, pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="gpt-test", tools=[PTC, tool], input=js("text('x')"))
    return caught.value


def spelled(url: str, host: str) -> str:
    parts = urlsplit(url)
    return parts._replace(netloc=f"{host}:{parts.port}").geturl()


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "0.0.0.0", "localhost", "[::ffff:127.0.0.1]"])
def test_loopback_is_refused_by_default_and_the_error_says_how_to_allow_it(
    strict: PTCEmulator, docs: DocsServer, host: str
) -> None:
    docs.authorizations.clear()
    error = listing_error(strict, spelled(docs.url, host))
    assert error.status_code == 424
    body = error.response.json()["error"]
    assert body["type"] == "external_connector_error"
    assert "Error retrieving tool list from MCP server 'target'" in body["message"]
    assert "loopback" in body["message"]
    assert "--mcp-allow-host" in body["message"]
    assert docs.authorizations == []  # the server got no request at all


@pytest.mark.parametrize(
    ("address", "kind"),
    [("169.254.169.254", "link-local"), ("10.1.2.3", "private"), ("192.168.0.1", "private"), ("[fe80::1]", "link")],
)
def test_link_local_and_private_ranges_are_refused(ptc_emulator: PTCEmulator, address: str, kind: str) -> None:
    error = listing_error(ptc_emulator, f"http://{address}/mcp")
    assert error.status_code == 424
    message = error.response.json()["error"]["message"]
    assert kind in message and "--mcp-allow-host" in message


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/mcp", "gopher://127.0.0.1:70/"])
def test_schemes_other_than_http_are_refused(ptc_emulator: PTCEmulator, url: str) -> None:
    error = listing_error(ptc_emulator, url)
    assert error.status_code == 424
    assert "must be http or https" in error.response.json()["error"]["message"]


@pytest.mark.ptc_strict(unused=False)  # its scenario is a canary that must survive, never asked for
@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "0.0.0.0", "localhost"])
def test_the_emulator_never_calls_itself_even_with_loopback_allowed(ptc_emulator: PTCEmulator, host: str) -> None:
    """`server_url` at the emulator's own `/_emulator/reset` would forget every scenario."""
    name = ptc_emulator.add_scenario({"match": {"input": "never said"}, "turns": [{"message": "kept"}]})
    own = urlsplit(ptc_emulator.base_url).port
    error = listing_error(ptc_emulator, f"http://{host}:{own}/_emulator/reset")
    assert error.status_code == 424
    assert "the emulator itself" in error.response.json()["error"]["message"]
    assert name in [s["name"] for s in ptc_emulator.scenarios]


@pytest.mark.parametrize("mode", ["not_mcp_listing", "not_mcp"])
def test_a_non_mcp_answer_is_not_echoed(ptc_emulator: PTCEmulator, mode: str) -> None:
    with misbehaving_server(mode) as server, validating_client(ptc_emulator) as client:
        tool = {
            "type": "mcp",
            "server_label": "odd",
            "server_url": server.url,
            "allowed_callers": ["programmatic"],
            "require_approval": "never",
        }
        code = "try { text(await tools.odd.ping({})); } catch (e) { text('caught: ' + e.message); }"
        try:
            response = client.responses.create(model="gpt-test", tools=[PTC, tool], input=js(code))
            text = response.output_text
            entry: Any = ptc_emulator.journal[-1]["hosted_calls"][0]["error"]
            said = f"{text} {entry}"
            assert text.startswith("caught: ")
        except openai.APIStatusError as e:
            assert e.status_code == 424
            said = e.response.text
        assert "password" not in said and "internal" not in said and "xxxx" not in said
        assert "not a valid MCP message" in said


def test_a_compressed_answer_is_refused_unread_and_an_uncompressed_one_was_asked_for(
    ptc_emulator: PTCEmulator,
) -> None:
    """A gzip bomb (64 MiB of zeros in 64 KiB) is within the byte limit as the wire counts it:
    unpacked, it took GiBs, on the event loop. It is refused before a byte is read."""
    with misbehaving_server("gzip_listing", huge_bytes=64 * 2**20) as server:
        error = listing_error(ptc_emulator, server.url)
        assert server.encodings_asked and set(server.encodings_asked) == {"identity"}
    assert error.status_code == 424
    message = error.response.json()["error"]["message"]
    assert "Error retrieving tool list from MCP server 'target'" in message
    assert "the MCP server answered with Content-Encoding 'gzip' although asked for none" in message


def test_a_settings_allowance_names_the_host_and_port(tmp_path: Path, docs: DocsServer) -> None:
    port = urlsplit(docs.url).port
    settings = Settings(
        data_dir=tmp_path, store="memory", pool_size=1, mcp_allow_hosts=(f"localhost:{port}", "127.0.0.1:9")
    )
    tool = {
        "type": "mcp",
        "server_label": "d",
        "server_url": spelled(docs.url, "localhost"),
        "require_approval": "never",
        "allowed_callers": ["programmatic"],
    }
    with emulator_from(settings) as emulator:
        with validating_client(emulator) as client:
            code = "text(await tools.d.lookup({topic: 'egress'}))"
            response = client.responses.create(model="gpt-test", tools=[PTC, tool], input=js(code))
        assert response.output_text == "The docs say egress is fine."
        # The same server by another name is not allowed.
        error = listing_error(emulator, spelled(docs.url, "127.0.0.1"))
        assert "--mcp-allow-host 127.0.0.1:" in error.response.json()["error"]["message"]


def test_the_command_line_options_allow_hosts_but_never_the_emulator(
    server_process: Callable[..., ServerProcess], docs: DocsServer
) -> None:
    """`ptc-emulator serve --mcp-allow-host 127.0.0.1:PORT --mcp-allow-private`, as a process."""
    port = urlsplit(docs.url).port
    args = ("--mcp-allow-host", f"127.0.0.1:{port}", "--mcp-allow-private", "--mcp-timeout", "20")
    server = server_process(store="memory", args=args).start()
    emulator = PTCEmulator(server.base_url)
    tool = {"type": "mcp", "server_label": "d", "server_url": docs.url, "require_approval": "never"}
    try:
        with validating_client(emulator) as client:
            code = "text(await tools.d.lookup({topic: 'flags'}))"
            tools = [PTC, {**tool, "allowed_callers": ["programmatic"]}]
            response = client.responses.create(model="gpt-test", tools=tools, input=js(code))
        assert response.output_text == "The docs say flags is fine."
        error = listing_error(emulator, f"http://localhost:{server.port}/_emulator/reset")
        assert "the emulator itself" in error.response.json()["error"]["message"]
    finally:
        emulator.close()
