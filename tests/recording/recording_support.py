"""Helpers for the record-and-replay tests: an upstream emulator, a recording one, a replaying one."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
from openai.types.responses import Response

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.streaming.streaming_support import check_stream, decode
from tests.support import validating_client

SCOPE = "recording-tests"
"""The upstream's scenarios are added in this scope; the clients send it (it is forwarded)."""

Tools = list[dict[str, Any]]
Implementations = Callable[[str, dict[str, Any]], Any]


def settings(tmp: Path, **overrides: Any) -> Settings:
    return Settings(data_dir=tmp, store="memory", pool_size=1, **overrides)


@contextlib.contextmanager
def serving(config: Settings) -> Iterator[PTCEmulator]:
    """A server in this process, and a view of it in the tests' scope."""
    server = EmulatorServer(config).start()
    view = PTCEmulator(server.base_url, scope=SCOPE)
    try:
        yield view
    finally:
        view.close()
        server.stop()


def upstream(tmp: Path) -> contextlib.AbstractContextManager[PTCEmulator]:
    return serving(settings(tmp / "upstream", bundled_fixtures=True))  # the demos play the real model


def recorder(
    tmp: Path, url: str, directory: Path, mode: str = "new", **overrides: Any
) -> contextlib.AbstractContextManager[PTCEmulator]:
    return serving(
        settings(
            tmp / "recorder", upstream=url, record_dir=directory, record_mode=mode, bundled_fixtures=False, **overrides
        )
    )


def replayer(tmp: Path, directory: Path) -> contextlib.AbstractContextManager[PTCEmulator]:
    """A plain emulator (no upstream), bundled fixtures included, with the recordings as fixtures."""
    return serving(settings(tmp / "replayer", fixtures=(directory,), bundled_fixtures=True))


def journal(view: PTCEmulator, count: int) -> list[dict[str, Any]]:
    """The view's journal once it holds `count` entries: a streamed response (SSE or WebSocket)
    may be journaled just after its last event was sent."""
    deadline = time.monotonic() + 60
    while len(entries := view.journal) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return entries


def client(view: PTCEmulator) -> openai.OpenAI:
    return validating_client(view, max_retries=0)


def outputs_for(output: list[Any], implementations: Implementations) -> list[dict[str, Any]]:
    return [
        {
            "type": "function_call_output",
            "call_id": item.call_id,
            "output": json.dumps(implementations(item.name, json.loads(item.arguments))),
            "caller": item.caller.model_dump() if item.caller else None,
        }
        for item in output
        if item.type == "function_call"
    ]


def chain_loop(
    sdk: openai.OpenAI, text: str, tools: Tools, implementations: Implementations, *, stream: bool = False
) -> list[Any]:
    """A store:true loop continued with previous_response_id; every response, in order."""
    responses = [_create(sdk, stream, model="gpt-test", input=text, tools=tools)]
    while outputs := outputs_for(responses[-1].output, implementations):
        responses.append(
            _create(sdk, stream, model="gpt-test", input=outputs, tools=tools, previous_response_id=responses[-1].id)
        )
        assert len(responses) < 20
    return responses


def replay_loop(sdk: openai.OpenAI, text: str, tools: Tools, implementations: Implementations) -> list[Any]:
    """A store:false loop that resends every item, as the guide's loop does."""
    items: list[Any] = [{"role": "user", "content": text}]
    responses = []
    while True:
        response = sdk.responses.create(model="gpt-test", store=False, input=items, tools=tools)
        responses.append(response)
        items.extend(item.model_dump(exclude_none=True) for item in response.output)
        outputs = outputs_for(response.output, implementations)
        if not outputs:
            return responses
        items.extend(outputs)
        assert len(responses) < 20


def _create(sdk: openai.OpenAI, stream: bool, **params: Any) -> Any:
    """The response; streamed, every event is checked strictly against the SDK's models."""
    if not stream:
        return sdk.responses.create(**params)
    with sdk.responses.with_streaming_response.create(stream=True, **params) as raw:
        events = decode(raw.iter_bytes())
    return Response.model_validate(check_stream(events))
