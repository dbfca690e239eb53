"""A `shell:` turn: a direct call of the request's hosted shell, run by the server.

The hosted API runs a `shell` tool whose environment is a container (`container_auto`,
`container_reference`) itself, and returns the call and its output in the same response:

    shell_call         {id, call_id, action: {commands, timeout_ms, max_output_length},
                        environment: {type: "container_reference", container_id}, status}
    shell_call_output  {id, call_id, output: [{stdout, stderr, outcome}], max_output_length, status}

so the model goes on (the next turn plays in the same response). The container is the
`container_reference`'s, or for `container_auto` the one an earlier hosted shell call of the
conversation ran in, else a new one: a client reads its id from the call's `environment` and
may name it in a later request's `container_reference` (the Agents SDK's container-reuse example
does). Each command's result is the scenario's `hosted.shell` entry it matches, as for a
program's `tools.shell(...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.model.core import Prepared
from ptc_emulator.emulator.model.runtime import HostedPatternTooCostly, hosted_shell_call
from ptc_emulator.emulator.model.scripted.script import scripted_plan
from ptc_emulator.emulator.wire.items import ShellAction, ShellCall, ShellCallOutput

__all__ = ["shell_turn"]


async def shell_turn(
    prepared: Prepared, index: int, context: dict[str, Any], ids: Callable[[str], str]
) -> tuple[ShellCall, ShellCallOutput]:
    """The call and output of turn `index` (a `shell:` turn), or the scenario's 400."""
    plan = scripted_plan(prepared)
    script, hosted = plan.script, plan.hosted
    spec = script.turns[index].shell
    assert spec is not None
    tool = hosted.hosted_shell
    if tool is None:
        raise script.error(index, messages.no_hosted_shell())
    if not getattr(tool, "direct", True):
        raise script.error(index, messages.shell_programmatic_only())
    commands = [script.text(index, command, context) for command in spec.commands]
    try:
        results = await hosted.shell_results_off_loop(commands)
    except HostedPatternTooCostly as e:
        raise script.error(index, e.reason) from None
    if isinstance(results, str):
        raise script.error(index, messages.shell_unscripted(results))
    limit = spec.max_output_length
    if limit is not None:
        results = [{**r, "stdout": r["stdout"][:limit], "stderr": r["stderr"][:limit]} for r in results]
    call_id = ids("call")
    environment = {"type": "container_reference", "container_id": _container(prepared, tool, ids)}
    call = ShellCall(
        id=ids("sh"),
        call_id=call_id,
        action=ShellAction(commands=commands, timeout_ms=spec.timeout_ms, max_output_length=limit),
        environment=environment,
        status="completed",
    )
    output = ShellCallOutput.model_validate(
        {"id": ids("sho"), "call_id": call_id, "output": results, "max_output_length": limit, "status": "completed"},
        strict=False,
    )
    hosted.calls.append({"kind": "shell", "route": "direct", "status": "completed", "commands": len(commands)})
    return call, output


def _container(prepared: Prepared, tool: Any, ids: Callable[[str], str]) -> str:
    environment = getattr(tool, "environment", None)
    given = getattr(environment, "container_id", None)
    if isinstance(given, str):
        return given
    for item in reversed(prepared.conversation.items):  # container_auto: the conversation's container
        if isinstance(item, ShellCall) and hosted_shell_call(item):
            assert isinstance(item.environment, dict)
            found = item.environment.get("container_id")
            if isinstance(found, str):
                return found
    return ids("cntr")
