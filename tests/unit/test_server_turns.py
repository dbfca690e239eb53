"""Every server-side tool kind's direct call has a scenario turn kind that exists: the loader's
messages name only turns the loader accepts."""

from __future__ import annotations

from ptc_emulator.emulator.model.scripted.player import SERVER_TURNS
from ptc_emulator.emulator.model.scripted.scenario import KINDS, Turn
from ptc_emulator.emulator.tools.kinds import REGISTRY


def test_every_server_kind_names_a_turn_kind_that_exists() -> None:
    server_kinds = {kind.kind for kind in REGISTRY if kind.owner == "server"}
    assert server_kinds <= set(SERVER_TURNS), server_kinds - set(SERVER_TURNS)
    assert set(SERVER_TURNS.values()) <= set(KINDS)


def test_a_shell_turn_loads() -> None:
    turn = Turn.model_validate({"shell": {"commands": ["ls -la /mnt/data"], "timeout_ms": 1000}})
    assert turn.kind == "shell" and turn.shell is not None and turn.shell.commands == ["ls -la /mnt/data"]
