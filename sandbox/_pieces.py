"""JSON text made a piece at a time, letting the other threads run between two (issue 38).

`json.dumps` is one C call that holds the interpreter for the whole text, in whatever thread it
runs: a 14 MB tool output held the event loop 30-60 ms from the worker thread that encoded it.
`dumps(value)` makes exactly `json.dumps(value, separators=(",", ":"))` (ASCII, NaN allowed) for
the pipe to a worker; `json_pieces(value, dump, ...)` is the walk under it, and under the emulator's
replies (`emulator/jsonreply.py`, which passes its own `dump`, limits and pause). How it is cut,
so that each piece is one C call of about `PIECE_CHARS` characters at most:

* an object (its keys all strings) is written a member at a time, its values cut the same way;
* a short array (`short` values or fewer) a value at a time, cut the same way;
* a longer array a run of values at a time (`short` values, or with `fit` a run fitted to the
  text the last run made);
* a long string a slice at a time (JSON escapes each code point on its own, so the slices'
  texts joined are the string's);

down to `depth` levels, and for at most `visits` objects and arrays cut by hand: past that, values
are one call each. Anything else is one `dump` call, with its own errors, as before.

The sandbox imports nothing of the emulator, so the emulator builds on this one.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

__all__ = ["DEPTH", "PIECE_CHARS", "RUN", "dumps", "json_pieces"]

PIECE_CHARS = 256 * 1024
"""About the most text one call makes (a millisecond of encoding or so)."""
RUN = 64
"""Values of a long array encoded in one call."""
DEPTH = 6
"""Levels cut by hand; below them a value is one call."""


def between() -> None:
    """Between two pieces: let the other threads run (the event loop among them)."""
    time.sleep(0)


def dumps(value: Any) -> str:
    """`json.dumps(value, separators=(",", ":"))`, made a piece at a time (see the module)."""
    return "".join(json_pieces(value, _dumps, pause=between))


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def json_pieces(
    value: Any,
    dump: Callable[[Any], str],
    *,
    separators: tuple[str, str] = (",", ":"),
    depth: int = DEPTH,
    short: int = RUN,
    fit: bool = False,
    visits: float = math.inf,
    pause: Callable[[], None] = between,
) -> list[str]:
    """`dump(value)`'s text (`dump` being a `json.dumps` with these `separators`) as pieces of
    about `PIECE_CHARS` characters, made a piece at a time, `pause()` between two."""
    writer = _Writer(dump, separators, depth, short, fit, visits, pause)
    writer.put(value, 0)
    writer.flush()
    return writer.chunks


class _Writer:
    def __init__(
        self,
        dump: Callable[[Any], str],
        separators: tuple[str, str],
        depth: int,
        short: int,
        fit: bool,
        visits: float,
        pause: Callable[[], None],
    ) -> None:
        self.dump = dump
        self.comma, self.colon = separators
        self.depth = depth
        self.short = short
        self.fit = fit
        self.visits = visits
        self.pause = pause
        self.pending: list[str] = []
        self.size = 0
        self.chunks: list[str] = []

    def add(self, text: str) -> None:
        self.pending.append(text)
        self.size += len(text)
        if self.size >= PIECE_CHARS:
            self.flush()
            self.pause()

    def flush(self) -> None:
        if self.pending:
            self.chunks.append("".join(self.pending))
            self.pending.clear()
            self.size = 0

    def put(self, value: Any, depth: int) -> None:
        dump, comma = self.dump, self.comma
        kind = type(value)
        if depth >= self.depth or self.visits <= 0:
            self.add(dump(value))
        elif kind is str:
            if len(value) <= PIECE_CHARS:
                self.add(dump(value))
                return
            self.add('"')
            for start in range(0, len(value), PIECE_CHARS):
                self.add(dump(value[start : start + PIECE_CHARS])[1:-1])
            self.add('"')
        elif kind is dict and value and all(type(key) is str for key in value):
            self.visits -= 1
            mark = "{"
            for key, item in value.items():
                self.add(mark + dump(key) + self.colon)
                self.put(item, depth + 1)
                mark = comma
            self.add("}")
        elif (kind is list or kind is tuple) and value:
            self.visits -= 1
            if len(value) <= self.short:
                mark = "["
                for item in value:
                    self.add(mark)
                    self.put(item, depth + 1)
                    mark = comma
                self.add("]")
                return
            self.add("[")
            run, start = self.short, 0
            while start < len(value):
                text = dump(value[start : start + run])[1:-1]
                self.add((comma if start else "") + text)
                start += run
                if self.fit:
                    run = max(1, min(1000, run * PIECE_CHARS // max(1, len(text))))
            self.add("]")
        else:
            self.add(dump(value))


# ---- a worker's long answer, sent in frames no one decode of which is long --------------------

CUT = "cut"
"""The key of an answer line that names the strings sent after it as frames: a list of
`[path, frames]`, `path` the keys and indexes from the answer to the string (left `""` in the
line), `frames` how many lines of JSON text (a string each) make it, in order."""


def framed(message: dict[str, Any]) -> bytes:
    """`message` as the worker sends it: one line of `json.dumps`'s text when it is shorter than
    `PIECE_CHARS`; otherwise each string of more than `PIECE_CHARS` characters is left out of the
    line (`""` in its place, named under `CUT`) and follows it as lines of `PIECE_CHARS`
    characters each. The parent then decodes no line longer than about `PIECE_CHARS` characters
    of string (`json.loads` of a 14 MB output held the server's interpreter in one call)."""
    line = _dumps(message)
    if len(line) < PIECE_CHARS:
        return line.encode("utf-8") + b"\n"
    cuts: list[list[Any]] = []
    longs: list[str] = []
    try:
        short = _cut(message, [], cuts, longs)
    except RecursionError:  # too deep to walk here: the one line, as before
        return line.encode("utf-8") + b"\n"
    if not cuts:
        return line.encode("utf-8") + b"\n"
    frames = [_dumps({**short, CUT: cuts})]
    for text in longs:
        frames += (_dumps(text[start : start + PIECE_CHARS]) for start in range(0, len(text), PIECE_CHARS))
    return ("\n".join(frames) + "\n").encode("utf-8")


def _cut(value: Any, path: list[Any], cuts: list[list[Any]], longs: list[str]) -> Any:
    if type(value) is str and len(value) > PIECE_CHARS:
        cuts.append([path, -(-len(value) // PIECE_CHARS)])
        longs.append(value)
        return ""
    if type(value) is dict:
        return {key: _cut(item, [*path, key], cuts, longs) for key, item in value.items()}
    if type(value) is list:
        return [_cut(item, [*path, n], cuts, longs) for n, item in enumerate(value)]
    return value


def frames_wanted(message: dict[str, Any]) -> list[int]:
    """How many frame lines follow an answer line, string by string (none for most)."""
    return [frames for _, frames in message.get(CUT, ())]


def assemble(message: dict[str, Any], frames: list[list[bytes]], pause: Callable[[], None] = between) -> dict[str, Any]:
    """The answer `framed` was made from: its line's `message` with each cut string put back,
    decoded a frame at a time, the other threads let in between two."""
    cuts = message.pop(CUT)
    for (path, _), lines in zip(cuts, frames, strict=True):
        parts = []
        for line in lines:
            parts.append(json.loads(line))
            pause()
        place = message
        for step in path[:-1]:
            place = place[step]
        place[path[-1]] = "".join(parts)
    return message
