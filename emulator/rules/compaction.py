"""Compaction: a window of conversation items sealed into one opaque `compaction` item, and that
item read back as the items it stands for.

`POST /v1/responses/compact` returns the window's user messages followed by one `compaction`
item; a create with `context_management: [{type: "compaction", compact_threshold}]` whose context
reaches the threshold starts its output with one. The item's `encrypted_content` is the whole
window, in order, sealed with the server's secret (`Signer.seal`, domain `compaction`): a client
reads nothing of it and cannot forge or alter it (a changed one is a 400).

Read back (`Compactor.expand`), the last compaction item of a conversation replaces itself, and
the items before it that the window covers, with its window: the window's own user messages (as
the compact endpoint returned them) or, reached by `previous_response_id`, the history it was made
from; what came before those (a client that compacted only a suffix) stays in front. So the
scripted model reads the conversation as it was (a hosted model reads a summary of it; the
scripted one answers from the items themselves), a program paused in the window resumes
by replay as it would have without compaction, and usage counts what a hosted model's context
holds after compaction: the user messages, the compaction item (no text of its own) and what
follows it (`Expanded.visible`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.caches import Cache
from ptc_emulator.emulator.history.stored import as_input
from ptc_emulator.emulator.signing import Signer
from ptc_emulator.emulator.wire.items import (
    CompactionItem,
    CompactionTrigger,
    Item,
    Message,
    dump,
    of_type,
    places_of_type,
)

__all__ = ["COMPACTION_DOMAIN", "Compactor", "Expanded", "compact_threshold", "triggered"]

COMPACTION_DOMAIN = "compaction"
"""The seal domain of compaction items' `encrypted_content`."""

_MEMO_ENTRIES = 32
_MEMO_CHARS = 4 * 2**20
"""Windows already opened, by their sealed text (at most this many, and this many characters of
it; a larger one is opened every time): a replayed compaction item comes back on every request of
its conversation."""


@dataclass(frozen=True)
class Expanded:
    """A conversation whose compaction item was replaced by the window it seals."""

    items: list[Item]
    new_from: int
    shift: int
    """How many of this request's input items the window replaced (its own index in the input,
    plus one), so a rule that names `input[N]` names the item as it was sent; 0 when the
    compaction item is in the history."""
    visible: list[Item]
    """The conversation as a hosted model's context holds it: the user messages before the
    compaction item, the item, and every item after it."""
    sent: list[Item] | None
    """This request's input items as sent, when the window replaced some of them (they are
    stored as sent), else None."""


class Compactor(Cache):
    """Compaction items made and opened; a cache of the windows opened (by their sealed text)."""

    def __init__(self, signer: Signer, ids: Callable[[str], str]) -> None:
        self.signer = signer
        self.ids = ids
        self._opened: OrderedDict[str, tuple[Item, ...]] = OrderedDict()
        self._opened_chars = 0
        self._lock = threading.Lock()

    def item(self, window: Sequence[Item]) -> dict[str, Any]:
        """The compaction output item that stands for `window` (a conversation already expanded)."""
        assert not any(isinstance(item, CompactionItem) for item in window)
        sealed = self.signer.seal(COMPACTION_DOMAIN, {"v": 1, "items": [dump(item) for item in window]})
        return {"id": self.ids("cmp"), "type": "compaction", "encrypted_content": sealed}

    def open(self, item: CompactionItem, param: str) -> tuple[Item, ...]:
        """The window a compaction item seals; a 400 if it was not issued by this server as it is."""
        with self._lock:
            known = self._opened.get(item.encrypted_content)
            if known is not None:
                self._opened.move_to_end(item.encrypted_content)
                return known
        data = self.signer.unseal(COMPACTION_DOMAIN, item.encrypted_content)
        raw = data.get("items") if data is not None else None
        window: tuple[Item, ...] | None = None
        if isinstance(raw, list):
            try:
                window = tuple(as_input(entry) for entry in raw)
            except ValidationError:
                window = None
        if window is None:
            raise messages.compaction_unverified(item.id, param)
        sealed = item.encrypted_content
        if len(sealed) <= _MEMO_CHARS:
            with self._lock:
                if sealed not in self._opened:
                    self._opened[sealed] = window
                    self._opened_chars += len(sealed)
                while len(self._opened) > _MEMO_ENTRIES or self._opened_chars > _MEMO_CHARS:
                    dropped, _ = self._opened.popitem(last=False)
                    self._opened_chars -= len(dropped)
        return window

    def clear(self) -> None:
        """Forget the opened windows (`POST /_emulator/reset`)."""
        with self._lock:
            self._opened.clear()
            self._opened_chars = 0

    def __len__(self) -> int:
        return len(self._opened)

    def expand(self, items: list[Item], new_from: int) -> Expanded | None:
        """`items` with their last compaction item read back (see the module's docstring); None
        when there is none. Every compaction item is checked, the earlier ones too."""
        found = list(places_of_type(items, CompactionItem))
        if not found:
            return None
        windows = []
        for i in found:
            item = items[i]
            assert isinstance(item, CompactionItem)
            param = f"input[{i - new_from}]" if i >= new_from else "previous_response_id"
            windows.append(self.open(item, param))
        last, window = found[-1], list(windows[-1])
        kept = _kept(items[:last], window)
        expanded = [*items[:kept], *window, *items[last + 1 :]]
        users = [item for item in items[kept:last] if isinstance(item, Message) and item.role == "user"]
        visible = [*items[:kept], *users, *items[last:]]
        if last < new_from:
            return Expanded(expanded, kept + len(window) + new_from - last - 1, 0, visible, None)
        return Expanded(expanded, kept + len(window), last + 1 - new_from, visible, items[new_from:])


def _kept(before: list[Item], window: Sequence[Item]) -> int:
    """How many of the items before a compaction item stay in front of its window: those before
    the window itself (the conversation it was made from, as `previous_response_id` finds it after
    `context_management` compaction) or before its user messages (as the compact endpoint returned
    them: a client that compacted only a suffix keeps what came earlier). Otherwise none: the
    window stands for everything before it."""
    size = len(window)
    if 0 < size <= len(before):
        tail = before[len(before) - size :]
        if all(a is b or dump(a) == dump(b) for a, b in zip(tail, window, strict=True)):
            return len(before) - size
    users = [item.text() for item in window if isinstance(item, Message) and item.role == "user"]
    count = len(users)
    if 0 < count <= len(before):
        tail = before[len(before) - count :]
        if all(isinstance(m, Message) and m.role == "user" and m.text() == t for m, t in zip(tail, users, strict=True)):
            return len(before) - count
    return 0


def triggered(new_items: list[Item]) -> bool:
    """Whether this request's input ends with a `compaction_trigger` (its response is then one
    compaction item standing for the context before it); one anywhere else is a 400."""
    if next(of_type(new_items[:-1], CompactionTrigger), None) is None:
        return bool(new_items) and isinstance(new_items[-1], CompactionTrigger)
    for index, item in enumerate(new_items):
        if isinstance(item, CompactionTrigger) and index != len(new_items) - 1:
            raise messages.compaction_trigger_not_last(f"input[{index}]")
    return bool(new_items) and isinstance(new_items[-1], CompactionTrigger)


def compact_threshold(entries: list[Any] | None) -> int | None:
    """The token count at which a create's `context_management` compacts its context, if it asks
    for compaction with a threshold (without one, the emulator, which has no context limit, never
    compacts on its own). Anything but `{type: "compaction", compact_threshold?}` is a 400."""
    threshold: int | None = None
    for index, entry in enumerate(entries or ()):
        param = f"context_management[{index}]"
        if not isinstance(entry, dict):
            raise messages.expected_an_object(param, type(entry).__name__)
        for key in entry:
            if key not in ("type", "compact_threshold"):
                raise messages.unknown_parameter(f"{param}.{key}")
        kind = entry.get("type")
        if kind is None:
            raise messages.missing_parameter(f"{param}.type")
        if kind != "compaction":
            raise messages.invalid_value(kind, "'compaction'", f"{param}.type")
        value = entry.get("compact_threshold")
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise messages.compact_threshold_invalid(param)
        threshold = value if threshold is None else min(threshold, value)
    return threshold
