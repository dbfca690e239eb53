"""Runs model-authored JavaScript the way the hosted PTC runtime does, and suspends it by replay.

A program is JavaScript with top-level `await` that reaches the outside only through
`tools.<name>(args)`, `text(...)` and `image(...)`. Running it gives one of three outcomes:

    Completed(outputs)                 the program finished
    Suspended(pending, outputs)        it is waiting on tool calls nobody has answered yet
    Failed(kind, message, outputs)     syntax | runtime | timeout | memory | limit | crash | divergence

    async with Pool(PoolConfig(size=2)) as pool:
        outcome = await pool.run(Program(code, tools=("get_order",), seed=7, clock_ms=now_ms))

What was chosen, and why
------------------------
* Resume is deterministic replay. A program is identified by its code, its tool names, a seed
  and a pinned clock; resuming it means running it again in a fresh context from the start and
  answering the calls it already made from a journal. At every point where the program has
  nothing left to do, every pending call with a result is resolved, in issue order, and the run
  stops at the first such point with unanswered calls. Replayed calls must match the journal
  (tool name and canonical JSON arguments): a mismatch is `Failed("divergence")`, never
  accepted. Because nothing but the inputs decides the outcome, a program resumes in another
  process, on another worker, after a restart, and under `store: false` with no server state.
* Determinism is built in, not hoped for: `Math.random` is a seeded sfc32, `Date`, `Date.now()`,
  `new Date()` and default `Intl.DateTimeFormat` formatting see the pinned clock, and there
  are no timers. The same `Program` gives a byte-identical outcome in any process.
* Isolation: `console`, the timers (mini-racer's non-configurable timer globals are set to
  `undefined`), `WebAssembly`, `SharedArrayBuffer`, `Atomics`, `ArrayBuffer`, `DataView` and
  the typed arrays (their memory escapes the heap limit), `FinalizationRegistry`, `WeakRef` and
  `Temporal` are removed; `eval` and `new Function` are refused by V8's
  `--disallow-code-generation-from-strings`; `import()` rejects. `tools`, `text` and `image`
  are non-writable, and the host's controller is built from built-ins captured before the
  program runs, behind a token, so prototype tampering cannot forge calls or outputs; the host
  still validates everything that comes back.
* V8 runs in a supervised pool of worker processes (`Pool`). Some allocations abort the whole
  process whatever the heap limit (a V8 fatal OOM inside a builtin), so no context may share a
  process with the server: a dead or silent worker is replaced and only its program fails, as
  `Failed("crash")`. Workers are spawned (exec), never forked from a process holding V8.
* `py_mini_racer` is imported by `_v8.py` alone. The host reaches a running context only by
  string `eval` with a timeout: once a program may be spinning in a microtask (an infinite loop
  after an `await`), any other mini-racer call can deadlock, and only `close()` stops it.

What was rejected, and why
--------------------------
* Live contexts as the source of truth (keep each suspended context and resolve its promises
  when results arrive): lost on a restart, tied to one worker, impossible under `store: false`
  without server state, and bounded by V8 (about 3,200 contexts per process, 0.75 MB and two
  OS threads each). Live contexts are kept only as a cache in front of replay
  (`Execution.resume`), whose result must equal replay's.
* V8 inside the server process: one hostile allocation would take every conversation down with
  it, and a context created on the server's event loop binds to it (`eval` timeouts then fail
  an assertion, and a plain `eval` blocks the loop).
* mini-racer's `wrap_py_function` for the tool proxy: async-only and its marshalling cannot be
  cancelled. The proxy lives in JavaScript; the host only reads records the isolate builds.
"""

from ._pieces import PIECE_CHARS as JSON_PIECE_CHARS
from ._pieces import json_pieces
from .outcome import (
    Completed,
    Failed,
    FailureKind,
    ImageOutput,
    Limits,
    Outcome,
    Output,
    PendingCall,
    Program,
    Suspended,
    TextOutput,
    ToolResult,
)
from .pool import MEMOS, Pool, PoolClosed, PoolConfig

__all__ = [
    "JSON_PIECE_CHARS",
    "MEMOS",
    "json_pieces",
    "syntax_errors",
    "Completed",
    "Failed",
    "FailureKind",
    "ImageOutput",
    "Limits",
    "Outcome",
    "Output",
    "PendingCall",
    "Pool",
    "PoolClosed",
    "PoolConfig",
    "Program",
    "Suspended",
    "TextOutput",
    "ToolResult",
]


def syntax_errors(codes: list[str]) -> list[str | None]:
    """Each program's syntax error as a run would report it, or None when V8 parses it; nothing
    of any program runs (`ptc-emulator validate` checks scenario programs with it)."""
    from . import _v8

    return _v8.syntax_errors(codes)
