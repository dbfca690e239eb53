"""A streamed response told while it plays: the reports of a model that writes its output as it
arrives (`model.core.Live`), turned into the very events `events.py` makes of the finished
response, so what a client accumulates from them is the response it then reads.

    item(x)         x's events (`events.item_events`), at the next output index
    opened(m)       m's `output_item.added` and `content_part.added` (its text still empty)
    delta(text)     an `output_text.delta` of that text, as the model wrote it
    item(m')        the opened message finished: `output_text.done`, `content_part.done`,
                    `output_item.done`, with its final text

The deltas are the model's own pieces (a model upstream's chunks), not `events.chunks`' words.
When the response has finished, `rest` gives the events of the output nobody reported (all of it
for a model that reported nothing). No I/O: `notify` is called when events are waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator.wire import events

__all__ = ["LiveTelling"]

Event = dict[str, Any]

_TEXT_DONE = "response.output_text.done"


class LiveTelling:
    def __init__(self, notify: Callable[[], None] = lambda: None) -> None:
        self._notify = notify
        self._waiting: list[Event] = []
        self.told: list[dict[str, Any]] = []
        """The output items told whole, in order."""
        self._open: dict[str, Any] | None = None

    # ---- what the model reports (`model.core.Live`) ---------------------------------------------

    def item(self, item: dict[str, Any]) -> None:
        index = len(self.told)
        full = events.item_events(item, index)
        if self._open is not None:
            if item.get("type") != "message" or item.get("id") != self._open.get("id"):
                raise ValueError(f"the opened message {self._open.get('id')!r} was not finished")
            full = full[next((n for n, e in enumerate(full) if e["type"] == _TEXT_DONE), len(full) - 1) :]
            self._open = None
        self.told.append(item)
        self._tell(full)

    def opened(self, message: dict[str, Any]) -> None:
        if self._open is not None:
            raise ValueError(f"the opened message {self._open.get('id')!r} was not finished")
        self._open = message
        full = events.item_events(message, len(self.told))
        self._tell(full[: next(n for n, e in enumerate(full) if e["type"] == _TEXT_DONE)])

    def delta(self, text: str) -> None:
        message = self._open
        if message is None:
            raise ValueError("a delta with no message opened")
        where = {"item_id": message.get("id") or "", "output_index": len(self.told), "content_index": 0}
        self._tell([{"type": "response.output_text.delta", **where, "delta": text, "logprobs": []}])

    # ---- what the stream sends ------------------------------------------------------------------

    def take(self) -> list[Event]:
        """The events reported since the last `take`, unnumbered."""
        waiting, self._waiting = self._waiting, []
        return waiting

    def agrees(self, output: list[dict[str, Any]]) -> bool:
        """Whether the finished `output` starts with what was told (and the message opened, if any)."""
        if output[: len(self.told)] != self.told:
            return False
        if self._open is None:
            return True
        after = output[len(self.told)] if len(output) > len(self.told) else {}
        return after.get("type") == "message" and after.get("id") == self._open.get("id")

    def rest(self, output: list[dict[str, Any]]) -> list[Event]:
        """The events of the finished `output` after what was told (the whole of it, if nothing was)."""
        waiting = self.take()
        for item in output[len(self.told) :]:
            self.item(item)
        return [*waiting, *self.take()]

    def _tell(self, batch: list[Event]) -> None:
        self._waiting.extend(batch)
        self._notify()
