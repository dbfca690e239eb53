"""`reasoning:` works on every scenario turn kind, as on program and call turns: the response
carries a reasoning item (with `encrypted_content` when it is included, or with store:false)
before the turn's first item, and a store:false replay of it is accepted."""

from __future__ import annotations

from typing import Any

import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import validating_client


@pytest.mark.parametrize(
    ("turn", "kinds"),
    [
        ({"message": "The answer.", "reasoning": "Recall the answer."}, ["reasoning", "message"]),
        ({"refusal": "I cannot help with that.", "reasoning": "That is not allowed."}, ["reasoning", "message"]),
    ],
    ids=["message", "refusal"],
)
def test_a_turn_with_reasoning_emits_it_first(
    ptc_emulator: PTCEmulator, turn: dict[str, Any], kinds: list[str]
) -> None:
    ptc_emulator.add_scenario({"name": "thought", "match": {"input": "^think"}, "turns": [turn]})
    client = validating_client(ptc_emulator, max_retries=0)
    response = client.responses.create(model="m", input="think", store=False, include=["reasoning.encrypted_content"])
    assert [i.type for i in response.output] == kinds
    reasoning = response.output[0]
    assert reasoning.summary[0].text == turn["reasoning"] and reasoning.encrypted_content
    # the conversation replays whole, reasoning included, and goes on
    ptc_emulator.add_scenario({"name": "more", "match": {"input": "^more$"}, "turns": [{"message": "More."}]})
    items = [{"role": "user", "content": "think"}, *(i.model_dump(exclude_none=True) for i in response.output)]
    again = client.responses.create(model="m", input=[*items, {"role": "user", "content": "more"}], store=False)
    assert again.output_text == "More."
