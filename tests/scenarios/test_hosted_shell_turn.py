"""A `shell:` turn scripts a direct call of a hosted shell: the server runs it and returns
`shell_call` (with `environment: {type: container_reference, container_id}`) and
`shell_call_output`, then the model goes on. The flow of openai-agents'
`examples/tools/container_shell_inline_skill.py` runs through the Runner: a first agent with a
`container_auto` shell (an inline skill), a second that reuses the container by id."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from agents import Agent, RunConfig, Runner, ShellTool, set_tracing_disabled
from agents.items import ModelResponse
from openai.types.responses import ResponseFunctionShellToolCall
from openai.types.responses.response_container_reference import ResponseContainerReference

from ptc_emulator.testing.server import PTCEmulator
from tests.support import runner_model

ORDERS = {
    "name": "orders-in-a-container",
    "match": {"input": "(?i)use the csv-workbench skill"},
    "turns": [
        {
            "reasoning": "I will create the CSV and summarise it in the container.",
            "shell": {
                "commands": ["python /skills/csv-workbench/make_orders.py", "python /skills/csv-workbench/summary.py"]
            },
        },
        {"message": "Totals by region: north 300, south 120; failed orders: 2."},
    ],
    "hosted": {
        "shell": [
            {"command": ".*make_orders.py", "stdout": "wrote /mnt/data/orders.csv (6 rows)\n"},
            {"command": ".*summary.py", "stdout": "north 300\nsouth 120\nfailed 2\n"},
        ]
    },
}
LISTING = {
    "name": "list-the-container",
    "match": {"input": "(?i)run `ls -la /mnt/data`"},
    "turns": [
        {"shell": {"commands": ["ls -la /mnt/data"]}},
        {"message": "The container holds orders.csv from the first run."},
    ],
    "hosted": {"shell": [{"command": "ls -la /mnt/data", "stdout": "-rw-r--r-- 1 root root 180 orders.csv\n"}]},
}
SKILL = {
    "type": "inline",
    "name": "csv-workbench",
    "description": "Analyze CSV files in /mnt/data and return concise numeric summaries.",
    "source": {
        "type": "base64",
        "media_type": "application/zip",
        "data": base64.b64encode(b"PK\x05\x06" + bytes(18)).decode(),
    },
}


@pytest.fixture(autouse=True)
def no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)  # nothing may leave this machine
    yield


def container_id(responses: list[ModelResponse]) -> str | None:
    """As the example reads it."""
    for response in responses:
        for item in response.output:
            if isinstance(item, ResponseFunctionShellToolCall) and isinstance(
                item.environment, ResponseContainerReference
            ):
                return item.environment.container_id
    return None


@pytest.mark.anyio
async def test_the_container_shell_example_flow_reuses_its_container(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(ORDERS)
    ptc_emulator.add_scenario(LISTING)
    config = RunConfig(tracing_disabled=True)
    auto: Any = {"type": "container_auto", "network_policy": {"type": "disabled"}, "skills": [SKILL]}
    first = Agent(
        name="Container Shell Agent (Inline Skill)",
        model=runner_model(ptc_emulator),
        instructions="Use the available container skill to answer user requests.",
        tools=[ShellTool(environment=auto)],
    )
    result1 = await Runner.run(
        first,
        "Use the csv-workbench skill. Create /mnt/data/orders.csv with columns id,region,amount,status and at "
        "least 6 rows. Then report total amount by region and count failed orders.",
        run_config=config,
    )
    assert result1.final_output == "Totals by region: north 300, south 120; failed orders: 2."
    found = container_id(result1.raw_responses)
    assert found is not None and found.startswith("cntr_")
    outputs = [item for r in result1.raw_responses for item in r.output if item.type == "shell_call_output"]
    assert [o.stdout for o in outputs[0].output] == [
        "wrote /mnt/data/orders.csv (6 rows)\n",
        "north 300\nsouth 120\nfailed 2\n",
    ]

    second = Agent(
        name="Container Reference Shell Agent",
        model=runner_model(ptc_emulator),
        instructions="Reuse the existing shell container and answer concisely.",
        tools=[ShellTool(environment={"type": "container_reference", "container_id": found})],
    )
    result2 = await Runner.run(second, "Run `ls -la /mnt/data`, then summarize in one sentence.", run_config=config)
    assert result2.final_output == "The container holds orders.csv from the first run."
    assert container_id(result2.raw_responses) == found  # the same container, named by the request


def test_a_shell_turn_without_a_hosted_shell_is_refused(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(LISTING)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-5.5", input="Run `ls -la /mnt/data`", tools=[{"type": "shell"}])
    assert "declares no `shell` tool with a `container_auto` or `container_reference` environment" in str(caught.value)


def test_a_call_turn_on_a_hosted_shell_names_the_shell_turn(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "name": "shell-by-call",
            "match": {"input": "^by call$"},
            "turns": [{"call": {"name": "shell", "arguments": {}}}],
        }
    )
    tools: Any = [{"type": "shell", "environment": {"type": "container_auto"}}]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-5.5", input="by call", tools=tools)
    assert "use a `shell:` turn instead of `call`" in str(caught.value)
    ptc_emulator.add_scenario(
        {
            "name": "shell-turn",
            "match": {"input": "^by turn$"},
            "turns": [{"shell": {"commands": ["pwd"]}}, {"message": "ok"}],
            "hosted": {"shell": [{"command": "pwd", "stdout": "/mnt/data\n"}]},
        }
    )
    response = client.responses.create(model="gpt-5.5", input="by turn", tools=tools, store=False)
    assert [item.type for item in response.output] == ["shell_call", "shell_call_output", "message"]
    # Replayed as it came (store: false), the server-run pair is accepted, and a container_auto
    # shell runs again in the conversation's container.
    replay: Any = [
        {"type": "message", "role": "user", "content": "by turn"},
        *[item.model_dump(mode="json", exclude_none=True) for item in response.output],
        {"type": "message", "role": "user", "content": "by turn"},
    ]
    again = client.responses.create(model="gpt-5.5", input=replay, tools=tools, store=False)
    first_env, second_env = response.output[0].environment, again.output[0].environment  # type: ignore[union-attr]
    assert first_env is not None and second_env is not None
    assert second_env.container_id == first_env.container_id  # type: ignore[union-attr]
