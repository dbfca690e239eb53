"""docs/architecture.md's walks are the path a request takes: each stop is a function the request
really enters, in the order the doc lists them.

A profiler (`sys.setprofile`, and `threading.setprofile` for the app's portal and worker threads)
records every function of the project a request enters: the third request of a `store: false`
loop (a resume, its whole conversation replayed), and the third `response.create` of a WebSocket
(a resume by `previous_response_id` from the socket's own store). The app runs in this process
on real V8 workers. A stop that is renamed, moved, no longer on the path, or listed out of order
fails here; shortening a walk is editing its list.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from starlette.testclient import TestClient

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from tests.support import ADD_TOOL, add_answers, js

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = {"_root": "ptc_emulator", "api": "ptc_emulator.api", "emulator": "ptc_emulator.emulator"}
PACKAGES |= {"sandbox": "ptc_emulator.sandbox", "testing": "ptc_emulator.testing"}
STOP = re.compile(r"^\d+\. `([\w/]+\.py):([\w.]+)`", re.M)

TOOLS: list[dict[str, Any]] = [ADD_TOOL, {"type": "programmatic_tool_calling"}]
PROGRAM = js("let t = 0;\nfor (let i = 0; i < 4; i++) t = await tools.add({a: t, b: i});\ntext('t=' + t)")
INSTRUCTIONS = "Answer with care. " * 300
"""A system prompt of some 5 KB: a body the replayed-body reader takes (it skips bodies under 4 KB)."""

Stop = tuple[str, str]
"""(path from the repository's root, qualified name)."""


def walk(title: str) -> list[Stop]:
    """The stops of the doc's section `## <title>`, in order (and as many as its text says)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    stops: list[Stop] = STOP.findall(section)
    said = re.search(r"(\d+) stops", section)
    assert said is not None and int(said.group(1)) == len(stops), f"{title}: the text counts its stops wrong"
    return stops


def follows(trace: list[Stop], stops: list[Stop]) -> list[Stop]:
    """The stops the trace does not enter in this order (each after the one before it): [] when
    the walk is the trace's path."""
    missing, at = [], 0
    for stop in stops:
        try:
            at = trace.index(stop, at) + 1
        except ValueError:
            missing.append(stop)
    return missing


class Tracer:
    """Every function of the project entered while `on`, from any thread."""

    def __init__(self) -> None:
        self.on = False
        self.calls: list[Stop] = []
        self._prefix = str(ROOT) + "/"

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and self.on:
            name = frame.f_code.co_filename
            if name.startswith(self._prefix) and "/.venv/" not in name:
                self.calls.append((name[len(self._prefix) :], frame.f_code.co_qualname))

    def during(self, step: Callable[[], Any]) -> Any:
        self.on = True
        try:
            return step()
        finally:
            self.on = False


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[TestClient, Tracer]]:
    tracer = Tracer()
    threading.setprofile(tracer)  # before the client starts the app's threads: they inherit it
    sys.setprofile(tracer)
    try:
        settings = Settings(data_dir=tmp_path, store="memory", bundled_fixtures=False, pool_size=1)
        with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
            yield client, tracer
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def _check(stops: list[Stop], trace: list[Stop]) -> None:
    assert 10 <= len(stops) <= 25, f"{len(stops)} stops"
    for path, name in stops:  # each names a function of that module
        folder, _, rest = path.partition("/")
        module = importlib.import_module(".".join([PACKAGES[folder], *rest[:-3].split("/")]).removesuffix(".__init__"))
        found: Any = module
        for part in name.split("."):
            found = getattr(found, part, None)
            assert found is not None, f"{path}:{name} does not exist"
        assert getattr(found, "__qualname__", None) == name, f"{path}:{name} is {found!r}"
    assert follows(trace, stops) == [], "the doc's stops the request does not enter in that order"
    assert follows(trace, stops[::-1]) != [], "the trace holds the stops in every order: it shows nothing"


def test_the_store_false_walk_is_the_path_of_a_resume(traced: tuple[TestClient, Tracer]) -> None:
    client, tracer = traced
    items: list[dict[str, Any]] = [{"role": "user", "content": PROGRAM}]

    def create() -> dict[str, Any]:
        body = {"model": "m", "instructions": INSTRUCTIONS, "input": items, "tools": TOOLS, "store": False}
        response = client.post("/v1/responses", json=body)
        assert response.status_code == 200, response.text
        return dict(response.json())

    for step in range(3):
        response = tracer.during(create) if step == 2 else create()
        items.extend([*response["output"], *add_answers(response["output"])])
    assert [i["type"] for i in response["output"]] == ["function_call"]  # a resume that paused again
    _check(walk("The walk of a store:false resume"), tracer.calls)


def test_the_websocket_walk_is_the_path_of_a_step(traced: tuple[TestClient, Tracer]) -> None:
    client, tracer = traced
    with client.websocket_connect("ws://127.0.0.1/v1/responses") as socket:
        items: list[dict[str, Any]] = [{"role": "user", "content": PROGRAM}]
        previous: str | None = None

        def create() -> dict[str, Any]:
            body = {"type": "response.create", "model": "m", "input": items, "tools": TOOLS, "store": False}
            socket.send_text(json.dumps({**body, "previous_response_id": previous} if previous else body))
            while True:
                event = json.loads(socket.receive_text())
                if event["type"] in ("response.completed", "error", "response.failed", "response.incomplete"):
                    assert event["type"] == "response.completed", event
                    return dict(event["response"])

        for step in range(3):
            response = tracer.during(create) if step == 2 else create()
            previous, items = response["id"], add_answers(response["output"])
    assert [i["type"] for i in response["output"]] == ["function_call"]
    _check(walk("The walk of a WebSocket step"), tracer.calls)
