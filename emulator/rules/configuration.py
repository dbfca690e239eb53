"""The response configuration a conversation's `configuration_update` items put in effect.

"An update to the conversation's response configuration. Supply reasoning, text, or both. Each
setting stays in effect until a later update replaces it." (the SDK's type). The settings are
the reasoning effort and the text format: a response whose context holds updates (in its input,
its `previous_response_id` chain, its conversation, or a compacted window read back) is the
request with the latest update of each setting over the request's own `reasoning` and `text`.
An update is the conversation's newest word, so it wins over the request's top-level fields,
which a client may send unchanged on every request. An update without an effort (or with a null
one) leaves the effort as it was; one without `text` leaves the format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ptc_emulator.emulator.wire.items import ConfigurationUpdateItem, Item, dump, of_type
from ptc_emulator.emulator.wire.request import CreateRequest

__all__ = ["in_effect"]

DEFAULT_REASONING: dict[str, Any] = {"effort": None, "summary": None}
DEFAULT_TEXT: dict[str, Any] = {"format": {"type": "text"}, "verbosity": "medium"}


def in_effect(request: CreateRequest, items: Sequence[Item]) -> CreateRequest:
    """`request` with the settings the updates among `items` put in effect (itself when none)."""
    effort: str | None = None
    text_format: dict[str, Any] | None = None
    for update in of_type(items, ConfigurationUpdateItem):
        if update.reasoning is not None and update.reasoning.effort is not None:
            effort = update.reasoning.effort
        if update.text is not None:
            text_format = dump(update.text.format)
    if effort is None and text_format is None:
        return request
    changed: dict[str, Any] = {}
    if effort is not None:
        changed["reasoning"] = {**DEFAULT_REASONING, **(request.reasoning or {}), "effort": effort}
    if text_format is not None:
        changed["text"] = {**DEFAULT_TEXT, **(request.text or {}), "format": text_format}
    return request.model_copy(update=changed)
