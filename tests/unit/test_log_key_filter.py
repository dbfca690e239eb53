"""`serve`'s log handlers take the upstream keys out of every record (`api/cli.py`, `KeyFilter`):
its message, a traceback, a request's JSON fields, however JSON writes the key."""

from __future__ import annotations

import io
import json
import logging

from ptc_emulator.api.cli import KeyFilter
from ptc_emulator.api.journaling import JsonFormatter

KEY = "sk-filter/KEY+0123456789abcdef"


def _written(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    handler.addFilter(KeyFilter([KEY]))
    handler.handle(record)
    return out.getvalue()


def _record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, msg, args or None, None)
    record.__dict__.update(extra)
    return record


def test_the_key_leaves_a_message_its_arguments_and_its_escapes() -> None:
    escaped = "".join(f"\\u{ord(c):04x}" for c in KEY)
    plain = logging.Formatter("%(levelname)s %(name)s: %(message)s")
    text = _written(plain, _record('HTTP Request: POST %s "HTTP/1.1 400 %s"', "http://up/v1", KEY))
    assert KEY not in text and '"HTTP/1.1 400 [redacted]"' in text
    assert escaped not in _written(plain, _record("said %s", escaped))


def test_the_key_leaves_a_traceback_and_a_requests_fields() -> None:
    try:
        raise ValueError(f"bad key {KEY}")
    except ValueError:
        import sys

        record = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    for formatter in (logging.Formatter(), JsonFormatter()):
        text = _written(formatter, record)
        assert KEY not in text and "bad key [redacted]" in text and "ValueError" in text
    fields = {"method": "POST", "path": "/v1/responses", "error": f"said {KEY}", "route": [KEY]}
    text = _written(JsonFormatter(), _record("request", request=fields))
    assert KEY not in text and json.loads(text)["error"] == "said [redacted]"


def test_an_access_records_arguments_keep_their_shape_without_the_key() -> None:
    """uvicorn's access formatter unpacks five arguments: each is redacted, none set to None
    (before, `args = None` made it raise and the line was lost); a key split over two is neither."""
    from uvicorn.logging import AccessFormatter

    formatter = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False)
    line = '%s - "%s %s HTTP/%s" %d'
    whole = _record(line, "127.0.0.1:1", "GET", f"/v1/models?x={KEY}", "1.1", 200)
    assert _written(formatter, whole) == '127.0.0.1:1 - "GET /v1/models?x=[redacted] HTTP/1.1" 200 OK\n'
    split = _record("said %s%s (%d)", f"a {KEY[:10]}", KEY[10:] + " b", 7)
    assert _written(logging.Formatter("%(message)s"), split) == "said [redacted][redacted] (7)\n"
