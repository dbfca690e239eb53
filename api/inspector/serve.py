"""`ptc-emulator inspect FILE`: a saved trace served in the inspector, on this machine only.

FILE is a trace the pytest plugin wrote (its `.html` or its `.json` journal), the body of
`GET /_emulator/journal` (`{"data": [...]}`), or a list of journal entries. The page is the
inspector's, with the conversations inside it (`trace.trace_html`): nothing else is served, and
only to a loopback `Host` with no foreign `Origin`, as the emulator itself answers.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ptc_emulator.api import guards
from ptc_emulator.api.inspector import UI_PATH
from ptc_emulator.api.inspector.trace import trace_html, trace_policy

__all__ = ["TraceError", "TraceServer", "load_trace", "shape_problem"]


class TraceError(ValueError):
    """A file that is not a trace, said in one sentence that names it."""


def load_trace(path: Path) -> bytes:
    """The page for the trace in `path`."""
    try:
        # Opened without blocking, then looked at: a FIFO (`open` would wait for a writer) or a
        # device (`/dev/zero`, endless) is refused unread.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            status = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
        if stat.S_ISDIR(status.st_mode):
            os.close(fd)
            raise TraceError(f"{path}: a directory, not a trace")
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(status.st_mode):
                raise TraceError(f"{path}: not a regular file: not a trace")
            size = status.st_size
            if size > MAX_TRACE_BYTES:
                raise TraceError(f"{path}: larger than {MAX_TRACE_BYTES} bytes ({size} bytes): not a trace")
            # A file whose size says nothing (`/proc/self/pagemap` says 0) is read up to the bound
            # and one byte more, never past it.
            raw = file.read(MAX_TRACE_BYTES + 1)
            if len(raw) > MAX_TRACE_BYTES:
                raise TraceError(f"{path}: larger than {MAX_TRACE_BYTES} bytes: not a trace")
            # The file's text in a list that `_page` empties: it lets go of it once parsed (with
            # the bytes let go of here), not when the page is made (each is up to 128 MiB).
            text = [raw.decode("utf-8")]
            del raw
    except UnicodeDecodeError as error:
        raise TraceError(f"{path}: cannot read it ({error})") from error
    except OSError as error:  # its strerror only: the error's filename may be a descriptor's number
        raise TraceError(f"{path}: cannot read it ({error.strerror or type(error).__name__})") from error
    try:
        return _page(path, text)
    except RecursionError as error:
        raise TraceError(f"{path}: not a ptc-emulator trace (nested too deep)") from error
    except UnicodeEncodeError as error:  # a JSON escape such as "\\ud800" makes a lone surrogate
        raise TraceError(
            f"{path}: not a ptc-emulator trace (a lone surrogate in a string: not valid Unicode)"
        ) from error


MAX_TRACE_ENTRIES = 10_000
"""The most journal entries (or an `.html` trace's conversations) `inspect` reads: what the
server's journal holds at most (docs/limits.md), so what any trace it wrote holds. Counted as the
file is parsed, an entry at a time: a file with more is refused at the first entry past it, before
the rest is parsed and before any page is made (each entry costs the page its conversation)."""

MAX_TRACE_BYTES = 128 * 2**20
"""The largest trace file `inspect` reads: the journal's 64 MiB of compact JSON bodies, twice over
for a trace's indented JSON and the entries' own fields. Larger is refused before any of it is read
(a file whose size is not told, read to one byte past it)."""


MAX_TRACE_VALUES = 4_000_000
"""The most JSON values and keys a trace file may hold, counted as the characters `[`, `{`, `,`
and `:` outside strings (every value and key but the first follows one), before anything is
parsed: 16 MiB of `[],` (5.6 million empty lists, under the byte bound) took 606 MB and 13 s, the
byte bound alone let such a file take 4.5 GB. A file of tiny values at this bound takes some
240 MB; one of long strings at the byte bound some 960 MB (docs/limits.md, bench/inspect_memory.py)."""

# A value starts the text, or follows `[`, `,` or `:` (an object's key follows `{` or `,`): their
# number outside strings, plus one, bounds the values and keys. Counted first with `str.count`
# (strings' own commas and colons counted too: an overcount), and only past the bound exactly,
# one match per `[`, `{`, `,` or `:` outside strings, what lies between skipped in C. A quote that
# opens no string, or the text's end, stops the count: the text is not JSON then, and the parser
# that follows says so.
_STRUCTURE = "[{,:"
_OUTSIDE_STRINGS = re.compile(r'(?>"[^"\\]*(?:\\.[^"\\]*)*"|[^"\[{,:]++)*+(?:([\[{,:])|"|\Z)')


def _count_values(path: Path, text: str) -> None:
    """Refuse `text` if it holds more than `MAX_TRACE_VALUES` values and keys."""
    if sum(text.count(c) for c in _STRUCTURE) + 1 <= MAX_TRACE_VALUES:
        return
    found = 1
    for match in _OUTSIDE_STRINGS.finditer(text):
        if match.lastindex is None:
            return
        found += 1
        if found > MAX_TRACE_VALUES:
            raise TraceError(
                f"{path}: more than {MAX_TRACE_VALUES} JSON values and keys, more than inspect reads: "
                "not a trace (refused unparsed)"
            )


_LONG_INTEGER = "an integer of more than 4300 digits"


class _NotFinite(ValueError):
    """`NaN`, `Infinity` or `-Infinity` in a file: Python's parser takes them, JSON has none, and a
    page carrying one is one the browser's `JSON.parse` refuses (an empty inspector)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _not_finite(name: str) -> Any:
    raise _NotFinite(name)


def _not_finite_said(path: Path, error: _NotFinite) -> TraceError:
    return TraceError(f"{path}: not a ptc-emulator trace (it holds {error.name}, which JSON does not have)")


_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder(parse_constant=_not_finite)


def _counted(path: Path, text: str, lists: tuple[str, ...], what: str = "journal entries") -> Any:
    """`json.loads(text)`, but the list of entries (the top-level list, or a top-level object's
    list under one of `lists`) is parsed an entry at a time, and refused at the first entry past
    `MAX_TRACE_ENTRIES`, the rest unparsed."""

    def space(i: int) -> int:
        return _SPACE.match(text, i).end()  # type: ignore[union-attr]  # (it matches the empty text at worst)

    def entries(i: int) -> tuple[list[Any], int]:
        found: list[Any] = []
        i = space(i + 1)
        if text.startswith("]", i):
            return found, i + 1
        while True:
            if len(found) == MAX_TRACE_ENTRIES:
                raise TraceError(
                    f"{path}: more than {MAX_TRACE_ENTRIES} {what}, more than the server's journal holds: "
                    "not a trace (refused there, the rest unread)"
                )
            item, i = _DECODER.raw_decode(text, i)
            found.append(item)
            i = space(i)
            if text.startswith("]", i):
                return found, i + 1
            if not text.startswith(",", i):
                raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
            i = space(i + 1)

    def members(i: int) -> tuple[dict[str, Any], int]:
        found: dict[str, Any] = {}
        i = space(i + 1)
        if text.startswith("}", i):
            return found, i + 1
        while True:
            if not text.startswith('"', i):
                raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, i)
            key, i = _DECODER.raw_decode(text, i)
            i = space(i)
            if not text.startswith(":", i):
                raise json.JSONDecodeError("Expecting ':' delimiter", text, i)
            i = space(i + 1)
            if key in lists and text.startswith("[", i):
                found[key], i = entries(i)
            else:
                found[key], i = _DECODER.raw_decode(text, i)
            i = space(i)
            if text.startswith("}", i):
                return found, i + 1
            if not text.startswith(",", i):
                raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
            i = space(i + 1)

    i = space(0)
    data: Any
    if text.startswith("[", i):
        data, i = entries(i)
    elif text.startswith("{", i):
        data, i = members(i)
    else:
        data, i = _DECODER.raw_decode(text, i)
    if space(i) != len(text):
        raise json.JSONDecodeError("Extra data", text, space(i))
    return data


def _page(path: Path, source: list[str]) -> bytes:
    """The page for a file's text, `source`'s one item, taken out of it."""
    text = source.pop()
    if path.suffix.lower() in (".html", ".htm"):
        # Only the trace's data is taken from the file; the page around it is the emulator's own,
        # so a crafted page holding `id="ptc-trace"` runs none of its scripts.
        opening = '<script type="application/json" id="ptc-trace">'
        start = text.find(opening)
        end = text.find("</script>", start) if start >= 0 else -1
        if start < 0 or end < 0:
            raise TraceError(f"{path}: not a ptc-emulator trace (no trace data in the page)")
        section = text[start + len(opening) : end]
        del text
        try:
            _count_values(path, section)
            data = _counted(path, section, ("conversations",), "conversations")
        except TraceError:  # (a ValueError too)
            raise
        except _NotFinite as error:
            raise _not_finite_said(path, error) from error
        except json.JSONDecodeError as error:
            raise TraceError(f"{path}: not a ptc-emulator trace (its data is not JSON: {error.msg})") from error
        except ValueError as error:  # what Python's parser raises for the one number it will not read
            raise TraceError(f"{path}: not a ptc-emulator trace (its data is not JSON: {_LONG_INTEGER})") from error
        del section
        if not isinstance(data, dict) or not isinstance(data.get("conversations"), list):
            raise TraceError(f"{path}: not a ptc-emulator trace (its data has no conversations)")
        # Only the conversations' entries are read: their summaries, figures and programs are made
        # again from them, as for a JSON trace, so the page reads nothing the file shaped but entries.
        entries: list[Any] = []
        for n, each in enumerate(data["conversations"]):
            if not isinstance(each, dict) or not isinstance(each.get("entries"), list):
                raise TraceError(
                    f"{path}: not a ptc-emulator trace (conversation {n} is not an object with a list of entries)"
                )
            entries.extend(each["entries"])
            if len(entries) > MAX_TRACE_ENTRIES:
                raise TraceError(
                    f"{path}: more than {MAX_TRACE_ENTRIES} journal entries, more than the server's journal holds: "
                    "not a trace"
                )
        title = data.get("title")
        return _made(path, entries, title if isinstance(title, str) and title else path.name)
    try:
        _count_values(path, text)
        data = _counted(path, text, ("journal", "data"))
    except TraceError:  # (a ValueError too)
        raise
    except _NotFinite as error:
        raise _not_finite_said(path, error) from error
    except json.JSONDecodeError as error:
        raise TraceError(f"{path}: not JSON ({error.msg}, line {error.lineno})") from error
    except ValueError as error:
        raise TraceError(f"{path}: not JSON ({_LONG_INTEGER})") from error
    del text
    title = str(data.get("test") or path.name) if isinstance(data, dict) else path.name
    found = data.get("journal", data.get("data")) if isinstance(data, dict) else data
    if not isinstance(found, list) or not all(isinstance(e, dict) for e in found):
        raise TraceError(
            f"{path}: not a journal: expected a trace's JSON ('journal': [...]), the body of "
            "GET /_emulator/journal ('data': [...]) or a list of its entries"
        )
    return _made(path, found, title)


def _made(path: Path, entries: list[Any], title: str) -> bytes:
    """The page for these entries, once each has the shapes the page reads (`shape_problem`)."""
    for n, entry in enumerate(entries):
        problem = shape_problem(entry)
        if problem is not None:
            seq = entry.get("seq") if isinstance(entry, dict) else None
            which = f"entry {n}" + (f" (seq {seq})" if isinstance(seq, int) and not isinstance(seq, bool) else "")
            raise TraceError(f"{path}: not a ptc-emulator journal ({which}: {problem})")
    try:
        return trace_html(entries, title=title).encode("utf-8")
    except UnicodeError:  # a lone surrogate: said as such by `load_trace`
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as error:
        # The server writes its entries' fields with their types; a file's may hold any (a status
        # that is text, figures that are a number), read deep in the inspector.
        raise TraceError(
            f"{path}: not a ptc-emulator journal (an entry is malformed: {type(error).__name__}: {error})"
        ) from error


def _optional(value: Any, kind: type | tuple[type, ...]) -> bool:
    return value is None or isinstance(value, kind)


def _objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def shape_problem(entry: Any) -> str | None:
    """What in a journal entry has another shape than the server writes and the page reads
    (`api/static/inspector/inspector.js`), or None. The fields the server writes are checked: the
    entry's own (`route`, `contract`, `images`, `figures`, `near_miss`) and the response's output;
    the request is the client's, anything it sent, and the page reads it as such."""
    if not isinstance(entry, dict):
        return "not an object"
    route = entry.get("route")
    if not (route is None or (isinstance(route, list) and all(isinstance(hop, str) for hop in route))):
        return "'route' is not a list of strings"
    if not (entry.get("contract") is None or _objects(entry.get("contract"))):
        return "'contract' is not a list of objects"
    if not _optional(entry.get("images"), list):
        return "'images' is not a list"
    if not _optional(entry.get("figures"), dict):
        return "'figures' is not an object"
    near_miss = entry.get("near_miss")
    if not _optional(near_miss, dict) or (
        isinstance(near_miss, dict) and not (near_miss.get("near_misses") is None or _objects(near_miss["near_misses"]))
    ):
        return "'near_miss' is not an object with a list of objects in 'near_misses'"
    response = entry.get("response")
    if not isinstance(response, dict) or response.get("output") is None:
        return None
    output = response["output"]
    if not isinstance(output, list):
        return "the response's 'output' is not a list"
    for n, item in enumerate(output):
        problem = _item_problem(item)
        if problem is not None:
            return f"the response's output item {n} {problem}"
    return None


def _item_problem(item: Any) -> str | None:
    if not isinstance(item, dict):
        return "is not an object"
    if not isinstance(item.get("type"), str):
        return "has no 'type' string"
    for key in ("code", "call_id", "name", "role", "status"):
        if not _optional(item.get(key), str):
            return f"has a '{key}' that is not a string"
    for key in ("summary", "content"):
        if item["type"] == "reasoning" and not (item.get(key) is None or _objects(item[key])):
            return f"has a '{key}' that is not a list of objects"
    caller = item.get("caller")
    if not _optional(caller, dict) or (isinstance(caller, dict) and not _optional(caller.get("type"), str)):
        return "has a 'caller' that is not an object with a 'type' string"
    return None


def _handler(page: bytes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            host, origin = self.headers.get("Host"), self.headers.get("Origin")
            path = self.path.split("?", 1)[0]
            if not guards.host_allowed(host, "127.0.0.1", ()) or (
                origin is not None and not guards.origin_allowed(origin, host, ())
            ):
                self._send(403, b"This trace is served to this machine's own pages only.\n", "text/plain")
            elif path == "/":
                self.send_response(307)
                self.send_header("Location", UI_PATH)
                self.end_headers()
            elif path == UI_PATH:
                self._send(200, page, "text/html; charset=utf-8")
            else:
                self._send(
                    404, b"Not found: this server serves one trace, at " + UI_PATH.encode() + b"\n", "text/plain"
                )

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """The standard library's refusals (another method than GET: 501; a malformed request
            line or header: 400, 414, 431) as plain text with the same headers as every answer
            here, not its HTML error page without them."""
            phrase = self.responses.get(code, ("Error", ""))[0]
            text = f"{code} {phrase}: this server serves one trace, at {UI_PATH}, to GET requests.\n"
            self.close_connection = True
            if self.request_version == "HTTP/0.9":  # (a line it could not read: its head is written too)
                self.request_version = "HTTP/1.0"
            self._send(code, text.encode(), "text/plain; charset=utf-8", body_sent=self.command != "HEAD")

        def _send(self, status: int, body: bytes, media: str, *, body_sent: bool = True) -> None:
            self.send_response(status)
            self.send_header("Content-Type", media)
            self.send_header("Content-Length", str(len(body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("X-Content-Type-Options", "nosniff")
            # The server's own trace page's policy (`/_emulator/inspector/trace.html`): no page may frame it.
            self.send_header("Content-Security-Policy", trace_policy() + "; frame-ancestors 'none'")
            self.end_headers()
            if body_sent:
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the standard library's name)
            pass

    return Handler


class TraceServer:
    """The page on 127.0.0.1:`port` (0: any free port), until `stop()`."""

    def __init__(self, page: bytes, port: int = 0) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(page))
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}{UI_PATH}"
        self._thread: threading.Thread | None = None

    def serve(self, ready: Callable[[str], None] | None = None) -> None:
        """Serve in this thread until interrupted (the CLI)."""
        if ready is not None:
            ready(self.url)
        try:
            self.httpd.serve_forever()
        finally:
            self.httpd.server_close()

    def start(self) -> TraceServer:
        """Serve from a thread (tests)."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="ptc-trace", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join()
