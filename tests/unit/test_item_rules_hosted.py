"""Item rules the hosted API holds a create's input and a conversation's items to: an item id comes
once in a conversation, and an assistant message's parts are the model's own kinds."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

HELLO = {"role": "user", "content": "hello"}
TWINS = [
    {"type": "message", "id": "msg_twin", "role": "user", "content": "a"},
    {"type": "message", "id": "msg_twin", "role": "user", "content": "```js\ntext('x')\n```"},
]
DUPLICATE = "Duplicate item found with id msg_twin. Remove duplicate items from your input and try again."


def _duplicate(reply: Any, param: str = "input") -> None:
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"] == {
        "message": DUPLICATE,
        "type": "invalid_request_error",
        "param": param,
        "code": None,
    }


@pytest.mark.parametrize("store", [True, False])
def test_two_input_items_with_one_id_are_refused_as_the_hosted_api_refuses_them(
    unit_http: TestClient, store: bool
) -> None:
    """Accepted before, and the response's input items then paged forever: `after=msg_twin` read
    on from the first twin, handing back the second, whose id was the next cursor."""
    _duplicate(unit_http.post("/v1/responses", json={"model": "m", "input": TWINS, "store": store}))


def test_an_input_item_with_an_id_of_the_history_is_refused(unit_http: TestClient) -> None:
    first = unit_http.post("/v1/responses", json={"model": "m", "input": TWINS[1:]}).json()
    again = {**TWINS[1], "content": "```js\ntext('y')\n```"}
    reply = unit_http.post("/v1/responses", json={"model": "m", "input": [again], "previous_response_id": first["id"]})
    _duplicate(reply)
    conversation = unit_http.post("/v1/conversations", json={"items": TWINS[:1]}).json()["id"]
    reply = unit_http.post("/v1/responses", json={"model": "m", "input": TWINS[1:], "conversation": conversation})
    _duplicate(reply)
    assert [i["id"] for i in unit_http.get(f"/v1/conversations/{conversation}/items").json()["data"]] == ["msg_twin"]


def test_a_conversation_holds_each_item_id_once(unit_http: TestClient) -> None:
    _duplicate(unit_http.post("/v1/conversations", json={"items": TWINS}), "items[1].id")
    conversation = unit_http.post("/v1/conversations", json={"items": TWINS[:1]}).json()["id"]
    _duplicate(unit_http.post(f"/v1/conversations/{conversation}/items", json={"items": TWINS[1:]}), "items[0].id")
    listed = unit_http.get(f"/v1/conversations/{conversation}/items", params={"order": "asc", "limit": 1}).json()
    assert [i["id"] for i in listed["data"]] == ["msg_twin"] and listed["has_more"] is False


ASSISTANT_INPUT_TEXT = {"role": "assistant", "content": [{"type": "input_text", "text": "earlier"}]}
NOT_ASSISTANT_PART = "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'."


@pytest.mark.parametrize("store", [True, False])
def test_an_assistant_message_with_an_input_text_part_is_refused(unit_http: TestClient, store: bool) -> None:
    """The hosted API's 400 for a replayed assistant turn whose parts are the client's kinds; before,
    it was taken and read as text (a client sending it would pass here and fail there)."""
    body = {"model": "m", "input": [HELLO, ASSISTANT_INPUT_TEXT, TWINS[1]], "store": store}
    reply = unit_http.post("/v1/responses", json=body)
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    assert (error["message"], error["param"], error["code"]) == (
        NOT_ASSISTANT_PART,
        "input[1].content[0]",
        "invalid_value",
    )
    conversation = unit_http.post("/v1/conversations", json={}).json()["id"]
    reply = unit_http.post(f"/v1/conversations/{conversation}/items", json={"items": [ASSISTANT_INPUT_TEXT]})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "items[0].content[0]", reply.text[:300]
    fine = {
        "role": "assistant",
        "content": [{"type": "output_text", "text": "earlier"}, {"type": "refusal", "refusal": "no"}],
    }
    assert unit_http.post("/v1/responses", json={**body, "input": [HELLO, fine, TWINS[1]]}).status_code == 200


@pytest.mark.parametrize(
    ("body", "param", "got"),
    [
        ({"input": "hi", "include": [None]}, "include[0]", "null"),
        ({"input": [{"role": True, "content": "x"}]}, "input[0].role", "a boolean"),
        ({"input": [{"role": "user", "content": [{"type": None, "text": "x"}]}]}, "input[0].content[0].type", "null"),
        ({"input": [{"type": 5}]}, "input[0].type", "an integer"),
        ({"input": "hi", "text": {"format": {"type": None}}}, "text.format.type", "null"),
    ],
)
def test_a_null_or_a_number_where_a_named_string_goes_is_the_wrong_type(
    unit_http: TestClient, body: dict[str, Any], param: str, got: str
) -> None:
    """Before: "Invalid value: 'None'" (Python's spelling of a JSON null, naming nothing the client
    sent), or for an item's numeric type "Missing required parameter" though it was there."""
    reply = unit_http.post("/v1/responses", json={"model": "m", **body})
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"] == {
        "message": f"Invalid type for '{param}': expected a string, but got {got} instead.",
        "type": "invalid_request_error",
        "param": param,
        "code": "invalid_type",
    }


def test_a_conversation_object_with_another_key_than_its_id_is_refused(unit_http: TestClient) -> None:
    """The SDK's `conversation` object is `{"id": ...}`; before, `{"id": ..., "x": 1}` was taken and
    the key ignored (as no other object of a create is)."""
    conversation = unit_http.post("/v1/conversations", json={}).json()["id"]
    body = {"model": "m", "input": "```js\ntext('x')\n```", "conversation": {"id": conversation, "x": 1}}
    reply = unit_http.post("/v1/responses", json=body)
    assert reply.status_code == 400, reply.text[:300]
    assert (reply.json()["error"]["param"], reply.json()["error"]["code"]) == ("conversation.x", "unknown_parameter")
    body["conversation"] = {"id": conversation}
    assert unit_http.post("/v1/responses", json=body).status_code == 200


@pytest.mark.parametrize(
    ("window", "code"),
    [
        ([{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "zz"}], "invalid_encrypted_content"),
        ([{"type": "function_call_output", "call_id": "call_nobody", "output": "x"}], None),
        ([TWINS[0], TWINS[0]], None),
    ],
)
def test_a_window_that_breaks_an_item_rule_is_not_compacted(
    unit_http: TestClient, window: list[dict[str, Any]], code: str | None
) -> None:
    """Before: the window was compacted (200), and every create that sent the compaction item back
    was refused, the forged reasoning item's 400 naming `previous_response_id`, which it had not."""
    reply = unit_http.post("/v1/responses/compact", json={"model": "m", "input": [HELLO, *window]})
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"]["code"] == code
    fine = unit_http.post("/v1/responses/compact", json={"model": "m", "input": [HELLO]})
    assert fine.status_code == 200 and fine.json()["output"][-1]["type"] == "compaction"
