"""`async` on an agent's function tool: `false` (the 3.57 default) is accepted and shown; `true`
("the agent continues without waiting for the function result") is refused with a 400 that says
it is not emulated."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import GET_CUSTOMER

pytestmark = pytest.mark.sdk  # what the official client sends by default is accepted


@pytest.fixture
def client(ptc_emulator: PTCEmulator) -> Any:
    return ptc_emulator.client(max_retries=0)


def test_an_async_function_tool_is_refused_and_a_synchronous_one_kept(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.beta.agents.create(model="gpt-5", tools=[{**GET_CUSTOMER, "async": True}])  # type: ignore[list-item]
    assert caught.value.param == "tools[0].async" and caught.value.code == "unsupported_parameter"
    assert "not emulated" in caught.value.message and "without waiting" in caught.value.message
    agent = client.beta.agents.create(model="gpt-5", tools=[{**GET_CUSTOMER, "async": False}])  # type: ignore[list-item]
    shown = json.loads(client.beta.agents.with_raw_response.retrieve(agent.id).text)
    assert shown["tools"][0]["async"] is False
    assert shown["compaction"] == {"async": False}  # 3.57: blocking compaction by default
