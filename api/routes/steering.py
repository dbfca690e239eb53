"""`response.steer` in WebSocket mode: user input queued for the continuation of a response.

The hosted API lets a client steer a response while it is being generated: the input is queued,
the response ends at a safe boundary, and a successor response continues with it. The emulator's
responses are one scripted step each and finish quickly, so it never interrupts one; steering is
defined by what state the target response is in when the steer is read:

    target                                        answer
    --------------------------------------------  --------------------------------------------------
    not created on this socket                    response.steer.failed   response_not_found
    invalid steer (see below)                     response.steer.failed   invalid_input
    bound to a conversation, or compacting        response.steer.failed   steering_not_supported
    more than MAX_PENDING steers already queued   response.steer.failed   too_many_pending_steers
    still playing (e.g. a long program)           response.steer.accepted; when it finishes:
        finished waiting on client tool calls       response.steer.pending (after response.completed)
        finished with its final answer              an automatic successor response with the input
        ended otherwise (error, incomplete)         response.steer.failed   response_not_active
    finished, waiting on client tool calls        response.steer.accepted, response.steer.pending
    finished with its final answer                response.steer.failed   response_already_completed
    finished otherwise, or already continued      response.steer.failed   response_not_active

`response.steer.pending` lists, in `required_input`, a `function_call_output` stub
(`call_id`, `name`) for every function call of the target, and a `{type, call_id}` stub of the
answer's own type for every custom_tool_call, shell_call and apply_patch_call. The queued input stays on the
connection until the client sends the continuation, a `response.create` with
`previous_response_id` equal to the target: the queued input is then prepended, in submission
order, to that request's input (do not resend it). An automatic successor inherits the target's
settings and continues it with the queued input (by `previous_response_id` when the target was
stored, else by replaying its items). If the successor cannot be created, every queued steer
comes back in `response.steer.failed` with `successor_creation_failed` and its id.

A steer carries only `type`, `previous_response_id` and `input`; the input is a non-empty string
or a non-empty list of user messages (`type`, `role: "user"`, `content`), as the SDK documents.
The scripted model answers the latest user message, so a continuation is answered by the
scenario (or inline ```js block) that matches the steering text.

Steer events are numbered by a counter of the connection, from 0.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ptc_emulator.api.errors import json_kind
from ptc_emulator.emulator import messages
from ptc_emulator.emulator.tools.kinds import KINDS
from ptc_emulator.emulator.wire.events import Sequencer
from ptc_emulator.emulator.wire.items import InputItem, Message

__all__ = ["MAX_PENDING", "Steer", "Steering", "Target", "required_input", "unsteerable"]

MAX_PENDING = 8

Event = dict[str, Any]

_MESSAGE_KEYS = {"type", "role", "content"}
_STEER_KEYS = {"type", "previous_response_id", "input"}


@functools.cache
def _input_adapter() -> TypeAdapter[Any]:
    return TypeAdapter(InputItem)


@dataclass
class Target:
    """A response created on this socket, as steering sees it."""

    id: str
    stream_id: str | None
    final: dict[str, Any] | None = None
    """The finished response; None while it plays."""
    continued: bool = False
    """A later create on this socket continued it (named it as previous_response_id)."""
    unsteerable: str | None = None
    """Why the response takes no steering at all, if it does not (see `unsteerable`)."""


@dataclass
class Steer:
    id: str
    previous_response_id: str
    input: str | list[Any]
    """As the client sent it (returned as is in `response.steer.failed`)."""

    @property
    def items(self) -> list[dict[str, Any]]:
        """The input as input items."""
        if isinstance(self.input, str):
            return [{"type": "message", "role": "user", "content": self.input}]
        return list(self.input)


def required_input(final: dict[str, Any]) -> list[dict[str, Any]]:
    """Stubs for the tool outputs a finished response waits for: one per client-answered call, as
    its kind stubs it (`ToolKind.stub`)."""
    stubs = []
    for item in final.get("output", []):
        kind = KINDS.get(item.get("type"))
        stub = kind.stub(item) if kind is not None else None
        if stub is not None:
            stubs.append(stub)
    return stubs


@dataclass
class Steering:
    """The steers of one connection: validation, answers, and the queues per target response."""

    new_id: Callable[[], str]
    sequence: Sequencer = field(default_factory=Sequencer)
    queues: dict[str, list[Steer]] = field(default_factory=dict)

    def steer(self, frame: dict[str, Any], target: Target | None) -> list[Event]:
        """Answer one `response.steer` frame; accepted input is queued."""
        reference = frame.get("previous_response_id")
        steer_input = frame.get("input")
        stream_id = target.stream_id if target else None
        problem = _invalid(frame)
        if problem is not None:
            return [self._failed("invalid_input", problem, reference, steer_input, stream_id)]
        assert isinstance(reference, str) and isinstance(steer_input, str | list)
        if target is None:
            message = f"Response '{reference}' is not available on this connection."
            return [self._failed("response_not_found", message, reference, steer_input, None)]
        if target.unsteerable is not None:
            return [self._failed("steering_not_supported", target.unsteerable, reference, steer_input, stream_id)]
        queue = self.queues.setdefault(target.id, [])
        if len(queue) >= MAX_PENDING:
            message = f"Response '{target.id}' already has {MAX_PENDING} steers pending."
            return [self._failed("too_many_pending_steers", message, reference, steer_input, stream_id)]
        final = target.final
        if final is not None:
            refused = _refusal(target, final)
            if refused is not None:
                return [self._failed(refused[0], refused[1], reference, steer_input, stream_id)]
        steer = Steer(self.new_id(), target.id, steer_input)
        queue.append(steer)
        answers = [self._accepted(steer, stream_id)]
        if final is not None:
            answers.append(self._pending(steer, final, stream_id))
        return answers

    def finished(self, target: Target) -> tuple[list[Event], list[Steer]]:
        """After `target` finished: events for the steers queued while it played, and the steers
        an automatic successor should carry (empty when the client must continue it)."""
        queue = self.queues.get(target.id, [])
        final = target.final
        if not queue or final is None:
            return [], []
        if final.get("status") != "completed":
            self.queues.pop(target.id)
            message = f"Response '{target.id}' ended with status '{final.get('status')}'."
            return [self._lost(s, "response_not_active", message, target.stream_id) for s in queue], []
        if required_input(final):
            return [self._pending(s, final, target.stream_id) for s in queue], []
        return [], self.take(target.id)

    def take(self, response_id: str) -> list[Steer]:
        """The steers queued for a response, removed: its continuation carries them."""
        return self.queues.pop(response_id, [])

    def lost(
        self, steers: list[Steer], message: str, stream_id: str | None, *, code: str = "successor_creation_failed"
    ) -> list[Event]:
        """`response.steer.failed` for accepted steers that will not be committed (by default: their
        successor could not be created)."""
        return [self._lost(s, code, message, stream_id) for s in steers]

    # ---- events -------------------------------------------------------------------------------

    def _event(self, event: Event, stream_id: str | None) -> Event:
        numbered = self.sequence.number(event)
        return {**numbered, "stream_id": stream_id} if stream_id is not None else numbered

    def _accepted(self, steer: Steer, stream_id: str | None) -> Event:
        body = {"id": steer.id, "previous_response_id": steer.previous_response_id}
        return self._event({"type": "response.steer.accepted", "steer": body}, stream_id)

    def _pending(self, steer: Steer, final: dict[str, Any], stream_id: str | None) -> Event:
        event = {
            "type": "response.steer.pending",
            "reason": "waiting_for_required_input",
            "required_input": required_input(final),
            "steer": {"id": steer.id, "previous_response_id": steer.previous_response_id},
        }
        return self._event(event, stream_id)

    def _lost(self, steer: Steer, code: str, message: str, stream_id: str | None) -> Event:
        return self._failed(code, message, steer.previous_response_id, steer.input, stream_id, steer.id)

    def _failed(
        self,
        code: str,
        message: str,
        reference: Any,
        steer_input: Any,
        stream_id: str | None,
        steer_id: str | None = None,
    ) -> Event:
        steer: dict[str, Any] = {
            "input": steer_input if isinstance(steer_input, str | list) else "",
            "previous_response_id": reference if isinstance(reference, str) else "",
        }
        if steer_id is not None:
            steer["id"] = steer_id
        event = {
            "type": "response.steer.failed",
            "error": {"code": code, "message": message, "type": "invalid_request_error"},
            "steer": steer,
        }
        return self._event(event, stream_id)


def unsteerable(response_id: str, conversation: object, context_management: list[Any] | None) -> str | None:
    """The SDK's rule: "Responses bound to a conversation or using automatic compaction do not
    support steering." The message says which, for the response the create made."""
    if conversation is not None:
        return f"Response '{response_id}' is bound to a conversation; such responses do not support steering."
    if any(isinstance(e, dict) and e.get("type") == "compaction" for e in context_management or []):
        return f"Response '{response_id}' uses automatic compaction; such responses do not support steering."
    return None


def _refusal(target: Target, final: dict[str, Any]) -> tuple[str, str] | None:
    """Why a finished response takes no steering now, if it does not."""
    if target.continued or final.get("status") != "completed":
        return "response_not_active", f"Response '{target.id}' is no longer accepting steering input."
    if not required_input(final):
        return (
            "response_already_completed",
            f"Response '{target.id}' completed and is no longer accepting steering input; send a new "
            "response.create instead.",
        )
    return None


def _invalid(frame: dict[str, Any]) -> str | None:
    """What is wrong with a steer frame, if anything."""
    unknown = sorted(set(frame) - _STEER_KEYS)
    if unknown:
        return f"Unknown parameter: '{unknown[0]}' (a steer carries only previous_response_id and input)."
    reference = frame.get("previous_response_id")
    if reference is not None and not isinstance(reference, str):  # worded as a create's, over HTTP too
        return messages.steer_reference_wrong_type(json_kind(reference))
    if not reference:
        return "Missing required parameter: 'previous_response_id'."
    steer_input = frame.get("input")
    if isinstance(steer_input, str):
        return None if steer_input else "'input' must not be empty."
    if not isinstance(steer_input, list) or not steer_input:
        return "'input' must be a non-empty string or a non-empty list of user messages."
    for index, item in enumerate(steer_input):
        if not isinstance(item, dict) or item.get("role") != "user" or item.get("type", "message") != "message":
            return f"input[{index}]: steering accepts only messages with the 'user' role."
        extra = sorted(set(item) - _MESSAGE_KEYS)
        if extra:
            return f"input[{index}]: a steering message may carry only type, role and content, not '{extra[0]}'."
        try:
            parsed = _input_adapter().validate_python(item)
        except ValidationError as e:
            return f"input[{index}]: {e.errors()[0]['msg']}."
        if not isinstance(parsed, Message):
            return f"input[{index}]: steering accepts only messages."
    return None
