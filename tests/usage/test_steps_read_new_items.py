"""A step of a long program reads only what the request adds: the script's walk, the program's
call positions and its journal entries are read on from the conversation cursor its source
recognised (history/cursor.py), over `store: false` replays and `previous_response_id`
continuations alike, and an edited earlier item is read afresh, so the answer is the one a fresh
server gives (docs/speed.md)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.model.scripted import walk
from ptc_emulator.emulator.tools import kinds
from tests.support import ADD_TOOL, in_process_http, js

pytestmark = pytest.mark.anyio
JSON = {"content-type": "application/json"}
TOOLS: list[dict[str, Any]] = [ADD_TOOL, {"type": "programmatic_tool_calling"}]
CALLS = 30
LOOP = js(
    f"let acc = 0;\nfor (let i = 0; i < {CALLS}; i++) acc = await tools.add({{a: acc, b: i}});\ntext(String(acc))"
)


PADDING = {"role": "user", "content": "pad " * 1200}
"""Makes every body longer than the replayed-body cache's minimum (4 KB), under which a body is
validated whole (and its items are new objects) each time."""


def _settings(tmp_path: Path) -> Settings:
    # One secret for every server here: a fresh one accepts what another issued.
    return Settings(data_dir=tmp_path, store="memory", pool_size=1, bundled_fixtures=False, secret="steps-secret")


async def _post(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    reply = await http.post("/v1/responses", content=json.dumps(body), headers=JSON)
    assert reply.status_code == 200, reply.text[:500]
    return reply.json()  # type: ignore[no-any-return]


def _answers(output: list[dict[str, Any]], edit: Callable[[int], int] = lambda v: v) -> list[dict[str, Any]]:
    return [
        {
            "type": "function_call_output",
            "call_id": o["call_id"],
            "output": str(edit(sum(json.loads(o["arguments"]).values()))),
            "caller": o["caller"],
        }
        for o in output
        if o["type"] == "function_call"
    ]


def _final(response: dict[str, Any]) -> str:
    return str([o for o in response["output"] if o["type"] == "message"][-1]["content"][0]["text"])


class _Counted:
    """How often the per-item steps ran since `reset`: a journal entry made from an output, an
    item's turn kind looked up."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.results = self.kinds = 0
        result, turn_kind = kinds.FunctionKind.result, walk.turn_kind

        def counted_result(kind: Any, output: Any) -> Any:
            self.results += 1
            return result(kind, output)

        def counted_kind(item: Any) -> Any:
            self.kinds += 1
            return turn_kind(item)

        monkeypatch.setattr(kinds.FunctionKind, "result", counted_result)
        monkeypatch.setattr(walk, "turn_kind", counted_kind)

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        self.results = self.kinds = 0
        yield


async def test_a_store_false_step_reads_only_its_new_items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counted = _Counted(monkeypatch)
    async with in_process_http(_settings(tmp_path)) as (http, _):
        items: list[Any] = [PADDING, {"role": "user", "content": LOOP}]
        response = await _post(http, {"model": "m", "input": items, "tools": TOOLS, "store": False})
        per_step: list[tuple[int, int]] = []
        while any(o["type"] == "function_call" for o in response["output"]):
            items = [*items, *response["output"], *_answers(response["output"])]
            with counted.step():
                response = await _post(http, {"model": "m", "input": items, "tools": TOOLS, "store": False})
            per_step.append((counted.results, counted.kinds))
        assert _final(response) == str(sum(range(CALLS)))
    assert len(per_step) == CALLS
    # Every step but the first makes one entry (its new answer) and looks at its few new items,
    # however many calls came before; reading the whole conversation would grow to 30 and 90.
    assert max(results for results, _ in per_step[1:]) == 1, per_step
    assert max(looked for _, looked in per_step[1:]) <= 4, per_step


async def test_a_previous_response_id_step_reads_only_its_new_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = _Counted(monkeypatch)
    async with in_process_http(_settings(tmp_path)) as (http, _):
        response = await _post(http, {"model": "m", "input": LOOP, "tools": TOOLS})
        per_step: list[tuple[int, int]] = []
        while any(o["type"] == "function_call" for o in response["output"]):
            body = {"model": "m", "input": _answers(response["output"]), "tools": TOOLS}
            with counted.step():
                response = await _post(http, {**body, "previous_response_id": response["id"]})
            per_step.append((counted.results, counted.kinds))
        assert _final(response) == str(sum(range(CALLS)))
    # The history comes back as the same objects, its last response's items as new ones: a step
    # reads those and its own, never the calls before.
    assert max(results for results, _ in per_step[2:]) <= 2, per_step
    assert max(looked for _, looked in per_step[2:]) <= 6, per_step


async def _warm(http: httpx.AsyncClient, steps: int) -> tuple[list[Any], dict[str, Any]]:
    """A `store: false` conversation `steps` answers into the program: its items, its last response."""
    items: list[Any] = [PADDING, {"role": "user", "content": LOOP}]
    response = await _post(http, {"model": "m", "input": items, "tools": TOOLS, "store": False})
    for _ in range(steps):
        items = [*items, *response["output"], *_answers(response["output"])]
        response = await _post(http, {"model": "m", "input": items, "tools": TOOLS, "store": False})
    return items, response


async def _error(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    reply = await http.post("/v1/responses", content=json.dumps(body), headers=JSON)
    assert reply.status_code == 400, reply.text[:500]
    return reply.json()["error"]  # type: ignore[no-any-return]


async def test_an_edited_answer_is_read_afresh(tmp_path: Path) -> None:
    """A replay that changes an answer the server has read before gets the answer a fresh server
    gives for the same body: what was kept for the old items is not used for the new one. The
    latest answer edited moves the program on differently; an earlier one makes it diverge."""
    async with in_process_http(_settings(tmp_path / "warm")) as (http, _):
        items, response = await _warm(http, CALLS // 2)
        latest = [*items, *response["output"], *_answers(response["output"], lambda v: v + 1000)]
        changed = await _post(http, {"model": "m", "input": latest, "tools": TOOLS, "store": False})
        first = next(n for n, i in enumerate(items) if i.get("type") == "function_call_output")
        earlier = [*items[:first], {**items[first], "output": "1000"}, *items[first + 1 :]]
        diverged = await _error(http, {"model": "m", "input": earlier, "tools": TOOLS, "store": False})
        again = await _post(http, {"model": "m", "input": items, "tools": TOOLS, "store": False})
    async with in_process_http(_settings(tmp_path / "fresh")) as (fresh, _):
        expected = await _post(fresh, {"model": "m", "input": latest, "tools": TOOLS, "store": False})
        expected_error = await _error(fresh, {"model": "m", "input": earlier, "tools": TOOLS, "store": False})
        unchanged = await _post(fresh, {"model": "m", "input": items, "tools": TOOLS, "store": False})
    assert _calls(changed) == _calls(expected) and _calls(again) == _calls(unchanged) == _calls(response)
    assert _calls(changed) != _calls(again)  # the edit reached the program: its next call differs
    assert diverged["code"] == expected_error["code"] == "program_divergence"
    assert diverged["message"].split(" (", 1)[1] == expected_error["message"].split(" (", 1)[1]


def _calls(response: dict[str, Any]) -> list[str]:
    return [o["arguments"] for o in response["output"] if o["type"] == "function_call"]


def test_a_websocket_step_reads_only_its_new_items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over a socket, a step continues its last response from the socket's own store: its history
    comes back as the very objects of the cursor the last step kept, and only what follows is read."""
    counted = _Counted(monkeypatch)
    with TestClient(create_app(_settings(tmp_path)), base_url="http://127.0.0.1") as client:
        with client.websocket_connect("ws://127.0.0.1/v1/responses") as socket:

            def create(body: dict[str, Any]) -> dict[str, Any]:
                socket.send_text(json.dumps({"type": "response.create", "model": "m", "tools": TOOLS, **body}))
                while True:
                    event = json.loads(socket.receive_text())
                    if event["type"] in ("response.completed", "error", "response.failed", "response.incomplete"):
                        assert event["type"] == "response.completed", event
                        return dict(event["response"])

            response = create({"input": LOOP, "store": False})
            per_step: list[tuple[int, int]] = []
            while any(o["type"] == "function_call" for o in response["output"]):
                with counted.step():
                    response = create(
                        {"input": _answers(response["output"]), "store": False, "previous_response_id": response["id"]}
                    )
                per_step.append((counted.results, counted.kinds))
    assert _final(response) == str(sum(range(CALLS)))
    assert max(results for results, _ in per_step[2:]) <= 2, per_step
    assert max(looked for _, looked in per_step[2:]) <= 6, per_step
