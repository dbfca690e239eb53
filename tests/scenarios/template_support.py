"""Shared by the template-bound tests: a scenario whose first turn calls `f` and whose second
renders a template over the call's output, and the client loop that answers the call."""

from __future__ import annotations

import openai

from ptc_emulator.testing.server import PTCEmulator

TOOL = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}


AT_PLAY = "{{ input[:0] }}"
"""Nothing, read from the request: a template that reads no name a request gives renders the same
at every request, so it is rendered when added and refused then if it fails. The tests of the
bounds at play put this before a template of constants."""


def scenario(message: str) -> dict[str, object]:
    """Matches `go`: calls `f`, then answers `message` (a template, after `AT_PLAY`) once the output
    comes back."""
    turns = [{"call": {"name": "f", "arguments": {}}}, {"message": AT_PLAY + message}]
    return {"match": {"input": "^go$"}, "turns": turns}


def answered(ptc_emulator: PTCEmulator, output: str) -> openai.BadRequestError | str:
    """`go`, then `output` for its call: the final text, or the 400 the render ended in."""
    client = ptc_emulator.client(max_retries=0)
    first = client.responses.create(model="gpt-test", input="go", tools=[TOOL])  # type: ignore[list-item]
    [call] = [item for item in first.output if item.type == "function_call"]
    answer = {"type": "function_call_output", "call_id": call.call_id, "output": output}
    try:
        final = client.responses.create(
            model="gpt-test",
            previous_response_id=first.id,
            input=[answer],  # type: ignore[list-item]
            tools=[TOOL],  # type: ignore[list-item]
        )
    except openai.BadRequestError as e:
        return e
    return final.output_text
