"""A scenario's `call` turn that names a tool running on the server's side is refused with a
message naming what to do instead, and only turn kinds that exist."""

from __future__ import annotations

import openai
import pytest

from ptc_emulator.emulator.model.scripted.scenario import KINDS
from ptc_emulator.testing.server import PTCEmulator

HOSTED_SHELL = {"type": "shell", "environment": {"type": "container_auto"}}


@pytest.mark.parametrize(
    ("tool", "name", "says"),
    [
        (HOSTED_SHELL, "shell", "tools.shell({commands})` in a `program` turn"),
        ({"type": "code_interpreter", "container": {"type": "auto"}}, "code_interpreter", "`code_interpreter:` turn"),
    ],
)
def test_a_direct_call_of_a_server_side_tool_says_what_to_do(
    ptc_emulator: PTCEmulator, tool: dict[str, object], name: str, says: str
) -> None:
    ptc_emulator.add_scenario({"name": "direct", "match": {"input": "^go$"}, "turns": [{"call": {"name": name}}]})
    with pytest.raises(openai.BadRequestError) as caught:
        ptc_emulator.client(max_retries=0).responses.create(model="m", input="go", tools=[tool])  # type: ignore[list-item]
    assert caught.value.code == "scenario_error" and says in caught.value.message
    named = caught.value.message.split("`")[1::2]
    turns = [n.rstrip(":") for n in named if n.endswith(":")]
    assert all(t in KINDS for t in turns), turns  # "shell:" is no turn kind
