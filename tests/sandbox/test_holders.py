"""The pool's record of its workers' live programs is bounded as the workers' caches are: per
worker, by idle time and by a count; a program forgotten there is only sent whole next time."""

from __future__ import annotations

from ptc_emulator.sandbox import ToolResult
from ptc_emulator.sandbox._held import HeldJournal, Holders
from ptc_emulator.sandbox._wire import journal_to_json

RESULTS = (ToolResult("add", '{"a":0,"b":1}', "1"),)
HELD = HeldJournal.whole(RESULTS, journal_to_json(RESULTS))


def test_a_worker_keeps_its_newest_programs_up_to_the_bound() -> None:
    holders: Holders[str] = Holders(per_worker=2, idle_s=100.0)
    for i, key in enumerate("abc"):
        holders.keep(key, "w1", HELD, now=float(i))
    holders.keep("x", "w2", HELD, now=3.0)
    assert [holders.holder(k) for k in "abcx"] == [None, "w1", "w1", "w2"]
    holders.keep("b", "w1", HELD, now=4.0)  # used again: now the newest of w1
    holders.keep("d", "w1", HELD, now=5.0)
    assert [holders.holder(k) for k in "bcd"] == ["w1", None, "w1"]
    assert len(holders) == 3


def test_a_program_unused_past_the_idle_time_is_forgotten() -> None:
    holders: Holders[str] = Holders(per_worker=10, idle_s=100.0)
    holders.keep("a", "w1", HELD, now=0.0)
    holders.keep("b", "w1", HELD, now=50.0)
    holders.keep("c", "w1", HELD, now=101.0)
    assert [holders.holder(k) for k in "abc"] == [None, "w1", "w1"]


def test_a_program_has_one_holder_and_its_journal_is_that_holders() -> None:
    holders: Holders[str] = Holders(per_worker=1, idle_s=100.0)
    holders.keep("a", "w1", HELD, now=0.0)
    assert holders.held("a", "w1") == HELD
    assert holders.held("a", "w2") is None
    holders.keep("a", "w2", HELD, now=1.0)  # replayed on another worker, kept there
    assert holders.holder("a") == "w2" and holders.held("a", "w1") is None
    holders.keep("b", "w1", HELD, now=2.0)  # w1's one place: "a" is no longer counted there
    assert [holders.holder(k) for k in "ab"] == ["w2", "w1"]
    holders.drop("a", "w1")  # not its holder: nothing changes
    assert holders.holder("a") == "w2"
    holders.drop("a", "w2")
    holders.drop_worker("w1")
    assert len(holders) == 0
    holders.keep("c", "w1", HELD, now=3.0)
    holders.clear()
    assert holders.holder("c") is None
