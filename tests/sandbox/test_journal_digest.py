"""The journal's digest is a chain over its entries: the digest of a prefix extended by the rest is
the digest of the whole, so a live resume digests only its new results; and the pool's record of
what a holder consumed tells a journal that extends it from one that differs anywhere."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ptc_emulator.sandbox import ToolResult
from ptc_emulator.sandbox._held import HeldJournal
from ptc_emulator.sandbox._wire import digest_and_size, extend_digest, journal_to_json

RESULTS = (
    ToolResult("add", '{"a":0,"b":1}', "1"),
    ToolResult("echo", '{"s":"caf\\u00e9 \\u2028"}', '{"s":"café \u2028"}'),
    ToolResult("fail", "{}", "tool failed: no", is_error=True),
    ToolResult("docs.lookup", '{"q":"x"}', "[1,2,3]"),
    ToolResult("add", '{"a":1,"b":2}', "3"),
)
JOURNAL = journal_to_json(RESULTS)


@pytest.mark.parametrize("split", range(len(JOURNAL) + 1))
def test_a_prefix_extended_by_the_rest_has_the_digest_and_size_of_the_whole(split: int) -> None:
    prefix = digest_and_size(JOURNAL[:split])
    assert extend_digest(*prefix, JOURNAL[split:]) == digest_and_size(JOURNAL)


def test_the_size_is_the_length_of_the_journals_compact_json() -> None:
    for n in range(1, len(JOURNAL) + 1):
        assert digest_and_size(JOURNAL[:n])[1] == len(json.dumps(JOURNAL[:n], separators=(",", ":")))


def test_every_entry_and_its_place_count() -> None:
    whole = digest_and_size(JOURNAL)[0]
    for i in range(len(JOURNAL)):
        for field in range(4):
            tampered: list[Any] = [list(e) for e in JOURNAL]
            tampered[i][field] = not tampered[i][field] if field == 3 else tampered[i][field] + " "
            assert digest_and_size(tampered)[0] != whole, (i, field)
    swapped = [JOURNAL[1], JOURNAL[0], *JOURNAL[2:]]
    assert digest_and_size(swapped)[0] != whole
    assert digest_and_size(JOURNAL[:-1])[0] != whole
    assert len({digest_and_size(JOURNAL[:n])[0] for n in range(len(JOURNAL) + 1)}) == len(JOURNAL) + 1


def test_a_held_journal_gives_the_tail_of_a_journal_that_extends_it() -> None:
    held = HeldJournal.whole(RESULTS[:2], JOURNAL[:2])
    assert held.tail_of(RESULTS) == JOURNAL[2:]
    copies = tuple(ToolResult(r.name, r.arguments, r.output, r.is_error) for r in RESULTS)
    assert held.tail_of(copies) == JOURNAL[2:]  # equal results, not the same objects: still a tail
    extended = held.extended(RESULTS, JOURNAL[2:])
    assert extended == HeldJournal.whole(RESULTS, JOURNAL)
    assert extended.digest == digest_and_size(JOURNAL)[0]


def test_a_held_journal_gives_no_tail_of_a_journal_that_differs_or_does_not_grow() -> None:
    held = HeldJournal.whole(RESULTS[:3], JOURNAL[:3])
    assert held.tail_of(RESULTS[:3]) is None  # nothing new
    assert held.tail_of(RESULTS[:2]) is None
    for i in range(3):
        entries = list(RESULTS)
        entries[i] = ToolResult(entries[i].name, entries[i].arguments, entries[i].output + " ")
        assert held.tail_of(tuple(entries)) is None, i
