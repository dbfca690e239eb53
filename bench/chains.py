"""The 100-call chain three ways, for `bench/floor.py`: HTTP `store: false` (the whole input each
time) is there; here are HTTP `previous_response_id` (`store: true`, only the new outputs) and
one WebSocket (`response.create` frames continuing by `previous_response_id`, `store: false`:
the socket keeps its own responses, as the hosted mode does).

Each returns the sum of its 101 round trips: for a frame, from the send to the arrival of its
response's last event (`response.completed`), as a client waiting for it sees it.

`long_steps` measures what a step costs as a chain grows: a longer chain (400 calls) over one
WebSocket and over HTTP `store: false` (whose bodies the floor is then sent too), each step's
round trip kept, so that the first steps' median can be set beside the last steps'.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

Answer = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
"""The function_call_output items for a response's function calls."""

_FINAL = {"response.completed", "response.incomplete", "response.failed"}


def by_id(http: httpx.Client, headers: dict[str, str], first: dict[str, Any], answer: Answer) -> float:
    """The chain over HTTP, `store: true`, each request naming the last response and sending only
    its outputs' answers."""
    body: dict[str, Any] = {**first, "store": True}
    total = 0.0
    while True:
        encoded = json.dumps(body, separators=(",", ":")).encode("utf-8")
        began = time.perf_counter()
        reply = http.post("/v1/responses", content=encoded, headers=headers)
        total += time.perf_counter() - began
        if reply.status_code != 200:
            raise RuntimeError(f"{reply.status_code}: {reply.text[:500]}")
        response = reply.json()
        tail = answer(response["output"])
        if not tail:
            return total
        body = {k: v for k, v in first.items() if k != "input"}
        body.update(store=True, previous_response_id=response["id"], input=tail)


class Socket:
    """One WebSocket to the emulator's `/v1/responses`, kept open across chains."""

    def __init__(self, root: str, headers: dict[str, str]) -> None:
        url = root.replace("http://", "ws://", 1) + "/v1/responses"
        auth = {k: v for k, v in headers.items() if k == "authorization"}
        self.ws: ClientConnection = connect(url, additional_headers=auth, max_size=None)

    def create(self, frame: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """(round trip, final response) of one `response.create` frame."""
        encoded = json.dumps({"type": "response.create", **frame}, separators=(",", ":"))
        began = time.perf_counter()
        self.ws.send(encoded)
        while True:
            event = json.loads(self.ws.recv())
            kind = event.get("type")
            if kind in _FINAL:
                return time.perf_counter() - began, event["response"]
            if kind == "error":
                raise RuntimeError(f"error event: {event}")

    def chain(self, first: dict[str, Any], answer: Answer) -> float:
        """The chain on this socket, `store: false`, continued by `previous_response_id`."""
        frame: dict[str, Any] = {**first, "store": False}
        total = 0.0
        while True:
            took, response = self.create(frame)
            total += took
            tail = answer(response["output"])
            if not tail:
                return total
            frame = {k: v for k, v in first.items() if k != "input"}
            frame.update(store=False, previous_response_id=response["id"], input=tail)

    def steps(self, first: dict[str, Any], answer: Answer) -> list[float]:
        """`chain`, each step's round trip."""
        frame: dict[str, Any] = {**first, "store": False}
        times = []
        while True:
            took, response = self.create(frame)
            times.append(took)
            tail = answer(response["output"])
            if not tail:
                return times
            frame = {k: v for k, v in first.items() if k != "input"}
            frame.update(store=False, previous_response_id=response["id"], input=tail)

    def close(self) -> None:
        self.ws.close()


def replayed_steps(post: Callable[[bytes], tuple[float, bytes]], first: dict[str, Any], answer: Answer) -> list[float]:
    """The chain over HTTP `store: false` (the whole input each time), each step's round trip."""
    items: list[Any] = list(first["input"])
    times = []
    while True:
        body = {**first, "input": items, "store": False}
        took, reply = post(json.dumps(body, separators=(",", ":")).encode("utf-8"))
        times.append(took)
        output = json.loads(reply)["output"]
        tail = answer(output)
        if not tail:
            return times
        items = [*items, *output, *tail]


def ends(times: list[float], count: int = 10) -> tuple[float, float]:
    """The medians (ms) of a chain's first steps after its create and of its last steps before
    the final one."""
    first, last = times[1 : 1 + count], times[-1 - count : -1]
    return statistics.median(first) * 1000, statistics.median(last) * 1000
