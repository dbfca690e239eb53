"""A program resumes on a new server process: the first step against one, the rest against another."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.testing.process import ServerProcess, _parent
from tests.support import PTC_TOOLS, answer_all, arithmetic, js

# Seeded randomness and the pinned clock both flow into call arguments: a replay in another
# process that saw other values would diverge from the journal and be refused.
CODE = js(
    "let acc = 0;\nfor (let i = 0; i < 3; i++) acc = await tools.add({a: acc, b: Math.floor(Math.random() * 1000)});"
    "\nconst r = await tools.add({a: acc, b: Date.now()});\ntext(String(r))"
)


def expected(items: list[Any]) -> int:
    """What the program must print: the random addends it sent, plus its clock."""
    calls = [json.loads(i["arguments"]) for i in items if i.get("type") == "function_call"]
    return sum(c["b"] for c in calls)


@contextlib.contextmanager
def server(data_dir: Path, *, store: str = "sqlite", secret: str | None = None, live_cache: int = 64) -> Iterator[str]:
    """`python -m ptc_emulator serve` on its own port; killed with SIGKILL at the end (a restart must
    not depend on a graceful shutdown)."""
    process = ServerProcess(
        data_dir, store=store, secret=secret, workers=2, args=("--live-cache", str(live_cache))
    ).start()
    try:
        yield process.base_url
    finally:
        process.kill9()


def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)


@pytest.mark.parametrize("store_mode", ["sqlite", "memory"])
def test_store_false_resumes_on_a_new_process(tmp_path: Path, store_mode: str) -> None:
    """Only the items, the fingerprint and the secret carry the program across the restart."""
    options: dict[str, Any] = {"secret": "restart-test-secret", "store": store_mode}
    with server(tmp_path, **options) as url, client(url) as c:
        first = c.responses.create(model="m", input=CODE, tools=PTC_TOOLS, store=False)
    items: list[Any] = [{"role": "user", "content": CODE}, *(i.model_dump(exclude_none=True) for i in first.output)]
    items += answer_all(first, arithmetic)
    with server(tmp_path, **options) as url, client(url) as c:
        response = c.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)
        while any(i.type == "function_call" for i in response.output):
            items += [i.model_dump(exclude_none=True) for i in response.output] + answer_all(response, arithmetic)
            response = c.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)
    program = first.output[0]
    assert program.type == "program"
    clock_ms = json.loads(_payload(program.fingerprint))["t"]
    calls = [json.loads(i["arguments"]) for i in items if i.get("type") == "function_call"]
    assert len(calls) == 4 and calls[-1]["b"] == clock_ms  # Date.now() is the pinned clock, across processes
    assert response.output_text == str(expected(items))


def test_store_true_resumes_on_a_new_process(tmp_path: Path) -> None:
    """The generated secret and the SQLite store in the data directory carry the conversation."""
    with server(tmp_path) as url, client(url) as c:
        first = c.responses.create(model="m", input=CODE, tools=PTC_TOOLS)
    assert (tmp_path / "secret").is_file()
    with server(tmp_path) as url, client(url) as c:
        response = first
        while any(i.type == "function_call" for i in response.output):
            response = c.responses.create(
                model="m", previous_response_id=response.id, input=answer_all(response, arithmetic), tools=PTC_TOOLS
            )
        assert response.output_text.isdigit()
        assert c.responses.retrieve(first.id).id == first.id


def test_another_secret_refuses_the_program(tmp_path: Path) -> None:
    with server(tmp_path, secret="one") as url, client(url) as c:
        first = c.responses.create(model="m", input=CODE, tools=PTC_TOOLS, store=False)
    items: list[Any] = [{"role": "user", "content": CODE}, *(i.model_dump(exclude_none=True) for i in first.output)]
    items += answer_all(first, arithmetic)
    with server(tmp_path, secret="two") as url, client(url) as c:
        with pytest.raises(openai.BadRequestError) as caught:
            c.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)
    assert caught.value.code == "invalid_fingerprint"


def _payload(fingerprint: str) -> str:
    import base64

    payload = fingerprint.split(".")[1]
    return base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode()


def test_the_live_cache_changes_no_item(tmp_path: Path) -> None:
    """Every resume of a conversation gives the same items from a server that keeps programs live
    and from one that replays every time (ids the server draws at random aside)."""
    options: dict[str, Any] = {"secret": "same-secret", "store": "memory"}
    code = js(
        "const xs = await Promise.all([1, 2, 3].map((i) => tools.add({a: i, b: Math.floor(Math.random() * 9)})));"
        "\nlet acc = 0;\nfor (const x of xs) acc = await tools.add({a: acc, b: x});\ntext(`acc=${acc} at ${Date()}`)"
    )
    requests: list[list[Any]] = []
    live_outputs: list[list[dict[str, Any]]] = []
    with server(tmp_path / "live", **options, live_cache=64) as url, client(url) as c:
        items: list[Any] = [{"role": "user", "content": code}]
        response = c.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)
        while any(i.type == "function_call" for i in response.output):
            items += [i.model_dump(exclude_none=True) for i in response.output] + answer_all(response, arithmetic)
            requests.append(list(items))
            response = c.responses.create(model="m", input=items, tools=PTC_TOOLS, store=False)
            live_outputs.append([_without_random_ids(i.model_dump()) for i in response.output])
        hits = httpx.get(url.replace("/v1", "/_emulator/health")).json()["sandbox_live_hits"]
    assert len(requests) == 4 and hits == 4  # every resume was live
    with server(tmp_path / "replay", **options, live_cache=0) as url, client(url) as c:
        for request, expected in zip(requests, live_outputs, strict=True):
            response = c.responses.create(model="m", input=request, tools=PTC_TOOLS, store=False)
            assert [_without_random_ids(i.model_dump()) for i in response.output] == expected
        hits = httpx.get(url.replace("/v1", "/_emulator/health")).json()["sandbox_live_hits"]
    assert hits == 0


def _without_random_ids(item: dict[str, Any]) -> dict[str, Any]:
    """Message ids are drawn at random; call ids and program_output ids are derived, and stay."""
    return {k: v for k, v in item.items() if not (item.get("type") == "message" and k == "id")}


def test_a_server_never_passes_for_another_on_a_taken_port(tmp_path: Path) -> None:
    """The port a `ServerProcess` chose was free then; another test's server may hold it by the
    time this one starts. That server's health must not pass for this one's start (the test would
    then talk to another server): this one moves to another port, and its workers are its own."""
    with ServerProcess(tmp_path / "a", store="memory") as first:
        second = ServerProcess(tmp_path / "b", store="memory")
        second.port = first.port  # as if the port had been taken since it was chosen
        second.command[second.command.index("--port") + 1] = str(first.port)
        with second:
            assert second.port != first.port
            assert second.proc is not None and first.proc is not None
            assert set(second.worker_pids).isdisjoint(first.worker_pids)
            assert all(_parent(pid) == second.proc.pid for pid in second.worker_pids)
