"""A supervised pool of V8 worker processes with an asyncio interface.

Each worker is a separate Python process (spawned with exec, never forked from a process that
holds V8) running one program at a time. A worker that dies, or stops answering within the
program's deadline plus a grace period, is killed and replaced; nothing else is lost. A program
whose worker died under it runs once more on another worker (a replay, as after any live-cache
miss): only a program that kills that one too gets `Failed("crash")`, so a worker lost to a cause
of its own fails nobody. The server's event loop only ever waits on pipes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import _pieces
from ._held import HeldJournal, Holders
from ._wire import MEMOS, outcome_from_json, program_key, program_to_json
from .outcome import Failed, Outcome, Program

T = TypeVar("T")

__all__ = [
    "DEFAULT_CLIENT",
    "MEMOS",
    "Pool",
    "PoolClosed",
    "PoolConfig",
    "next_client",
    "program_key",
    "worker_environment",
]

log = logging.getLogger(__name__)

_LINE_LIMIT = 256 * 2**20  # an outcome carries at most the program's output limit, plus calls
_ATTEMPTS = 3
"""Tries of a program whose worker's pipe is closed when it is sent (never blamed on it)."""
_HOLDER_WAIT_S = 0.05
"""How long a program waits for the busy worker that holds it live before it replays elsewhere."""
_STDERR_TAIL = 16 * 2**10  # bytes: V8's fatal-error line is followed by a ~3 KB C stack trace


def worker_environment() -> dict[str, str]:
    """What a worker inherits: a search path and a pinned locale and time zone, nothing else.

    Workers run untrusted JavaScript, so no secret (the fingerprint key, the API key) or other
    variable of the server's reaches them; a fixed TZ and locale keep replays identical whatever
    the server's environment."""
    env = {"TZ": "UTC", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    if "PATH" in os.environ:
        env["PATH"] = os.environ["PATH"]
    return env


class PoolClosed(RuntimeError):
    """The pool was closed while a caller waited for a worker."""


@dataclass(frozen=True, slots=True)
class PoolConfig:
    size: int = max(1, os.cpu_count() or 1)
    """Worker processes; each runs one program at a time."""
    max_jobs_per_worker: int = 1000
    """A worker is retired and replaced after this many program starts (0: never). A start is a
    run in a fresh context (a first run or a replay); a live resume does not count."""
    spare_contexts: int = 0
    """Contexts each worker creates ahead of time (0: create on demand)."""
    heap_bytes: int = 64 * 2**20
    """Heap limit of the spare contexts; runs with another limit create their own."""
    live_cache: int = 64
    """Suspended programs each worker keeps live for a resume without replay (0: always replay)."""
    live_idle_s: float = 120.0
    """A live program idle this long is closed; its next resume replays."""
    live_cache_bytes: int = 256 * 2**20
    """Heap bytes (and journal text) the live programs of one worker may hold in all; the
    oldest are evicted to replay beyond it. A program's heap is due a measure when it first
    suspends, then at every suspension while it holds more than 4 MB, and at every 4th below
    that; a due measure waits for the worker to be idle, unless the bound could be passed."""
    burst: int | None = None
    """Extra workers the pool may start, beyond `size`, for programs of clients that hold no
    worker while every worker is busy (None: as many as `size`; 0: none). Each is retired as soon
    as the pool has no such program for it (`Pool` explains the dispatch)."""
    burst_after_s: float = 0.25
    """An extra worker is started only once every busy worker has run its program this long: one
    about to be freed is cheaper to wait for than a worker to start (some 0.2-0.4 s of CPU)."""
    grace_s: float = 3.0
    """Beyond a program's own deadline, how long a worker may stay silent before it is killed."""
    startup_timeout_s: float = 60.0


@dataclass(frozen=True, slots=True)
class _Died:
    """A run whose program never reached its worker (its pipe was closed): never the program's
    fault."""

    failed: Failed


@dataclass(frozen=True, slots=True)
class _Crashed:
    """A run whose worker died or went silent while it held the program: a crash, unless a
    second run shows otherwise, or the death was the program's own doing (`own`)."""

    failed: Failed
    own: bool = False
    """V8 aborted the worker on an allocation of the running program's (its fatal line says so):
    another run would only pay for the same abort again, and abusers would double their cost."""


_OWN_FATAL = ("fatal javascript", "out of memory", "invalid size", "invalid array length", "allocation failed")
"""What V8's fatal line says when a program's own allocation aborted the process. An abort of
another kind ("Check failed" from the allocator's own set-up, a signal from outside, silence) may
not be the program's, and gets its second run."""


DEFAULT_CLIENT = ""

REMEMBERED_CLIENTS = 10_000
"""Clients whose last turn the pool remembers after they leave (a few dozen bytes each)."""
"""The client of a program run without one (every request without a scope shares it)."""


@dataclass(eq=False, slots=True)
class _Ticket:
    """A program waiting for a worker."""

    client: str
    preferred: _WorkerProcess | None
    give_up: float
    """Until when it waits for `preferred` (the worker holding it live) rather than another."""
    got: asyncio.Future[_WorkerProcess] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


def next_client(waiting: Iterable[str], held: dict[str, int], served: dict[str, int]) -> str | None:
    """Which of the `waiting` clients gets the next free worker: the one holding the fewest
    workers (`held`), and of those the one served longest ago (`served`: a rising count, a client
    never served counted from when it came), so clients that hold as many take turns, round-robin,
    whatever each has queued; one that comes joins the ring at its end."""
    return min(waiting, key=lambda c: (held.get(c, 0), served.get(c, -1)), default=None)


class _WorkerProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.starts = 0
        """Programs started in a fresh context here (replays included, live resumes not)."""
        self.stderr_tail = bytearray()
        self._drain = asyncio.ensure_future(self._drain_stderr())
        self.watch: asyncio.Future[int] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def _drain_stderr(self) -> None:
        # Keep only the last few KB, for the crash message; never log them (they may hold
        # program text). Bounded by bytes, not chunks: a crash often arrives a line per read.
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(4096):
            self.stderr_tail += chunk
            del self.stderr_tail[:-_STDERR_TAIL]

    async def read_message(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await self.proc.stdout.readline()
        if not line:
            raise EOFError
        message = await asyncio.to_thread(_message, line) if len(line) >= OFF_LOOP_CHARS else _message(line)
        wanted = _pieces.frames_wanted(message)
        if not wanted:
            return message
        frames = []  # a long string's frames (`_pieces.framed`): read here, decoded in a thread
        for count in wanted:
            lines = []
            for _ in range(count):
                frame = await self.proc.stdout.readline()
                if not frame:
                    raise EOFError
                lines.append(frame)
            frames.append(lines)
        return await asyncio.to_thread(_pieces.assemble, message, frames)

    async def send(self, message: dict[str, Any], large: bool = False) -> None:
        """Write `message` as a line; a `large` one (`carries_much`) is encoded in a worker thread."""
        assert self.proc.stdin is not None
        data = await asyncio.to_thread(_long_line, message) if large else _line(message)
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    def death_reason(self) -> str:
        code = self.proc.returncode
        if code is None:
            return "stopped answering"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"was killed by {signal.Signals(-code).name}"
            return f"was killed by signal {-code}"
        return f"exited with status {code}"

    def fatal_hint(self) -> str:
        """V8's fatal line from the worker's last stderr, or ''. V8 writes "# Fatal error with no
        security impact:" and then what the error was; that second line is the one shown."""
        text = self.stderr_tail.decode("utf-8", "replace")
        generic = ""
        for line in text.splitlines():
            lowered = line.lower()  # V8 writes "Fatal ...", its allocator "[FATAL:...] Check failed"
            if "fatal" in lowered or "out of memory" in lowered or "check failed" in lowered:
                found = line.strip().lstrip("#").strip()[:200]
                if not found.endswith(":"):
                    return found
                generic = generic or found
        return generic

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        await self.proc.wait()
        await self._finish_drain()

    async def retire(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except TimeoutError:
            await self.kill()
        await self._finish_drain()

    async def _finish_drain(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._drain, 1)


def _own_doing(worker: _WorkerProcess) -> bool:
    """Whether a worker that died holding a program was aborted by that program's allocation."""
    hint = worker.fatal_hint().lower()
    return worker.proc.returncode is not None and worker.proc.returncode < 0 and any(w in hint for w in _OWN_FATAL)


class Pool:
    """`await pool.run(program, client)` from any coroutine; use as `async with Pool(config) as pool`.

    Programs waiting for a worker are served by client, not first in, first out: a free worker
    goes to the waiting client that holds the fewest workers, and among those to the one served
    longest ago (a client never served counts from when it came), so one client's queue of long
    programs never holds another's behind it. A client that holds no worker, whose program finds
    every worker busy, gets an extra worker started for it (at most `burst` extra in all); a worker
    freed while the pool is beyond `size` goes only to such a client, else it is retired. A client
    alone gets every worker, as before."""

    def __init__(self, config: PoolConfig | None = None) -> None:
        self.config = config or PoolConfig()
        self._idle: list[_WorkerProcess] = []
        self._queues: dict[str, deque[_Ticket]] = {}
        """Waiting programs by client, each client's in arrival order."""
        self._serving: dict[_WorkerProcess, str] = {}
        """The client each busy worker runs a program of."""
        self._held: dict[str, int] = {}
        """Busy workers by client."""
        self._since: dict[_WorkerProcess, float] = {}
        """When each busy worker was given its program (event-loop time)."""
        self._served: dict[str, int] = {}
        """When each client was last served (a turn of `_turns`), or came if never: remembered after
        it leaves (the `REMEMBERED_CLIENTS` served longest ago forgotten first), so a client served
        before outranks scopes that came since, however many (a new one joins the ring at its end;
        counted as never served, scopes made up by the hundred went first)."""
        self._turns = itertools.count()
        self._replacing = 0
        """Replacement workers being started (counted in the pool's size)."""
        self._bursting: set[str] = set()
        """Clients an extra worker is being started for."""
        self.bursts = 0
        """Extra workers started for clients that held none while every worker was busy."""
        self._holders: Holders[_WorkerProcess] = Holders(
            2 * self.config.live_cache, self.config.live_idle_s, 2 * self.config.live_cache_bytes
        )
        """Which worker holds a program live, by program key, and the journal it has consumed. A
        run whose journal extends it sends the holder only the new results and its digest, and
        then extends the digest by those results alone."""
        self.tail_misses = 0
        """Tail-only resumes the holder did not have the named state for (sent again whole)."""
        self._workers: set[_WorkerProcess] = set()
        self._running: set[_WorkerProcess] = set()
        """Every worker started whose process has not been waited for: those of `_workers` and
        those on their way out (retiring, killed), which `close` ends too."""
        self._spawning: set[asyncio.Task[None]] = set()
        self._ids = itertools.count()
        self._closed = False
        self.crashes = 0
        """Programs blamed for a crash: each killed (or silenced) two workers in a row."""
        self.recovered = 0
        """Programs whose worker died under them once, and that then ran on another worker."""
        self.replaced = 0
        self.runs = 0
        self.live_hits = 0
        self.retired_stuck = 0
        """Workers retired because a timed-out program's context would not close."""

    async def __aenter__(self) -> Pool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def pids(self) -> list[int]:
        """The live workers: one that died leaves this list at once, before it is replaced."""
        return sorted(w.pid for w in self._workers if w.proc.returncode is None)

    def _exited(self, worker: _WorkerProcess) -> None:
        """A worker's process ended. Idle, it is replaced now, not when a program would find it dead
        (busy, its run finds the pipe closed and replaces it)."""
        self._running.discard(worker)
        if worker in self._idle and not self._closed:
            self._idle.remove(worker)
            self._replace(worker, kill=False)

    async def start(self) -> None:
        workers = await asyncio.gather(*(self._spawn() for _ in range(self.config.size)))
        for worker in workers:
            self._put_idle(worker)

    async def close(self) -> None:
        self._closed = True
        for queue in self._queues.values():
            for ticket in queue:
                if not ticket.got.done():
                    ticket.got.set_exception(PoolClosed("the sandbox pool is closed"))
        self._queues.clear()
        for task in list(self._spawning):
            task.cancel()
        await asyncio.gather(*self._spawning, return_exceptions=True)
        # Cancelled above, a retirement or a kill on its way may have left its worker running:
        # every process started is ended and waited for here, not left to the collector.
        ending = self._workers | self._running
        await asyncio.gather(*(w.retire() for w in ending), return_exceptions=True)
        self._workers.clear()

    @property
    def waiting(self) -> int:
        """Programs waiting for a worker, all clients together."""
        return sum(len(queue) for queue in self._queues.values())

    @property
    def live_held(self) -> int:
        """Programs the pool knows a worker holds live (the journals it last sent them)."""
        return len(self._holders)

    async def forget_live(self) -> None:
        """Close every worker's live programs (`POST /_emulator/reset`); their next resumes replay,
        with the same results. A busy worker reads the request after its program, before the next."""
        self._holders.clear()
        for worker in list(self._workers):
            with contextlib.suppress(ConnectionError):
                await worker.send({"forget": True})

    async def run(self, program: Program, client: str = DEFAULT_CLIENT) -> Outcome:
        """Run or replay `program` in a worker, for `client` (whose turn it waits for, if every
        worker is busy). Cancelling the caller kills and replaces that worker.

        The worker that holds the program live gets it when it is free; any other replays it.
        A worker that dies while it holds the program, or stops answering past the program's
        deadline and the grace period, may have failed because of it or of something else: it
        was dying already (killed while idle, or V8 tearing down an earlier context), another
        process killed or stopped it, V8 aborted for a reason of its own, the machine is
        overloaded. The program then runs once more on another worker, and is blamed only if
        that one fails too; a program's runs are deterministic, so the second is a replay like
        any other. A program that never reached its worker (the pipe was closed) runs again
        without counting."""
        died = 0
        crashed = False
        while True:
            outcome = await self._run_once(program, client)
            if isinstance(outcome, _Died):
                died += 1
                if died < _ATTEMPTS:
                    log.warning("a program could not be sent to its sandbox worker; sending it to another")
                    continue
                self.crashes += 1  # fresh workers keep closing their pipes: give up
                return outcome.failed
            if isinstance(outcome, _Crashed):
                if not crashed and not outcome.own:
                    crashed = True
                    log.warning("a sandbox worker failed holding a program; running it once more on another worker")
                    continue
                self.crashes += 1
                return outcome.failed
            self.recovered += crashed
            return outcome

    async def _run_once(self, program: Program, client: str) -> Outcome | _Died | _Crashed:
        key = program_key(program) if self.config.live_cache > 0 else None
        worker = await self._acquire(client, self._holders.holder(key) if key else None)
        request_id = next(self._ids)
        self.runs += 1
        held = self._holders.held(key, worker) if key is not None else None
        tail = held.tail_of(program.journal) if held is not None else None
        message: dict[str, Any] | _Died | _Crashed | None = None
        if held is not None and tail is not None:  # (a tail is only ever made from what is held)
            request = {"id": request_id, "key": key, "tail": tail, "prefix": len(held.entries), "digest": held.digest}
            message = await self._exchange(worker, request, program)
            if isinstance(message, dict) and message.get("miss") and message.get("id") == request_id:
                self.tail_misses += 1
                message = tail = None  # the holder had another state, or none: send the whole program
        sent: list[Any] | None = None  # the journal sent whole (wire form), if it was
        if message is None:
            data = program_to_json(program)
            sent = data["journal"]
            message = await self._exchange(worker, {"id": request_id, "program": data, "key": key}, program)
        if not isinstance(message, dict):
            return message
        if message.get("id") != request_id:
            return _Crashed(await self._crashed(worker))
        hit = bool(message.get("hit"))
        worker.starts += not hit  # a live resume creates no context: it does not wear the worker
        self.live_hits += hit
        if message.get("retire"):
            # Its program's context would not close (V8 stuck or aborting): the worker ends itself
            # after this answer and takes no new work. Not a crash: the program got its answer.
            self._replace(worker, kill=False, retire=True)
            self.retired_stuck += 1
        else:
            if key is not None:
                if message.get("cached"):
                    if held is not None and tail is not None:  # resumed live: extend by the tail alone
                        kept = await _off_loop_if(carries_much(tail), held.extended, program.journal, tail)
                    else:
                        assert sent is not None
                        kept = await _off_loop_if(carries_much(sent), HeldJournal.whole, program.journal, sent)
                    self._holders.keep(key, worker, kept)
                else:
                    self._holders.drop(key, worker)
            await self._release(worker)
        return outcome_from_json(message["outcome"])

    async def _exchange(
        self, worker: _WorkerProcess, request: dict[str, Any], program: Program
    ) -> dict[str, Any] | _Died | _Crashed:
        """Send one request to `worker` and read its answer (a dict), or what became of the worker."""
        deadline = program.limits.timeout_s + self.config.grace_s
        try:
            await worker.send(request, carries_much(request))
        except ConnectionError:  # its pipe is closed: the program never reached it
            return _Died(await self._crashed(worker, exiting=True))
        except BaseException:  # cancelled before the program was sent whole
            self._replace(worker, kill=True)
            raise
        try:
            async with asyncio.timeout(deadline):
                return await worker.read_message()
        except (EOFError, ConnectionError):
            failed = await self._crashed(worker, exiting=True)
            return _Crashed(failed, own=_own_doing(worker))
        except (TimeoutError, json.JSONDecodeError):  # silent past the deadline and grace, or garbled
            return _Crashed(await self._crashed(worker))
        except BaseException:  # cancelled mid-run: the worker's state is unknown
            self._replace(worker, kill=True)
            raise

    # ---- internals -------------------------------------------------------------------------

    async def _acquire(self, client: str, preferred: _WorkerProcess | None) -> _WorkerProcess:
        """An idle worker, when it is `client`'s turn (`_dispatch`). The one that holds the program
        live, if any, even while it is busy, for up to `_HOLDER_WAIT_S`: a live resume there costs
        a fraction of a replay in a fresh context elsewhere (and the replay would drop the live
        copy). Then any idle worker."""
        if self._closed:
            raise PoolClosed("the sandbox pool is closed")
        loop = asyncio.get_running_loop()
        ticket = _Ticket(client, preferred, loop.time() + _HOLDER_WAIT_S)
        self._queues.setdefault(client, deque()).append(ticket)
        if client not in self._served:
            self._turn(client)
        try:
            self._dispatch()
            while not ticket.got.done():
                waits = [ticket.give_up] if self._holding_out(ticket) else []
                due = self._burst_due()
                if due is not None and not self._held.get(client, 0) and due > loop.time():
                    waits.append(due)  # then an extra worker may be started for it
                await asyncio.wait([ticket.got], timeout=min(waits) - loop.time() if waits else None)
                self._dispatch()  # its wait for the holder, or for a burst, is over
            return ticket.got.result()
        except BaseException:
            self._withdraw(ticket)
            raise

    def _withdraw(self, ticket: _Ticket) -> None:
        """A waiter that gave up (cancelled): out of its queue, its worker, if given, back."""
        queue = self._queues.get(ticket.client)
        if queue is not None and ticket in queue:
            queue.remove(ticket)
            if not queue:
                del self._queues[ticket.client]
        if ticket.got.done() and not ticket.got.cancelled() and ticket.got.exception() is None:
            worker = ticket.got.result()
            self._unassign(worker)
            self._put_idle(worker)
        elif not ticket.got.done():
            ticket.got.cancel()

    def _holding_out(self, ticket: _Ticket) -> bool:
        """Whether `ticket` still waits for its busy holder rather than take another worker."""
        preferred = ticket.preferred
        if preferred is None or preferred not in self._workers or preferred in self._idle:
            return False
        return asyncio.get_running_loop().time() < ticket.give_up

    def _burst_due(self) -> float | None:
        """From when an extra worker may be started (`burst_after_s`), or None if none is busy."""
        if not self._since:
            return None
        return max(self._since.values()) + self.config.burst_after_s

    def _size(self) -> int:
        """Workers the pool counts: running, and being started in place of one."""
        return len(self._workers) + self._replacing

    def _dispatch(self) -> None:
        """Give idle workers to waiting programs, by client (`next_client`), then start an extra
        worker for each client that waits holding none while no worker is idle. Never awaits."""
        if self._closed:
            return
        while self._idle and self._queues:
            over = self._size() > self.config.size  # only clients holding none get a worker
            heads: dict[str, _Ticket] = {}
            for waiting, queue in self._queues.items():
                if over and self._held.get(waiting, 0):
                    continue
                head = next((t for t in queue if not self._holding_out(t)), None)
                if head is not None:
                    heads[waiting] = head
            client = next_client(heads, self._held, self._served)
            if client is None:
                break
            ticket = heads[client]
            worker = self._pick_idle(ticket)
            if worker is None:
                continue  # a dead one was taken out: look again
            queue = self._queues[client]
            queue.remove(ticket)
            if not queue:
                del self._queues[client]
            self._serving[worker] = client
            self._since[worker] = asyncio.get_running_loop().time()
            self._held[client] = self._held.get(client, 0) + 1
            self._turn(client)
            ticket.got.set_result(worker)
        while self._idle and self._size() > self.config.size:  # an extra worker nobody waits for
            self._shrink(self._idle.pop())
        burst = self.config.size if self.config.burst is None else self.config.burst
        due = self._burst_due()
        if due is not None and asyncio.get_running_loop().time() < due:
            return  # a worker that just started its program may soon be free
        for client in list(self._queues):
            if self._idle or self._size() + len(self._bursting) >= self.config.size + burst:
                break
            if client not in self._bursting and not self._held.get(client, 0):
                self._start_burst(client)

    def _pick_idle(self, ticket: _Ticket) -> _WorkerProcess | None:
        """The idle worker `ticket` gets: its holder; else one no waiting program prefers; else the
        first. None when the one found had died (it is replaced)."""
        if ticket.preferred is not None and ticket.preferred in self._idle:
            worker = ticket.preferred
        elif len(self._idle) == 1:
            worker = self._idle[0]
        else:
            wanted = {t.preferred for q in self._queues.values() for t in q}
            worker = next((w for w in self._idle if w not in wanted), self._idle[0])
        self._idle.remove(worker)
        if worker.proc.returncode is None:
            return worker
        self._replace(worker, kill=False)
        return None

    def _start_burst(self, client: str) -> None:
        self._bursting.add(client)
        self.bursts += 1

        async def burst() -> None:
            try:
                new = await self._spawn()
            except Exception:
                log.exception("could not start an extra sandbox worker")
                return
            finally:
                self._bursting.discard(client)
            if self._closed:
                await new.retire()
            else:
                self._put_idle(new)

        task = asyncio.ensure_future(burst())
        self._spawning.add(task)
        task.add_done_callback(self._spawning.discard)

    def _shrink(self, worker: _WorkerProcess) -> None:
        """Retire an idle worker the pool no longer needs (it is beyond `size`), with no replacement."""
        self._workers.discard(worker)
        self._holders.drop_worker(worker)
        task = asyncio.ensure_future(worker.retire())
        self._spawning.add(task)
        task.add_done_callback(self._spawning.discard)

    def _unassign(self, worker: _WorkerProcess) -> None:
        client = self._serving.pop(worker, None)
        self._since.pop(worker, None)
        if client is not None:
            self._held[client] -= 1
            if not self._held[client]:
                del self._held[client]

    def _turn(self, client: str) -> None:
        """`client` served (or come) now: the last of the ring."""
        self._served.pop(client, None)
        self._served[client] = next(self._turns)
        if len(self._served) > REMEMBERED_CLIENTS:
            del self._served[next(iter(self._served))]

    def _put_idle(self, worker: _WorkerProcess) -> None:
        self._idle.append(worker)
        self._dispatch()

    async def _release(self, worker: _WorkerProcess) -> None:
        self._unassign(worker)
        limit = self.config.max_jobs_per_worker
        if self._closed or (limit and worker.starts >= limit):
            self._replace(worker, kill=False, retire=True)
        else:
            self._put_idle(worker)

    async def _crashed(self, worker: _WorkerProcess, *, exiting: bool = False) -> Failed:
        if exiting:
            # Its pipe closed because it is exiting: let asyncio's child watcher collect the exit
            # status first. Killing it now would reap it inside Popen.poll(), losing the status
            # (asyncio then reports 255 instead of, say, the SIGTRAP of a V8 fatal error).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(worker.proc.wait(), 2.0)
        death = worker.death_reason()  # before the kill: a silent worker "stopped answering"
        await worker.kill()  # also collects the rest of its stderr, for the hint
        hint = worker.fatal_hint()
        if hint:
            death += f" ({hint})"
        self._replace(worker, kill=False)
        log.warning("sandbox worker %s %s; replacing it", worker.pid, death)
        return Failed("crash", f"the sandbox worker running this program {death}")

    def _replace(self, worker: _WorkerProcess, *, kill: bool, retire: bool = False) -> None:
        self._unassign(worker)
        self._workers.discard(worker)
        self._holders.drop_worker(worker)
        if not retire:
            self.replaced += 1
        again = self._size() < self.config.size  # an extra worker (`burst`) is not replaced
        self._replacing += again

        async def replace() -> None:
            try:
                if kill:
                    await worker.kill()
                elif retire:
                    await worker.retire()
                if self._closed or not again:
                    return
                new = await self._spawn_with_retry()
            finally:
                self._replacing -= again
            if self._closed:
                await new.retire()
            else:
                self._put_idle(new)

        task = asyncio.ensure_future(replace())
        self._spawning.add(task)
        task.add_done_callback(self._spawning.discard)

    async def _spawn_with_retry(self) -> _WorkerProcess:
        delay = 0.1
        while True:
            try:
                return await self._spawn()
            except Exception:
                log.exception("could not start a sandbox worker; retrying in %.1f s", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _spawn(self) -> _WorkerProcess:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",  # isolated: no working directory, PYTHONPATH or user site ahead of the installed package
            "-m",
            "ptc_emulator.sandbox._worker",
            "--spares",
            str(self.config.spare_contexts),
            "--heap-bytes",
            str(self.config.heap_bytes),
            "--live-cache",
            str(self.config.live_cache),
            "--live-idle",
            str(self.config.live_idle_s),
            "--live-cache-bytes",
            str(self.config.live_cache_bytes),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=_LINE_LIMIT,
            start_new_session=True,  # terminal signals go to the server, which then closes the pool
            env=worker_environment(),
        )
        worker = _WorkerProcess(proc)
        try:
            hello = await asyncio.wait_for(worker.read_message(), self.config.startup_timeout_s)
            if "ready" not in hello:
                raise RuntimeError(f"unexpected first message from a sandbox worker: {hello!r}")
        except BaseException:
            await worker.kill()
            raise
        self._workers.add(worker)
        self._running.add(worker)
        watch = asyncio.ensure_future(proc.wait())
        watch.add_done_callback(lambda _: self._exited(worker))
        worker.watch = watch
        return worker


OFF_LOOP_CHARS = 64 * 2**10
"""A message to or from a worker this long or longer is encoded or parsed (and a journal this
long digested) in a worker thread: the C encoder holds the interpreter for the whole text (a 14 MB
tool output held the event loop some 60 ms). Shorter ones cost the loop less than the hop."""


def _message(line: bytes) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(line)
    return message


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"


def _long_line(message: dict[str, Any]) -> bytes:
    """`_line(message)`, its text made a piece at a time (a 14 MB output was one call of 30-60 ms)."""
    return _pieces.dumps(message).encode("utf-8") + b"\n"


def carries_much(value: Any) -> bool:
    """Whether `value` (JSON-like) holds `OFF_LOOP_CHARS` of text or more, or more than a few
    thousand values: looked at until the answer is known, so at most some thousand steps."""
    budget = OFF_LOOP_CHARS
    stack = [value]
    steps = 0
    while stack:
        item = stack.pop()
        steps += 1
        if isinstance(item, str):
            budget -= len(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
            budget -= len(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        if budget <= 0 or steps > 4096:
            return True
    return False


async def _off_loop_if(large: bool, work: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(work, *args) if large else work(*args)
