"""Reasoning items a client sends: their `encrypted_content` is refused wherever it arrives unless
this server issued it (for that item), and a stored reasoning item always has an id of its own."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from starlette.testclient import TestClient

FORGED = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "zz"}
HI = {"role": "user", "content": "hi"}
THINK = {
    "name": "unit__reasoning_items_think",
    "match": {"input": "^ponder$"},
    "turns": [{"reasoning": "Thinking it over.", "message": "pondered"}, {"message": "again"}],
}

HELLO = {"name": "unit__reasoning_items_hi", "match": {"input": "^hi$"}, "turns": [{"message": "hello"}]}


@pytest.fixture(autouse=True)
def _scenarios(unit_http: TestClient) -> None:
    for scenario in (THINK, HELLO):
        unit_http.post("/_emulator/scenarios", json=scenario)


def _unverified(reply: Any) -> None:
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    assert error["code"] == "invalid_encrypted_content", error
    assert error["type"] == "invalid_request_error"
    assert "could not be verified" in error["message"]


def _thought(unit_http: TestClient, sdk: openai.OpenAI) -> dict[str, Any]:
    """A reasoning item this server issued, with its sealed content."""
    response = sdk.responses.create(model="m", input="ponder", store=False)
    reasoning = response.output[0]
    assert reasoning.type == "reasoning" and reasoning.encrypted_content
    return reasoning.model_dump(mode="json", exclude_none=True)


@pytest.mark.parametrize("store", [False, True])
def test_forged_encrypted_content_is_refused_stored_or_not(unit_http: TestClient, store: bool) -> None:
    reply = unit_http.post("/v1/responses", json={"model": "m", "input": [FORGED, HI], "store": store})
    _unverified(reply)


def test_forged_encrypted_content_is_refused_by_a_conversation(unit_http: TestClient) -> None:
    conversation = unit_http.post("/v1/conversations", json={}).json()["id"]
    _unverified(unit_http.post(f"/v1/conversations/{conversation}/items", json={"items": [FORGED, HI]}))
    assert unit_http.get(f"/v1/conversations/{conversation}/items").json()["data"] == []
    _unverified(unit_http.post("/v1/conversations", json={"items": [FORGED, HI]}))


def test_issued_encrypted_content_passes_everywhere(unit_http: TestClient, unit_sdk: openai.OpenAI) -> None:
    thought = _thought(unit_http, unit_sdk)
    ponder = {"role": "user", "content": "ponder"}
    stored = unit_sdk.responses.create(model="m", input=[ponder, thought, {"role": "user", "content": "hi"}])
    assert stored.status == "completed"
    chained = unit_sdk.responses.create(model="m", previous_response_id=stored.id, input="hi")
    assert chained.status == "completed"
    conversation = unit_sdk.conversations.create(items=[ponder, thought])  # type: ignore[list-item]
    listed = unit_sdk.conversations.items.list(conversation.id, order="asc").data
    assert [i.id for i in listed][1] == thought["id"]
    swapped = {**thought, "id": "rs_another"}
    _unverified(unit_http.post(f"/v1/conversations/{conversation.id}/items", json={"items": [swapped]}))


def test_a_forged_item_recorded_without_generating_is_refused(unit_http: TestClient) -> None:
    # generate: false (a socket's create) records the input without playing it
    frame = {"type": "response.create", "model": "m", "input": [FORGED, HI], "generate": False}
    with unit_http.websocket_connect("ws://127.0.0.1/v1/responses") as ws:
        ws.send_text(json.dumps(frame))
        event = ws.receive_json()
        while event["type"] not in ("error", "response.completed"):
            event = ws.receive_json()
    assert event["type"] == "error" and event["error"]["code"] == "invalid_encrypted_content", event


def test_id_less_reasoning_items_get_ids_of_their_own(unit_http: TestClient, unit_sdk: openai.OpenAI) -> None:
    bare = {"type": "reasoning", "summary": []}
    conversation = unit_sdk.conversations.create()
    added = unit_http.post(f"/v1/conversations/{conversation.id}/items", json={"items": [bare, bare]}).json()
    ids = [item["id"] for item in added["data"]]
    assert all(i.startswith("rs_") for i in ids) and len(set(ids)) == 2, added
    assert added["first_id"] == ids[0] and added["last_id"] == ids[1]
    listed = unit_sdk.conversations.items.list(conversation.id, order="asc")
    assert [i.id for i in listed.data] == ids
    assert unit_sdk.conversations.items.retrieve(ids[1], conversation_id=conversation.id).id == ids[1]
    unit_sdk.conversations.items.delete(ids[0], conversation_id=conversation.id)
    assert [i.id for i in unit_sdk.conversations.items.list(conversation.id).data] == [ids[1]]

    response = unit_sdk.responses.create(model="m", input=[bare, bare, HI])  # type: ignore[list-item]
    items = unit_sdk.responses.input_items.list(response.id, order="asc").data
    reasoning = [i.id for i in items if i.type == "reasoning"]
    assert len(set(reasoning)) == 2 and all(i.startswith("rs_") for i in reasoning)


def test_an_id_less_replay_of_issued_reasoning_is_stored_as_the_item_it_is(
    unit_http: TestClient, unit_sdk: openai.OpenAI
) -> None:
    thought = _thought(unit_http, unit_sdk)
    bare = {k: v for k, v in thought.items() if k != "id"}
    ponder = {"role": "user", "content": "ponder"}
    first = unit_sdk.responses.create(model="m", input=[ponder, bare, HI])  # type: ignore[list-item]
    items = unit_sdk.responses.input_items.list(first.id, order="asc").data
    assert [i.id for i in items if i.type == "reasoning"] == [thought["id"]]
    # the chain reads the stored item back, content and id agreeing
    assert unit_sdk.responses.create(model="m", previous_response_id=first.id, input="hi").status == "completed"


STEPS = 12
STEPPED = {
    "name": "unit__reasoning_items_stepped",
    "match": {"input": "^step on$"},
    "turns": [
        *({"reasoning": f"Step {n}.", "call": {"name": "f", "arguments": {"n": n}}} for n in range(STEPS)),
        {"reasoning": "Done.", "message": "stepped"},
    ],
}


def test_a_store_false_loop_unseals_each_reasoning_item_once(
    unit_http: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step of a long store:false loop unseals its new reasoning items only: the ones replayed
    were verified by the step that first read them, and their ids are carried on the cursor (each
    step unsealed every reasoning item of the conversation again before: 78 unseals over 12 steps,
    where 13 suffice)."""
    from ptc_emulator.emulator.signing import REASONING_DOMAIN, Signer

    unit_http.post("/_emulator/scenarios", json=STEPPED)
    unsealed = []
    unseal = Signer.unseal

    def counted(self: Signer, domain: str, sealed: str) -> dict[str, Any] | None:
        if domain == REASONING_DOMAIN:
            unsealed.append(sealed)
        return unseal(self, domain, sealed)

    monkeypatch.setattr(Signer, "unseal", counted)
    tools = [{"type": "function", "name": "f"}]
    # A body of some kilobytes: the body reader recognises a replayed prefix from there on.
    items: list[dict[str, Any]] = [{"role": "developer", "content": "x" * 8000}, {"role": "user", "content": "step on"}]
    for _ in range(STEPS + 1):
        reply = unit_http.post("/v1/responses", json={"model": "m", "input": items, "tools": tools, "store": False})
        assert reply.status_code == 200, reply.text[:300]
        output = reply.json()["output"]
        items += output
        items += [
            {"type": "function_call_output", "call_id": o["call_id"], "output": "ok"}
            for o in output
            if o["type"] == "function_call"
        ]
    assert output[-1]["content"][0]["text"] == "stepped"
    assert len(unsealed) == STEPS  # each replayed reasoning item once, as the step after it read it


def test_a_replayed_reasoning_item_stripped_of_its_content_is_still_refused(unit_http: TestClient) -> None:
    """The loop's later steps read the known prefix from the cursor: an item of it changed (here its
    content dropped) is another object, read afresh and refused."""
    unit_http.post("/_emulator/scenarios", json=STEPPED)
    tools = [{"type": "function", "name": "f"}]
    items: list[dict[str, Any]] = [{"role": "user", "content": "step on"}]
    for _ in range(2):
        output = unit_http.post(
            "/v1/responses", json={"model": "m", "input": items, "tools": tools, "store": False}
        ).json()["output"]
        items += output
        items += [
            {"type": "function_call_output", "call_id": o["call_id"], "output": "ok"}
            for o in output
            if o["type"] == "function_call"
        ]
    bare = [
        {k: v for k, v in i.items() if k != "encrypted_content"} if i.get("type") == "reasoning" else i for i in items
    ]
    _unverified(unit_http.post("/v1/responses", json={"model": "m", "input": bare, "tools": tools, "store": False}))
