"""A conversation the model upstream writes continues after the emulator restarts mid-program,
in both store modes and through a conversation: the upstream's transcript is rebuilt from the
items, and the program replays from its fingerprint."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from ptc_emulator.testing.process import ServerProcess
from tests.anymodel.anymodel_support import FakeUpstream, echo, program

STEP = {
    "type": "function",
    "name": "step",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "allowed_callers": ["programmatic"],
}
TOOLS = [STEP, {"type": "programmatic_tool_calling"}]
CODE = "let n = 0;\nfor (let i = 0; i < 3; i++) n = (await tools.step({ n })).next;\ntext(`n=${n}`);"
QUESTION = "Count to three."


def _outputs(response: Any) -> list[dict[str, Any]]:
    return [
        {
            "type": "function_call_output",
            "call_id": c.call_id,
            "output": json.dumps({"next": json.loads(c.arguments)["n"] + 1}),
            "caller": c.caller.model_dump(),
        }
        for c in response.output
        if c.type == "function_call"
    ]


@pytest.mark.parametrize(
    ("mode", "api"),
    [
        ("previous_response_id", "chat"),
        ("store_false", "chat"),
        ("conversation", "chat"),
        ("store_false", "responses"),
    ],
)
def test_a_restart_mid_program(
    server_process: Callable[..., ServerProcess], upstream: FakeUpstream, mode: str, api: str
) -> None:
    upstream.reply(program(CODE), echo("Counted: "))
    process = server_process(args=("--model-upstream", upstream.url, "--model-upstream-api", api)).start()
    store = mode != "store_false"
    with openai.OpenAI(base_url=process.base_url, api_key="sk-test", max_retries=0) as sdk:
        thread = sdk.conversations.create().id if mode == "conversation" else None
        extra: dict[str, Any] = {"conversation": thread} if thread else {}
        first = sdk.responses.create(model="m", input=QUESTION, tools=TOOLS, store=store, **extra)
    assert [i.type for i in first.output] == ["program", "function_call"]
    process.kill9()
    process.start()
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    response = first
    with openai.OpenAI(base_url=process.base_url, api_key="sk-test", max_retries=0) as sdk:
        while response.output[-1].type == "function_call":
            outputs = _outputs(response)
            if mode == "store_false":
                items += [*(i.model_dump(exclude_none=True) for i in response.output), *outputs]
                response = sdk.responses.create(model="m", input=items, tools=TOOLS, store=False)
            elif mode == "conversation":
                response = sdk.responses.create(model="m", input=outputs, tools=TOOLS, conversation=thread)
            else:
                response = sdk.responses.create(model="m", previous_response_id=response.id, input=outputs, tools=TOOLS)
    assert response.output_text == "Counted: n=3"
    assert len(upstream.requests) == 2
    if api == "chat":
        back = upstream.requests[1]["messages"]
        assert [m["role"] for m in back] == ["user", "assistant", "tool"]
        assert json.loads(back[1]["tool_calls"][0]["function"]["arguments"]) == {"code": CODE}
    else:
        back = upstream.requests[1]["input"]
        assert [i["type"] for i in back] == ["message", "function_call", "function_call_output"]
        assert json.loads(back[1]["arguments"]) == {"code": CODE}
