"""Recording: each conversation a recorder follows to its end becomes a scenario file in a
directory, added to the registry at once, so the same conversation replays offline.

One writer for both ways of recording: the recording proxy in front of a real service
(`serve --upstream URL --record DIR`, `api/proxy.py`) and a model upstream's `--record DIR`
(`model/fallback.py`). Each hands it the exchanges it saw, a create request's body and the final
response; the tape (`recording.Tape`) follows the conversations and `recording.scenario_from`
writes what is kept. What is written comes from the bodies only (the user message, the tool
names, the programs' code, the call arguments, the message text): never a header or a key.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ptc_emulator.emulator.model.scripted.recording import (
    Tape,
    empty_answer,
    file_name,
    finished,
    said_text,
    scenario_from,
    to_yaml,
    unrecordable,
    unreplayable,
)
from ptc_emulator.emulator.model.scripted.scenario import (
    MAX_SCENARIO_BYTES,
    Scenario,
    ScenarioError,
    ScenarioRegistry,
    load_scenario,
)

__all__ = ["Recorder"]

log = logging.getLogger(__name__)


_KEEP_WRITTEN = 2_000


def _digest(body: dict[str, Any]) -> str:
    """What a create asked, or what a response said (its status and output: a repeated
    identical terminal event is the same)."""
    said = [body.get("status"), body.get("output")] if body.get("object") == "response" else body
    return hashlib.sha256(json.dumps(said, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _text_bytes(value: Any) -> int:
    """The UTF-8 bytes of a scenario's strings: its YAML writes each of their characters at least
    once, so a scenario whose strings hold more than `MAX_SCENARIO_BYTES` makes a file the loader
    refuses; it is not turned into YAML to learn so (14 MB of text took seconds)."""
    if isinstance(value, str):
        return len(value.encode("utf-8", "replace"))
    if isinstance(value, dict):
        return sum(_text_bytes(k) + _text_bytes(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_text_bytes(v) for v in value)
    return 0


def _said_bytes(response: dict[str, Any]) -> int:
    """The UTF-8 bytes of a finished response's assistant messages' text (0 when it is not
    finished): its recording's message turn holds at least as many (`_text_bytes`)."""
    if not finished(response):
        return 0
    output = response.get("output") or ()
    return sum(
        len(said_text(item).encode("utf-8", "replace"))
        for item in output
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") == "assistant"
    )


def _said(scenario: dict[str, Any]) -> str:
    """A scenario's messages joined, as a client's `output_text` joins a response's messages."""
    turns = scenario.get("turns") or ()
    return "".join(str(t.get("message", "")) for t in turns if isinstance(t, dict) and "message" in t)


async def _whole(work: Any) -> Any:
    """`work`'s result, waited for whole even when the waiting task is cancelled (a client gone, a
    deadline), the cancellation raised after: a worker thread cannot be stopped, and the lock its
    caller holds must stay held while it runs. Before, a cancelled exchange let go of the lock while
    its thread still changed the tape, and the next exchange's thread changed it at the same time."""
    future = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            result = await asyncio.shield(future)
            break
        except asyncio.CancelledError as e:
            if future.done():
                raise
            cancelled = e
    if cancelled is not None:
        raise cancelled
    return result


class Recorder:
    """Writes the conversations that end into `directory` and adds them to `scenarios`."""

    def __init__(
        self, directory: Path, scenarios: ScenarioRegistry, keyed: Callable[[str], bool] | None = None
    ) -> None:
        self.directory = directory
        self.scenarios = scenarios
        self.keyed = keyed
        """Whether a text holds the upstream's key (`Redaction.within`; None: no key): a recording
        whose values hold it is not written. Each of an answer's texts was looked through as it
        passed, but a recording joins them (a message's parts, as a client joins them), and a key
        split across two parts would be whole in the file (or across two messages, which a
        client's `output_text` joins: the messages are looked through joined too)."""
        self.tape = Tape(keep=2_000)
        self.turn = asyncio.Lock()
        """The tape is followed in a worker thread, one exchange at a time, in the order they come."""
        self.ended: OrderedDict[int, tuple[object, Any, str, Path | None, str | None, str]] = OrderedDict()
        """id(answer) -> (the answer, its first end's response id and the digest of its output, the
        file written at it (None: none, or withdrawn), the scenario's scope and name), for the latest
        `_KEEP_WRITTEN` answers (an SSE stream, a socket's create): a later terminal event of the
        same answer that says otherwise (`response.completed`, then `response.failed`, or another
        response id, which the SDKs refuse as the response's identity changing) withdraws the
        recording, and is never recorded itself: which end the client took is not known. The
        answer (a token the proxy makes for it) is held, so its id is not another's."""
        directory.mkdir(parents=True, exist_ok=True)

    async def exchange(
        self, request: dict[str, Any], response: dict[str, Any], model: str | None, answer: object | None = None
    ) -> Path | None:
        """Note one exchange; write its conversation if it ended there (the path written). `answer`
        stands for the one answer (an SSE stream, a socket's create) this is an end of: given, a
        later end of it that says otherwise withdraws what this one recorded (`_ended_again`). The
        tape is followed (one exchange at a time, in the order they come), the scenario made, the
        file written, and read back as the scenario it must be, in worker threads: a long answer
        takes seconds to turn into YAML and back (900 KB of text: 3 s), and following one of
        100,000 messages and making its scenario 1.4 s on a loaded machine
        (bench/recording_join.py); no other request waits for it. The registry has it before this
        returns."""
        response_id = response.get("id")
        if answer is not None and id(answer) in self.ended:
            await self._ended_again(answer, response_id, response)
            return None
        first = await asyncio.to_thread(_digest, response) if answer is not None else ""
        if answer is not None:
            self._note_end(answer, (answer, response_id, first, None, None, ""))
        if (size := await asyncio.to_thread(_said_bytes, response)) > MAX_SCENARIO_BYTES:
            # Refused before the tape: following it, checking it and making its scenario ran under
            # the tape's one lock (4 answers of 100,000 messages held another client's create 1.2 s).
            log.warning(
                "a finished conversation was not recorded: its scenario would be larger than %d bytes"
                " (%d bytes of text in its last response)",
                MAX_SCENARIO_BYTES,
                size,
            )
            return None
        try:
            async with self.turn:
                finished = await _whole(asyncio.to_thread(self.tape.exchange, request, response))
            if finished is None:
                return None
            if (why := await asyncio.to_thread(unrecordable, response)) is not None or (
                why := await asyncio.to_thread(unreplayable, finished)
            ) is not None:
                log.warning("a finished conversation was not recorded: %s", why)
                return None
            scenario = await asyncio.to_thread(scenario_from, finished, model=model)
        except (ScenarioError, ValueError, TypeError, KeyError) as e:
            log.warning("a finished conversation could not be recorded: %s", e)
            return None
        if scenario is None:
            return None
        if (
            empty := await asyncio.to_thread(empty_answer, scenario)
        ) is not None:  # replayed, a completed answer with nothing in it
            log.warning(
                "a finished conversation was not recorded: its %s at turns.%d is empty (or only whitespace)",
                empty[1],
                empty[0],
            )
            return None
        written = await asyncio.to_thread(self._write, scenario)
        if written is None:
            return None
        loaded, path = written
        self.scenarios.add(loaded, str(path))
        log.info("recorded %s", path)
        for key in [k for k, end in self.ended.items() if end[3] == path]:
            self.ended[key] = (*self.ended[key][:3], None, None, "")  # the file is this answer's now
        if answer is not None:
            now = self.ended.get(id(answer))
            self._note_end(answer, (answer, response_id, first, path, loaded.scope, loaded.name))
            if now is not None and not now[2]:  # contradicted while it was written
                self.contradicted(answer, f"its response {str(response_id)[:80]} ended a second time, otherwise")
                return None
        return path

    async def refused(self, request: dict[str, Any], response: dict[str, Any]) -> None:
        """An answer an official SDK raised on ended (`contradicted` said why): nothing is recorded,
        but the tape notes its response as unclean, its items' ids, call ids and texts linked to it,
        so a `store: false` conversation that resends them (from a client whose SDK took the answer)
        is not recorded either. Before, the tape never saw it, and such a conversation was recorded
        whole, the response the other SDK raised on replayed as clean."""
        why = "an official SDK raises on its stream (the log said why as it passed)"
        try:
            async with self.turn:
                await _whole(asyncio.to_thread(self.tape.exchange, request, response, why))
        except (ValueError, TypeError, KeyError) as e:
            log.warning("a refused answer could not be noted: %s", e)

    def _note_end(self, answer: object, end: tuple[object, Any, str, Path | None, str | None, str]) -> None:
        self.ended[id(answer)] = end
        self.ended.move_to_end(id(answer))
        while len(self.ended) > _KEEP_WRITTEN:
            self.ended.popitem(last=False)

    async def _ended_again(self, answer: object, response_id: Any, response: dict[str, Any]) -> None:
        """An answer that ended before ends again. The same end repeated (the same response id,
        status and output) keeps what its first end recorded; another (a `failed` after its
        `completed`, another response id, another output): which one the client took is not
        known, so neither is kept (the file removed, and the scenario), nor recorded later."""
        _, first_id, first, _, _, _ = self.ended[id(answer)]
        if first and response_id == first_id and await asyncio.to_thread(_digest, response) == first:
            return
        self.contradicted(answer, f"its response {str(first_id)[:80]} ended a second time, otherwise")

    def contradicted(self, answer: object, why: str) -> None:
        """The answer says two things (it ended twice, otherwise; its response's id changed on the
        way, which the SDKs' stream refuses): what it recorded is withdrawn (the file removed, and
        the scenario), and none of its ends is recorded after."""
        end = self.ended.get(id(answer))
        path, scope, name = (end[3], end[4], end[5]) if end is not None else (None, None, "")
        self._note_end(answer, (answer, end[1] if end is not None else None, "", None, None, ""))
        if path is None:
            if end is None or end[2]:  # said once per answer
                log.warning("a finished conversation was not recorded: %s", why)
            return
        self.scenarios.remove(name, scope)
        with contextlib.suppress(OSError):
            path.unlink()
        log.warning("a recorded conversation was withdrawn (%s removed): %s", path, why)

    def _write(self, scenario: dict[str, Any]) -> tuple[Scenario, Path] | None:
        if (size := _text_bytes(scenario)) > MAX_SCENARIO_BYTES:
            log.warning(
                "a finished conversation was not recorded: its scenario would be larger than %d bytes"
                " (%d bytes of text)",
                MAX_SCENARIO_BYTES,
                size,
            )
            return None
        if self.keyed is not None and (
            self.keyed(json.dumps(scenario, ensure_ascii=False, default=str)) or self.keyed(_said(scenario))
        ):
            log.warning("a finished conversation was not recorded: it would hold the upstream's key")
            return None
        try:
            path = self.directory / file_name(scenario)
            text = to_yaml(scenario)
            loaded = load_scenario(text, default_name=path.stem)
        except (ScenarioError, ValueError, TypeError, KeyError) as e:
            log.warning("a finished conversation could not be recorded: %s", e)
            return None
        temporary = path.with_suffix(".yaml.tmp")
        try:
            temporary.write_text(text, encoding="utf-8")
            temporary.replace(path)
        except OSError as e:
            # A full disk, a folder gone or read-only: the conversation is not recorded, and the
            # client, whose answer this is, still gets it whole.
            log.warning("a finished conversation could not be written to %s: %s", path, e.strerror or e)
            with contextlib.suppress(OSError):
                temporary.unlink()
            return None
        return loaded, path
