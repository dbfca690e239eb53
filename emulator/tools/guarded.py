"""The MCP client's connections under the egress policy (`egress.py`): a network backend that
resolves once, checks each address and connects to the one checked, counting what it reads, and a
transport that refuses a compressed answer. Apart from `egress.py` because it imports httpcore2
(and trio with it, where installed), which nothing but an MCP tool's client needs: `mcp.py`
imports this module in a worker thread, with the `mcp` package.
"""

from __future__ import annotations

import re
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.tools.egress import AnswerCompressed, EgressRefused, McpPolicy, _address, _Budget, _Check

__all__ = ["guarded_client", "trust"]


class _Stream(httpcore2.AsyncNetworkStream):
    def __init__(self, inner: httpcore2.AsyncNetworkStream, budget: _Budget) -> None:
        self.inner = inner
        self.budget = budget

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = await self.inner.read(max_bytes, timeout)
        self.budget.spend(len(data))
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self.inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore2.AsyncNetworkStream:
        return _Stream(await self.inner.start_tls(ssl_context, server_hostname, timeout), self.budget)

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class _Backend(httpcore2.AsyncNetworkBackend):
    """Resolves once, checks the addresses, connects to the one checked, counts what it reads."""

    def __init__(self, policy: McpPolicy) -> None:
        self.check = _Check(policy)
        self.budget = _Budget(policy.max_answer_bytes)
        self.inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        import anyio

        literal = _address(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as e:
                raise httpcore2.ConnectError(f"could not resolve {host}") from e
            addresses = [ip for ip in (_address(str(info[4][0])) for info in found) if ip is not None]
        refusals = [(ip, self.check.refusal(host, port, ip)) for ip in addresses]
        allowed = [ip for ip, problem in refusals if problem is None]
        if not allowed:
            raise EgressRefused(next((p for _, p in refusals if p), messages.mcp_no_address(host)))
        failure: Exception | None = None
        for ip in allowed:  # the addresses checked, and only those
            try:
                stream = await self.inner.connect_tcp(
                    str(ip), port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except httpcore2.ConnectError as e:
                failure = e
                continue
            return _Stream(stream, self.budget)
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise EgressRefused(messages.mcp_tcp_only())

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


_TOKEN = re.compile(r"[a-z0-9-]{1,20}")


class _Identity(httpx2.AsyncBaseTransport):
    """Refuses an answer with a Content-Encoding (the request asked for none): httpx would unpack
    it past the byte limit, which counts what the wire carries."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            said = encoding if _TOKEN.fullmatch(encoding) else "?"  # nothing else of the server's
            raise AnswerCompressed(messages.mcp_compressed(said))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


_TRUST: ssl.SSLContext | None = None


def trust() -> ssl.SSLContext:
    """The TLS context every session's connections share, made once per process (the MCP client's
    process makes it before it says it is ready). Made per session, as before, it read the whole
    CA bundle twice for every listing and call (`load_verify_locations`, some 25-50 ms each with
    the interpreter held): the process's one event loop did little else under a dozen clients'
    calls, and every other client's call waited behind that work (issue 38). A context holds
    only what it trusts; nothing of one connection is kept in it for another."""
    global _TRUST
    if _TRUST is None:
        _TRUST = httpx2.create_ssl_context()
    return _TRUST


def guarded_client(
    policy: McpPolicy,
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """An httpx2 client that connects only where `policy` allows, with its deadlines and limit
    (an `McpHttpClientFactory` once `policy` is bound; the `timeout` asked for is ignored)."""
    trusted = trust()
    transport = httpx2.AsyncHTTPTransport(verify=trusted, trust_env=False)
    transport._pool = httpcore2.AsyncConnectionPool(ssl_context=trusted, network_backend=_Backend(policy))
    deadline = httpx2.Timeout(policy.timeout_s, connect=policy.connect_timeout_s)
    headers = {k: v for k, v in (headers or {}).items() if k.lower() != "accept-encoding"}
    headers["Accept-Encoding"] = "identity"
    return httpx2.AsyncClient(
        headers=headers,
        timeout=deadline,
        auth=auth,
        transport=_Identity(transport),
        trust_env=False,
        follow_redirects=False,
    )
