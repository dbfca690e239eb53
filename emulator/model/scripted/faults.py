"""Injected failures (a scenario turn's `fault`): what each does, and when.

A fault belongs to the response that starts its turn, not to the responses that resume a
program the turn started. An HTTP error answers the first `times` requests for one conversation
state, so the SDK's retries of the same request see it and then get through. The requests are
counted by the store's `Counts` when one is given: with a store replicas share, `times` counts
the deployment's requests, whichever replica answers each. A scenario's counts are forgotten
when it is replaced or deleted, and a scope's when it is reset (`forget_counts`): the scenario
added again fails afresh.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError, ScriptedError
from ptc_emulator.emulator.model.scripted.scenario import Fault
from ptc_emulator.emulator.storage import Counts
from ptc_emulator.emulator.wire.items import Item, dump
from ptc_emulator.sandbox import Failed, Limits

__all__ = ["FaultInjector", "InjectedHTTPError", "describe", "forced_failure", "forget_counts"]


def _injected(status: int) -> EmulatorError:
    """OpenAI's body for an injected HTTP error of `status` (429, 500 or 503)."""
    if status == 429:
        return messages.rate_limited()
    if status == 503:
        return messages.overloaded()
    return messages.server_error()


def _part(value: Any) -> str:
    return hashlib.sha256(json.dumps(value).encode("utf-8")).hexdigest()[:32]


def forget_counts(counts: Counts, scope: str | None, name: str | None = None, *, every: bool = False) -> int:
    """The requests counted for the faults of scenario `name` of `scope` (whichever scope asked)
    forgotten; without `name`, those of every scenario of `scope` and those of every request
    in `scope`; with `every`, all of them. How many counts went.

    A key is `fault <scenario's scope> <name> <request's scope> <turn and state>`, each part a
    hash of 32 hex digits: a scope's part found anywhere in a key is that scope's."""
    if every:
        return counts.forget("fault ")
    if name is not None:
        return counts.forget(f"fault {_part(scope)} {_part(name)} ")
    return counts.forget("fault ", f" {_part(scope)} ")


class FaultInjector:
    def __init__(self, remember: int = 10_000, counts: Counts | None = None) -> None:
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._remember = remember
        self.counts = counts
        """Where the requests a fault answered are counted (None: in this object)."""

    def http_error(self, fault: Fault, key: tuple[Any, ...], items: list[Item]) -> str | None:
        """Raise the fault's HTTP error if this conversation state has not had it `times` times yet.
        `key`: the scenario's scope and name, the request's scope, the turn.

        Returns what the fault does to the response otherwise (for the journal)."""
        if fault.http_error is None:
            return describe(fault)
        own, name, scope, *rest = key
        state = f"fault {_part(own)} {_part(name)} {_part(scope)} {_part([*rest, _digest(items)])}"
        seen = self._take(state, fault.times)
        if seen is None:
            return describe(fault)
        headers = {}
        if fault.retry_after is not None:
            headers["retry-after"] = f"{fault.retry_after:g}"
            headers["retry-after-ms"] = str(int(fault.retry_after * 1000))
        if fault.should_retry is not None:
            headers["x-should-retry"] = "true" if fault.should_retry else "false"
        body = _injected(fault.http_error)
        raise InjectedHTTPError(
            fault.http_error,
            body.message,
            type=body.type,
            code=body.code,
            headers=headers,
            what=f"http_error {fault.http_error} ({seen + 1} of {fault.times})",
        )

    def _take(self, state: str, times: int) -> int | None:
        """Count one more request answered in this conversation state, unless `times` were: how
        many were before (None: `times` were)."""
        if self.counts is not None:
            return self.counts.take(state, times)
        seen = self._seen.get(state, 0)
        if seen >= times:
            return None
        self._seen[state] = seen + 1
        self._seen.move_to_end(state)
        while len(self._seen) > self._remember:
            self._seen.popitem(last=False)
        return seen


class InjectedHTTPError(ScriptedError):
    """A turn's `http_error` fault; `what` says which of its `times` this was."""

    def __init__(self, status: int, message: str, *, what: str, **kwargs: Any) -> None:
        super().__init__(status, message, **kwargs)
        self.what = what


def forced_failure(fault: Fault | None, limits: Limits) -> Failed | None:
    """The outcome a program fault imposes instead of running the program."""
    if fault is None:
        return None
    if fault.program_timeout:
        return Failed("timeout", f"program exceeded its time limit of {limits.timeout_s:g} s")
    if fault.program_incomplete is not None:
        return Failed("runtime", fault.program_incomplete)
    return None


def describe(fault: Fault) -> str | None:
    parts = [
        f"latency {fault.latency_ms} ms" if fault.latency_ms else "",
        f"cut_stream_after {fault.cut_stream_after}" if fault.cut_stream_after is not None else "",
        "program_timeout" if fault.program_timeout else "",
        "program_incomplete" if fault.program_incomplete is not None else "",
        f"response_incomplete {fault.response_incomplete}" if fault.response_incomplete else "",
    ]
    return ", ".join(p for p in parts if p) or None


def _digest(items: list[Item]) -> str:
    data = json.dumps([dump(item) for item in items], sort_keys=True)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()
