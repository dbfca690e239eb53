"""Access: with an API key set (`--api-key`, or the PTC_EMULATOR_API_KEY environment variable),
every HTTP endpoint, the admin API and the WebSocket upgrade refuse a missing or wrong Bearer
key with a 401 in OpenAI's envelope; and the server binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
import websockets.exceptions
import websockets.sync.client

from ptc_emulator.api.cli import parse
from ptc_emulator.api.settings import API_KEY_ENV, Settings
from ptc_emulator.testing.process import ServerProcess
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.api.api_support import ProgramRun, assert_envelope, drive, expected_total, pausing_program

KEY = "sk-hardening-0123456789abcdef"
WRONG = "sk-hardening-wrong-key-value"
NO_KEY = "You didn't provide an API key"

ENDPOINTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/responses", {"model": "m", "input": "hi"}),
    ("POST", "/v1/responses/input_tokens", {"model": "m", "input": "hi"}),
    ("GET", "/v1/responses/resp_x", None),
    ("DELETE", "/v1/responses/resp_x", None),
    ("POST", "/v1/responses/resp_x/cancel", None),
    ("GET", "/v1/responses/resp_x/input_items", None),
    ("GET", "/_emulator/scenarios", None),
    ("POST", "/_emulator/scenarios", {"turns": [{"message": "hi"}]}),
    ("DELETE", "/_emulator/scenarios/any", None),
    ("GET", "/_emulator/journal", None),
    ("DELETE", "/_emulator/journal", None),
    ("POST", "/_emulator/reset", {}),  # admin writes declare JSON
    ("GET", "/openapi.json", None),
    ("GET", "/no-such-path", None),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorServer]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("access"), pool_size=1, api_key=KEY)
    server = EmulatorServer(settings).start()
    yield server
    server.stop()


def root(server: EmulatorServer) -> str:
    return f"http://127.0.0.1:{server.port}"


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS, ids=[f"{m} {p}" for m, p, _ in ENDPOINTS])
def test_every_endpoint_needs_the_key(server: EmulatorServer, method: str, path: str, body: Any) -> None:
    with httpx.Client(base_url=root(server), timeout=30) as http:
        missing = http.request(method, path, json=body)
        assert_envelope(missing, 401, NO_KEY, param=None, code="invalid_api_key")
        wrong = http.request(method, path, json=body, headers={"Authorization": f"Bearer {WRONG}"})
        error = assert_envelope(wrong, 401, "Incorrect API key provided", param=None, code="invalid_api_key")
        assert WRONG not in error["message"], "the wrong key is echoed in full"
        basic = http.request(method, path, json=body, headers={"Authorization": f"Basic {KEY}"})
        assert_envelope(basic, 401, code="invalid_api_key")
        right = http.request(method, path, json=body, headers={"Authorization": f"Bearer {KEY}"})
        assert right.status_code != 401, right.text


def test_the_key_is_checked_before_the_body_is_read(server: EmulatorServer) -> None:
    body = b"x" * (server.settings.max_body_bytes + 1)  # not even JSON, and over the size limit
    reply = httpx.post(f"{server.base_url}/responses", content=body, timeout=60)
    assert_envelope(reply, 401, NO_KEY)


def test_the_sdk_raises_authentication_error(server: EmulatorServer) -> None:
    with openai.OpenAI(base_url=server.base_url, api_key=WRONG, max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError) as raised:
            client.responses.create(model="m", input="hi")
    assert raised.value.status_code == 401
    assert raised.value.code == "invalid_api_key"
    assert raised.value.type == "invalid_request_error"
    assert "Incorrect API key provided" in raised.value.message
    with openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as client:
        run = drive(client, ProgramRun(pausing_program(3, 2), store=True))
        assert run.text == expected_total(3, 2)
        assert client.responses.retrieve(run.response_ids[0]).id == run.response_ids[0]


def test_the_admin_api_and_the_plugin_client_need_the_key(server: EmulatorServer) -> None:
    wrong = PTCEmulator(server.base_url, api_key=WRONG)
    with pytest.raises(httpx.HTTPStatusError) as raised:
        wrong.journal  # noqa: B018 - the property makes the request
    assert raised.value.response.status_code == 401
    with pytest.raises(ValueError, match="Incorrect API key"):
        wrong.add_scenario({"match": {"input": "ping"}, "turns": [{"message": "pong"}]})
    wrong.close()

    right = PTCEmulator(server.base_url, api_key=KEY)
    right.add_scenario({"match": {"input": "ping"}, "turns": [{"message": "pong"}]})
    with right.client() as client:
        assert client.responses.create(model="m", input="ping").output_text == "pong"
    assert len(right.journal) == 1
    right.reset()
    right.close()


def _ws_url(server: EmulatorServer) -> str:
    return f"ws://127.0.0.1:{server.port}/v1/responses"


@pytest.mark.parametrize("authorization", [None, f"Bearer {WRONG}"], ids=["missing", "wrong"])
def test_the_websocket_upgrade_is_refused_without_the_key(server: EmulatorServer, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    with pytest.raises(websockets.exceptions.InvalidStatus) as raised:
        with websockets.sync.client.connect(_ws_url(server), additional_headers=headers, open_timeout=10):
            pass
    # The handshake gets the HTTP answer a request gets: 401, in OpenAI's envelope (a bare 403 before).
    assert raised.value.response.status_code == 401
    assert json.loads(raised.value.response.body)["error"]["code"] == "invalid_api_key"


def test_the_websocket_works_with_the_key(server: EmulatorServer) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    create = {
        "type": "response.create",
        "model": "m",
        "input": "Run\n```js\ntext('over the socket')\n```",
        "tools": [{"type": "programmatic_tool_calling"}],
    }
    with websockets.sync.client.connect(_ws_url(server), additional_headers=headers, open_timeout=10) as ws:
        ws.send(json.dumps(create))
        while True:
            event = json.loads(ws.recv(timeout=30))
            assert event["type"] != "error", event
            if event["type"] == "response.completed":
                break
    assert event["response"]["output"][-1]["content"][0]["text"] == "over the socket"


@pytest.mark.parametrize("authorization", [None, f"Bearer {WRONG}"], ids=["no key", "a wrong key"])
def test_health_answers_a_check_without_the_key_with_the_status_alone(
    server: EmulatorServer, authorization: str | None
) -> None:
    """A load balancer's health check carries no key: it gets 200 and the status, none of the
    figures (stored responses, worker pids) that the key's holder sees."""
    headers = {"Authorization": authorization} if authorization else {}
    reply = httpx.get(f"{root(server)}/_emulator/health", headers=headers, timeout=10)
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"status": "ok"}
    full = httpx.get(f"{root(server)}/_emulator/health", headers={"Authorization": f"Bearer {KEY}"}, timeout=10)
    assert full.status_code == 200
    assert full.json()["status"] == "ok"
    assert {"store", "workers", "stored_responses", "sandbox_runs"} <= set(full.json())


def test_the_environment_variable_sets_the_key(server_process: Callable[..., ServerProcess]) -> None:
    server = server_process(env={API_KEY_ENV: KEY})
    server.api_key = KEY  # for its own health checks; the command line carries no --api-key
    assert "--api-key" not in server.command
    server.start()
    reply = httpx.get(f"{server.root}/_emulator/journal", timeout=10)
    assert_envelope(reply, 401, NO_KEY, code="invalid_api_key")
    with openai.OpenAI(base_url=server.base_url, api_key="sk-not-it", max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError):
            client.responses.create(model="m", input="hi")
    with openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0) as client:
        assert drive(client, ProgramRun(pausing_program(1, 1), store=False)).text == expected_total(1, 1)


def test_the_cli_reads_the_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    assert parse(["serve"])[0].api_key is None
    monkeypatch.setenv(API_KEY_ENV, KEY)
    assert parse(["serve"])[0].api_key == KEY
    assert parse(["serve", "--api-key", "from-the-flag"])[0].api_key == "from-the-flag"


def test_the_default_bind_address_is_loopback(server_process: Callable[..., ServerProcess]) -> None:
    assert Settings().host == "127.0.0.1"
    assert parse(["serve"])[0].host == "127.0.0.1"
    server = server_process()
    assert "--host" not in server.command
    server.start()
    listening = _listening_addresses(server.port)
    assert listening == {"127.0.0.1"}, listening


def _listening_addresses(port: int) -> set[str]:
    """Addresses with a TCP socket listening on `port`, from /proc/net/tcp and tcp6."""
    found: set[str] = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            with open(table, encoding="ascii") as f:
                lines = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            if width == 8:
                found.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
            else:
                found.add("::" if int(address, 16) == 0 else address)
    return found


def test_edge_rejections_carry_a_request_id(server: EmulatorServer) -> None:
    reply = httpx.get(f"{root(server)}/_emulator/journal", timeout=10)
    assert reply.status_code == 401
    assert reply.headers.get("x-request-id", "").startswith("req_")
