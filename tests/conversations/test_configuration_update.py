"""The `configuration_update` input item (in openai's and npm openai's input and conversation item
unions): accepted in both store modes, kept among a conversation's items and a stored response's
input items (with an id), and applied to the responses after it, each setting until a later
update replaces it: the Response's `reasoning` and `text` echo what is in effect.

Every body is validated with the installed SDK's models (`conversations_sdk` validates the
Responses and Conversations APIs' bodies); the refusals go through raw HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import PTC_TOOLS, answer_all, arithmetic, js

pytestmark = pytest.mark.sdk

SCHEMA = {
    "type": "json_schema",
    "name": "answer",
    "schema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": False,
    },
    "strict": True,
}
HIGH = {"type": "configuration_update", "reasoning": {"effort": "high"}, "text": {"format": SCHEMA}}
LOW = {"type": "configuration_update", "reasoning": {"effort": "low"}}
PLAIN = {"type": "configuration_update", "text": {"format": {"type": "text"}}}
PTC = [{"type": "programmatic_tool_calling"}]
ADD = "const x = await tools.add({a: 2, b: 3}); text(String(x));"


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def settings(response: Any) -> tuple[Any, Any]:
    """What a Response says is in effect: its reasoning effort and its text format's type."""
    return response.reasoning.effort, response.text.format.type


def test_store_false_each_setting_holds_until_a_later_update_replaces_it(conversations_sdk: openai.OpenAI) -> None:
    client = conversations_sdk
    items: list[Any] = [HIGH, user(js('text("one")'))]
    first = client.responses.create(model="m", input=items, store=False, reasoning={"effort": "minimal"}, tools=PTC)
    assert settings(first) == ("high", "json_schema")  # the update wins over the request's own field
    assert first.text.format.to_dict() == SCHEMA
    items += [i.model_dump(exclude_none=True) for i in first.output]

    second = client.responses.create(model="m", input=[*items, user(js('text("two")'))], store=False, tools=PTC)
    assert settings(second) == ("high", "json_schema")  # still in effect, replayed
    items += [user(js('text("two")')), *(i.model_dump(exclude_none=True) for i in second.output), LOW]
    third = client.responses.create(model="m", input=[*items, user(js('text("three")'))], store=False, tools=PTC)
    assert settings(third) == ("low", "json_schema")  # the effort replaced, the format kept
    items += [user(js('text("three")')), *(i.model_dump(exclude_none=True) for i in third.output), PLAIN]
    fourth = client.responses.create(model="m", input=[*items, user(js('text("four")'))], store=False, tools=PTC)
    assert settings(fourth) == ("low", "text")
    assert fourth.output_text == "four"

    plain = client.responses.create(model="m", input=js('text("x")'), store=False, tools=PTC)
    assert (
        settings(plain) == (None, "text") and plain.output_text == "x"
    )  # no update: the request's own (default) settings


def test_stored_an_update_is_an_input_item_with_an_id_and_holds_along_the_chain(
    conversations_sdk: openai.OpenAI,
) -> None:
    client = conversations_sdk
    first = client.responses.create(model="m", input=[user(js(ADD)), HIGH], tools=PTC_TOOLS)
    assert [i.type for i in first.output] == ["program", "function_call"]
    assert settings(first) == ("high", "json_schema")
    listed = list(client.responses.input_items.list(first.id, order="asc"))
    update = next(i for i in listed if i.type == "configuration_update")
    assert update.id.startswith("cfg_") and update.reasoning.effort == "high"  # type: ignore[union-attr]
    # The program resumes with the update after the tool outputs (a client may add it there).
    done = client.responses.create(
        model="m", input=[*answer_all(first, arithmetic), LOW], tools=PTC_TOOLS, previous_response_id=first.id
    )
    assert done.output_text == "5" and settings(done) == ("low", "json_schema")
    after = client.responses.create(model="m", input=js('text("y")'), previous_response_id=done.id, tools=PTC)
    assert settings(after) == ("low", "json_schema")
    retrieved = client.responses.retrieve(after.id)
    assert settings(retrieved) == ("low", "json_schema")


def test_a_conversation_keeps_it_among_its_items_and_applies_it(conversations_sdk: openai.OpenAI) -> None:
    client = conversations_sdk
    conv = client.conversations.create(items=[HIGH])
    (update,) = client.conversations.items.list(conv.id)
    assert update.type == "configuration_update" and update.id.startswith("cfg_")
    assert client.conversations.items.retrieve(update.id, conversation_id=conv.id).type == "configuration_update"
    first = client.responses.create(model="m", conversation=conv.id, input=js('text("a")'), tools=PTC)
    assert settings(first) == ("high", "json_schema")
    client.conversations.items.create(conv.id, items=[LOW])
    second = client.responses.create(model="m", conversation=conv.id, input=js('text("b")'), tools=PTC)
    assert settings(second) == ("low", "json_schema")
    kinds = [i.type for i in client.conversations.items.list(conv.id, order="asc")]
    turn = ["message", "program", "program_output", "message"]
    assert kinds == ["configuration_update", *turn, "configuration_update", *turn]


def test_a_streamed_response_tells_what_is_in_effect(conversations_sdk: openai.OpenAI) -> None:
    with conversations_sdk.responses.stream(
        model="m", input=[LOW, user(js('text("s")'))], store=False, tools=PTC
    ) as stream:
        events = list(stream)
    created = next(e for e in events if e.type == "response.created")
    completed = next(e for e in events if e.type == "response.completed")
    assert settings(created.response) == settings(completed.response) == ("low", "text")


@pytest.mark.parametrize(
    ("item", "message", "param", "code"),
    [
        (
            {"type": "configuration_update"},
            "Invalid 'input[0]': a configuration_update supplies reasoning, text, or both.",
            "input[0]",
            "invalid_value",
        ),
        (
            {"type": "configuration_update", "reasoning": {"effort": "huge"}},
            "Invalid value: 'huge'. Supported values are: 'none', 'minimal', 'low', 'medium', 'high', 'xhigh', "
            "and 'max'.",
            "input[0].reasoning.effort",
            "invalid_value",
        ),
        (
            {"type": "configuration_update", "reasoning": {"summary": "auto"}},
            "Unknown parameter: 'input[0].reasoning.summary'.",
            "input[0].reasoning.summary",
            "unknown_parameter",
        ),
        (
            {"type": "configuration_update", "text": {"format": {"type": "json_schema", "name": "x"}}},
            "Missing required parameter: 'input[0].text.format.schema'.",
            "input[0].text.format.schema",
            "missing_required_parameter",
        ),
        (
            {"type": "configuration_update", "text": {"format": {**SCHEMA, "name": "an answer"}}},
            "Invalid 'input[0].text.format.name': string does not match pattern. Expected a string that "
            "matches the pattern '^[a-zA-Z0-9_-]+$'.",
            "input[0].text.format.name",
            "invalid_value",
        ),
        (
            {"type": "configuration_update", "text": {"format": {**SCHEMA, "schema": {"type": 5}}}},
            "Invalid schema for response_format 'answer': 5 is not valid under any of the given schemas.",
            "input[0].text.format.schema",
            "invalid_json_schema",
        ),
        (
            {"type": "configuration_update", "text": {"format": {**SCHEMA, "schema": {"type": "object"}}}},
            "Invalid schema for response_format 'answer': In context=(), 'additionalProperties' is required "
            "to be supplied and to be false.",
            "input[0].text.format.schema",
            "invalid_json_schema",
        ),
        (
            {"type": "configuration_update", "text": {"format": {"type": "json_object"}}},
            "Invalid value: 'json_object'. Supported values are: 'text' and 'json_schema'.",
            "input[0].text.format.type",
            "invalid_value",
        ),
    ],
)
def test_a_malformed_update_is_refused(
    ptc_emulator: PTCEmulator, item: dict[str, Any], message: str, param: str, code: str
) -> None:
    reply = httpx.post(
        ptc_emulator.base_url + "/responses",
        json={"model": "m", "input": [item, user(js('text("z")'))], "store": False},
        headers={"Authorization": "Bearer sk-test"},
    )
    assert (reply.status_code, reply.json()) == (
        400,
        {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}},
    )
