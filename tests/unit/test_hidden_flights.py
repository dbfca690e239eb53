"""The calls in flight that requests needing the same call at once share (`HiddenResults.once`):
one call for all of them, its result kept before any reads it; a waiter cancelled leaves the call
to the others, and when the last one leaves the call runs on for a retry. Driven by events, not by time."""

from __future__ import annotations

import asyncio

from ptc_emulator.emulator.model.runtime.hidden_results import HiddenResults
from ptc_emulator.sandbox import ToolResult


def kept(answer: str) -> ToolResult:
    return ToolResult("h.echo", "{}", answer)


def test_waiters_share_one_call_and_a_cancelled_first_does_not_end_it() -> None:
    async def main() -> None:
        memo = HiddenResults()
        started, release = asyncio.Event(), asyncio.Event()
        made: list[int] = []

        async def make() -> str:
            made.append(1)
            started.set()
            await release.wait()
            return "done"

        first = asyncio.ensure_future(memo.once("k", make, kept))
        await started.wait()
        others = [asyncio.ensure_future(memo.once("k", make, kept)) for _ in range(3)]
        await asyncio.sleep(0)
        first.cancel()
        await asyncio.sleep(0)
        assert memo.in_flight == 1
        release.set()
        assert await asyncio.gather(*others) == ["done"] * 3
        assert first.cancelled()
        assert made == [1]
        assert memo.get("k") == kept("done")
        assert memo.in_flight == 0

    asyncio.run(main())


def test_the_last_waiter_leaving_does_not_end_the_call_and_a_retry_joins_it() -> None:
    """A call that may have reached the server is not made twice: when every waiter has left (the
    client gave up) it runs on, a retry joins it, and its result is kept."""

    async def main() -> None:
        memo = HiddenResults()
        started, release = asyncio.Event(), asyncio.Event()
        made: list[int] = []

        async def make() -> str:
            made.append(1)
            started.set()
            await release.wait()
            return "done"

        waiters = [asyncio.ensure_future(memo.once("k", make, kept)) for _ in range(2)]
        await started.wait()
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        assert memo.in_flight == 1
        retry = asyncio.ensure_future(memo.once("k", make, kept))
        await asyncio.sleep(0)
        release.set()
        assert await retry == "done"
        assert made == [1]
        assert memo.get("k") == kept("done") and memo.in_flight == 0

    asyncio.run(main())


def test_a_failed_call_fails_every_waiter_and_keeps_nothing() -> None:
    async def main() -> None:
        memo = HiddenResults()
        release = asyncio.Event()

        async def make() -> str:
            await release.wait()
            raise RuntimeError("broken")

        waiters = [asyncio.ensure_future(memo.once("k", make, kept)) for _ in range(3)]
        await asyncio.sleep(0)
        release.set()
        answers = await asyncio.gather(*waiters, return_exceptions=True)
        assert [str(a) for a in answers] == ["broken"] * 3
        assert memo.in_flight == 0 and memo.get("k") is None

    asyncio.run(main())


def test_the_scope_holding_the_most_is_evicted_first() -> None:
    """Past either bound, the oldest entry of the scope holding the most goes: a scope holding
    less keeps its entries however many another scope puts."""
    memo = HiddenResults(entries=4, max_bytes=10_000)
    memo.put("victim", kept("v"), "a")
    for n in range(10):
        memo.put(f"filler {n}", kept("f"), "b")
    assert memo.get("victim") == kept("v")
    assert [memo.get(f"filler {n}") is not None for n in range(10)] == [False] * 7 + [True] * 3
    big = ToolResult("h.echo", "{}", "x" * 4000)
    memo.put("large 1", big, "b")
    memo.put("large 2", big, "b")
    memo.put("large 3", big, "b")
    assert memo.get("victim") == kept("v") and memo.size[1] <= 10_000
    assert memo.get("large 1") is None and memo.get("large 3") == big
