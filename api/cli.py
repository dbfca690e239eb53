"""`ptc-emulator serve [...]` (also `python -m emulator serve`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from emulator.scenario import ScenarioError
from sandbox import Limits

from .settings import API_KEY_ENV, Settings, default_data_dir

__all__ = ["main", "parse"]

_LIMITS = Limits()
_SETTINGS = Settings()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ptc-emulator", description="A local stand-in for OpenAI's Responses API with Programmatic Tool Calling."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the Responses API on a local port")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--fixtures", type=Path, action="append", default=[], metavar="DIR", help="more scenario files (repeatable)"
    )
    serve.add_argument("--no-bundled-fixtures", action="store_true", help="do not load the bundled fixtures/")
    serve.add_argument("--store", choices=("sqlite", "memory"), default="sqlite")
    serve.add_argument("--data-dir", type=Path, default=None, help=f"default {default_data_dir()}")
    serve.add_argument("--secret", default=None, help="fingerprint HMAC secret (or PTC_EMULATOR_SECRET)")
    serve.add_argument("--api-key", default=None, help=f"require this Bearer key (or {API_KEY_ENV})")
    serve.add_argument("--workers", type=int, default=None, help="V8 worker processes (default: CPU count)")
    serve.add_argument(
        "--live-cache",
        type=int,
        default=_SETTINGS.live_cache,
        metavar="N",
        help="suspended programs each worker keeps live to skip replay (0: always replay)",
    )
    serve.add_argument("--timeout", type=float, default=_LIMITS.timeout_s, help="seconds per program run")
    serve.add_argument("--heap-mb", type=int, default=_LIMITS.heap_bytes // 2**20, help="V8 heap per program")
    serve.add_argument("--max-tool-calls", type=int, default=_LIMITS.max_tool_calls)
    serve.add_argument("--max-output-bytes", type=int, default=_LIMITS.max_output_bytes)
    serve.add_argument("--max-code-bytes", type=int, default=_LIMITS.max_code_bytes)
    serve.add_argument("--max-body-bytes", type=int, default=_SETTINGS.max_body_bytes)
    serve.add_argument(
        "--strict-contract", action="store_true", help="reject tool I/O that violates the tools' schemas"
    )
    serve.add_argument("--log-level", default="info")
    return parser


def parse(argv: list[str] | None = None) -> tuple[Settings, str]:
    args = _parser().parse_args(argv)
    settings = Settings(
        host=args.host,
        port=args.port,
        fixtures=tuple(args.fixtures),
        bundled_fixtures=not args.no_bundled_fixtures,
        store=args.store,
        data_dir=args.data_dir or default_data_dir(),
        secret=args.secret,
        api_key=args.api_key or os.environ.get(API_KEY_ENV) or None,
        pool_size=args.workers or _SETTINGS.pool_size,
        live_cache=args.live_cache,
        limits=Limits(
            timeout_s=args.timeout,
            heap_bytes=args.heap_mb * 2**20,
            max_tool_calls=args.max_tool_calls,
            max_output_bytes=args.max_output_bytes,
            max_code_bytes=args.max_code_bytes,
        ),
        max_body_bytes=args.max_body_bytes,
        strict_contract=args.strict_contract,
    )
    return settings, args.log_level


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    from .app import create_app

    settings, log_level = parse(argv)
    logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        app = create_app(settings)
    except ScenarioError as e:
        print(f"ptc-emulator: {e}", file=sys.stderr)
        raise SystemExit(2) from e
    print(
        f"ptc-emulator: serving on http://{settings.host}:{settings.port}/v1 "
        f"(store={settings.store}, data dir {settings.data_dir})",
        file=sys.stderr,
    )
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=log_level, ws="websockets-sansio")
