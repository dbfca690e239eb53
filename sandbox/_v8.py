"""The one module that touches V8 (mini-racer). Runs inside a worker process, never on a server loop.

An `Execution` is one program in one fresh context. `start()` runs it from the beginning and
answers earlier calls from the journal (replay); after a suspension `resume()` hands it more
results (live). Both drive the same in-isolate controller, so both decide the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import re
import secrets
import threading
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from py_mini_racer import (
    DEFAULT_V8_FLAGS,
    JSEvalException,
    JSOOMException,
    JSParseException,
    JSTimeoutException,
    MiniRacer,
    init_mini_racer,
)
from py_mini_racer._context import _UNCANCELABLE_TASK_CALLBACK_ID as _UNCANCELABLE
from py_mini_racer._mini_racer import _make_context
from py_mini_racer._set_timeout import INSTALL_SET_TIMEOUT

from .outcome import (
    CALL_BYTES,
    Completed,
    Failed,
    FailureKind,
    ImageOutput,
    Outcome,
    Output,
    PendingCall,
    Program,
    Suspended,
    TextOutput,
    ToolResult,
)

__all__ = ["Context", "Execution", "init", "run", "syntax_errors"]

V8_FLAGS = DEFAULT_V8_FLAGS + ("--disallow-code-generation-from-strings", "--no-harmony-temporal", "--no-lazy")
"""`--no-lazy`: every function is compiled with its script. The prelude's functions then compile
when a (spare) context is made, not on a program's first request in it, where lazy compilation
cost about 0.7 ms of each start and 0.25 ms of its first resume; a program is parsed once
instead of pre-parsed and then parsed again. Compilation is not observable by a program."""
PROGRAM_URL = "program.js"
_MAX_MESSAGE = 4000
_PRELUDE = resources.files(__package__).joinpath("_prelude.js").read_text(encoding="utf-8")


def init() -> None:
    """Set the process-wide V8 flags. Must run before the first context; idempotent."""
    init_mini_racer(flags=V8_FLAGS, ignore_duplicate_init=True)


class Context:
    """A fresh, hardened V8 context with the prelude evaluated and no program yet.

    Creating one is the fixed cost of a run (about 3 ms), so workers may create a few ahead
    of time; a context is used for exactly one program and then closed.
    """

    def __init__(self, heap_bytes: int) -> None:
        init()
        self._mr = _racer()
        self._token = secrets.token_hex(16)
        self._nonce = secrets.token_hex(16)
        self.heap_bytes = heap_bytes
        self.closed = False
        self.crossings = 0
        """Evals this context has made (each one a round trip to its isolate's thread)."""
        try:
            self._mr.set_hard_memory_limit(heap_bytes)
            deadline = time.monotonic() + 5
            # mini-racer's timer globals, exactly as `MiniRacer()` installs them (the prelude then
            # neuters them), in the same eval that fetches the global object for the doorbell.
            self._install_doorbell(self.eval(f"{INSTALL_SET_TIMEOUT}\n;globalThis", deadline))
            self.eval(
                f"{_PRELUDE}\n({json.dumps(self._token)}, {json.dumps(self._nonce)})\n//# sourceURL=ptc-prelude.js",
                deadline,
            )
        except BaseException:
            self.close()
            raise

    def eval(self, source: str, deadline: float) -> Any:
        """Evaluate a script on mini-racer's cheapest path: post it to the isolate's thread and
        wait on the context's own result queue (2 thread hops; `MiniRacer.eval(timeout_sec=...)`
        makes 4 through an asyncio loop). Posting a script is the one call that stays safe once a
        program may be spinning in a microtask: it just never runs, the wait times out, and
        the context must then be closed (the caller's duty on any timeout)."""
        self.crossings += 1
        return _fast_eval(self._mr, source, max(0.001, deadline - time.monotonic()))

    def _install_doorbell(self, global_object: Any) -> None:
        """A native JS function that posts to this context's result queue when called: the
        controller rings it once a report is ready. Set on the global object here (before the
        prelude, which takes it off) through calls that are safe while no program exists."""
        ctx = self._mr._ctx  # noqa: SLF001
        assert ctx is not None
        ring = ctx._wrap_raw_handle(ctx._dll.mr_make_js_callback(ctx._ctx, _UNCANCELABLE))  # noqa: SLF001
        ring_fn = ctx._value_handle_to_python(ring)  # noqa: SLF001
        ctx.set_object_item(global_object, "__ptc_ring", ring_fn)

    def wait_ring(self, deadline: float) -> None:
        """Wait for the controller's doorbell; checks the memory limit while it waits (a program
        stopped by it never rings). Raises JSTimeoutException at the deadline."""
        ctx = self._mr._ctx  # noqa: SLF001
        assert ctx is not None
        results = ctx._non_cancelable_mr_task_results_queue  # noqa: SLF001
        nap = 0.002
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise JSTimeoutException
            try:
                results.get(timeout=min(nap, left))  # the call's arguments: not read, freed
                return
            except queue.Empty:
                if self.memory_exceeded():
                    raise JSOOMException("memory limit") from None
                nap = min(nap * 2, 0.05)

    def control(self, call: str, deadline: float) -> Any:
        return self.eval(f'__ptc("{self._token}").{call}', deadline)

    def prefix(self) -> str:
        """What precedes the program on line 1 of its script: configure, start and pump. It is the
        same text for every run of every program (the token has a fixed length), so the program's
        own positions never depend on its history; the configuration follows the program."""
        return f'__ptc("{self._token}").go(async () => {{'

    def entry(self, code: str, cfg: dict[str, Any]) -> str:
        """The script that configures and starts a program, in one eval. Its text begins on line 1,
        so V8's line numbers are the program's (columns on line 1 are shifted by the prefix's
        constant length). The configuration, after the program, carries the context's nonce and
        is escaped so that no string, template or comment the program leaves open can end in it
        (see `go` in the prelude)."""
        text = _json_literal({**cfg, "nonce": self._nonce})
        return f"{self.prefix()}{code}\n}}, {text})\n//# sourceURL={PROGRAM_URL}"

    def heap_in_use(self) -> int:
        """Bytes the isolate's heap holds (committed). Only while no program runs: once one may
        be spinning, any call but a string eval can deadlock (see the module notes)."""
        used = self._heap_committed()
        if used > _COLLECT_ABOVE:  # committed space may be mostly garbage: count what is reachable
            self._mr.low_memory_notification()
            used = self._heap_committed()
        return used

    def _heap_committed(self) -> int:
        stats = self._mr.heap_stats()
        return int(stats.get("total_heap_size", 0)) + int(stats.get("total_heap_size_executable", 0))

    def memory_exceeded(self) -> bool:
        return bool(self._mr.was_hard_memory_limit_reached())

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._mr.close()  # terminates a program spinning after an await, too


_INERT = str.maketrans({c: f"\\u{ord(c):04x}" for c in "`'*/<>-\u2028\u2029"})
"""Characters the configuration's string literal never carries raw: with `"`, `\\` and line
breaks (escaped by JSON; U+2028 and U+2029, which JavaScript also ends a line at, here), they are
what could close a template, string or comment that a program left open before it, or open one
of its own."""


def _json_literal(value: Any) -> str:
    """A JavaScript string literal holding `value`'s JSON text, inert (`_INERT`). Characters beyond
    ASCII are carried as they are, not as `\\uXXXX` escapes: escaped twice (JSON's escape inside the
    literal's), a character of Cyrillic was 7 of the literal's and 6 of its text, so a 12 MB tool
    output of it (6 M characters) filled the 64 MiB heap before the program saw it (a program
    ending `memory` that allocated nothing). A value holding a lone surrogate, which no UTF-8 text
    carries, is escaped as before."""
    text = json.dumps(json.dumps(value, ensure_ascii=False), ensure_ascii=False)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = json.dumps(json.dumps(value))
    return text.translate(_INERT)


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()
_first_isolate = threading.Lock()
_first_made = False
"""V8 sets up a process-wide address-space pool as it makes a process's first isolate, and two
threads making the first two at once both set it up: PartitionAlloc's fatal "Check failed:
!IsConfigurablePoolInitialized()" (SIGTRAP). In a worker, the housekeeping thread's first spare
context raced a program's own context when a request came at once. Measured with three threads
each making a context right after `init()`: 7 of 40 fresh processes aborted; with one context
made first, 0 of 40. So the first isolate of a process is made alone."""


def _racer() -> MiniRacer:
    """A new isolate and context, as `MiniRacer()` makes them, minus two costs (about 1.5 ms of a
    context's 5): `MiniRacer()` starts an asyncio loop and a thread for every instance (and joins
    it on close), and installs its timer globals through that loop. Here every context of the
    process shares one idle loop (only mini-racer's cancelable calls would use it, and the
    sandbox makes none), and `Context` installs the same timer script on the fast path. Private
    names again; tests/sandbox/test_private_api.py guards them."""
    global _loop, _first_made
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="mini-racer-loop", daemon=True).start()
            _loop = loop
    maker = _make_context(_loop)
    with contextlib.nullcontext() if _first_made else _first_isolate:
        context = maker.__enter__()
        _first_made = True
    # Every crossing's result (and the doorbell) arrives through this queue, a `queue.Queue`
    # (a Python condition variable). `queue.SimpleQueue` does the same put and get in C: about
    # 20 us less per crossing, of about 160. Nothing was posted yet, so nothing is in the old one.
    object.__setattr__(context, "_non_cancelable_mr_task_results_queue", queue.SimpleQueue())
    racer = MiniRacer.__new__(MiniRacer)
    racer._own_context_maker = maker  # noqa: SLF001  (close() exits it: frees the isolate)
    racer._ctx = context  # noqa: SLF001
    return racer


def _fast_eval(mr: MiniRacer, source: str, timeout: float) -> Any:
    """`MiniRacer.eval` without the asyncio round trip, through mini-racer's private API (the
    version is pinned; tests/sandbox/test_private_api.py fails if it changes).

    The task is posted with mini-racer's "uncancelable" callback id, whose result goes straight
    to the context's result queue from the isolate's thread. Only this context's owner posts
    such tasks, one at a time, so the queue holds at most this task's result."""
    ctx = mr._ctx  # noqa: SLF001
    assert ctx is not None
    code = ctx._python_to_value_handle(source)  # noqa: SLF001
    task = ctx._dll.mr_eval(ctx._ctx, code.raw, _UNCANCELABLE)  # noqa: SLF001
    try:
        result = ctx._non_cancelable_mr_task_results_queue.get(timeout=timeout)  # noqa: SLF001
    except queue.Empty:
        ctx._dll.mr_cancel_task(ctx._ctx, task)  # noqa: SLF001
        raise JSTimeoutException from None
    return ctx._value_handle_to_python(result)  # noqa: SLF001


_COLLECT_ABOVE = 8 * 2**20
"""A heap larger than this is collected before it is measured for the live cache: small programs
(almost all of them) cost no full collection, and a large one is charged for what it keeps."""


def _journal_json(journal: tuple[ToolResult, ...] | list[ToolResult]) -> list[dict[str, Any]]:
    return [{"name": r.name, "args": r.arguments, "output": r.output, "error": r.is_error} for r in journal]


def _seed_words(seed: int) -> list[int]:
    return [(seed >> (32 * i)) & 0xFFFFFFFF for i in range(4)]


class Execution:
    """One program in one context: `start()` (replay from the journal), then `resume()` (live)."""

    def __init__(
        self, program: Program, context: Context | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.program = program
        self._clock = clock
        """What `elapsed` is measured with (injected by tests); V8's own deadlines use the real clock."""
        limits = program.limits
        if context is None or context.heap_bytes != limits.heap_bytes or context.closed:
            if context is not None:
                context.close()
            context = Context(limits.heap_bytes)
        self.context = context
        self.journal_length = len(program.journal)
        self.outcome: Outcome | None = None
        self.elapsed = 0.0
        """Seconds this execution has run so far. A live resume gets only what is left of the
        program's time limit, as a replay (which runs everything again) would."""
        self._prefix = 0

    @property
    def alive(self) -> bool:
        return not self.context.closed

    def start(self) -> Outcome:
        """Run the program from the start, answering its calls from the journal (replay)."""
        program = self.program
        limits = program.limits
        deadline = time.monotonic() + limits.timeout_s
        if len(program.code.encode("utf-8")) > limits.max_code_bytes:
            return self._finish(Failed("limit", f"program code exceeds the limit of {limits.max_code_bytes} bytes"))
        cfg = {
            "now": program.clock_ms,
            "seed": _seed_words(program.seed),
            "maxCalls": limits.max_tool_calls,
            "maxOut": limits.max_output_bytes,
            "maxArgs": limits.max_argument_bytes,
            "callBytes": CALL_BYTES,
            "journal": _journal_json(program.journal),
            "tools": list(program.tools),
            "textTools": list(program.text_tools),
        }

        self._prefix = len(self.context.prefix())

        def body() -> Outcome:
            self.context.eval(self.context.entry(program.code, cfg), deadline)
            return self._drive(deadline)

        return self._timed(body)

    def resume(self, results: list[ToolResult]) -> Outcome:
        """Hand results for the pending calls to a suspended execution and run it on."""
        assert isinstance(self.outcome, Suspended) and self.alive
        budget = self.program.limits.timeout_s - self.elapsed
        deadline = time.monotonic() + budget
        self.journal_length += len(results)
        self.outcome = None
        if budget <= 0:  # the earlier steps used the whole time limit: a replay would time out too
            return self._finish(self._timeout())

        def body() -> Outcome:
            entries = _json_literal(_journal_json(results))
            self.context.control(f"supply({entries}), __ptc({json.dumps(self.context._token)}).pump()", deadline)
            return self._drive(deadline)

        return self._timed(body)

    def _timed(self, body: Any) -> Outcome:
        began = self._clock()
        try:
            return self._guard(body)
        finally:
            self.elapsed += self._clock() - began

    def _timeout(self) -> Failed:
        return Failed("timeout", f"program exceeded its time limit of {self.program.limits.timeout_s:g} s")

    def close(self) -> None:
        self.context.close()

    # ---- internals ------------------------------------------------------------------------

    def _guard(self, body: Any) -> Outcome:
        try:
            outcome: Outcome = body()
        except JSParseException as e:
            outcome = Failed("syntax", _syntax_message(str(e), self.program.code))
        except JSTimeoutException:
            outcome = self._timeout()
        except JSOOMException:
            outcome = Failed("memory", self._memory_message())
        except JSEvalException as e:
            if self.context.memory_exceeded():
                outcome = Failed("memory", self._memory_message())
            else:
                outcome = Failed("runtime", _clip(str(e)))
        return self._finish(outcome)

    def _memory_message(self) -> str:
        return f"program exceeded its memory limit of {self.program.limits.heap_bytes // 2**20} MiB"

    def _finish(self, outcome: Outcome) -> Outcome:
        # The context stays open: the owner closes it (after answering, off the request path) or
        # keeps it, suspended, for a live resume.
        self.outcome = outcome
        return outcome

    def _drive(self, deadline: float) -> Outcome:
        """Collect the outcome of the rounds the controller is pumping."""
        self.context.wait_ring(deadline)
        nap = 0.0001
        while True:
            raw = self.context.control("poll()", deadline)
            if self.context.memory_exceeded():
                raise JSOOMException("memory limit")
            if raw is not None:
                try:
                    return self._decode(json.loads(raw))
                except (KeyError, TypeError, ValueError, RecursionError) as e:
                    raise JSEvalException(f"malformed report from the isolate: {e}") from e
            time.sleep(min(nap, max(0.0, deadline - time.monotonic())))
            nap = min(nap * 2, 0.002)

    def _decode(self, r: dict[str, Any]) -> Outcome:
        # Never trust what comes back from the isolate: check it before acting on it.
        outputs = tuple(_output(o) for o in r["out"])
        calls = int(r["calls"])
        status = r["status"]
        if status == "completed":
            return Completed(outputs, calls)
        if status == "suspended":
            allowed = set(self.program.tools)
            text_tools = set(self.program.text_tools)
            pending = []
            expected = self.journal_length  # pending calls are exactly those past the journal, in order
            for p in r["pending"]:
                index, name, arguments = p["index"], p["name"], p["arguments"]
                if index != expected or name not in allowed or not isinstance(arguments, str):
                    raise JSEvalException("invalid pending call from the isolate")
                expected_type = str if name in text_tools else dict
                if not isinstance(json.loads(arguments), expected_type):
                    raise JSEvalException("invalid pending call arguments from the isolate")
                pending.append(PendingCall(index, name, arguments))
                expected += 1
            if not pending or expected != calls:
                raise JSEvalException("invalid suspension report from the isolate")
            return Suspended(tuple(pending), outputs, calls)
        kind: FailureKind = r["kind"]
        if kind not in ("runtime", "limit", "divergence"):
            raise JSEvalException("invalid failure from the isolate")
        message = r["message"]
        if kind == "runtime":
            message = _runtime_message(message, self.program.code, self._prefix)
        return Failed(kind, _clip(message), outputs, calls)


def run(program: Program, context: Context | None = None) -> Outcome:
    """Run (or replay) a program in a fresh context and close it, whatever the outcome."""
    execution = Execution(program, context)
    try:
        return execution.start()
    finally:
        execution.close()


_IMAGE_URL = re.compile(r"data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}|https://\S+")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _well_formed(text: str) -> str:
    """A JavaScript string may hold lone surrogates, which no UTF-8 text can carry: each becomes
    U+FFFD, as `String.prototype.toWellFormed` does."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _output(o: dict[str, Any]) -> Output:
    if o.get("type") == "text" and isinstance(o.get("text"), str):
        return TextOutput(_well_formed(o["text"]))
    if o.get("type") == "image" and isinstance(o.get("url"), str) and _IMAGE_URL.fullmatch(o["url"]):
        return ImageOutput(o["url"])
    raise JSEvalException("invalid output record from the isolate")


def _clip(message: str) -> str:
    message = _well_formed(message)
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 1] + "…"


def syntax_errors(codes: list[str]) -> list[str | None]:
    """Each program's syntax error as a failed run would give it (`SyntaxError: ... (line N)` and
    the line), or None when it parses, by V8 itself: the program in the same arrow function a run
    wraps it in, after a `throw` that stops the script before any of it could run (a script is
    parsed whole before its first statement, and declarations hoisted by the parse run nothing)."""
    init()
    racer = MiniRacer()
    found: list[str | None] = []
    try:
        for code in codes:
            try:
                racer.eval(f"throw 0;(async () => {{{code}\n}})\n//# sourceURL={PROGRAM_URL}")
            except JSParseException as e:
                found.append(_syntax_message(str(e), code))
                continue
            except JSEvalException:
                pass  # the `throw 0`: it parsed
            found.append(None)
    finally:
        racer.close()
    return found


_PARSE_LINE = re.compile(r"^[^\n]*?:(\d+): (SyntaxError: [^\n]*)\n(.*)", re.S)
_FRAME = re.compile(re.escape(PROGRAM_URL) + r":(\d+):(\d+)")


def _syntax_message(raw: str, code: str) -> str:
    """`<anonymous>:3: SyntaxError: ...` with the source line and caret, in program terms."""
    m = _PARSE_LINE.match(raw)
    if not m:
        return _clip(raw.strip())
    line, message, rest = int(m.group(1)), m.group(2), m.group(3)
    last = code.count("\n") + 1
    if line > last:
        return f"SyntaxError: Unexpected end of input (line {last})"
    if line == 1:
        # The first line shares its row with the host's wrapper: show the program's text only.
        return f"{message} (line 1)\n{code.splitlines()[0] if code else ''}"
    context = "\n".join(rest.split("\n")[:2])
    return f"{message} (line {line})\n{context}"


def _runtime_message(stack: str, code: str, prefix: int) -> str:
    """Keep the error's header and the frames in the program, and name the first program line.

    Frames outside the program's lines (the host's wrapper) are dropped; columns on line 1 are
    given back in program terms.
    """
    last = code.count("\n") + 1
    header: list[str] = []
    frames: list[str] = []

    def in_program(m: re.Match[str]) -> str:
        line, column = int(m.group(1)), int(m.group(2))
        if line == 1:
            column -= prefix
        return f"{PROGRAM_URL}:{line}:{column}"

    for text in stack.split("\n"):
        if text.startswith("    at "):
            m = _FRAME.search(text)
            if m is None:
                continue
            line, column = int(m.group(1)), int(m.group(2))
            if line > last or (line == 1 and column <= prefix):
                continue
            frames.append(_FRAME.sub(in_program, text))
        elif not frames:
            header.append(text)
    head = "\n".join(header).strip() or "Uncaught exception"
    if frames:
        m = _FRAME.search(frames[0])
        assert m is not None
        head += f" (line {m.group(1)})"
    return "\n".join([head, *frames])
