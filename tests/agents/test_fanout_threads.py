"""Events published from a worker thread reach the event loop's streams.

A session's step is saved and published in a worker thread (so a slow store holds no other
client); with no shared event log the streams are asyncio queues, which belong to the loop alone.
The loop runs in debug mode here, where asyncio refuses a queue touched from another thread:
before, publishing from the thread raised there (and, outside debug mode, a stream waiting for the
event was not woken until something else woke the loop)."""

from __future__ import annotations

import asyncio

from ptc_emulator.emulator.agents.events import Fanout


def test_events_published_in_a_worker_thread_reach_a_waiting_stream() -> None:
    async def main() -> list[object]:
        asyncio.get_running_loop().set_debug(True)
        fanout = Fanout()
        fanout.start()
        subscription = fanout.subscribe("sess_1", None)
        waiting = asyncio.ensure_future(subscription.get(timeout=60))
        for _ in range(10):  # the stream is waiting on its queue (wait_for runs the get in a task of its own)
            await asyncio.sleep(0)
        await asyncio.to_thread(fanout.publish, "sess_1", [{"type": "one"}, {"type": "two"}])  # type: ignore[list-item]
        first = await waiting
        second = await subscription.get(timeout=60)
        return [first, second]

    assert asyncio.run(main()) == [{"type": "one"}, {"type": "two"}]
