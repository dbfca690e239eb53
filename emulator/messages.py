"""The catalogue: every message the emulator answers with, each written once, grouped by surface.

The emulator's promise is the hosted API's message, exactly; so the messages live here, not at the
places that raise them. Two sorts of entry:

* an **error**: a function taking the message's variable parts and returning the exception to
  raise, whose class carries the status, type and code (`emulator/errors.py`): `raise
  messages.no_tool_output(label, call_id)`;
* a **text**: a function returning a wording that travels inside something else: a response's
  `error`, the reason inside a validation error (`Invalid 'metadata': <reason>.`), the reason a
  scenario turn cannot play, an MCP call's `error`, a WebSocket or agent event.

Every module names an entry through this module (`messages.x(...)`), never by importing the name,
so a wording changed here (or patched in a test) changes everywhere it is used.
`tests/unit/test_messages.py` holds that: it lists any wording written inline elsewhere, checks
that `docs/errors.md`'s catalogue is what `python -m ptc_emulator.emulator.messages docs/errors.md`
writes, and makes each rule fire through its entry. An entry's docstring says when it is answered.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from ptc_emulator.emulator.errors import EmulatorError, PreviousResponseNotFound

__all__ = ["CATALOGUE", "SURFACES", "Entry", "markdown"]

P = ParamSpec("P")
E = TypeVar("E", bound=EmulatorError)


@dataclass(frozen=True)
class Entry:
    """One catalogue entry: its function, the surface it belongs to, and, for a text, where it
    appears. `samples` are the parts the docs show it with (by default the parameter's default,
    else `<name>`)."""

    name: str
    surface: str
    function: Callable[..., EmulatorError | str]
    where: str | None = None
    samples: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_text(self) -> bool:
        return self.where is not None

    @property
    def when(self) -> str:
        doc = inspect.getdoc(self.function) or ""
        return " ".join(doc.split("\n\n", 1)[0].split())

    def sample(self) -> EmulatorError | str:
        """The entry made with its sample parts."""
        parts: dict[str, Any] = {}
        for name, parameter in inspect.signature(self.function).parameters.items():
            if name in self.samples:
                parts[name] = self.samples[name]
            elif parameter.default is inspect.Parameter.empty:
                parts[name] = f"<{name}>"
        return self.function(**parts)


CATALOGUE: dict[str, Entry] = {}
"""Every entry by its name, in the order of this module."""

SURFACES: list[str] = []
"""The surfaces, in the order of this module."""


def _register(surface: str, function: Callable[..., Any], where: str | None, samples: Mapping[str, Any]) -> None:
    name = function.__name__
    assert name not in CATALOGUE, f"two entries named {name}"
    if surface not in SURFACES:
        SURFACES.append(surface)
    CATALOGUE[name] = Entry(name, surface, function, where, dict(samples))


def error(surface: str, **samples: Any) -> Callable[[Callable[P, E]], Callable[P, E]]:
    """Register an error entry (a function returning the exception to raise)."""

    def register(function: Callable[P, E]) -> Callable[P, E]:
        _register(surface, function, None, samples)
        return function

    return register


def text(surface: str, where: str, **samples: Any) -> Callable[[Callable[P, str]], Callable[P, str]]:
    """Register a text entry (a wording that travels inside something else, `where`)."""

    def register(function: Callable[P, str]) -> Callable[P, str]:
        _register(surface, function, where, samples)
        return function

    return register


# ==== the entries, by surface ====================================================================

EDGE = "The edge: API keys, hosts, bodies, routes"
REQUEST = "Request parameters"
ITEMS = "Conversation items"
PROGRAMS = "Programs and sealed content"
TOOLS = "Tools and tool search"
HISTORY = "Stored responses and items"
RESPONSES = "Responses: background, compaction, continuations"
CONVERSATIONS = "Conversations API"
SCENARIOS = "Scenarios (the scripted model)"
UPSTREAM = "The model upstream"
MCP = "MCP servers"
AGENTS = "Agents API"
SOCKET = "WebSocket mode and steering"
ADMIN = "Admin API, journal and inspector"


# ---- stored responses and items --------------------------------------------------------------------


@error(HISTORY)
def previous_response_not_found(response_id: str) -> PreviousResponseNotFound:
    """An unknown (deleted, or `store: false`) `previous_response_id`."""
    return PreviousResponseNotFound(
        f"Previous response with id '{response_id}' not found.", param="previous_response_id"
    )


# ---- the docs ------------------------------------------------------------------------------------

BEGIN = "<!-- catalogue: written by `python -m ptc_emulator.emulator.messages docs/errors.md`; do not edit -->"
END = "<!-- end of catalogue -->"


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def _code(value: str) -> str:
    """`value` as inline code, fenced with enough backticks for the ones it holds."""
    longest = 0
    run = 0
    for char in value:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    ticks = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


def markdown() -> str:
    """The catalogue as docs/errors.md shows it: a table per surface."""
    out = [BEGIN, ""]
    for surface in SURFACES:
        out += [f"### {surface}", "", "| entry | status | code | when | message |", "|---|---|---|---|---|"]
        for entry in (e for e in CATALOGUE.values() if e.surface == surface):
            made = entry.sample()
            if isinstance(made, EmulatorError):
                status = str(made.status)
                code = _code(made.code) if made.code is not None else "`null`"
                if made.type != "invalid_request_error":
                    code += f" (`{made.type}`)"
                message = made.message
                when = entry.when
            else:
                status, code, message = "", "", made
                when = f"{entry.when} (in {entry.where})"
            out.append(f"| `{entry.name}` | {status} | {code} | {_cell(when)} | {_cell(_code(message))} |")
        out.append("")
    out.append(END)
    return "\n".join(out)


def written(document: str) -> str:
    """`document` with its catalogue section replaced by `markdown()`."""
    head, begin, rest = document.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the document has no catalogue section ({BEGIN} ... {END})")
    return head + markdown() + tail


if __name__ == "__main__":  # python -m ptc_emulator.emulator.messages docs/errors.md
    from pathlib import Path

    path = Path(sys.argv[1])
    path.write_text(written(path.read_text(encoding="utf-8")), encoding="utf-8")
