"""`ptc-emulator serve [...]` (also `python -m ptc_emulator serve`).

What `serve` needs (the settings, the store and model registries, the sandbox's limits, the app)
is imported when a command line names `serve`: `ptc-emulator --help`, `--version`, `validate`
and `inspect` (and their `--help`) load none of it, about a second's worth of imports.
"""

from __future__ import annotations

import argparse
import gc
import ipaddress
import logging
import os
import re
import socket
import sys
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import ptc_emulator
from ptc_emulator.api.bounds import (
    BYTES,
    COUNT,
    LEASE_SECONDS,
    MAX_WORKERS,
    MIN_LEASE_SECONDS,
    PORT,
    SECONDS,
    WORKERS,
    Bound,
)
from ptc_emulator.names import API_KEY_ENV

if TYPE_CHECKING:
    from ptc_emulator.api.settings import Settings

__all__ = ["bind", "main", "parse"]


class _OneDefault(argparse.ArgumentDefaultsHelpFormatter):
    """Each flag's default said once: argparse's "(default: X)" only where the help names none of
    its own, and never for a flag whose default is nothing (None, off, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        return super()._get_help_string(action)


class _OneLine(argparse.ArgumentParser):
    """A subcommand's parser whose error is one line, as the CLI's other errors are: argparse's own
    printed the whole usage first (some forty lines for `serve`), the error itself last."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


def _parser(serve_options: bool = True) -> argparse.ArgumentParser:
    """The command line. Without `serve_options`, `serve` is listed with its help line but given
    none of its options: enough for a command line that does not run `serve`."""
    parser = argparse.ArgumentParser(
        prog="ptc-emulator", description="A local stand-in for OpenAI's Responses API with Programmatic Tool Calling."
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {ptc_emulator.__version__}", help="show the version and exit"
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_OneLine)
    serve = commands.add_parser("serve", help="serve the Responses API on a local port", formatter_class=_OneDefault)
    if serve_options:
        _serve_arguments(serve)
    _tool_commands(commands)
    return parser


def _serve_arguments(serve: argparse.ArgumentParser) -> None:
    from ptc_emulator.api.settings import DATA_DIR_ENV, PROJECT_DATA_DIR, Settings
    from ptc_emulator.emulator.storage import STORES
    from ptc_emulator.sandbox import Limits

    limits = Limits()
    defaults = Settings()
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=PORT, default=8000, help="port to bind (0: any free one)")
    serve.add_argument(
        "--fixtures", type=Path, action="append", default=[], metavar="DIR", help="more scenario files (repeatable)"
    )
    serve.add_argument(
        "--demo",
        action="store_true",
        help="also serve the bundled demo scenarios (the guide's examples; `make run` does); never with --record",
    )
    serve.add_argument(
        "--no-bundled-fixtures",
        action="store_true",
        help="do not load the demos (without --demo they are not loaded either)",
    )
    serve.add_argument(
        "--store",
        type=_store_kind,
        default=os.environ.get(STORE_ENV) or None,
        metavar="{" + ",".join(f"{k.schemes[0]}://..." if k.schemes else k.name for k in STORES.values()) + "}",
        help=f"memory: nothing is written to disk; sqlite: a file in --data-dir; a postgresql:// URL: shared by "
        f"replicas (or {STORE_ENV}; default: sqlite with --data-dir, else memory)",
    )
    serve.add_argument(
        "--lease-seconds",
        type=LEASE_SECONDS,
        default=defaults.lease_s,
        help="with a postgresql store: a dead replica's running turns are taken over after this long (at least "
        f"{MIN_LEASE_SECONDS:g}: a replica renews its leases every third of it)",
    )
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=os.environ.get(DATA_DIR_ENV) or None,
        metavar="DIR",
        help=f"where the sqlite store and the secret live (or {DATA_DIR_ENV}; default: nowhere, with --store "
        f"sqlite {PROJECT_DATA_DIR} under the current directory)",
    )
    serve.add_argument(
        "--secret",
        default=None,
        help="fingerprint secret (visible in ps: prefer PTC_EMULATOR_SECRET or --secret-file)",
    )
    serve.add_argument("--secret-file", type=Path, default=None, metavar="PATH", help="read the secret from PATH")
    serve.add_argument(
        "--api-key",
        default=None,
        help=f"require this Bearer key (visible in ps: prefer {API_KEY_ENV} or --api-key-file)",
    )
    serve.add_argument("--api-key-file", type=Path, default=None, metavar="PATH", help="read the key from PATH")
    serve.add_argument(
        "--workers",
        type=WORKERS,
        default=defaults.pool_size,
        help=f"V8 worker processes (default: the CPU count; at most {MAX_WORKERS}: each is some 75 MB resident, "
        "and the pool may start as many again for fairness)",
    )
    serve.add_argument(
        "--live-cache",
        type=Bound(minimum=0),
        default=defaults.live_cache,
        metavar="N",
        help="suspended programs each worker keeps live to skip replay (0: always replay)",
    )
    serve.add_argument(
        "--timeout",
        type=SECONDS,
        default=limits.timeout_s,
        help="seconds per program run (and for its calls to MCP servers in one response, together)",
    )
    serve.add_argument("--heap-mb", type=COUNT, default=limits.heap_bytes // 2**20, help="V8 heap per program")
    serve.add_argument("--max-tool-calls", type=COUNT, default=limits.max_tool_calls, help="per program")
    serve.add_argument("--max-output-bytes", type=BYTES, default=limits.max_output_bytes, help="a program's output")
    serve.add_argument("--max-code-bytes", type=BYTES, default=limits.max_code_bytes, help="a program's source")
    serve.add_argument(
        "--max-argument-bytes", type=BYTES, default=limits.max_argument_bytes, help="a program's tool calls, in all"
    )
    serve.add_argument("--max-body-bytes", type=BYTES, default=defaults.max_body_bytes, help="a request body")
    serve.add_argument(
        "--head-timeout",
        type=SECONDS,
        default=defaults.head_timeout_s,
        metavar="SECONDS",
        help="a request's line and headers must arrive within it (then the 408, or the connection closed)",
    )
    serve.add_argument(
        "--body-timeout",
        type=SECONDS,
        default=defaults.body_timeout_s,
        metavar="SECONDS",
        help="a request's body must arrive within it of its headers (then the 408, or the connection closed)",
    )
    serve.add_argument(
        "--write-pause-timeout",
        type=SECONDS,
        default=defaults.write_pause_s,
        metavar="SECONDS",
        help="a connection whose client reads nothing of a waiting reply this long is closed (reading restarts it)",
    )
    serve.add_argument(
        "--strict-contract", action="store_true", help="reject tool I/O that violates the tools' schemas"
    )
    serve.add_argument(
        "--allowed-host", action="append", default=[], metavar="NAME", help="a Host the server answers to (repeatable)"
    )
    serve.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web origin whose pages may call the server, such as http://localhost:5173 (repeatable)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        type=_log_level,
        help="uvicorn's and the emulator's log level: critical, error, warning, info or debug",
    )
    serve.add_argument(
        "--watch", action="store_true", help="reload the scenario files when one is added, edited or removed"
    )
    serve.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="json: every log line one JSON object (a request's: method, path, scope, scenario, route, status, ...)",
    )
    _record_arguments(serve)
    _mcp_arguments(serve, defaults)
    _model_upstream_arguments(serve, defaults)


def _tool_commands(commands: Any) -> None:
    """The subcommands besides `serve` (each run by `_run_tool`)."""
    inspect = commands.add_parser(
        "inspect", help="serve a saved trace (a failed test's .html or .json) in the inspector"
    )
    inspect.add_argument("file", type=Path, metavar="FILE", help="a trace's .html or .json, or a journal's JSON")
    inspect.add_argument("--port", type=PORT, default=0, help="port on 127.0.0.1 (default: any free one)")
    validate = commands.add_parser(
        "validate", help="check scenario files as the server would load them (exit status 1 on any problem)"
    )
    validate.add_argument("paths", type=Path, nargs="+", metavar="DIR", help="scenario directories (or files)")


def _mcp_arguments(serve: argparse.ArgumentParser, defaults: Settings) -> None:
    """The MCP client's egress and bounds (docs/limits.md, "MCP")."""
    group = serve.add_argument_group("MCP client")
    group.add_argument(
        "--mcp-allow-host",
        action="append",
        default=[],
        type=_allowed_host,
        metavar="HOST[:PORT]",
        help="an MCP server host the emulator may reach although not public (repeatable; never its own port)",
    )
    group.add_argument(
        "--mcp-allow-private", action="store_true", help="MCP servers on loopback and private addresses are allowed"
    )
    group.add_argument(
        "--mcp-connect-timeout", type=SECONDS, default=defaults.mcp_connect_timeout_s, help="seconds to connect"
    )
    group.add_argument(
        "--mcp-timeout", type=SECONDS, default=defaults.mcp_timeout_s, help="seconds for one MCP listing or call"
    )
    group.add_argument(
        "--mcp-max-answer-bytes", type=BYTES, default=defaults.mcp_max_answer_bytes, help="bytes read per MCP call"
    )
    group.add_argument(
        "--mcp-memo-bytes", type=BYTES, default=defaults.mcp_memo_bytes, help="bytes of hidden call results kept"
    )


def _record_arguments(serve: argparse.ArgumentParser) -> None:
    """Record and replay (docs/record-replay.md)."""
    group = serve.add_argument_group("record and replay")
    group.add_argument("--upstream", default=None, metavar="URL", help="proxy /v1/responses to this base URL")
    group.add_argument(
        "--upstream-api-key-env", default=None, metavar="NAME", help="send the upstream the key in this variable"
    )
    group.add_argument(
        "--allow-unguarded-upstream-key",
        action="store_true",
        help="record with --upstream-api-key-env although the server requires no --api-key of its own",
    )
    group.add_argument(
        "--record", type=Path, default=None, metavar="DIR", help="write finished conversations here as scenarios"
    )
    group.add_argument(
        "--record-mode",
        choices=("new", "all", "none"),
        default="new",
        help="new: record what no recording matches; all: re-record everything; none: replay only",
    )
    group.add_argument(
        "--upstream-timeout",
        type=SECONDS,
        default=600.0,
        metavar="SECONDS",
        help="one exchange with the upstream, whole (a streamed answer to its end)",
    )


def _model_upstream_arguments(serve: argparse.ArgumentParser, defaults: Settings) -> None:
    """A model upstream (docs/any-model.md)."""
    from ptc_emulator.emulator.model import DEFAULT_UPSTREAM_PROTOCOL, UPSTREAM_PROTOCOLS

    group = serve.add_argument_group("model upstream")
    group.add_argument(
        "--model-upstream",
        default=None,
        metavar="URL",
        help="an OpenAI-compatible base URL whose model answers what no scenario matches (writes the programs)",
    )
    group.add_argument(
        "--model-upstream-api-key-env", default=None, metavar="NAME", help="send the model upstream the key in NAME"
    )
    group.add_argument("--model-upstream-model", default=None, metavar="NAME", help="the model id sent upstream")
    group.add_argument(
        "--model-upstream-api",
        choices=tuple(UPSTREAM_PROTOCOLS),
        default=DEFAULT_UPSTREAM_PROTOCOL,
        help="the upstream's protocol: "
        + "; ".join(f"{name}: {protocol.title}" for name, protocol in UPSTREAM_PROTOCOLS.items()),
    )
    group.add_argument(
        "--model-upstream-timeout", type=SECONDS, default=120.0, metavar="SECONDS", help="one upstream request"
    )
    group.add_argument(
        "--model-upstream-retries",
        type=Bound(minimum=0),
        default=2,
        help="further attempts after a failure or a 429/5xx (0: none)",
    )
    group.add_argument(
        "--model-upstream-max-answer-bytes",
        type=BYTES,
        default=defaults.model_upstream_max_answer_bytes,
        metavar="BYTES",
        help="bytes one upstream answer may take, whole or streamed",
    )


STORE_ENV = "PTC_EMULATOR_STORE"


_LOG_LEVELS = ("critical", "error", "warning", "info", "debug")

_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)")


def _allowed_host(value: str) -> str:
    """`--mcp-allow-host`: a name, an IPv4 address or an IPv6 one (bracketed to take a port), with
    an optional `:PORT`, as the egress check reads it. Before, anything was taken (`::::`, `a b`)
    and matched no host, silently."""
    port: str | None = None
    if value.startswith("["):
        host, close, rest = value[1:].partition("]")
        good = bool(close) and (not rest or rest.startswith(":")) and _is_ipv6(host)
        port = rest[1:] if rest else None
    elif value.count(":") > 1:
        good = _is_ipv6(value)
    else:
        host, colon, after = value.partition(":")
        port = after if colon else None
        name = host[:-1] if host.endswith(".") else host
        labels = name.split(".")
        good = _is_ipv4(host) or (
            0 < len(name) <= 253
            and all(_LABEL.fullmatch(label) for label in labels)
            and not labels[-1].isdigit()  # 1.2.3.4.5 is no address and no name
        )
    if port is not None and not (port.isascii() and port.isdigit() and 0 < int(port) <= 65535):
        good = False
    if not good:
        raise argparse.ArgumentTypeError(
            f"not a host (a name, an IPv4 address, or an IPv6 one, [bracketed] to take a :PORT): {value!r}"
        )
    return value


def _is_ipv4(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv4Address)
    except ValueError:
        return False


def _is_ipv6(text: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv6Address)
    except ValueError:
        return False


def _log_level(value: str) -> str:
    if value.lower() not in _LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"not a log level: {value!r} ({', '.join(_LOG_LEVELS)})")
    return value.lower()


def _store_kind(value: str) -> str:
    """A store `open_store` can open: a registered kind's name, or a URL of a registered scheme."""
    from ptc_emulator.emulator.storage import store_kind

    try:
        store_kind(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return value


def _shown_store(store: str) -> str:
    """The store as the startup line shows it: a URL without its password."""
    if "://" not in store:
        return store
    scheme, rest = store.split("://", 1)
    where = rest.rsplit("@", 1)
    if len(where) == 2 and ":" in where[0]:
        rest = f"{where[0].split(':', 1)[0]}:***@{where[1]}"
    return f"{scheme}://{rest}"


def parse(argv: list[str] | None = None) -> tuple[Settings, str]:
    from ptc_emulator.api.settings import PROJECT_DATA_DIR, Settings
    from ptc_emulator.sandbox import Limits

    args = _parser().parse_args(argv)
    settings = Settings(
        host=args.host,
        port=args.port,
        fixtures=tuple(args.fixtures),
        bundled_fixtures=args.demo and not args.no_bundled_fixtures,
        store=args.store or ("sqlite" if args.data_dir is not None else "memory"),
        lease_s=args.lease_seconds,
        data_dir=Path(args.data_dir) if args.data_dir is not None else Path(PROJECT_DATA_DIR),
        secret=args.secret or _read(args.secret_file, "--secret-file"),
        api_key=args.api_key or _read(args.api_key_file, "--api-key-file") or os.environ.get(API_KEY_ENV) or None,
        pool_size=args.workers,
        live_cache=args.live_cache,
        limits=Limits(
            timeout_s=args.timeout,
            heap_bytes=args.heap_mb * 2**20,
            max_tool_calls=args.max_tool_calls,
            max_output_bytes=args.max_output_bytes,
            max_code_bytes=args.max_code_bytes,
            max_argument_bytes=args.max_argument_bytes,
        ),
        max_body_bytes=args.max_body_bytes,
        head_timeout_s=args.head_timeout,
        body_timeout_s=args.body_timeout,
        write_pause_s=args.write_pause_timeout,
        allowed_hosts=tuple(args.allowed_host),
        allowed_origins=tuple(args.allowed_origin),
        strict_contract=args.strict_contract,
        upstream=args.upstream,
        upstream_api_key_env=args.upstream_api_key_env,
        allow_unguarded_upstream_key=args.allow_unguarded_upstream_key,
        record_dir=args.record,
        mcp_allow_hosts=tuple(args.mcp_allow_host),
        mcp_allow_private=args.mcp_allow_private,
        mcp_connect_timeout_s=args.mcp_connect_timeout,
        mcp_timeout_s=args.mcp_timeout,
        mcp_max_answer_bytes=args.mcp_max_answer_bytes,
        mcp_memo_bytes=args.mcp_memo_bytes,
        record_mode=args.record_mode,
        upstream_timeout_s=args.upstream_timeout,
        model_upstream=args.model_upstream,
        model_upstream_api_key_env=args.model_upstream_api_key_env,
        model_upstream_model=args.model_upstream_model,
        model_upstream_api=args.model_upstream_api,
        model_upstream_timeout_s=args.model_upstream_timeout,
        model_upstream_retries=args.model_upstream_retries,
        model_upstream_max_answer_bytes=args.model_upstream_max_answer_bytes,
        watch=args.watch,
    )
    return settings, args.log_level


_SECRET_FILE_MAX = 64 * 1024
"""The most a --secret-file or --api-key-file is read of: a secret is a line, not a file's worth."""


def _read(path: Path | None, option: str) -> str | None:
    """A secret from a file (its first line, stripped): kept out of the command line, which every
    local user can read with ps."""
    if path is None:
        return None
    try:
        if not path.is_file():  # /dev/zero, a FIFO, a directory: never read without end
            _fail(f"{option} {path}: not a regular file", 2)
        with path.open("rb") as f:
            raw = f.read(_SECRET_FILE_MAX + 1)
    except OSError as e:
        _fail(f"{option} {path}: {e.strerror or e}", 2)
    if len(raw) > _SECRET_FILE_MAX:
        _fail(f"{option} {path}: larger than {_SECRET_FILE_MAX} bytes: not a key or a secret", 2)
    try:
        value = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        _fail(f"{option} {path}: not UTF-8 text", 2)
    if not value:
        _fail(f"{option} {path}: the file is empty", 2)
    return value


def _warn_visible(argv: list[str] | None) -> None:
    given = sys.argv[1:] if argv is None else argv
    for option, better in (
        ("--api-key", f"{API_KEY_ENV} or --api-key-file"),
        ("--secret", "PTC_EMULATOR_SECRET or --secret-file"),
    ):
        if any(a == option or a.startswith(option + "=") for a in given):
            logging.getLogger("ptc_emulator").warning(
                "%s on the command line is visible to every local user (ps); use %s instead", option, better
            )


def _base_url(url: str) -> bool:
    """Whether `url` is an http:// or https:// URL with a host (and a port, if given, that is one):
    one that does not parse (`http://[::1`, `http://host:abc`) would fail every request later."""
    from urllib.parse import urlsplit

    if not url.startswith(("http://", "https://")):
        return False
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a port that is not one)
    except ValueError:
        return False
    return bool(parts.hostname)


def _userinfo(url: str) -> bool:
    """Whether `url` carries a user name or password (`http://user:pw@host/v1`): it would be sent
    upstream as Basic auth and shown, unredacted, wherever the URL is named (the startup line, the
    log, the message of a 502 or 504 to a client)."""
    after_scheme = url.split("://", 1)[-1]
    return "@" in after_scheme.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]


def main(argv: list[str] | None = None) -> None:
    given = sys.argv[1:] if argv is None else argv
    if given and given[0] in _TOOLS:
        raise SystemExit(_run_tool(_parser(serve_options=False).parse_args(given)))
    if "serve" not in given:
        # `--help`, `--version`, no command or an unknown one: the top level answers and exits.
        _parser(serve_options=False).parse_args(given)
    import sqlite3

    from ptc_emulator.api.app import create_app
    from ptc_emulator.api.proxy import NOT_HEADER_SAFE, ProxySettingsError, header_safe
    from ptc_emulator.api.settings import resend_problem
    from ptc_emulator.emulator.model import ScenarioError, missing_scenario_path
    from ptc_emulator.emulator.storage import StoreUnavailable

    settings, log_level = parse(argv)
    json_logs = _log_format(argv) == "json"
    _configure_logging(log_level, json_logs)
    _warn_visible(argv)
    for directory in settings.fixtures:
        if not directory.is_dir():
            why = missing_scenario_path(directory)  # a symlink loop or a dangling link, said as `validate` says it
            if why is None and directory.exists():
                why = f"{directory}: not a directory"
            _fail(f"--fixtures {why}" if why else f"--fixtures {directory}: no such directory", 2)
    if (problem := resend_problem(settings)) is not None:
        _fail(problem, 2)
    if settings.upstream is not None and _userinfo(settings.upstream):
        # said without the URL: what comes before the @ is a credential, and stderr may be kept
        _fail(
            "--upstream: the URL carries a user name or password (user:pw@host), which would be sent upstream and "
            "shown wherever the URL is named; give the URL without it",
            2,
        )
    if settings.upstream is not None and not _base_url(settings.upstream):
        _fail(f"--upstream {settings.upstream}: not an http:// or https:// base URL", 2)
    if settings.upstream is not None and settings.record_dir is None:
        _fail("--upstream needs --record DIR: where the recorded conversations go", 2)
    recorder = settings.upstream is None and settings.model_upstream is None
    if settings.record_dir is not None and recorder and settings.record_mode != "none":
        _fail(
            f"--record-mode {settings.record_mode} needs --upstream URL or --model-upstream URL "
            "(replay alone: --record-mode none)",
            2,
        )
    if settings.model_upstream is not None and _userinfo(settings.model_upstream):
        # said without the URL: what comes before the @ is a credential, and stderr may be kept
        _fail(
            "--model-upstream: the URL carries a user name or password (user:pw@host), which would be sent "
            "upstream and shown wherever the URL is named; give the URL without it",
            2,
        )
    if settings.model_upstream is not None and not _base_url(settings.model_upstream):
        _fail(f"--model-upstream {settings.model_upstream}: not an http:// or https:// base URL", 2)
    key_env = settings.model_upstream_api_key_env
    if key_env is not None and not os.environ.get(key_env):
        _fail(f"--model-upstream-api-key-env {key_env}: the variable is not set", 2)
    if key_env is not None and not header_safe(os.environ[key_env]):
        _fail(f"--model-upstream-api-key-env {key_env}: {NOT_HEADER_SAFE}", 2)
    if key_env is not None and settings.api_key is None and not settings.allow_unguarded_upstream_key:
        _fail(
            f"--model-upstream-api-key-env {key_env}: a server that holds an upstream key must require a key of "
            "its own, or any local process could spend it: set PTC_EMULATOR_API_KEY (or --api-key), or accept "
            "that risk with --allow-unguarded-upstream-key",
            2,
        )
    if settings.bundled_fixtures and settings.record_dir is not None:
        _fail("--demo cannot go with --record: the demos would answer in the upstream's or the recordings' place", 2)
    if settings.record_dir is not None and settings.record_mode == "none" and not settings.record_dir.is_dir():
        _fail(f"--record {settings.record_dir}: no such directory (nothing recorded to replay)", 2)
    if settings.record_dir is not None and settings.record_mode != "none":
        try:  # made here, said in one line: later it is the server's startup that fails, with tracebacks
            settings.record_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            reason = "not a directory" if isinstance(e, FileExistsError) else e.strerror or str(e)
            _fail(f"--record {settings.record_dir}: cannot record into it ({reason})", 2)
    if "://" in settings.store and not (settings.secret or os.environ.get("PTC_EMULATOR_SECRET")):
        _fail("--store postgresql://... needs --secret (or PTC_EMULATOR_SECRET): every replica must sign with one", 2)
    try:
        app = create_app(settings)
    except ScenarioError as e:
        _fail_scenarios(e)
    except ProxySettingsError as e:
        _fail(str(e), 2)
    except StoreUnavailable as e:
        _fail(f"--store {_shown_store(settings.store)}: {e}", 1)
    except OSError as e:  # the data directory cannot be made or written (a read-only or missing parent)
        where = e.filename if e.filename is not None else settings.data_dir
        _fail(f"cannot start: {where}: {e.strerror or e} (--data-dir {settings.data_dir})", 1)
    except sqlite3.Error as e:  # a folder SQLite cannot keep its file in (`/proc/1`, `/sys/...`)
        _fail(f"cannot start: {settings.data_dir}: the SQLite store cannot be opened there ({e})", 1)
    try:
        sock = bind(settings.host, settings.port)
    except OSError as e:
        _fail(f"cannot listen on {settings.host}:{settings.port}: {e.strerror or e}", 1)
    where = f"data dir {settings.data_dir.resolve()}" if settings.store == "sqlite" else "nothing written to disk"
    if "://" in settings.store:
        where = "a database replicas share"
    print(
        f"ptc-emulator: serving on http://{settings.host}:{sock.getsockname()[1]}/v1 "
        f"(store={_shown_store(settings.store)}, {where})",
        file=sys.stderr,
        flush=True,
    )
    files = app.state.emulator.scenario_files
    watching = " (watching them for changes)" if settings.watch else ""
    print(f"ptc-emulator: {files.banner()}{watching}", file=sys.stderr, flush=True)
    for line in _sources(settings):
        print(f"ptc-emulator: {line}", file=sys.stderr, flush=True)
    inspector = f"http://{settings.host}:{sock.getsockname()[1]}/_emulator/ui/"
    print(f"ptc-emulator: trace inspector at {inspector} (docs/inspector.md)", file=sys.stderr, flush=True)
    from ptc_emulator.emulator.model import MIN_REDACTED

    for name in (settings.model_upstream_api_key_env, settings.upstream_api_key_env):
        if name and 0 < len(os.environ.get(name, "")) < MIN_REDACTED:
            print(f"ptc-emulator: {_dummy_key(name)}", file=sys.stderr, flush=True)
    config = server_config(app, settings, log_level=log_level, json_logs=json_logs)
    guard_log(_held_keys(settings))  # after uvicorn's log config, whose handlers it guards too
    _server_class()(config).run(sockets=[sock])


def _sources(settings: Settings) -> list[str]:
    """The startup lines naming what answers besides the scenario files: the recording proxy and
    its folder, replayed recordings, a model upstream."""
    lines = []
    if settings.upstream is not None:
        lines.append(
            f"proxying /v1/responses to {settings.upstream} (--record-mode {settings.record_mode}), "
            f"recording into {settings.record_dir.resolve() if settings.record_dir else None}"
        )
    elif settings.record_dir is not None:
        lines.append(f"recordings in {settings.record_dir.resolve()} (--record-mode {settings.record_mode})")
    if settings.model_upstream is not None:
        model = settings.model_upstream_model or "each request's model"
        lines.append(
            f"model upstream {settings.model_upstream} ({settings.model_upstream_api}, {model}) answers what no "
            "scenario matches"
        )
    return lines


def _log_format(argv: list[str] | None) -> str:
    return str(getattr(_parser().parse_args(argv), "log_format", "text"))


QUIET_LOGGERS = ("httpx", "httpcore")
"""The HTTP library's own loggers, kept at WARNING whatever `--log-level` says: at INFO `httpx`
logs each request with the status line the upstream sent (its reason phrase is the upstream's
own text, and may hold the key), at DEBUG `httpcore` logs every response header raw. Both the
model upstream's client and the recording proxy send through them."""


def _configure_logging(level: str, json_logs: bool) -> None:
    """Text lines for a person; with `--log-format json`, one JSON object a line for CI. The HTTP
    library's loggers stay at WARNING (`QUIET_LOGGERS`)."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    if not json_logs:
        logging.basicConfig(level=level.upper(), format="%(levelname)s %(name)s: %(message)s")
        return
    from ptc_emulator.api.journaling import JsonFormatter

    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler])


def _dummy_key(name: str) -> str:
    """The startup line for a key shorter than `MIN_REDACTED` (in `name`)."""
    from ptc_emulator.emulator.model import MIN_REDACTED

    return (
        f"${name} is shorter than {MIN_REDACTED} characters: taken as a dummy key (a local server's "
        "'EMPTY'), it is not redacted from answers, the log or recordings (docs/security.md)"
    )


def _held_keys(settings: Settings) -> list[str]:
    """The upstream keys this server holds (the model upstream's, the recording proxy's)."""
    names = (settings.model_upstream_api_key_env, settings.upstream_api_key_env)
    return [os.environ[name] for name in names if name and os.environ.get(name)]


class KeyFilter(logging.Filter):
    """Takes the upstream keys out of every record a handler writes (its message, its
    traceback, a request's fields), however JSON writes them (`Redaction.text`): whatever logger
    a text the upstream wrote reaches, the key does not reach the log."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__()
        from ptc_emulator.emulator.model import Redaction

        self.redactions = [Redaction(key) for key in keys]

    def _text(self, text: str) -> str:
        """`text` without the keys; a text whose percent-decoded form holds one (a request's raw
        path, as the access log writes it: `sk-a%2Fb`) is written decoded, without it."""
        for redaction in self.redactions:
            text = redaction.text(text)
        if "%" in text:
            decoded = urllib.parse.unquote(text)
            if decoded != text and (without := self._text(decoded)) != decoded:
                return without
        return text

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, dict):
            return {k: self._value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._value(v) for v in value]
        return value

    def _arg(self, value: Any) -> Any:
        """One of a record's `args`, without the keys: a number as it is; what else writes a
        key is written as its text without it."""
        if isinstance(value, bool | int | float) or value is None:
            return value
        text = value if isinstance(value, str) else str(value)
        redacted = self._text(text)
        return value if redacted == text else redacted

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        folded = False
        if record.exc_info:
            shown = logging.Formatter().formatException(record.exc_info)
            if self._text(shown) != shown:  # said in the message, without the key
                message += "\n" + shown
                record.exc_info = record.exc_text = None
                folded = True
        redacted = self._text(message)
        if redacted != message:
            # Each argument redacted, `args` kept of its shape: a formatter that reads them
            # (uvicorn's access lines unpack five) still can (before, `args = None` made it raise,
            # "--- Logging error ---", and the line was lost).
            args = record.args
            if isinstance(args, tuple) and args and not folded and isinstance(record.msg, str):
                record.msg = self._text(record.msg)
                record.args = tuple(self._arg(a) for a in args)
                try:
                    fine = self._text(record.getMessage()) == record.getMessage()
                except (TypeError, ValueError):
                    fine = False
                if not fine:  # the key across two arguments: none of them written
                    record.args = tuple(a if isinstance(a, bool | int | float) else "[redacted]" for a in args)
            else:
                record.msg, record.args = redacted, ()
        if record.stack_info:
            record.stack_info = self._text(record.stack_info)
        fields = getattr(record, "request", None)
        if isinstance(fields, dict):
            record.request = self._value(fields)
        return True


def guard_log(keys: list[str]) -> None:
    """A `KeyFilter` on every handler of the root logger and uvicorn's (which keep their own):
    every record any logger of the process writes goes through one of them. Nothing to do
    without a key."""
    if not keys:
        return
    guard = KeyFilter(keys)
    for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi"):
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, KeyFilter) for f in handler.filters):
                handler.addFilter(guard)


def _server_class() -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            settle_heap()

    return Server


def settle_heap() -> None:
    """Once the app has started: collect, then move every object that exists now (modules,
    models, schemas, the tokenizer, about 90,000 objects) out of the collector's sight for good.
    Python's full collections walk every tracked object; without this each one spent 60-80 ms
    walking the server's own code, one every thousand requests or so under load (about 4% of
    the server's CPU). Objects made later (stored responses, caches) are collected as before.
    Only the `serve` process does this for good; an app made in-process does not freeze its
    host's objects, except the pytest plugin's, which freezes them while its server runs and
    unfreezes them when it stops (`testing/plugin.py`)."""
    gc.collect()
    gc.freeze()


KEEP_ALIVE_S = 75
"""How long an idle client connection stays open. uvicorn's default (5 s) races clients that reuse a
pooled connection after a pause (a slow tool, a busy machine): the server closes it as the next
request goes out, and the client sees a connection error."""


def server_config(app: Any, settings: Settings, *, log_level: str, json_logs: bool = False) -> Any:
    """The `uvicorn.Config` every way of serving the app shares (the CLI, the test server), the
    connections bounded by `settings`' head deadline and write-pause limit (`api/httpflow.py`).
    `json_logs`: uvicorn's loggers keep no handlers of their own, so the root's JSON handler has them."""
    import uvicorn

    from ptc_emulator.api.httpflow import HttpProtocol
    from ptc_emulator.api.wsflow import WebSocketProtocol

    extra: dict[str, Any] = {"log_config": None} if json_logs else {}
    return uvicorn.Config(
        app,
        log_level=log_level,
        http=HttpProtocol.bounded(
            head_timeout_s=settings.head_timeout_s,
            body_timeout_s=settings.body_timeout_s,
            write_pause_s=settings.write_pause_s,
        ),
        ws=WebSocketProtocol.bounded(write_pause_s=settings.write_pause_s),
        lifespan="on",
        timeout_keep_alive=KEEP_ALIVE_S,
        **extra,
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); the port is ours before anything says it is served."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio turns Nagle off only on accepted sockets whose protocol says TCP.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _fail(message: str, code: int) -> NoReturn:
    print(f"ptc-emulator: {message}", file=sys.stderr)
    raise SystemExit(code)


def _fail_scenarios(error: Exception) -> NoReturn:
    """Every problem of the scenario files on its own line (file: field: why, as `validate` says
    them), then how many; nothing is served."""
    problems = getattr(error, "problems", None) or [str(error)]
    for problem in problems:
        print(f"ptc-emulator: {problem}", file=sys.stderr)
    count = f"{len(problems)} problem" + ("" if len(problems) == 1 else "s")
    _fail(f"{count} in the scenario files, nothing served (`ptc-emulator validate DIR` checks them)", 2)


_TOOLS = ("inspect", "validate")


def _run_tool(args: argparse.Namespace) -> int:
    """`inspect`, `validate`: the exit status."""
    if args.command == "validate":
        return _validate(args.paths)
    return _inspect(args.file, args.port)


def _validate(paths: list[Path]) -> int:
    """Every problem on its own line (file: field: why), on stderr; a summary on stdout; 1 if any."""
    from ptc_emulator.emulator.model import validate_scenarios

    found = validate_scenarios(paths)
    for error in found.errors:
        print(error, file=sys.stderr)
    files = f"{found.files} file" + ("" if found.files == 1 else "s")
    if found.errors:
        problems = f"{len(found.errors)} problem" + ("" if len(found.errors) == 1 else "s")
        print(f"ptc-emulator validate: {problems} in {files}")
        return 1
    print(f"ptc-emulator validate: {found.scenarios} scenarios in {files}, all valid")
    return 0


def _inspect(path: Path, port: int) -> int:
    from ptc_emulator.api.inspector.serve import TraceError, TraceServer, load_trace

    try:
        page = load_trace(path)
    except TraceError as error:
        _fail(str(error), 2)
    try:
        server = TraceServer(page, port)
    except OSError as e:
        _fail(f"cannot listen on 127.0.0.1:{port}: {e.strerror or e}", 1)

    def ready(url: str) -> None:
        print(f"ptc-emulator: trace {path} in the inspector at {url} (Ctrl-C stops)", file=sys.stderr, flush=True)

    try:
        server.serve(ready)
    except KeyboardInterrupt:
        pass
    return 0
