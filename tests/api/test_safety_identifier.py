"""`safety_identifier` on every route that takes it (openai 3.60 added it to `responses.compact` and
`conversations.create`): at most 128 characters, the same 400 above that on each, and echoed where
the SDK's response models carry it (Response, CompactedResponse).

The `client` and `conversations_sdk` fixtures validate every body with the installed SDK's models;
the refusals go through raw HTTP (message, type, param, code)."""

from __future__ import annotations

import inspect
from typing import Any

import httpx
import openai
import pytest
from openai.resources.conversations import Conversations
from openai.resources.responses import Responses

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js

pytestmark = pytest.mark.sdk

LONGEST = "u" * 128


def _takes(method: Any, name: str) -> Any:
    return pytest.mark.skipif(
        name not in inspect.signature(method).parameters,
        reason=f"openai {openai.__version__} has no {name} on {method.__qualname__} (openai 3.60 and later)",
    )


def test_a_response_echoes_it(client: openai.OpenAI) -> None:
    response = client.responses.create(model="m", input=js('text("hi")'), safety_identifier=LONGEST)
    assert response.safety_identifier == LONGEST


@_takes(Responses.compact, "safety_identifier")
def test_compact_takes_it_and_the_compacted_response_echoes_it(client: openai.OpenAI) -> None:
    raw = client.responses.with_raw_response.compact(
        model="m", input="hello", safety_identifier=LONGEST, service_tier="flex"
    )  # type: ignore[call-arg, unused-ignore]
    assert raw.parse().object == "response.compaction"
    body = raw.http_response.json()  # (the SDK's own dump warns of the user messages' role)
    assert (body["safety_identifier"], body["service_tier"]) == (LONGEST, "flex")
    plain = client.responses.with_raw_response.compact(model="m", input="hello").http_response.json()
    assert "safety_identifier" not in plain and "service_tier" not in plain


@_takes(Conversations.create, "safety_identifier")
def test_a_conversation_create_takes_it(conversations_sdk: openai.OpenAI) -> None:
    made = conversations_sdk.conversations.create(
        items=[{"type": "message", "role": "user", "content": "hi"}], safety_identifier=LONGEST
    )  # type: ignore[call-arg, unused-ignore]
    assert made.object == "conversation"
    assert [i.type for i in conversations_sdk.conversations.items.list(made.id)] == ["message"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/responses", {"model": "m", "input": js('text("hi")')}),
        ("/responses/compact", {"model": "m", "input": "hi"}),
        ("/conversations", {}),
    ],
)
def test_longer_than_128_characters_is_the_same_400_on_every_route(
    ptc_emulator: PTCEmulator, path: str, body: dict[str, Any]
) -> None:
    url = ptc_emulator.base_url + path
    reply = httpx.post(url, json={**body, "safety_identifier": "u" * 129}, headers={"Authorization": "Bearer sk-test"})
    assert reply.status_code == 400
    assert reply.json() == {
        "error": {
            "message": "Invalid 'safety_identifier': string too long. Expected a string with maximum length 128, "
            "but got a string with length 129 instead.",
            "type": "invalid_request_error",
            "param": "safety_identifier",
            "code": "string_above_max_length",
        }
    }
    accepted = httpx.post(url, json={**body, "safety_identifier": LONGEST}, headers={"Authorization": "Bearer sk-test"})
    assert accepted.status_code == 200, accepted.text
