"""`access_programs` on a create (openai 3.63 `ResponseCreateParams.access_programs`, `{cyber}`): the
Cyber access program a request asks for, which the Response reports as its effective program
(`Response.access_programs`, required in openai-go from v3.67.0). Asked for, it is echoed on the
Response, the stored one and every stream event's snapshot; not asked for (or `{}`), the program is
the implicit Standard fallback, which the API reports as null. A value the SDK does not know is a 400.

The `client` fixture validates every body with the installed SDK's models; the raw bodies show that
the key is there (null included), as openai-go reads it."""

from __future__ import annotations

import inspect
from typing import Any

import httpx
import openai
import pytest
from openai.resources.responses import Responses

from ptc_emulator.testing.server import PTCEmulator
from tests.api.api_support import assert_envelope
from tests.support import js

pytestmark = [
    pytest.mark.sdk,
    pytest.mark.skipif(
        "access_programs" not in inspect.signature(Responses.create).parameters,
        reason=f"openai {openai.__version__} has no access_programs on responses.create",
    ),
]

HELLO = js('text("hi")')


@pytest.mark.parametrize("cyber", ["standard", "daybreak_blue", "daybreak_red"])
def test_the_program_asked_for_is_the_response_s(client: openai.OpenAI, cyber: Any) -> None:
    raw = client.responses.with_raw_response.create(model="m", input=HELLO, access_programs={"cyber": cyber})
    assert raw.http_response.json()["access_programs"] == {"cyber": cyber}
    made = raw.parse()
    assert made.access_programs is not None and made.access_programs.cyber == cyber
    stored = client.responses.retrieve(made.id)
    assert stored.access_programs is not None and stored.access_programs.cyber == cyber


def test_not_asked_for_it_is_null(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    for extra in ({}, {"access_programs": {}}):
        raw = client.responses.with_raw_response.create(model="m", input=HELLO, **extra)
        body = raw.http_response.json()
        assert "access_programs" in body and body["access_programs"] is None, extra
        stored = httpx.get(
            f"{ptc_emulator.base_url}/responses/{body['id']}",
            headers={"Authorization": f"Bearer {ptc_emulator.api_key}"},
        )
        assert stored.json()["access_programs"] is None


def test_store_false_and_every_stream_snapshot_carry_it(client: openai.OpenAI) -> None:
    unstored = client.responses.create(model="m", input=HELLO, store=False, access_programs={"cyber": "daybreak_blue"})
    assert unstored.access_programs is not None and unstored.access_programs.cyber == "daybreak_blue"
    snapshots = []
    with client.responses.stream(model="m", input=HELLO, access_programs={"cyber": "daybreak_red"}) as stream:
        for event in stream:
            response = getattr(event, "response", None)
            if response is not None:
                snapshots.append((event.type, response.access_programs and response.access_programs.cyber))
        final = stream.get_final_response()
    assert [kind for kind, _ in snapshots] == ["response.created", "response.in_progress", "response.completed"]
    assert {cyber for _, cyber in snapshots} == {"daybreak_red"}
    assert final.access_programs is not None and final.access_programs.cyber == "daybreak_red"


@pytest.mark.parametrize(
    ("programs", "param", "message", "code"),
    [
        ({"cyber": "daybreak_green"}, "access_programs.cyber", "Invalid value: 'daybreak_green'", "invalid_value"),
        ({"cyber": 1}, "access_programs.cyber", "Invalid value: '1'", "invalid_value"),
        ({"medical": "standard"}, "access_programs.medical", "Unknown parameter", "unknown_parameter"),
        ("standard", "access_programs", "Invalid type for 'access_programs': expected an object", "invalid_type"),
    ],
)
def test_what_the_sdk_does_not_know_is_a_400(
    ptc_emulator: PTCEmulator, programs: Any, param: str, message: str, code: Any
) -> None:
    reply = httpx.post(
        f"{ptc_emulator.base_url}/responses",
        json={"model": "m", "input": HELLO, "access_programs": programs},
        headers={"Authorization": f"Bearer {ptc_emulator.api_key}"},
    )
    assert_envelope(reply, 400, message, param=param, code=code)
