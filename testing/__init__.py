"""The pytest plugin and what tests use beside it.

    plugin.py       the `ptc_emulator` fixture (the `pytest11` entry point)
    server.py       the emulator in a background thread (`EmulatorServer`), and one test's scoped
                    view of it (`PTCEmulator`: clients, scenarios, the journal)
    shared.py       one server for every xdist worker of a run
    process.py      the server as a subprocess, for tests that restart or kill it (`ServerProcess`)
    assertions.py   the journal's tool calls (`ToolCall`) and the checks the fixture runs
    cassettes.py    `@pytest.mark.ptc_record`: a test's conversations recorded into a file of its own
    traces.py       a failed test's trace files

pytest imports the plugin in every run of every project that has the package installed, so this
package imports nothing when it is imported: the names below are loaded when first asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ptc_emulator.testing.assertions import ToolCall
    from ptc_emulator.testing.process import ServerProcess
    from ptc_emulator.testing.server import EmulatorServer, PTCEmulator

__all__ = ["EmulatorServer", "PTCEmulator", "ServerProcess", "ToolCall"]

_HOMES = {"EmulatorServer": "server", "PTCEmulator": "server", "ServerProcess": "process", "ToolCall": "assertions"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
