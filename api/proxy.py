"""Recording: `serve --upstream URL --record DIR` proxies `/v1/responses` to a real service.

An ASGI middleware in front of the emulator's routes. For each request under `/v1/responses`
(HTTP, SSE and WebSocket) it decides where the conversation lives:

* upstream: the request goes to `URL` with the client's headers (its `Authorization` replaced by
  `Bearer $NAME` with `--upstream-api-key-env NAME`); the client gets the upstream's status,
  headers and body unchanged, streamed as they arrive, except that the key is taken out of them
  (`[redacted]`, emulator/model/upstream/redaction.py; a header whose name holds it, in any
  case, is dropped): an upstream that echoes the request's
  headers in an error, or the key in its text, never shows it to the client or the recording.
  With a key, also where the upstream writes it with any of JSON's escapes (a non-streamed body is
  then held whole, up to KEPT_BYTES, and an SSE stream passed on event by event, so that the text
  can be scanned first) or splits it across an item's streamed deltas (`_Deltas`; what a client
  joins, a response's output_text parts or a kind's deltas across parts and items, is refused when
  it holds the key; an event's `event:` name counts as its kind when its data has none; a streamed
  request's answer is read as SSE whatever its Content-Type, as the SDKs read it, and a held body
  that reads as SSE is refused when its joined deltas hold the key). It fails closed:
  with a key, an answer it cannot be sure of reading as the client will (compressed, not UTF-8
  text, too long to look through whole) is refused, not passed on (`_pass_on`, `binary`); so is
  one, whatever its Content-Type, whose bytes a JSON reader decodes (UTF-16, an encoded surrogate;
  or leniently, what is not UTF-8 replaced) to text holding the key, and text holding it nested
  (`Redaction.scan`: a string inside a string, as a call's arguments are; an escape after an
  escaped backslash), never rewritten into broken JSON.
  Each create and its final response go to the scenario recorder (`scripted/recorder.py`); a
  conversation that ends is written to DIR as a scenario file.
* local: the emulator plays it, as without `--upstream`.

`--record-mode all` sends every conversation upstream and re-records it. `new` (the default)
plays a conversation locally when a scenario matches its first request (a recording in DIR, a
`--fixtures` file, one added at run time; a recording server does not load the bundled demo
scenarios), and sends it upstream, recording it, otherwise. A conversation stays where it began:
a request continuing an upstream response (`previous_response_id`, or a `store: false` replay
carrying its item ids) goes upstream. `none` installs no proxy at all (see `app.create_app`).

Headers are never recorded; a scenario holds only what `recording.scenario_from` takes from the
bodies (the user message, tool names, code, call arguments, message text, reasoning summaries).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import os
import re
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from typing import Any

import httpx
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.websockets import WebSocket, WebSocketDisconnect

from ptc_emulator.api.bounds import SECONDS
from ptc_emulator.api.routes.responses import SCOPE_HEADER, SCOPE_METADATA_KEY
from ptc_emulator.api.settings import Settings
from ptc_emulator.api.streamrules import LIFECYCLE, ODD, Answer, dispatched
from ptc_emulator.api.streamrules import position as _position
from ptc_emulator.api.wsupstream import RELAY_YIELD_EVERY, SlicedConnection
from ptc_emulator.emulator import jsonpieces, messages
from ptc_emulator.emulator.caches import PROCESS, Memo
from ptc_emulator.emulator.errors import EmulatorError, StatusError
from ptc_emulator.emulator.model import (
    MatchRequest,
    Recorder,
    Redaction,
    ScenarioRegistry,
    items_of,
    match_context,
    user_text,
)
from ptc_emulator.emulator.wire.events import TERMINAL

__all__ = ["NOT_HEADER_SAFE", "ProxyMiddleware", "ProxySettingsError", "RecordingProxy", "header_safe"]

log = logging.getLogger("ptc_emulator.proxy")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_PREFIX = "/v1/responses"
_HOP = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "accept-encoding",
    }
)
# `date` and `server`: the emulator's own HTTP server sends its own (two of each otherwise).
_NOT_BACK = frozenset(
    {"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive", "date", "server"}
)
_KEEP_IDS = 200_000


NOT_HEADER_SAFE = (
    "the key holds a character an HTTP header cannot carry (it is sent as `Authorization: Bearer <key>`, "
    "which takes printable ASCII only)"
)
"""Said (after the variable's name, never the key) at startup, where every proxied request was a 500."""


def header_safe(key: str) -> bool:
    """Whether a key can go in an `Authorization` header as the HTTP client writes it (ASCII)."""
    return key.isascii() and key.isprintable()


class ProxySettingsError(ValueError):
    """Recording settings that cannot work (say, a missing API key variable)."""


class ProxyMiddleware:
    """Sends `/v1/responses` requests through `proxy`; everything else goes on to `app`."""

    def __init__(self, app: ASGIApp, proxy: RecordingProxy) -> None:
        self.app = app
        self.proxy = proxy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.proxy.serve(self.app, scope, receive, send)


class RecordingProxy:
    """The recording proxy's state: the upstream client, the recorder, the ids seen upstream."""

    def __init__(self, settings: Settings, scenarios: ScenarioRegistry) -> None:
        assert settings.upstream is not None and settings.record_dir is not None
        self.base = settings.upstream.rstrip("/")
        self.mode = settings.record_mode
        self.scenarios = scenarios
        """The emulator's registry (the recordings in DIR among them): what `new` asks whether a
        conversation is known. New recordings are added to it, so they replay at once."""
        self.recorder = Recorder(settings.record_dir, scenarios)
        self.api_key: str | None = None
        if settings.upstream_api_key_env and settings.api_key is None and not settings.allow_unguarded_upstream_key:
            raise ProxySettingsError(
                f"--upstream-api-key-env {settings.upstream_api_key_env}: a server that holds an upstream key must "
                "require a key of its own, or any local process could spend it: set PTC_EMULATOR_API_KEY (or "
                "--api-key), or accept that risk with --allow-unguarded-upstream-key"
            )
        if settings.upstream_api_key_env:
            key = os.environ.get(settings.upstream_api_key_env)
            if not key:
                raise ProxySettingsError(
                    f"--upstream-api-key-env {settings.upstream_api_key_env}: the variable is not set"
                )
            if not header_safe(key):
                raise ProxySettingsError(f"--upstream-api-key-env {settings.upstream_api_key_env}: {NOT_HEADER_SAFE}")
            self.api_key = key
        self.redaction = Redaction(self.api_key)
        """Takes the key out of all the upstream answers (docs/security.md)."""
        self.recorder.keyed = self.redaction.within if self.redaction.secret else None
        self.upstream_ids: OrderedDict[str, None] = OrderedDict()
        """Response and item ids the upstream made: a request that mentions one continues there."""
        self.deadline = settings.upstream_timeout_s
        """One exchange with the upstream, whole (`--upstream-timeout`): a read timeout alone
        (the time between two bytes) let an upstream that dripped its answer hold a client for ever."""
        if (problem := SECONDS.problem(self.deadline)) is not None:  # the CLI's check, for settings built in code
            raise ProxySettingsError(f"--upstream-timeout {self.deadline!r}: {problem}")
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(self.deadline, connect=min(30.0, self.deadline)))

    async def aclose(self) -> None:
        await self.client.aclose()

    # ---- routing --------------------------------------------------------------------------------

    async def serve(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] not in ("http", "websocket") or not (path == _PREFIX or path.startswith(_PREFIX + "/")):
            await app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await self._socket(scope, receive, send)
            return
        try:
            body = await Request(scope, receive).body()
        except HTTPException as e:  # the body size limit (`app._Edge`)
            await _error(send, e.status_code, str(e.detail), "invalid_request_error", None)
            return
        parsed = _json(body) if scope["method"] == "POST" and path == _PREFIX else None
        route = upstream_route(scope["method"], path)
        if route is None or not self._goes_upstream(scope, path, route, parsed):
            await app(scope, _replayed(body, receive), send)  # not a route this proxy serves: 404, 405
            return
        await self._forward_http(scope, route, body, parsed, receive, send)

    def _goes_upstream(self, scope: Scope, path: str, route: str, create: dict[str, Any] | None) -> bool:
        if path != _PREFIX:  # retrieve, delete, cancel, input items, input_tokens, compact
            first = route.split("/")[2]
            return first in ("input_tokens", "compact") or first in self.upstream_ids
        if create is None:
            return True  # not JSON: the upstream says what is wrong with it
        return self._create_goes_upstream(create, _headers(scope))

    def _create_goes_upstream(self, create: dict[str, Any], headers: dict[str, str]) -> bool:
        if self.mode == "all":
            return True
        previous = create.get("previous_response_id")
        if isinstance(previous, str):
            return previous in self.upstream_ids
        items = items_of(create.get("input"))
        if any(isinstance(item.get("id"), str) and item["id"] in self.upstream_ids for item in items):
            return True
        users = [item for item in items if (item.get("type") or "message") == "message" and item.get("role") == "user"]
        if not users:
            return True
        tools = create.get("tools") or []
        names = frozenset(
            t["name"]
            for t in tools
            if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("name"), str)
        )
        metadata = create.get("metadata") if isinstance(create.get("metadata"), dict) else {}
        scope = headers.get(SCOPE_HEADER) or (metadata or {}).get(SCOPE_METADATA_KEY)
        try:
            found = self.scenarios.match(
                MatchRequest(
                    text=user_text(users[-1]),
                    tools=names,
                    ptc=any(isinstance(t, dict) and t.get("type") == "programmatic_tool_calling" for t in tools),
                    model=str(create.get("model") or ""),
                    metadata={str(k): str(v) for k, v in (metadata or {}).items()},
                    scope=scope if isinstance(scope, str) else None,
                    context=match_context(create),
                ),
                count=False,  # the emulator counts it when it plays it
            )
        except EmulatorError:  # a matcher too costly for the request (on the event loop here, a few ms at most)
            return False  # the emulator answers it: the 400 naming it, as without the proxy
        return isinstance(found, list)  # no scenario matches: record it

    # ---- HTTP and SSE ---------------------------------------------------------------------------

    def _upstream_headers(self, scope: Scope) -> dict[str, str]:
        headers = {k: v for k, v in _headers(scope).items() if k not in _HOP and not k.startswith("sec-websocket")}
        if self.api_key is not None:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    async def _forward_http(
        self, scope: Scope, route: str, body: bytes, create: dict[str, Any] | None, receive: Receive, send: Send
    ) -> None:
        """`route`: the upstream path `upstream_route` rebuilt from the request's checked segments.

        The answer is asked for uncompressed and passed on as it comes off the wire (never
        unpacked here: a few MiB of gzip are GiBs); one that comes compressed all the same is
        passed on with its `Content-Encoding`, and not recorded. A client that goes away ends
        the upstream request (the upstream may stream, and bill, for minutes)."""
        path = route
        query = scope.get("query_string", b"").decode("latin-1")
        url = self.base + path + (f"?{query}" if query else "")
        headers = {**self._upstream_headers(scope), "accept-encoding": "identity"}
        request = self.client.build_request(scope["method"], url, headers=headers, content=body)
        passing = _Passing()
        exchange = asyncio.ensure_future(self._exchange(request, create, send, passing))
        gone = asyncio.ensure_future(_disconnected(receive))
        answered = left = False
        try:
            await asyncio.wait({exchange, gone}, timeout=self.deadline, return_when=asyncio.FIRST_COMPLETED)
            answered, left = exchange.done(), gone.done()  # as they were: the cancelling below ends both
        finally:
            for task in (exchange, gone):
                task.cancel()
            for task in (exchange, gone):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if left and not answered:  # before, tested after the cancelling: a client leaving was logged as the deadline
            log.info("the client went away: the upstream request to %s is ended", path)
        elif not answered or exchange.cancelled():  # the deadline
            log.warning("the upstream's answer to %s took longer than %g s: ended", path, self.deadline)
            await _unfinished(send, passing, messages.proxy_timeout(self.base, self.deadline))
        elif passing.broken is not None:
            await _unfinished(send, passing, passing.broken)

    async def _exchange(
        self, request: httpx.Request, create: dict[str, Any] | None, send: Send, passing: _Passing
    ) -> None:
        try:
            reply = await self.client.send(request, stream=True)
        except httpx.HTTPError as e:
            refused = messages.proxy_unreachable(self.base, type(e).__name__, self.redaction.text(str(e)))
            await _error(send, refused.status, refused.message, refused.type, refused.code)
            return
        try:
            await self._pass_on(reply, create, send, passing)
        finally:
            await reply.aclose()

    async def _pass_on(
        self, reply: httpx.Response, create: dict[str, Any] | None, send: Send, passing: _Passing
    ) -> None:
        """The upstream's answer to the client, noting its ids and recording it as it passes.

        With a key, an answer whose text the key cannot surely be taken out of is refused (the
        502 of `proxy_answer_unreadable`, or an SSE stream's `error` event once under way): a
        JSON, SSE or text one that declares a charset other than UTF-8, or whose bytes are not
        UTF-8 (or hold a NUL), or a whole body or one SSE event longer than KEPT_BYTES."""
        encoding = reply.headers.get("content-encoding", "identity").strip().lower()
        packed = encoding not in ("", "identity")
        keyed = self.api_key is not None
        if packed and keyed:  # the key could not be taken out of it
            said = self.redaction.text(
                reply.headers.get("content-encoding", "").strip()
            )  # as it came: lower-cased, the key is not found
            refused = messages.proxy_answer_packed(self.base, said)
            log.warning("%s", refused.message)
            await _error(send, refused.status, refused.message, refused.type, refused.code)
            return
        kind = reply.headers.get("content-type", "")
        textual = keyed and _textual(kind)
        if textual and _charset(kind) not in _UTF8:
            await self._refuse(send, passing, _OTHER_CHARSET)
            return
        start = {"type": "http.response.start", "status": reply.status_code, "headers": self._back(reply, packed)}

        async def begin() -> None:
            if not passing.started:
                await send(start)
                passing.started = True

        if packed:
            log.warning(
                "the upstream's answer is compressed (%s) although asked for none: passed on, not recorded", encoding
            )
        # What the response says is noted before the client has it all: a client that
        # continues the moment it has the response finds its ids known and its recording made.
        ok = reply.status_code == 200 and not packed
        sse = kind.split(";", 1)[0].strip().lower() == "text/event-stream" or (
            keyed and 200 <= reply.status_code < 300 and isinstance(create, dict) and create.get("stream") is True
        )  # with a key, a streamed request's answer is read as the SDK reads it: SSE, whatever its Content-Type
        events = passing.events = _SSE(blocks=keyed, redaction=self.redaction) if sse and not packed else None
        kept = _Kept()
        held: bytearray | None = bytearray() if keyed and events is None else None
        """With a key, a whole body is held (up to KEPT_BYTES) to look for the key in its decoded
        values before the client has any of it (its status and headers too, so that it can be refused)."""
        if held is None and not (keyed and events is not None):
            await begin()
        redacting = self.redaction.chunks()

        async def passed(chunk: bytes) -> bool:
            """False: the answer is refused (the client told why)."""
            nonlocal held
            if keyed and events is not None:
                events.feed(chunk)
                if events.overlong:
                    await self._refuse(send, passing, _TOO_LONG)
                    return False
                out: list[bytes] = []
                quiet: list[bytes] = []  # blocks with no data (blank lines, comments): scrubbed together

                async def told(block: bytes, readable: bool) -> None:
                    if not readable:
                        quiet.append(block)
                        return
                    await loose()
                    said = await self._block(block, events, create if ok else None)
                    if said is None:
                        raise _Refused(_NOT_UTF8)
                    out.append(said)

                async def loose() -> None:
                    if quiet:
                        block = b"".join(quiet)
                        quiet.clear()
                        said = await self._scrub(block) if block.strip(b"\n") else block
                        if said is None:
                            raise _Refused(_NOT_UTF8)
                        out.append(said)

                async def flush() -> None:
                    if out:
                        await begin()
                        body = b"".join(out)
                        out.clear()
                        await send({"type": "http.response.body", "body": body, "more_body": True})

                try:
                    for count, (block, readable) in enumerate(events.take(), 1):
                        await told(block, readable)
                        if count % _YIELD_EVERY == 0:  # many small events in one chunk: others are served between
                            await loose()
                            await flush()
                            await asyncio.sleep(0)
                    await loose()
                except _Refused as e:
                    await flush()  # what went before it is clean, and goes as it would have
                    await self._refuse(send, passing, e.why)
                    return False
                await flush()
                await asyncio.sleep(0)
                return True
            if held is not None:
                held += chunk
                if len(held) <= KEPT_BYTES:
                    return True
                if textual or _json_like(bytes(held[:64])):  # the key could come with JSON's escapes, which
                    await self._refuse(send, passing, _TOO_LONG)  # are looked for in a whole text only
                    return False
                log.warning("the upstream's answer is larger than %d bytes: passed on, not recorded", KEPT_BYTES)
                chunk, held = bytes(held), None  # passed on as it comes, the key in plain text taken out
                await begin()
            elif events is not None:
                for data in events.feed(chunk):
                    await self._data(data, events, create if ok else None)
            elif ok:
                kept.add(chunk)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            return True

        try:
            async for raw in reply.aiter_raw():
                if not await passed(redacting(raw)):
                    return
            if (last := redacting.flush()) and not await passed(last):
                return
            if events is not None and events.pending_cr:  # the stream's last CR ends a line: its event, maybe
                events.pending_cr = False
                if keyed:
                    if not await passed(b"\n"):
                        return
                else:
                    for data in events.feed(b"\n"):
                        await self._data(data, events, create if ok else None)
        except httpx.HTTPError as e:
            detail = self.redaction.text(str(e))
            log.warning("the upstream's answer broke off: %s", detail)
            passing.broken = messages.proxy_answer_cut(self.base, type(e).__name__, detail)
            return  # ended by `_unfinished`, never as if whole
        if keyed and events is not None:
            rest = events.rest()
            try:
                cleaned = await self._scrub(rest) if rest else b""
                answer = await _parsed(cleaned) if cleaned and _json_like(cleaned[:64]) else None
                if cleaned and isinstance(answer, dict) and await self._joined_keyed(answer, len(cleaned)):
                    raise _Refused(_JOINED)  # a whole answer to a streamed request: a client may parse it
            except _Refused as e:
                await self._refuse(send, passing, e.why)
                return
            if cleaned is None:
                await self._refuse(send, passing, _NOT_UTF8)
                return
            await begin()
            if held_back := events.deltas.flush():
                body = b"".join(_sse_block(told) for told, _ in held_back)
                await send({"type": "http.response.body", "body": body, "more_body": True})
            if cleaned:
                await send({"type": "http.response.body", "body": cleaned, "more_body": True})
        if held is not None:
            body = bytes(held)
            try:
                cleaned = await self._scrub(body)
                if cleaned is None and textual:
                    raise _Refused(_NOT_UTF8)
                if cleaned is None and await self._read_as_keyed(body):  # whatever its Content-Type
                    raise _Refused(_READ_AS_JSON)
                if _sse_like(body) and await self._sse_keyed(body):  # a client may read it as SSE
                    raise _Refused(_SSE_KEYED)
                body = body if cleaned is None else cleaned
                response = await _parsed(body)
                if isinstance(response, dict) and await self._joined_keyed(response, len(body)):
                    raise _Refused(_JOINED)
            except _Refused as e:
                await self._refuse(send, passing, e.why)
                return
            await begin()
            await send({"type": "http.response.body", "body": body, "more_body": True})
            if ok:
                await self._event({"type": "response.completed", "response": response}, create)
        elif events is None and ok and kept.whole:
            response = await _parsed(bytes(kept.data))
            await self._event({"type": "response.completed", "response": response}, create)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _back(self, reply: httpx.Response, packed: bool) -> list[tuple[bytes, bytes]]:
        """The upstream's headers as the client gets them: as their bytes came (a value need not
        be Latin-1 text: UTF-8 bytes were decoded, and could not be encoded again, a 500), the key
        taken out of each value; a header whose name holds the key (in any case) is dropped."""
        secret = (self.api_key or "").lower()
        headers = []
        for raw_name, value in reply.headers.raw:
            name = raw_name.lower()
            text = name.decode("latin-1")
            if text in _NOT_BACK and not (packed and text == "content-encoding"):
                continue
            if text.startswith("access-control-"):
                continue
            if secret and (secret in text or secret.encode("utf-8") in name):
                continue
            headers.append((name, self._header_value(value)))
        return headers

    def _header_value(self, value: bytes) -> bytes:
        if not self.redaction.secret:
            return value
        redacting = self.redaction.chunks()
        value = redacting(value) + redacting.flush()
        text = value.decode("latin-1")  # every byte a character: the `\u` escapes are ASCII
        cleaned = self.redaction.text(text)
        return value if cleaned == text else cleaned.encode("latin-1")

    async def _scrub(self, data: bytes) -> bytes | None:
        """`_scrubbed`, in a worker thread for a long text (a regular expression over 12 MB took
        0.1 s of the event loop; the decoded values walked, seconds)."""
        if len(data) >= _OFF_LOOP_BYTES:
            return await asyncio.to_thread(_scrubbed, self.redaction, data)
        return _scrubbed(self.redaction, data)

    async def _read_as_keyed(self, data: bytes) -> bool:
        """Whether `data`, read as `json.loads` reads bytes (UTF-16 and UTF-32 found by their
        byte pattern, encoded surrogates taken), holds the key in any form (`Redaction.within`)."""
        if len(data) >= _OFF_LOOP_BYTES:
            return await asyncio.to_thread(_read_as_keyed, self.redaction, data)
        return _read_as_keyed(self.redaction, data)

    async def _sse_keyed(self, data: bytes) -> bool:
        """Whether `data`, read as an SSE stream (whatever its Content-Type), holds the key in an
        item's deltas joined (`_sse_keyed`)."""
        if len(data) >= _OFF_LOOP_BYTES:
            return await asyncio.to_thread(_sse_keyed, self.redaction, data)
        return _sse_keyed(self.redaction, data)

    async def _joined_keyed(self, answer: dict[str, Any], size: int) -> bool:
        """`_joined_keyed`, in a worker thread for a long answer (many parts to join)."""
        if size >= _OFF_LOOP_BYTES:
            return await asyncio.to_thread(_joined_keyed, self.redaction, answer)
        return _joined_keyed(self.redaction, answer)

    async def _refuse(self, send: Send, passing: _Passing, why: str) -> None:
        """An answer refused (`proxy_answer_unreadable`): the 502 before its status went, an SSE
        stream's `error` event after (`_forward_http` sends it)."""
        refused = messages.proxy_answer_unreadable(self.base, why)
        log.warning("%s", refused.message)
        if not passing.started:
            await _error(send, refused.status, refused.message, refused.type, refused.code)
            passing.started, passing.events = True, None
            return
        passing.broken = refused

    async def _block(self, block: bytes, events: _SSE, create: dict[str, Any] | None) -> bytes | None:
        """One SSE event's bytes as the client gets them (with a key): noted and recorded as
        `_pass_on` does, the key taken out of its text in any form JSON writes it (None: the
        event is not UTF-8 text, and the stream is refused)."""
        cleaned = await self._scrub(block)
        if cleaned is None:
            return None
        block = cleaned
        lines = block[:-2] if block.endswith(b"\n\n") else block
        data = await _read_data(lines)
        if not data:
            if dispatched(lines) and not events.answer.ended:
                self._undecodable(data, events.answer)
            return block
        event = await _parsed(data)
        if not isinstance(event, dict):
            if not events.answer.ended:
                self._undecodable(data, events.answer)
            return block
        if await self._joined_keyed(event, len(data)):
            raise _Refused(_JOINED)
        if not events.answer.ended:  # after `data: [DONE]`, no SDK reads it: no part of the answer
            events.note(event)
            await self._event(event, create, events.answer)
        named = _as_named(event, _event_name(block))
        return b"".join([block if same else await _sse_written(told) for told, same in events.deltas.feed(named)])

    async def _data(self, data: bytes, events: _SSE, create: dict[str, Any] | None) -> None:
        """One SSE event's data (without a key): noted and recorded (`_event`), or, when it is not a
        JSON object, the answer made unrecordable (`_undecodable`)."""
        if events.answer.ended:
            return  # after `data: [DONE]`: no client reads it (it is no part of the answer)
        event = await _parsed(data) if data else None
        if isinstance(event, dict):
            events.note(event)
            await self._event(event, create, events.answer)
        else:
            self._undecodable(data, events.answer)

    def _undecodable(self, data: bytes, answer: Answer) -> None:
        """An SSE event whose data is not a JSON object (but the `[DONE]` sentinel, which ends what
        the SDKs read: the events after it are no part of the answer): both SDKs' stream raises on
        it ("malformed server-sent event JSON", `JSONDecodeError`), so the answer is not recorded
        (before, the event was skipped and the answer recorded, and replayed green). So with an
        event of empty data (`data:` with nothing, an `event:` line alone), which both SDKs read."""
        if data == _SENTINEL:
            answer.ended = True
            return
        if answer.changed:
            return
        answer.changed = True
        said = f"is not a JSON object: {_head(data)}" if data else "is empty (the SDKs parse it as JSON, and raise)"
        self.recorder.contradicted(answer, f"its stream has an event whose data {said}")

    async def _event(self, event: dict[str, Any], create: dict[str, Any] | None, answer: object = None) -> None:
        """Note the ids of a response event; record the exchange its terminal event ends (`answer`:
        the stream's, whose every terminal event after its first, whatever its response id, withdraws
        the recording made at the first unless it repeats it)."""
        if isinstance(answer, Answer) and not answer.changed and (why := answer.broken(event)) is not None:
            answer.changed = True  # the SDKs' stream refuses it: the client had an error, not this answer
            self.recorder.contradicted(answer, f"its stream breaks the output items' order: {why}")
        response = event.get("response")
        if not isinstance(response, dict) or response.get("object") != "response":
            return
        await self._note_ids(response)
        if isinstance(answer, Answer) and event.get("type") in LIFECYCLE:
            if answer.identity is None:
                answer.identity = ("id", response.get("id"))
            elif answer.identity != ("id", response.get("id")) and not answer.changed:
                answer.changed = True  # the SDKs' stream refuses it: "Lifecycle response identity changed"
                self.recorder.contradicted(answer, "its stream's response id changed on the way")
        if create is not None and event.get("type") in TERMINAL:
            if isinstance(answer, Answer) and answer.changed:
                await self.recorder.refused(create, response)  # not recorded; the tape links it as unclean
            else:
                await self._record(create, response, answer)

    # ---- WebSocket ----------------------------------------------------------------------------------

    async def _socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        websocket = WebSocket(scope, receive, send)
        first: str | None = None
        if self.mode != "all":
            await websocket.accept()
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            first = message.get("text") or (message.get("bytes") or b"").decode("utf-8", "replace")
            frame = _json(first.encode("utf-8"))
            if (
                isinstance(frame, dict)
                and frame.get("type") == "response.create"
                and not self._create_goes_upstream(frame, _headers(scope))
            ):
                await self._local_socket(websocket, first)
                return
        await self._upstream_socket(websocket, scope, first)

    async def _local_socket(self, websocket: WebSocket, first: str) -> None:
        from ptc_emulator.api.routes.websocket import Session

        engine = websocket.app.state.emulator.engine
        session = Session(websocket, engine)
        await session._dispatch(first)
        await session.serve()

    async def _upstream_socket(self, websocket: WebSocket, scope: Scope, first: str | None) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

        url = (
            "ws" + self.base[len("http") :] + "/responses" if self.base.startswith("http") else self.base + "/responses"
        )
        query = scope.get("query_string", b"").decode("latin-1")
        if query:
            url += f"?{query}"
        try:
            upstream = await connect(
                url,
                additional_headers=self._upstream_headers(scope),
                max_size=UPSTREAM_FRAME_BYTES,
                open_timeout=30,
                create_connection=SlicedConnection,  # a read fed in slices, one a step of the loop
                compression=None,  # nothing to inflate on the loop (`api/wsupstream.py`)
            )
        except (TimeoutError, OSError, InvalidStatus, WebSocketException) as e:
            # An error event, then 1014 (bad gateway): not a code the SDK reconnects on.
            status = e.response.status_code if isinstance(e, InvalidStatus) else 502
            detail = self.redaction.text(str(e))
            error = messages.proxy_socket_refused(self.base, type(e).__name__, detail, status).body()["error"]
            with contextlib.suppress(Exception):
                if first is None:
                    await websocket.accept()
                await websocket.send_text(json.dumps({"type": "error", "status": status, "error": error}))
                await websocket.close(1014, "the upstream did not take the WebSocket")
            return
        if first is None:
            await websocket.accept()
        pending: deque[dict[str, Any]] = deque()
        ended: OrderedDict[str, object] = OrderedDict()
        lanes: dict[Any, Answer] = {}
        """Stream id -> its latest response's events as the SDKs' socket session accumulates them."""
        """The socket's responses whose terminal event went (`_socket_event`)."""
        loop = asyncio.get_running_loop()
        unanswered: deque[float] = deque()
        """When each response.create not yet answered whole (by its response's terminal event, or an
        `error`) was sent."""
        answered = [loop.time()]
        """When the upstream last answered one whole."""
        asked = asyncio.Event()
        ending: list[tuple[int, str]] = []
        spoiled: list[str] = []
        """Why nothing more on this socket is recorded: the upstream sent a message that is not a
        JSON object, on which the SDKs' socket session raises (`JSONDecodeError` in the Python
        SDK's), so the client's session broke there; before, the message was passed on and skipped,
        and the answer around it recorded, and replayed green."""

        async def to_upstream(text: str) -> None:
            frame = await _parsed_text(text)
            if isinstance(frame, dict) and frame.get("type") == "response.create":
                pending.append({k: v for k, v in frame.items() if k != "type"})
                unanswered.append(loop.time())
                asked.set()
            await upstream.send(text)

        async def deadline() -> None:
            """`--upstream-timeout` over a socket, as over HTTP, one exchange whole: a response.create
            must be answered to its end (its response's terminal event, or an `error`) within it,
            counted from when it was sent or from when the upstream answered the one before it,
            whichever is later (one queued behind a response still streaming waits its turn). Past
            it, the client gets an `error` event saying so, and the socket is closed (1014). Before,
            only a create's first event was due: an upstream that started an answer and then
            trickled it held the client's socket for ever."""
            while True:
                if not unanswered:
                    asked.clear()
                    await asked.wait()
                    continue
                late = max(unanswered[0], answered[0]) + self.deadline - loop.time()
                if late > 0:
                    await asyncio.sleep(late)
                    continue
                status, error = 504, messages.proxy_socket_timeout(self.base, self.deadline).body()["error"]
                ending.append((1014, "the upstream did not answer within --upstream-timeout"))
                await websocket.send_text(json.dumps({"type": "error", "status": status, "error": error}))
                return

        async def client_to_upstream() -> None:
            if first is not None:
                await to_upstream(first)
            from ptc_emulator.api.routes.websocket import frames

            async for text in frames(websocket):
                if text is None:  # a binary message that is not UTF-8: refused here, as the emulator does
                    refused = messages.frame_not_json()
                    await websocket.send_text(
                        json.dumps({"type": "error", "status": refused.status, "error": refused.body()["error"]})
                    )
                    continue
                await to_upstream(text)

        async def upstream_to_client() -> None:
            try:
                await relay()
            except ConnectionClosed as e:
                # The upstream's socket ended without a clean close: one message past the bound
                # (closed here, 1009), or the connection dropped (no close frame, 1006). Either
                # way the client is told why, in an `error` event, and gets a real close code.
                if e.sent is not None and e.sent.code == 1009:
                    error = messages.proxy_socket_frame_too_large(self.base, UPSTREAM_FRAME_BYTES)
                    why = (1009, "an upstream message was larger than the proxy's bound")
                elif e.rcvd is None:
                    error = messages.proxy_socket_broke(self.base)
                    why = (1014, "the upstream's connection broke")
                else:
                    return
                log.warning("%s", error.body()["error"]["message"])
                ending.append(why)
                with contextlib.suppress(Exception):
                    event = {"type": "error", "status": error.status, "error": error.body()["error"]}
                    await websocket.send_text(json.dumps(event))

        deltas = _Deltas(self.redaction)

        async def refuse(why: str) -> None:
            """An upstream message refused: an `error` event, and the socket closed (1014)."""
            refused = messages.proxy_answer_unreadable(self.base, why)
            log.warning("%s", refused.message)
            ending.append((1014, "the upstream sent a message the proxy could not take the key out of"))
            error = {"type": "error", "status": refused.status, "error": refused.body()["error"]}
            await websocket.send_text(json.dumps(error))

        async def relay() -> None:
            count = 0
            async for data in upstream:
                count += 1
                if count % RELAY_YIELD_EVERY == 0:  # queued messages are taken without a suspension
                    await asyncio.sleep(0)
                if isinstance(data, bytes):
                    if not await binary(data):
                        return
                    continue
                finder = _finder(self.redaction)
                scanned = (
                    await asyncio.to_thread(finder.scan, data) if len(data) >= _OFF_LOOP_BYTES else finder.scan(data)
                )  # the key in any form JSON writes it: a scan, no parse (one nested too deep is looked through too)
                if scanned is None:
                    await refuse(_NESTED)
                    return
                text = scanned
                event = await _parsed_text(text)
                if isinstance(event, dict):
                    try:
                        if await self._joined_keyed(event, len(text)):
                            raise _Refused(_JOINED)
                        told_events = deltas.feed(event)
                    except _Refused as e:
                        await refuse(e.why)
                        return
                    if (event.get("type") in TERMINAL or event.get("type") == "error") and unanswered:
                        unanswered.popleft()
                        answered[0] = loop.time()
                    await self._socket_event(
                        event, pending, ended, lanes, spoiled=bool(spoiled)
                    )  # before the client has it (see _forward_http)
                    for told, same in told_events:
                        if ending:
                            return  # the socket is ending (its error event went first): nothing after it
                        await websocket.send_text(text if same else await _written(told))
                    continue
                undecodable(text)
                if ending:
                    return
                await websocket.send_text(text)

        def undecodable(data: bytes | str) -> None:
            if not spoiled:
                spoiled.append(_head(data))
                log.warning(
                    "a finished conversation was not recorded: its socket sent a message that is not a JSON object: %s",
                    spoiled[0],
                )

        async def binary(data: bytes) -> bool:
            """A binary message goes on as one (frames pass both ways unchanged), the key taken out
            of its bytes (and, when they are UTF-8, of their text, JSON's escapes and all); one that
            is a JSON event is noted and recorded as a text message is. With a key, one that starts
            with a UTF-16 or UTF-32 byte order mark or reads as the key in either is refused, and so
            is one whose bytes, not UTF-8, hold the key as `json.loads` reads them (an encoded
            surrogate, UTF-16 or UTF-32), or that holds it nested (`Redaction.scan`): an `error`
            event, and the socket closed (1014), never recorded. False: refused."""
            data = (
                await asyncio.to_thread(_redacted_bytes, self.redaction, data)
                if len(data) >= _OFF_LOOP_BYTES
                else _redacted_bytes(self.redaction, data)
            )  # one message whole, in a worker thread when long (60 MB held the loop half a second)
            try:
                cleaned = await self._scrub(data)
            except _Refused as e:
                await refuse(e.why)
                return False
            if cleaned is None and self.redaction.secret and _wide(self.redaction, data):
                await refuse(_WIDE)
                return False
            if cleaned is None and self.redaction.secret and await self._read_as_keyed(data):
                await refuse(_READ_AS_JSON)
                return False
            data = data if cleaned is None else cleaned
            event = await _parsed(data)
            if isinstance(event, dict):
                if (event.get("type") in TERMINAL or event.get("type") == "error") and unanswered:
                    unanswered.popleft()
                    answered[0] = loop.time()
                await self._socket_event(event, pending, ended, lanes, spoiled=bool(spoiled))
            if ending:
                return False  # the socket is ending (its error event went first): nothing after it
            await websocket.send_bytes(data)
            return True

        tasks = [
            asyncio.ensure_future(client_to_upstream()),
            asyncio.ensure_future(upstream_to_client()),
            asyncio.ensure_future(deadline()),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, ConnectionClosed, WebSocketDisconnect, Exception):
                    await task
            code = upstream.close_code
            await upstream.close()
            with contextlib.suppress(Exception):
                if ending:
                    await websocket.close(*ending[0])
                else:
                    await websocket.close(code if code and code != 1005 else 1000)

    async def _socket_event(
        self,
        event: dict[str, Any],
        pending: deque[dict[str, Any]],
        ended: OrderedDict[str, object],
        lanes: dict[Any, Answer] | None = None,
        spoiled: bool = False,
    ) -> None:
        """Note a socket event's ids; record the create its response's terminal event answers.
        `ended`: the socket's responses already ended (id -> the answer, for the recorder): a
        later terminal event of one of them ends that answer again, and takes no create (it took
        the create at its first end, and the second never reached the recorder: a `completed` then
        `failed` recording was kept, and replayed as completed)."""
        response = event.get("response")
        kind = event.get("type")
        lane: Answer | None = None
        if lanes is not None and kind in _SOCKET_ACCUMULATED:
            # The SDKs' socket session feeds these to its stream accumulator, afresh at each
            # `response.created` of the lane: before, a socket's items were not checked at all, and
            # an item done at two output indexes ("conflicting output identities" live) was recorded.
            # Its accumulator is made at a `response.created` and dropped at the terminal event (or an
            # `error`): so the first event it takes is always `response.created`, and events outside
            # a created..terminal span are not checked (the session checks none; it raised on none).
            lane_id = event.get("stream_id")
            if kind == "response.created":
                lanes[lane_id] = Answer(socket=True)
                while len(lanes) > _KEEP_ANSWERED:
                    del lanes[next(iter(lanes))]
            lane = lanes.pop(lane_id, None) if kind in TERMINAL else lanes.get(lane_id)
            if lane is not None and not lane.changed and (why := lane.broken(event)) is not None:
                lane.changed = True
                log.warning(
                    "a finished conversation was not recorded: its socket's events break the output items' order: %s",
                    why,
                )
        if kind in TERMINAL and isinstance(response, dict):
            await self._note_ids(response)
            response_id = response.get("id")
            if isinstance(response_id, str) and response_id in ended:
                await self._record({}, response, ended[response_id])  # a later end needs only its answer
                return
            create = _take(pending, event.get("stream_id"), response.get("previous_response_id"))
            if create is not None and (spoiled or (lane is not None and lane.changed)):
                # the client's session raised: not recorded (the log said why); the tape links it as
                # unclean, so a store:false conversation resending its items is not recorded either
                await self.recorder.refused(create, response)
                return
            if create is not None:
                answer = object()
                if isinstance(response_id, str):
                    ended[response_id] = answer
                    while len(ended) > _KEEP_ANSWERED:
                        ended.popitem(last=False)
                await self._record(create, response, answer)
        elif event.get("type") == "response.created" and isinstance(response, dict):
            await self._note_ids(response)
            ended.pop(str(response.get("id")), None)  # a response begins: its end is its own (an id given again)
        elif event.get("type") == "error":
            if lanes is not None:
                lanes.pop(event.get("stream_id"), None)  # the session drops its accumulator
            if "sequence_number" not in event and pending:
                _take(pending, event.get("stream_id"), None, any_previous=True)

    # ---- recording ----------------------------------------------------------------------------------

    async def _note_ids(self, response: Any) -> None:
        """Note the ids a response event gives (its items', then its own: the newest kept longest).
        A long `output` is walked in a worker thread (each lifecycle event lists it again, and it was
        walked on the event loop each time), and only its last `_KEEP_IDS` ids are noted, in steps
        of `_NOTE_STEP` with the loop given to others between them; all before the event goes on."""
        if not isinstance(response, dict):
            return
        output = response.get("output")
        long = isinstance(output, list) and len(output) > _NOTE_STEP
        ids = await asyncio.to_thread(_ids_of, response) if long else _ids_of(response)
        for start in range(0, len(ids), _NOTE_STEP):
            if start:
                await asyncio.sleep(0)
            for value in ids[start : start + _NOTE_STEP]:
                self.upstream_ids[value] = None
                self.upstream_ids.move_to_end(value)
            while len(self.upstream_ids) > _KEEP_IDS:
                self.upstream_ids.popitem(last=False)

    async def _record(self, create: dict[str, Any], response: dict[str, Any], answer: object = None) -> None:
        await self.recorder.exchange(create, response, response.get("model") or create.get("model"), answer)


def _ids_of(response: dict[str, Any]) -> list[str]:
    """The string ids of a response's output items and its own (last), at most `_KEEP_IDS`."""
    output = response.get("output")
    items = output[-_KEEP_IDS:] if isinstance(output, list) else ()
    ids = [item["id"] for item in items if isinstance(item, dict) and isinstance(item.get("id"), str)]
    if isinstance(response.get("id"), str):
        ids.append(response["id"])
    return ids[-_KEEP_IDS:]


_NOTE_STEP = 4096
"""Ids noted per step of the event loop; a response listing more items is walked in a worker thread."""

_SEGMENT = re.compile(r"[A-Za-z0-9_-]{1,128}")
_ROUTES: dict[tuple[str, ...], frozenset[str]] = {
    (): frozenset({"POST"}),
    ("input_tokens",): frozenset({"POST"}),
    ("compact",): frozenset({"POST"}),
    ("{id}",): frozenset({"GET", "DELETE"}),
    ("{id}", "cancel"): frozenset({"POST"}),
    ("{id}", "input_items"): frozenset({"GET"}),
}


def upstream_route(method: str, path: str) -> str | None:
    """The upstream path (`/responses/...`) of a Responses route this proxy forwards, or None.

    Only the routes above, with the methods each takes, and ids of plain characters: the path the
    upstream sees is rebuilt from checked segments, so no dot segment, encoded slash or other
    route can reach another of the upstream's paths with the key (`OPTIONS` is never forwarded)."""
    if path != _PREFIX and not path.startswith(_PREFIX + "/"):
        return None
    segments = tuple(path[len(_PREFIX) + 1 :].split("/")) if path != _PREFIX else ()
    if any(not _SEGMENT.fullmatch(s) for s in segments):
        return None
    shape = tuple(s if i or s in ("input_tokens", "compact") else "{id}" for i, s in enumerate(segments))
    if len(segments) == 2 and segments[1] not in ("cancel", "input_items"):
        return None
    methods = _ROUTES.get(shape)
    if methods is None or method not in methods:
        return None
    return "/".join(("/responses", *segments)) if segments else "/responses"


def _take(
    pending: deque[dict[str, Any]], stream_id: Any, previous: Any, *, any_previous: bool = False
) -> dict[str, Any] | None:
    """The pending create a response (or an error) answers: the oldest on its lane that continues
    the same response. A steered successor answers none, and takes none."""
    for create in pending:
        if create.get("stream_id") != stream_id:
            continue
        if any_previous or create.get("previous_response_id") == previous:
            pending.remove(create)
            return create
    return None


_KEEP_ANSWERED = 256

_SOCKET_ACCUMULATED = frozenset({"response.created", "response.output_item.done", *TERMINAL})
"""The socket events the SDKs' socket session feeds its stream accumulator."""
"""How many of a socket's ended responses it remembers: a later terminal event of one of them
ends it again (`_socket_event`)."""

UPSTREAM_FRAME_BYTES = 64 * 2**20
"""The largest message the upstream's WebSocket may send (unpacked, if it is compressed): a
message is held whole before it is passed on, so one without a bound could take all memory.
A larger one closes the socket (1009)."""

KEPT_BYTES = 16 * 2**20
"""The most of one upstream answer (a whole body, or one SSE event) the proxy keeps to note its
ids and record it; a larger one is passed to the client all the same, but not recorded (the log
says so), unless the proxy holds a key and the answer is JSON, SSE or text (or begins as a JSON
document does, whatever its Content-Type): then it is refused.
Without a bound, 300 MB of answer were held, and joined and parsed on the event loop."""

_OFF_LOOP_BYTES = 256 * 2**10
"""An upstream answer (or event) at least this long is parsed in a worker thread."""

_YIELD_EVERY = 256
"""A keyed SSE stream gives the event loop to others after this many events of one chunk."""


class _Kept:
    """A whole answer's bytes, up to `KEPT_BYTES`."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.whole = True

    def add(self, chunk: bytes) -> None:
        if not self.whole:
            return
        if len(self.data) + len(chunk) > KEPT_BYTES:
            self.whole, self.data = False, bytearray()
            log.warning("the upstream's answer is larger than %d bytes: passed on, not recorded", KEPT_BYTES)
            return
        self.data += chunk


class _Passing:
    """How far an upstream answer has been passed on: its status sent, its SSE events read, and
    why it broke off, if it did."""

    def __init__(self) -> None:
        self.started = False
        self.events: _SSE | None = None
        self.broken: StatusError | None = None


async def _unfinished(send: Send, passing: _Passing, why: StatusError) -> None:
    """An upstream answer that did not finish (the deadline, a broken connection): before its
    status, `why` in OpenAI's envelope; an SSE stream under way ends with an `error` event
    saying why; another answer under way is left unended, and the server breaks the connection
    off, so the client sees an incomplete answer, never a cut one ended as if whole."""
    if not passing.started:
        await _error(send, why.status, why.message, why.type, why.code)
    elif passing.events is not None:
        event = {
            "type": "error",
            "code": why.code,
            "message": why.message,
            "param": None,
            "sequence_number": passing.events.next_sequence,
        }
        chunk = b"event: error\ndata: " + json.dumps(event).encode("utf-8") + b"\n\n"
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class _SSE:
    """The data of an SSE stream's events, taken as its bytes pass through (an event of more than
    `KEPT_BYTES` is passed on, not read)."""

    next_sequence = 0
    """The `sequence_number` after the last event's: an error event the proxy adds takes it."""

    def note(self, event: dict[str, Any]) -> None:
        number = event.get("sequence_number")
        if isinstance(number, int) and not isinstance(number, bool) and number >= self.next_sequence:
            self.next_sequence = number + 1

    def __init__(self, blocks: bool = False, redaction: Redaction | None = None) -> None:
        self.blocks = blocks
        self.deltas = _Deltas(redaction or Redaction(None))
        """Keep each event's bytes (`take`): the stream is passed on event by event, not as it comes."""
        self.taken: list[tuple[bytes, bool]] = []
        self.buffer = bytearray()
        self.searched = 0
        """How much of the buffer holds no event's end (each byte is looked at once)."""
        self.skipping = False
        """Within an event too long to keep: its bytes are dropped until it ends."""
        self.pending_cr = False
        self.answer = Answer()
        """This stream, for the recorder: each of its terminal events ends the same answer."""
        self.overlong = False
        """With `blocks`: an event was longer than `KEPT_BYTES` (a keyed stream refuses it)."""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The data of each event this chunk completes. Lines end with CRLF, LF or CR alone (the
        SSE format allows each); a CR that ends a chunk waits for the next to say which."""
        if self.pending_cr:
            chunk = b"\r" + chunk
        self.pending_cr = chunk.endswith(b"\r")
        if self.pending_cr:
            chunk = chunk[:-1]
        self.buffer += chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        found = []
        while True:
            if not self.skipping and self.buffer[:2] == b"\n\n":
                # Blank lines between events, as many as come at once, taken in one step: each
                # dispatches no event (before, each pair was an event of its own, scrubbed and
                # sent alone: a million blank lines held the event loop for seconds).
                run = _BLANKS.match(self.buffer)
                pairs = (run.end() if run else 0) // 2 * 2
                del self.buffer[:pairs]
                self.searched = 0
                if self.blocks:
                    self.taken.append((b"\n" * pairs, False))
                continue
            end = self.buffer.find(b"\n\n", max(self.searched - 1, 0))
            if end < 0:
                break
            block = bytes(self.buffer[:end])
            del self.buffer[: end + 2]
            self.searched = 0
            if self.skipping:
                self.skipping = False
                if self.blocks:
                    self.taken.append((block + b"\n\n", False))
                continue
            if self.blocks:  # its data is read by the caller (`_read_data`: a long one off the loop)
                self.taken.append((block + b"\n\n", _DATA_FIELD in block or dispatched(block)))
                continue
            data = _data(block)
            if data or dispatched(block):  # an empty one too: the SDKs parse it, and raise
                found.append(data)
        self.searched = len(self.buffer)
        if len(self.buffer) > KEPT_BYTES:
            if not self.skipping:
                log.warning("an upstream event is larger than %d bytes: passed on, not recorded", KEPT_BYTES)
            self.skipping = self.overlong = True
            if self.blocks:
                self.taken.append((bytes(self.buffer[:-1]), False))
            keep = self.buffer[-1:]  # an event's end may straddle this chunk and the next
            self.buffer, self.searched = bytearray(keep), 0
        return found

    def take(self) -> list[tuple[bytes, bool]]:
        """With `blocks`: the bytes of each event completed since the last call (a too long one's
        in pieces, a run of blank lines as one), each with whether it may hold data to read."""
        taken, self.taken = self.taken, []
        return taken

    def rest(self) -> bytes:
        """With `blocks`: what the stream ended with that ends no event."""
        rest = bytes(self.buffer) + (b"\n" if self.pending_cr else b"")
        self.buffer, self.pending_cr = bytearray(), False
        return rest


class _Deltas:
    """A key split across an output item's delta events (`response.output_text.delta` and the
    like) is taken out of the joined text: per item (and part), a delta whose text ends with what
    could begin the key holds that end back, to go with the next delta (the key, if it comes, as
    `[redacted]`), or before a `.done` event that ends its text (the item's, or its part's), the
    stream's terminal event or its end. Another event between two deltas (an annotation, say)
    neither sends nor forgets what is held: a client joins the deltas across it.
    A lane is a position (the output, content and summary indices), not an item id: the SDKs join
    deltas so. What a lane sent stays (its end, `window`) after a `.done`: a later delta at the
    same position is joined to it by a client, and the key across the two is refused.
    Deltas merged so go as one event, the later's (a `sequence_number` may be skipped). What could
    begin the key written with JSON's escapes (`\\u`, `s\\u006`) is held back as well; a key that
    the joined text holds nested (`Redaction.within`: a call's arguments decoded again) cannot be
    held back in place, and `feed` raises `_Refused` (the stream is ended with an `error` event).
    The stream's terminal or `error` event sends what is held; a delta of that stream after it is
    refused (`_AFTER_END`): a client joining every delta would join it to what went before. At most
    `MAX_LANES` lanes per answer (`_MANY_LANES`). The text a kind's lanes send, joined in the order
    sent (a client printing every `response.output_text.delta` joins parts and items so), is looked
    through too; the key there (half of it held back and sent at a `.done`, say, the rest in the
    next part) cannot be taken out in place, and `feed` raises `_Refused` (`_JOINED`)."""

    def __init__(self, redaction: Redaction) -> None:
        self.redaction = redaction
        self.lanes: dict[tuple[Any, ...], tuple[dict[str, Any], str]] = {}
        self.sent: dict[tuple[Any, ...], str] = {}
        """Per lane, the end of the text already sent: with what comes next, it is looked through for
        the key nested (a call's arguments decoded again), which cannot be held back in place."""
        self.ending: dict[tuple[Any, ...], dict[tuple[Any, ...], None]] = {}
        """The held lanes by what a `.done` event (or the stream's end) names: the stream, which of the
        output, content and summary indices the event has, and their values: a `.done` ends the lanes whose
        indices it names are its own (an index no client reads ends none). Each held lane
        is under its 8 keys, so an event ends the lanes it names with a dict lookup, not a walk of all."""
        self.ended: set[str] = set()
        """The streams whose terminal or `error` event went: a delta after it is refused (`_AFTER_END`)."""
        self.visits = 0
        """Lanes looked at to end them (counted for the tests: a `.done` looks at its own lanes only)."""
        self.window = 64 * len(redaction.secret) + 64
        self.finder = _finder(redaction)
        self.flows: dict[tuple[str, str], str] = {}
        """Per stream and delta kind, the end of the text sent in all its lanes, in the order sent: a
        client printing each `response.output_text.delta` as it comes joins the deltas of every part and
        item; the key across two lanes cannot be held back in place, and is refused (`_JOINED`)."""

    def flowed(self, lane: tuple[Any, ...], text: str) -> None:
        """`text` sent in `lane`: added to its kind's flow, which is refused if it now holds the key."""
        flow = (lane[0], lane[1])
        joined = self.flows.get(flow, "") + text
        if self.finder.within(joined):
            raise _Refused(_JOINED)
        self.flows[flow] = joined[-self.window :]

    def feed(self, event: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
        """The events to send for `event`, in order, each with whether it is `event` unchanged."""
        delta = event.get("delta")
        kind = event.get("type")
        if not self.redaction.secret:
            return [(event, True)]
        stream = repr(event.get("stream_id"))
        if not isinstance(delta, str) or not isinstance(kind, str) or not kind.endswith(".delta"):
            if kind in TERMINAL or kind == "error":  # the stream's end: all it holds back goes
                self.ended.add(stream)
                told = self.release(self.ending.get((stream, (False,) * 3, ()), {}))
                for lane in [lane for lane in self.sent if lane[0] == stream]:
                    del self.sent[lane]
                for flow in [flow for flow in self.flows if flow[0] == stream]:
                    del self.flows[flow]
                return [*told, (event, True)]
            if isinstance(kind, str) and kind.endswith(".done"):  # an item's (or part's) text ends
                named = tuple(name in event for name in _LANE_FIELDS)
                values = tuple(_position(event[name]) for name in _LANE_FIELDS if name in event)
                return [*self.release(self.ending.get((stream, named, values), {})), (event, True)]
            return [(event, True)]  # an annotation, say: the text goes on, what is held stays held
        if stream in self.ended:
            raise _Refused(_AFTER_END)
        lane = (stream, kind, *_lane(event))
        if lane not in self.sent and len(self.sent) >= MAX_LANES:
            raise _Refused(_MANY_LANES)
        _, before = self.unhold(lane) if lane in self.lanes else (event, "")
        text = self.redaction.rewrite(before + delta)
        if self.finder.within(self.sent.get(lane, "") + text):
            raise _Refused(_NESTED)
        held = self.finder.partial(text)
        self.flowed(lane, text[: len(text) - held])
        self.sent[lane] = (self.sent.get(lane, "") + text[: len(text) - held])[-self.window :]
        if held:
            self.hold(lane, event, text[len(text) - held :])
            text = text[: len(text) - held]
        if not text:
            return []
        if not before and text == delta:
            return [(event, True)]
        return [({**event, "delta": text}, False)]

    def hold(self, lane: tuple[Any, ...], event: dict[str, Any], text: str) -> None:
        self.lanes[lane] = (event, text)
        for key in _ending_keys(lane):
            self.ending.setdefault(key, {})[lane] = None

    def unhold(self, lane: tuple[Any, ...]) -> tuple[dict[str, Any], str]:
        for key in _ending_keys(lane):
            bucket = self.ending[key]
            del bucket[lane]
            if not bucket:
                del self.ending[key]
        return self.lanes.pop(lane)

    def release(self, lanes: Iterable[tuple[Any, ...]]) -> list[tuple[dict[str, Any], bool]]:
        """What `lanes` hold back, as delta events: the item (or the stream) went on with something
        else, so it is not the key; what is sent now is added to what the lanes sent."""
        told = []
        for lane in list(lanes):
            self.visits += 1
            event, text = self.unhold(lane)
            self.flowed(lane, text)
            self.sent[lane] = (self.sent.get(lane, "") + text)[-self.window :]
            told.append(({**event, "delta": text}, False))
        return told

    def flush(self) -> list[tuple[dict[str, Any], bool]]:
        """All that is held back, as delta events (the answer ended)."""
        return self.release(list(self.lanes))


MAX_LANES = 4096
"""The most delta lanes (positions, `_lane`) one keyed streamed answer may use: each keeps the end of
what it sent (and may hold some back), so more are refused (`_MANY_LANES`), not kept without bound."""


def _ending_keys(lane: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """The keys of `_Deltas.ending` a held lane is under: per subset of the output, content and
    summary indices, (its stream, which indices the subset has, the lane's values of them)."""
    positions = lane[2:]
    keys = []
    for named in itertools.product((False, True), repeat=len(_LANE_FIELDS)):
        keys.append((lane[0], named, tuple(v for v, has in zip(positions, named, strict=True) if has)))
    return keys


_AFTER_END = (
    "sends a delta after its stream's terminal or error event (a client joining the deltas would join it to "
    "the text sent before, held-back ends included)"
)
_MANY_LANES = f"places deltas at more than {MAX_LANES} output, content and summary positions"


_LANE_FIELDS = ("output_index", "content_index", "summary_index")
"""What places a delta in the text a client joins (the SDKs join by position, not by `item_id`)."""

_ODD_POSITION = (
    "places a delta at an output, content or summary index that is not a whole number a client reads as a "
    "position (negative, a fraction, a string other than a plain one of digits, or not a number)"
)


def _lane(event: dict[str, Any]) -> tuple[Any, ...]:
    """A delta event's position (`_position` of each index); `_Refused` when one is `ODD`: a
    client may join its text to any other's, so the key could not surely be taken out of it."""
    lane = tuple(_position(event.get(name)) for name in _LANE_FIELDS)
    if ODD in lane:
        raise _Refused(_ODD_POSITION)
    return lane


_DATA_FIELD = b"data:"
_DATA_LINE = re.compile(rb"^(?:\xef\xbb\xbf)?data: *(.*)", re.MULTILINE)
_BLANKS = re.compile(rb"\n+")


def _data(block: bytes) -> bytes:
    """The data of an SSE event's lines (LF-ended). A line's leading UTF-8 byte order mark is
    skipped: a client's decoder drops the stream's first (and reads the line after it). A regular
    expression, not a walk of the lines in Python (two million lines took a second), over a slice
    of whole lines at a time: a worker thread reading a long block lets the event loop in between
    (one search over two million lines held the interpreter for most of a second)."""
    if _DATA_FIELD not in block:
        return b""
    if len(block) <= _DATA_SLICE:
        return b"\n".join(_DATA_LINE.findall(block))
    pieces = []
    start = 0
    while start < len(block):
        end = block.find(b"\n", start + _DATA_SLICE)
        end = len(block) if end < 0 else end + 1
        found = _DATA_LINE.findall(block, start, end)
        if found:
            pieces.append(b"\n".join(found))
        start = end
    return b"\n".join(pieces)


_DATA_SLICE = 64 * 2**10


async def _read_data(block: bytes) -> bytes:
    """`_data`, in a worker thread for a long block (millions of lines in one event)."""
    if len(block) >= _OFF_LOOP_BYTES:
        return await asyncio.to_thread(_data, block)
    return _data(block)


_UTF8 = frozenset({None, "utf-8", "utf8", "us-ascii", "ascii"})
"""The charsets a JSON, SSE or text answer may declare with a key set (none: UTF-8, JSON's and SSE's own)."""
_OTHER_CHARSET = "declares a charset other than UTF-8"
_NOT_UTF8 = "is not UTF-8 (or holds a NUL byte, as UTF-16 and UTF-32 text does)"
_TOO_LONG = f"is longer than the {KEPT_BYTES // 2**20} MiB the proxy reads whole to look for the key"
_WIDE = "holds the key in UTF-16 or UTF-32, or starts with their byte order mark"
_READ_AS_JSON = (
    "holds the key as a JSON reader decodes its bytes (UTF-16 or UTF-32, or UTF-8 with an encoded surrogate, "
    "or what cannot be decoded replaced), whatever its Content-Type"
)
_SSE_KEYED = "holds the key in the deltas of one item joined, read as an SSE stream (whatever its Content-Type)"
_NESTED = (
    "holds the key in a form the proxy cannot take out in place (a JSON string inside a string, as a call's "
    "arguments are, decoded again; an escape after an escaped backslash)"
)


_JOINED = (
    "holds the key in the text a client joins from it: the output_text parts of its messages joined (as the SDKs' "
    "`output_text` is), or the deltas of one kind joined across parts and items in the order they come"
)
_NAME_DIFFERS = (
    "names an event a delta on its `event:` line whose data's `type` is another (a client reading the name and "
    "one reading the type would join different texts)"
)


def _joined_keyed(redaction: Redaction, event: dict[str, Any]) -> bool:
    """Whether a response (a whole answer, or an event's `response`), or an event's `item`, holds the
    key in the text of its message items' output_text parts joined with nothing between, as the SDKs'
    `output_text` joins them (each part alone is looked through already)."""
    finder = _finder(redaction)
    for holder, items in ((event, "output"), (event.get("response"), "output")):
        if isinstance(holder, dict) and isinstance(holder.get(items), list):
            if finder.within("".join(_output_texts(holder[items]))):
                return True
    item = event.get("item")
    return isinstance(item, dict) and finder.within("".join(_output_texts([item])))


def _output_texts(output: list[Any]) -> Iterator[str]:
    for item in output:
        if not isinstance(item, dict) or item.get("type") != "message" or not isinstance(item.get("content"), list):
            continue
        for part in item["content"]:
            if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                yield part["text"]


def _event_name(block: bytes) -> str | None:
    """The name an SSE event's `event:` line gives it (the last such line's; None: none). Found
    from the end, at C speed (a block of millions of `event:` lines is not walked line by line)."""
    starts = [block.rfind(b"\n" + head) + 1 + len(head) for head in _EVENT_HEADS]
    starts = [start for start, head in zip(starts, _EVENT_HEADS, strict=True) if start > len(head)]
    starts += [len(head) for head in _EVENT_HEADS if block.startswith(head)]
    if not starts:
        return None
    start = max(starts)
    end = block.find(b"\n", start)
    name = block[start : end if end >= 0 else len(block)]
    return name.decode("utf-8", "replace").strip(" ")


_EVENT_HEADS = (b"event:", b"\xef\xbb\xbfevent:")


def _as_named(event: dict[str, Any], name: str | None) -> dict[str, Any]:
    """An event as its deltas are read: a client that reads the `event:` name (an EventSource's
    listener) takes the event for what it names, so an event whose data has no `type` (or not a
    string) is read as the kind its name says (the key split across such deltas is held back, and
    an event written again carries that `type`); one named a delta whose `type` is another is
    refused (`_NAME_DIFFERS`)."""
    kind = event.get("type")
    if not name or name == kind:
        return event
    if not isinstance(kind, str):
        return {**event, "type": name}
    if name.endswith(".delta"):
        raise _Refused(_NAME_DIFFERS)
    return event  # its `type` governs: a name such as `message` says nothing a client joins by


def _textual(kind: str) -> bool:
    """Whether a Content-Type is one a client reads as text (JSON, SSE, `text/*`; none at all too)."""
    media = kind.split(";", 1)[0].strip().lower()
    return not media or media.startswith("text/") or "json" in media


def _charset(kind: str) -> str | None:
    for param in kind.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


def _scrubbed(redaction: Redaction, data: bytes) -> bytes | None:
    """`data`, UTF-8 text, with the key out of it, written plainly or with any of JSON's escapes
    for its characters (a scan of the text, no parse: a JSON document nested too deep to parse is
    looked through as well); None when it is not UTF-8 text, or holds a NUL byte (UTF-16 or
    UTF-32 text without a byte order mark, which a JSON reader may take it for)."""
    if b"\x00" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    cleaned = _finder(redaction).scan(text)
    if cleaned is None:
        raise _Refused(_NESTED)
    return data if cleaned == text else cleaned.encode("utf-8")


class _Finder:
    """`Redaction.within`, `scan` and `partial` for one key, each over a delta or an event at the
    speed of a regular expression: 60,000 deltas of the key but its last character, written with
    `\\u` escapes, each held back and looked at again with the next, took 155 µs each of the event
    loop (the held end walked character by character, the text a lane sent decoded again in Python
    at each delta), 43 µs now; through the server (bench/keyed_deltas.py, one busy sitting) 38 s
    before, 8.9 s after, 3.9 s for as many plain deltas (`--plain`, none held).

    `within`: a text in which every backslash begins a JSON escape of a character other than a
    backslash decodes to text without one, so (for a key of ASCII characters) it holds the key
    nested at no level deeper than the first, and the first is what `Redaction.escaped` finds:
    the text is decoded again (in Python) only when it has an escaped or a stray backslash.
    `partial`: the same answer as `Redaction.partial` (or a longer end, only for a key holding a
    backslash, where a pattern tries each of its forms): one pattern for every unfinished form
    of the key, searched from the earliest start `Redaction.partial` looks at."""

    def __init__(self, redaction: Redaction) -> None:
        self.redaction = redaction
        secret = redaction.secret
        self.plain = secret.isascii()
        self.begins = re.compile(_unfinished_key(secret)) if secret else None
        self.widest = _WIDEST_FORM * len(secret)

    def within(self, text: str) -> bool:
        """`Redaction.within(text)`."""
        redaction = self.redaction
        if not redaction.secret:
            return False
        if redaction.secret in text:
            return True
        if "\\" not in text:
            return False
        if not self.plain or _DECODES_TO_BACKSLASH.search(text) or redaction.escaped is None:
            return redaction.within(text)
        return redaction.escaped.search(text) is not None

    def scan(self, text: str) -> str | None:
        """`Redaction.scan(text)`: `rewrite`, or None when the key is still `within` the result."""
        cleaned = self.redaction.rewrite(text)
        return None if self.within(cleaned) else cleaned

    def partial(self, text: str) -> int:
        """`Redaction.partial(text)`: the length of the longest end of `text` that could begin the key."""
        if self.begins is None:
            return 0
        found = self.begins.search(text, max(0, len(text) - self.widest))
        return 0 if found is None else len(text) - found.start()


_WIDEST_FORM = 12
"""The most characters JSON writes one character with (a surrogate pair's two `\\u` escapes)."""

_DECODES_TO_BACKSLASH = re.compile(r'\\(?!u(?!005[cC])[0-9a-fA-F]{4}|["/bfnrt])')
"""A backslash that does not begin a JSON escape of a character other than a backslash (an
escaped backslash, `\\u005c`, a stray one): decoded, the text may hold a backslash, and so an escape."""

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _forms(char: str) -> list[str]:
    """The ways a JSON string writes `char`: as it is, a `\\u` escape (a surrogate pair's two
    outside the BMP), JSON's two-character escape when it has one."""
    code = ord(char)
    units = [code] if code < 0x10000 else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)]
    escape = "".join(f"\\u{unit:04x}" for unit in units)
    return [char, escape, *([_SHORT_ESCAPES[char]] if char in _SHORT_ESCAPES else [])]


def _unfinished_key(secret: str) -> str:
    """A pattern for an end of a text that begins `secret` (not the whole of it) written with any
    mix of its characters and JSON's escapes (an escape's hex and letter in either case), the last
    of them perhaps unfinished (`\\u00`)."""
    tail = "(?!)"  # the whole key is not counted
    for index in range(len(secret) - 1, -1, -1):
        forms = _forms(secret[index])
        whole = "|".join(re.escape(f) if f == secret[index] else f"(?i:{re.escape(f)})" for f in forms)
        unfinished = [f"(?i:{re.escape(f[:size])})" for f in forms[1:] for size in range(1, len(f))]
        choices = [f"(?:{whole}){tail}", *(f"{u}\\Z" for u in unfinished), *(["\\Z"] if index else [])]
        tail = "(?:" + "|".join(choices) + ")"
    return tail


@functools.lru_cache(maxsize=8)
def _finder(redaction: Redaction) -> _Finder:
    return _Finder(redaction)


PROCESS.add("proxy key finders", Memo(_finder))


class _Refused(Exception):
    """An upstream answer (or event, or message) the key cannot surely be taken out of; `why` is
    one of the proxy's own phrases (`proxy_answer_unreadable`)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def _json_like(start: bytes) -> bool:
    """Whether bytes begin as a JSON document does (an object, an array or a string, after blanks),
    read as `json.loads` reads bytes: a body of another Content-Type that a client may parse all the same."""
    try:
        text = start.decode(json.detect_encoding(start), "replace")
    except LookupError:
        return False
    return text.lstrip(" \t\r\n\ufeff")[:1] in ("{", "[", '"')


def _read_as_keyed(redaction: Redaction, data: bytes) -> bool:
    """Whether `data`, decoded as `json.loads` decodes bytes (`json.detect_encoding`: UTF-8,
    UTF-16 or UTF-32 by their byte pattern; surrogates passed), or leniently (what cannot be
    decoded replaced, in that encoding and as UTF-8), holds the key in any form."""
    if not redaction.secret:
        return False
    try:
        detected = json.detect_encoding(data)
    except LookupError:
        detected = "utf-8"
    try:
        if redaction.within(data.decode(detected, "surrogatepass")):
            return True
    except UnicodeDecodeError:
        pass
    # As a client that decodes leniently reads them (`response.text` before `json.loads`, Node's
    # `buf.toString()` before `JSON.parse`): each byte it cannot decode a U+FFFD, the rest as it was.
    return any(redaction.within(data.decode(codec, "replace")) for codec in dict.fromkeys((detected, "utf-8")))


_SSE_LINE = re.compile(rb"(?:\A(?:\xef\xbb\xbf)?|[\r\n])[ \t]*(?:event|data)[ \t]*:", re.IGNORECASE)


def _sse_like(data: bytes) -> bool:
    """Whether bytes hold a line an SSE reader takes (`event:` or `data:`, case aside)."""
    return _SSE_LINE.search(data) is not None


def _sse_keyed(redaction: Redaction, data: bytes) -> bool:
    """Whether `data`, read as an SSE stream, holds the key in the deltas of one lane (an item's
    text, a call's arguments) joined, or of one kind across lanes, as a client joins them (a kind
    by the data's `type` or the `event:` name), or in a response's output_text parts joined
    (`_joined_keyed`); its bytes decoded leniently."""
    if not redaction.secret:
        return False
    events = _SSE(blocks=True)
    joined: dict[tuple[Any, ...], list[str]] = {}
    for chunk in (data, b"\n\n"):
        events.feed(chunk)
        for block, readable in events.take():
            event = _json(_data(block).decode("utf-8", "replace").encode("utf-8")) if readable else None
            if not isinstance(event, dict):
                continue
            if _joined_keyed(redaction, event):
                return True
            name = _event_name(block)
            delta = event.get("delta")
            for kind in {event.get("type"), name}:  # as a client reading either takes it
                if isinstance(delta, str) and isinstance(kind, str):
                    lane = (kind, *_lane(event))  # `_Refused` for a position no client reads
                    joined.setdefault(lane, []).append(delta)
                    joined.setdefault((kind,), []).append(delta)  # the kind across lanes, as they come
    return any(redaction.within("".join(parts)) for parts in joined.values())


_WIDE_CODECS = ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")
_BOMS = (b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")


def _wide(redaction: Redaction, data: bytes) -> bool:
    """Whether bytes start with a UTF-16 or UTF-32 byte order mark, or read as the key in UTF-16 or
    UTF-32 (at any alignment)."""
    if data.startswith(_BOMS):
        return True
    for codec in _WIDE_CODECS:
        width = 2 if "16" in codec else 4
        for offset in range(width):
            text = data[offset:].decode(codec, "replace")
            if redaction.text(text) != text:
                return True
    return False


def _sse_block(event: dict[str, Any]) -> bytes:
    kind = event.get("type")
    head = f"event: {kind}\n".encode() if isinstance(kind, str) and "\n" not in kind and "\r" not in kind else b""
    return head + b"data: " + Redaction.write(event).encode("utf-8") + b"\n\n"


def _redacted_bytes(redaction: Redaction, data: bytes) -> bytes:
    """`data`, one whole message, without the key in plain text (`Redaction.chunks`)."""
    redacting = redaction.chunks()
    return redacting(data) + redacting.flush()


def _long_delta(event: dict[str, Any]) -> bool:
    delta = event.get("delta")
    return isinstance(delta, str) and len(delta) >= _OFF_LOOP_BYTES


async def _written(event: dict[str, Any]) -> str:
    """`Redaction.write(event)` of an event rewritten (a delta the key was held back from), in a
    worker thread for a long delta (60 MB of one took seconds of the event loop)."""
    if _long_delta(event):
        return await asyncio.to_thread(Redaction.write, event)
    return Redaction.write(event)


async def _sse_written(event: dict[str, Any]) -> bytes:
    """`_sse_block(event)`, in a worker thread for a long delta."""
    if _long_delta(event):
        return await asyncio.to_thread(_sse_block, event)
    return _sse_block(event)


async def _parsed(data: bytes) -> Any:
    """`_json`, in a worker thread for a long text."""
    if len(data) >= _OFF_LOOP_BYTES:
        return await asyncio.to_thread(_json, data)
    return _json(data)


async def _parsed_text(text: str) -> Any:
    """`_parsed(text.encode("utf-8"))` of a WebSocket message's text; a long one read a piece at a
    time in a worker thread (`jsonpieces`): one `json.loads` holds the interpreter throughout, in a
    worker thread too (60 MB of one string about 0.1-0.3 s, every client waiting)."""
    if len(text) < _OFF_LOOP_BYTES or "\x00" in text[:4]:  # NULs: json.loads of bytes may read UTF-16
        return await _parsed(text.encode("utf-8"))
    return await asyncio.to_thread(_json_pieces, text)


def _json_pieces(text: str) -> Any:
    """`_json(text.encode("utf-8"))`, read a piece at a time (a UTF-8 byte order mark skipped, as
    `json.loads` of bytes skips it)."""
    try:
        return jsonpieces.loads(text[1:] if text.startswith("\ufeff") else text)
    except (ValueError, RecursionError):  # json.JSONDecodeError is a ValueError
        return None


_SENTINEL = b"[DONE]"
"""The data that ends a stream for both SDKs (the Node SDK's takes it whole, nothing around it)."""


def _head(data: bytes | str) -> str:
    """The start of an undecodable event's data, for the log (the key taken out by the caller's
    redaction before the data was read, with a key)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return repr(text[:40]) + ("..." if len(text) > 40 else "")


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None


async def _disconnected(receive: Receive) -> None:
    """Returns when the client goes away (its body has been read: nothing else comes)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _replayed(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the already-read body again, then waits as the original does."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


async def _error(send: Send, status: int, message: str, kind: str, code: str | None) -> None:
    body = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode("ascii"))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
