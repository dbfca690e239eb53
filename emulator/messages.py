"""The catalogue: every message the emulator answers with, each written once, grouped by surface.

The emulator's promise is the hosted API's message, exactly; so the messages live here, not at the
places that raise them. Two sorts of entry:

* an **error**: a function taking the message's variable parts and returning the exception to
  raise, whose class carries the status, type and code (`emulator/errors.py`): `raise
  messages.no_tool_output(label, call_id)`;
* a **text**: a function returning a wording that travels inside something else: a response's
  `error`, the reason inside a validation error (`Invalid 'metadata': <reason>.`), the reason a
  scenario turn cannot play, an MCP call's `error`, a WebSocket or agent event.

Every module names an entry through this module (`messages.x(...)`), never by importing the name,
so a wording changed here (or patched in a test) changes everywhere it is used.
`tests/unit/test_messages.py` holds that: it lists any wording written inline elsewhere, checks
that `docs/errors.md`'s catalogue is what `python -m ptc_emulator.emulator.messages docs/errors.md`
writes, and makes each rule fire through its entry. An entry's docstring says when it is answered.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from ptc_emulator.emulator.errors import (
    ContractViolation,
    EmulatorError,
    InvalidEncryptedContent,
    InvalidFingerprint,
    InvalidRequest,
    InvalidScenario,
    InvalidType,
    InvalidValue,
    MissingParameter,
    NoScenarioMatched,
    NotFound,
    PayloadTooLarge,
    PreviousResponseNotFound,
    ProgramDivergence,
    ScenarioTurnError,
    StatusError,
    Unauthorized,
    UnknownParameter,
    UnsupportedParameter,
    UpstreamError,
    UpstreamInvalidToolCall,
    UpstreamTimeout,
)

__all__ = ["CATALOGUE", "SURFACES", "Entry", "markdown"]

P = ParamSpec("P")
E = TypeVar("E", bound=EmulatorError)


@dataclass(frozen=True)
class Entry:
    """One catalogue entry: its function, the surface it belongs to, and, for a text, where it
    appears. `samples` are the parts the docs show it with (by default the parameter's default,
    else `<name>`)."""

    name: str
    surface: str
    function: Callable[..., EmulatorError | str]
    where: str | None = None
    samples: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_text(self) -> bool:
        return self.where is not None

    @property
    def when(self) -> str:
        doc = inspect.getdoc(self.function) or ""
        return " ".join(doc.split("\n\n", 1)[0].split())

    def sample(self) -> EmulatorError | str:
        """The entry made with its sample parts."""
        parts: dict[str, Any] = {}
        for name, parameter in inspect.signature(self.function).parameters.items():
            if name in self.samples:
                parts[name] = self.samples[name]
            elif parameter.default is inspect.Parameter.empty:
                parts[name] = f"<{name}>"
        return self.function(**parts)


CATALOGUE: dict[str, Entry] = {}
"""Every entry by its name, in the order of this module."""

SURFACES: list[str] = []
"""The surfaces, in the order of this module."""


def _register(surface: str, function: Callable[..., Any], where: str | None, samples: Mapping[str, Any]) -> None:
    name = function.__name__
    assert name not in CATALOGUE, f"two entries named {name}"
    if surface not in SURFACES:
        SURFACES.append(surface)
    CATALOGUE[name] = Entry(name, surface, function, where, dict(samples))


SHOWN_CHARS = 256
"""The characters of a parameter's name, or of a value it was sent, that an error shows; a longer
one is cut there and ends in `…`."""


def shown_text(text: str) -> str:
    """`text` (a parameter's name, a value) as an error shows it: past `SHOWN_CHARS` characters cut
    there, with `…`."""
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


_OWN_PARTS = frozenset(
    {
        *("supported", "expected", "allowed", "offered", "started", "note", "syntax", "described"),
        *("divergence", "detail", "why", "fault", "body", "closest", "report", "scoped", "inline"),
        *("turn", "answered", "made"),
    }
)
"""Parts of an error's wording that the emulator composes (the values a parameter takes, a
scenario report, a transport error's text): shown whole, as whoever composed them bounded what
they quote. Every other part (an id, a name, a value, a `param`) is a value of the request, or
may be, and is cut at `SHOWN_CHARS`."""
WORDS_CHARS = 1024
_WORDS_PARTS = frozenset({"problem", "reason", "message", "said", "executed"})
"""Parts that are a validator's, a compiler's or a loader's words: composed by the emulator or a
library, but they may quote a value of the request whole (a schema's `type`, a bad `pattern`):
shown at most `WORDS_CHARS` characters long."""


def _shown_part(name: str | None, value: Any) -> Any:
    """A part an error is made with, as it shows it: a string cut (`shown_text`), a list or tuple
    of strings each cut (and at most `SHOWN_CHARS` of them), anything else as it is."""
    if name in _OWN_PARTS:
        return value
    if name in _WORDS_PARTS and isinstance(value, str) and len(value) > WORDS_CHARS:
        return value[:WORDS_CHARS] + "…"
    if name in _WORDS_PARTS:
        return value
    if isinstance(value, str):
        return shown_text(value)
    if isinstance(value, (list, tuple)) and all(isinstance(part, str) for part in value):
        return type(value)(shown_text(part) for part in value[:SHOWN_CHARS])
    return value


def _shown_parts(function: Callable[P, E]) -> Callable[P, E]:
    """`function` (an error entry) made with its parts as an error shows them (`_shown_part`), and
    its `param` cut too: the one place every error's wording is filled, so no error grows with
    the request, whatever part of it (an id, a name, a schema's type or pattern) the wording
    echoes (a 15.5 MB `previous_response_id` was echoed whole)."""

    names = list(inspect.signature(function).parameters)

    @functools.wraps(function)
    def made(*args: P.args, **kwargs: P.kwargs) -> E:
        shown_args = [_shown_part(name, value) for name, value in zip(names, args, strict=False)]
        shown_args += args[len(names) :]
        shown_kwargs = {name: _shown_part(name, value) for name, value in kwargs.items()}
        error = function(*shown_args, **shown_kwargs)
        if isinstance(error.param, str):
            error.param = shown_text(error.param)
        return error

    return made


def error(surface: str, **samples: Any) -> Callable[[Callable[P, E]], Callable[P, E]]:
    """Register an error entry (a function returning the exception to raise), its parts shown cut
    (`_shown_parts`)."""

    def register(function: Callable[P, E]) -> Callable[P, E]:
        shown = _shown_parts(function)
        _register(surface, shown, None, samples)
        return shown

    return register


def text(surface: str, where: str, **samples: Any) -> Callable[[Callable[P, str]], Callable[P, str]]:
    """Register a text entry (a wording that travels inside something else, `where`)."""

    def register(function: Callable[P, str]) -> Callable[P, str]:
        _register(surface, function, where, samples)
        return function

    return register


# ==== the entries, by surface ====================================================================

EDGE = "The edge: API keys, hosts, bodies, routes"
REQUEST = "Request parameters"
ITEMS = "Conversation items"
PROGRAMS = "Programs and sealed content"
TOOLS = "Tools and tool search"
HISTORY = "Stored responses and items"
RESPONSES = "Responses: background, compaction, continuations"
CONVERSATIONS = "Conversations API"
SCENARIOS = "Scenarios (the scripted model)"
UPSTREAM = "The model upstream"
MCP = "MCP servers"
PROXY = "The recording proxy"
CASSETTES = "The pytest plugin's cassettes"
AGENTS = "Agents API"
SOCKET = "WebSocket mode and steering"
ADMIN = "Admin API, journal and inspector"


# ---- the edge ---------------------------------------------------------------------------------------


@error(EDGE)
def database_away() -> StatusError:
    """The server's PostgreSQL database does not answer (stopped, unreachable, or no connection in
    time): a request, and health, fail at once instead of waiting on it."""
    return StatusError(
        503,
        "The emulator's database does not answer; try again once it is back.",
        type="server_error",
        code="database_unavailable",
    )


@error(EDGE)
def database_busy() -> StatusError:
    """The server's PostgreSQL database answers, but none of the connections the request may take
    came free within the pool's wait (10 s): they all wait on statements, a lock held on a table
    the request needs, say (or none was free at once while the server's 256 spare threads for
    such waits were all lent: the request did not wait); or the server ended one of the
    request's statements at its own limit (`lock_timeout`, `statement_timeout`: 12 s) and rolled
    it back (docs/scale-out.md). Nothing
    was done. Distinct from `database_unavailable`: the database is there; retrying once the lock
    goes succeeds."""
    return StatusError(
        503,
        "The emulator's database connections are all busy (waiting on other statements, or on a lock "
        "held on a table); try again shortly.",
        type="server_error",
        code="database_busy",
    )


@error(EDGE)
def warm_up_failed(problem: BaseException) -> StatusError:
    """The tokenizer's load or the checkers' import, begun as the server started, failed (a broken
    install): every request, and health, answers this instead of a 500 that names nothing."""
    return StatusError(
        503,
        f"The emulator could not finish starting: {type(problem).__name__}: {str(problem)[:300]}. "
        "Reinstall it, then restart the server.",
        type="server_error",
        code="emulator_not_ready",
    )


@error(EDGE)
def server_error() -> EmulatorError:
    """A bug (and a scenario's `http_error: 500` fault, OpenAI's body)."""
    return EmulatorError("The server had an error while processing your request. Sorry about that!")


@error(EDGE)
def api_key_missing() -> Unauthorized:
    """A request without an `Authorization` header to a server started with `--api-key`."""
    return Unauthorized(
        "You didn't provide an API key. You need to provide your API key in an Authorization header using "
        "Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
    )


@error(EDGE, shown="sk-****************1234")
def api_key_incorrect(shown: str) -> Unauthorized:
    """A request whose key is not the server's `--api-key` (`shown`: the key as sent, masked)."""
    return Unauthorized(f"Incorrect API key provided: {shown}. The emulator was started with --api-key.")


@error(EDGE, limit=10485760)
def body_too_large(limit: int) -> PayloadTooLarge:
    """A request body over `--max-body-bytes` (declared, or counted as it arrives)."""
    return PayloadTooLarge(f"Request body too large: the limit is {limit} bytes (set --max-body-bytes).")


@error(EDGE, admin=False)
def host_not_allowed(host: str | None, admin: bool) -> StatusError:
    """A request whose `Host` is neither the bound address nor a loopback name nor `--allowed-host`
    (`admin`: a request to the admin API)."""
    what = "The admin API does" if admin else "The emulator does"
    return StatusError(
        403,
        f"{what} not answer to the host {host!r}: it answers to the address the "
        "server is bound to and to loopback names (start the server with --allowed-host NAME to add one).",
        type="invalid_request_error",
        code="host_not_allowed",
    )


@error(EDGE, name="host")
def header_repeated(name: str) -> InvalidRequest:
    """A request holding its `Host` or `Origin` header more than once (which one to check would be a
    guess: the checks and the app could read different ones)."""
    return InvalidRequest(
        f"The {name!r} header may come once: this request holds it more than once.", code="header_repeated"
    )


@error(EDGE)
def host_missing() -> InvalidRequest:
    """An HTTP/1.1 request (or WebSocket upgrade) without a `Host` header, which HTTP/1.1 asks every
    request to hold."""
    return InvalidRequest("An HTTP/1.1 request must hold a 'Host' header.", code="host_missing")


@error(EDGE)
def origin_not_allowed(origin: str) -> StatusError:
    """A request from a web origin that is not the emulator's own pages nor `--allowed-origin`."""
    return StatusError(
        403,
        f"Requests from the web origin {origin!r} are refused: the emulator answers its own pages and "
        "clients that send no Origin (start the server with --allowed-origin ORIGIN to allow one).",
        type="invalid_request_error",
        code="origin_not_allowed",
    )


@error(EDGE, problem="missing Sec-WebSocket-Key header", status=400)
def websocket_handshake_invalid(problem: str, status: int = 400) -> StatusError:
    """A WebSocket upgrade the server cannot open (before the app sees it): a missing or malformed
    `Sec-WebSocket-Key`, two `Origin` headers, a missing `Connection: Upgrade` (`status` 426);
    `problem`: what is wrong, as the WebSocket layer words it."""
    return StatusError(
        status,
        f"Failed to open a WebSocket connection: {problem}.",
        type="invalid_request_error",
    )


@error(EDGE, version="8")
def websocket_version_unsupported(version: str) -> StatusError:
    """A WebSocket upgrade asking for a protocol version other than 13, the one RFC 6455 defines
    (answered 426 with `Sec-WebSocket-Version: 13`, as the RFC asks)."""
    return StatusError(
        426,
        f"Failed to open a WebSocket connection: unsupported Sec-WebSocket-Version {version[:40]!r}; "
        "this server speaks version 13.",
        type="invalid_request_error",
        headers={"Sec-WebSocket-Version": "13"},
    )


@error(EDGE, shown="text/plain")
def unsupported_content_type(shown: str) -> StatusError:
    """A POST with a body to `/v1/...` that is not JSON, or any POST to the admin API that does not
    say it is (even with no body: a page's form cannot; OpenAI's wording)."""
    return StatusError(
        400,
        f"Unsupported content type: '{shown}'. This API method only accepts 'application/json' requests, but you "
        f"specified the header 'Content-Type: {shown}'. Please try again with a supported content type.",
        type="invalid_request_error",
        code="unsupported_content_type",
    )


@error(EDGE)
def invalid_scope(name: str) -> StatusError:
    """A `/scopes/<scope>/...` URL whose scope is not 1-200 characters of the allowed set."""
    return StatusError(
        400,
        f"Invalid scope in the URL: {name[:60]!r}. A scope is 1-200 characters of letters, digits "
        "and `_ . : @ + = -`, as in /scopes/<scope>/v1/responses.",
        type="invalid_request_error",
        param="scope",
        code="invalid_scope",
    )


@error(EDGE, header="x-ptc-emulator-scope")
def scope_conflict(name: str, header: str, given: str) -> StatusError:
    """A `/scopes/<scope>/...` URL and a scope header naming different scopes."""
    return StatusError(
        400,
        f"The URL names scope {name!r} but the {header} header names {given[:60]!r}: give one, or the same in both.",
        type="invalid_request_error",
        param="scope",
        code="invalid_scope",
    )


@error(EDGE)
def json_parse_error() -> InvalidRequest:
    """A body that is not JSON (or not UTF-8, or nested beyond what the parser takes): OpenAI's wording."""
    return InvalidRequest(
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
        "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
    )


@error(EDGE)
def invalid_url(method: str, path: str) -> StatusError:
    """A path no route has."""
    return StatusError(404, f"Invalid URL ({method} {path})", type="invalid_request_error")


@error(EDGE)
def invalid_method(method: str, path: str) -> StatusError:
    """A route asked with a method it does not take."""
    return StatusError(405, f"Invalid method for URL ({method} {path})", type="invalid_request_error")


@error(EDGE, status=413, detail="<the refusal's text, as the catalogue words it>")
def http_refusal(status: int, detail: str) -> StatusError:
    """A refusal raised while the body is read (a body past `--max-body-bytes` that declared no length:
    `detail` is `body_too_large`'s message)."""
    return StatusError(status, detail, type="invalid_request_error")


@error(EDGE, limit=65536)
def header_fields_too_large(limit: int) -> StatusError:
    """A request whose line and headers take more than `limit` bytes (counted as they arrive, and
    measured whole at the headers' end): the connection is closed after it."""
    return StatusError(
        431,
        f"Request header fields too large: a request's line and headers may take at most {limit} bytes.",
        type="invalid_request_error",
        code="request_header_fields_too_large",
    )


@error(EDGE, limit=65536)
def trailer_fields_too_large(limit: int) -> StatusError:
    """A chunked request that sent more than `limit` bytes after its headers with none of them body
    (trailer fields, chunk size lines and their extensions), counted as they arrive: the connection
    is closed after it."""
    return StatusError(
        431,
        f"Request header fields too large: a chunked request's trailer fields and chunk size lines may take "
        f"at most {limit} bytes between two pieces of its body.",
        type="invalid_request_error",
        code="request_header_fields_too_large",
    )


@error(EDGE, limit=65536, per_byte=16)
def chunk_framing_too_large(limit: int, per_byte: int) -> StatusError:
    """A chunked request whose framing in all (chunk size lines, their extensions, trailer fields)
    took more than `limit` bytes and `per_byte` for each byte of its body: framing never fills the
    body's buffer, so without this bound the server read it on at full speed. The connection is
    closed after it."""
    return StatusError(
        431,
        f"Request header fields too large: a chunked request's chunk size lines, their extensions and its "
        f"trailer fields may take at most {limit} bytes and {per_byte} bytes for each byte of its body, in all.",
        type="invalid_request_error",
        code="request_header_fields_too_large",
    )


@error(EDGE, seconds=30.0)
def head_timeout(seconds: float) -> StatusError:
    """A request whose line and headers had not all arrived `seconds` after the connection opened (its
    first request) or after the request's first byte (the next ones), `--head-timeout`: the connection
    is closed after it. A connection that sent nothing, or has a response still being written, is
    closed without it."""
    return StatusError(
        408,
        f"Request timeout: a request's line and headers must arrive within {seconds:g} seconds "
        "(set --head-timeout); the connection is closed.",
        type="invalid_request_error",
        code="request_timeout",
    )


@error(EDGE, seconds=60.0)
def body_timeout(seconds: float) -> StatusError:
    """A request whose body had not all arrived `seconds` after its headers ended, `--body-timeout`
    (time the server held the body back not counted): the connection is closed after it, and the
    request's work ends. A request whose response had begun is closed without it."""
    return StatusError(
        408,
        f"Request timeout: a request's body must arrive within {seconds:g} seconds of its headers "
        "(set --body-timeout); the connection is closed.",
        type="invalid_request_error",
        code="request_timeout",
    )


@error(EDGE)
def upgrade_not_supported() -> StatusError:
    """A request asking to switch to a protocol other than WebSocket (`Connection: Upgrade` with
    `Upgrade: h2c`, as an HTTP/2 client sends over plain HTTP): the parser reads no body after
    such a head, so it is refused, not served without its body; the connection is closed after it
    (requests pipelined before it answered first)."""
    return StatusError(
        400,
        "This server speaks HTTP/1.1, and WebSocket on /v1/responses: an Upgrade to another protocol is "
        "not supported. Send the request without the Upgrade header.",
        type="invalid_request_error",
    )


@error(EDGE)
def invalid_http_request() -> StatusError:
    """Bytes the server's HTTP parser cannot read as a request (not HTTP, a malformed header, two
    lengths): the connection is closed after it."""
    return StatusError(
        400,
        "Invalid HTTP request received: the server cannot parse it, and closes the connection.",
        type="invalid_request_error",
    )


@error(EDGE)
def client_closed() -> StatusError:
    """The client closed the connection before the response was complete (a create, streamed or
    not): the run is cancelled and the journal records the request with this error and status 499."""
    return StatusError(
        499, "The client closed the connection before the response was complete.", type="client_closed_request"
    )


# ---- request parameters ----------------------------------------------------------------------------


@error(REQUEST)
def missing_parameter(param: str, note: str | None = None) -> MissingParameter:
    """A required parameter is absent (`note`: when it is required, for a parameter that is not always)."""
    return MissingParameter(
        f"Missing required parameter: '{param}'" + (f" ({note})" if note else "") + ".", param=param
    )


@error(REQUEST)
def unknown_parameter(param: str) -> UnknownParameter:
    """A parameter the endpoint does not have. A name longer than 256 characters is cut there and
    ends in `…`, in the message and in `param` alike (a 15.5 MB key was echoed twice, a 31 MB reply)."""
    shown = shown_text(param)
    return UnknownParameter(f"Unknown parameter: '{shown}'.", param=shown)


@error(REQUEST)
def invalid_value(value: object, supported: str, param: str) -> InvalidValue:
    """A value outside the parameter's set (`supported`: the set, each value quoted, listed as the hosted
    API lists one: `'a' and 'b'`, `'a', 'b', and 'c'`). A value longer than 256 characters is shown cut
    there, ending in `…` (a 15 MB value was echoed whole)."""
    shown = shown_text(str(value))
    return InvalidValue(f"Invalid value: '{shown}'. Supported values are: {_listed(supported)}.", param=param)


@error(REQUEST, value="bogus", supported=("reasoning.encrypted_content", "message.output_text.logprobs"), index=0)
def include_value_invalid(value: str, supported: Sequence[str], index: int) -> InvalidValue:
    """A read's `include` value (a response's retrieve, its input items, a conversation's items)
    that a create's `include` does not take; worded as a create's."""
    return invalid_value(value, ", ".join(f"'{v}'" for v in supported), f"include[{index}]")


_QUOTED = re.compile(r"'[^']*'")
_SEPARATOR = re.compile(r",? (?:or|and) |, ")


def _listed(supported: str) -> str:
    """A list of quoted values joined the hosted way, whatever joined it (the validator writes
    `'a', 'b' or 'c'`, a tag list `'a', 'b', 'c'`); a text that is not such a list is kept."""
    values: list[str] = _QUOTED.findall(supported)
    gaps = _QUOTED.split(supported)
    if not values or gaps[0] or gaps[-1] or not all(_SEPARATOR.fullmatch(gap) for gap in gaps[1:-1]):
        return supported
    if len(values) < 3:
        return " and ".join(values)
    return ", ".join(values[:-1]) + ", and " + values[-1]


@error(REQUEST)
def invalid_request() -> InvalidRequest:
    """A body refused by validation with no error to name (never seen from the SDKs)."""
    return InvalidRequest("Invalid request.")


@error(REQUEST)
def invalid_value_unlisted(value: object, param: str) -> InvalidValue:
    """An item or part `type` outside its union when the supported values cannot be listed (a value
    longer than 256 characters shown cut there, ending in `…`)."""
    return InvalidValue(f"Invalid value: '{shown_text(str(value))}'.", param=param)


@error(REQUEST, expected=["a string", "an integer"], got="an array")
def wrong_type(name: str, expected: list[str], got: str, param: str | None) -> InvalidType:
    """A parameter of the wrong JSON type (`expected`: what it may be; `name`: the parameter, `body` for the body)."""
    wanted = expected[0] if len(expected) == 1 else "one of " + " or ".join(expected)
    return InvalidType(f"Invalid type for '{name}': expected {wanted}, but got {got} instead.", param=param)


@error(REQUEST, got="null")
def not_a_string(param: str, got: str) -> InvalidType:
    """A null, number, boolean, array or object where one of a set of strings goes (a `role`, an
    `include` value, an item's or a part's `type`): the wrong type, not an invalid value."""
    return wrong_type(param, ["a string"], got, param)


@error(REQUEST, max_length=128, length=200)
def string_too_long(param: str, max_length: object, length: object) -> InvalidRequest:
    """A string past its hosted length bound (`safety_identifier`, a `metadata`-like field)."""
    return InvalidRequest(
        f"Invalid '{param}': string too long. Expected a string with maximum length {max_length}, "
        f"but got a string with length {length} instead.",
        param=param,
        code="string_above_max_length",
    )


@error(REQUEST, max_length=20, length=21)
def array_too_long(param: str, max_length: object, length: object) -> InvalidRequest:
    """An array past its length bound (a Conversations create's or items add's `items`: 20), worded
    as the hosted API words an array's length bound."""
    return InvalidRequest(
        f"Invalid '{param}': array too long. Expected an array with maximum length {max_length}, "
        f"but got an array with length {length} instead.",
        param=param,
        code="array_above_max_length",
    )


@error(REQUEST, param="events", min_length=1)
def empty_array(param: str, min_length: object) -> InvalidRequest:
    """An empty array where at least one item is required (an Agents session's `events`, a
    namespace tool's `tools`), worded as the hosted API words an empty array."""
    return InvalidRequest(
        f"Invalid '{param}': empty array. Expected an array with minimum length {min_length}, "
        "but got an empty array instead.",
        param=param,
        code="empty_array",
    )


@error(REQUEST, pattern="^[a-zA-Z0-9_-]+$")
def pattern_mismatch(param: str, pattern: str) -> InvalidValue:
    """A string its parameter's pattern does not match (a json_schema format's `name`, a tool's
    `name`), worded as the hosted API words it."""
    return InvalidValue(
        f"Invalid '{param}': string does not match pattern. Expected a string that matches the pattern '{pattern}'.",
        param=param,
    )


@error(REQUEST)
def empty_string(param: str) -> InvalidRequest:
    """An empty string where the hosted API requires a non-empty one (`model`)."""
    return InvalidRequest(
        f"Invalid '{param}': empty string. Expected a string with minimum length 1, but got an empty string instead.",
        param=param,
        code="empty_string",
    )


@error(REQUEST, number="integer", sign=">=", least=1, value=0)
def below_minimum(param: str, number: str, sign: str, least: object, value: object) -> InvalidRequest:
    """A number below its lower bound (`number`: `integer` or `decimal`; `sign`: `>=` or `>`): a
    listing's `limit`, `max_output_tokens` (16), `temperature`, `top_p`, `top_logprobs` (0)."""
    return InvalidRequest(
        f"Invalid '{param}': {number} below minimum value. Expected a value {sign} {least}, but got {value} instead.",
        param=param,
        code=f"{number}_below_min_value",
    )


@error(REQUEST, number="decimal", sign="<=", most=2, value=5)
def above_maximum(param: str, number: str, sign: str, most: object, value: object) -> InvalidRequest:
    """A number above its upper bound (`number`: `integer` or `decimal`; `sign`: `<=` or `<`):
    `temperature`, `top_p`, `top_logprobs`, `max_output_tokens` (2147483647)."""
    return InvalidRequest(
        f"Invalid '{param}': {number} above maximum value. Expected a value {sign} {most}, but got {value} instead.",
        param=param,
        code=f"{number}_above_max_value",
    )


@error(REQUEST, reason="<a validator's reason>")
def invalid_reason(name: str, reason: str, param: str | None) -> InvalidValue:
    """A value a validator refuses with its reason (the texts of this catalogue that say "the reason of
    a validation error"); `name`: the parameter, `body` for the body."""
    return InvalidValue(f"Invalid '{name}': {reason}.", param=param)


@error(REQUEST)
def expected_an_object(param: str, got: str) -> InvalidType:
    """An entry of `context_management` that is not an object (`got`: its Python type's name)."""
    return InvalidType(f"Invalid type for '{param}': expected an object, but got {got}.", param=param)


@error(REQUEST)
def saved_prompts() -> UnsupportedParameter:
    """`prompt` (a saved prompt's id and variables): "OpenAI scheduled the shutdown of saved prompts
    for November 30, 2026" (openai 3.63's docstring), and the emulator never kept any."""
    return UnsupportedParameter(
        "Saved prompts ('prompt') were shut down on November 30, 2026: put the prompt's text in "
        "'instructions' and 'input' instead (prompts in application code).",
        param="prompt",
    )


@error(REQUEST)
def conversation_with_previous_response() -> InvalidRequest:
    """`conversation` and `previous_response_id` in one request."""
    return InvalidRequest(
        "Parameters 'previous_response_id' and 'conversation' cannot be used together.", param="conversation"
    )


@error(REQUEST)
def background_needs_store() -> InvalidRequest:
    """`background: true` with `store: false`."""
    return InvalidRequest("Background mode requires store=true.", param="background")


@error(REQUEST)
def completion_window_needs_background(window: str) -> InvalidRequest:
    """A `background_options.completion_window` of `2h` or `8h` without `background: true`."""
    return InvalidRequest(
        f"The '{window}' completion window requires background: true.", param="background_options.completion_window"
    )


@error(REQUEST)
def completion_window_with_stream(window: str) -> InvalidRequest:
    """A `2h` or `8h` completion window with `stream: true`."""
    return InvalidRequest(f"The '{window}' completion window cannot be used with stream: true.", param="stream")


@error(REQUEST)
def completion_window_needs_standard(window: str, service_tier: str) -> InvalidRequest:
    """A `2h` or `8h` completion window with a `service_tier` that is not Standard processing."""
    return InvalidRequest(
        f"The '{window}' completion window requires Standard processing: service_tier "
        f"'{service_tier}' cannot be used with it.",
        param="service_tier",
    )


@error(REQUEST)
def compact_threshold_invalid(param: str) -> InvalidValue:
    """A `context_management` entry's `compact_threshold` that is not a positive integer."""
    return InvalidValue(
        f"Invalid value for '{param}.compact_threshold': expected a positive integer.",
        param=f"{param}.compact_threshold",
    )


@text(REQUEST, "the reason of a validation error (`Invalid '<param>': <reason>.`)", max_depth=64)
def json_too_deep(max_depth: int) -> str:
    """Free-form JSON in a body (tool schemas, `text`, content-part extras, a scenario) nested
    deeper than the emulator reads."""
    return f"JSON nested deeper than {max_depth} levels"


@text(REQUEST, "the reason of a validation error (`Invalid '<param>': <reason>.`)")
def lone_surrogate() -> str:
    """A string of the body holding a lone UTF-16 surrogate (JSON carries it, a reply cannot)."""
    return "a string holds a lone UTF-16 surrogate, which is not valid Unicode"


@text(REQUEST, "the reason of a validation error (`Invalid '<param>': <reason>.`)")
def number_not_finite() -> str:
    """A number of the body that is NaN or an infinity (Python's JSON reader takes them)."""
    return "numbers must be finite (NaN and Infinity are not JSON)"


@text(REQUEST, "the reason of a validation error on `metadata`")
def metadata_too_many_keys() -> str:
    """A `metadata` with more than 16 keys (a response's, a conversation's, an agent's)."""
    return "metadata can hold at most 16 keys"


@text(REQUEST, "the reason of a validation error on `metadata`")
def metadata_key_too_long(key: str) -> str:
    """A `metadata` key over 64 characters (shown cut at 64)."""
    return f"metadata key '{key[:64]}...' is longer than 64 characters"


@text(REQUEST, "the reason of a validation error on `metadata`")
def metadata_value_too_long(key: str) -> str:
    """A `metadata` value over 512 characters."""
    return f"metadata value for '{key}' is longer than 512 characters"


@error(REQUEST)
def conversation_id_invalid() -> InvalidRequest:
    """A request's `conversation` that is neither an id string nor an object with a string `id`."""
    return InvalidRequest(
        "Invalid type for 'conversation': expected a conversation id string or an object {\"id\": ...}.",
        param="conversation",
        code="invalid_type",
    )


# ---- tools and tool search -------------------------------------------------------------------------


@error(TOOLS)
def duplicate_tool_name(name: str, param: str = "tools") -> InvalidRequest:
    """Two tools (or two functions of one namespace, or two agent function tools) with one name."""
    return InvalidRequest(f"Duplicate tool name: '{name}'.", param=param)


@error(TOOLS)
def invalid_function_schema(tool: str, problem: str, param: str, field: str = "schema") -> InvalidRequest:
    """A function tool's `parameters` that are not a JSON Schema (the hosted API's 400); the
    emulator says the same of an `output_schema` and of a client tool_search's `parameters`."""
    return InvalidRequest(
        f"Invalid {field} for function '{tool}': {problem.rstrip('.')}.",
        param=param,
        code="invalid_function_parameters",
    )


@error(TOOLS, problem="5 is not valid under any of the given schemas")
def invalid_format_schema(name: str, problem: str, param: str) -> InvalidRequest:
    """A json_schema text format (`text.format`, a configuration_update's `text.format`) whose
    `schema` is not a JSON Schema, or not a strict-compliant one with `strict: true` (the hosted
    API's wording; the same problems as a function's `parameters`)."""
    return InvalidRequest(
        f"Invalid schema for response_format '{name}': {problem.rstrip('.')}.",
        param=param,
        code="invalid_json_schema",
    )


@error(TOOLS)
def tool_choice_name_not_found(kind: str, name: str) -> InvalidRequest:
    """`tool_choice` naming a function or custom tool the request does not declare."""
    return InvalidRequest(
        f"Tool choice '{kind}' with name '{name}' not found in 'tools' parameter.", param="tool_choice"
    )


@error(TOOLS)
def tool_choice_not_found(kind: str) -> InvalidRequest:
    """`tool_choice` naming a tool type (or `programmatic_tool_calling`) the request does not declare,
    or an `mcp` choice whose `server_label` names no `mcp` tool in `tools`."""
    return InvalidRequest(f"Tool choice '{kind}' not found in 'tools' parameter.", param="tool_choice")


@error(TOOLS)
def invalid_grammar(syntax: str, tool: str, problem: str, param: str) -> InvalidValue:
    """A custom tool's grammar that does not compile (`problem`: the compiler's first line)."""
    return InvalidValue(f"Invalid {syntax} grammar for custom tool '{tool}': {problem}", param=param)


@text(TOOLS, "a contract violation's reason")
def not_json(kind: str) -> str:
    """A tool's output or a call's arguments that are not JSON (`kind`: `output` or `arguments`)."""
    return f"the {kind} {'is' if kind == 'output' else 'are'} not JSON"


@text(TOOLS, "a contract violation's reason", max_depth=64)
def nested_too_deep(kind: str, max_depth: int) -> str:
    """A tool's output or a call's arguments nested deeper than the JSON parser goes."""
    return f"the {kind} nest deeper than {max_depth} levels"


@text(TOOLS, "a contract violation's reason")
def schema_invalid(problem: str) -> str:
    """A tool's `output_schema` or `parameters` that is not a valid JSON schema."""
    return f"the schema itself is invalid ({problem})"


@text(TOOLS, "a contract violation's reason", steps=10_000)
def schema_too_costly(steps: int) -> str:
    """A value whose check against a tool's schema takes more than `steps` subschema visits (its
    `anyOf`, `oneOf` and references multiply: a chain of two-way `anyOf` over `$ref`s doubles at each link)."""
    return f"checking against the schema took more than {steps} steps (its anyOf, oneOf and references multiply)"


@text(TOOLS, "a contract violation's reason", instructions=3505, length=60_000, budget=1_000_000)
def schema_pattern_too_costly(pattern: str, instructions: int, length: int, budget: int) -> str:
    """A string the schema's `pattern` (or a `patternProperties` key) would be matched against whose
    length times the pattern's compiled size is past the budget of one match."""
    return (
        f"checking against the schema's pattern {pattern!r} ({instructions} RE2 instructions) on {length} bytes "
        f"is too costly: instructions × bytes may be at most {budget}"
    )


_TOO_LARGE = {
    "values": "values",
    "request": "values across the request's tool schemas",
    "patterns": "distinct patterns",
    "identifiers": "$id, $anchor and $dynamicAnchor keywords",
}


@text(TOOLS, "an invalid_function_parameters 400's reason, and a contract violation's", what="values", bound=50_000)
def schema_too_large(what: str, bound: int) -> str:
    """A tool schema, or a request's tool schemas together, past a size bound (docs/limits.md): refused
    before the meta-schema check, whose cost grows with the schema. `what`: `values`, `request`
    (values across the request's schemas), `patterns` or `identifiers`."""
    return f"the schema holds more {_TOO_LARGE[what]} than this server checks (at most {bound})"


@text(TOOLS, "an invalid_function_parameters 400's reason", context=())
def strict_schema_allows_more(context: tuple[str, ...]) -> str:
    """A function's `parameters` given with `strict: true` whose object schema (at `context`) does
    not say `additionalProperties: false` (the hosted API's wording)."""
    return f"In context={context!r}, 'additionalProperties' is required to be supplied and to be false"


@text(TOOLS, "an invalid_function_parameters 400's reason", context=(), key="city")
def strict_schema_misses_required(context: tuple[str, ...], key: str) -> str:
    """A function's `parameters` given with `strict: true` whose object schema (at `context`) does
    not list property `key` in `required` (the hosted API's wording)."""
    return (
        f"In context={context!r}, 'required' is required to be supplied and to be an array including "
        f"every key in properties. Missing {key!r}"
    )


@text(TOOLS, "an invalid_function_parameters or invalid_json_schema 400's reason", got="array")
def strict_schema_not_object(got: str) -> str:
    """A strict schema (a function's `parameters` or a json_schema text format given with `strict:
    true`) whose root is not `type: "object"`: an array, a bare `anyOf`, `{}` (the hosted API's
    wording; `got`: the root's `type`, `None` when it has none)."""
    return f"schema must be a JSON Schema of 'type: \"object\"', got 'type: \"{got}\"'"


@text(TOOLS, "a contract violation's reason")
def schema_loops() -> str:
    """A tool's schema whose `$ref` leads back to itself without ever checking anything (`{"$ref": "#"}`)."""
    return schema_invalid("its references loop back to themselves without end")


@text(TOOLS, "a contract violation's reason")
def regex_mismatch(definition: str) -> str:
    """A custom tool call's input that its regex grammar does not match."""
    return f"the input does not match the regex /{definition}/"


@text(
    SCENARIOS,
    "an invalid regular expression's reason (a scenario's matcher, a hosted entry's, a tool schema's "
    "`pattern`, a custom tool's regex grammar)",
    count=17,
    limit=16,
)
def pattern_too_many_property_classes(count: int, limit: int) -> str:
    """A user-given pattern naming more Unicode property classes (`\\pL`, `\\P{Greek}`) than one may:
    RE2 takes up to 0.2 ms to build each, holding the interpreter, so it is refused from its text
    before any compile (`emulator/patterns.py`, `MAX_PROPERTY_CLASSES`)."""
    return (
        f"names {count} Unicode property classes (\\p, \\P), more than {limit}: "
        "each costs RE2 a compile of its own (a class such as [^...] or \\w costs far less)"
    )


@text(TOOLS, "an invalid grammar's reason (`Invalid regex grammar for custom tool '<name>': <reason>`)", limit=20000)
def grammar_too_large(limit: int) -> str:
    """A custom tool's regex grammar that compiles to more RE2 instructions than one may: its
    compile is stopped as it outgrows them (`emulator/patterns.py`, `MAX_GRAMMAR_PROGRAM_SIZE`)."""
    return f"compiles to more than {limit} RE2 instructions (counted repetition such as {{1,1000}} multiplies it)"


@text(TOOLS, "a contract violation's reason")
def regex_too_costly(definition: str, instructions: int, length: int, budget: int) -> str:
    """A custom tool call's input too long for its regex grammar's compiled size: the match is not
    run (`emulator/patterns.py`)."""
    return (
        f"the input ({length} bytes) is too costly to match against the regex /{definition}/ "
        f"({instructions} RE2 instructions): instructions × bytes may be at most {budget}"
    )


@text(TOOLS, "an invalid grammar's reason (`Invalid lark grammar for custom tool '<name>': <reason>`)")
def lark_grammar_too_costly(budget: int) -> str:
    """A custom tool's lark grammar whose compile went past its budget of Python calls (a grammar of
    a few characters can expand to millions of rules: `start: (("a"~30)~30)~30`, thirty optional
    items in one rule): refused with the 400 for a grammar that does not compile, the compile ended."""
    return f"the grammar is too costly to compile: at most {budget} steps"


@text(TOOLS, "an invalid grammar's reason (`Invalid lark grammar for custom tool '<name>': <reason>`)")
def lark_import_refused(path: str) -> str:
    """A custom tool's lark grammar importing anything but lark's common terminals: lark would read
    `.lark` files from its own folder or from paths on the server (`emulator/rules/larkgrammar.py`)."""
    return f"%import {path} is not allowed: only lark's common terminals may be imported (%import common.NAME)"


@text(TOOLS, "an invalid grammar's reason (`Invalid lark grammar for custom tool '<name>': <reason>`)")
def lark_grammar_too_deep(limit: int) -> str:
    """A custom tool's lark grammar whose groups (`( )`, `[ ]`) nest so deep that lark's reading of
    it is more than `limit` levels deep (a group two or three levels): refused before it is walked
    or compiled, both of which recurse once per level."""
    return (
        f"the grammar nests too deeply: its groups ( ) and [ ] make it more than {limit} levels deep "
        "(each group two or three)"
    )


@text(TOOLS, "an invalid grammar's reason (`Invalid lark grammar for custom tool '<name>': <reason>`)")
def lark_grammar_too_large(size: int, limit: int) -> str:
    """A custom tool's lark grammar whose rules, once lark expands their optional items and
    repetitions, would be too large (estimated from the grammar's tree, before compiling: each
    rule's alternatives times the square of its longest; thirty `"a"?` in one rule are 2**30
    alternatives)."""
    return (
        f"the grammar is too large once expanded: about {size} (alternatives × longest alternative², "
        f"summed over its rules), more than {limit}; each optional item doubles a rule's alternatives, "
        "and x~n repeats x n times"
    )


@text(TOOLS, "an invalid grammar's reason (`Invalid lark grammar for custom tool '<name>': <reason>`)")
def lark_terminal_not_re2(terminal: str, reason: str) -> str:
    """A custom tool's lark grammar with a terminal RE2 does not compile: a grammar's terminals are
    matched with RE2, which never backtracks (no backreferences, no lookaround)."""
    return f"terminal {terminal} is not RE2 syntax: {reason} (terminals run on RE2: no backreferences or lookaround)"


@text(TOOLS, "a contract violation's reason")
def lark_scan_too_costly(length: int, budget: int) -> str:
    """A custom tool call's input whose lark parse matched its terminals past their budget (each
    match's RE2 program size times the bytes left from where it starts): the check is ended."""
    return (
        f"the input ({length} characters) is too costly to parse with the lark grammar: its terminals' "
        f"matches may cost at most {budget} (RE2 instructions × bytes scanned)"
    )


@text(TOOLS, "a contract violation's reason")
def lark_too_costly(length: int, budget: int) -> str:
    """A custom tool call's input whose lark parse went past its budget of Python calls (an
    ambiguous grammar's parse grows with the cube of the input): the check is ended, not run on."""
    return f"the input ({length} characters) is too costly to parse with the lark grammar: at most {budget} steps"


@text(TOOLS, "a contract violation's reason")
def lark_mismatch(problem: str) -> str:
    """A custom tool call's input that its lark grammar does not parse."""
    return f"the input is not in the lark grammar ({problem})"


@text(TOOLS, "the journal, the x-ptc-emulator-contract-warning header, and a contract_violation's message")
def contract_broken(kind: str, call_id: str, tool: str, reason: str) -> str:
    """A tool call's I/O against its tool's contract: a custom tool's `input` against its format, a
    function's `output` against `output_schema`, or its `arguments` against `parameters`."""
    if kind == "input":
        return f"The input of custom tool call {call_id} does not match the format of '{tool}': {reason}"
    if kind == "output":
        return f"The output of function call {call_id} does not match the output_schema of '{tool}': {reason}"
    return f"The arguments of function call {call_id} do not match the parameters of '{tool}': {reason}"


@error(TOOLS, described="<the violation, as contract_broken words it>")
def contract_violation(described: str, param: str) -> ContractViolation:
    """In strict mode (a scenario's `strict_contract`, or `--strict-contract`), a tool output against
    `output_schema`, or arguments against `parameters`."""
    return ContractViolation(described, param=param)


@error(TOOLS)
def duplicate_namespace(name: str) -> InvalidRequest:
    """Two namespaces with one name."""
    return InvalidRequest(f"Duplicate namespace name: '{name}'.", param="tools")


@error(TOOLS)
def one_tool_search() -> InvalidRequest:
    """Two `tool_search` tools in one request."""
    return InvalidRequest("Only one tool_search tool may be declared.", param="tools")


@error(TOOLS, param="tools[3]")
def one_programmatic_tool_calling(param: str) -> InvalidRequest:
    """A second `programmatic_tool_calling` tool in one request (`param`: where it is); the tool has
    no fields, so a second one could only repeat or contradict the first."""
    return InvalidRequest("Only one programmatic_tool_calling tool may be declared.", param=param)


@error(TOOLS)
def namespace_reserved(name: str) -> InvalidRequest:
    """A namespace holding a function of its own name: tool search reserves that name."""
    return InvalidRequest(
        f"Responses tool-search reserves the synthetic namespace '{name}.{name}' for deferred top-level function "
        "tools: rename the namespace or its tool.",
        param="tools",
    )


@error(TOOLS)
def function_and_namespace(name: str) -> InvalidRequest:
    """A function tool and a namespace with one name."""
    return InvalidRequest(
        f"The name '{name}' is both a function tool and a namespace; a program could not call both.", param="tools"
    )


@error(TOOLS)
def deferred_needs_search() -> InvalidRequest:
    """A tool declared with `defer_loading: true` and no `tool_search` tool to load it."""
    return InvalidRequest(
        'Deferred tools require tools.tool_search: add {"type": "tool_search"} to load tools declared with '
        "defer_loading: true.",
        param="tools",
    )


@error(TOOLS)
def missing_namespace(name: str, param: str) -> InvalidRequest:
    """A namespace's function call (or a deferred top-level function's) replayed without its `namespace`."""
    return InvalidRequest(
        f"Missing namespace for function_call '{name}'. It does not exist in the default namespace. Round-trip "
        "the model's function_call item with its namespace field included.",
        param=param,
    )


@error(TOOLS)
def search_output_invalid_tool(at: str, problem: str, param: str) -> InvalidRequest:
    """A `tool_search_output` loading a tool that is no tool (`at`: where, `problem`: the validator's words)."""
    return InvalidRequest(f"Invalid tool in tool_search_output: {at}: {problem}.", param=param)


@error(TOOLS)
def search_output_loads_kind(kind: str, param: str) -> InvalidRequest:
    """A `tool_search_output` loading a kind of tool a search cannot load."""
    return InvalidRequest(
        f"A tool_search_output can load function, custom, namespace and mcp tools, not '{kind}'.", param=param
    )


@error(TOOLS)
def search_output_undeclared(name: str, param: str) -> InvalidRequest:
    """A server-executed `tool_search_output` loading a tool the request does not declare."""
    return InvalidRequest(
        f"The server-executed tool_search_output loads '{name}', which this request does not declare (a server "
        "search loads only declared tools): replay the tool search items the server returned, with the same tools.",
        param=param,
    )


@text(TOOLS, "a program's rejected promise, and a scenario turn's reason")
def takes_a_string(name: str) -> str:
    """A custom tool called with anything but one string."""
    return f"tools.{name}() takes one argument: a string"


@text(TOOLS, "a program's rejected promise, and a scenario turn's reason")
def unknown_field(what: str, where: str) -> str:
    """A tool action's arguments with a field it does not take (`what`: what the arguments are)."""
    return f"{what}: unknown field '{where}'"


@text(TOOLS, "a program's rejected promise, and a scenario turn's reason")
def missing_field(what: str, where: str) -> str:
    """A tool action's arguments without a field it requires."""
    return f"{what}: missing required field '{where}'"


@text(TOOLS, "a program's rejected promise, and a scenario turn's reason")
def invalid_field(what: str, where: str, problem: str) -> str:
    """A tool action's arguments with a field of the wrong shape (`where` empty: the arguments themselves)."""
    return f"{what}: '{where}': {problem}" if where else f"{what}: {problem}"


@text(TOOLS, "a program's rejected promise", why="a hosted tool that this emulator does not run")
def unemulated_tool(name: str, kind: str, why: str) -> str:
    """A program calling a hosted tool the emulator echoes but does not run (`why`: `not_run_here`)."""
    return f"tools.{name}() calls the '{kind}' tool, {why}."


@text(TOOLS, "a program's rejected promise, and a scenario turn's reason")
def not_run_here() -> str:
    """Why a hosted tool the emulator echoes cannot be called."""
    return "a hosted tool that this emulator does not run"


# ---- conversation items ----------------------------------------------------------------------------


@error(ITEMS)
def no_tool_output(label: str, call_id: str) -> InvalidRequest:
    """A call in the input with no output (`label`: the call's kind, e.g. `function call`)."""
    return InvalidRequest(f"No tool output found for {label} {call_id}.", param="input")


@error(ITEMS)
def no_call_for_output(label: str, call_id: str) -> InvalidRequest:
    """An output with no earlier call (`label`: the output's kind, e.g. `function call`)."""
    return InvalidRequest(f"No tool call found for {label} output with call_id {call_id}.", param="input")


@error(ITEMS)
def output_answers_another_kind(
    output_type: str, call_id: str, call_type: str, answer: str, param: str
) -> InvalidRequest:
    """An output of one kind answering a call of another (`answer`: the output type that call takes)."""
    return InvalidRequest(
        f"The {output_type} with call_id {call_id} answers a {call_type}: answer it with a {answer}.", param=param
    )


@error(ITEMS)
def output_caller_changed(
    output_type: str, call_id: str, call_type: str, program: str | None, param: str
) -> InvalidRequest:
    """An output without the `caller` of its call, or with another (`program`: the call's caller, if a program)."""
    want = f'{{"type": "program", "caller_id": "{program}"}}' if program else 'none (or {"type": "direct"})'
    return InvalidRequest(
        f"The {output_type} for call_id {call_id} must carry the caller of its {call_type} unchanged: expected {want}.",
        param=param,
    )


@error(ITEMS)
def duplicate_item(item_type: str, call_id: str, param: str) -> InvalidRequest:
    """A program, call or tool search call whose call_id appears more than once."""
    return InvalidRequest(
        f"Duplicate item: a {item_type} with call_id '{call_id}' appears more than once.", param=param
    )


@error(ITEMS)
def assistant_part_invalid(part_type: str, param: str) -> InvalidValue:
    """An assistant message replayed with a part that is not the model's own kind (an
    `input_text`, say), worded as the hosted API words it."""
    return invalid_value(part_type, "'output_text' and 'refusal'", param)


@error(ITEMS, part_type="output_text", param="input[0].content[0]")
def input_part_invalid(part_type: str, param: str) -> InvalidValue:
    """A user, system or developer message, or a tool output given as parts, with a part that is
    not an input kind (an `output_text`, a `refusal`), worded as the hosted API words it."""
    return invalid_value(part_type, "'input_text', 'input_image', and 'input_file'", param)


@error(ITEMS)
def duplicate_item_id(item_id: str, param: str = "input") -> InvalidRequest:
    """Two items of a conversation (its history and this request's input, or a conversation's items
    and the ones added to it) with the same `id`, worded as the hosted API words it."""
    return InvalidRequest(
        f"Duplicate item found with id {item_id}. Remove duplicate items from your input and try again.", param=param
    )


@error(ITEMS)
def duplicate_answer(item_type: str, call_id: str, param: str) -> InvalidRequest:
    """An output (a tool's, a program's, a tool search's) for a call_id answered already."""
    return InvalidRequest(f"Duplicate item: a {item_type} for call_id '{call_id}' appears more than once.", param=param)


@error(ITEMS)
def duplicate_approval_response(request_id: str, param: str) -> InvalidRequest:
    """Two `mcp_approval_response`s for one request."""
    return InvalidRequest(f"Duplicate item: approval request '{request_id}' is answered more than once.", param=param)


def _no_program_before(subject: str, program: str, param: str) -> InvalidRequest:
    return InvalidRequest(
        f"{subject} has caller program '{program}', but no program item with that call_id comes before it.",
        param=param,
    )


@error(ITEMS)
def call_without_program(label: str, call_id: str, program: str, param: str) -> InvalidRequest:
    """A call whose `caller` names a program no earlier item is (`label`: the call's kind)."""
    return _no_program_before(f"{label.capitalize()} {call_id}", program, param)


@error(ITEMS)
def approval_without_program(request_id: str, program: str, param: str) -> InvalidRequest:
    """An `mcp_approval_request` whose `caller` names a program no earlier item is."""
    return _no_program_before(f"Approval request {request_id}", program, param)


@error(ITEMS)
def item_without_program(item_id: str, item_type: str, program: str, param: str) -> InvalidRequest:
    """A server-run tool's item (`mcp_call`, `mcp_list_tools`, `code_interpreter_call`) whose `caller`
    names a program no earlier item is."""
    return _no_program_before(f"Item {item_id} of type '{item_type}'", program, param)


def _finished(subject: str, program: str, param: str) -> InvalidRequest:
    return InvalidRequest(f"{subject} belongs to program '{program}', which already finished.", param=param)


@error(ITEMS)
def call_of_finished_program(label: str, call_id: str, program: str, param: str) -> InvalidRequest:
    """A call attached to a program whose `program_output` came earlier (`label`: the call's kind)."""
    return _finished(f"{label.capitalize()} {call_id}", program, param)


@error(ITEMS)
def approval_of_finished_program(request_id: str, program: str, param: str) -> InvalidRequest:
    """An `mcp_approval_request` attached to a program whose `program_output` came earlier."""
    return _finished(f"Approval request {request_id}", program, param)


@error(ITEMS)
def no_user_message() -> InvalidRequest:
    """An input with no user message."""
    return InvalidRequest("The input has no user message for the model to answer.", param="input")


@error(ITEMS)
def program_output_missing(call_id: str) -> InvalidRequest:
    """Two programs left open: a `program_output` left out of a replay."""
    return InvalidRequest(
        f"No program_output found for program with call_id '{call_id}': replay every item in order.", param="input"
    )


@error(ITEMS)
def no_program_for_output(call_id: str, param: str) -> InvalidRequest:
    """A `program_output` with no earlier program."""
    return InvalidRequest(f"No program found for program_output with call_id {call_id}.", param=param)


@error(ITEMS)
def program_output_modified(call_id: str, param: str) -> InvalidRequest:
    """A `program_output` replayed with another status or result than it was returned with."""
    return InvalidRequest(
        f"The program_output item with call_id {call_id} was modified: replay it as it was returned.", param=param
    )


@error(ITEMS)
def approval_response_missing(request_id: str, program: str) -> InvalidRequest:
    """A program paused on an approval request, resumed without its `mcp_approval_response`."""
    return InvalidRequest(
        f"No mcp_approval_response found for approval request {request_id}: program {program} is paused on it.",
        param="input",
    )


@error(ITEMS)
def approval_request_not_found(request_id: str, param: str) -> InvalidRequest:
    """An `mcp_approval_response` whose `approval_request_id` names no earlier request."""
    return InvalidRequest(
        f"No approval request found for mcp_approval_response with approval_request_id '{request_id}'.",
        param=f"{param}.approval_request_id",
    )


@error(ITEMS)
def approval_caller_changed(request_id: str, param: str) -> InvalidRequest:
    """An `mcp_approval_response` with another `caller` than its request's."""
    return InvalidRequest(
        f"The mcp_approval_response for {request_id} must carry the caller of its request unchanged, or none.",
        param=f"{param}.caller",
    )


@error(ITEMS)
def no_search_output(call_id: str) -> InvalidRequest:
    """A client-executed `tool_search_call` with no `tool_search_output`."""
    return InvalidRequest(
        f"No tool_search_output found for client-executed tool search call {call_id}: answer it with the "
        "tools it loads (an empty list loads none).",
        param="input",
    )


@error(ITEMS)
def search_call_without_call_id(param: str) -> MissingParameter:
    """A client-executed `tool_search_call` without a call_id."""
    return missing_parameter(f"{param}.call_id", "a client-executed tool search call needs one")


@error(ITEMS)
def search_output_without_call_id(param: str) -> MissingParameter:
    """A client `tool_search_output` without a call_id."""
    return missing_parameter(f"{param}.call_id", "a client tool_search_output answers a call")


@error(ITEMS)
def search_while_program_runs(param: str) -> InvalidRequest:
    """A `tool_search_call` while a program is open."""
    return InvalidRequest(
        "A tool search cannot run while a program is running: the program must finish first.", param=param
    )


@error(ITEMS)
def no_search_call_for_output(call_id: str, param: str) -> InvalidRequest:
    """A `tool_search_output` whose call_id names no earlier `tool_search_call`."""
    return InvalidRequest(f"No tool search call found for tool_search_output with call_id {call_id}.", param=param)


@error(ITEMS)
def search_execution_changed(call_id: str, said: str, executed: str, param: str) -> InvalidRequest:
    """A `tool_search_output` whose `execution` is not its call's."""
    return InvalidRequest(
        f"The tool_search_output for call_id {call_id} says execution '{said}', but its tool_search_call was "
        f"executed by the {executed}.",
        param=f"{param}.execution",
    )


@error(ITEMS)
def compaction_trigger_not_last(param: str) -> InvalidValue:
    """A `compaction_trigger` item anywhere but last in the input."""
    return InvalidValue("A compaction_trigger must be the final input item.", param=param)


@error(ITEMS)
def compaction_unverified(item_id: str | None, param: str) -> InvalidEncryptedContent:
    """A compaction item modified, or not issued by this server."""
    name = f"compaction item {item_id}" if item_id else "a compaction item"
    return InvalidEncryptedContent(
        f"The encrypted content of {name} could not be verified: it was modified or was not issued by this "
        "server. Replay the compaction item as it was returned.",
        param=f"{param}.encrypted_content",
    )


@text(ITEMS, "the reason of a validation error on an input item")
def configuration_update_empty() -> str:
    """A `configuration_update` item with neither `reasoning` nor `text`."""
    return "a configuration_update supplies reasoning, text, or both"


# ---- programs and sealed content --------------------------------------------------------------------


@error(PROGRAMS, allowed=["<tool>"])
def tools_changed(program: str, started: str, allowed: list[str]) -> InvalidRequest:
    """The tools a program may call changed while it runs (`started`: what it started with, described)."""
    shown = allowed if len(allowed) <= 64 else f"{len(allowed)} tools"
    return InvalidRequest(
        f"The tools a program may call changed while program {program} was running: it started with {started}, "
        f"this request allows {shown}.",
        param="tools",
    )


@error(PROGRAMS)
def call_not_issued_by_finished_program(call_id: str, program: str) -> InvalidRequest:
    """A function call attached to a finished program that did not make it."""
    return InvalidRequest(
        f"Function call {call_id} was not issued by program {program}, which has finished: replay the program's "
        "function calls unmodified and in order.",
        param="input",
    )


@error(PROGRAMS)
def call_not_issued_here(label: str, call_id: str, program: str) -> InvalidRequest:
    """A program's call the program did not make at this position (`label`: the call's kind)."""
    return InvalidRequest(
        f"{label.capitalize()} {call_id} was not issued by program {program} at this position: replay the "
        "program's tool calls unmodified and in order.",
        param="input",
    )


@error(PROGRAMS)
def encrypted_content_unverified(item_id: str | None, param: str = "input") -> InvalidEncryptedContent:
    """A reasoning item's `encrypted_content` modified, sealed for another item or not issued by
    this server, wherever it arrives (a create stored or not, a conversation's items)."""
    return InvalidEncryptedContent(f"The encrypted content for item {item_id} could not be verified.", param=param)


@error(PROGRAMS)
def reasoning_missing(item: str | None, item_type: str, reasoning: str) -> InvalidRequest:
    """`store: false` without the reasoning item that preceded an item."""
    return InvalidRequest(
        f"Item '{item}' of type '{item_type}' was provided without its required 'reasoning' item: '{reasoning}'.",
        param="input",
    )


@error(PROGRAMS)
def fingerprint_invalid(call_id: str, param: str) -> InvalidFingerprint:
    """A program item whose fingerprint was modified, or made with another secret."""
    return InvalidFingerprint(
        f"Invalid fingerprint for program item with call_id '{call_id}': it was modified or was not issued by "
        "this server.",
        param=f"{param}.fingerprint",
    )


@error(PROGRAMS)
def fingerprint_of_another_program(call_id: str, param: str) -> InvalidFingerprint:
    """A program item carrying the (valid) fingerprint of another program."""
    return InvalidFingerprint(
        f"The fingerprint of program item with call_id '{call_id}' belongs to another program.",
        param=f"{param}.fingerprint",
    )


@error(PROGRAMS)
def program_code_modified(call_id: str, param: str) -> InvalidFingerprint:
    """A program item whose code is not the code its fingerprint seals."""
    return InvalidFingerprint(
        f"The code of program item with call_id '{call_id}' does not match its fingerprint: program code cannot "
        "be modified.",
        param=f"{param}.code",
    )


@error(PROGRAMS)
def program_calls_modified(program: str, divergence: str) -> ProgramDivergence:
    """A program's `function_call` name or arguments modified (arguments compare as parsed JSON;
    `divergence`: where the replay left the program's path)."""
    return ProgramDivergence(
        f"The function_call items of program {program} do not match what the program does: a tool name or its "
        f"arguments were modified ({divergence}).",
        param="input",
    )


@error(PROGRAMS, answered=2, made=1)
def program_answered_too_much(program: str, answered: int, made: int) -> ProgramDivergence:
    """An input answering more of a program's calls than the program made before it ended."""
    return ProgramDivergence(
        f"The tool call items of program {program} do not match what the program does: the input answers "
        f"{answered} of its calls, but the program made only {made} before it ended.",
        param="input",
    )


@text(PROGRAMS, "an `incomplete` program_output's result", count=2, size=9437440, carried=0, limit=3145728)
def sealed_results_too_large(count: int, size: int, carried: int, limit: int) -> str:
    """A program pausing after server-run calls (MCP, hosted code interpreter or shell) whose
    results, sealed into the response, would take what the conversation carries past the bytes a
    `store: false` client can send back under `--max-body-bytes`: the program ends instead."""
    return (
        f"limit: the results of the program's {count} server-run calls since its last pause take {size} bytes "
        f"sealed, and the conversation carries {carried} bytes of such results already: together over the "
        f"{limit} bytes a store: false client can send back under --max-body-bytes (the body limit less what "
        'the rest of the conversation needs, docs/limits.md "MCP"), so the program stopped before pausing'
    )


@text(PROGRAMS, "an `incomplete` program_output's result", calls=12, seconds=1.0)
def hosted_calls_out_of_time(calls: int, seconds: float) -> str:
    """A program whose calls to MCP servers, in one response, took together more than its time
    limit (`--timeout`): `calls` of them were cut there, or had no time left to start."""
    return (
        f"limit: the program's calls to MCP servers took its time limit of {seconds:g} s (--timeout) together, "
        f'with {calls} still waiting for an answer or to start, so the program stopped (docs/limits.md "MCP")'
    )


@error(PROGRAMS)
def approval_request_not_issued(approval_id: str, program: str, param: str) -> InvalidRequest:
    """An `mcp_approval_request` of a finished program sent back with another server label, tool
    or arguments than this server issued its id for."""
    return InvalidRequest(
        f"The mcp_approval_request {approval_id} of program {program} was not issued as sent: its "
        "server_label, name or arguments were changed. Replay it as it was returned.",
        param=param,
        code="invalid_approval_request",
    )


@error(PROGRAMS)
def direct_approval_request_not_issued(approval_id: str, param: str) -> InvalidRequest:
    """A direct MCP call's `mcp_approval_request` (no `caller`) sent back with another server
    label, tool or arguments than this server issued its id for, or with an id it never issued."""
    return InvalidRequest(
        f"The mcp_approval_request {approval_id} was not issued as sent: its id, server_label, name or "
        "arguments were changed, or this server never issued it. Replay it as it was returned.",
        param=param,
        code="invalid_approval_request",
    )


@error(PROGRAMS, name=("lookup", "delete_page"))
def approval_request_mismatch(
    approval_id: str,
    param: str,
    *,
    server_label: tuple[str, str] | None = None,
    name: tuple[str, str] | None = None,
    arguments: tuple[str, str] | None = None,
) -> InvalidRequest:
    """An `mcp_approval_response` whose request item, as sent back, names another server label, tool
    or arguments than the call it approves (each given as what the item says, and the call's)."""
    differences = []
    if server_label is not None:
        differences.append(f"server_label {server_label[0]!r} (the call's is {server_label[1]!r})")
    if name is not None:
        differences.append(f"name {name[0]!r} (the call's is {name[1]!r})")
    if arguments is not None:
        differences.append(f"arguments {arguments[0]} (the call's are {arguments[1]})")
    return InvalidRequest(
        f"The mcp_approval_request {approval_id} does not match the call it approves: its "
        + "; its ".join(differences)
        + ". An approval covers the call it was asked for, unchanged.",
        param=param,
        code="invalid_approval_request",
    )


@error(PROGRAMS)
def sealed_result_missing(approval_id: str | None, call: str, param: str) -> InvalidRequest:
    """A `store: false` replay of a program's MCP call (`call`: `<server_label>.<tool>`) that the
    program went on past (approved by `approval_id`, or needing no approval), without the
    `reasoning` item that seals its result: made again, the call would repeat its effects."""
    approved = f", approved by {approval_id}," if approval_id is not None else ""
    return InvalidRequest(
        f"The program's call to {call}{approved} already ran, but the reasoning item "
        "holding its sealed result is missing from the input, and the server no longer has it. "
        "Send back every item of the response that ran the call, reasoning items included; "
        "a call is not made twice.",
        param=param,
        code="missing_sealed_result",
    )


# ---- stored responses and items --------------------------------------------------------------------


@error(HISTORY)
def previous_response_not_found(response_id: str) -> PreviousResponseNotFound:
    """An unknown (deleted, or `store: false`) `previous_response_id`."""
    return PreviousResponseNotFound(
        f"Previous response with id '{response_id}' not found.", param="previous_response_id"
    )


@error(HISTORY)
def response_not_found(response_id: str) -> NotFound:
    """An unknown response id (retrieved, deleted, cancelled or listed)."""
    return NotFound(f"Response with id '{response_id}' not found.")


@error(HISTORY)
def previous_response_unfinished(response_id: str, status: object) -> InvalidRequest:
    """A `previous_response_id` (or one before it) that has not finished: queued, in progress, failed."""
    return InvalidRequest(
        f"Previous response '{response_id}' has status '{status}': only a finished response can be continued.",
        param="previous_response_id",
    )


@error(HISTORY)
def context_length_exceeded() -> InvalidRequest:
    """A response's context (its input, and the history of its `conversation` or
    `previous_response_id` chain) past the most items one may hold (`MAX_CONTEXT_ITEMS`, 200,000),
    with `truncation` "disabled"; counted before the history is read (the hosted API's words)."""
    return InvalidRequest(
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        param="input",
        code="context_length_exceeded",
    )


@error(HISTORY)
def item_not_found(item_id: str, param: str) -> InvalidRequest:
    """An `item_reference` to an item that does not exist, or to one of a response made in another
    scope (`x-ptc-emulator-scope`)."""
    return InvalidRequest(f"Item with id '{item_id}' not found.", param=param)


@error(HISTORY)
def item_not_input(item_id: str | None, param: str) -> InvalidRequest:
    """An `item_reference` to a stored item that cannot be input."""
    return InvalidRequest(f"Item '{item_id}' cannot be used as input here.", param=param)


@error(HISTORY)
def no_input_item_after(after: str, response_id: str) -> InvalidRequest:
    """A page of a response's input items `after` an id it does not hold."""
    return InvalidRequest(f"No item with id '{after}' in the input of response '{response_id}'.", param="after")


# ---- responses: background, compaction, continuations ----------------------------------------------


@text(RESPONSES, "a failed background response's error (code `server_error`)")
def background_interrupted() -> str:
    """A background response still queued or in progress in the SQLite file when the emulator
    stopped (a kill or a crash): the next start marks it failed."""
    return "The emulator stopped before this background response finished; create it again."


@text(RESPONSES, "a failed background response's error (code `server_error`)")
def background_replica_stopped() -> str:
    """A background response whose replica (of a shared store) stopped holding its lease before it
    finished: the next retrieve marks it failed."""
    return "The emulator replica running this background response stopped before it finished; create it again."


@error(RESPONSES)
def previous_response_continued(response_id: str) -> InvalidRequest:
    """A continuation of a paused program that another continuation, stored first, overtook."""
    return InvalidRequest(
        f"Another request continued the program paused in response '{response_id}' first: a paused program "
        "is continued once, and only the first continuation is kept. Continue from the response that was kept.",
        param="previous_response_id",
        code="previous_response_continued",
    )


@error(RESPONSES)
def nothing_to_compact() -> InvalidRequest:
    """`POST /v1/responses/compact` with neither `input` nor `previous_response_id`."""
    return InvalidRequest("Nothing to compact: give 'input' or 'previous_response_id'.", param="input")


@error(RESPONSES)
def cancel_needs_background() -> InvalidRequest:
    """`POST /v1/responses/{id}/cancel` of a response not created with `background: true`."""
    return InvalidRequest("Only responses created with background=true can be cancelled.")


@error(RESPONSES, status="completed")
def cancel_finished(status: str) -> InvalidRequest:
    """`POST /v1/responses/{id}/cancel` of a background response that already finished
    (`status`: `completed` or `failed`), as the hosted API refuses it; an already cancelled one is
    answered again (cancelling twice is idempotent), and an `incomplete` one as it is."""
    return InvalidRequest(f"Cannot cancel a {status} response.")


# ---- conversations ---------------------------------------------------------------------------------


@error(CONVERSATIONS)
def conversation_not_found(conversation_id: str, param: str | None = None) -> NotFound:
    """An unknown conversation (retrieved, updated, deleted, listed, or a create's `conversation`)."""
    return NotFound(f"Conversation with id '{conversation_id}' not found.", param=param)


@error(CONVERSATIONS)
def conversation_item_not_found(conversation_id: str, item_id: str) -> NotFound:
    """An unknown item of a conversation."""
    return NotFound(f"Item with id '{item_id}' not found in conversation '{conversation_id}'.")


@error(CONVERSATIONS)
def no_conversation_item_after(after: str, conversation_id: str) -> InvalidRequest:
    """A page of a conversation's items `after` an id it does not hold."""
    return InvalidRequest(f"No item with id '{after}' in conversation '{conversation_id}'.", param="after")


@error(CONVERSATIONS)
def conversation_locked() -> InvalidRequest:
    """Two continuations of one conversation at once: the first to finish appends, the other appends
    nothing (the hosted API's words)."""
    return InvalidRequest(
        "Another process is currently operating on this conversation. Please retry in a few seconds.",
        param="conversation",
        code="conversation_locked",
    )


# ---- scenarios (the scripted model) ----------------------------------------------------------------


@error(SCENARIOS, closest=[("<name>", "<field>", "<reason>")], report={})
def no_scenario_matched(
    closest: list[tuple[str, str, str]], report: dict[str, object], *, scoped: int = 0, inline: str | None = None
) -> NoScenarioMatched:
    """No scenario matches and the latest user message has no inline block that can run (`closest`:
    up to three near misses as (scenario, field, reason); `scoped`: how many scenarios of a scope
    would match a request that has none; `inline`: why its inline block cannot run)."""
    if closest:
        shown = "; ".join(f"'{scenario}' ({field}): {reason}" for scenario, field, reason in closest)
        message = f"No scenario matches this request. Closest: {shown}."
    else:
        message = "No scenario matches this request (no scenario is loaded)."
    if scoped:
        message = (
            f"This request has no scope, and {scoped} scenario{'' if scoped == 1 else 's'} of a scope would match it: "
            "send it in the test's scope, with the base URL http://HOST:PORT/scopes/<scope>/v1 (the pytest "
            "fixture's base_url, or its env for code that builds its own client) or the x-ptc-emulator-scope "
            "header. " + message
        )
    if inline is None:
        message += " The latest user message has no ```js code block to run inline either."
    else:
        message += f" The latest user message has a ```js code block, but {inline}."
    return NoScenarioMatched(message, report)


@text(SCENARIOS, "invalid_scenario's reason (the loader's)", path="turns.0.call.arguments.x")
def scenario_number_not_finite(path: str) -> str:
    """A scenario holding NaN or an infinity (YAML's `.nan`, `.inf`) where a response would carry
    it (`path`: the field's path): JSON has no spelling for them."""
    return f"{path}: numbers must be finite (NaN and Infinity are not JSON)"


@text(SCENARIOS, "invalid_scenario's reason (the loader's)", key="region", most=64)
def scenario_metadata_key_too_long(key: str, most: int) -> str:
    """A scenario's `match.metadata` key longer than a request's may be (shown cut): no request
    could carry it, so the scenario could never match."""
    return (
        f"key '{key[:64]}' is longer than {most} characters: "
        "a request carrying it is refused, so this scenario could never match"
    )


@text(SCENARIOS, "invalid_scenario's reason (the loader's)", count=17, most=16)
def scenario_metadata_too_many_keys(count: int, most: int) -> str:
    """A scenario's `match.metadata` of more keys than a request's `metadata` may hold: no request
    could carry them all, so the scenario could never match."""
    return (
        f"{count} keys, more than the {most} a request's metadata may hold: "
        "a request carrying them is refused, so this scenario could never match"
    )


@text(SCENARIOS, "invalid_scenario's reason (the loader's)", count=129, most=128)
def scenario_match_too_many_tools(count: int, most: int) -> str:
    """A scenario's `match.tools` naming more tools than the bound (each request that reaches the
    scenario looks each up)."""
    return f"{count} tools, more than the {most} a scenario may ask a request to declare"


@text(SCENARIOS, "invalid_scenario's reason (the loader's)", key="region", most=512)
def scenario_metadata_value_too_long(key: str, most: int) -> str:
    """A scenario's `match.metadata` value longer than a request's may be: no request could carry
    it, so the scenario could never match."""
    return (
        f"the value for '{key[:64]}' is longer than {most} characters: "
        "a request carrying it is refused, so this scenario could never match"
    )


@text(SCENARIOS, "invalid_scenario's reason (the loader's)", kind="message")
def scenario_preamble_misplaced(kind: str) -> str:
    """A turn's `preamble` (the message said before a call or a program, in the same response) on
    a turn of another kind (`kind`), which has no call for it to go before."""
    article = "an" if kind[:1] in "aeiou" else "a"
    return (
        f"preamble goes with a call or program turn (the message said before its call or program, in the "
        f"same response), not {article} {kind} turn"
    )


@text(SCENARIOS, "invalid_scenario's reason (the loader's)", fault="program_timeout", kind="message")
def scenario_program_fault_misplaced(fault: str, kind: str) -> str:
    """A turn's `fault` of `program_timeout` or `program_incomplete` (`fault`) on a turn of another
    kind than `program` (`kind`): there is no program for it to fail, so it would inject nothing."""
    article = "an" if kind[:1] in "aeiou" else "a"
    return (
        f"{fault} goes with a program turn: it fails the turn's program, and {article} {kind} turn has none "
        "(the fault would inject nothing)"
    )


@text(SCENARIOS, "invalid_scenario's reason (the loader's)", name="x", pattern="(?P<x>a)|(?P<x>b)")
def scenario_group_named_twice(name: str, pattern: str) -> str:
    """A `match` pattern (`pattern`) that names two groups `name`: RE2 accepts it, but only the
    first of them binds the template variable, so a text that matches the other left it undefined."""
    return (
        f"the regular expression {pattern!r} names two groups {name!r}: only the first would bind "
        f"{{{{ {name} }}}}; give each group its own name"
    )


@text(
    SCENARIOS,
    "invalid_scenario's reason (the loader's)",
    name="x",
    first="match.input",
    second="match.instructions",
)
def scenario_group_in_two_fields(name: str, first: str, second: str) -> str:
    """Two `match` patterns (the fields `first` and `second`) that both name a group `name`: each
    would bind the template variable, and one capture would silently hide the other."""
    return (
        f"{first} and {second} both name a group {name!r}: only one of their captures would bind "
        f"{{{{ {name} }}}}; give each group its own name"
    )


@text(SCENARIOS, "invalid_scenario's reason (the loader's)", name="input", pattern="^say (?P<input>.*)")
def scenario_group_name_reserved(name: str, pattern: str) -> str:
    """A `match` pattern (`pattern`) with a named group `name` that is also a name the templates
    are given (`input`, `result`, `data`, ...) or one of their globals (`range`, `namespace`,
    `dict`, ...): one of the two would hide the other."""
    return (
        f"the regular expression {pattern!r} has a group named {name!r}, a name the templates already "
        f"have ({{{{ {name} }}}}: see the template variables); give the group another name"
    )


@text(SCENARIOS, "invalid_scenario's reason (the loader's)", value=True)
def scenario_number_not_bool(value: bool) -> str:
    """A scenario's number field (a fault's `latency_ms`, `times`, `retry_after`, a `priority`, ...)
    given `true` or `false`, which would otherwise be read as 1 or 0."""
    return f"a number is wanted here, not {str(value).lower()} (a boolean would be read as {int(value)})"


@text(SCENARIOS, "no_scenario_matched's inline reason")
def inline_cannot_run(reason: str) -> str:
    """The latest user message's ```js block, which the request's `tool_choice` forbids."""
    return f"the ```js block cannot run: {reason}"


@text(SCENARIOS, "a near miss's reason, and inline_cannot_run's", choice="'none'", number=1, does="runs a program")
def tool_choice_conflict(choice: str, number: int, does: str) -> str:
    """A scenario (or an inline block) whose next turn does what `tool_choice` forbids (`choice`: the
    choice described, `does`: what the turn does)."""
    return f"tool_choice is {choice}, but turn {number} {does}"


@error(SCENARIOS)
def scenario_exhausted(scenario: str) -> InvalidRequest:
    """The conversation went past the end of its scenario."""
    return InvalidRequest(
        f"Scenario '{scenario}' has no turn left to play for this conversation.",
        param="input",
        code="scenario_exhausted",
    )


@error(SCENARIOS, budget=300_000_000)
def scenario_matching_too_costly(budget: int) -> ScenarioTurnError:
    """Matching one request against the scenarios' patterns would cost more, all matches together,
    than a request's matching may (`emulator/patterns.py`: `metered`)."""
    return ScenarioTurnError(
        "Matching this request against the scenarios' patterns is too costly: each pattern's RE2 instructions × "
        f"the bytes of each text it is matched against, summed over the request's matches (with a `match.outputs` "
        f"entry's comparisons with each tool output), may be at most {budget}. "
        "Remove scenarios not needed, simplify their patterns, or send shorter texts.",
        param="input",
    )


@error(SCENARIOS, turn=0, expected="program", item_type="function_call")
def scenario_mismatch(scenario: str, turn: int, expected: str, item_type: str) -> InvalidRequest:
    """The conversation went off its scenario: an item where the scenario has another kind of turn
    (`turn`: the turn's index, from 0)."""
    return InvalidRequest(
        f"The conversation does not follow scenario '{scenario}': after the latest user message, turn {turn + 1} "
        f"should be a {expected}, but the input has a {item_type} item there.",
        param="input",
        code="scenario_mismatch",
    )


@error(SCENARIOS, field="match.input", instructions=3505, length=100_000, budget=1_000_000)
def scenario_pattern_too_costly(
    scenario: str, field: str, instructions: int, length: int, budget: int
) -> ScenarioTurnError:
    """A scenario matcher whose compiled program is too large for the text it would run on (RE2's
    slow path costs up to the program's size per byte: `emulator/patterns.py`)."""
    return ScenarioTurnError(
        f"Scenario '{scenario}': the pattern of {field} ({instructions} RE2 instructions) is too costly to match "
        f"against {length} bytes of text: instructions × bytes may be at most {budget}. Simplify the pattern "
        "(counted repetition such as {1,1000} multiplies it) or send a shorter text.",
        param="input",
    )


@error(SCENARIOS, index=0)
def scenario_turn(scenario: str, index: int, reason: str, param: str = "input") -> ScenarioTurnError:
    """A scenario's turn that cannot play for this request (`index`: the turn's, from 0; `reason`:
    one of the texts below, or a tool kind's refusal)."""
    return ScenarioTurnError(f"Scenario '{scenario}', turn {index + 1}: {reason}", param=param)


@text(SCENARIOS, "a scenario turn's reason")
def arguments_not_json(problem: str) -> str:
    """A call turn's `arguments` template that does not render to JSON."""
    return f"call arguments did not render to JSON: {problem}"


@text(SCENARIOS, "a scenario turn's reason")
def arguments_not_object() -> str:
    """A call turn's `arguments` that render to JSON other than an object."""
    return "call arguments must be a JSON object"


@text(SCENARIOS, "a scenario turn's reason")
def template_error(problem: str) -> str:
    """A template that fails to render (an undefined name, a syntax error)."""
    return f"template error: {problem}"


@text(SCENARIOS, "a scenario turn's reason", kind="ZeroDivisionError")
def template_failed(kind: str, problem: str) -> str:
    """A template whose own code fails (arithmetic, a filter on the wrong type): `kind` is the exception's."""
    return f"template error: {kind}: {problem}"


@text(SCENARIOS, "an invalid template's reason (at add)")
def template_too_long(limit: int) -> str:
    """A template longer than the longest a render may output: one with no syntax would always fail."""
    return f"a template of more than {limit} characters"


@text(SCENARIOS, "an invalid template's reason (at add)")
def template_syntax_too_long(limit: int) -> str:
    """A text with template syntax longer than the bound on what is lexed (one C call per text)."""
    return f"a template (a text with {{{{, {{% or {{#) of more than {limit} characters"


@text(SCENARIOS, "an invalid template's reason (at add)")
def template_too_many_tags(limit: int, tags: int) -> str:
    """A template with more tags (`{{`, `{%`, `{#`) than the bound on what one compiles."""
    return f"a template of more than {limit} tags ({{{{, {{%, {{#): {tags}"


@text(SCENARIOS, "an invalid template's reason (at add)")
def template_code_too_large(limit: int) -> str:
    """A template that compiles to more Python code than the bound (a compile holds every client)."""
    return f"a template that compiles to more than {limit} characters of code"


@text(SCENARIOS, "a scenario turn's reason")
def custom_takes_input(name: str) -> str:
    """A call turn calling a custom tool with `arguments` instead of `input`."""
    return f"the custom tool '{name}' takes `input` (a string)"


@text(SCENARIOS, 'a scenario turn\'s reason, after "but the request"')
def undeclared() -> str:
    """A turn calling a tool the request does not declare."""
    return "does not declare it"


@text(SCENARIOS, 'a scenario turn\'s reason, after "but the request"')
def programmatic_only() -> str:
    """A turn calling directly a tool the request lets only programs call."""
    return "allows only programmatic calls to it"


@text(SCENARIOS, 'a scenario turn\'s reason, after "but the request"', not_loaded="deferred, not loaded")
def not_loaded_yet(not_loaded: str) -> str:
    """A turn calling a deferred tool no tool search has loaded (`not_loaded`: how near misses say it)."""
    return f"declares it with defer_loading: true and no tool search has loaded it ({not_loaded})"


@error(SCENARIOS, index=0, why="does not declare it")
def scenario_calls_directly(scenario: str, index: int, kind: str, name: str, why: str) -> ScenarioTurnError:
    """A call turn calling a tool the request does not let it call directly (`why`: `undeclared`,
    `programmatic_only` or `not_loaded_yet`)."""
    what = "the function" if kind == "function" else f"the {kind} tool"
    return scenario_turn(scenario, index, f"calls {what} '{name}' directly, but the request {why}.", "tools")


@error(SCENARIOS, index=0, why="a hosted tool that this emulator does not run")
def scenario_calls_unemulated(scenario: str, index: int, name: str, why: str) -> ScenarioTurnError:
    """A call turn calling a hosted tool the emulator echoes but does not run (`why`: `not_run_here`)."""
    return scenario_turn(scenario, index, f"calls '{name}', {why}; script its result as a message instead.", "tools")


@error(SCENARIOS, index=0, kind="shell", turn="shell")
def scenario_calls_server_tool(scenario: str, index: int, name: str, kind: str, turn: str) -> ScenarioTurnError:
    """A call turn calling a tool that runs on the server's side (`turn`: the turn that plays it)."""
    also = ""
    if kind == "shell":
        also = " (or `tools.shell({commands})` in a `program` turn), its results scripted under hosted.shell"
    return scenario_turn(
        scenario,
        index,
        f"calls '{name}', which runs on the server's side: use a `{turn}:` turn instead of `call`{also}.",
        "tools",
    )


@text(SCENARIOS, "a scenario turn's reason", why="does not declare it")
def mcp_called_directly(label: str, why: str) -> str:
    """An `mcp` turn for a server the request does not let it call directly."""
    return f"calls the MCP server '{label}' directly, but the request {why}"


@text(SCENARIOS, "a scenario turn's reason")
def mcp_tool_not_listed(name: str, label: str) -> str:
    """An `mcp` turn calling a tool its server does not list."""
    return f"calls '{name}', which MCP server '{label}' does not list (or allowed_tools hides)"


@text(SCENARIOS, "a scenario turn's reason")
def mcp_no_result(label: str, name: str, arguments: str) -> str:
    """An `mcp` turn calling a declared (offline) server that has no result for these arguments."""
    return f"the declared MCP server '{label}' has no result for {name}({arguments})"


@text(SCENARIOS, "a scenario turn's reason", why="does not declare it")
def interpreter_called_directly(why: str) -> str:
    """A `code_interpreter` turn the request does not let call the code interpreter directly."""
    return f"calls the code interpreter directly, but the request {why}"


@text(SCENARIOS, "a scenario turn's reason")
def interpreter_unscripted() -> str:
    """A `code_interpreter` turn whose code no entry of `hosted.code_interpreter` matches."""
    return "calls the code interpreter, and no entry of the scenario's hosted.code_interpreter matches its code"


@text(SCENARIOS, "a scenario turn's reason, and a program's unscripted hosted call", instructions=3505, length=100_000)
def hosted_pattern_too_costly(field: str, instructions: int, length: int, budget: int) -> str:
    """A `hosted.code_interpreter` or `hosted.shell` entry whose pattern is too large a program for
    the code or command it would match (`field`: the entry's, as `hosted.shell.0.command`)."""
    return (
        f"the pattern of the scenario's {field} ({instructions} RE2 instructions) is too costly to match against "
        f"{length} bytes: instructions × bytes may be at most {budget}"
    )


@text(
    SCENARIOS,
    "a scenario turn's reason, and a program's unscripted hosted call",
    entries="hosted.code_interpreter",
    budget=300_000_000,
)
def hosted_matching_too_costly(entries: str, budget: int) -> str:
    """Matching one code or command against the `hosted.code_interpreter` or `hosted.shell`
    entries (`entries`) would cost more, all entries together, than one call's matching may."""
    return (
        f"matching it against the entries of the scenario's {entries} is too costly: each entry's RE2 instructions × "
        f"the bytes it is matched against, summed over the entries, may be at most {budget}"
    )


@text(SCENARIOS, "a scenario turn's reason")
def no_hosted_shell() -> str:
    """A `shell` turn in a request with no hosted shell tool."""
    return (
        "runs a shell command in a hosted container, but the request declares no `shell` tool with a "
        "`container_auto` or `container_reference` environment (a local shell is called with a `call` turn)"
    )


@text(SCENARIOS, "a scenario turn's reason")
def shell_programmatic_only() -> str:
    """A `shell` turn in a request that lets only programs call the hosted shell."""
    return "calls the hosted shell directly, but the request allows only programmatic calls"


@text(SCENARIOS, "a scenario turn's reason")
def shell_unscripted(command: str) -> str:
    """A `shell` turn whose command no entry of `hosted.shell` matches."""
    return f"runs the command {command!r} in the hosted shell, and no entry of the scenario's hosted.shell matches it"


@text(SCENARIOS, "a scenario turn's reason")
def no_search_tool() -> str:
    """A `search` turn in a request without a `tool_search` tool."""
    return "searches for tools, but the request declares no tool_search tool."


@text(SCENARIOS, "a scenario turn's reason")
def search_loads_undeferred(name: str) -> str:
    """A `search` turn whose `load` names a tool the request does not declare deferred."""
    return f"loads '{name}', but the request declares no deferred tool by that name."


@text(SCENARIOS, "a scenario turn's reason", arguments='{"query": "x"}')
def search_arguments_unfit(arguments: str, problem: str) -> str:
    """A client-executed `search` turn whose arguments do not fit the tool_search tool's `parameters`."""
    return (
        f"the tool_search_call arguments {arguments} do not fit the tool_search tool's parameters ({problem}): "
        "give the search turn `arguments` that do."
    )


@error(SCENARIOS)
def rate_limited() -> StatusError:
    """A scenario's `http_error: 429` fault (with `Retry-After` and `x-should-retry` when asked)."""
    return StatusError(
        429, "Rate limit reached for requests (injected by the scenario).", type="requests", code="rate_limit_exceeded"
    )


@error(SCENARIOS)
def overloaded() -> StatusError:
    """A scenario's `http_error: 503` fault (OpenAI's body; a 500 fault answers `server_error`'s)."""
    return StatusError(503, "The engine is currently overloaded, please try again later.", type="server_error")


# ---- the model upstream -----------------------------------------------------------------------------


@error(UPSTREAM, seconds=120.0)
def upstream_timeout(url: str, seconds: float) -> UpstreamTimeout:
    """The model upstream did not answer within `--model-upstream-timeout` (after its retries)."""
    return UpstreamTimeout(f"The model upstream at {url} did not answer within {seconds:g} s.")


@error(UPSTREAM)
def upstream_unreachable(url: str, error: str) -> UpstreamError:
    """The model upstream cannot be reached (`error`: the transport error's name)."""
    return UpstreamError(f"The model upstream at {url} could not be reached ({error}).")


@error(UPSTREAM, status=500)
def upstream_answered_status(url: str, status: int, body: str) -> UpstreamError:
    """The model upstream answered an error status (`body`: the start of its body, the key redacted)."""
    return UpstreamError(f"The model upstream at {url} answered {status}: {body}")


FAULT = "upstream_fault's fault"
SUBJECT = "malformed's and unknown_shape_at's subject"
PROBLEM = "malformed's problem, and upstream_arguments_malformed's"
WRONG = "unknown_shape_at's problem"


@error(UPSTREAM)
def upstream_fault(url: str, fault: str) -> UpstreamError:
    """The model upstream's answer, whole or streamed, is refused as untrusted input (`fault`: one
    of the texts below, the end of the sentence)."""
    return UpstreamError(f"The model upstream at {url} {fault}")


@text(UPSTREAM, FAULT, verb="streamed", limit=8388608)
def too_many_bytes(verb: str, limit: int) -> str:
    """An answer (`verb`: `answered`) or a stream (`streamed`) past `--model-upstream-max-answer-bytes`,
    refused at the chunk that crosses it."""
    return f"{verb} more than {limit} bytes (--model-upstream-max-answer-bytes)."


@text(UPSTREAM, FAULT, encoding="gzip")
def compressed(encoding: str) -> str:
    """An answer sent with a Content-Encoding although `Accept-Encoding: identity` asked for none."""
    return f"answered with Content-Encoding {encoding!r} although asked for none."


@text(UPSTREAM, FAULT, status=200, kind="text/html; charset=utf-8")
def not_an_answer(status: int, kind: str) -> str:
    """An answer whose Content-Type is neither JSON nor server-sent events (an HTML page: a login
    or proxy page, a wrong URL's web server), named with its status instead of read as one."""
    return f"answered {status} with Content-Type {kind!r}, not JSON or server-sent events."


@text(UPSTREAM, FAULT, status=200, kind="text/plain")
def json_not_events(status: int, kind: str) -> str:
    """An answer to a streamed request that is one whole JSON body under a Content-Type read as
    server-sent events (`text/plain`, `text/event-stream`, none at all): named with its status
    and type, not read as a stream with no events in it ("ended its stream before it finished")."""
    labelled = f"Content-Type {kind!r}" if kind else "no Content-Type"
    return (
        f"answered {status} with {labelled} a body that is JSON, not server-sent events (a streamed "
        "answer is read as events unless its Content-Type is JSON's)."
    )


@text(UPSTREAM, SUBJECT)
def answered_body() -> str:
    """A whole answer's body."""
    return "answered a body"


@text(UPSTREAM, SUBJECT)
def streamed_chunk() -> str:
    """A Chat Completions stream's chunk."""
    return "streamed a chunk"


@text(UPSTREAM, SUBJECT)
def streamed_event() -> str:
    """A Responses stream's event."""
    return "streamed an event"


@text(UPSTREAM, SUBJECT)
def streamed_line() -> str:
    """A line of a stream (a comment, or a field other than `data`), read as UTF-8."""
    return "streamed a line"


@text(UPSTREAM, FAULT)
def unknown_stream_field(field: str) -> str:
    """A stream's line whose field is none of server-sent events' (`data`, `event`, `id`, `retry`,
    or a comment's `:`): `Data:`, or `data:` after a byte order mark or a no-break space. The
    event-stream format ignores such a line, but it may hold the answer, and a response completed
    without it would be a false green (`field`: the line's field, the key taken out, what is not
    printable escaped)."""
    return (
        f"streamed a line whose field '{field}' is none of server-sent events' (data, event, id, retry, "
        "or ':' for a comment); it is not skipped, as a line left unread may hold the answer."
    )


@text(UPSTREAM, FAULT, subject="streamed a chunk", problem="that is not JSON")
def malformed(subject: str, problem: str) -> str:
    """JSON text the emulator does not take (`subject`: what was read; `problem`: one of the texts below)."""
    return f"{subject} {problem}."


@text(UPSTREAM, PROBLEM)
def answer_not_json() -> str:
    """Text that is not JSON (RFC 8259)."""
    return "that is not JSON"


@text(UPSTREAM, PROBLEM)
def answer_not_utf8() -> str:
    """Bytes that are not UTF-8."""
    return "that is not UTF-8"


@text(UPSTREAM, PROBLEM, limit=64)
def answer_too_deep(limit: int) -> str:
    """JSON nested deeper than the emulator carries."""
    return f"nested deeper than {limit} levels"


@text(UPSTREAM, PROBLEM, name="Infinity")
def answer_constant(name: str) -> str:
    """`NaN`, `Infinity` or `-Infinity`, which JSON does not have."""
    return f"holding {name}, which JSON does not have"


@text(UPSTREAM, PROBLEM, shown="1e999")
def answer_number_too_large(shown: str) -> str:
    """A number beyond a double's range (`shown`: its text, cut short)."""
    return f"holding a number beyond a double's range ({shown})"


@text(UPSTREAM, PROBLEM)
def answer_lone_surrogate() -> str:
    """A string holding a lone UTF-16 surrogate (`"\\ud800"`)."""
    return "holding invalid Unicode (a lone surrogate)"


@text(
    UPSTREAM, FAULT, subject="answered a body", path="choices[0].message.content", problem="is a number, not a string"
)
def unknown_shape_at(subject: str, path: str, problem: str) -> str:
    """Decoded JSON its protocol does not have, at `path` (`problem`: one of the texts below)."""
    return f"{subject} of an unknown shape: `{path}` {problem}."


@text(UPSTREAM, WRONG)
def shape_missing() -> str:
    """A value the protocol needs is missing (or null)."""
    return "is missing"


@text(UPSTREAM, WRONG, found="a number", wanted="a string")
def shape_wrong(found: str, wanted: str) -> str:
    """A value of another JSON kind than the protocol's (`found`, `wanted`: `null`, `a boolean`,
    `a number`, `a string`, `a list`, `an object`, `a whole number`)."""
    return f"is {found}, not {wanted}"


@text(UPSTREAM, WRONG)
def shape_negative() -> str:
    """A token count below zero."""
    return "is negative"


@text(UPSTREAM, FAULT)
def no_choices() -> str:
    """A Chat Completions answer whose `choices` is empty."""
    return "answered no choices (`choices` is empty)."


@text(UPSTREAM, FAULT)
def key_in_arguments(name: str) -> str:
    """A call whose arguments hold the upstream's key once a client decodes them more than once (a
    JSON escape of an escape, as `\\u005cu0073...`, which the emulator cannot take out without
    breaking the call): refused, not passed on, whatever the call was."""
    return f"answered a call of `{name}` whose arguments hold the upstream's key (escaped), which is not passed on."


@text(UPSTREAM, FAULT)
def answered_nothing() -> str:
    """An answer, whole or streamed, with neither text nor a tool call (never an empty completed response)."""
    return "answered neither text nor a tool call."


@text(UPSTREAM, FAULT, count=2049, limit=2048)
def too_many_calls(count: int, limit: int) -> str:
    """An answer, whole or streamed, with more tool calls in one turn than the model upstream takes
    (`protocol.MAX_CALLS`): each becomes an item of the response, and 30,000 of them held every
    client's requests for up to 2 s. A stream is refused at the first call past the limit."""
    return f"answered {count} tool calls in one turn; at most {limit} are taken (one turn's limit)."


@text(UPSTREAM, FAULT, told=15, final=15)
def deltas_disagree(told: int, final: int) -> str:
    """A Responses stream whose text deltas, joined, are not its final response's text (`told`:
    the characters streamed; `final`: the final text's): the client was shown a text that is not
    the answer (the hosted API's deltas add up to their `.done` text)."""
    return (
        f"streamed text deltas ({told} characters) that do not add up to its final response's text "
        f"({final} characters): the text streamed is not the answer."
    )


@text(UPSTREAM, FAULT)
def upstream_refused(refusal: str) -> str:
    """An answer holding a refusal alone (Chat Completions' `refusal`, a Responses `refusal`
    content part), no text or tool call: said as the refusal, not as an empty answer (`refusal`:
    its start, the key redacted)."""
    return f"refused to answer: {refusal}"


@text(UPSTREAM, FAULT)
def unreadable_shape() -> str:
    """The safety net: a protocol that stumbles on an answer's shape without naming the path."""
    return "answered in a shape its protocol does not read."


@text(UPSTREAM, FAULT)
def failed_response(message: str) -> str:
    """A Responses answer whose status is `failed` (`message`: the start of its error's, the key redacted)."""
    return f"answered a failed response: {message}"


@text(UPSTREAM, FAULT)
def failed_mid_stream(message: str) -> str:
    """A stream that reports an error (`message`: the start of the upstream's, the key redacted)."""
    return f"failed mid-stream: {message}"


@text(UPSTREAM, "failed_mid_stream's and failed_response's message")
def no_failure_message() -> str:
    """A Responses failure that carries no message."""
    return "no message"


@text(UPSTREAM, FAULT)
def stream_unfinished() -> str:
    """A Chat Completions stream that ends with no `finish_reason` and no `[DONE]`."""
    return "ended its stream before it finished (no `finish_reason`, no `[DONE]`)."


@text(UPSTREAM, FAULT)
def stream_without_finish_reason() -> str:
    """A Chat Completions stream that reaches `[DONE]` without choice 0 ever giving a
    `finish_reason`: nothing said the answer finished, so it is taken as cut, not as completed."""
    return "ended its stream without a `finish_reason` (the answer may have been cut short)."


@text(UPSTREAM, FAULT)
def unknown_finish_reason(reason: str) -> str:
    """A Chat Completions choice whose `finish_reason` is none of `stop`, `tool_calls`,
    `function_call` (finished), `length` or `content_filter` (incomplete): what it means is not
    known, so the answer is not taken as finished (`reason`: the value, cut short)."""
    return f"answered with an unknown `finish_reason`: {reason}"


@text(UPSTREAM, FAULT, field="content")
def after_finish_reason(field: str) -> str:
    """A Chat Completions stream whose choice 0 sends more (`field`: the delta's `content`,
    `reasoning_content`, `reasoning`, `refusal` or `tool_calls`) after its `finish_reason`: the
    answer said it was done, so what came after is not part of it, and taking it (as was done:
    "first" + stop + " LATE" completed as "first LATE") or dropping it would each say `completed`
    of an answer that is not the one streamed."""
    return f"streamed `{field}` after its choice's `finish_reason` (an answer already done)."


@text(UPSTREAM, FAULT, index=0, first="call_1", then="call_2")
def call_ids_differ(index: int, first: str, then: str) -> str:
    """A Chat Completions stream that gives one tool call index (`index`) two different ids
    (`first`, then `then`): two calls at one position, whose names and arguments would be joined
    into one call (`lookuplookup`). Each id is cut short."""
    return f"streamed two tool calls at index {index}: ids {first!r}, then {then!r}."


@text(UPSTREAM, FAULT, reasons="length, then stop")
def finish_reasons_differ(reasons: str) -> str:
    """A Chat Completions stream whose choice 0 gives two different `finish_reason`s (`length`,
    then `stop`): which is true is not known, and keeping either could say `completed` of an
    answer the upstream cut, so neither is kept (`reasons`: the two, cut short). The same one
    given again is taken."""
    return f"answered two different `finish_reason`s for one choice: {reasons} (the answer may have been cut short)."


@text(UPSTREAM, FAULT)
def unfinished_response(status: str) -> str:
    """A Responses answer (whole, or the response of `response.completed`) whose `status` is not
    `completed`, `incomplete` or `failed` (`cancelled`, `in_progress`, `queued`, another value, or
    none at all, `status`: `(none)`): it did not finish, so it is not taken as completed."""
    return f"answered a response that did not finish (status: {status})."


@text(UPSTREAM, FAULT, item="output[0]", status="in_progress")
def unfinished_item(item: str, status: str) -> str:
    """A Responses answer with an output item (`item`: its path, in the response's `output` or as
    a stream's `output_item.done` gave it) whose `status` is neither `completed` nor `incomplete`
    (`in_progress`, `failed`, another value): the answer did not finish, so it is not taken as
    completed (an item `incomplete` makes the response incomplete instead)."""
    return f"answered a response whose item {item} did not finish (status: {status})."


@text(UPSTREAM, FAULT)
def stream_ended_early() -> str:
    """A Responses stream that ends before `response.completed`."""
    return "ended its stream before the response was completed."


@error(UPSTREAM)
def upstream_stream_broke(error: str) -> UpstreamError:
    """A stream cut off by the transport (`error`: the transport error's name)."""
    return UpstreamError(f"The model upstream's stream broke off ({error}).")


@error(UPSTREAM, limit=16)
def upstream_too_many_turns(limit: int) -> UpstreamInvalidToolCall:
    """A model upstream that keeps calling server-run tools past the bound of one response."""
    return UpstreamInvalidToolCall(f"The model upstream took more than {limit} turns in one response.")


@error(UPSTREAM)
def upstream_unoffered_function(name: str, offered: str) -> UpstreamInvalidToolCall:
    """A model upstream calling a function the request does not offer (`offered`: their names, or `none`)."""
    return UpstreamInvalidToolCall(
        f"The model upstream called a function this request does not offer: {name!r} (offered: {offered})."
    )


@error(UPSTREAM, called="'lookup'")
def upstream_arguments_not_json(called: str, arguments: str) -> UpstreamInvalidToolCall:
    """A model upstream calling a function (or the program tool) with arguments that are not JSON
    (`called`: the function's name as shown)."""
    return UpstreamInvalidToolCall(
        f"The model upstream called {called} with arguments that are not JSON: {arguments[:200]!r}."
    )


@error(UPSTREAM, called="'lookup'", problem="nested deeper than 64 levels")
def upstream_arguments_malformed(called: str, problem: str, arguments: str) -> UpstreamInvalidToolCall:
    """A model upstream calling a function (or the program tool) with arguments that are JSON the
    emulator does not take (`problem`: one of `malformed`'s but `answer_not_json`'s)."""
    return UpstreamInvalidToolCall(f"The model upstream called {called} with arguments {problem}: {arguments[:200]!r}.")


@error(UPSTREAM)
def upstream_code_missing(tool: str, arguments: str) -> UpstreamInvalidToolCall:
    """A model upstream calling the program tool without a `code` string."""
    return UpstreamInvalidToolCall(
        f"The model upstream called {tool} without a `code` argument (a string): {arguments[:200]!r}."
    )


# ---- the recording proxy ----------------------------------------------------------------------------


@error(PROXY)
def proxy_unreachable(base: str, kind: str, detail: str) -> StatusError:
    """The recording proxy cannot reach its upstream (`kind`: the transport error's name, `detail`: its text)."""
    return StatusError(
        502,
        f"The upstream {base} could not be reached: {kind}: {detail}",
        type="server_error",
        code="upstream_unreachable",
    )


@error(PROXY)
def proxy_answer_cut(base: str, kind: str, detail: str) -> StatusError:
    """The recording proxy's upstream broke its answer off (`kind`: the transport error's name,
    `detail`: its text): an SSE stream under way ends with this `error` event; a body under way
    is broken off unended."""
    return StatusError(
        502,
        f"The upstream {base} broke off its answer: {kind}: {detail}",
        type="server_error",
        code="upstream_unreachable",
    )


@error(PROXY, encoding="gzip")
def proxy_answer_packed(base: str, encoding: str) -> StatusError:
    """The recording proxy holds an upstream key (`--upstream-api-key-env`) and its upstream answered
    compressed (`encoding`) although asked for no encoding: the key is taken out of every answer
    passed on, which cannot be done in a compressed one, so it is not passed on (without a key, such
    an answer is passed on as it is)."""
    return StatusError(
        502,
        f"The upstream {base} answered compressed ({encoding}) although asked for no encoding: with an "
        "upstream key (--upstream-api-key-env) the proxy takes the key out of every answer, which it "
        "cannot do in a compressed one, so the answer is not passed on.",
        type="server_error",
        code="upstream_error",
    )


@error(PROXY, why="is not UTF-8")
def proxy_answer_unreadable(base: str, why: str) -> StatusError:
    """The recording proxy holds an upstream key (`--upstream-api-key-env`) and an upstream answer
    (a JSON, SSE or text body, an SSE event, a WebSocket message) is one whose text it cannot be
    sure of reading as the client will: it declares a charset other than UTF-8, its bytes are not
    UTF-8 (a UTF-16 or UTF-32 BOM among them) or hold a NUL byte (UTF-16 or UTF-32 without a BOM),
    or, for a binary WebSocket message, they read as the key in UTF-16 or UTF-32; or, whatever its
    Content-Type, a JSON reader decodes its bytes (UTF-16, UTF-32, an encoded surrogate, or what
    cannot be decoded replaced, as a lenient reader does) to text holding the key; or its text
    holds the key nested (a JSON string inside a string, an escape after an escaped backslash),
    which cannot be taken out in place; or one item's deltas in a held body read as a stream, joined,
    hold it; or what a client joins holds it though no piece does (a response's message output_text
    parts joined, as the SDKs' `output_text` is; a stream's deltas of one kind across parts and items;
    an event named a delta on its `event:` line whose data's `type` is another). The key is taken out of UTF-8
    text only, so such an answer is refused, not passed on (`why` is one of the proxy's own
    phrases, never the upstream's words)."""
    return StatusError(
        502,
        f"The upstream {base} answered text that {why}: with an upstream key (--upstream-api-key-env) "
        "the proxy takes the key out of every answer, which it can only be sure of in UTF-8 text, so "
        "the answer is not passed on.",
        type="server_error",
        code="upstream_error",
    )


@error(PROXY, seconds=600.0)
def proxy_timeout(base: str, seconds: float) -> StatusError:
    """The recording proxy's upstream did not finish its answer within `--upstream-timeout` (the
    whole exchange): a 504 before any of the answer was passed on, an SSE stream's `error` event after."""
    return StatusError(
        504,
        f"The upstream {base} did not finish its answer within {seconds:g} s (--upstream-timeout).",
        type="server_error",
        code="upstream_timeout",
    )


@error(PROXY, seconds=600.0)
def proxy_socket_timeout(base: str, seconds: float) -> StatusError:
    """Over a WebSocket, the recording proxy's upstream did not answer a response.create to its end
    (its response's terminal event, or an `error`) within `--upstream-timeout` of it (or of the
    upstream's answering the create before it, while that one streams): sent as an `error` event,
    then close code 1014."""
    return StatusError(
        504,
        f"The upstream {base} did not finish answering a response.create within {seconds:g} s (--upstream-timeout).",
        type="server_error",
        code="upstream_timeout",
    )


@error(PROXY, size=64 * 2**20)
def proxy_socket_frame_too_large(base: str, size: int) -> StatusError:
    """Over a WebSocket, the recording proxy's upstream sent one message larger than the proxy holds
    (64 MiB): sent as an `error` event, then close code 1009 (message too big)."""
    return StatusError(
        502,
        f"The upstream {base} sent a WebSocket message larger than {size} bytes: not passed on.",
        type="server_error",
        code="upstream_error",
    )


@error(PROXY)
def proxy_socket_broke(base: str) -> StatusError:
    """Over a WebSocket, the recording proxy's upstream connection ended without a close frame (its
    process or the network dropped it): sent as an `error` event, then close code 1014."""
    return StatusError(
        502,
        f"The upstream {base} dropped the WebSocket connection without closing it.",
        type="server_error",
        code="upstream_error",
    )


@error(PROXY, status=502)
def proxy_socket_refused(base: str, kind: str, detail: str, status: int) -> StatusError:
    """The recording proxy's upstream does not take the WebSocket (`status`: its HTTP answer, else 502);
    sent as an `error` event, then close code 1014."""
    return StatusError(
        status,
        f"The upstream {base} did not take the WebSocket: {kind}: {detail}",
        type="server_error" if status >= 500 else "invalid_request_error",
        code="upstream_unreachable",
    )


# ---- the pytest plugin's cassettes ----------------------------------------------------------------


@text(CASSETTES, "the error of a test whose cassette is replayed", path="tests/cassettes/test_a/test_b.yaml")
def cassette_unusable(path: str, problem: str) -> str:
    """A `@pytest.mark.ptc_record` cassette that cannot be replayed fails the test that replays
    it, at setup, with this one line (no traceback): `problem` is one of the texts below."""
    return f"{path}: this cassette cannot be replayed: {problem}"


@text(CASSETTES, "a cassette's problem")
def cassette_not_a_file() -> str:
    """The cassette's path is a FIFO, a device, a socket or a directory: refused unread (a FIFO
    would hold the test until something wrote to it), never taken as a cassette not yet recorded."""
    return "the path is not a regular file"


@text(CASSETTES, "a cassette's problem", limit=16777216, size=62914560)
def cassette_too_large(limit: int, size: int) -> str:
    """The cassette file is larger than the plugin reads (`testing.cassettes.MAX_CASSETTE_BYTES`,
    16 MiB), refused before any of it is read."""
    return f"the file is too large to replay: larger than {limit} bytes ({size} bytes)"


@text(CASSETTES, "a cassette's problem", limit=800000)
def cassette_too_many_values(limit: int) -> str:
    """The cassette's YAML holds more values than the plugin builds
    (`testing.cassettes.MAX_CASSETTE_VALUES`, 800,000: 16 recordings at the scenario bound),
    counted before any of them is built: within 16 MiB a file of short values took minutes and
    gigabytes to load."""
    return f"the file holds more than {limit} YAML values (a long text is one), more than a cassette is read with"


@text(CASSETTES, "a cassette's problem", reason="Permission denied")
def cassette_unreadable(reason: str) -> str:
    """The cassette's path exists and cannot be opened: a symbolic link in a loop, a file it may
    not read (`reason`: the system's)."""
    return f"the file cannot be read: {reason}"


@text(CASSETTES, "a cassette's problem", position=12)
def cassette_not_text(position: int) -> str:
    """The cassette file's bytes are not UTF-8."""
    return f"the file is not UTF-8 text (at byte {position})"


@text(CASSETTES, "a cassette's problem", problem="expected ',' or ']' at line 1, column 13")
def cassette_not_yaml(problem: str) -> str:
    """The cassette is not YAML, or uses what scenario files refuse (aliases, merge keys, a key given twice)."""
    return f"the file is not valid YAML: {problem}"


@text(CASSETTES, "a cassette's problem")
def cassette_not_cassette() -> str:
    """The cassette's YAML is not a mapping with a `scenarios` list."""
    return "a cassette is a mapping with a `scenarios` list"


@text(CASSETTES, "a cassette's problem", index=0)
def cassette_not_mapping(index: int) -> str:
    """An entry of the cassette's `scenarios` is not a mapping (a recording is one)."""
    return f"the recording at scenarios.{index} is not a mapping"


@text(CASSETTES, "a cassette's problem", index=0, path="match.input", kind="a date")
def cassette_not_json(index: int, path: str, kind: str) -> str:
    """A recording of the cassette holds a value YAML makes and JSON (so a scenario) has none of:
    a date or time, binary, a set, NaN or an infinity."""
    return f"the recording at scenarios.{index} holds {kind} at {path}, which a scenario cannot hold (JSON has none)"


@text(CASSETTES, "a cassette's problem", index=0, turn=1, kind="message")
def cassette_empty_answer(index: int, turn: int, kind: str) -> str:
    """A recording of the cassette with an empty, null or whitespace-only `message` or `refusal`
    turn, one of only characters that show nothing (a zero-width space, a byte order mark), or a
    template of constants only that renders so (`{{ '' }}`, `{# note #}`): it would replay as a
    completed response with nothing in it, a test passing on no answer (the recording proxy does not
    record one, and the model upstream refuses an empty or whitespace-only one with a 502). A
    scenario written by hand may still say `message: ''`."""
    return (
        f"the recording at scenarios.{index} has an empty {kind} at turns.{turn}, which would replay as an answer "
        "with nothing in it"
    )


@text(CASSETTES, "a cassette's problem", index=1, name="a", first=0)
def cassette_duplicate_name(index: int, name: str, first: int) -> str:
    """Two recordings of the cassette have the same name (one would silently replace the other)."""
    return f"the recording at scenarios.{index} is named {name!r}, as the one at scenarios.{first} is: names are unique"


@text(CASSETTES, "a cassette's problem", index=0, name="a", message="Invalid scenario: ...")
def cassette_scenario_refused(index: int, name: str, message: str) -> str:
    """A recording of the cassette is refused as a scenario (`message`: the emulator's reason)."""
    return f"the recording at scenarios.{index} ({name!r}) is refused: {message}"


# ---- MCP servers ------------------------------------------------------------------------------------


@error(MCP, message="<listing_failed, no_server, or the scenario's declared error>")
def mcp_listing_error(message: str) -> StatusError:
    """An MCP server that cannot be listed: unreachable, refused by the egress policy, past its
    deadline or answer limit, not speaking MCP (docs/limits.md, "MCP"), or a declared failure."""
    return StatusError(424, message, type="external_connector_error", code="http_error", param="tools")


@text(MCP, "the 424 of a listing")
def listing_failed(label: str, reason: str) -> str:
    """Listing an MCP server failed (`reason`: one of the texts below)."""
    return f"Error retrieving tool list from MCP server '{label}': {reason}"


@text(MCP, "the 424 of a listing, and an mcp_call's error")
def no_server(label: str, connector: str | None = None) -> str:
    """An MCP tool with no `server_url` (or a connector) that no scenario or hosted script declares."""
    what = f"the connector '{connector}'" if connector else "no server_url"
    return (
        f"MCP server '{label}' has {what}, and no scenario or hosted script declares it: the emulator cannot "
        "reach connectors; declare the server's tools under `hosted.mcp_servers`."
    )


@text(MCP, "an MCP listing's or call's error")
def mcp_http_status(status: int) -> str:
    """An MCP server answering an HTTP error status (nothing else of its answer is shown)."""
    return f"HTTP {status} from the MCP server"


@text(MCP, "an MCP listing's or call's error", seconds="5 s", flag="--mcp-timeout")
def mcp_no_answer(seconds: str, flag: str) -> str:
    """An MCP server past the deadline (`flag`: what sets it)."""
    return f"the MCP server did not answer within {seconds} ({flag})"


@text(MCP, "an MCP listing's or call's error", seconds="5 s")
def mcp_no_connection(seconds: str) -> str:
    """An MCP server that does not accept the connection within the connect deadline."""
    return f"could not connect to the MCP server within {seconds}"


@text(MCP, "an MCP listing's or call's error")
def mcp_unreachable() -> str:
    """An MCP server that cannot be reached (refused, reset, unknown name)."""
    return "could not reach the MCP server"


@text(MCP, "an MCP listing's or call's error")
def mcp_not_mcp() -> str:
    """An answer that is not MCP (not JSON-RPC, another content type)."""
    return "the MCP server's answer is not a valid MCP message"


@text(MCP, "an MCP listing's or call's error")
def mcp_client_gone() -> str:
    """The emulator's MCP client process (every live listing and call runs in it) ended while it
    held this listing or call: it was killed, or crashed. The next listing or call starts another."""
    return "the emulator's MCP client process ended before the MCP server's answer was read; try again"


@text(MCP, "an MCP listing's error, and a scenario's declared server", name="a.b")
def mcp_tool_name_invalid(name: str) -> str:
    """An MCP server (or a scenario's declared one) listing a tool whose name is not 1 to 128
    letters, digits, `_` or `-`: the names a model can call, as a function tool's, and a single
    `tools.<label>.<tool>` key (a dot would open a namespace). `name` is cut to 64 characters."""
    shown = name if len(name) <= 64 else name[:64] + "..."
    return f"the MCP server lists a tool named {shown!r}, which is not 1 to 128 letters, digits, '_' or '-'"


@text(MCP, "an MCP listing's error, and a scenario's declared server", name="lookup")
def mcp_tool_name_twice(name: str) -> str:
    """An MCP server (or a scenario's declared one) listing two tools of one name: which one a call
    reaches would be a guess, so the listing fails rather than keep one of them."""
    return f"the MCP server lists more than one tool named {name!r}"


@text(MCP, "an MCP listing's or call's error", limit=1048576)
def mcp_answer_too_large(limit: int) -> str:
    """An MCP server's answer over `--mcp-max-answer-bytes`."""
    return f"the MCP server's answer exceeded {limit} bytes (--mcp-max-answer-bytes)"


@text(MCP, "an MCP listing's or call's error", encoding="gzip")
def mcp_compressed(encoding: str) -> str:
    """An MCP server's answer sent with a Content-Encoding although `Accept-Encoding: identity`
    asked for none (unpacked, a few MiB could be GiBs)."""
    return f"the MCP server answered with Content-Encoding {encoding!r} although asked for none"


@text(MCP, "a direct mcp_call's error message", call="docs.lookup", size=8388900, carried=0, limit=3145728)
def visible_result_too_large(call: str, size: int, carried: int, limit: int) -> str:
    """A direct MCP call (the model's own, not a program's) whose `mcp_call` item, output included,
    would take the results of server-run calls the conversation carries (sealed or visible) past
    the bytes a `store: false` client can send back under `--max-body-bytes`: the call is answered
    failed, without its output."""
    return (
        f"limit: the result of the call to {call} takes {size} bytes in its mcp_call item, and the conversation "
        f"carries {carried} bytes of server-run call results already: together over the {limit} bytes a "
        "store: false client can send back under --max-body-bytes (the body limit less what the rest of the "
        'conversation needs, docs/limits.md "MCP"), so the result is left out; raise --max-body-bytes to carry it'
    )


@text(MCP, "the 424 of a listing (listing_failed's reason)", label="docs", size=5570000, carried=0, limit=3145728)
def visible_listing_too_large(label: str, size: int, carried: int, limit: int) -> str:
    """An MCP server's listing shown to the model (an `mcp_list_tools` item) that would take the
    results of server-run calls the conversation carries (sealed or visible, this response's
    listings included) past the bytes a `store: false` client can send back under
    `--max-body-bytes`: the listing fails, as one that cannot be read does."""
    return (
        f"limit: the listing of MCP server '{label}' takes {size} bytes in its mcp_list_tools item, and the "
        f"conversation carries {carried} bytes of server-run call results already: together over the {limit} bytes "
        "a store: false client can send back under --max-body-bytes (the body limit less what the rest of the "
        'conversation needs, docs/limits.md "MCP"); narrow allowed_tools, or raise --max-body-bytes to carry it'
    )


@text(MCP, "an MCP listing's or call's error")
def mcp_url_scheme(scheme: str) -> str:
    """An MCP server URL that is not http or https (`scheme`: its scheme, empty for a relative URL)."""
    return f"the MCP server URL must be http or https, not {scheme or 'a relative URL'!r}"


@text(MCP, "an MCP listing's or call's error")
def mcp_url_no_host() -> str:
    """An MCP server URL without a host."""
    return "the MCP server URL has no host"


@text(MCP, "an MCP listing's or call's error")
def mcp_is_the_emulator(server: str, ip: str) -> str:
    """An MCP server URL naming the emulator's own port (`server`: host and port)."""
    return (
        f"the MCP server {server} is the emulator itself ({ip}); the emulator never connects to its own port, "
        "whatever --mcp-allow-host says"
    )


@text(MCP, "an MCP listing's or call's error", kind="private", server="localhost:9000", private=True)
def mcp_address_refused(host: str, ip: str, kind: str, server: str, private: bool) -> str:
    """An MCP server at a loopback, private or link-local address the egress policy does not allow
    (`server`: host and port, as `--mcp-allow-host` takes it; `private`: `--mcp-allow-private` would allow it)."""
    how = f"--mcp-allow-host {server}" + (" (or --mcp-allow-private)" if private else "")
    return f"the emulator does not connect to {host} ({ip}, a {kind} address); allow it with {how}"


@text(MCP, "an MCP listing's or call's error")
def mcp_no_address(host: str) -> str:
    """An MCP server name that resolves to no address."""
    return f"{host} has no address"


@text(MCP, "an MCP listing's or call's error")
def mcp_tcp_only() -> str:
    """An MCP transport asking for a Unix socket."""
    return "the MCP client connects over TCP only"


@text(MCP, "an mcp_call's error (an mcp_protocol_error)")
def mcp_unknown_tool(name: str) -> str:
    """A call to a tool a declared (offline) MCP server does not have."""
    return f"Unknown tool: {name}"


@text(MCP, "a program's rejected promise")
def mcp_tool_failed() -> str:
    """An MCP tool that reported an error with no text."""
    return "the tool reported an error"


@text(MCP, "a program's rejected promise")
def mcp_unknown_error() -> str:
    """An MCP call error with no message."""
    return "unknown error"


# ---- WebSocket mode ---------------------------------------------------------------------------------


@text(SOCKET, "the message of a `response.steer.failed` event (code `invalid_input`)", got="an array")
def steer_reference_wrong_type(got: str) -> str:
    """A steer frame whose `previous_response_id` is no string: worded as a create's `invalid_type`."""
    return wrong_type("previous_response_id", ["a string"], got, None).message


@error(SOCKET, seconds=3600.0)
def socket_lifetime_reached(seconds: float) -> StatusError:
    """A WebSocket open for its whole lifetime (60 minutes, as the hosted API's; the setting
    `websocket_lifetime_s` in code): sent, then closed."""
    minutes = seconds / 60
    shown = f"{minutes:g} minutes" if minutes >= 1 else f"{seconds:g} seconds"
    return StatusError(
        400,
        f"WebSocket connections last at most {shown}: open a new connection to continue.",
        type="invalid_request_error",
        code="websocket_connection_limit_reached",
    )


@text(SOCKET, "the reason of the close frame (code 1009) that ends the socket", limit=65536)
def socket_message_too_fragmented(limit: int) -> str:
    """A message sent in more frames than the server joins (its first and its continuations, empty
    ones counted): the socket is closed."""
    return f"A message may come in at most {limit} frames: send it whole or in fewer fragments."


@text(SOCKET, "the reason of the close frame (code 1007) that ends the socket")
def socket_text_not_utf8() -> str:
    """A text message whose bytes are not UTF-8 (RFC 6455 asks text to be): the socket is closed."""
    return "A text message must be UTF-8."


@error(SOCKET, problem="nested deeper than 64 levels")
def frame_too_deep(problem: str) -> InvalidRequest:
    """A frame nested deeper than the emulator reads (`problem`: the reader's words)."""
    return InvalidRequest(f"The frame is {problem}.")


@error(SOCKET)
def frame_not_json() -> InvalidRequest:
    """A frame that is not JSON."""
    return InvalidRequest("The frame is not valid JSON.")


@error(SOCKET, problem="<lone_surrogate or number_not_finite>")
def frame_invalid(problem: str) -> InvalidValue:
    """A frame holding what a reply cannot carry (a lone surrogate, NaN)."""
    return InvalidValue(f"Invalid frame: {problem}.")


@error(SOCKET)
def frame_type_invalid(kind: object) -> InvalidValue:
    """A frame whose `type` is neither `response.create` nor `response.steer`."""
    return invalid_value(kind, "'response.create' and 'response.steer'", "type")


@error(SOCKET, got="an array")
def frame_not_an_object(got: str) -> InvalidType:
    """A frame that is JSON but not an object (`got`: its kind, `an array`): worded as an HTTP body
    that is not an object is (before, `Missing required parameter: 'type'`)."""
    return wrong_type("body", ["an object"], got, None)


@error(SOCKET)
def stream_id_invalid() -> InvalidRequest:
    """A `response.create` whose `stream_id` is not 1 to 256 of the allowed characters."""
    return InvalidRequest(
        "Invalid 'stream_id': a named stream ID holds 1 to 256 ASCII letters, digits, underscores, hyphens "
        "or periods (omit it for the default lane).",
        param="stream_id",
        code="invalid_stream_id",
    )


@error(SOCKET, limit=32)
def stream_limit_reached(limit: int) -> InvalidRequest:
    """A new named stream past the bound of one connection."""
    return InvalidRequest(
        f"This connection has used {limit} named streams, the most one connection may: reuse "
        "one of them, use the default stream, or open a new connection.",
        param="stream_id",
        code="websocket_stream_limit_reached",
    )


@error(SOCKET, limit=64)
def too_many_queued(limit: int) -> StatusError:
    """More `response.create` frames waiting on one socket than it queues."""
    return StatusError(
        429,
        f"Too many response.create frames are waiting on this socket (at most {limit}): "
        "wait for a response before sending more.",
        type="invalid_request_error",
        code="too_many_queued_requests",
    )


@error(SOCKET)
def too_many_queued_chars(limit: int) -> StatusError:
    """More text of `response.create` frames waiting on one socket than it queues."""
    return StatusError(
        429,
        f"Too many characters of response.create frames are waiting on this socket (at most {limit} in all): "
        "wait for a response before sending more.",
        type="invalid_request_error",
        code="too_many_queued_requests",
    )


@error(SOCKET)
def background_over_socket() -> UnsupportedParameter:
    """A `response.create` frame with `background: true`."""
    return UnsupportedParameter(
        "Background mode is not supported over WebSocket: use POST /v1/responses.", param="background"
    )


# ---- the admin API, journal and inspector ------------------------------------------------------------


@error(ADMIN)
def scenario_body_not_json() -> InvalidRequest:
    """`POST /_emulator/scenarios` with a body that is not JSON."""
    return InvalidRequest('The body must be a scenario as JSON, or {"yaml": "..."}.')


@text(SCENARIOS, "scenario_body_refused's problem, and a `.json` scenario file's", most=250_000)
def scenario_json_too_many_values(most: int) -> str:
    """A scenario's JSON (a body, a `.json` file) of more values and keys than `most`
    (`MAX_SCENARIO_JSON_VALUES`), counted in its text before any is parsed."""
    return f"JSON of more than {most:,} values and keys (a scenario holds at most that many; refused unparsed)"


@error(ADMIN, problem="<the JSON problem>")
def scenario_body_refused(problem: str) -> InvalidScenario:
    """A scenario's JSON nested too deep, or holding what a response cannot carry (a lone
    surrogate, NaN): `problem` as `json_too_deep`, `lone_surrogate` or `number_not_finite` word it."""
    return InvalidScenario(f"Invalid scenario: {problem}.")


@error(ADMIN, problem="<the loader's reason>")
def invalid_scenario(problem: str) -> InvalidScenario:
    """A scenario the loader refuses (its YAML, its fields, its templates), with the loader's reason."""
    return InvalidScenario(f"Invalid scenario: {problem}")


@error(ADMIN)
def scenario_yaml_not_text() -> InvalidRequest:
    """`{"yaml": ...}` whose value is not a string."""
    return InvalidRequest("'yaml' must be the text of a scenario file.", param="yaml")


@error(ADMIN, problem="<the validation error>")
def invalid_hosted_script(problem: str) -> InvalidScenario:
    """`PUT /_emulator/hosted` with a body that is not a hosted script."""
    return InvalidScenario(f"Invalid hosted script: {problem}")


@error(ADMIN, field="mcp_servers.docs.tools.0.results.0.output", problem="Input should be a valid string")
def invalid_hosted_field(field: str, problem: str) -> InvalidScenario:
    """`PUT /_emulator/hosted` whose script has a field of the wrong kind: its first error, by field."""
    return InvalidScenario(f"Invalid hosted script: {field}: {problem}")


@error(ADMIN, most=67_108_864)
def scenarios_too_large(most: int) -> InvalidRequest:
    """`POST /_emulator/scenarios` whose body would take the scenarios added at run time past
    `most` bytes of bodies together, every scope together (`MAX_ADDED_SCENARIO_BYTES`; the one it
    replaces no longer counted)."""
    return InvalidRequest(
        f"The scenarios added at run time on this server would pass {most:,} bytes together (every scope "
        "together): remove some (DELETE /_emulator/scenarios/{name}, POST /_emulator/end or /_emulator/reset) first.",
        code="too_many_scenarios",
    )


@error(ADMIN, most=10_000)
def too_many_scenarios(most: int) -> InvalidRequest:
    """`POST /_emulator/scenarios` adding one more scenario when the server keeps `most` added at
    run time already, every scope together (`MAX_ADDED_SCENARIOS`; replacing one is not one more)."""
    return InvalidRequest(
        f"This server already keeps {most:,} scenarios added at run time (every scope together): "
        "remove some (DELETE /_emulator/scenarios/{name}, POST /_emulator/end or /_emulator/reset) first.",
        code="too_many_scenarios",
    )


@error(ADMIN)
def scenario_not_found(name: str) -> NotFound:
    """`DELETE /_emulator/scenarios/{name}` naming no scenario of the caller's scope."""
    return NotFound(f"No scenario named '{name}' in this scope.")


@error(ADMIN)
def journal_names_nothing(name: str, param: str) -> InvalidRequest:
    """`/_emulator/journal/compare`'s `direct` or `ptc` naming no conversation or response of the journal."""
    return InvalidRequest(f"No conversation or response '{name}' in this scope's journal.", param=param)


@error(ADMIN, route="direct", param="direct")
def journal_has_no_route(route: str, param: str) -> InvalidRequest:
    """`/_emulator/journal/compare` without `direct` (or `ptc`) when the journal holds no conversation
    of that kind (`route`: `direct` or `programmatic`)."""
    return InvalidRequest(
        f"This scope's journal has no {route} conversation to compare; name one with '{param}'.", param=param
    )


@error(ADMIN)
def compare_same_conversation() -> InvalidRequest:
    """`/_emulator/journal/compare` whose `direct` and `ptc` name one conversation."""
    return InvalidRequest("'direct' and 'ptc' name the same conversation.", param="ptc")


@error(ADMIN)
def inspector_conversation_id_invalid(conversation_id: str) -> InvalidRequest:
    """The inspector asked for a conversation by an id that is neither `c<seq>` nor a seq."""
    return InvalidRequest(f"'{conversation_id}' is not a conversation id.", param="conversation_id")


@error(ADMIN)
def inspector_conversation_not_found(conversation_id: str) -> NotFound:
    """The inspector asked for a conversation the journal does not hold (any more)."""
    return NotFound(f"No conversation '{conversation_id}' in the journal (it may have been cleared).")


@error(ADMIN)
def inspector_file_not_found(name: str) -> NotFound:
    """`/_emulator/ui/{name}` naming no file of the inspector's page."""
    return NotFound(f"The inspector has no file '{name}'.")


@error(HISTORY)
def ambiguous_page_cursor(after: str, count: int) -> InvalidRequest:
    """A page `after` an id that more than one row of the list holds (items stored before ids were
    held unique): the id marks no one place, and a client paging on it would get the same page back
    forever."""
    return InvalidRequest(
        f"Invalid 'after': {count} items in this list have the id '{after}', so it does not mark one place "
        "to continue from; page without 'after' or with another item's id.",
        param="after",
    )


# ---- agents ----------------------------------------------------------------------------------------


@error(AGENTS)
def no_listed_after(what: str, after: str) -> InvalidRequest:
    """A page of agents, sessions, turns or items `after` an id the list does not hold."""
    return InvalidRequest(f"No {what} with id '{after}' in this list.", param="after")


@error(AGENTS)
def agents_beta_missing() -> InvalidRequest:
    """A request to the Agents API without the `OpenAI-Beta: agents=v1` header."""
    return InvalidRequest(
        "You must provide the 'OpenAI-Beta' header to access the Agents API. Please try again by setting the "
        "header 'OpenAI-Beta: agents=v1'.",
        code="invalid_beta",
    )


@error(AGENTS)
def agent_not_found(agent_id: str) -> NotFound:
    """An agent id that names no agent (read, update, delete, or a session's `agent_id`)."""
    return NotFound(f"No agent found with id '{agent_id}'.", param="agent_id")


@error(AGENTS)
def session_not_found(session_id: str) -> NotFound:
    """A session id that names no session this key may see."""
    return NotFound(f"No session found with id '{session_id}'.", param="session_id")


@error(AGENTS)
def turn_not_found(turn_id: str, session_id: str) -> NotFound:
    """A turn id the session does not hold."""
    return NotFound(f"No turn found with id '{turn_id}' in session '{session_id}'.", param="turn_id")


@error(AGENTS)
def duplicate_mcp_label(label: str, param: str) -> InvalidRequest:
    """Two MCP servers of one tool list with the same `server_label`."""
    return InvalidRequest(f"Duplicate MCP server label: '{label}'.", param=param)


@error(AGENTS)
def mcp_without_transport(param: str) -> UnsupportedParameter:
    """An agent's MCP tool without a `transport` (the Responses API's shape)."""
    return UnsupportedParameter(
        'An MCP tool names its server by its transport: add transport {"type": "http", "server_url": '
        "...} (MCP tools without one are not supported).",
        param=param,
    )


@error(AGENTS, kind="code_interpreter")
def agent_tool_unsupported(kind: str, param: str) -> UnsupportedParameter:
    """An agent tool of a type the emulator does not run (hosted tools that need an environment)."""
    return UnsupportedParameter(
        f"Agent tools of type '{kind}' are not supported by the emulator: it runs function tools, "
        "MCP servers over HTTP and programmatic tool calling.",
        param=param,
    )


@error(AGENTS)
def agent_deferred_needs_search(param: str) -> InvalidRequest:
    """A function tool with `defer_loading: true` in a tool list without a `tool_search`."""
    return InvalidRequest(
        'Deferred tools require a tool search: add {"type": "tool_search"} to the agent\'s tools to load '
        "functions declared with defer_loading: true.",
        param=param,
    )


@error(AGENTS)
def async_function_tool(param: str) -> UnsupportedParameter:
    """A function tool with `async: true` (a session waits for every function result)."""
    return UnsupportedParameter(
        'Asynchronous function tools (async: true, "the agent continues without waiting for the '
        'function result") are not emulated: a session waits for every function result. Omit async '
        "or set it to false.",
        param=param,
    )


@error(AGENTS, kind="tool_search")
def at_most_one(kind: str, param: str) -> InvalidRequest:
    """Two `tool_search` (or two `programmatic_tool_calling`) entries in one tool list."""
    return InvalidRequest(f"At most one {kind} entry is allowed.", param=param)


@error(AGENTS, mebibytes=3)
def agent_tools_too_large(mebibytes: int, param: str) -> InvalidRequest:
    """A tool list past its bound in compact UTF-8 JSON (an agent's 3 MiB, a session's 8 MiB)."""
    return InvalidRequest(f"The tool list must fit within {mebibytes} MiB of compact UTF-8 JSON.", param=param)


@error(AGENTS)
def subagents_unsupported(param: str) -> UnsupportedParameter:
    """`multi_agent.enabled: true` (subagents)."""
    return UnsupportedParameter("Subagents (multi_agent.enabled) are not supported by the emulator.", param=param)


@error(AGENTS)
def vaults_unsupported() -> UnsupportedParameter:
    """A session given `vault_ids`."""
    return UnsupportedParameter("Vaults are not supported by the emulator.", param="vault_ids")


@error(AGENTS)
def stdio_mcp_unsupported(param: str) -> UnsupportedParameter:
    """An MCP server over the stdio transport (it would run in the session's environment)."""
    return UnsupportedParameter(
        "MCP servers over the stdio transport are not emulated: they run in the session's environment. "
        "Serve the MCP server over HTTP (transport type 'http').",
        param=param,
    )


@error(AGENTS)
def mcp_authorization_unsupported(param: str) -> UnsupportedParameter:
    """An MCP server's `transport.authorization` (the agent would show it back)."""
    return UnsupportedParameter(
        "transport.authorization is not emulated (the agent would show it back): send the credential as a "
        "header in transport.headers.",
        param=param,
    )


@error(AGENTS)
def mcp_environment_origin_unsupported(param: str) -> UnsupportedParameter:
    """An MCP server's `connection_origin: environment`."""
    return UnsupportedParameter(
        "connection_origin 'environment' is not emulated: the emulator connects to MCP servers itself ('service').",
        param=param,
    )


@error(AGENTS)
def mcp_credential_unsupported(param: str) -> UnsupportedParameter:
    """An MCP server's `credential_id` (stored credentials)."""
    return UnsupportedParameter(
        "Stored credentials (credential_id) are not emulated: give the server's authorization in "
        "transport.authorization.",
        param=param,
    )


@text(AGENTS, "an mcp_approval_request event's request.message")
def mcp_approval_question(name: str, label: str) -> str:
    """An MCP call that waits for the client's approval."""
    return f"Allow the agent to call the tool '{name}' of the MCP server '{label}'?"


@error(AGENTS, kind="cloud")
def environment_type_invalid(kind: object) -> InvalidValue:
    """A session's `environment.type` that is none of the three."""
    return invalid_value(kind, "'none', 'openai_hosted' and 'self_hosted'", "environment.type")


@error(AGENTS)
def agent_model_missing() -> MissingParameter:
    """A session with neither an `agent_id` nor an inline agent's `model`."""
    return missing_parameter("agent.model", "or give an 'agent_id'")


@error(AGENTS)
def session_input_missing() -> MissingParameter:
    """A session created without `input` (a session without an environment starts with a turn)."""
    return missing_parameter("input", "required when environment.type is 'none'")


@error(AGENTS)
def failed_result_without_error(param: str) -> MissingParameter:
    """A tool result with `success: false` and no `error`."""
    return missing_parameter(param, "required when success is false")


@error(AGENTS, kind="openai_hosted")
def environment_unsupported(kind: str) -> UnsupportedParameter:
    """A session's `environment.type` of `openai_hosted` or `self_hosted`."""
    return UnsupportedParameter(
        f"Execution environments of type '{kind}' are not supported by the emulator: create the session "
        'with environment {"type": "none"} (programs and function tools need no environment).',
        param="environment.type",
    )


@error(AGENTS)
def idempotency_key_reused(key: str) -> InvalidRequest:
    """An `Idempotency-Key` sent again with other events for the same session."""
    return InvalidRequest(
        f"Idempotency-Key '{key}' was already used with other events for this session.",
        param="Idempotency-Key",
        code="idempotency_key_reused",
    )


@error(AGENTS)
def unknown_pending_call(call_id: str) -> InvalidRequest:
    """A tool result for a call the session is not waiting on (the SDK's tool dispatcher matches it)."""
    return InvalidRequest(f"Unknown pending tool call: {call_id}", code="invalid_request_error")


@error(AGENTS)
def unknown_pending_approval(request_id: str, param: str) -> InvalidRequest:
    """An approval result for a request the current turn is not waiting on."""
    return InvalidRequest(f"Unknown pending approval request: {request_id}", param=param)


@error(AGENTS, status="running")
def turn_in_progress(session_id: str, status: str, param: str) -> InvalidRequest:
    """New input while a turn runs (steering is not emulated)."""
    return InvalidRequest(
        f"Session '{session_id}' has a turn in progress ({status}): send new input "
        "once it is idle, or cancel the turn with agent.session.input.cancel.",
        param=param,
        code="active_turn_not_steerable",
    )


@error(AGENTS)
def successful_result_with_error(param: str) -> InvalidRequest:
    """A tool result with `success: true` that carries an `error`."""
    return InvalidRequest("A successful tool result carries 'output', not 'error'.", param=param)


@error(AGENTS)
def result_already_submitted(call_id: str, turn_id: str, param: str) -> InvalidRequest:
    """A second, different result for a tool call already answered."""
    return InvalidRequest(
        f"Tool call {call_id} of turn {turn_id} already has a different result; a result "
        "is applied once and cannot be replaced.",
        param=param,
        code="tool_result_already_submitted",
    )


@error(AGENTS)
def turn_failed() -> EmulatorError:
    """A turn that failed on a bug (the session's error; the session stays usable)."""
    return EmulatorError("The server had an error while processing the turn.")


@error(AGENTS, limit=64)
def too_many_steps(limit: int) -> EmulatorError:
    """A turn that takes more model steps than the loop guard allows without waiting for input."""
    return EmulatorError(f"The turn took more than {limit} model steps without waiting for input.")


# ---- the docs ------------------------------------------------------------------------------------

BEGIN = "<!-- catalogue: written by `python -m ptc_emulator.emulator.messages docs/errors.md`; do not edit -->"
END = "<!-- end of catalogue -->"


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def _code(value: str) -> str:
    """`value` as inline code, fenced with enough backticks for the ones it holds."""
    longest = 0
    run = 0
    for char in value:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    ticks = "`" * (longest + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


def markdown() -> str:
    """The catalogue as docs/errors.md shows it: a table per surface."""
    out = [BEGIN, ""]
    for surface in SURFACES:
        out += [f"### {surface}", "", "| entry | status | code | when | message |", "|---|---|---|---|---|"]
        for entry in (e for e in CATALOGUE.values() if e.surface == surface):
            made = entry.sample()
            if isinstance(made, EmulatorError):
                status = str(made.status)
                code = _code(made.code) if made.code is not None else "`null`"
                if made.type != "invalid_request_error":
                    code += f" (`{made.type}`)"
                message = made.message
                when = entry.when
            else:
                status, code, message = "", "", made
                when = f"{entry.when} (in {entry.where})"
            out.append(f"| `{entry.name}` | {status} | {code} | {_cell(when)} | {_cell(_code(message))} |")
        out.append("")
    out.append(END)
    return "\n".join(out)


def written(document: str) -> str:
    """`document` with its catalogue section replaced by `markdown()`."""
    head, begin, rest = document.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the document has no catalogue section ({BEGIN} ... {END})")
    return head + markdown() + tail


if __name__ == "__main__":  # python -m ptc_emulator.emulator.messages docs/errors.md
    from pathlib import Path

    path = Path(sys.argv[1])
    path.write_text(written(path.read_text(encoding="utf-8")), encoding="utf-8")
