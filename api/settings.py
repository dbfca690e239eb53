"""Server settings: what the CLI's flags set, with the defaults a test server wants."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ptc_emulator.api.bounds import LEASE_SECONDS, MAX_WORKERS, WORKERS
from ptc_emulator.api.httpflow import BODY_TIMEOUT_S, HEAD_TIMEOUT_S, WRITE_PAUSE_S
from ptc_emulator.emulator.model import DEFAULT_UPSTREAM_PROTOCOL, UpstreamConfig, protocol_named
from ptc_emulator.emulator.tools.egress import McpPolicy
from ptc_emulator.names import API_KEY_ENV
from ptc_emulator.sandbox import Limits

__all__ = [
    "API_KEY_ENV",
    "DATA_DIR_ENV",
    "PROJECT_DATA_DIR",
    "Settings",
    "bundled_fixtures",
    "default_data_dir",
    "resend_floor",
    "resend_problem",
]


def bundled_fixtures() -> Path:
    """The scenarios shipped in the package (`ptc_emulator.fixtures`), wherever it is installed."""
    import ptc_emulator.fixtures

    return Path(ptc_emulator.fixtures.__file__).resolve().parent


LIVE_CACHE_ENV = "PTC_EMULATOR_LIVE_CACHE"


def _live_cache_default() -> int:
    value = os.environ.get(LIVE_CACHE_ENV, "")
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 6 else 64


DATA_DIR_ENV = "PTC_EMULATOR_DATA_DIR"
PROJECT_DATA_DIR = ".ptc-emulator/data"
"""Where the sqlite store and the secret go when no directory is named: under the current
directory (the project's), beside the pytest plugin's traces, never in the home directory."""


def default_data_dir() -> Path:
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env) if env else Path(PROJECT_DATA_DIR)


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8000
    fixtures: tuple[Path, ...] = ()
    """Scenario directories (after the bundled demos, when those are asked for)."""
    bundled_fixtures: bool = False
    """Load the bundled demo scenarios (`fixtures/`: `--demo`, `make run`). Off unless asked, and
    never while recording or replaying (`record_dir`): a demo answering a question that nothing
    recorded would be a 200 where the test should fail."""
    store: str = "sqlite"
    """`sqlite`, `memory`, or a `postgresql://` URL: a database several replicas share."""
    lease_s: float = 30.0
    """With a shared store: how long a replica's claim on a running Agents API turn lasts unless
    renewed (every third of it); another replica takes the turn over once it expired."""
    data_dir: Path = field(default_factory=default_data_dir)
    secret: str | None = None
    """HMAC secret for fingerprints; else PTC_EMULATOR_SECRET; else `<data_dir>/secret`."""
    api_key: str | None = None
    """When set, every request must carry `Authorization: Bearer <api_key>`."""
    pool_size: int = max(1, min(MAX_WORKERS, os.cpu_count() or 1))
    spare_contexts: int = 2
    live_cache: int = field(default_factory=lambda: _live_cache_default())
    """Suspended programs each worker keeps live, so a resume skips replay (0: always replay); the
    default is 64, or PTC_EMULATOR_LIVE_CACHE (the test suite runs with it at 0 too)."""
    max_jobs_per_worker: int = 1000
    limits: Limits = field(default_factory=Limits)
    max_body_bytes: int = 16 * 2**20
    allowed_hosts: tuple[str, ...] = ()
    """Host names the server answers to besides the bound address and loopback (`*`: any)."""
    allowed_origins: tuple[str, ...] = ()
    """Web origins (`http://localhost:5173`) whose pages may call the server, besides its own
    (`*`: any); a request with no `Origin` (every SDK) is not concerned."""
    strict_contract: bool = False
    """Reject tool outputs and program arguments that violate the tools' schemas (else: warn)."""
    upstream: str | None = None
    """Record mode: proxy `/v1/responses` to this base URL (say https://api.openai.com/v1)."""
    upstream_api_key_env: str | None = None
    """The environment variable whose value replaces the client's key towards the upstream."""
    allow_unguarded_upstream_key: bool = False
    """Record with an upstream key although the server requires no key of its own (`api_key`)."""
    record_dir: Path | None = None
    """Where recorded conversations are written as scenario files (and read back from)."""
    record_mode: Literal["new", "all", "none"] = "new"
    """new: record what no recording matches; all: re-record everything; none: never record."""
    upstream_timeout_s: float = 600.0
    """Record mode: one exchange with the upstream, whole (its answer streamed to the end)."""
    model_upstream: str | None = None
    """A model upstream (docs/any-model.md): an OpenAI-compatible base URL whose model writes the
    programs and messages of the requests no scenario matches."""
    model_upstream_api_key_env: str | None = None
    """The environment variable holding the model upstream's key (sent as a bearer token)."""
    model_upstream_model: str | None = None
    """The model id sent to the model upstream; None: each request's `model`."""
    model_upstream_api: str = DEFAULT_UPSTREAM_PROTOCOL
    """The model upstream's protocol: a name in the registry of protocols (`chat`, `responses`)."""
    model_upstream_timeout_s: float = 120.0
    """One request to the model upstream, whole."""
    model_upstream_retries: int = 2
    """Further attempts after a connection failure, a timeout, a 429 or a 5xx of the model upstream."""
    model_upstream_max_answer_bytes: int = 8 * 2**20
    """Bytes one answer of the model upstream may take, whole or streamed (docs/limits.md)."""
    keepalive_s: float = 10.0
    """Seconds between SSE keep-alive comments while a streamed response waits on a program."""
    head_timeout_s: float = HEAD_TIMEOUT_S
    """A request's line and headers must have arrived this long after the connection opened (its first
    request) or after the request's first byte (the next ones); past it the 408 `request_timeout`, or
    the connection closed if it sent nothing (`api/httpflow.py`)."""
    body_timeout_s: float = BODY_TIMEOUT_S
    """A request's body must have arrived whole this long after its headers ended (time the server
    held it back not counted); past it the 408 `request_timeout`, or the connection closed if its
    response had begun (`api/httpflow.py`)."""
    write_pause_s: float = WRITE_PAUSE_S
    """A connection (HTTP or WebSocket) paused for writing whose client reads nothing of the waiting
    reply this long is closed and its request's work released (a slow reader restarts the count)."""
    websocket_lifetime_s: float = 3600.0
    """How long a WebSocket-mode connection lasts (the hosted mode's 60 minutes); then it gets a
    `websocket_connection_limit_reached` error event and is closed."""
    mcp_allow_hosts: tuple[str, ...] = ()
    """`HOST` or `HOST:PORT` the MCP client may reach although not public (loopback, link-local,
    private); the emulator's own port never."""
    mcp_allow_private: bool = False
    """The MCP client may reach loopback and private addresses (not link-local)."""
    mcp_connect_timeout_s: float = 10.0
    mcp_timeout_s: float = 30.0
    """One MCP listing or call, whole (a program's call: within the program's timeout too)."""
    mcp_max_answer_bytes: int = 8 * 2**20
    mcp_memo_entries: int = 10_000
    mcp_memo_bytes: int = 64 * 2**20
    """The hidden call results kept for retries (a retried request calls nothing twice), by entries and bytes."""
    watch: bool = False
    """Reload the scenario directories when a file in them is added, edited or removed (`--watch`)."""

    def __post_init__(self) -> None:
        for name, flag, bound in (("lease_s", "--lease-seconds", LEASE_SECONDS), ("pool_size", "--workers", WORKERS)):
            if (
                problem := bound.problem(getattr(self, name))
            ) is not None:  # the CLI's check, for settings built in code
                raise ValueError(f"{name} ({flag}) {getattr(self, name)!r}: {problem}")
        try:
            protocol_named(self.model_upstream_api)
        except ValueError as e:
            raise ValueError(f"model_upstream_api: {e}") from None

    @property
    def mcp_policy(self) -> McpPolicy:
        return McpPolicy(
            allow_hosts=self.mcp_allow_hosts,
            allow_private=self.mcp_allow_private,
            connect_timeout_s=self.mcp_connect_timeout_s,
            timeout_s=self.mcp_timeout_s,
            max_answer_bytes=self.mcp_max_answer_bytes,
        )

    def model_upstream_config(self) -> UpstreamConfig | None:
        """The model upstream's settings (its key read from its variable now), or None."""
        if self.model_upstream is None:
            return None
        key_env = self.model_upstream_api_key_env
        return UpstreamConfig(
            url=self.model_upstream,
            model=self.model_upstream_model,
            api=self.model_upstream_api,
            api_key=os.environ.get(key_env) if key_env else None,
            timeout_s=self.model_upstream_timeout_s,
            retries=self.model_upstream_retries,
            max_answer_bytes=self.model_upstream_max_answer_bytes,
        )

    @property
    def recording(self) -> bool:
        """Proxying to an upstream and recording (not `--record-mode none`)."""
        return self.upstream is not None and self.record_dir is not None and self.record_mode != "none"


def resend_floor(limits: Limits) -> int:
    """The smallest request body that can send back a `store: false` conversation holding one
    program at its full output limit (docs/limits.md). The limit counts the output as the runtime
    records it: JSON text in UTF-8, control characters already escaped. A client may escape every
    non-ASCII character too (`\\u00e9`: six bytes for two counted), so at worst three times that,
    twice over (the `program_output`, and the closing message that quotes it); the code twice
    (the user message and the `program` item), at worst six bytes a character; and the program's
    tool calls, counted as they travel back (`Limits.max_argument_bytes`)."""
    return 6 * limits.max_output_bytes + 12 * limits.max_code_bytes + limits.max_argument_bytes


def sealed_budget(settings: Settings) -> int:
    """The bytes of server-run call results one conversation may carry: sealed hidden results (a
    program's MCP, hosted code interpreter and shell calls, carried so a resumed program does not
    call again) and visible server-run items (`mcp_list_tools`, `mcp_call`, `code_interpreter_call`,
    hosted `shell_call_output`) together; what `--max-body-bytes` leaves beside `resend_floor`, the
    rest of a conversation with one program at its full output and call limits. A `store: false`
    client sends them back on every request; a pause that would carry more ends its program
    `incomplete`, a direct MCP call that would is a failed `mcp_call` (docs/limits.md, "MCP")."""
    return max(0, settings.max_body_bytes - resend_floor(settings.limits))


def resend_problem(settings: Settings) -> str | None:
    """Why `--max-body-bytes` is too small for `--max-output-bytes`, or None when the pair fits."""
    floor = resend_floor(settings.limits)
    if settings.max_body_bytes >= floor:
        return None
    return (
        f"--max-body-bytes {settings.max_body_bytes} is too small for --max-output-bytes "
        f"{settings.limits.max_output_bytes}, --max-code-bytes {settings.limits.max_code_bytes} and "
        f"--max-argument-bytes {settings.limits.max_argument_bytes}: a store:false conversation could not send "
        f"a program's output and calls back; use --max-body-bytes {floor} or more, or lower the others "
        "(docs/limits.md)"
    )
