"""The server's side of the MCP client's processes (`mcp_worker.py`, which says why they exist).

Up to `CHILDREN` processes per event loop, each started on the first live listing or call sent to
it (never with the server: a test session that lists no MCP server by URL starts none), each
serving many sessions at once by request id, and all stopped when the last app on that loop stops
(`enter`, `leave`). A client (the request's scope, as for the sandbox's workers) has its sessions
in one process while any of them lives, chosen as it starts one with none live: the process
serving the fewest clients (`_choose`). The `mcp` package validates each answer with its
process's interpreter held (a 2 MB answer: some 100-250 ms), so a client with many large answers
slows only the clients that share its process, not every client's calls (issue 38). The event loop
only reads the processes' lines as bytes and hands each session its own; the session decodes them
in a worker thread a line at a time (`decoded`), a long string's frames a frame at a time, and lets
the other threads run between two. A session cancelled here is cancelled there. When a process
dies, every session in it fails with `ChildGone`, and the next session sent to it starts another.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ptc_emulator.sandbox._pieces import PIECE_CHARS, assemble, dumps, frames_wanted

__all__ = ["CHILDREN", "ChildGone", "ask", "decoded", "enter", "leave", "pids"]

CHILDREN = max(4, min(2 * (os.cpu_count() or 1), 8))
"""The MCP client's processes per event loop, at most: two per CPU, at least 4 (so one client's
large answers cannot hold every other client's calls, and clients beyond the CPUs' count share
the cores by the system's scheduler rather than queue behind one another's answers in one
process) and at most 8. Each is started only when a session is sent to it, and takes some 60-80
MiB resident once it has imported the `mcp` package."""

_LINE_LIMIT = 256 * 2**20
"""The longest line the process may send (a long string comes in frames of `PIECE_CHARS`)."""
_STARTUP_S = 60.0
"""How long the process may take to say it is ready (it imports the `mcp` package first)."""
_STOP_S = 5.0
"""How long a stopped process may take to end once its stdin is closed, before it is killed."""


class ChildGone(Exception):
    """The MCP client's process ended (killed, crashed, stopped) while it held this session."""


class _NotSent(ChildGone):
    """The process had ended before the request reached it."""


@dataclass
class _Waiting:
    future: asyncio.Future[list[bytes]]
    lines: list[bytes] = field(default_factory=list)


class _Child:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.waiting: dict[int, _Waiting] = {}
        self.ids = itertools.count()
        self.gone = False
        self.reading: asyncio.Task[None] | None = None

    async def read(self) -> None:
        """Hand each line to its session (the bytes only: a session decodes its own, off the loop)."""
        assert self.proc.stdout is not None
        try:
            while line := await self.proc.stdout.readline():
                session, _, rest = line.partition(b" ")
                waiting = self.waiting.get(int(session))
                if waiting is None:  # cancelled meanwhile
                    continue
                if rest == b"end\n":
                    if not waiting.future.done():
                        waiting.future.set_result(waiting.lines)
                else:
                    waiting.lines.append(rest)
        except (ValueError, ConnectionError):  # a line past the limit, or not ours: not to be trusted
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        finally:
            self.gone = True
            for waiting in self.waiting.values():
                if not waiting.future.done():
                    waiting.future.set_exception(ChildGone())

    async def ask(self, request: dict[str, Any], deadline_s: float) -> list[bytes]:
        """Send `request` as session `id`, and wait for its answer's lines (undecoded)."""
        assert self.proc.stdin is not None
        session = next(self.ids)
        waiting = _Waiting(asyncio.get_running_loop().create_future())
        self.waiting[session] = waiting
        try:
            line = await _line({**request, "id": session})
            if self.gone:
                raise _NotSent()
            try:
                self.proc.stdin.write(line)
                await self.proc.stdin.drain()
            except (ConnectionError, RuntimeError) as e:  # its stdin is closed: it ended
                raise _NotSent() from e
            async with asyncio.timeout(deadline_s):
                return await waiting.future
        except BaseException:  # cancelled (the client went away) or past the deadline: it ends there too
            if not self.gone:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    self.proc.stdin.write(json.dumps({"cancel": session}).encode() + b"\n")
            raise
        finally:
            del self.waiting[session]
            waiting.future.cancel()  # (never read: no "exception was never retrieved")

    async def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), _STOP_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        if self.reading is not None:
            await asyncio.gather(self.reading, return_exceptions=True)


async def _line(request: dict[str, Any]) -> bytes:
    """The request's line; one with arguments (any size a program may pass) made in a worker
    thread, a piece at a time."""
    if request.get("arguments"):
        return await asyncio.to_thread(lambda: dumps(request).encode("utf-8") + b"\n")
    return json.dumps(request, separators=(",", ":")).encode("utf-8") + b"\n"


async def _start() -> _Child:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",  # isolated: no working directory, PYTHONPATH or user site ahead of the installed package
        "-m",
        "ptc_emulator.emulator.tools.mcp_worker",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=_LINE_LIMIT,
        start_new_session=True,  # terminal signals go to the server, which then stops it
    )
    child = _Child(proc)
    try:
        assert proc.stdout is not None
        hello = await asyncio.wait_for(proc.stdout.readline(), _STARTUP_S)
        if not hello.startswith(b"ready "):
            raise ChildGone()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    child.reading = asyncio.ensure_future(child.read())
    return child


@dataclass
class _Slot:
    """One of a loop's processes (started when first needed, again after it ended), and the
    clients and sessions it serves now."""

    child: _Child | None = None
    starting: asyncio.Future[_Child] | None = None
    clients: int = 0
    sessions: int = 0

    @property
    def started(self) -> bool:
        return self.child is not None and not self.child.gone


@dataclass
class _Place:
    """The processes of one event loop, the clients with a session live in one of them, and the
    apps on that loop that use them."""

    slots: list[_Slot] = field(default_factory=lambda: [_Slot() for _ in range(CHILDREN)])
    bound: dict[str, tuple[_Slot, int]] = field(default_factory=dict)
    """By client: the process its live sessions are in, and how many (none live: no entry)."""
    users: int = 0


_PLACES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Place] = weakref.WeakKeyDictionary()


def _place() -> _Place:
    loop = asyncio.get_running_loop()
    place = _PLACES.get(loop)
    if place is None:
        place = _PLACES[loop] = _Place()
    return place


def _choose(place: _Place) -> _Slot:
    """The process for a client with no live session: the one serving the fewest clients, then
    the fewest sessions, then one already running (a lone client starts no second process)."""
    return min(place.slots, key=lambda slot: (slot.clients, slot.sessions, not slot.started))


@contextlib.contextmanager
def _bound(place: _Place, client: str) -> Iterator[_Slot]:
    """The process `client`'s session goes to, counted as using it while the session lives."""
    slot, live = place.bound.get(client) or (_choose(place), 0)
    if not live:
        slot.clients += 1
    place.bound[client] = (slot, live + 1)
    slot.sessions += 1
    try:
        yield slot
    finally:
        slot.sessions -= 1
        _, live = place.bound[client]
        if live > 1:
            place.bound[client] = (slot, live - 1)
        else:
            del place.bound[client]
            slot.clients -= 1


async def _child(slot: _Slot) -> _Child:
    """The slot's process, started if there is none (or it ended); one start for many callers."""
    if slot.child is not None and not slot.child.gone:
        return slot.child
    if slot.starting is None:
        slot.starting = asyncio.ensure_future(_start())
    starting = slot.starting
    try:
        child = await asyncio.shield(starting)
    except ChildGone:
        raise
    except Exception as e:  # it could not start: this session fails as if it had died
        raise ChildGone() from e
    finally:
        if slot.starting is starting and starting.done():
            slot.starting = None
    slot.child = child
    return child


async def ask(request: dict[str, Any], deadline_s: float, client: str = "") -> list[bytes]:
    """One session of `client` (the request's scope; "" for none) in its process (started if need
    be): its answer's lines, undecoded. A process found ended before the request reached it is
    replaced, and the request sent once more."""
    with _bound(_place(), client) as slot:
        try:
            return await (await _child(slot)).ask(request, deadline_s)
        except _NotSent:
            return await (await _child(slot)).ask(request, deadline_s)


def decoded(lines: list[bytes]) -> list[dict[str, Any]]:
    """A session's messages from its lines (`_pieces.framed`'s), one line at a time, the other
    threads let in every `PIECE_CHARS` or so: for a worker thread."""
    messages: list[dict[str, Any]] = []
    at, since = 0, 0
    while at < len(lines):
        line = lines[at]
        message = json.loads(line)
        at += 1
        wanted = frames_wanted(message)
        if wanted:
            frames = []
            for count in wanted:
                frames.append(lines[at : at + count])
                at += count
            message = assemble(message, frames)
        messages.append(message)
        since += len(line)
        if since >= PIECE_CHARS:
            since = 0
            time.sleep(0)
    return messages


def enter() -> None:
    """An app on the running loop may use the processes (none is started now)."""
    _place().users += 1


async def leave() -> None:
    """An app on the running loop stops: the last one stops the processes that were started."""
    place = _place()
    place.users = max(0, place.users - 1)
    if place.users:
        return
    for slot in place.slots:
        child, slot.child = slot.child, None
        if slot.starting is not None:
            starting, slot.starting = slot.starting, None
            with contextlib.suppress(BaseException):
                child = await starting
        if child is not None:
            await child.stop()


def pids(loop: asyncio.AbstractEventLoop | None = None) -> list[int]:
    """The running processes' ids, or those of `loop`'s (for tests, which kill or stop one)."""
    places = list(_PLACES.items())
    return [
        s.child.proc.pid
        for at, p in places
        for s in p.slots
        if s.child is not None and not s.child.gone and loop in (None, at)
    ]
