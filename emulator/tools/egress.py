"""Where the MCP client may connect, for how long, and how much it reads (docs/limits.md, "MCP").

A request names its MCP server's URL, so without a policy any caller could make the emulator
reach what only the developer's machine reaches: the emulator itself (`/_emulator/reset`), other
loopback services, the cloud metadata address (169.254.169.254), the private network. The client
refuses every address that is not public, unless `--mcp-allow-host` names the host (or
`--mcp-allow-private` allows loopback and private ranges), and never connects to the emulator's
own port on this machine.

The check is made on the address connected, not on the URL: the client's network backend
resolves the host once, checks each address, and connects to the address it checked (a DNS
answer that changes between a check and a connect cannot move the connection; a redirect is not
followed: the call fails, naming where it pointed). TLS still names the URL's host. Every byte
read from the server counts against the call's answer limit, and the whole call (listing included) has one deadline. The
answer is asked for uncompressed (`Accept-Encoding: identity`) and a compressed one is refused
before a byte of it is read: the limit counts bytes off the wire, and a few MiB of gzip unpack
to GiBs (which httpx would unpack on the event loop).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ptc_emulator.emulator import messages

__all__ = [
    "AnswerCompressed",
    "AnswerTooLarge",
    "EgressRefused",
    "McpPolicy",
    "OwnAddresses",
    "own_ports",
    "refusal_for_url",
]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class McpPolicy:
    """The MCP client's egress policy and bounds (the `--mcp-*` options)."""

    allow_hosts: tuple[str, ...] = ()
    """`HOST` or `HOST:PORT` (`[::1]:8080`) the client may reach although not public."""
    allow_private: bool = False
    """Loopback and private ranges (10/8, 172.16/12, 192.168/16, fc00::/7) allowed; link-local is not."""
    connect_timeout_s: float = 10.0
    timeout_s: float = 30.0
    """The whole of one listing or call; a call a program makes also ends within the program's timeout."""
    timeout_flag: str = "--mcp-timeout"
    """The option that set `timeout_s`, for the error that reports it."""
    max_answer_bytes: int = 8 * 2**20
    """Bytes read from the server for one listing or call (headers and framing included)."""


class EgressRefused(Exception):
    """The policy forbids this address; the message names the host and how to allow it."""


class AnswerTooLarge(Exception):
    """The server sent more than the answer limit."""


class AnswerCompressed(Exception):
    """The server sent a compressed answer although asked for none."""


_OWN_PORTS: Counter[int] = Counter()
"""Ports this process serves an emulator on, by how many apps serve there."""
_OWN_LOCK = threading.Lock()


class OwnAddresses:
    """The ports one app serves on, noted from its requests' ASGI `server`; released when it stops
    (a port an app no longer serves may be another server's later)."""

    def __init__(self) -> None:
        self._ports: set[int] = set()

    def note(self, server: Any) -> None:
        """Note the (host, port) a request reached the emulator on: never an MCP server's."""
        if not (isinstance(server, tuple | list) and len(server) == 2 and isinstance(server[1], int)):
            return
        port = server[1]
        if port in self._ports:
            return
        with _OWN_LOCK:
            self._ports.add(port)
            _OWN_PORTS[port] += 1

    def release(self) -> None:
        with _OWN_LOCK:
            for port in self._ports:
                _OWN_PORTS[port] -= 1
                if _OWN_PORTS[port] <= 0:
                    del _OWN_PORTS[port]
            self._ports.clear()


def own_ports() -> list[int]:
    """The ports this process serves an emulator on (for the MCP client's process, which checks
    the addresses it connects to against them)."""
    with _OWN_LOCK:
        return sorted(_OWN_PORTS)


def _address(text: str) -> Address | None:
    try:
        ip = ipaddress.ip_address(text.strip("[]").split("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _kind(ip: Address) -> str | None:
    """Why `ip` is not public (None: it is)."""
    if ip.is_loopback or ip.is_unspecified:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_private or ip.is_reserved or ip.is_multicast or not ip.is_global:
        return "private"
    return None


def _is_local(ip: Address) -> bool:
    """Whether `ip` is an address of this machine (one it can bind)."""
    if ip.is_loopback or ip.is_unspecified:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((str(ip), 0))
        except OSError:
            return False
    return True


def _port_text(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Check:
    def __init__(self, policy: McpPolicy) -> None:
        self.policy = policy

    def _allowed_entry(self, host: str, port: int, ip: Address) -> bool:
        for entry in self.policy.allow_hosts:
            name, _, entry_port = entry.lower().rpartition(":") if _has_port(entry) else (entry.lower(), "", "")
            name = name.strip("[]")
            if entry_port and entry_port != str(port):
                continue
            if name == host.lower().strip("[]") or _address(name) == ip:
                return True
        return False

    def refusal(self, host: str, port: int, ip: Address) -> str | None:
        """Why the client must not connect to `ip` (which `host` resolved to) on `port`."""
        if port in _OWN_PORTS and _is_local(ip):
            return messages.mcp_is_the_emulator(_port_text(host, port), str(ip))
        kind = _kind(ip)
        if kind is None or self._allowed_entry(host, port, ip):
            return None
        if self.policy.allow_private and kind in ("loopback", "private"):
            return None
        return messages.mcp_address_refused(host, str(ip), kind, _port_text(host, port), kind != "link-local")


def _has_port(entry: str) -> bool:
    if entry.startswith("["):
        return "]:" in entry
    return entry.count(":") == 1


def refusal_for_url(url: str) -> str | None:
    """What is wrong with a server URL before any connection (its scheme, its host)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return messages.mcp_url_scheme(parts.scheme)
    if not parts.hostname:
        return messages.mcp_url_no_host()
    return None


class _Budget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.read = 0

    def spend(self, count: int) -> None:
        self.read += count
        if self.read > self.limit:
            raise AnswerTooLarge(messages.mcp_answer_too_large(self.limit))
