"""A response's context holds at most `MAX_CONTEXT_ITEMS` items: its input and the history of its
`conversation` or `previous_response_id` chain. Past it a create (or `input_tokens`) is the hosted
API's 400 `context_length_exceeded`, found before the history is read; with `truncation: "auto"`
the history's oldest items are dropped, and only the newest are read.

A conversation grows by every create's whole input and output: three creates of 400,000 messages
made one of 1.2 M items, and every later request on it read them all back (a minute each, every
other client held for seconds by the collections it caused). The bound is lowered here so the
histories are short; what the tests count is the items the store hands back and the stored
responses read, not time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from ptc_emulator.emulator.history import stored
from ptc_emulator.testing.server import EmulatorServer
from tests.api.api_support import PTC_TOOLS, program_message

BOUND = 50
TURN = 20
"""User messages each create of the history sends (its output adds a program, its output and a
message: 23 items a turn)."""

HOSTED = {
    "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
    "type": "invalid_request_error",
    "param": "input",
    "code": "context_length_exceeded",
}


@pytest.fixture(autouse=True)
def bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stored, "MAX_CONTEXT_ITEMS", BOUND)


def _said(first: int, count: int) -> list[dict[str, Any]]:
    """User messages of different lengths (message n is some n tokens), so a window of them shifted
    by one counts differently."""
    return [{"role": "user", "content": "word " * n} for n in range(first, first + count)]


def _turn(turn: int) -> list[dict[str, Any]]:
    return [*_said(turn * TURN + 1, TURN - 1), {"role": "user", "content": program_message(f"text('answer {turn}')")}]


def _create(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/responses", json={"model": "m", "tools": PTC_TOOLS, **body})


def _tokens(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/responses/input_tokens", json={"model": "m", "tools": PTC_TOOLS, **body})


class _Reads:
    """The conversation items the store hands back (each one decoded)."""

    def __init__(self, server: EmulatorServer) -> None:
        self.items = 0
        conversations = server.app.state.emulator.store.conversations
        for name in ("read", "items"):
            real = getattr(conversations, name)
            setattr(conversations, name, self._counted(real))

    def _counted(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def read(*args: Any, **kwargs: Any) -> Any:
            found = real(*args, **kwargs)
            self.items += len(found if isinstance(found, list) else found[1] if found else [])
            return found

        return read


@pytest.fixture(params=["memory", "sqlite"])
def server(request: pytest.FixtureRequest, make_server: Callable[..., EmulatorServer]) -> EmulatorServer:
    return make_server(store=request.param)


@pytest.fixture
def client(server: EmulatorServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        yield client


def _long_conversation(client: httpx.Client) -> tuple[str, list[dict[str, Any]]]:
    """A conversation of 60 user messages, past the bound, and its items as sent."""
    items = _said(1, 60)
    cid = client.post("/conversations", json={"items": items[:20]}).json()["id"]
    for first in (20, 40):
        added = client.post(f"/conversations/{cid}/items", json={"items": items[first : first + 20]})
        assert added.status_code == 200, added.text[:500]
    return cid, items


def test_a_conversation_past_the_bound_is_refused_before_its_items_are_read(
    server: EmulatorServer, client: httpx.Client
) -> None:
    cid, _ = _long_conversation(client)
    reads = _Reads(server)
    for answered in (
        _create(client, conversation=cid, input=program_message("text('more')")),
        _create(client, conversation=cid, input="more", truncation="disabled", stream=True),
        _tokens(client, conversation=cid, input="more"),
    ):
        assert answered.status_code == 400, answered.text[:500]
        assert answered.json() == {"error": HOSTED}
    assert reads.items == 0, "the conversation's items were read to refuse it"
    listed = client.get(f"/conversations/{cid}/items", params={"limit": 100}).json()
    assert len(listed["data"]) == 60, "a refused create appended to the conversation"


def test_truncation_auto_reads_only_the_newest_items_of_a_conversation(
    server: EmulatorServer, client: httpx.Client
) -> None:
    cid, items = _long_conversation(client)
    reads = _Reads(server)
    # What the model reads: the newest BOUND - 1 items and the input, counted as if sent whole.
    counted = _tokens(client, conversation=cid, input="more", truncation="auto")
    sent = _tokens(client, input=[*items[-(BOUND - 1) :], {"role": "user", "content": "more"}])
    assert counted.status_code == sent.status_code == 200, (counted.text[:300], sent.text[:300])
    assert counted.json()["input_tokens"] == sent.json()["input_tokens"]
    made = _create(client, conversation=cid, input=program_message("text('kept')"), truncation="auto")
    assert made.status_code == 200, made.text[:500]
    assert made.json()["truncation"] == "auto"
    assert made.json()["output"][-1]["content"][0]["text"] == "kept"
    assert reads.items <= 2 * BOUND, f"{reads.items} items read back for two contexts of {BOUND}"
    listed = client.get(f"/conversations/{cid}/items", params={"limit": 100}).json()
    assert len(listed["data"]) == 60 + 1 + 3, "the conversation keeps every item, the dropped ones too"


def _long_chain(client: httpx.Client) -> list[str]:
    """Four chained stored responses of 23 items each (92 in all, each create within the bound: the
    later ones with their history cut)."""
    ids: list[str] = []
    for turn in range(4):
        previous = {"previous_response_id": ids[-1], "truncation": "auto"} if ids else {}
        made = _create(client, input=_turn(turn), **previous)
        assert made.status_code == 200, made.text[:500]
        ids.append(made.json()["id"])
    return ids


class _Records:
    """The stored responses read back, by id."""

    def __init__(self, server: EmulatorServer) -> None:
        self.read: list[str] = []
        responses = server.app.state.emulator.engine.history.store
        real = responses.get

        def get(response_id: str) -> Any:
            self.read.append(response_id)
            return real(response_id)

        responses.get = get


def test_a_chain_past_the_bound_is_refused_without_reading_its_oldest_responses(
    server: EmulatorServer, client: httpx.Client
) -> None:
    ids = _long_chain(client)
    records = _Records(server)
    for answered in (
        _create(client, previous_response_id=ids[-1], input=program_message("text('more')")),
        _tokens(client, previous_response_id=ids[-1], input="more"),
    ):
        assert answered.status_code == 400, answered.text[:500]
        assert answered.json() == {"error": HOSTED}
    assert records.read, "the chain was not read at all"
    assert ids[0] not in records.read, "the chain was read back past the bound to refuse it"


def test_truncation_auto_keeps_the_newest_items_of_a_chain(server: EmulatorServer, client: httpx.Client) -> None:
    ids = _long_chain(client)
    chain: list[dict[str, Any]] = []
    for response_id in ids:
        listed = client.get(f"/responses/{response_id}/input_items", params={"limit": 100, "order": "asc"}).json()
        chain += [*listed["data"], *client.get(f"/responses/{response_id}").json()["output"]]
    records = _Records(server)
    counted = _tokens(client, previous_response_id=ids[-1], input="more", truncation="auto")
    sent = _tokens(client, input=[*chain[-(BOUND - 1) :], {"role": "user", "content": "more"}])  # as a replay
    assert counted.status_code == sent.status_code == 200, (counted.text[:300], sent.text[:300])
    assert counted.json()["input_tokens"] == sent.json()["input_tokens"]
    made = _create(client, previous_response_id=ids[-1], input=program_message("text('kept')"), truncation="auto")
    assert made.status_code == 200, made.text[:500]
    assert made.json()["output"][-1]["content"][0]["text"] == "kept"
    assert ids[0] not in records.read, "the chain was read back past the bound"


def test_an_input_past_the_bound_alone_is_refused(client: httpx.Client) -> None:
    said = [*_said(1, BOUND), {"role": "user", "content": program_message("text('over')")}]
    for answered in (_create(client, input=said, truncation="auto"), _tokens(client, input=said)):
        assert answered.status_code == 400, answered.text[:500]
        assert answered.json() == {"error": HOSTED}
    within = _create(client, input=said[1:])
    assert within.status_code == 200, within.text[:500]
