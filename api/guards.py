"""Checks at the edge, before a request reaches a route: content types and the Host header.

* A POST with a body under `/v1/` must be JSON, as the hosted API requires (400
  `unsupported_content_type`, worded as it words it). A form or `text/plain` body never reaches
  the JSON parser.
* Every POST to the admin API (`/_emulator/`) must declare a JSON content type, body or not:
  a web page can send a form or `text/plain` POST to any address without a CORS preflight, but
  not a JSON one. So no page a developer visits can plant or reset scenarios.
* Every request must name this server in its `Host` header: the address it is bound to, a
  loopback name, or a host given with `--allowed-host`. A DNS-rebinding page (whose own name
  resolves to 127.0.0.1) sends its own name, so it can neither read the journal, which holds
  request bodies, nor list sessions, read responses or run programs through `/v1/`.
* A request or WebSocket upgrade that carries an `Origin` must come from the server's own origin
  (its inspector) or one given with `--allowed-origin`. Browsers send no CORS preflight before
  a WebSocket upgrade, nor before a "simple" POST: without this, any page a developer visits could
  run programs, reach loopback-only services through an `mcp` tool, or send a recording server's
  upstream key on its behalf. SDK clients send no `Origin`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.errors import EmulatorError, StatusError

__all__ = ["host_allowed", "origin_allowed", "refusal"]

ADMIN_PREFIX = "/_emulator"
_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}
_ANY = {"0.0.0.0", "::", ""}


def _media_type(value: str | None) -> str:
    return (value or "").split(";", 1)[0].strip().lower()


def _is_json(value: str | None) -> bool:
    media = _media_type(value)
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _unsupported(value: str | None) -> StatusError:
    return messages.unsupported_content_type(value if value is not None else "")


def _hostname(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):  # [::1]:8000
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_allowed(host: str | None, bound: str, allowed: tuple[str, ...]) -> bool:
    """Whether a `Host` header names this server. Bound to every address (0.0.0.0), any IP
    literal is the server itself; names other than loopback ones must be allowed explicitly."""
    if host is None:
        return True  # HTTP/1.0 without Host: not a browser
    name = _hostname(host)
    if "*" in allowed:
        return True
    if name in _LOOPBACK_NAMES or name == bound.strip("[]").lower() or name in {a.lower() for a in allowed}:
        return True
    return bound in _ANY and _is_ip(name)


def _origin(value: str) -> str:
    return value.strip().lower().rstrip("/")


def origin_allowed(origin: str, host: str | None, allowed: tuple[str, ...]) -> bool:
    """Whether a request's `Origin` is the server's own (the page it came from was served under the
    very `Host` it sends to) or one allowed with `--allowed-origin` (`*`: any)."""
    origin = _origin(origin)
    if "*" in allowed or origin in {_origin(a) for a in allowed}:
        return True
    scheme, _, netloc = origin.partition("://")
    if scheme not in ("http", "https") or not netloc or host is None:
        return False  # "null" (a sandboxed frame, a file), or no Host to be the same as
    default = ":80" if scheme == "http" else ":443"
    own = host.strip().lower()
    return netloc == own or netloc + default == own or netloc == own + default


def header_refusal(http_version: str, raw: list[tuple[bytes, bytes]]) -> EmulatorError | None:
    """Why a request's `Host` or `Origin` cannot be checked (held twice, or no `Host` in HTTP/1.1),
    or None: the other checks read one value of each."""
    counts = {b"host": 0, b"origin": 0}
    for name, _ in raw:
        lowered = name.lower()
        if lowered in counts:
            counts[lowered] += 1
    for name, count in counts.items():
        if count > 1:
            return messages.header_repeated(name.decode("ascii"))
    if counts[b"host"] == 0 and http_version not in ("1.0", "0.9"):
        return messages.host_missing()
    return None


def refusal(
    scope_type: str,
    method: str,
    path: str,
    headers: Mapping[str, str],
    bound: str,
    allowed: tuple[str, ...],
    origins: tuple[str, ...] = (),
) -> StatusError | None:
    """Why this request is refused at the edge, or None."""
    admin = path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/")
    host = headers.get("host")
    if not host_allowed(host, bound, allowed):
        return messages.host_not_allowed(host, admin)
    origin = headers.get("origin")
    if origin is not None and not origin_allowed(origin, host, origins):
        return messages.origin_not_allowed(origin)
    if scope_type != "http" or method != "POST":
        return None
    content_type = headers.get("content-type")
    if admin and not _is_json(content_type):
        return _unsupported(content_type)
    if path.startswith("/v1/") and not _is_json(content_type):
        has_body = headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers
        if has_body:
            return _unsupported(content_type)
    return None
