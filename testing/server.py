"""Test helpers: the emulator in a background thread, and one test's scoped view of it.

`PTCEmulator` is what the `ptc_emulator` fixture yields; `EmulatorServer` runs the app under
uvicorn on a free 127.0.0.1 port. Both work without pytest, for scripts and benchmarks.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import http
import logging
import queue
import re
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from ptc_emulator import env as _env
from ptc_emulator.names import API_KEY_ENV, SCOPE_HEADER

__all__ = [
    "API_KEY",
    "API_KEY_ENV",
    "SCOPE_HEADER",
    "EmulatorServer",
    "InProcessTransport",
    "KeptTransport",
    "PTCEmulator",
    "SessionTransports",
    "inspector_url",
]

API_KEY = "sk-ptc-emulator"
"""The key clients send when the server asks for none (any key is accepted then)."""


class EmulatorServer:
    """The app under uvicorn in a background thread, on a free 127.0.0.1 port."""

    def __init__(self, settings: Any) -> None:
        import uvicorn

        from ptc_emulator.api.app import create_app
        from ptc_emulator.api.cli import bind, server_config

        self.settings = settings
        self.app = create_app(settings)
        self.loop: asyncio.AbstractEventLoop | None = None
        """The server's event loop, once it has started (`InProcessTransport` calls the app there)."""
        self._socket = bind("127.0.0.1", 0)
        self.port = self._socket.getsockname()[1]
        self._server = uvicorn.Server(server_config(_NotingLoop(self), settings, log_level="warning"))
        self._server.startup = self._noting_startup(self._server.startup)  # type: ignore[method-assign]
        self._started = threading.Event()
        """Set when the server's start has ended, started or not (`start` waits for it, no polling)."""
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="ptc-emulator", daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _noting_startup(self, startup: Callable[..., Any]) -> Callable[..., Any]:
        async def noting(*args: Any, **kwargs: Any) -> None:
            try:
                await startup(*args, **kwargs)
            finally:
                self._started.set()

        return noting

    def start(self, timeout: float = 60.0) -> EmulatorServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if self._started.is_set():  # its start failed: the thread ends
                self._thread.join(max(0.0, deadline - time.monotonic()))
            if self._started.is_set() or not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the ptc-emulator server did not start")
            self._started.wait(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(30)
        self._socket.close()


class _NotingLoop:
    """The server's app, noting the event loop it is served on when its lifespan starts."""

    def __init__(self, server: EmulatorServer) -> None:
        self.server = server

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            self.server.loop = asyncio.get_running_loop()
        await self.server.app(scope, receive, send)


def inspector_url(base_url: str, scope: str | None = None) -> str:
    """The inspector's page on the emulator at `base_url` (its `/v1` URL), for one scope or all."""
    from urllib.parse import quote

    root = base_url.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    return f"{root}/_emulator/ui/" + (f"#scope={quote(scope, safe='')}" if scope else "")


def _plain_http(url: Any) -> bool:
    """Plain HTTP never does TLS: a client for it can skip loading the CA bundle, which costs
    tens of milliseconds for every client a test makes."""
    return str(url).startswith("http://")


@functools.lru_cache(maxsize=1)
def _no_tls() -> ssl.SSLContext:
    """What a client for plain HTTP is given to verify with: one context made once (a client
    given `verify=False` makes a context of its own, a fifth of a millisecond for every client a
    test makes), never used, since plain HTTP does no TLS."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA bundle loaded: nothing is verified
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _verify(url: Any) -> Any:
    """A client's `verify` for `url`: the default for HTTPS, the unused context for plain HTTP."""
    return _no_tls() if _plain_http(url) else True


class KeptTransport(httpx.HTTPTransport):
    """An HTTP transport that several `PTCEmulator`s share, one after another (the pytest plugin's
    tests of a session): its connection to the admin API stays open from one test to the next,
    and no test pays for a client's set-up. Closing a client that uses it leaves it open;
    `close_for_good()` closes it."""

    def __init__(self) -> None:
        super().__init__(verify=False)  # the plugin's server speaks plain HTTP on 127.0.0.1

    def close(self) -> None:
        pass

    def close_for_good(self) -> None:
        super().close()


class InProcessTransport(httpx.BaseTransport):
    """Requests to an `EmulatorServer` of this process handed to its app on the server's own event
    loop, as its socket would hand them: the same app, middleware and answers, without the
    socket's round trip (HTTP written, sent, parsed on both sides). The pytest plugin's admin
    calls go this way to the server it started (its SDK clients' requests go in process too, by
    `_Exchange`, which streams)."""

    def __init__(self, server: EmulatorServer) -> None:
        self._server = server
        self._asgi = httpx.ASGITransport(app=server.app, client=("127.0.0.1", 0))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        loop = self._server.loop
        if loop is None or loop.is_closed():
            raise httpx.ConnectError("the ptc-emulator server is not running", request=request)
        request.read()  # the body whole (a sync client's stream cannot be read on the loop)

        async def call() -> tuple[int, Any, bytes]:
            response = await self._asgi.handle_async_request(request)
            return response.status_code, response.headers.raw, await response.aread()

        timeout = request.extensions.get("timeout", {}).get("read")
        future = asyncio.run_coroutine_threadsafe(call(), loop)
        try:
            status, headers, body = future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise httpx.ReadTimeout("the ptc-emulator server did not answer in time", request=request) from None
        return httpx.Response(status, headers=headers, content=body, request=request)

    def close(self) -> None:
        pass


class _Whole(NamedTuple):
    """An answer of known length whose body came in one piece: its start and body together."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


class _Exchange:
    """One request handed to an `EmulatorServer`'s app on the server's event loop, as uvicorn hands
    it a request read from the socket (the same scope, the same app with uvicorn's own middleware,
    the same default headers), its answer read from the calling thread as the app sends it: a
    streamed answer's events come one by one, as they would over the socket. The client closing
    the answer before its end is a disconnect for the app, as a closed socket is."""

    _END = object()

    def __init__(self, server: EmulatorServer, scope: dict[str, Any], body: bytes) -> None:
        self._server = server
        self._loop: asyncio.AbstractEventLoop = server.loop  # type: ignore[assignment]
        self._messages: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._scope = scope
        self._body = body
        self._gone: asyncio.Event | None = None
        self._closed = False
        self._pending: list[Any] = []
        """What a whole answer (`_Whole`) holds after its start, for the next calls of `next`."""
        self.future = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)

    async def _serve(self) -> None:
        gone = self._gone = asyncio.Event()
        if self._closed:
            gone.set()
        sent_body = started = finished = False

        async def receive() -> dict[str, Any]:
            nonlocal sent_body
            if not sent_body:
                sent_body = True
                return {"type": "http.request", "body": self._body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        held: tuple[int, list[tuple[bytes, bytes]]] | None = None
        """The start of an answer of known length, held to go with its body: the calling thread
        is woken once for the whole answer, not once for its start and again for its body."""

        def release() -> None:
            nonlocal held
            if held is not None:
                self._messages.put(held)
                held = None

        async def send(message: dict[str, Any]) -> None:
            nonlocal started, finished, held
            if gone.is_set() and not finished:
                return  # the client has gone: uvicorn drops what is sent after a disconnect
            if message["type"] == "http.response.start":
                started = True
                headers = [*self._server._server.server_state.default_headers, *message.get("headers", [])]
                names = {name.lower() for name, _ in headers}
                if b"content-length" in names:
                    held = (message["status"], headers)
                    return
                if (
                    b"transfer-encoding" not in names
                    and self._scope["method"] != "HEAD"
                    and message["status"] not in (204, 304)
                ):
                    headers.append((b"transfer-encoding", b"chunked"))
                self._messages.put((message["status"], headers))
            elif message["type"] == "http.response.body" and started and not finished:
                body, more = bytes(message.get("body", b"")), message.get("more_body", False)
                if held is not None and not more:
                    finished = True
                    gone.set()  # the answer is whole: the app hears a disconnect next, as over HTTP/1.1
                    self._messages.put(_Whole(*held, body))
                    held = None
                    return
                release()
                if body:
                    self._messages.put(body)
                if not more:
                    finished = True
                    gone.set()  # the answer is whole: the app hears a disconnect next, as over HTTP/1.1
                    self._messages.put(self._END)

        app = self._server._server.config.loaded_app
        try:
            await app(self._scope, receive, send)
        except BaseException as error:
            release()
            if isinstance(error, Exception):  # as uvicorn logs it
                logging.getLogger("uvicorn.error").error("Exception in ASGI application\n", exc_info=error)
            if not started:  # uvicorn answers 500 then
                self._messages.put((500, [(b"content-type", b"text/plain; charset=utf-8")]))
                self._messages.put(b"Internal Server Error")
                self._messages.put(self._END)
            elif not finished:
                self._messages.put(error)
            if not isinstance(error, Exception):
                raise
        else:
            release()
            if not started:
                self._messages.put((500, [(b"content-type", b"text/plain; charset=utf-8")]))
                self._messages.put(b"Internal Server Error")
                self._messages.put(self._END)
            elif not finished:
                self._messages.put(RuntimeError("the app returned without completing its answer"))

    def next(self, timeout: float | None) -> Any:
        """The app's next message: (status, headers), a piece of the body, the end, or an error;
        raises `queue.Empty` when none comes within `timeout` seconds."""
        if self._pending:
            return self._pending.pop(0)
        message = self._messages.get(timeout=timeout)
        if isinstance(message, _Whole):
            self._pending = [message.body, self._END] if message.body else [self._END]
            return message.status, message.headers
        return message

    def close(self) -> None:
        """The client is done with the answer: a disconnect for the app if it is still sending."""
        if self._closed:
            return
        self._closed = True

        def hang_up() -> None:
            if self._gone is not None:
                self._gone.set()

        if not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(hang_up)


def _in_process_sdk_transport(library: Any, server: EmulatorServer) -> Any:
    """An SDK transport (of the SDK's own HTTP library, `library`) that hands each request to the
    app of `server` on its event loop (`_Exchange`), instead of writing it to the socket."""

    class Stream(library.SyncByteStream):  # type: ignore[misc]
        def __init__(self, exchange: _Exchange, request: Any, timeout: float | None) -> None:
            self._exchange, self._request, self._timeout = exchange, request, timeout

        def __iter__(self) -> Any:
            while True:
                piece = _next(self._exchange, self._request, self._timeout)
                if piece is _Exchange._END:
                    return
                if isinstance(piece, BaseException):
                    raise library.RemoteProtocolError(
                        "peer closed connection without sending complete message body", request=self._request
                    ) from piece
                yield piece

        def close(self) -> None:
            self._exchange.close()

    def _next(exchange: _Exchange, request: Any, timeout: float | None) -> Any:
        try:
            return exchange.next(timeout)
        except queue.Empty:
            exchange.close()
            raise library.ReadTimeout("timed out", request=request) from None

    class InProcessSDKTransport(library.BaseTransport):  # type: ignore[misc]
        def handle_request(self, request: Any) -> Any:
            loop = server.loop
            if loop is None or loop.is_closed() or not server._server.started or server._server.should_exit:
                raise library.ConnectError("[Errno 111] Connection refused", request=request)
            url = request.url
            raw_path = url.raw_path.split(b"?", 1)[0]
            from urllib.parse import unquote

            scope = {
                "type": "http",
                "asgi": {"version": "3.0", "spec_version": "2.3"},
                "http_version": "1.1",
                "server": ("127.0.0.1", server.port),
                "client": ("127.0.0.1", 0),
                "scheme": "http",
                "method": request.method,
                "root_path": "",
                "path": unquote(raw_path.decode("ascii")),
                "raw_path": raw_path,
                "query_string": url.query,
                "headers": [(name.lower(), value) for name, value in request.headers.raw],
            }
            timeout = request.extensions.get("timeout", {}).get("read")
            exchange = _Exchange(server, scope, request.read())
            start = _next(exchange, request, timeout)
            if isinstance(start, BaseException):
                exchange.close()
                raise library.RemoteProtocolError("Server disconnected without sending a response.", request=request)
            status, headers = start
            try:
                phrase = http.HTTPStatus(status).phrase.encode("ascii")
            except ValueError:
                phrase = b""
            extensions = {"http_version": b"HTTP/1.1", "reason_phrase": phrase}
            return library.Response(
                status, headers=headers, stream=Stream(exchange, request, timeout), extensions=extensions
            )

        def close_for_good(self) -> None:
            pass

    return InProcessSDKTransport()


def _on_loop(server: EmulatorServer, work: Any) -> Any:
    """`work` (a coroutine) run on the server's event loop; its result, waited for as the admin
    client waits for an answer (30 s)."""
    assert server.loop is not None
    future = asyncio.run_coroutine_threadsafe(work, server.loop)
    try:
        return future.result(30)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise httpx.ReadTimeout("the ptc-emulator server did not answer in time") from None


def _in_use(transport: Any) -> bool:
    """Whether a transport's pool holds a connection a response still uses (one not read to its end)."""
    pool = getattr(transport, "_pool", None)
    return any(not (c.is_idle() or c.is_closed()) for c in getattr(pool, "connections", ()))


class SessionTransports:
    """The connections a session's tests share, one test after another (the pytest plugin's): the
    admin API's (`KeptTransport`; given the `EmulatorServer` of this process, `InProcessTransport`),
    and the one the SDK clients of `PTCEmulator.client()` use,
    made when a test first asks for a client. Given the `EmulatorServer` of this process, that one
    hands each request to the server's app in process (`_in_process_sdk_transport`: no socket,
    the same answers, streams as they come); else a test's clients reuse the connection the
    previous test's opened instead of each opening and closing one. Closing a client leaves
    them open; `settle()`, after each test, closes the SDK's connections when a response was
    left unread (its connection is not reusable), and `close()` closes everything."""

    def __init__(self, server: EmulatorServer | None = None) -> None:
        self.admin: httpx.BaseTransport = InProcessTransport(server) if server is not None else KeptTransport()
        self.server = server
        """The `EmulatorServer` of this process, if the session's server is one."""
        self._sdk: Any = None

    def sdk(self) -> Any:
        """The SDK clients' transport, of the SDK's own HTTP library (not necessarily httpx)."""
        if self._sdk is None:
            import importlib

            import openai

            library = importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])
            if self.server is not None:
                self._sdk = _in_process_sdk_transport(library, self.server)
                return self._sdk

            class KeptSDKTransport(library.HTTPTransport):  # type: ignore[misc,name-defined]
                def close(self) -> None:
                    pass

                def close_for_good(self) -> None:
                    super().close()

            self._sdk = KeptSDKTransport(verify=_no_tls())
        return self._sdk

    def settle(self) -> None:
        """After a test: a response it left unread holds its connection; the SDK's pool is closed
        then (the next test's clients open a new one)."""
        if self._sdk is not None and _in_use(self._sdk):
            self._sdk.close_for_good()
            self._sdk = None

    def close(self) -> None:
        if isinstance(self.admin, KeptTransport):
            self.admin.close_for_good()
        if self._sdk is not None:
            self._sdk.close_for_good()
            self._sdk = None


class PTCEmulator:
    """One test's view of the emulator: its own scope, scenarios and journal.

    `base_url` is the scoped URL (`http://127.0.0.1:PORT/scopes/<scope>/v1`): any client given it
    is in this test's scope, with no header; `server_url` is the server's own `/v1` URL.
    `transports` (a `SessionTransports`): connections kept from one test to the next, for the
    admin API and for `client()`'s clients; `transport`: the admin API's alone."""

    def __init__(
        self,
        base_url: str,
        scope: str | None = None,
        api_key: str = API_KEY,
        *,
        transport: Any = None,
        transports: SessionTransports | None = None,
    ) -> None:
        self.server_url = _env.server_url(base_url)
        self.scope = scope or f"test-{uuid.uuid4().hex[:12]}"
        self.base_url = _env.scoped_url(self.server_url, self.scope)
        self.api_key = api_key
        root = self.server_url[: -len("/v1")] if self.server_url.endswith("/v1") else self.server_url
        self._transports = transports
        if transports is not None and transport is None:
            transport = transports.admin
        self._admin_options: dict[str, Any] = {
            "base_url": f"{root}/_emulator",
            # Admin writes must declare JSON (a web page cannot send that without a preflight).
            "headers": {
                SCOPE_HEADER: self.scope,
                "Authorization": f"Bearer {api_key}",
                "Content-Type": "application/json",
            },
            "timeout": 30,
            **({"transport": transport} if transport is not None else {"verify": _verify(root)}),
        }
        self._clients: list[Any] = []

    @functools.cached_property
    def admin(self) -> httpx.Client:
        """The admin API's client (`/_emulator/...`, in this test's scope), made when first used:
        a test whose admin calls all go straight to the server of this process makes none."""
        return httpx.Client(**self._admin_options)

    @property
    def inspector_url(self) -> str:
        """The trace inspector's page, showing this test's scope (the key, if any, is not in it)."""
        return inspector_url(self.server_url, self.scope)

    @property
    def env(self) -> dict[str, str]:
        """`OPENAI_BASE_URL` (the scoped URL), `OPENAI_API_KEY`, and the Agents SDK's tracing off:
        for a subprocess (`env={**os.environ, **ptc_emulator.env}`) or code that builds its own client."""
        return _env.environ(self.base_url, self.api_key)

    def use_env(self, monkeypatch: Any) -> dict[str, str]:
        """Set `env` in this process for the test, with pytest's `monkeypatch` (undone after it):
        `OpenAI()`, `AsyncOpenAI()` and the Agents SDK's default client then land in this scope."""
        return _env.apply(monkeypatch, self.base_url, self.api_key)

    @property
    def headers(self) -> dict[str, str]:
        """Headers that put a request in this test's scope (the SDK clients below send them)."""
        return {SCOPE_HEADER: self.scope}

    def _aim(self, options: dict[str, Any]) -> None:
        """An SDK client's options: the key, the scoped URL and the scope header; a client given
        another scope's header goes to the server's own URL (the URL's scope would contradict it)."""
        options.setdefault("api_key", self.api_key)
        headers = {**self.headers, **options.get("default_headers", {})}
        options.setdefault("base_url", self.base_url if headers[SCOPE_HEADER] == self.scope else self.server_url)
        options["default_headers"] = headers

    def client(self, **options: Any) -> Any:
        """An `openai.OpenAI` aimed at the emulator, in this test's scope; closed when the test ends.
        Given no `http_client`, one on the session's transport: for the server the pytest plugin
        started in this process, its requests are handed to the app in process, without a socket."""
        import openai

        self._aim(options)
        if "http_client" not in options and _plain_http(options["base_url"]):
            if self._transports is not None:
                options["http_client"] = openai.DefaultHttpxClient(transport=self._transports.sdk())
            else:
                options["http_client"] = openai.DefaultHttpxClient(verify=_no_tls())
        client = openai.OpenAI(**options)
        self._clients.append(client)
        return client

    def async_client(self, **options: Any) -> Any:
        """An `openai.AsyncOpenAI` aimed at the emulator, in this test's scope.

        Its HTTP client keeps no idle connection, so none outlives the test's event loop (the loop
        is gone before this fixture's teardown could close them). This is done with connection
        limits, not a `Connection: close` header, which would also go into a WebSocket handshake
        (`responses.connect()`) and break it."""
        import openai

        self._aim(options)
        if "http_client" not in options:
            # The SDK's own HTTP library's Limits class (it is not necessarily httpx's).
            limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_keepalive_connections=0)
            verify = _verify(options["base_url"])
            options["http_client"] = openai.DefaultAsyncHttpxClient(verify=verify, limits=limits)
        return openai.AsyncOpenAI(**options)

    def add_scenario(self, scenario: dict[str, Any] | str | Path) -> str:
        """Add a scenario for this test: a dict, a YAML string, or a path to a YAML file.

        Returns its name (given, the file's stem, or generated)."""
        body: dict[str, Any]
        if isinstance(scenario, Path):
            body = {"yaml": scenario.read_text(encoding="utf-8"), "name": scenario.stem}
        elif isinstance(scenario, str):
            body = {"yaml": scenario}
        else:
            body = scenario
        server = self._direct()
        if server is not None:
            content = httpx.Request("POST", "http://emulator", json=body).content  # the bytes httpx would send
            if len(content) <= server.settings.max_body_bytes:  # (a longer one gets the edge's 413)
                from ptc_emulator.api.routes.admin import scenario_added
                from ptc_emulator.emulator.errors import EmulatorError

                try:
                    added = _on_loop(server, scenario_added(server.app.state.emulator, self.scope, content))
                except EmulatorError as error:
                    raise ValueError(error.message) from None
                return str(added["name"])
        reply = self.admin.post("/scenarios", json=body)
        if reply.status_code != 201:
            raise ValueError(reply.json()["error"]["message"])
        return str(reply.json()["name"])

    def remove_scenario(self, name: str) -> None:
        """Remove a scenario this test added."""
        reply = self.admin.delete(f"/scenarios/{name}")
        if reply.status_code != 200:
            raise KeyError(reply.json()["error"]["message"])

    @property
    def scenarios(self) -> list[dict[str, Any]]:
        """The scenarios this test can match, in matching order: its own, and the unscoped ones
        (scenario files); each `{name, source, scope, priority, turns, uses}` (`uses`: how many
        requests the server chose it for)."""
        reply = self.admin.get("/scenarios")
        reply.raise_for_status()
        return list(reply.json()["data"])

    @property
    def journal(self) -> list[dict[str, Any]]:
        """This test's requests and responses, oldest first, with per-response figures."""
        reply = self.admin.get("/journal")
        reply.raise_for_status()
        return list(reply.json()["data"])

    @property
    def conversations(self) -> list[dict[str, Any]]:
        """This test's journal figures per conversation (one run of a task each), oldest first:
        tokens, turns, calls by kind and route, retries, bytes kept out of context, latency."""
        reply = self.admin.get("/journal/conversations")
        reply.raise_for_status()
        return list(reply.json()["data"])

    @property
    def entries(self) -> list[Any]:
        """The journal as typed entries (`ptc_emulator.testing.assertions.JournalEntry` dataclasses,
        `figures` a `Figures`): `entry.scenario`, `entry.figures.program_tool_calls`, `entry.error`."""
        from ptc_emulator.testing.assertions import JournalEntry

        return [JournalEntry.from_dict(e) for e in self.journal]

    def requests(self, *, status: int | None = None, scenario: str | None = None, path: str | None = None) -> list[Any]:
        """This test's journal entries (typed), those with this status, scenario and path if given."""
        return [
            e
            for e in self.entries
            if (status is None or e.status == status)
            and (scenario is None or e.scenario == scenario)
            and (path is None or e.path == path)
        ]

    def calls(self, name: str | None = None, route: str | None = None) -> list[Any]:
        """The tool calls of this test (`ToolCall`: name, arguments parsed, route `program` or
        `direct`, call_id, the calling program, the output sent back), oldest first; of one tool
        and one route if given."""
        from ptc_emulator.testing.assertions import tool_calls

        if route not in (None, "program", "direct"):
            raise ValueError(f"route is 'program' or 'direct', not {route!r}")
        return [c for c in tool_calls(self.entries) if (name is None or c.name == name) and route in (None, c.route)]

    def assert_called(
        self,
        name: str,
        times: int | None = None,
        *,
        args: dict[str, Any] | Callable[[Any], bool] | None = None,
        route: str | None = None,
    ) -> list[Any]:
        """Fail unless tool `name` was called `times` times (at least once when left out), directly
        or by programs (`route`: only `"program"` or `"direct"` calls), counting only the calls whose
        arguments include `args` (an object's entries, recursively) or satisfy it (a function of the
        arguments). Returns those calls (`ToolCall`s); the message shows every request of the test
        with the calls it carried."""
        from ptc_emulator.testing.assertions import called

        found, problem = called(self.entries, name, times=times, args=args, route=route)
        if problem is not None:
            raise AssertionError(problem)
        return found

    def assert_requests(
        self,
        times: int | None = None,
        *,
        instructions: str | re.Pattern[str] | None = None,
        input: str | re.Pattern[str] | None = None,
        model: str | re.Pattern[str] | None = None,
        scenario: str | None = None,
        status: int | None = None,
        where: Callable[[Any], bool] | None = None,
    ) -> list[Any]:
        """Fail unless `times` of this test's requests (at least one when left out) have all that is
        given: `instructions` found (`re.search`) in the request's instructions or a system or
        developer message, `input` in its latest user message, `model` matching its model in full,
        answered by `scenario`, with `status`, `where(entry)` true. Returns those entries; the
        message shows every request of the test."""
        from ptc_emulator.testing.assertions import requested

        found, problem = requested(
            self.entries,
            times=times,
            instructions=instructions,
            input=input,
            model=model,
            scenario=scenario,
            status=status,
            where=where,
        )
        if problem is not None:
            raise AssertionError(problem)
        return found

    def assert_all_scenarios_used(self) -> None:
        """Fail unless every scenario this test added answered a request; the message lists the
        unused ones and every request with what answered it."""
        from ptc_emulator.testing.assertions import unused

        added = [str(s["name"]) for s in self.scenarios if s.get("scope") == self.scope and not s.get("uses")]
        problem = unused(added, self.entries)
        if problem is not None:
            raise AssertionError(problem)

    def assert_no_unmatched(self) -> None:
        """Fail if any request of this test matched no scenario; the message shows each one's input,
        its closest scenario and why that one did not match."""
        from ptc_emulator.testing.assertions import unmatched

        problem = unmatched(self.entries)
        if problem is not None:
            raise AssertionError(problem)

    def strict_failure(self, *, unmatched: bool = True, unused: bool = True) -> str | None:
        """What strict mode reports for this test, now: every failed check of the two above (those
        asked for) in one message, the requests numbered from 1; None when all pass."""
        from ptc_emulator.testing.assertions import strict_failure

        # Chosen for a request the journal does not hold (an Agents API session's turn): used too.
        added = [str(s["name"]) for s in self.scenarios if s.get("scope") == self.scope and not s.get("uses")]
        return strict_failure(
            added if unused else [], self.entries, unmatched_requests=unmatched, unused_scenarios=unused
        )

    def compare(self, direct: str | None = None, ptc: str | None = None) -> dict[str, Any]:
        """The comparison report of a direct run and a PTC run of the same task (the guide's
        "Evaluate"). Each is a conversation or response id; left out, the latest run without
        programs and the latest with. The report's `summary` is the text to read."""
        params = {k: v for k, v in (("direct", direct), ("ptc", ptc)) if v is not None}
        reply = self.admin.get("/journal/compare", params=params)
        if reply.status_code != 200:
            raise ValueError(reply.json()["error"]["message"])
        return dict(reply.json())

    def set_hosted(self, script: dict[str, Any] | None) -> None:
        """Results for the tools that run on OpenAI's side, for this test: `{"mcp_servers": {label:
        {"tools": [...]}}, "code_interpreter": [...], "shell": [...]}` (see docs/tools-hosted.md).
        Inline programs use them, and so do scenarios that script none. None removes them."""
        if script is None:
            self.admin.delete("/hosted").raise_for_status()
        else:
            self.admin.put("/hosted", json=script).raise_for_status()

    def clear_journal(self) -> None:
        self.admin.delete("/journal").raise_for_status()

    def reset(self) -> None:
        self.admin.post("/reset").raise_for_status()

    def end(self, *, unmatched: bool = True, unused: bool = True) -> bool:
        """The end of this test in one call (`POST /_emulator/end`): when the strict checks asked
        for pass, this scope's scenarios and journal are forgotten (the server's caches kept) and
        this is True; when one fails, nothing is forgotten (`strict_failure()` then says what
        happened) and this is False."""
        server = self._direct()
        if server is not None:
            from ptc_emulator.api.routes.admin import scope_ended

            state = server.app.state.emulator
            return bool(_on_loop(server, scope_ended(state, self.scope, unmatched=unmatched, unused=unused))["ended"])
        params = {"unmatched": str(unmatched).lower(), "unused": str(unused).lower()}
        reply = self.admin.post("/end", params=params)
        reply.raise_for_status()
        return bool(reply.json()["ended"])

    def _direct(self) -> EmulatorServer | None:
        """The server of this process, when an admin call may go straight to what its route does
        (`api/routes/admin.py`) on the server's loop, without HTTP: none of what the app does
        around a route applies to this emulator's calls (its key is the server's, its scope is
        the header's, and no store shared with other replicas is to be read first); else None."""
        server = self._transports.server if self._transports is not None else None
        if server is None or server.loop is None or server.loop.is_closed():
            return None
        key = server.settings.api_key
        if (key is not None and key != self.api_key) or server.app.state.emulator.shared is not None:
            return None
        return server

    def close(self) -> None:
        """Close the admin connection and every client `client()` made."""
        for client in self._clients:
            client.close()
        self._clients.clear()
        if "admin" in self.__dict__:
            self.admin.close()

    def __repr__(self) -> str:
        return f"PTCEmulator(base_url={self.base_url!r}, scope={self.scope!r})"
