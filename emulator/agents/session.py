"""One agent session: its document, and how a step or an input changes it, events out.

The document is what the records store keeps: the public `Session` fields, its turns and
items as the Agents API shows them, the calls it issued (pending, answered or abandoned), and a
*transcript*, the same conversation as Responses API items, which the harness plays a step at a
time (see `harness.py`). Every method that changes the session appends the events that tell it;
the harness stores the document before it publishes them.

How Responses items become agent session items:

    Responses item              agent session item
    program                     command_execution (the harness's `exec` tool; `command` is the
                                JavaScript; `cwd` null: a session without an environment has no
                                working directory; `duration_ms`, `exit_code`, `output` null
                                while it runs)
    program_output              command_execution done: status completed (exit_code 0) or
                                failed (exit_code 1), output = the result, duration_ms from the
                                start of the model step that began it to the one that ended it
    function_call (any caller)  function_call, arguments as an object; a pending required_action
    function_call_output        function_call_output (status completed or failed, output or error,
                                the other null)
    reasoning                   reasoning
    mcp_approval_request        a pending required_action `mcp_approval_request` (see `mcp.py`);
                                its answer goes in as `mcp_approval_response`
    mcp_call (a direct one)     mcp_call, arguments as an object
    message                     message (assistant, phase final_answer), streamed as text deltas;
                                one with phase commentary (a preamble, said before a call or a
                                program) is commentary too, and does not end the turn

Agent items have no program or caller types, so a program is the `exec` tool's command
execution and the calls it makes are plain function calls; the caller each call came with stays
in the transcript, which is what resumes the right program.

Every field the SDKs' types declare is sent, null when it has no value (openai-python marks them
optional; openai-go and openai-java require them): the session's `error`, a turn's
`completed_at`, `error` and `subagent_id`, a user message's `phase`, the `output_index` of the
`item.added` event of an item the client gave. A session stored by an earlier version gets them
when it is read (`upgrade`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.agents.mcp import approval_action, approval_response, mcp_call_item
from ptc_emulator.emulator.agents.wire import (
    ApprovalResult,
    CancelInput,
    EventsBody,
    InputMessage,
    McpApprovalResult,
    MessageInput,
    ToolResult,
    message_text_parts,
)
from ptc_emulator.emulator.errors import EmulatorError, InvalidRequest

__all__ = ["AgentSession", "Doc", "Event", "input_messages", "spend_control", "unknown_call", "upgrade", "zero_usage"]

Event = dict[str, Any]
Doc = dict[str, Any]


def zero_usage() -> dict[str, Any]:
    return {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }


def spend_control(limit: int | None) -> dict[str, Any]:
    """A session's `spend_control`, in USD cents: the limit as set (null: none), and what was spent,
    which is null ("unavailable", as the SDK allows): the emulator prices nothing and charges
    nothing, so a limit is kept and shown but never reached (no `budget_reached` status, no
    `agent.session.budget_reached` event, no `session_budget_exceeded` turn error)."""
    return {"consumed": None, "limit": limit}


TURN_NULLS = ("completed_at", "error", "subagent_id")
"""A turn's fields that are null until it ends (`completed_at`), fails (`error`), or always here
(`subagent_id`: subagents are refused)."""
ITEM_NULLS = {
    "message": ("phase",),  # null for user messages; an assistant's `final_answer` or `commentary`
    "command_execution": ("cwd", "duration_ms", "exit_code", "output"),
    "function_call_output": ("output", "error"),
}


def upgrade(doc: Doc) -> Doc:
    """A session document as this version writes it: what an earlier one left out, null (no
    session, turn or item of an earlier version had a value for these), in place."""
    session = doc["session"]
    session.setdefault("error", None)
    session.setdefault("spend_control", spend_control(None))
    agent = session.get("agent")
    if isinstance(agent, dict) and isinstance(agent.get("multi_agent"), dict):
        agent["multi_agent"].setdefault("max_concurrent_subagents", None)
    for turn in doc.get("turns", ()):
        for key in TURN_NULLS:
            turn.setdefault(key, None)
    for item in doc.get("items", ()):
        for key in ITEM_NULLS.get(item.get("type"), ()):
            item.setdefault(key, None)
    return doc


def _add_usage(total: dict[str, Any], usage: dict[str, Any] | None) -> None:
    if not usage:
        return
    total["input_tokens"] += usage.get("input_tokens", 0)
    total["output_tokens"] += usage.get("output_tokens", 0)
    total["total_tokens"] += usage.get("total_tokens", 0)
    total["input_tokens_details"]["cached_tokens"] += (usage.get("input_tokens_details") or {}).get("cached_tokens", 0)
    total["output_tokens_details"]["reasoning_tokens"] += (usage.get("output_tokens_details") or {}).get(
        "reasoning_tokens", 0
    )


def unknown_call(call_id: str) -> InvalidRequest:
    # The hosted wording, matched literally by the SDK's tool dispatcher (lib/streaming/agents).
    return messages.unknown_pending_call(call_id)


def input_messages(value: str | list[InputMessage] | None) -> list[InputMessage]:
    if value is None:
        return []
    if isinstance(value, str):
        if not value:
            return []
        return [InputMessage.model_validate({"role": "user", "content": [{"type": "input_text", "text": value}]})]
    return value


def _chunks(text: str, size: int = 32) -> list[str]:
    """Text deltas of a few words each, as a model streams them (at least one, maybe empty)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class AgentSession:
    """A session document with the rules of its turns."""

    def __init__(
        self, doc: Doc, ids: Callable[[str], str], clock: Callable[[], float], version: int | None = None
    ) -> None:
        self.doc = upgrade(doc)
        self.ids = ids
        self.clock = clock
        self.version = version
        """The stored record's version this document was read at (`Records.read`), grown by each
        save of it; None until it is first stored. A save is made at it: one that finds the
        record moved on (another replica's, or a delete) is refused (`Harness._save_and_publish`)."""

    @property
    def id(self) -> str:
        return self.doc["session"]["id"]  # type: ignore[no-any-return]

    @property
    def status(self) -> str:
        return self.doc["session"]["status"]  # type: ignore[no-any-return]

    def now(self) -> int:
        return int(self.clock())

    def object(self) -> dict[str, Any]:
        """The `Session` object, a copy. Its `agent.tools` are `AgentTool`s, a union without
        `tool_search` (which the agent's own, persisted tools do show): the session keeps it and
        plays it, and does not show it."""
        shown: dict[str, Any] = json.loads(json.dumps(self.doc["session"]))
        agent = shown.get("agent") or {}
        if isinstance(agent.get("tools"), list):
            agent["tools"] = [t for t in agent["tools"] if t.get("type") != "tool_search"]
        return shown

    def validate(self, body: EventsBody) -> list[ToolResult | MessageInput | CancelInput | McpApprovalResult]:
        """Every event checked before any is applied; duplicates of applied results dropped."""
        session = self.doc["session"]
        todo: list[ToolResult | MessageInput | CancelInput | McpApprovalResult] = []
        answered_here: dict[str, dict[str, Any]] = {}
        busy = session["status"] != "idle"
        running = str(session["status"])  # what the 400 says of the turn in progress
        for n, event in enumerate(body.events):
            if isinstance(event, McpApprovalResult):
                request = self.doc.get("approvals", {}).get(event.request_id)
                if request is None or request["state"] != "pending" or request["turn_id"] != self.doc["turn_id"]:
                    raise messages.unknown_pending_approval(event.request_id, f"events[{n}].request_id")
                if any(isinstance(e, McpApprovalResult) and e.request_id == event.request_id for e in todo):
                    continue  # the same request answered twice in one body: the first answer holds
                todo.append(event)
                continue
            if isinstance(event, ApprovalResult):
                raise messages.unknown_pending_approval(event.request_id, f"events[{n}].request_id")
            if isinstance(event, MessageInput):
                if busy:
                    raise messages.turn_in_progress(session["id"], running, f"events[{n}]")
                busy, running = True, f"started by events[{n}] of this request"
                todo.append(event)
                continue
            if isinstance(event, CancelInput):
                busy, running = False, "idle"
                todo.append(event)
                continue
            call = self.doc["calls"].get(event.call_id)
            if call is None or call["turn_id"] != event.turn_id or call["state"] == "abandoned":
                raise unknown_call(event.call_id)
            if event.success and event.error is not None:
                raise messages.successful_result_with_error(f"events[{n}].error")
            if not event.success and event.error is None:
                raise messages.failed_result_without_error(f"events[{n}].error")
            answer = event.answer()
            earlier = call["answer"] if call["state"] == "answered" else answered_here.get(event.call_id)
            if earlier is not None:
                if earlier == answer:
                    continue  # the same result again: already applied
                raise messages.result_already_submitted(event.call_id, event.turn_id, f"events[{n}]")
            answered_here[event.call_id] = answer
            todo.append(event)
        return todo

    def apply_result(self, event: ToolResult, events: list[Event]) -> bool:
        """Record one result; True when it was the turn's last pending one."""
        turn_id = event.turn_id
        call = self.doc["calls"][event.call_id]
        call["state"], call["answer"] = "answered", event.answer()
        item = self.doc["items"][call["item_index"]]
        item["status"] = "completed" if event.success else "failed"
        events.append(self._item_done(item, call["output_index"]))
        output_item: dict[str, Any] = {
            "id": self.ids("fco"),
            "type": "function_call_output",
            "call_id": event.call_id,
            "status": item["status"],
            "turn_id": turn_id,
        }
        if event.success:
            output_item["output"] = call["answer"]["output"] if call["answer"]["output"] is not None else ""
            output_item["error"] = None
        else:
            output_item["output"], output_item["error"] = None, event.error
        self.doc["items"].append(output_item)
        events.append(self._client_item_added(output_item))
        transcript_item: dict[str, Any] = {
            "type": "function_call_output",
            "call_id": event.call_id,
            "output": output_item["output"] if event.success else event.error or "",
        }
        if call["caller"] is not None:
            transcript_item["caller"] = call["caller"]
        if not event.success:
            transcript_item["status"] = "incomplete"  # the engine's mark of a failed call: the promise rejects
        self.doc["transcript"].append(transcript_item)
        session = self.doc["session"]
        session["required_actions"] = [a for a in session["required_actions"] if a.get("call_id") != event.call_id]
        return self._answered(events)

    def apply_approval(self, event: McpApprovalResult, events: list[Event]) -> bool:
        """Record the answer to an MCP approval request; True when nothing else is pending."""
        request = self.doc["approvals"][event.request_id]
        request["state"] = event.response.decision
        self.doc["transcript"].append(approval_response(request, event.response.decision))
        session = self.doc["session"]
        session["required_actions"] = [
            a for a in session["required_actions"] if a.get("request_id") != event.request_id
        ]
        return self._answered(events)

    def _answered(self, events: list[Event]) -> bool:
        """After an answer: still waiting (True when not), with the events that say which."""
        session = self.doc["session"]
        if session["required_actions"]:
            events.append(self.event("agent.session.requires_action", session=self.object()))
            return False
        session["status"] = "in_progress"
        turn = self.current_turn()
        turn["status"] = "in_progress"
        events.append(self.event("agent.session.in_progress", session=self.object()))
        events.append(self._turn_event("agent.session.turn.in_progress", turn))
        return True

    def begin_turn(self, messages: list[InputMessage], events: list[Event]) -> None:
        session, sid, now = self.doc["session"], self.doc["session"]["id"], self.now()
        turn = {
            "id": self.ids("turn"),
            "object": "agent.session.turn",
            "agent_id": session["agent"]["id"],
            "session_id": sid,
            "created_at": now,
            "started_at": now,
            "status": "in_progress",
            "usage": zero_usage(),
            **dict.fromkeys(TURN_NULLS),
        }
        self.doc["turns"].append(turn)
        self.doc["turn_id"], self.doc["output_index"] = turn["id"], 0
        session["status"], session["last_active_at"] = "in_progress", now
        events.append(self._turn_event("agent.session.turn.created", turn))
        events.append(self.event("agent.session.in_progress", session=self.object()))
        events.append(self._turn_event("agent.session.turn.in_progress", turn))
        for message in messages:
            content = message_text_parts(message)
            item = {
                "id": self.ids("msg"),
                "type": "message",
                "role": "user",
                "content": content,
                "phase": None,
                "status": "completed",
                "turn_id": turn["id"],
            }
            self.doc["items"].append(item)
            events.append(self._client_item_added(item))
            self.doc["transcript"].append({"type": "message", "role": "user", "content": content})

    def cancel(self, events: list[Event]) -> None:
        turn = self.current_turn() if self.doc["turn_id"] else None
        session = self.doc["session"]
        if turn is None:
            return
        for call in self.doc["calls"].values():
            if call["turn_id"] == turn["id"] and call["state"] == "pending":
                call["state"] = "abandoned"
        turn["status"], turn["completed_at"] = "cancelled", self.now()
        session["status"], session["required_actions"] = "idle", []
        self.doc["turn_id"] = None
        events.append(self._turn_event("agent.session.turn.cancelled", turn))
        events.append(self.event("agent.session.idle", session=self.object()))

    def apply_output(self, response: dict[str, Any], events: list[Event], *, began: float) -> bool:
        """Translate one step's output; True when the drive stops (input needed, or turn over).
        `began`: when the step started, on the session's clock (a program's start)."""
        turn = self.current_turn()
        turn_id = turn["id"]
        _add_usage(turn["usage"], response.get("usage"))
        _add_usage(self.doc["session"]["usage"], response.get("usage"))
        pending: list[dict[str, Any]] = []
        finished = False  # a final answer said
        said = acted = False  # any message; a program or a call (the agent works on)
        for out in response["output"]:
            self.doc["transcript"].append(out)
            kind = out["type"]
            if kind == "program_output":
                index = self.doc["programs"][out["call_id"]]
                item = self.doc["items"][index["item"]]
                ok = out["status"] == "completed"
                if out["result"]:  # the program's output as the command's, before the item is done
                    events.append(
                        self.event(
                            "agent.output.command_execution_output.delta",
                            delta=out["result"],
                            item_id=item["id"],
                            output_index=index["output_index"],
                            session_id=self.doc["session"]["id"],
                            turn_id=turn_id,
                        )
                    )
                started = index.get("began")  # None: begun before this version kept it
                duration = None if started is None else max(0, round((self.clock() - started) * 1000))
                item.update(
                    status="completed" if ok else "failed",
                    output=out["result"],
                    exit_code=0 if ok else 1,
                    duration_ms=duration,
                )
                events.append(self._item_done(item, index["output_index"]))
                continue
            output_index = self.doc["output_index"]
            self.doc["output_index"] += 1
            acted = acted or kind in ("program", "function_call", "mcp_approval_request", "mcp_call")
            if kind == "reasoning":
                summary = [{"type": "summary_text", "text": s["text"]} for s in out.get("summary", [])]
                item = {"id": out["id"], "type": "reasoning", "summary": summary, "status": "completed"}
                self._add(item, output_index, events, done=True)
            elif kind == "program":
                item = {
                    "id": out["id"],
                    "type": "command_execution",
                    "command": out["code"],
                    **dict.fromkeys(ITEM_NULLS["command_execution"]),
                    "status": "in_progress",
                }
                self.doc["programs"][out["call_id"]] = {
                    "item": len(self.doc["items"]),
                    "output_index": output_index,
                    "began": began,
                }
                self._add(item, output_index, events, done=False)
            elif kind == "function_call":
                item = {
                    "id": out.get("id") or self.ids("fc"),
                    "type": "function_call",
                    "call_id": out["call_id"],
                    "name": out["name"],
                    "arguments": json.loads(out["arguments"]),
                    "status": "in_progress",
                }
                self.doc["calls"][out["call_id"]] = {
                    "turn_id": turn_id,
                    "item_index": len(self.doc["items"]),
                    "output_index": output_index,
                    "caller": out.get("caller"),
                    "state": "pending",
                    "answer": None,
                }
                self._add(item, output_index, events, done=False)
                pending.append(
                    {
                        "type": "function_call",
                        "call_id": item["call_id"],
                        "name": item["name"],
                        "turn_id": turn_id,
                        "arguments": item["arguments"],
                    }
                )
            elif kind == "mcp_approval_request":
                request = {"request_id": out["id"], "turn_id": turn_id, "caller": out.get("caller"), "state": "pending"}
                self.doc.setdefault("approvals", {})[out["id"]] = request
                if self.doc["session"].get("review") == "auto_review":  # no manual approval: denied
                    request["state"] = "deny"
                    self.doc["transcript"].append(approval_response(request, "auto_review"))
                else:
                    pending.append(approval_action(out, turn_id))
            elif kind == "mcp_call":
                self._add(mcp_call_item(out), output_index, events, done=True)
            elif kind == "message":
                self._message(out, output_index, events)
                said = True
                finished = finished or out.get("phase") != "commentary"
        session = self.doc["session"]
        session["last_active_at"] = self.now()
        if pending:
            session["status"], session["required_actions"] = "requires_action", pending
            turn["status"] = "waiting"
            events.append(self.event("agent.session.requires_action", session=self.object()))
            return True
        if finished or (said and not acted):  # commentary (a preamble) alone: nothing goes on after it
            turn["status"], turn["completed_at"] = "completed", self.now()
            session["status"], self.doc["turn_id"] = "idle", None
            events.append(self._turn_event("agent.session.turn.completed", turn))
            events.append(self.event("agent.session.idle", session=self.object()))
            return True
        return False

    def _message(self, out: dict[str, Any], output_index: int, events: list[Event]) -> None:
        sid, turn_id = self.doc["session"]["id"], self.doc["turn_id"]
        texts = [p.get("text", p.get("refusal", "")) for p in out.get("content", [])]
        item_id = out.get("id") or self.ids("msg")
        phase = "commentary" if out.get("phase") == "commentary" else "final_answer"
        base = {"id": item_id, "type": "message", "role": "assistant", "phase": phase, "turn_id": turn_id}
        where = {"item_id": item_id, "output_index": output_index, "session_id": sid, "turn_id": turn_id}
        events.append(
            self.event(
                "agent.session.turn.item.added",
                item={**base, "content": [], "status": "in_progress"},
                output_index=output_index,
                session_id=sid,
                turn_id=turn_id,
            )
        )
        for n, text in enumerate(texts):
            part = {"type": "output_text", "text": ""}
            events.append(self.event("agent.session.turn.content_part.added", content_index=n, part=part, **where))
            for chunk in _chunks(text):
                events.append(self.event("agent.session.turn.output_text.delta", content_index=n, delta=chunk, **where))
            events.append(self.event("agent.session.turn.output_text.done", content_index=n, text=text, **where))
            done_part = {"type": "output_text", "text": text}
            events.append(self.event("agent.session.turn.content_part.done", content_index=n, part=done_part, **where))
        item = {**base, "content": [{"type": "output_text", "text": t} for t in texts], "status": "completed"}
        self.doc["items"].append(item)
        events.append(self._item_done(item, output_index))

    def _add(self, item: dict[str, Any], output_index: int, events: list[Event], *, done: bool) -> None:
        sid, turn_id = self.doc["session"]["id"], self.doc["turn_id"]
        item["turn_id"] = turn_id
        self.doc["items"].append(item)
        events.append(
            self.event(
                "agent.session.turn.item.added",
                item=dict(item),
                output_index=output_index,
                session_id=sid,
                turn_id=turn_id,
            )
        )
        if done:
            events.append(self._item_done(item, output_index))

    def fail_turn(self, message: str, code: str, error: EmulatorError, events: list[Event]) -> None:
        session, turn = self.doc["session"], self.current_turn()
        events.append(
            self.event(
                "error",
                error={"message": message, "type": error.type, "code": error.code, "param": error.param},
                session_id=session["id"],
            )
        )
        turn["status"], turn["completed_at"] = "failed", self.now()
        turn["error"] = {"code": code, "message": message}
        for call in self.doc["calls"].values():
            if call["turn_id"] == turn["id"] and call["state"] == "pending":
                call["state"] = "abandoned"
        session["status"], session["required_actions"], self.doc["turn_id"] = "idle", [], None
        events.append(self._turn_event("agent.session.turn.failed", turn))
        events.append(self.event("agent.session.idle", session=self.object()))

    def event(self, kind: str, **fields: Any) -> Event:
        return {"type": kind, "event_id": self.ids("event"), **json.loads(json.dumps(fields))}

    def _turn_event(self, kind: str, turn: dict[str, Any]) -> Event:
        fields: dict[str, Any] = {"session_id": self.doc["session"]["id"], "turn": turn, "turn_id": turn["id"]}
        if kind in ("agent.session.turn.completed", "agent.session.turn.failed", "agent.session.turn.cancelled"):
            fields["usage"] = turn["usage"]
        return self.event(kind, **fields)

    def _client_item_added(self, item: dict[str, Any]) -> Event:
        """The `item.added` event of an item the client gave (a user message, a tool result): no
        agent output, so its `output_index` is null."""
        return self.event(
            "agent.session.turn.item.added",
            item=item,
            output_index=None,
            session_id=self.doc["session"]["id"],
            turn_id=item["turn_id"],
        )

    def _item_done(self, item: dict[str, Any], output_index: int) -> Event:
        return self.event(
            "agent.session.turn.item.done",
            item=item,
            output_index=output_index,
            session_id=self.doc["session"]["id"],
            turn_id=item["turn_id"],
        )

    def current_turn(self) -> dict[str, Any]:
        turn_id = self.doc["turn_id"]
        turn: dict[str, Any] = next(t for t in self.doc["turns"] if t["id"] == turn_id)
        return turn
