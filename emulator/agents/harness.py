"""The agent harness: runs Agents API sessions on the Responses engine, events out.

A session is one document in the store's sessions part (`storage.Records`): the public `AgentSession`
fields, its turns and items as the Agents API shows them, and a *transcript*, the same
conversation as Responses API items. Each model step is one `store: false` Responses request
built from the transcript and played by the engine, so the scripted model (inline ```js blocks,
scenarios), fingerprints, deterministic replay and the contract checks are the Responses API's
own. The harness runs the steps, stores the sessions and publishes their events; `session.py`
holds a session's rules and how Responses items become agent session items.

PTC is on unless `{"type": "programmatic_tool_calling", "enabled": false}` is among the agent's
tools. On, every function tool is callable directly and from programs; off, the step's request
has no programmatic_tool_calling tool, so scenario program turns do not match and an inline
program gets the engine's "not enabled" answer.

Durability: every change is written before its events are published, and before a 202; a tool
result is applied once (a second identical delivery is a no-op). A session whose turn was
running when the server stopped resumes on start: replaying the transcript gives the same
program state, because program runs are deterministic. With a store replicas share, a turn is
run under the session's lease instead, and taken over by another replica if its own dies
(`ownership.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.agents.events import Fanout, Subscription
from ptc_emulator.emulator.agents.keys import IdempotencyKeys
from ptc_emulator.emulator.agents.mcp import McpApprovalResult
from ptc_emulator.emulator.agents.ownership import Ownership
from ptc_emulator.emulator.agents.session import AgentSession, Doc, Event, input_messages, spend_control, zero_usage
from ptc_emulator.emulator.agents.wire import (
    MAX_SESSION_TOOLS_BYTES,
    AgentCreate,
    AgentUpdate,
    CancelInput,
    EventsBody,
    MessageInput,
    SessionCreate,
    SessionUpdate,
    ToolResult,
    agent_object,
    check_agent,
    check_tools,
    persisted_tools,
    session_agent,
    session_tools,
    stored_agent,
)
from ptc_emulator.emulator.errors import EmulatorError, NotFound
from ptc_emulator.emulator.responses.engine import Engine, Refused
from ptc_emulator.emulator.storage import EventLog, Leases, Records, StoreUnavailable, StoreUnreached, visible
from ptc_emulator.emulator.wire.pages import listing
from ptc_emulator.emulator.wire.request import CreateRequest

__all__ = ["Harness", "Subscription"]

log = logging.getLogger(__name__)

AGENT = "agent"
SESSION = "agent.session"
ANY_SCOPE = object()
"""`load`'s scope for the harness's own work (resuming, driving a turn): every session."""
MAX_STEPS = 64
"""Model steps one drive may take without waiting for the client: a loop guard."""
CANCEL = "agent.session.cancel"
"""With a shared store, the records kind of a cancel asked of a session's running turn, `{turn_id}`
under the session's id: the replica that drives the turn looks for it while a step plays (the
cancel's own request waits for the session's lease, which the drive holds)."""
CANCEL_POLL_S = 0.5
"""With a shared store, how often a driving replica looks for a cancel asked on another one."""
SAVE_RETRY_S = 10.0
"""How long a drive's save is tried again while the database is away and nothing was sent."""
SAVE_RETRY_PAUSE_S = 0.25


class Harness:
    def __init__(
        self,
        engine: Engine,
        records: Records,
        *,
        leases: Leases | None = None,
        lease_s: float = 30.0,
        events: EventLog | None = None,
    ) -> None:
        self.engine = engine
        self.records = records
        self.ownership = Ownership(leases, lease_s) if leases is not None else None
        self._driving: set[str] = set()
        self.ids: Callable[[str], str] = engine.ids
        self.clock = engine.clock
        self._sessions: dict[str, AgentSession] = {}
        self._forgotten = 0
        """How many times a session was dropped from `_sessions` (deleted, or a change not kept):
        a read of the store begun before one is not kept there (`_loaded`)."""
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        """A lock per session while someone holds or awaits it, with how many do: dropped when
        the last one leaves, so a request naming an unknown id leaves nothing behind."""
        self.keys = IdempotencyKeys(records, self.now)
        self.fanout = Fanout(events)
        self._subscribers = self.fanout.subscribers
        self._tasks: set[asyncio.Task[None]] = set()
        self._cancel_asked: dict[str, str] = {}
        """Session id: the turn a cancel was asked of here, until the cancel is applied."""
        self._wakeups: dict[str, asyncio.Event] = {}
        """Session id: set when a cancel is asked while its drive plays a step."""

    def now(self) -> int:
        return int(self.clock())

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Resume the turns that were running when the server last stopped (shared: watch for the
        turns no replica holds)."""
        self.fanout.start()
        if self.ownership is not None:
            task = asyncio.ensure_future(self.ownership.watch(self._running, self._take))
            self._tasks.add(task)
            return
        for session_id in self._running():
            doc = self.records.get(SESSION, session_id)
            if doc is not None:
                self._sessions[session_id] = AgentSession(doc, self.ids, self.clock)
                self._schedule(session_id)

    def _running(self) -> list[str]:
        """The sessions whose turn is running, chosen by the store without reading a head or a
        document (every replica asks every half lease: reading every document, transcripts and
        all, took gigabytes; every head, metadata and all, stalled idle replicas for most of a
        second at 20,000 sessions)."""
        self._heads()
        return self.records.running(SESSION)

    def _heads(self) -> None:
        """The sessions an earlier version stored without a head given the one made from their
        document, once, and kept (`Records.put_head`): the store chooses sessions by their heads."""
        for session_id in self.records.unheaded(SESSION):
            doc = self.records.get(SESSION, session_id)
            if doc is None:
                continue  # deleted meanwhile
            try:
                self.records.put_head(SESSION, session_id, _head(doc))
            except StoreUnavailable:  # made again next time
                log.warning("agent session %s: its head was not kept", session_id)

    def _take(self, session_id: str) -> None:
        if session_id not in self._driving:
            log.info("agent session %s: its turn is taken over (no replica held it)", session_id)
            self._schedule(session_id)

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.fanout.end_all()

    # ---- agents -----------------------------------------------------------------------------

    def create_agent(self, body: AgentCreate, scope: str | None = None) -> dict[str, Any]:
        check_agent(body)
        agent = agent_object(self.ids("agent"), body, now=self.now())
        self.records.put(AGENT, agent["id"], _scoped(agent, scope))
        return agent

    def _agent_doc(self, agent_id: str, scope: str | None) -> dict[str, Any]:
        """The stored agent, if a request in `scope` sees it: one made in a scope is seen in that
        scope alone, as a session is; one made in none everywhere. Otherwise a 404."""
        doc = self.records.get(AGENT, agent_id)
        if doc is None or not visible(doc.get(_AGENT_SCOPE), scope):
            raise messages.agent_not_found(agent_id)
        return doc

    def agent(self, agent_id: str, scope: str | None = None) -> dict[str, Any]:
        return stored_agent(_unscoped(self._agent_doc(agent_id, scope)))

    def update_agent(self, agent_id: str, body: AgentUpdate, scope: str | None = None) -> dict[str, Any]:
        check_agent(body)
        doc = self._agent_doc(agent_id, scope)
        agent = agent_object(agent_id, body, now=self.now(), base=stored_agent(_unscoped(doc)))
        self.records.put(AGENT, agent_id, _scoped(agent, doc.get(_AGENT_SCOPE)))
        return agent

    def delete_agent(self, agent_id: str, scope: str | None = None) -> dict[str, Any]:
        self._agent_doc(agent_id, scope)
        if not self.records.delete(AGENT, agent_id):
            raise messages.agent_not_found(agent_id)
        return {"id": agent_id, "deleted": True, "object": "agent.deleted"}

    def list_agents(self, scope: str | None = None) -> list[dict[str, Any]]:
        return [
            stored_agent(_unscoped(doc)) for doc in self.records.all(AGENT) if visible(doc.get(_AGENT_SCOPE), scope)
        ]

    # ---- sessions ---------------------------------------------------------------------------

    async def create_session(
        self, body: SessionCreate, scope: str | None, *, subscribe: bool = False
    ) -> tuple[AgentSession, Subscription | None]:
        """Stored and its first events published, in a worker thread (the store may wait on a
        lock: on the loop, every client of the replica waited with it); all or nothing: the
        session and its events are written in one transaction, so a 503 leaves no session behind."""
        environment = body.environment
        kind = environment.get("type")
        if kind != "none":
            if kind not in ("openai_hosted", "self_hosted"):
                raise messages.environment_type_invalid(kind)
            raise messages.environment_unsupported(kind)
        if set(environment) != {"type"}:
            extra = sorted(set(environment) - {"type"})[0]
            raise messages.unknown_parameter(f"environment.{extra}")
        if body.vault_ids:
            raise messages.vaults_unsupported()
        saved = None
        if body.agent_id is not None:
            saved = await asyncio.to_thread(self.agent, body.agent_id, scope)
        elif body.agent is None or body.agent.model is None:
            raise messages.agent_model_missing()
        if body.agent is not None:
            check_agent(body.agent, "agent", MAX_SESSION_TOOLS_BYTES)
            if "metadata" in body.agent.model_fields_set or "name" in body.agent.model_fields_set:
                what = "metadata" if "metadata" in body.agent.model_fields_set else "name"
                raise messages.unknown_parameter(f"agent.{what}")
        said = input_messages(body.input)
        if not said:
            raise messages.session_input_missing()
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
            "error": None,  # never set: a failed turn leaves the session idle, not failed
            "required_actions": [],
            "spend_control": spend_control(body.spend_control.limit if body.spend_control else None),
            "status": "idle",
            "usage": zero_usage(),
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
            "turn_id": None,
            "output_index": 0,
        }
        sid = session["id"]
        made = AgentSession(doc, self.ids, self.clock)
        if self.ownership is None:  # shared: every read is of the store
            self._sessions[sid] = made
        events = [made.event("agent.session.created", session=made.object())]
        made.begin_turn(said, events)
        after = await asyncio.to_thread(self.fanout.position, sid) if subscribe else 0
        subscription = self.fanout.subscribe(sid, None, after) if subscribe else None
        try:
            await asyncio.to_thread(self._save_and_publish, made, events)
        except BaseException:
            self._sessions.pop(sid, None)
            if subscription is not None:
                subscription.close()
            raise
        self._schedule(sid)
        return made, subscription

    async def _loaded(self, session_id: str, scope: str | None | object = ANY_SCOPE) -> AgentSession:
        """The session, if it is visible in `scope`: a session made in a scope is seen only in that
        scope (its events, items, turns and pending calls with it); one made with no scope is seen
        in every scope. Otherwise, as for an id that does not exist, a 404.

        The store is read in a worker thread (a lock held on its table, or a very large document,
        held every client of the replica on the event loop); the session read is kept (one
        process) here, on the loop, unless one is kept already or a session was dropped while the
        thread read: a read begun before a delete never puts the deleted session back."""
        session = self._sessions.get(session_id) if self.ownership is None else None  # shared: as stored
        if session is None:
            forgotten = self._forgotten
            read = await asyncio.to_thread(self._read, session_id)
            if read is None:
                raise messages.session_not_found(session_id)
            session = read
            if self.ownership is None:
                kept = self._sessions.get(session_id)
                if kept is not None:
                    session = kept
                elif forgotten == self._forgotten:
                    self._sessions[session_id] = session
        if (scope is None or isinstance(scope, str)) and not _visible(session.doc, scope):
            raise messages.session_not_found(session_id)
        return session

    def _read(self, session_id: str) -> AgentSession | None:
        """The session as stored (in a worker thread) and the version it was read at, or None."""
        read = self.records.read(SESSION, session_id)
        if read is None:
            return None
        version, doc = read
        self.keys.migrate(session_id, doc)
        return AgentSession(doc, self.ids, self.clock, version)

    def _forget(self, session_id: str) -> None:
        """The session read from the store again the next time (deleted, or a change not kept)."""
        self._sessions.pop(session_id, None)
        self._forgotten += 1

    async def session(self, session_id: str, *, scope: str | None) -> dict[str, Any]:
        return (await self._loaded(session_id, scope)).object()

    async def list_sessions(
        self,
        agent_id: str | None,
        metadata: dict[str, str],
        *,
        scope: str | None,
        after: str | None = None,
        limit: int = 20,
        order: str = "desc",
    ) -> dict[str, Any]:
        """A page of the sessions (the list object), read and shown in a worker thread."""
        return await asyncio.to_thread(self._listed, agent_id, metadata, scope, after, limit, order)

    def _listed(
        self,
        agent_id: str | None,
        metadata: dict[str, str],
        scope: str | None,
        after: str | None,
        limit: int,
        order: str,
    ) -> dict[str, Any]:
        """Chosen and paged by the store, by the sessions' heads; only the page's documents are
        read (every session's, a `?limit=1` list read before, 8 MiB each at most; then every
        session's head, 9 KiB each at most)."""
        if after is not None and not after:
            raise messages.empty_string("after")
        self._heads()
        chosen = self.records.page(
            SESSION, scope=scope, agent_id=agent_id, metadata=metadata, after=after, limit=limit, order=order
        )
        if chosen is None:
            raise messages.no_listed_after("session", str(after))
        ids, has_more = chosen
        found = []
        for session_id in ids:
            doc = self.records.get(SESSION, session_id)
            if doc is not None:  # (deleted meanwhile: left out)
                found.append(AgentSession(doc, self.ids, self.clock).object())  # as a retrieve shows it
        return listing(found, has_more=has_more)

    async def update_session(self, session_id: str, body: SessionUpdate, *, scope: str | None) -> dict[str, Any]:
        """Applied to the session as stored, under its lock (and lease); applied again to the
        session as it then stands when the save is refused (`_save_and_publish`: another writer
        changed it meanwhile, this replica having stalled past its lease)."""
        await self._loaded(session_id, scope)  # an unknown or invisible id takes no lock
        while True:
            updated = await self._update_once(session_id, body, scope)
            if updated is not None:
                return updated

    async def _update_once(self, session_id: str, body: SessionUpdate, scope: str | None) -> dict[str, Any] | None:
        async with self._lock(session_id):
            loaded = await self._loaded(session_id, scope)
            session = loaded.doc["session"]
            given = body.model_fields_set
            if body.vault_ids:  # refused before anything changes; null or [] clears (there are none)
                raise messages.vaults_unsupported()
            if body.agent is not None and body.agent.tools:
                check_tools(body.agent.tools, "agent.tools", MAX_SESSION_TOOLS_BYTES)
            if body.agent is not None:
                agent = session["agent"]
                fields = body.agent.model_fields_set
                if "tools" in fields:
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
            if "spend_control" in given:  # omitted: the limit is kept; null or a null limit: removed
                limit = body.spend_control.limit if body.spend_control is not None else None
                session["spend_control"] = {**(session.get("spend_control") or spend_control(None)), "limit": limit}
            if "vault_ids" in given:
                session["vault_ids"] = []
            try:
                saved = await asyncio.to_thread(self._save, loaded)
            except BaseException:
                self._forget(session_id)  # (one process) read again as stored
                raise
            if not saved:
                self._refused(session_id, "its update is applied again to the session as it stands")
                return None
            return loaded.object()

    async def delete_session(self, session_id: str, *, scope: str | None) -> dict[str, Any]:
        await self._loaded(session_id, scope)  # an unknown or invisible id takes no lock
        async with self._lock(session_id):
            await self._loaded(session_id, scope)
            await asyncio.to_thread(self.records.delete, SESSION, session_id)
            self._forget(session_id)
        await asyncio.to_thread(self.fanout.log_end, session_id)
        self.fanout.end(session_id, logged=True)
        return {"id": session_id, "deleted": True, "object": "agent.session.deleted"}

    async def items(self, session_id: str, turn_id: str | None = None, *, scope: str | None) -> list[dict[str, Any]]:
        session = await self._loaded(session_id, scope)
        if turn_id is not None:
            _turn(session, turn_id)
            return [i for i in session.doc["items"] if i["turn_id"] == turn_id]
        return list(session.doc["items"])

    async def turns(self, session_id: str, *, scope: str | None) -> list[dict[str, Any]]:
        return list((await self._loaded(session_id, scope)).doc["turns"])

    async def turn(self, session_id: str, turn_id: str, *, scope: str | None) -> dict[str, Any]:
        return _turn(await self._loaded(session_id, scope), turn_id)

    # ---- events in --------------------------------------------------------------------------

    async def submit(
        self, session_id: str, body: EventsBody, idempotency_key: str | None, *, scope: str | None
    ) -> None:
        """Validate and apply input events; on return the change is stored (the 202).

        A cancel of a turn whose model step is playing is asked of the drive first (it holds the
        session's lock, and with replicas its lease, until the step ends): the drive drops the
        step and ends the turn `cancelled`, then this request goes on as usual."""
        unlocked = await self._loaded(session_id, scope)  # an unknown or invisible id takes no lock
        if any(isinstance(e, CancelInput) for e in body.events):
            await self._ask_cancel(unlocked, body, idempotency_key)
        while (resume := await self._submit_once(session_id, body, idempotency_key, scope)) is None:
            pass  # refused: checked and applied again to the session as it now stands
        if resume:
            self._schedule(session_id)

    async def _submit_once(
        self, session_id: str, body: EventsBody, idempotency_key: str | None, scope: str | None
    ) -> bool | None:
        """`submit`'s events applied under the session's lock (and lease): whether its turn is to
        be driven on; None, and nothing stored, when the save was refused (another writer changed
        the session meanwhile, this replica having stalled past its lease)."""
        async with self._lock(session_id):
            session = await self._loaded(session_id, scope)
            doc = session.doc
            digest = hashlib.sha256(body.model_dump_json(by_alias=True).encode()).hexdigest()
            if idempotency_key is not None:
                seen = await asyncio.to_thread(self.keys.seen, session_id, idempotency_key)
                if seen == digest:
                    return False
                if seen is not None:
                    raise messages.idempotency_key_reused(idempotency_key)
            todo = session.validate(body)
            events: list[Event] = []
            resume = False
            for event in todo:
                if isinstance(event, ToolResult):
                    resume = session.apply_result(event, events) or resume
                elif isinstance(event, MessageInput):
                    session.begin_turn(list(event.input), events)
                    resume = True
                elif isinstance(event, CancelInput):
                    session.cancel(events)
                    resume = False
                elif isinstance(event, McpApprovalResult):
                    resume = session.apply_approval(event, events) or resume
            doc["session"]["last_active_at"] = self.now()
            try:
                saved = await asyncio.to_thread(self._save_and_publish, session, events)
            except BaseException:
                self._forget(session_id)  # (one process) read again as stored
                raise
            if not saved:
                self._refused(session_id, "its events are applied again to the session as it stands")
                return None
            if idempotency_key is not None:
                try:
                    await asyncio.to_thread(self.keys.remember, session_id, idempotency_key, digest)
                except Exception:  # done and answered as done: the key is what is not kept
                    log.exception("agent session %s: its idempotency key was not kept", session_id)
            if any(isinstance(e, CancelInput) for e in todo):
                await self._cancel_answered(session_id)
        return resume

    # ---- the model steps ----------------------------------------------------------------------

    def _schedule(self, session_id: str) -> None:
        task = asyncio.ensure_future(self._drive(session_id))
        self._tasks.add(task)
        self._driving.add(session_id)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._driving.discard(session_id))

    async def _ask_cancel(self, session: AgentSession, body: EventsBody, idempotency_key: str | None) -> None:
        """A cancel asked of the turn whose step plays now (nothing when none does): the drive is
        woken here, and with replicas the ask stored for the replica that drives it. Not for a
        body that is refused (checked here as the session stands) or that was applied already
        (its idempotency key): a refused or repeated request changes nothing."""
        turn_id = session.doc["turn_id"]
        if session.status != "in_progress" or turn_id is None:
            return  # no step plays: the cancel is applied under the lock, as any event
        session.validate(body)
        if idempotency_key is not None:
            if await asyncio.to_thread(self.keys.seen, session.id, idempotency_key) is not None:
                return
        self._cancel_asked[session.id] = turn_id
        wakeup = self._wakeups.get(session.id)
        if wakeup is not None:
            wakeup.set()
        if self.ownership is not None:
            await asyncio.to_thread(self.records.put, CANCEL, session.id, {"turn_id": turn_id})

    async def _cancel_answered(self, session_id: str) -> None:
        """The ask of a cancel taken back once the cancel is applied (by the drive or by `submit`)."""
        self._cancel_asked.pop(session_id, None)
        if self.ownership is not None:
            await asyncio.to_thread(self.records.delete, CANCEL, session_id)

    async def _is_cancel_asked(self, session: AgentSession) -> bool | None:
        """Whether a cancel of the session's running turn is asked; None when the shared store
        could not be asked (the database away for a moment: not asked, as far as is known)."""
        turn_id = session.doc["turn_id"]
        if self._cancel_asked.get(session.id) == turn_id:
            return True
        if self.ownership is None:
            return False
        try:
            asked = await asyncio.to_thread(self.records.get, CANCEL, session.id)
        except StoreUnavailable:
            return None
        return asked is not None and asked.get("turn_id") == turn_id

    async def _step(self, session: AgentSession) -> dict[str, Any] | None:
        """One model step's response; None when a cancel of the turn is asked while it plays: the
        step is stopped and what it did is dropped (nothing of it was stored)."""
        wakeup = self._wakeups[session.id] = asyncio.Event()
        play = asyncio.ensure_future(self._play(session.doc))
        woken = asyncio.ensure_future(wakeup.wait())
        polling = self.ownership is not None
        try:
            while True:
                await asyncio.wait(
                    {play, woken}, timeout=CANCEL_POLL_S if polling else None, return_when="FIRST_COMPLETED"
                )
                if play.done():
                    return play.result()
                if wakeup.is_set() or polling:
                    asked = await self._is_cancel_asked(session)
                    if asked:
                        return None
                    if asked is None:
                        # The database away: no more looks for this step (each would wait for a
                        # connection the step's own save then needs as the database comes back);
                        # a cancel asked meanwhile is seen before the next step, or applied after.
                        polling = False
        finally:
            woken.cancel()
            if self._wakeups.get(session.id) is wakeup:
                del self._wakeups[session.id]
            if not play.done():
                play.cancel()
                await asyncio.wait([play])

    async def _drive(self, session_id: str) -> None:
        async with self._lock(session_id):
            try:
                session = await self._loaded(session_id)
            except NotFound:
                return  # deleted meanwhile
            for _ in range(MAX_STEPS):
                if session.status != "in_progress" or session.doc["turn_id"] is None:
                    return
                if await self._is_cancel_asked(session):  # between steps, or by a request that never came back
                    await self._cancelled(session)
                    return
                events: list[Event] = []
                began = self.clock()
                try:
                    response = await self._step(session)
                except EmulatorError as e:
                    session.fail_turn(e.message, "invalid_request" if e.status < 500 else "server_error", e, events)
                    done = True
                except asyncio.CancelledError:
                    raise
                except Exception:  # a failed turn, never a silently stuck session
                    log.exception("agent session %s: the turn failed", session_id)
                    error = messages.turn_failed()
                    session.fail_turn(error.message, "internal_error", error, events)
                    done = True
                else:
                    if response is None:  # a cancel asked while the step played: the step is dropped
                        await self._cancelled(session)
                        return
                    done = session.apply_output(response, events, began=began)
                if not await self._stored(session, events) or done:
                    return
            events = []
            error = messages.too_many_steps(MAX_STEPS)
            session.fail_turn(error.message, "internal_error", error, events)
            await self._stored(session, events)

    async def _cancelled(self, session: AgentSession) -> None:
        """The turn ended `cancelled` by its drive, as a cancel asked of it (`_ask_cancel`) says
        (a cancel refused with the save stays asked, of whoever drives the turn now)."""
        events: list[Event] = []
        session.cancel(events)
        if await self._stored(session, events):
            await self._cancel_answered(session.id)

    refresh_scenarios: Callable[[], Awaitable[None]] | None = None
    """With a store replicas share: what makes this replica's scenarios the ones the store holds
    (the app's `SharedScenarios.refresh`). A drive runs outside any request (a turn taken over
    from a replica that died, a step after the first), so each step refreshes them itself."""

    async def _play(self, doc: Doc) -> dict[str, Any]:
        if self.refresh_scenarios is not None:
            try:
                await self.refresh_scenarios()
            except StoreUnavailable as e:  # the database away: played with the scenarios held
                log.warning("agent session %s: its scenarios were not read again: %s", doc["session"]["id"], e)
        agent = doc["session"]["agent"]
        tools = session_tools(agent["tools"])
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
        # off the event loop when matching the transcript against the scenarios may cost more than there
        prepared = await self.engine.attempt_off_loop(request, scope=doc["scope"])
        if isinstance(prepared, Refused):
            raise prepared.error
        return await self.engine.complete(prepared)

    # ---- events out -------------------------------------------------------------------------

    async def subscribe(self, session_id: str, *, scope: str | None) -> Subscription:
        """A subscription whose first event is the session's current state (the store read in
        worker threads: the log's position first, then the session)."""
        position = await asyncio.to_thread(self.fanout.position, session_id)
        session = await self._loaded(session_id, scope)
        snapshot = session.event(f"agent.session.{session.status}", session=session.object())
        return self.fanout.subscribe(session_id, snapshot, position)

    def _publish(self, session_id: str, events: list[Event]) -> None:
        self.fanout.publish(session_id, list(events))

    # ---- helpers ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _lock(self, session_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(session_id, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[session_id] = (lock, users + 1)
        try:
            async with lock:
                if self.ownership is None:
                    yield
                else:
                    async with self.ownership.hold(session_id):
                        yield
        finally:
            _, users = self._locks[session_id]
            if users == 1:
                del self._locks[session_id]
            else:
                self._locks[session_id] = (lock, users - 1)

    async def _stored(self, session: AgentSession, events: list[Event]) -> bool:
        """A driven session's step saved and published in a worker thread; a cancel (the server
        closing) waits for that thread to end, so a step a client has seen is stored before the
        store closes, as when the save ran on the loop. With the database away and no connection
        had (nothing sent), the save is tried again for `SAVE_RETRY_S`: no client waits on a
        drive, and a database coming back is reconnected to a moment after it answers again.

        False when the save was refused: the session changed since the drive read it (this
        replica stalled past its lease, a paused VM say, and another took the turn over, or the
        session was deleted). The step is dropped, nothing of it written, and the drive stops."""
        tries_end = time.monotonic() + SAVE_RETRY_S
        while True:
            saving = asyncio.ensure_future(asyncio.to_thread(self._save_and_publish, session, events))
            try:
                if await asyncio.shield(saving):
                    return True
                self._refused(session.id, "its step is dropped and its drive stops")
                return False
            except asyncio.CancelledError:
                await asyncio.wait([saving])
                raise
            except StoreUnreached:
                if time.monotonic() >= tries_end:
                    raise
            await asyncio.sleep(SAVE_RETRY_PAUSE_S)

    def _save_and_publish(self, session: AgentSession, events: list[Event]) -> bool:
        """With a shared event log, the session and its events in one transaction of the store:
        both are written or neither is (before, the session was stored, then its events, and the
        session taken back if they failed, which could fail too). In one process, publishing
        puts the events in its subscribers' queues, which does not fail.

        Fenced: a session read from the store is saved only while the store still holds the
        version it was read at (`Records.put(expected=...)`), checked in the same transaction;
        False, and nothing written or published, when another writer moved it on or deleted it.
        Every writer of a session (a drive's step, a submit, an update) saves this way, under the
        session's lease: one that finds itself refused stalled past its lease while another
        replica wrote."""
        log_ = self.fanout.log
        if log_ is not None:
            saved = log_.put_and_append(
                SESSION, session.id, session.doc, session.id, list(events), _head(session.doc), expected=session.version
            )
            if saved:
                session.version = 1 if session.version is None else session.version + 1
            return saved
        if not self._save(session):
            return False
        self._publish(session.id, events)
        return True

    def _save(self, session: AgentSession) -> bool:
        """The session stored at the version it was read at (see `_save_and_publish`)."""
        if not self.records.put(SESSION, session.id, session.doc, _head(session.doc), expected=session.version):
            return False
        session.version = 1 if session.version is None else session.version + 1
        return True

    def _refused(self, session_id: str, then: str) -> None:
        """A save refused (`_save_and_publish`): said in the log, and (one process) the session read
        again as stored."""
        self._forget(session_id)
        log.warning(
            "agent session %s: a save was refused: the session changed since this replica read it (its "
            "lease expired while it stalled, and another replica wrote it, or it was deleted); %s",
            session_id,
            then,
        )


def _turn(session: AgentSession, turn_id: str) -> dict[str, Any]:
    for turn in session.doc["turns"]:
        if turn["id"] == turn_id:
            return turn  # type: ignore[no-any-return]
    raise messages.turn_not_found(turn_id, session.id)


def _head(doc: Doc) -> dict[str, Any]:
    """What is kept beside a session's document (`Records.heads`): what a list chooses sessions
    by, and whether its turn is running (a turn to take over)."""
    session = doc["session"]
    return {
        "scope": doc.get("scope"),
        "agent_id": session["agent"]["id"],
        "metadata": session["metadata"],
        "running": session["status"] == "in_progress" and doc["turn_id"] is not None,
    }


def _visible(doc: Doc, scope: str | None) -> bool:
    return visible(doc.get("scope"), scope)


_AGENT_SCOPE = "ptc_emulator_scope"
"""The key of a stored agent that holds the scope it was made in (absent: made in none); never
shown: `_unscoped` takes it off."""


def _scoped(agent: dict[str, Any], scope: str | None) -> dict[str, Any]:
    return agent if scope is None else {**agent, _AGENT_SCOPE: scope}


def _unscoped(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != _AGENT_SCOPE}
