"""The kinds whose call carries one structured field the program passes as an object: shell (local),
apply_patch, local_shell. One parameterised definition (`ActionKind`), three declarations."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import TypeAdapter

from ptc_emulator.emulator.tools.base import Binding, ToolKind, first_error
from ptc_emulator.emulator.tools.surface import ItemSurface, compact_field, output_text
from ptc_emulator.emulator.tools.toolset import Toolset
from ptc_emulator.emulator.wire import calls
from ptc_emulator.emulator.wire.base import Caller, dump
from ptc_emulator.emulator.wire.calls import CallItem, OutputItem

__all__ = ["APPLY_PATCH", "LOCAL_SHELL", "SHELL", "ActionKind"]


ActionCall = calls.ShellCall | calls.ApplyPatchCall | calls.LocalShellCall
ActionOutput = calls.ShellCallOutput | calls.ApplyPatchCallOutput | calls.LocalShellCallOutput


class ActionKind(ToolKind):
    """A kind whose call carries one structured field the program passes as an object (shell's
    `action`, apply_patch's `operation`, local_shell's `action`), named after the kind: program name
    `<kind>`, items `<kind>_call` and `<kind>_call_output`, answer ids `<prefix>o`.

    `received`: what the program receives of an answer (sent as JSON; also the answer's text, as
    JSON unless it is a string). `failure`: the message an answer rejects with, or None.
    `call_usage`, `output_usage`: what the model reads of a call (default: the field, as compact
    JSON) and of an answer (default: its `output`). `stubbed`: steering's `required_input` lists a
    stub answer for its calls."""

    def __init__(
        self,
        kind: str,
        models: tuple[type[ActionCall], type[ActionOutput]],
        *,
        prefix: str,
        field: str,
        schema: Any,
        takes: str,
        received: Callable[[Any], Any],
        failure: Callable[[Any], str | None] = lambda output: None,
        call_usage: Callable[[dict[str, Any]], Iterable[str]] | None = None,
        output_usage: Callable[[dict[str, Any]], Iterable[str]] = output_text,
        fixed: dict[str, Any] | None = None,
        direct_only: bool = False,
        keyed_by_id: bool = False,
        stubbed: bool = True,
    ) -> None:
        super().__init__(
            kind,
            program_name=kind,
            call=ItemSurface(f"{kind}_call", listed_id=prefix, text=call_usage or compact_field(field, {})),
            output=ItemSurface(f"{kind}_call_output", listed_id=prefix + "o", text=output_usage),
            label=f"{kind} call",
        )
        self.models = models
        self.field = field
        self.schema = TypeAdapter[Any](schema)
        self.takes = takes
        self.received = received
        self.failure = failure
        self.fixed = fixed or {}
        """Fields every call item carries (a local shell's environment)."""
        self.direct_only = direct_only
        """Only a scenario calls it: its call item has no caller, and always an id."""
        self.keyed_by_id = keyed_by_id
        """An answer may name its call by `id` instead of `call_id`."""
        self.stubbed = stubbed

    def binding(self, tool: Any, ptc: bool, toolset: Toolset | None) -> Binding | None:
        if self.direct_only:
            return Binding(self.kind, self, tool, False, True)
        return super().binding(tool, ptc, toolset)

    def stub(self, call: dict[str, Any]) -> dict[str, Any] | None:
        return super().stub(call) if self.stubbed else None

    def check(self, binding: Binding, arguments: Any) -> str | None:
        return first_error(self.schema, arguments, self.takes)

    def call_item(
        self, binding: Binding, arguments: str, *, call_id: str, item_id: str | None, caller: Caller | None
    ) -> CallItem:
        item: dict[str, Any] = {"id": item_id, "call_id": call_id, self.field: self.schema.validate_json(arguments)}
        if self.direct_only:
            item["id"] = item_id or call_id
        else:
            item["caller"] = caller
        return self.models[0].model_validate({**item, **self.fixed, "status": "completed"})

    def arguments(self, call: CallItem) -> str:
        assert isinstance(call, self.models[0])
        return json.dumps(dump(getattr(call, self.field)), ensure_ascii=False)

    def result(self, output: OutputItem) -> tuple[str, bool]:
        assert isinstance(output, self.models[1])
        failed = self.failure(output)
        if failed is not None:
            return failed, True
        return json.dumps(self.received(output), ensure_ascii=False), False

    def answer_key(self, output: OutputItem) -> str | None:
        if self.keyed_by_id:
            return output.call_id or getattr(output, "id", None)
        return output.call_id

    def answer_text(self, output: OutputItem) -> str:
        assert isinstance(output, self.models[1])
        received = self.received(output)
        return received if isinstance(received, str) else json.dumps(received, ensure_ascii=False)


def _shell_output_text(item: dict[str, Any]) -> Iterable[str]:
    for chunk in item.get("output", []):
        yield chunk.get("stdout", "")
        yield chunk.get("stderr", "")


SHELL = ActionKind(
    "shell",
    (calls.ShellCall, calls.ShellCallOutput),
    prefix="sh",
    field="action",
    schema=calls.ShellAction,
    takes="tools.shell() takes {commands: string[], timeout_ms?, max_output_length?}",
    received=lambda output: [dump(chunk) for chunk in output.output],
    call_usage=lambda item: item.get("action", {}).get("commands", []),
    output_usage=_shell_output_text,
    fixed={"environment": {"type": "local"}},
)
"""`shell` with a local environment: the client runs the commands."""
APPLY_PATCH = ActionKind(
    "apply_patch",
    (calls.ApplyPatchCall, calls.ApplyPatchCallOutput),
    prefix="apc",
    field="operation",
    schema=calls.PatchOperation,
    takes="tools.apply_patch() takes {type: 'create_file'|'update_file'|'delete_file', path, diff?}",
    received=lambda output: {"status": output.status, "output": output.output},
    failure=lambda output: (output.output or "apply_patch failed") if output.status == "failed" else None,
)
LOCAL_SHELL = ActionKind(
    "local_shell",
    (calls.LocalShellCall, calls.LocalShellCallOutput),
    prefix="lsh",
    field="action",
    schema=calls.LocalShellAction,
    takes="local_shell takes {command: string[], env?, timeout_ms?, user?, working_directory?}",
    received=lambda output: output.output,
    direct_only=True,
    keyed_by_id=True,  # the SDK's param names the call by `id`; the Agents SDK sends `call_id`
    stubbed=False,  # steering's `required_input` has never listed local_shell calls
)
"""`local_shell`: no allowed_callers, so only a scenario's direct call makes one."""
