"""What goes into a program run and the tagged union that comes out of it.

Plain frozen dataclasses: they cross a process boundary as JSON (see `_wire.py`) and carry
no behaviour of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, TypeAlias

__all__ = [
    "CALL_BYTES",
    "Completed",
    "Failed",
    "FailureKind",
    "ImageOutput",
    "Limits",
    "Outcome",
    "Output",
    "PendingCall",
    "Program",
    "Suspended",
    "TextOutput",
    "ToolResult",
]

CALL_BYTES = 512
"""What a tool call costs against `Limits.max_argument_bytes` besides its name and arguments: the
rest of its item (ids, caller, status) and the output item that answers it, as a request carries
them back."""

FailureKind: TypeAlias = Literal["syntax", "runtime", "timeout", "memory", "limit", "crash", "divergence"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits for one run; each one exceeded gives a `Failed` of its own kind."""

    timeout_s: float = 5.0
    """Wall-clock deadline for one run (start or replay), including code after an `await`."""
    heap_bytes: int = 64 * 2**20
    """V8 heap limit for the program's context."""
    max_tool_calls: int = 1000
    """Tool calls one program may make over its whole life."""
    max_output_bytes: int = 2**20
    """Bytes of `text(...)` and `image(...)` output one program may emit: each text and image URL as
    the JSON string that carries it, and the line break that joins a text to the one before."""
    max_code_bytes: int = 256 * 2**10
    """Size of the program's source in UTF-8 bytes."""
    max_argument_bytes: int = 4 * 2**20
    """Bytes of tool calls one program may make over its whole life, counted as a request that sends
    them back carries them: each call's name and arguments as the JSON string of its item's field
    (the arguments' own JSON escaped again), every non-ASCII character as a six-byte `\\uXXXX`
    escape, and `CALL_BYTES` for the rest of the item and the output item that answers it."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A journal entry: the answer to the tool call with the same index.

    `output` is the client's text. If it parses as JSON the program receives the parsed value,
    otherwise the string itself. With `is_error` the call's promise rejects with an `Error`
    whose message is `output`.
    """

    name: str
    arguments: str
    output: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Program:
    """Everything a run needs; equal programs give byte-identical outcomes in any process."""

    code: str
    tools: tuple[str, ...]
    """What the program may call. A dotted name (`"docs.lookup"`) is a member of a namespace
    object (`tools.docs.lookup(...)`); no name may be both a tool and a namespace."""
    seed: int
    """Seeds `Math.random`; only the low 128 bits are used."""
    clock_ms: int
    """What `Date.now()`, `new Date()` and default `Intl` formatting see, in Unix milliseconds."""
    journal: tuple[ToolResult, ...] = ()
    limits: Limits = field(default_factory=Limits)
    text_tools: tuple[str, ...] = ()
    """Those of `tools` whose one argument is a string (custom tools); the others take a JSON
    object. A pending call's `arguments` is JSON text either way: an object, or a string."""


@dataclass(frozen=True, slots=True)
class TextOutput:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImageOutput:
    url: str
    """A `data:image/...;base64,` URL or an `https://` URL, validated by `image(...)`."""
    type: Literal["image"] = "image"


Output: TypeAlias = TextOutput | ImageOutput


@dataclass(frozen=True, slots=True)
class PendingCall:
    index: int
    """Position in the program's issue order, which is also its journal position."""
    name: str
    arguments: str
    """The arguments as the program serialised them (JSON object text)."""


@dataclass(frozen=True, slots=True)
class Completed:
    outputs: tuple[Output, ...]
    calls: int
    """Tool calls the program made in all."""
    status: Literal["completed"] = "completed"


@dataclass(frozen=True, slots=True)
class Suspended:
    pending: tuple[PendingCall, ...]
    """Calls without a result, in issue order."""
    outputs: tuple[Output, ...]
    calls: int
    status: Literal["suspended"] = "suspended"


@dataclass(frozen=True, slots=True)
class Failed:
    kind: FailureKind
    message: str
    """For syntax and runtime errors, with the program's own line numbers."""
    outputs: tuple[Output, ...] = ()
    calls: int = 0
    status: Literal["failed"] = "failed"


Outcome: TypeAlias = Completed | Suspended | Failed
