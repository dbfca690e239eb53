"""The agent harness: runs Agents API sessions on the Responses engine, events out.

A session is one document in the records store (see `records.py`): the public `AgentSession`
fields, its turns and items as the Agents API shows them, and a *transcript*, the same
conversation as Responses API items. Each model step is one `store: false` Responses request
built from the transcript and played by the engine, so the scripted model (inline ```js blocks,
scenarios), fingerprints, deterministic replay and the contract checks are the Responses API's
own. The harness only translates:

    Responses item              agent session item
    program                     command_execution (the harness's `exec` tool; `command` is the
                                JavaScript, `output` the program's result)
    program_output              command_execution done: status completed (exit_code 0) or
                                failed (exit_code 1), output = the result
    function_call (any caller)  function_call, arguments as an object; a pending required_action
    function_call_output        function_call_output (status completed or failed, output or error)
    reasoning                   reasoning
    message                     message (assistant, phase final_answer), streamed as text deltas

Agent items have no program or caller types, so the program is the `exec` tool's command
execution and the calls it makes are plain function calls; the caller each call came with stays
in the transcript, which is what resumes the right program.

PTC is on unless `{"type": "programmatic_tool_calling", "enabled": false}` is among the agent's
tools. On, every function tool is callable directly and from programs; off, the step's request
has no programmatic_tool_calling tool, so scenario program turns do not match and an inline
program gets the engine's "not enabled" answer.

Durability: every change is written before its events are published, and before a 202; a tool
result is applied once (a second identical delivery is a no-op). A session whose turn was
running when the server stopped resumes on start: replaying the transcript gives the same
program state, because program runs are deterministic.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from .agents import (
    AgentCreate,
    AgentUpdate,
    ApprovalResult,
    CancelInput,
    EventsBody,
    InputMessage,
    MessageInput,
    SessionCreate,
    SessionUpdate,
    ToolResult,
    agent_object,
    check_agent,
    check_tools,
    message_text_parts,
    persisted_tools,
    ptc_enabled,
    session_agent,
)
from .engine import Engine
from .errors import EmulatorError, InvalidRequest, NotFound
from .records import Records
from .request import CreateRequest

__all__ = ["Harness", "Subscription"]

log = logging.getLogger(__name__)

AGENT = "agent"
SESSION = "agent.session"
MAX_STEPS = 64
"""Model steps one drive may take without waiting for the client: a loop guard."""

Event = dict[str, Any]
Doc = dict[str, Any]


def _zero_usage() -> dict[str, Any]:
    return {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }


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


def _unknown_call(call_id: str) -> InvalidRequest:
    # The hosted wording, matched literally by the SDK's tool dispatcher (lib/streaming/agents).
    return InvalidRequest(f"Unknown pending tool call: {call_id}", code="invalid_request_error")


def session_not_found(session_id: str) -> NotFound:
    return NotFound(f"No session found with id '{session_id}'.", param="session_id")


class Subscription:
    """A live view of one session's events: the current state first, then what happens next."""

    def __init__(self, harness: Harness, session_id: str, snapshot: Event | None) -> None:
        self.harness = harness
        self.session_id = session_id
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        if snapshot is not None:
            self.queue.put_nowait(snapshot)

    async def get(self, timeout: float) -> Event | None:
        """The next event; None when the session is gone or the server stops. TimeoutError when
        nothing happened for `timeout` seconds."""
        return await asyncio.wait_for(self.queue.get(), timeout)

    def close(self) -> None:
        self.harness._subscribers.get(self.session_id, set()).discard(self)


class Harness:
    def __init__(self, engine: Engine, records: Records) -> None:
        self.engine = engine
        self.records = records
        self.ids: Callable[[str], str] = engine.ids
        self.clock = engine.clock
        self._docs: dict[str, Doc] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._subscribers: dict[str, set[Subscription]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def now(self) -> int:
        return int(self.clock())

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Resume the turns that were running when the server last stopped."""
        for doc in self.records.all(SESSION):
            if doc["session"]["status"] == "in_progress" and doc["turn_id"] is not None:
                self._docs[doc["session"]["id"]] = doc
                self._schedule(doc["session"]["id"])

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for subscribers in self._subscribers.values():
            for sub in subscribers:
                sub.queue.put_nowait(None)
        self.records.close()

    # ---- agents -----------------------------------------------------------------------------

    def create_agent(self, body: AgentCreate) -> dict[str, Any]:
        check_agent(body)
        agent = agent_object(self.ids("agent"), body, now=self.now())
        self.records.put(AGENT, agent["id"], agent)
        return agent

    def agent(self, agent_id: str) -> dict[str, Any]:
        agent = self.records.get(AGENT, agent_id)
        if agent is None:
            raise NotFound(f"No agent found with id '{agent_id}'.", param="agent_id")
        return agent

    def update_agent(self, agent_id: str, body: AgentUpdate) -> dict[str, Any]:
        check_agent(body)
        agent = agent_object(agent_id, body, now=self.now(), base=self.agent(agent_id))
        self.records.put(AGENT, agent_id, agent)
        return agent

    def delete_agent(self, agent_id: str) -> dict[str, Any]:
        if not self.records.delete(AGENT, agent_id):
            raise NotFound(f"No agent found with id '{agent_id}'.", param="agent_id")
        return {"id": agent_id, "deleted": True, "object": "agent.deleted"}

    def list_agents(self) -> list[dict[str, Any]]:
        return self.records.all(AGENT)

    # ---- sessions ---------------------------------------------------------------------------

    def create_session(
        self, body: SessionCreate, scope: str | None, *, subscribe: bool = False
    ) -> tuple[Doc, Subscription | None]:
        environment = body.environment
        kind = environment.get("type")
        if kind != "none":
            if kind not in ("openai_hosted", "self_hosted"):
                raise InvalidRequest(
                    f"Invalid value: '{kind}'. Supported values are: 'none', 'openai_hosted' and 'self_hosted'.",
                    param="environment.type",
                    code="invalid_value",
                )
            raise InvalidRequest(
                f"Execution environments of type '{kind}' are not supported by the emulator: create the session "
                'with environment {"type": "none"} (programs and function tools need no environment).',
                param="environment.type",
                code="unsupported_parameter",
            )
        if set(environment) != {"type"}:
            extra = sorted(set(environment) - {"type"})[0]
            raise InvalidRequest(f"Unknown parameter: 'environment.{extra}'.", param=f"environment.{extra}")
        if body.vault_ids:
            raise InvalidRequest(
                "Vaults are not supported by the emulator.", param="vault_ids", code="unsupported_parameter"
            )
        saved = None
        if body.agent_id is not None:
            saved = self.agent(body.agent_id)
        elif body.agent is None or body.agent.model is None:
            raise InvalidRequest(
                "Missing required parameter: 'agent.model' (or give an 'agent_id').",
                param="agent.model",
                code="missing_required_parameter",
            )
        if body.agent is not None:
            check_agent(body.agent, "agent")
            if "metadata" in body.agent.model_fields_set or "name" in body.agent.model_fields_set:
                what = "metadata" if "metadata" in body.agent.model_fields_set else "name"
                raise InvalidRequest(f"Unknown parameter: 'agent.{what}'.", param=f"agent.{what}")
        messages = _input_messages(body.input)
        if not messages:
            raise InvalidRequest(
                "Missing required parameter: 'input' (required when environment.type is 'none').",
                param="input",
                code="missing_required_parameter",
            )
        now = self.now()
        agent_id = body.agent_id or self.ids("agent")
        session: dict[str, Any] = {
            "id": self.ids("sess"),
            "object": "agent.session",
            "agent": session_agent(agent_id, body.agent, saved),
            "created_at": now,
            "last_active_at": now,
            "environment": {"type": "none"},
            "metadata": dict(body.metadata or {}),
            "required_actions": [],
            "status": "idle",
            "usage": _zero_usage(),
            "vault_ids": [],
        }
        if body.prompt_cache_options is not None:
            session["prompt_cache_options"] = body.prompt_cache_options
        if body.review is not None and body.review != "none":
            session["review"] = body.review
        doc: Doc = {
            "session": session,
            "scope": scope,
            "turns": [],
            "items": [],
            "transcript": [],
            "calls": {},
            "programs": {},
            "idempotency": {},
            "turn_id": None,
            "output_index": 0,
        }
        sid = session["id"]
        self._docs[sid] = doc
        subscription = self._subscribe(sid, None) if subscribe else None
        events = [self._event("agent.session.created", session=self.session_object(doc))]
        self._begin_turn(doc, messages, events)
        self._save(doc)
        self._publish(sid, events)
        self._schedule(sid)
        return doc, subscription

    def session_doc(self, session_id: str) -> Doc:
        doc = self._docs.get(session_id)
        if doc is None:
            doc = self.records.get(SESSION, session_id)
            if doc is None:
                raise session_not_found(session_id)
            self._docs[session_id] = doc
        return doc

    def session(self, session_id: str) -> dict[str, Any]:
        return self.session_object(self.session_doc(session_id))

    def session_object(self, doc: Doc) -> dict[str, Any]:
        return json.loads(json.dumps(doc["session"]))  # type: ignore[no-any-return]

    def list_sessions(self, agent_id: str | None, metadata: dict[str, str]) -> list[dict[str, Any]]:
        found = []
        for doc in self.records.all(SESSION):
            session = doc["session"]
            if agent_id is not None and session["agent"]["id"] != agent_id:
                continue
            if any(session["metadata"].get(k) != v for k, v in metadata.items()):
                continue
            found.append(session)
        return found

    async def update_session(self, session_id: str, body: SessionUpdate) -> dict[str, Any]:
        async with self._lock(session_id):
            doc = self.session_doc(session_id)
            session = doc["session"]
            given = body.model_fields_set
            if body.agent is not None:
                agent = session["agent"]
                fields = body.agent.model_fields_set
                if "tools" in fields:
                    if body.agent.tools:
                        check_tools(body.agent.tools, "agent.tools")
                    agent["tools"] = persisted_tools(body.agent.tools)
                if "model" in fields and body.agent.model is not None:
                    agent["model"] = body.agent.model
                if "reasoning" in fields:
                    effort = body.agent.reasoning.effort if body.agent.reasoning else None
                    agent["reasoning"] = {**agent["reasoning"], "effort": effort}
                if "service_tier" in fields:
                    agent["service_tier"] = body.agent.service_tier or "auto"
            if "metadata" in given:
                session["metadata"] = dict(body.metadata or {})
            if "prompt_cache_options" in given:
                if body.prompt_cache_options is None:
                    session.pop("prompt_cache_options", None)
                else:
                    session["prompt_cache_options"] = body.prompt_cache_options
            if "review" in given:
                if body.review in (None, "none"):
                    session.pop("review", None)
                else:
                    session["review"] = body.review
            self._save(doc)
            return self.session_object(doc)

    async def delete_session(self, session_id: str) -> dict[str, Any]:
        async with self._lock(session_id):
            self.session_doc(session_id)
            self.records.delete(SESSION, session_id)
            self._docs.pop(session_id, None)
        for sub in self._subscribers.pop(session_id, set()):
            sub.queue.put_nowait(None)
        return {"id": session_id, "deleted": True, "object": "agent.session.deleted"}

    def items(self, session_id: str, turn_id: str | None = None) -> list[dict[str, Any]]:
        doc = self.session_doc(session_id)
        if turn_id is not None:
            self.turn(session_id, turn_id)
            return [i for i in doc["items"] if i["turn_id"] == turn_id]
        return list(doc["items"])

    def turns(self, session_id: str) -> list[dict[str, Any]]:
        return list(self.session_doc(session_id)["turns"])

    def turn(self, session_id: str, turn_id: str) -> dict[str, Any]:
        for turn in self.session_doc(session_id)["turns"]:
            if turn["id"] == turn_id:
                return turn  # type: ignore[no-any-return]
        raise NotFound(f"No turn found with id '{turn_id}' in session '{session_id}'.", param="turn_id")

    # ---- events in --------------------------------------------------------------------------

    async def submit(self, session_id: str, body: EventsBody, idempotency_key: str | None) -> None:
        """Validate and apply input events; on return the change is stored (the 202)."""
        async with self._lock(session_id):
            doc = self.session_doc(session_id)
            digest = hashlib.sha256(body.model_dump_json(by_alias=True).encode()).hexdigest()
            if idempotency_key is not None:
                seen = doc["idempotency"].get(idempotency_key)
                if seen == digest:
                    return
                if seen is not None:
                    raise InvalidRequest(
                        f"Idempotency-Key '{idempotency_key}' was already used with other events for this session.",
                        param="Idempotency-Key",
                        code="idempotency_key_reused",
                    )
            todo = self._validate(doc, body)
            events: list[Event] = []
            resume = False
            for event in todo:
                if isinstance(event, ToolResult):
                    resume = self._apply_result(doc, event, events) or resume
                elif isinstance(event, MessageInput):
                    self._begin_turn(doc, [m for m in event.input], events)
                    resume = True
                elif isinstance(event, CancelInput):
                    self._cancel(doc, events)
                    resume = False
            if idempotency_key is not None:
                doc["idempotency"][idempotency_key] = digest
            doc["session"]["last_active_at"] = self.now()
            self._save(doc)
            self._publish(session_id, events)
        if resume:
            self._schedule(session_id)

    def _validate(self, doc: Doc, body: EventsBody) -> list[ToolResult | MessageInput | CancelInput]:
        """Every event checked before any is applied; duplicates of applied results dropped."""
        session = doc["session"]
        todo: list[ToolResult | MessageInput | CancelInput] = []
        answered_here: dict[str, dict[str, Any]] = {}
        busy = session["status"] != "idle"
        for n, event in enumerate(body.events):
            if isinstance(event, ApprovalResult):
                raise InvalidRequest(
                    f"Unknown pending approval request: {event.request_id}", param=f"events[{n}].request_id"
                )
            if isinstance(event, MessageInput):
                if busy:
                    raise InvalidRequest(
                        f"Session '{session['id']}' has a turn in progress ({session['status']}): send new input "
                        "once it is idle, or cancel the turn with agent.session.input.cancel.",
                        param=f"events[{n}]",
                        code="active_turn_not_steerable",
                    )
                busy = True
                todo.append(event)
                continue
            if isinstance(event, CancelInput):
                busy = False
                todo.append(event)
                continue
            call = doc["calls"].get(event.call_id)
            if call is None or call["turn_id"] != event.turn_id or call["state"] == "abandoned":
                raise _unknown_call(event.call_id)
            if event.success and event.error is not None:
                raise InvalidRequest(
                    "A successful tool result carries 'output', not 'error'.", param=f"events[{n}].error"
                )
            if not event.success and event.error is None:
                raise InvalidRequest(
                    "Missing required parameter: 'error' (required when success is false).",
                    param=f"events[{n}].error",
                    code="missing_required_parameter",
                )
            answer = event.answer()
            earlier = call["answer"] if call["state"] == "answered" else answered_here.get(event.call_id)
            if earlier is not None:
                if earlier == answer:
                    continue  # the same result again: already applied
                raise InvalidRequest(
                    f"Tool call {event.call_id} of turn {event.turn_id} already has a different result; a result "
                    "is applied once and cannot be replaced.",
                    param=f"events[{n}]",
                    code="tool_result_already_submitted",
                )
            answered_here[event.call_id] = answer
            todo.append(event)
        return todo

    def _apply_result(self, doc: Doc, event: ToolResult, events: list[Event]) -> bool:
        """Record one result; True when it was the turn's last pending one."""
        sid, turn_id = doc["session"]["id"], event.turn_id
        call = doc["calls"][event.call_id]
        call["state"], call["answer"] = "answered", event.answer()
        item = doc["items"][call["item_index"]]
        item["status"] = "completed" if event.success else "failed"
        events.append(self._item_done(doc, item, call["output_index"]))
        output_item: dict[str, Any] = {
            "id": self.ids("fco"),
            "type": "function_call_output",
            "call_id": event.call_id,
            "status": item["status"],
            "turn_id": turn_id,
        }
        if event.success:
            output_item["output"] = call["answer"]["output"] if call["answer"]["output"] is not None else ""
        else:
            output_item["error"] = event.error
        doc["items"].append(output_item)
        events.append(self._event("agent.session.turn.item.added", item=output_item, session_id=sid, turn_id=turn_id))
        transcript_item: dict[str, Any] = {
            "type": "function_call_output",
            "call_id": event.call_id,
            "output": output_item.get("output", event.error or ""),
        }
        if call["caller"] is not None:
            transcript_item["caller"] = call["caller"]
        if not event.success:
            transcript_item["status"] = "incomplete"  # the engine's mark of a failed call: the promise rejects
        doc["transcript"].append(transcript_item)
        session = doc["session"]
        session["required_actions"] = [a for a in session["required_actions"] if a["call_id"] != event.call_id]
        if session["required_actions"]:
            events.append(self._event("agent.session.requires_action", session=self.session_object(doc)))
            return False
        session["status"] = "in_progress"
        turn = self._current_turn(doc)
        turn["status"] = "in_progress"
        events.append(self._event("agent.session.in_progress", session=self.session_object(doc)))
        events.append(self._turn_event(doc, "agent.session.turn.in_progress", turn))
        return True

    def _begin_turn(self, doc: Doc, messages: list[InputMessage], events: list[Event]) -> None:
        session, sid, now = doc["session"], doc["session"]["id"], self.now()
        turn = {
            "id": self.ids("turn"),
            "object": "agent.session.turn",
            "agent_id": session["agent"]["id"],
            "session_id": sid,
            "created_at": now,
            "started_at": now,
            "status": "in_progress",
            "usage": _zero_usage(),
        }
        doc["turns"].append(turn)
        doc["turn_id"], doc["output_index"] = turn["id"], 0
        session["status"], session["last_active_at"] = "in_progress", now
        events.append(self._turn_event(doc, "agent.session.turn.created", turn))
        events.append(self._event("agent.session.in_progress", session=self.session_object(doc)))
        events.append(self._turn_event(doc, "agent.session.turn.in_progress", turn))
        for message in messages:
            content = message_text_parts(message)
            item = {
                "id": self.ids("msg"),
                "type": "message",
                "role": "user",
                "content": content,
                "status": "completed",
                "turn_id": turn["id"],
            }
            doc["items"].append(item)
            events.append(self._event("agent.session.turn.item.added", item=item, session_id=sid, turn_id=turn["id"]))
            doc["transcript"].append({"type": "message", "role": "user", "content": content})

    def _cancel(self, doc: Doc, events: list[Event]) -> None:
        turn = self._current_turn(doc) if doc["turn_id"] else None
        session = doc["session"]
        if turn is None:
            return
        for call in doc["calls"].values():
            if call["turn_id"] == turn["id"] and call["state"] == "pending":
                call["state"] = "abandoned"
        turn["status"], turn["completed_at"] = "cancelled", self.now()
        session["status"], session["required_actions"] = "idle", []
        doc["turn_id"] = None
        events.append(self._turn_event(doc, "agent.session.turn.cancelled", turn))
        events.append(self._event("agent.session.idle", session=self.session_object(doc)))

    # ---- the model steps ----------------------------------------------------------------------

    def _schedule(self, session_id: str) -> None:
        task = asyncio.ensure_future(self._drive(session_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drive(self, session_id: str) -> None:
        async with self._lock(session_id):
            try:
                doc = self.session_doc(session_id)
            except NotFound:
                return  # deleted meanwhile
            for _ in range(MAX_STEPS):
                if doc["session"]["status"] != "in_progress" or doc["turn_id"] is None:
                    return
                events: list[Event] = []
                try:
                    response = await self._play(doc)
                except EmulatorError as e:
                    self._fail_turn(doc, e.message, "invalid_request" if e.status < 500 else "server_error", e, events)
                    done = True
                except asyncio.CancelledError:
                    raise
                except Exception:  # a failed turn, never a silently stuck session
                    log.exception("agent session %s: the turn failed", session_id)
                    error = EmulatorError("The server had an error while processing the turn.")
                    self._fail_turn(doc, error.message, "internal_error", error, events)
                    done = True
                else:
                    done = self._apply_output(doc, response, events)
                self._save(doc)
                self._publish(session_id, events)
                if done:
                    return
            events = []
            error = EmulatorError(f"The turn took more than {MAX_STEPS} model steps without waiting for input.")
            self._fail_turn(doc, error.message, "internal_error", error, events)
            self._save(doc)
            self._publish(session_id, events)

    async def _play(self, doc: Doc) -> dict[str, Any]:
        agent = doc["session"]["agent"]
        ptc = ptc_enabled(agent["tools"])
        tools: list[dict[str, Any]] = []
        for tool in agent["tools"]:
            if tool["type"] == "function":
                entry = {k: tool[k] for k in ("type", "name", "description", "parameters")}
                if ptc:
                    entry["allowed_callers"] = ["direct", "programmatic"]
                tools.append(entry)
        if ptc:
            tools.append({"type": "programmatic_tool_calling"})
        body: dict[str, Any] = {
            "model": agent["model"],
            "store": False,
            "input": doc["transcript"],
            "tools": tools,
            "include": ["reasoning.encrypted_content"],
        }
        if agent.get("instructions") is not None:
            body["instructions"] = agent["instructions"]
        request = CreateRequest.model_validate_json(json.dumps(body))
        prepared = self.engine.prepare(request, scope=doc["scope"])
        return await self.engine.complete(prepared)

    def _apply_output(self, doc: Doc, response: dict[str, Any], events: list[Event]) -> bool:
        """Translate one step's output; True when the drive stops (input needed, or turn over)."""
        turn = self._current_turn(doc)
        turn_id = turn["id"]
        _add_usage(turn["usage"], response.get("usage"))
        _add_usage(doc["session"]["usage"], response.get("usage"))
        pending: list[dict[str, Any]] = []
        finished = False
        for out in response["output"]:
            doc["transcript"].append(out)
            kind = out["type"]
            if kind == "program_output":
                index = doc["programs"][out["call_id"]]
                item = doc["items"][index["item"]]
                ok = out["status"] == "completed"
                item.update(status="completed" if ok else "failed", output=out["result"], exit_code=0 if ok else 1)
                events.append(self._item_done(doc, item, index["output_index"]))
                continue
            output_index = doc["output_index"]
            doc["output_index"] += 1
            if kind == "reasoning":
                summary = [{"type": "summary_text", "text": s["text"]} for s in out.get("summary", [])]
                item = {"id": out["id"], "type": "reasoning", "summary": summary, "status": "completed"}
                self._add(doc, item, output_index, events, done=True)
            elif kind == "program":
                item = {"id": out["id"], "type": "command_execution", "command": out["code"], "status": "in_progress"}
                doc["programs"][out["call_id"]] = {"item": len(doc["items"]), "output_index": output_index}
                self._add(doc, item, output_index, events, done=False)
            elif kind == "function_call":
                item = {
                    "id": out.get("id") or self.ids("fc"),
                    "type": "function_call",
                    "call_id": out["call_id"],
                    "name": out["name"],
                    "arguments": json.loads(out["arguments"]),
                    "status": "in_progress",
                }
                doc["calls"][out["call_id"]] = {
                    "turn_id": turn_id,
                    "item_index": len(doc["items"]),
                    "output_index": output_index,
                    "caller": out.get("caller"),
                    "state": "pending",
                    "answer": None,
                }
                self._add(doc, item, output_index, events, done=False)
                pending.append(
                    {
                        "type": "function_call",
                        "call_id": item["call_id"],
                        "name": item["name"],
                        "turn_id": turn_id,
                        "arguments": item["arguments"],
                    }
                )
            elif kind == "message":
                self._message(doc, out, output_index, events)
                finished = True
        session = doc["session"]
        session["last_active_at"] = self.now()
        if pending:
            session["status"], session["required_actions"] = "requires_action", pending
            turn["status"] = "waiting"
            events.append(self._event("agent.session.requires_action", session=self.session_object(doc)))
            return True
        if finished:
            turn["status"], turn["completed_at"] = "completed", self.now()
            session["status"], doc["turn_id"] = "idle", None
            events.append(self._turn_event(doc, "agent.session.turn.completed", turn))
            events.append(self._event("agent.session.idle", session=self.session_object(doc)))
            return True
        return False

    def _message(self, doc: Doc, out: dict[str, Any], output_index: int, events: list[Event]) -> None:
        sid, turn_id = doc["session"]["id"], doc["turn_id"]
        texts = [p.get("text", p.get("refusal", "")) for p in out.get("content", [])]
        item_id = out.get("id") or self.ids("msg")
        base = {"id": item_id, "type": "message", "role": "assistant", "phase": "final_answer", "turn_id": turn_id}
        where = {"item_id": item_id, "output_index": output_index, "session_id": sid, "turn_id": turn_id}
        events.append(
            self._event(
                "agent.session.turn.item.added",
                item={**base, "content": [], "status": "in_progress"},
                output_index=output_index,
                session_id=sid,
                turn_id=turn_id,
            )
        )
        for n, text in enumerate(texts):
            part = {"type": "output_text", "text": ""}
            events.append(self._event("agent.session.turn.content_part.added", content_index=n, part=part, **where))
            for chunk in _chunks(text):
                events.append(
                    self._event("agent.session.turn.output_text.delta", content_index=n, delta=chunk, **where)
                )
            events.append(self._event("agent.session.turn.output_text.done", content_index=n, text=text, **where))
            done_part = {"type": "output_text", "text": text}
            events.append(self._event("agent.session.turn.content_part.done", content_index=n, part=done_part, **where))
        item = {**base, "content": [{"type": "output_text", "text": t} for t in texts], "status": "completed"}
        doc["items"].append(item)
        events.append(self._item_done(doc, item, output_index))

    def _add(self, doc: Doc, item: dict[str, Any], output_index: int, events: list[Event], *, done: bool) -> None:
        sid, turn_id = doc["session"]["id"], doc["turn_id"]
        item["turn_id"] = turn_id
        doc["items"].append(item)
        events.append(
            self._event(
                "agent.session.turn.item.added",
                item=dict(item),
                output_index=output_index,
                session_id=sid,
                turn_id=turn_id,
            )
        )
        if done:
            events.append(self._item_done(doc, item, output_index))

    def _fail_turn(self, doc: Doc, message: str, code: str, error: EmulatorError, events: list[Event]) -> None:
        session, turn = doc["session"], self._current_turn(doc)
        events.append(
            self._event(
                "error",
                error={"message": message, "type": error.type, "code": error.code, "param": error.param},
                session_id=session["id"],
            )
        )
        turn["status"], turn["completed_at"] = "failed", self.now()
        turn["error"] = {"code": code, "message": message}
        for call in doc["calls"].values():
            if call["turn_id"] == turn["id"] and call["state"] == "pending":
                call["state"] = "abandoned"
        session["status"], session["required_actions"], doc["turn_id"] = "idle", [], None
        events.append(self._turn_event(doc, "agent.session.turn.failed", turn))
        events.append(self._event("agent.session.idle", session=self.session_object(doc)))

    # ---- events out -------------------------------------------------------------------------

    def subscribe(self, session_id: str) -> Subscription:
        """A subscription whose first event is the session's current state."""
        doc = self.session_doc(session_id)
        status = doc["session"]["status"]
        snapshot = self._event(f"agent.session.{status}", session=self.session_object(doc))
        return self._subscribe(session_id, snapshot)

    def _subscribe(self, session_id: str, snapshot: Event | None) -> Subscription:
        subscription = Subscription(self, session_id, snapshot)
        self._subscribers.setdefault(session_id, set()).add(subscription)
        return subscription

    def _publish(self, session_id: str, events: list[Event]) -> None:
        for sub in self._subscribers.get(session_id, set()):
            for event in events:
                sub.queue.put_nowait(event)

    def _event(self, kind: str, **fields: Any) -> Event:
        return {"type": kind, "event_id": self.ids("event"), **json.loads(json.dumps(fields))}

    def _turn_event(self, doc: Doc, kind: str, turn: dict[str, Any]) -> Event:
        fields: dict[str, Any] = {"session_id": doc["session"]["id"], "turn": turn, "turn_id": turn["id"]}
        if kind in ("agent.session.turn.completed", "agent.session.turn.failed", "agent.session.turn.cancelled"):
            fields["usage"] = turn["usage"]
        return self._event(kind, **fields)

    def _item_done(self, doc: Doc, item: dict[str, Any], output_index: int) -> Event:
        return self._event(
            "agent.session.turn.item.done",
            item=item,
            output_index=output_index,
            session_id=doc["session"]["id"],
            turn_id=item["turn_id"],
        )

    # ---- helpers ------------------------------------------------------------------------------

    def _current_turn(self, doc: Doc) -> dict[str, Any]:
        turn_id = doc["turn_id"]
        turn: dict[str, Any] = next(t for t in doc["turns"] if t["id"] == turn_id)
        return turn

    def _lock(self, session_id: str) -> asyncio.Lock:
        return self._locks.setdefault(session_id, asyncio.Lock())

    def _save(self, doc: Doc) -> None:
        self.records.put(SESSION, doc["session"]["id"], doc)


def _input_messages(value: str | list[InputMessage] | None) -> list[InputMessage]:
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
