"""The model upstream's protocols are an extension point: a protocol is one `UpstreamProtocol`
subclass plus a `register(...)` line (docs/architecture.md, "Extending"). A protocol defined
here, registered, is a choice of the settings, of the CLI and of the client, which sends its
request to its path and reads its answers, whole and streamed; a name nobody registered is
refused with the choices. No server: the client runs on httpx's in-process mock transport."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from ptc_emulator.api.cli import parse
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.model import UPSTREAM_PROTOCOLS, UpstreamClient
from ptc_emulator.emulator.model.upstream import UpstreamProtocol, register
from ptc_emulator.emulator.model.upstream.protocol import Answer, Delta, Fault, ToolCall
from ptc_emulator.emulator.model.upstream.teach import Function
from ptc_emulator.emulator.model.upstream.transcript import Entry


class Plain(UpstreamProtocol):
    """A made-up API: `POST /generate {"prompt", "tools"}`, answered `{"text", "calls"}`, or
    streamed as server-sent events whose data is the text, ending with `data: END`."""

    name = "plain"
    title = "a plain text API (/generate)"
    path = "/generate"

    def request(
        self,
        model: str,
        instructions: str | None,
        transcript: list[Entry],
        functions: list[Function],
        tool_choice: str,
    ) -> dict[str, Any]:
        prompt = "\n".join(f"{e.role}: {e.text}" for e in transcript)
        return {"model": model, "system": instructions, "prompt": prompt, "tools": [f.name for f in functions]}

    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True}

    def answer(self, data: Any) -> Answer:
        calls = [ToolCall(f"call_{n}", name, json.dumps(args)) for n, (name, args) in enumerate(data["calls"])]
        return Answer(text=data["text"], calls=calls, output_tokens=len(data["text"].split()))

    async def stream(self, events: AsyncIterator[bytes], on_delta: Delta | None) -> Answer:
        text: list[str] = []
        async for data in events:
            piece = data.decode()
            if piece == "END":
                return Answer(text="".join(text))
            text.append(piece)
            if on_delta is not None:
                on_delta("text", piece)
        raise Fault("ended its stream before END.")


@pytest.fixture
def plain() -> Iterator[UpstreamProtocol]:
    protocol = register(Plain())
    yield protocol
    del UPSTREAM_PROTOCOLS[protocol.name]


TRANSCRIPT = [Entry("message", role="user", text="How many?")]


def _client(settings: Settings, answer: httpx.Response, seen: list[httpx.Request]) -> UpstreamClient:
    config = settings.model_upstream_config()
    assert config is not None

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer

    return UpstreamClient(config, transport=httpx.MockTransport(handle))


def test_a_registered_protocol_is_a_choice_of_the_settings_and_the_cli(plain: UpstreamProtocol) -> None:
    settings, _ = parse(["serve", "--model-upstream", "http://127.0.0.1:9/v1", "--model-upstream-api", "plain"])
    assert settings.model_upstream_api == "plain"
    config = settings.model_upstream_config()
    assert config is not None and config.protocol is plain
    assert Settings(model_upstream="http://127.0.0.1:9/v1", model_upstream_api="plain").model_upstream_api == "plain"


def test_a_name_nobody_registered_is_refused_with_the_choices(plain: UpstreamProtocol) -> None:
    with pytest.raises(
        ValueError, match="'ollama' is not a model upstream protocol: one of 'chat', 'responses', 'plain'"
    ):
        Settings(model_upstream_api="ollama")
    with pytest.raises(SystemExit):
        parse(["serve", "--model-upstream-api", "ollama"])


def test_without_its_registration_line_the_protocol_is_no_choice() -> None:
    assert "plain" not in UPSTREAM_PROTOCOLS
    with pytest.raises(ValueError, match="not a model upstream protocol"):
        Settings(model_upstream_api="plain")


def test_a_name_is_registered_once(plain: UpstreamProtocol) -> None:
    with pytest.raises(ValueError, match="registered already"):
        register(Plain())


def test_the_client_speaks_the_registered_protocol(plain: UpstreamProtocol) -> None:
    settings = Settings(model_upstream="http://127.0.0.1:9/v1", model_upstream_api="plain", model_upstream_model="m1")
    seen: list[httpx.Request] = []
    whole = httpx.Response(200, json={"text": "Three.", "calls": [["count", {"of": "sku"}]]})
    client = _client(settings, whole, seen)
    client.config = dataclasses.replace(client.config, stream=False)  # a server that does not stream
    answer = asyncio.run(
        client.complete(
            model="ignored",
            instructions="Be brief.",
            transcript=TRANSCRIPT,
            functions=[Function("count", "Count things.", {"type": "object"})],
        )
    )
    assert (answer.text, answer.calls, answer.output_tokens) == (
        "Three.",
        [ToolCall("call_0", "count", '{"of": "sku"}')],
        1,
    )
    (request,) = seen
    assert str(request.url) == "http://127.0.0.1:9/v1/generate"
    assert json.loads(request.content) == {
        "model": "m1",
        "system": "Be brief.",
        "prompt": "user: How many?",
        "tools": ["count"],
    }


def test_the_client_reads_the_registered_protocols_stream(plain: UpstreamProtocol) -> None:
    settings = Settings(model_upstream="http://127.0.0.1:9/v1", model_upstream_api="plain")
    seen: list[httpx.Request] = []
    streamed = httpx.Response(
        200, text="data: Thr\n\ndata: ee.\n\ndata: END\n\n", headers={"content-type": "text/event-stream"}
    )
    deltas: list[tuple[str, str]] = []
    answer = asyncio.run(
        _client(settings, streamed, seen).complete(
            model="m", instructions=None, transcript=TRANSCRIPT, functions=[], on_delta=lambda *d: deltas.append(d)
        )
    )
    assert answer.text == "Three." and deltas == [("text", "Thr"), ("text", "ee.")]
    assert json.loads(seen[0].content)["stream"] is True


def test_a_fault_of_the_protocols_stream_is_the_upstream_error(plain: UpstreamProtocol) -> None:
    settings = Settings(model_upstream="http://127.0.0.1:9/v1", model_upstream_api="plain")
    cut = httpx.Response(200, text="data: Thr\n\n", headers={"content-type": "text/event-stream"})
    with pytest.raises(
        Exception, match=r"^The model upstream at http://127.0.0.1:9/v1 ended its stream before END\.$"
    ) as e:
        asyncio.run(
            _client(settings, cut, []).complete(model="m", instructions=None, transcript=TRANSCRIPT, functions=[])
        )
    assert getattr(e.value, "code", None) == "upstream_error" and getattr(e.value, "status", None) == 502
