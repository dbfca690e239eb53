"""Refusals at the front door in the hosted wording, not a library's: an over-long array (more than
20 Conversations `items`), a list route's `limit` that is not an integer, and a custom tool's regex
grammar RE2 refuses.

Before, the first was pydantic's `List should have at most 20 items after validation, not 21.`
with code `invalid_value`, the second pydantic's `Input should be a valid integer, unable to parse
string as an integer.`, and the third showed RE2's reason as a Python bytes repr
(`b'invalid perl operator: (?<='`).
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.testing import PTCEmulator

ITEMS = [{"type": "message", "role": "user", "content": "x"}] * 21


def test_more_than_20_items_in_a_conversation_create_is_an_array_too_long(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.conversations.create(items=ITEMS)  # type: ignore[arg-type]
    error: Any = raised.value.body
    assert error == {
        "message": "Invalid 'items': array too long. Expected an array with maximum length 20, "
        "but got an array with length 21 instead.",
        "type": "invalid_request_error",
        "param": "items",
        "code": "array_above_max_length",
    }


def test_more_than_20_items_added_to_a_conversation_is_an_array_too_long(client: openai.OpenAI) -> None:
    conversation = client.conversations.create()
    with pytest.raises(openai.BadRequestError) as raised:
        client.conversations.items.create(conversation.id, items=ITEMS)  # type: ignore[arg-type]
    error: Any = raised.value.body
    assert error["code"] == "array_above_max_length"
    assert error["param"] == "items"
    assert "array too long" in error["message"] and "after validation" not in error["message"]


@pytest.mark.parametrize(
    ("limit", "got"), [("1.5", "a decimal"), ("1e2", "a decimal"), ("ten", "a string"), ("true", "a boolean")]
)
@pytest.mark.parametrize("route", ["conversation items", "input items"])
def test_a_limit_that_is_not_an_integer_is_the_wrong_type(
    ptc_emulator: PTCEmulator, client: openai.OpenAI, route: str, limit: str, got: str
) -> None:
    if route == "conversation items":
        path = f"/conversations/{client.conversations.create().id}/items"
    else:
        path = "/responses/resp_nope/input_items"  # (the query is refused before the id is looked up)
    refused = httpx.get(f"{ptc_emulator.base_url}{path}", params={"limit": limit}, timeout=30)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == {
        "message": f"Invalid type for 'limit': expected an integer, but got {got} instead.",
        "type": "invalid_request_error",
        "param": "limit",
        "code": "invalid_type",
    }


def test_a_regex_grammar_re2_refuses_names_the_reason_as_text(client: openai.OpenAI) -> None:
    tool: Any = {
        "type": "custom",
        "name": "c",
        "format": {"type": "grammar", "syntax": "regex", "definition": "(?<=a)b"},
    }
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model="gpt-test", input="hi", tools=[tool])
    error: Any = raised.value.body
    assert error["param"] == "tools[0].format.definition"
    assert error["message"] == "Invalid regex grammar for custom tool 'c': invalid perl operator: (?<="


def test_an_empty_events_array_is_the_hosted_empty_array(ptc_emulator: PTCEmulator) -> None:
    """Before: pydantic's `List should have at least 1 item after validation, not 0.`, `invalid_value`."""
    refused = httpx.post(
        f"{ptc_emulator.base_url}/agents/sessions/sess_nope/events",
        json={"events": []},
        headers={"OpenAI-Beta": "agents=v1"},
        timeout=30,
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == {
        "message": "Invalid 'events': empty array. Expected an array with minimum length 1, "
        "but got an empty array instead.",
        "type": "invalid_request_error",
        "param": "events",
        "code": "empty_array",
    }


def test_a_namespace_of_no_tools_is_the_hosted_empty_array(client: openai.OpenAI) -> None:
    tool: Any = {"type": "namespace", "name": "ns", "description": "d", "tools": []}
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model="gpt-test", input="hi", tools=[tool])
    error: Any = raised.value.body
    assert error == {
        "message": "Invalid 'tools[0].tools': empty array. Expected an array with minimum length 1, "
        "but got an empty array instead.",
        "type": "invalid_request_error",
        "param": "tools[0].tools",
        "code": "empty_array",
    }


@pytest.mark.parametrize("limit", ["1_0", "+5", " 5", "5 "])
@pytest.mark.parametrize("route", ["conversation items", "sessions"])
def test_a_limit_not_written_as_digits_is_the_wrong_type(
    ptc_emulator: PTCEmulator, client: openai.OpenAI, route: str, limit: str
) -> None:
    """Before, pydantic's lax parsing read `1_0` as 10 and `+5` as 5: the list was answered."""
    if route == "conversation items":
        path = f"/conversations/{client.conversations.create().id}/items"
    else:
        path = "/agents/sessions"
    refused = httpx.get(
        f"{ptc_emulator.base_url}{path}", params={"limit": limit}, headers={"OpenAI-Beta": "agents=v1"}, timeout=30
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == {
        "message": "Invalid type for 'limit': expected an integer, but got a string instead.",
        "type": "invalid_request_error",
        "param": "limit",
        "code": "invalid_type",
    }


@pytest.mark.parametrize(("limit", "count"), [("3", 3), ("03", 3)])
def test_a_limit_written_as_digits_is_taken(
    client: openai.OpenAI, ptc_emulator: PTCEmulator, limit: str, count: int
) -> None:
    conversation = client.conversations.create(items=[{"type": "message", "role": "user", "content": "x"}] * 5)
    listed = httpx.get(
        f"{ptc_emulator.base_url}/conversations/{conversation.id}/items", params={"limit": limit}, timeout=30
    )
    assert listed.status_code == 200, listed.text
    assert len(listed.json()["data"]) == count


def test_a_negative_limit_keeps_the_bound_wording(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    path = f"/conversations/{client.conversations.create().id}/items"
    refused = httpx.get(f"{ptc_emulator.base_url}{path}", params={"limit": "-1"}, timeout=30)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "integer_below_min_value"


@pytest.mark.parametrize("after", ["1_0", "+5", " 5"])
def test_a_starting_after_not_written_as_digits_is_the_wrong_type(
    ptc_emulator: PTCEmulator, client: openai.OpenAI, after: str
) -> None:
    """Before, `starting_after=1_0` replayed the stored stream from after event 10."""
    ptc_emulator.add_scenario({"match": {"input": "digits"}, "turns": [{"message": "done"}]})
    stored = client.responses.create(model="gpt-test", input="digits", background=True)
    refused = httpx.get(
        f"{ptc_emulator.base_url}/responses/{stored.id}",
        params={"stream": "true", "starting_after": after},
        headers={"Authorization": "Bearer sk-test"},
        timeout=30,
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"] == {
        "message": "Invalid type for 'starting_after': expected an integer, but got a string instead.",
        "type": "invalid_request_error",
        "param": "starting_after",
        "code": "invalid_type",
    }
