"""Scopes isolate by id: a response or conversation made in one test's scope is, from any other
scope and from no scope, exactly what an id that does not exist is, on every route; and what it
holds is left as it was. The inspector's JSON shows a caller in a scope that scope alone.

Each refusal is compared with the one the same request gets for a missing id (the same status
and body, the id aside): nothing tells the other scope that the id exists. Agents API sessions
are checked route by route in tests/agents/test_scope.py; item references in
tests/conversations/test_item_scope.py. On the code before, every route below answered another
scope with the response or conversation itself (and deleted it, appended to it, continued it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from ptc_emulator.names import SCOPE_HEADER
from ptc_emulator.testing.server import PTCEmulator

Call = Callable[[str], httpx.Response]
"""A request about one id (a response's or a conversation's)."""

MISSING_RESPONSE = "resp_0123456789abcdef0123456789abcdef"
MISSING_CONVERSATION = "conv_0123456789abcdef0123456789abcdef"


def _root(emulator: PTCEmulator) -> str:
    return emulator.server_url[: -len("/v1")]


def _clients(emulator: PTCEmulator) -> dict[str, httpx.Client]:
    """The test's own scope, another scope (by header, and by a scoped URL), and no scope."""
    key = {"Authorization": f"Bearer {emulator.api_key}"}
    return {
        "mine": httpx.Client(base_url=emulator.base_url, headers=key, timeout=30),
        "other": httpx.Client(
            base_url=emulator.server_url, headers={**key, SCOPE_HEADER: emulator.scope + "-other"}, timeout=30
        ),
        "other_url": httpx.Client(
            base_url=f"{_root(emulator)}/scopes/{emulator.scope}-url/v1", headers=key, timeout=30
        ),
        "unscoped": httpx.Client(base_url=emulator.server_url, headers=key, timeout=30),
    }


def _as_missing(call: Call, real: str, missing: str) -> None:
    """`call` about `real` is answered exactly as about `missing`, an id that does not exist."""
    refused, absent = call(real), call(missing)
    assert absent.status_code in (400, 404), absent.text
    assert refused.status_code == absent.status_code, (refused.status_code, refused.text)
    assert refused.json() == _with_id(absent.json(), missing, real)


def _with_id(body: Any, missing: str, real: str) -> Any:
    return json.loads(json.dumps(body).replace(missing, real))


def _response_calls(http: httpx.Client, made_id: str, background_id: str) -> list[tuple[Call, str]]:
    """Every route that takes a response id, each with the id it is tried on."""

    def create(path: str) -> Call:
        return lambda i: http.post(path, json={"model": "m", "input": "hi", "previous_response_id": i})

    return [
        (lambda i: http.get(f"/responses/{i}"), made_id),
        (lambda i: http.get(f"/responses/{i}", params={"stream": "true"}), made_id),
        (lambda i: http.get(f"/responses/{i}/input_items"), made_id),
        (lambda i: http.post(f"/responses/{i}/cancel"), background_id),
        (lambda i: http.delete(f"/responses/{i}"), made_id),
        (create("/responses"), made_id),
        (create("/responses/input_tokens"), made_id),
        (create("/responses/compact"), made_id),
    ]


def _conversation_calls(http: httpx.Client, item_id: str) -> list[Call]:
    """Every route that takes a conversation id."""
    message = [{"role": "user", "content": "stolen"}]
    return [
        lambda i: http.get(f"/conversations/{i}"),
        lambda i: http.post(f"/conversations/{i}", json={"metadata": {"k": "changed"}}),
        lambda i: http.get(f"/conversations/{i}/items"),
        lambda i: http.get(f"/conversations/{i}/items/{item_id}"),
        lambda i: http.post(f"/conversations/{i}/items", json={"items": message}),
        lambda i: http.delete(f"/conversations/{i}/items/{item_id}"),
        lambda i: http.delete(f"/conversations/{i}"),
        lambda i: http.post("/responses", json={"model": "m", "input": "hello", "conversation": i}),
        lambda i: http.post("/responses/input_tokens", json={"model": "m", "input": "hi", "conversation": i}),
    ]


@pytest.fixture
def clients(ptc_emulator: PTCEmulator) -> Iterator[dict[str, httpx.Client]]:
    made = _clients(ptc_emulator)
    yield made
    for client in made.values():
        client.close()


def test_another_scopes_response_is_as_absent_on_every_route(
    ptc_emulator: PTCEmulator, clients: dict[str, httpx.Client]
) -> None:
    ptc_emulator.add_scenario({"match": {"input": "^hello$"}, "turns": [{"message": "Secret of this scope."}]})
    mine = clients["mine"]
    made = mine.post("/responses", json={"model": "m", "input": "hello"})
    background = mine.post("/responses", json={"model": "m", "input": "hello", "background": True})
    assert made.status_code == background.status_code == 200, (made.text, background.text)
    made_id, background_id = made.json()["id"], background.json()["id"]
    input_items = mine.get(f"/responses/{made_id}/input_items").json()

    for name in ("other", "other_url", "unscoped"):
        for call, real in _response_calls(clients[name], made_id, background_id):
            _as_missing(call, real, MISSING_RESPONSE)

    # Nothing of it changed: still there, whole, in its own scope, and continued there.
    assert mine.get(f"/responses/{made_id}").json() == made.json()
    assert mine.get(f"/responses/{made_id}/input_items").json() == input_items
    assert mine.get(f"/responses/{background_id}").json()["status"] == "completed"
    again = mine.post("/responses", json={"model": "m", "input": "hello", "previous_response_id": made_id})
    assert again.status_code == 200, again.text


def test_another_scopes_conversation_is_as_absent_on_every_route(
    ptc_emulator: PTCEmulator, clients: dict[str, httpx.Client]
) -> None:
    ptc_emulator.add_scenario({"match": {"input": "^hello$"}, "turns": [{"message": "Secret of this scope."}]})
    mine = clients["mine"]
    made = mine.post("/conversations", json={"items": [{"role": "user", "content": "first"}], "metadata": {"k": "v"}})
    assert made.status_code == 200, made.text
    conv = made.json()["id"]
    answered = mine.post("/responses", json={"model": "m", "input": "hello", "conversation": conv})
    assert answered.status_code == 200, answered.text
    items = mine.get(f"/conversations/{conv}/items").json()
    item_id = items["data"][0]["id"]

    for name in ("other", "other_url", "unscoped"):
        for call in _conversation_calls(clients[name], item_id):
            _as_missing(call, conv, MISSING_CONVERSATION)

    # Nothing of it changed, and it goes on in its own scope.
    assert mine.get(f"/conversations/{conv}").json() == made.json()
    assert mine.get(f"/conversations/{conv}/items").json() == items
    assert mine.post("/responses", json={"model": "m", "input": "hello", "conversation": conv}).status_code == 200
