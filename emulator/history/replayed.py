"""Validate a replayed conversation's already-seen items once, not on every request.

A `store: false` client sends the whole conversation every time: request k+1's body is request
k's with the new items appended to `input`. Validating the request (`CreateRequest`) then costs a
few microseconds per item, over every item, on every request. This module remembers, per
conversation, the text of a body up to the end of its last input item and the items it validated
to; a later body that starts with exactly that text, followed by `,` inside the same `input`
array, holds exactly those items first (a JSON parse of the same characters gives the same
values), so the already-validated models stand in for them and only the new items are validated.

What is and is not shared, so that results stay exactly the same:

* Only a successful validation is remembered; a body that fails validates as it always did, and
  an item that differs by one byte (a tampered one) does not match, so it is validated again. The
  checks that need the whole conversation run over every item as before; what is read on from
  the entry's cursor was derived over these items (`history/cursor.py`).
* The models are shared between requests, so an item type the engine changes after validation
  (`ToolSearchOutputItem.execution`) is never remembered.
* A top-level key met twice (JSON keeps the last) or an `input` that is not the array being
  extended sends the body down the ordinary path.
* The text is the body as sent (UTF-8); the check is a prefix comparison, not a hash.

The cache is bounded by bytes (the texts it keeps, with an allowance for their models and their
cursors' fields) and drops its least recently used conversations first. A body under `min_bytes`
(4 KB) skips it: for so few items, scanning the body and keeping its prefix costs more than
validating them.

Who feeds it, explicitly: the `POST /v1/responses` route hands the body's bytes to
`PrefixCache.read_create`, the one function that reads a create body into the request and its
cursor: the body parsed (its known items as their models, in a `KnownItems` list that says how
many lead), validated as a `CreateRequest` (whose JSON check skips the known items it is handed,
`wire.known`), and remembered with the items it validated to. No state passes between them
except through those values.

Each entry holds a conversation cursor (`history/cursor.py`) over its items: the request that
made it leaves there what it derives over them (the rules' pass, the script's walk, the program
call positions and journal entries, what the model reads), and the next body that extends the
entry's text reads on from it. Why this source stays beside the others that recognise "this
conversation again" (the stored history's `Chains`): it is the only one that sees the body's
text, and it saves the pydantic validation of the items, which is the largest cost of a replayed
request; the cursor's fields save the rest. The engine owns one (`History.bodies`).
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ptc_emulator.emulator import jsonpieces
from ptc_emulator.emulator.caches import Cache
from ptc_emulator.emulator.history.cursor import DERIVED, Cursor, Extension
from ptc_emulator.emulator.wire.items import ToolSearchOutputItem
from ptc_emulator.emulator.wire.known import KnownItems
from ptc_emulator.emulator.wire.request import CreateRequest

__all__ = ["PrefixCache", "Refused", "StoredItems"]


class Refused(Exception):
    """A create's body that did not validate (`read_create`): the validation's error, and the body
    as parsed, for the reader to free off the event loop (`api/bodies.py`)."""

    def __init__(self, error: ValidationError, body: Any) -> None:
        super().__init__("the body did not validate")  # (not `str(error)`: the inputs' repr, one long call)
        self.error = error
        self.body = body


_WS = re.compile(r"[ \t\n\r]*")
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The C scanner behind `json.loads`: one value from an index, and where it ends."""
_MODEL_FACTOR = 8
"""Bytes a validated item's models take per byte of its JSON text, roughly (for the bound)."""
_ENTRY = 256
"""Bytes an entry costs beyond its text, its models and its cursor's fields, roughly (its key,
tuple and dict slot)."""


@dataclass
class _Entry:
    prefix: str
    """The body's text up to the end of its last input item."""
    keys: tuple[str, ...]
    """The top-level keys before `input`, in order."""
    cursor: Cursor
    """The validated input items, in order, and what requests derived over them."""

    @property
    def items(self) -> tuple[Any, ...]:
        return self.cursor.items

    @property
    def size(self) -> int:
        return self.cursor.size


@dataclass
class _Pending:
    text: str
    first_end: int
    """Where the first input item ends (the cache's key is the text up to there)."""
    keys: tuple[str, ...]
    ends: list[int]
    """Where each input item ends."""
    known: int
    """How many leading items came from the cache."""
    base: _Entry | None
    items: list[Any] = field(default_factory=list)


class _NotPlain(Exception):
    """The body is not the plain shape this cache handles: take the ordinary path."""


def _ws(text: str, i: int) -> int:
    if i < len(text) and text[i] not in " \t\n\r":
        return i  # no whitespace here (compact JSON's every case): no regex needed
    match = _WS.match(text, i)
    assert match is not None
    return match.end()


def _value(text: str, i: int) -> tuple[Any, int]:
    """The JSON value at `i` as `json.loads` reads it (the same scanner), and where it ends; a
    long array or object a piece at a time (`jsonpieces.value_at`: an input item holding an object
    of 1,450,000 members was read in one call, twice, each 1-3 s of every client's time)."""
    try:
        value, end = jsonpieces.value_at(text, i)
    except (StopIteration, ValueError) as e:
        raise _NotPlain from e
    return value, int(end)


def _value_end(text: str, i: int) -> int:
    return _value(text, i)[1]


def _key(text: str, i: int) -> tuple[str, int]:
    if i >= len(text) or text[i] != '"':
        raise _NotPlain
    try:
        key, end = _SCAN(text, i)
    except (StopIteration, ValueError) as e:
        raise _NotPlain from e
    end = _ws(text, end)
    if end >= len(text) or text[end] != ":":
        raise _NotPlain
    return str(key), _ws(text, end + 1)


def _items(text: str, i: int, ends: list[int], values: list[Any] | None = None) -> int:
    """From just after `[` or after an item's `,`: the ends of the items (and their values, into
    `values` if given); returns the index after `]`."""
    i = _ws(text, i)
    if not ends and i < len(text) and text[i] == "]":
        return i + 1
    while True:
        value, end = _value(text, i)
        if values is not None:
            values.append(value)
        ends.append(end)
        i = _ws(text, end)
        if i < len(text) and text[i] == ",":
            i = _ws(text, i + 1)
            continue
        if i < len(text) and text[i] == "]":
            return i + 1
        raise _NotPlain


def _rest(text: str, i: int, seen: set[str], values: dict[str, Any] | None = None) -> None:
    """The top-level keys after `input`'s array up to the closing `}` (and their values, into
    `values` if given): none may repeat."""
    while True:
        i = _ws(text, i)
        if i < len(text) and text[i] == "}":
            if _ws(text, i + 1) != len(text):
                raise _NotPlain
            return
        if i >= len(text) or text[i] != ",":
            raise _NotPlain
        key, i = _key(text, _ws(text, i + 1))
        if key in seen:
            raise _NotPlain
        seen.add(key)
        value, i = _value(text, i)
        if values is not None:
            values[key] = value


def _head(text: str, values: dict[str, Any] | None = None) -> tuple[tuple[str, ...], int, int]:
    """(keys before `input`, index after `input`'s `[`, end of its first item or -1 if empty); the
    values of those keys into `values`, if given."""
    i = _ws(text, 0)
    if i >= len(text) or text[i] != "{":
        raise _NotPlain
    i = _ws(text, i + 1)
    keys: list[str] = []
    while True:
        key, i = _key(text, i)
        if key in keys:
            raise _NotPlain
        if key == "input":
            if i >= len(text) or text[i] != "[":
                raise _NotPlain
            start = i + 1
            first = _ws(text, start)
            if first < len(text) and text[first] == "]":
                return tuple(keys), start, -1
            return tuple(keys), start, _value_end(text, first)
        keys.append(key)
        value, end = _value(text, i)
        if values is not None:
            values[key] = value
        i = _ws(text, end)
        if i >= len(text) or text[i] != ",":
            raise _NotPlain  # no `input` array at all
        i = _ws(text, i + 1)


class PrefixCache(Cache):
    """Validated input items, and the cursor over them, by conversation (the text up to the end
    of its first item): the conversation cursor's source for `store: false` bodies."""

    def __init__(self, max_bytes: int = 64 * 2**20, per_key: int = 4, min_bytes: int = 4096) -> None:
        self.max_bytes = max_bytes
        self.per_key = per_key
        self.min_bytes = min_bytes
        """A smaller body takes the ordinary path: finding and keeping its prefix costs more than
        validating the few items it would spare (measured: even at about 3-4 KB)."""
        self.bytes = 0
        self._entries: OrderedDict[str, list[_Entry]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return sum(len(entries) for entries in list(self._entries.values()))

    def read_create(self, raw: bytes) -> tuple[CreateRequest, Extension]:
        """A create's body read into the request and its cursor: `json.loads(raw)` validated as a
        `CreateRequest`, except that a body that extends a known prefix (see `read`) has its known
        items as their models already, and the cursor over them to read on from; the body's input
        items are remembered, with a new cursor for this request to leave what it derives in.
        Raises what `json.loads` raises, and `Refused` (the validation's error and the parsed body)."""
        value, pending = self._parse(raw)
        try:
            request = CreateRequest.model_validate(value)
        except ValidationError as e:
            raise Refused(e, value) from None
        if pending is None and isinstance(value, dict) and isinstance(value.get("input"), list):
            # Planned once the body validated: a refused body is not read a second time.
            pending = self.plan(raw, len(value["input"]))
        base = pending.base.cursor if pending is not None and pending.base is not None else None
        cursor = self._remember(pending, request.input) if pending is not None else None
        return request, Extension(base, cursor)

    def _parse(self, raw: bytes) -> tuple[Any, _Pending | None]:
        """The body parsed (see `read_create`), and what to remember of it once it validated (None
        when no known prefix was found: `read_create` plans it after validating)."""
        try:
            found = self.read(raw)
        except Exception:  # (a nesting too deep for the scanner, say) the parser decides, as always
            found = None
        if found is not None:
            value, pending = found
            items = KnownItems(value["input"])
            items.known = pending.known
            return {**value, "input": items}, pending
        return _loads(raw), None

    def _remember(self, pending: _Pending, items: Any) -> Cursor | None:
        """Keep the body's validated input items, with a new cursor over them (None: not kept)."""
        if not isinstance(items, list) or len(items) != len(pending.ends):
            return None
        return self.store(pending, items)

    def plan(self, raw: bytes, count: int) -> _Pending | None:
        """What is known of this body whose parsed `input` holds `count` items (None: nothing to do)."""
        if self.max_bytes <= 0 or count == 0 or len(raw) < self.min_bytes:
            return None
        try:
            text = jsonpieces.decode(raw)
        except UnicodeDecodeError:
            return None  # not strict UTF-8 (the JSON parser also reads UTF-16 and encoded surrogates)
        try:
            keys, start, first_end = _head(text)
            if first_end < 0:
                return None
            base = self._base(text, keys, first_end)
            ends: list[int] = []
            if base is None:
                after = _items(text, start, ends)
            else:
                ends = [-1] * (len(base.items) - 1) + [len(base.prefix)]
                after = _items(text, len(base.prefix) + 1, ends)
            _rest(text, after, {*keys, "input"})
        except _NotPlain:
            return None
        if len(ends) != count:  # not the array validation will see
            return None
        known = len(base.items) if base is not None else 0
        if base is None:
            self.misses += 1
        else:
            self.hits += 1
        return _Pending(text, first_end, keys, ends, known, base)

    def _base(self, text: str, keys: tuple[str, ...], first_end: int) -> _Entry | None:
        """The entry with the longest prefix this body extends, if any."""
        key = text[:first_end]
        with self._lock:
            candidates = list(self._entries.get(key, ()))
            if candidates:
                self._entries.move_to_end(key)
        base = None
        for entry in candidates:
            n = len(entry.prefix)
            if (
                entry.keys == keys
                and len(text) > n
                and text[n] == ","
                and text.startswith(entry.prefix)
                and (base is None or n > len(base.prefix))
            ):
                base = entry
        return base

    def read(self, raw: bytes) -> tuple[dict[str, Any], _Pending] | None:
        """The body parsed as `json.loads` parses it, but with its known leading input items as
        their validated models, unparsed (None: no known prefix, or not the plain shape).

        Every other value is read with `json.loads`'s own scanner; the keys keep their order (none
        repeats: a body with a repeated key takes the ordinary path)."""
        if self.max_bytes <= 0 or len(raw) < self.min_bytes:
            return None
        try:
            text = jsonpieces.decode(raw)
        except UnicodeDecodeError:
            return None
        head: dict[str, Any] = {}
        new: list[Any] = []
        rest: dict[str, Any] = {}
        try:
            keys, _, first_end = _head(text, head)
            if first_end < 0:
                return None
            base = self._base(text, keys, first_end)
            if base is None:
                return None
            ends = [-1] * (len(base.items) - 1) + [len(base.prefix)]
            after = _items(text, len(base.prefix) + 1, ends, new)
            _rest(text, after, {*keys, "input"}, rest)
        except _NotPlain:
            return None
        self.hits += 1
        value = {**head, "input": [*base.items, *new], **rest}
        return value, _Pending(text, first_end, keys, ends, len(base.items), base)

    def store(self, pending: _Pending, items: list[Any]) -> Cursor | None:
        """Keep `items` (the body's validated input) for the bodies that extend this one; returns
        the cursor made over them (None: not kept)."""
        if any(isinstance(i, ToolSearchOutputItem) for i in items[pending.known :]):
            return None
        prefix = pending.text[: pending.ends[-1]]
        size = _ENTRY + len(prefix) * (1 + _MODEL_FACTOR) + DERIVED * len(items)
        entry = _Entry(prefix, pending.keys, Cursor(tuple(items), size))
        if entry.size > self.max_bytes:
            return None
        key = pending.text[: pending.first_end]
        with self._lock:
            entries = self._entries.get(key)
            if entries is None:
                entries = self._entries[key] = []
            else:
                self._entries.move_to_end(key)
            if pending.base is not None and pending.base in entries:
                entries.remove(pending.base)  # the conversation moved on: keep its longer prefix
                self.bytes -= pending.base.size
            entries.insert(0, entry)
            self.bytes += entry.size
            while len(entries) > self.per_key:
                self.bytes -= entries.pop().size
            while self.bytes > self.max_bytes and self._entries:
                _, dropped = self._entries.popitem(last=False)
                self.bytes -= sum(e.size for e in dropped)
        return entry.cursor


class StoredItems(Cache):
    """Each stored response's items (its input and output) as validated input items, by response id,
    so that continuing a `store: true` conversation does not validate its history again.

    A stored response is cached only once finished (completed or incomplete: it never changes
    after that, and `History.load` continues nothing else) and only if it holds no item the engine
    changes after validation (`ToolSearchOutputItem`). Bounded by bytes (the items' JSON text, with
    an allowance for their models); the least recently used leave first."""

    def __init__(self, max_bytes: int = 32 * 2**20) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[str, tuple[tuple[Any, ...], int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, response_id: str) -> tuple[Any, ...] | None:
        with self._lock:
            found = self._entries.get(response_id)
            if found is None:
                return None
            self._entries.move_to_end(response_id)
            return found[0]

    def put(self, response_id: str, raw: list[Any], items: list[Any]) -> None:
        if self.max_bytes <= 0 or any(isinstance(i, ToolSearchOutputItem) for i in items):
            return
        size = _ENTRY + jsonpieces.compact_size(raw) * (1 + _MODEL_FACTOR)  # a long one a piece at a time
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(response_id, None)
            if old is not None:
                self.bytes -= old[1]
            self._entries[response_id] = (tuple(items), size)
            self.bytes += size
            while self.bytes > self.max_bytes and self._entries:
                self.bytes -= self._entries.popitem(last=False)[1][1]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


def _loads(raw: bytes) -> Any:
    """`json.loads(raw)`; a long body's outer arrays a piece at a time (`jsonpieces.loads`), so a
    worker thread reading 100,000 items lets the event loop run between pieces. The text is
    decoded as `json.loads` decodes bytes, and whatever it refuses is refused with its error."""
    text = jsonpieces.decode(raw, json.detect_encoding(raw), "surrogatepass")
    return jsonpieces.loads(text)
