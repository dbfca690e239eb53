"""The write-pause limit's clock (api/httpflow.py `PauseBound`), on an injected loop: a transport
paused for writing is aborted once a whole period goes by with nothing of its buffer taken; a
client that reads some, however slowly, starts the count again; a resume ends it."""

from __future__ import annotations

from typing import Any

from ptc_emulator.api.httpflow import PauseBound


class _Loop:
    def __init__(self) -> None:
        self.timers: list[_Timer] = []

    def call_later(self, delay: float, callback: Any, *args: Any) -> _Timer:
        timer = _Timer(delay, callback, args)
        self.timers.append(timer)
        return timer

    def fire(self) -> None:
        """The period elapses: the last timer armed runs (it must not have been cancelled)."""
        timer = self.timers[-1]
        assert not timer.cancelled
        timer.callback(*timer.args)


class _Timer:
    def __init__(self, delay: float, callback: Any, args: tuple[Any, ...]) -> None:
        self.delay, self.callback, self.args, self.cancelled = delay, callback, args, False

    def cancel(self) -> None:
        self.cancelled = True


class _Transport:
    def __init__(self, buffered: int) -> None:
        self.buffered, self.aborted, self.closing = buffered, False, False

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return self.closing or self.aborted

    def abort(self) -> None:
        self.aborted = True


def test_a_pause_with_nothing_read_for_a_period_aborts_the_transport() -> None:
    loop, transport = _Loop(), _Transport(10_000_000)
    bound = PauseBound(loop, 60.0)  # type: ignore[arg-type]
    bound.paused(transport)  # type: ignore[arg-type]
    assert loop.timers[-1].delay == 60.0
    loop.fire()
    assert transport.aborted


def test_a_slow_reader_starts_the_count_again_and_is_not_cut() -> None:
    loop, transport = _Loop(), _Transport(10_000_000)
    bound = PauseBound(loop, 60.0)  # type: ignore[arg-type]
    bound.paused(transport)  # type: ignore[arg-type]
    for _ in range(5):
        transport.buffered -= 4096  # the client took a little in the period
        loop.fire()
        assert not transport.aborted
    loop.fire()  # a period with nothing taken
    assert transport.aborted


def test_a_reply_closed_behind_a_client_that_never_reads_is_aborted_too() -> None:
    loop, transport = _Loop(), _Transport(5_000_000)
    bound = PauseBound(loop, 60.0)  # type: ignore[arg-type]
    bound.paused(transport)  # type: ignore[arg-type]
    transport.closing = True  # the reply was whole: closing waits for a buffer that never drains
    loop.fire()
    assert transport.aborted


def test_a_resume_ends_the_count() -> None:
    loop, transport = _Loop(), _Transport(100_000)
    bound = PauseBound(loop, 60.0)  # type: ignore[arg-type]
    bound.paused(transport)  # type: ignore[arg-type]
    bound.resumed()
    assert loop.timers[-1].cancelled and not transport.aborted
