"""A saved trace: the inspector's page as one self-contained HTML file, with the conversations of
some journal entries inside it, that opens from disk in a browser with no server, and the same
entries as JSON (the pytest plugin and the JS helper write both per failed test, the helper
fetching them from `GET /_emulator/inspector/trace.{html,json}`; `ptc-emulator inspect FILE`
serves either)."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

from ptc_emulator.api.inspector import conversation, group

__all__ = ["trace_html", "trace_json"]

Entry = dict[str, Any]


def _asset(name: str) -> str:
    return resources.files("ptc_emulator.api").joinpath("static", "inspector", name).read_text(encoding="utf-8")


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def trace_html(entries: list[Entry], *, title: str = "") -> str:
    """The inspector's page as one self-contained HTML file: its styles and scripts inline, and the
    conversations of these journal entries (what `GET /_emulator/journal` returns) as data in it.
    It opens from disk in a browser, with no server and nothing fetched: its policy allows only its
    own inline scripts and style (by hash) and no connection at all. Nothing from the journal is
    markup: the data is JSON in a non-script element (every `<`, `>` and `&` escaped), and the
    page renders it as text, as it does from the server."""
    # Each conversation is made and written as text in turn, never all of them at once (a
    # conversation's summary, figures and lists cost some 3 KB, whatever its entries hold).
    return _page_around(_joined(_conversations_text(title, group(entries))))


def _conversations_text(title: str, groups: list[list[Entry]]) -> Iterator[str]:
    """What `JSONEncoder(ensure_ascii=False).iterencode` gives for `{"title", "conversations"}`."""
    encoder = json.JSONEncoder(ensure_ascii=False)
    yield '{"title": ' + encoder.encode(title) + ', "conversations": ['
    for n, each in enumerate(groups):
        if n:
            yield ", "
        yield from encoder.iterencode(conversation(each))
    yield "]}"


def trace_json(entries: list[Entry], *, test: str, scope: str | None) -> str:
    """A trace's JSON file: `{"object": "emulator.trace", "test", "scope", "journal"}`, the journal
    being these entries (what `GET /_emulator/journal` returns)."""
    record = {"object": "emulator.trace", "test": test, "scope": scope, "journal": entries}
    return json.dumps(record, indent=1, ensure_ascii=False)


def trace_policy() -> str:
    """The Content-Security-Policy of a trace page: its own inline scripts and style, by hash."""
    style, scripts = _asset("inspector.css"), [_asset("highlight.js"), _asset("inspector.js")]
    return (
        f"default-src 'none'; script-src {' '.join(_hash(t) for t in scripts)}; style-src {_hash(style)}; "
        "img-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
    )


def _joined(pieces: Iterator[str], batch: int = 4096) -> str:
    """`"".join(pieces)`, holding at most `batch` of the small pieces at once."""
    joined: list[str] = []
    while chunk := list(itertools.islice(pieces, batch)):
        joined.append("".join(chunk))
    return "".join(joined)


def _page_around(payload: str) -> str:
    """The page around a trace's data, given as JSON text."""
    payload = payload.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    payload = payload.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    style, scripts = _asset("inspector.css"), [_asset("highlight.js"), _asset("inspector.js")]
    for text in (style, *scripts):
        if "</" in text:  # never in our own files: it would end the element it is inlined in
            raise ValueError("an inspector asset holds '</', which cannot be inlined")
    policy = trace_policy()
    page = _asset("index.html")
    page = page.replace('<link rel="stylesheet" href="inspector.css">', f"<style>{style}</style>")
    page = page.replace('  <script src="highlight.js" defer></script>\n', "")
    page = page.replace('  <script src="inspector.js" defer></script>\n', "")
    page = page.replace("<head>\n", f'<head>\n  <meta http-equiv="Content-Security-Policy" content="{policy}">\n', 1)
    body = f'<script type="application/json" id="ptc-trace">{payload}</script>\n'
    body += "".join(f"<script>{t}</script>\n" for t in scripts)
    return page.replace("</body>", body + "</body>", 1)
