"""Which requests of the journal form one conversation (one run of a task): the one grouping that
the journal's `conversation` field, its figures per conversation (`evaluation`) and the trace
inspector all read.

It works on what the journal's read API returns (`JournalEntry.as_dict()`, the rows of
`GET /_emulator/journal`), never on its storage, and only when the journal is read: nothing is
spent on the request's path, and the grouping is always that of the entries the journal holds.

Two requests are in one conversation when they are in the same scope and one continues the
other: by `previous_response_id`, by a Conversations API `conversation`, by a program call id
they share (a program's resumes), by sending back (a `store: false` replay) the items or call ids
the other's response produced, or by retrying it (the same body again, with the SDK's retry
count above 0). The links are transitive: a request that continues two runs joins them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

__all__ = [
    "group",
    "inputs",
    "label",
    "name",
    "outputs",
    "program_ids",
    "replayed",
    "request_of",
    "response_of",
    "retries",
]

Entry = Mapping[str, Any]
E = TypeVar("E", bound=Mapping[str, Any])


def _items(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def request_of(entry: Entry) -> dict[str, Any]:
    request = entry.get("request")
    return request if isinstance(request, dict) else {}


def response_of(entry: Entry) -> dict[str, Any]:
    response = entry.get("response")
    return response if isinstance(response, dict) else {}


def outputs(entry: Entry) -> list[dict[str, Any]]:
    """The response's output items."""
    return _items(response_of(entry).get("output"))


def inputs(entry: Entry) -> list[dict[str, Any]]:
    """The request's input items (none when its input is a string)."""
    return _items(request_of(entry).get("input"))


def retries(entry: Entry) -> int:
    """The request's retry count, as the SDK reported it."""
    figures = entry.get("figures")
    value = figures.get("retries", 0) if isinstance(figures, dict) else 0
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def program_ids(items: Iterable[dict[str, Any]]) -> set[str]:
    """The call ids of the programs these items belong to."""
    ids: set[str] = set()
    for item in items:
        if item.get("type") in ("program", "program_output") and isinstance(item.get("call_id"), str):
            ids.add(item["call_id"])
        caller = item.get("caller")
        if isinstance(caller, dict) and caller.get("type") == "program" and isinstance(caller.get("caller_id"), str):
            ids.add(caller["caller_id"])
    return ids


def _ids(items: Iterable[dict[str, Any]]) -> set[str]:
    return {item[key] for item in items for key in ("id", "call_id") if isinstance(item.get(key), str)}


def replayed(entry: Entry) -> set[str]:
    """The ids and call ids of the items the request sent (a `store: false` replay sends back earlier outputs)."""
    return _ids(inputs(entry))


def _conversation(entry: Entry) -> str | None:
    conversation = request_of(entry).get("conversation")
    name = conversation.get("id") if isinstance(conversation, dict) else conversation
    return name if isinstance(name, str) else None


def _tokens(entry: Entry) -> list[str]:
    """What ties this request to others: the responses, conversation, programs and items it names."""
    tokens: list[str] = []
    previous = request_of(entry).get("previous_response_id")
    if isinstance(previous, str):
        tokens.append("resp:" + previous)
    conversation = _conversation(entry)
    if conversation is not None:
        tokens.append("conv:" + conversation)
    if isinstance(entry.get("response_id"), str):
        tokens.append("resp:" + entry["response_id"])
    tokens += ("prog:" + p for p in sorted(program_ids(inputs(entry)) | program_ids(outputs(entry))))
    tokens += ("item:" + i for i in sorted(replayed(entry) | _ids(outputs(entry))))
    return tokens


class _Union:
    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def group(entries: Iterable[E]) -> list[list[E]]:
    """The entries as conversations, each oldest first (by `seq`), in the order of their first request."""
    ordered = sorted(entries, key=lambda e: e.get("seq", 0))
    union = _Union(len(ordered))
    owner: dict[tuple[Any, str], int] = {}
    # A retry (the SDK counts them in x-stainless-retry-count) resends an earlier body as it was;
    # the bodies are compared only when some request is a retry.
    bodies = any(retries(e) > 0 for e in ordered)
    for i, entry in enumerate(ordered):
        scope = entry.get("scope")
        for token in _tokens(entry):
            key = (scope, token)
            if key in owner:
                union.join(owner[key], i)
            else:
                owner[key] = i
        if bodies:
            key = (scope, "body:" + json.dumps(request_of(entry), sort_keys=True))
            if retries(entry) > 0 and key in owner:
                union.join(owner[key], i)
            owner[key] = i
    groups: dict[int, list[E]] = {}
    for i, entry in enumerate(ordered):
        groups.setdefault(union.find(i), []).append(entry)
    return list(groups.values())


def name(entries: Iterable[Entry]) -> str | None:
    """A conversation's name: its Conversations API id, else the first response id it mentions
    (its first response, or the one its first request continues); None when it has neither."""
    entries = list(entries)
    for entry in entries:
        conversation = _conversation(entry)
        if conversation is not None:
            return conversation
    for entry in entries:
        for candidate in (request_of(entry).get("previous_response_id"), entry.get("response_id")):
            if isinstance(candidate, str):
                return candidate
    return None


def label(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """The entries (in their order) with `conversation` set to the name of the conversation each is in."""
    given = list(entries)
    names: dict[int, str | None] = {}
    for conversation in group(given):
        title = name(conversation)
        names.update((id(e), title) for e in conversation)
    return [{**e, "conversation": names[id(e)]} for e in given]
