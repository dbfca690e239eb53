"""Recorded conversations become scenario files: pure functions, no I/O.

A recording server (`api.proxy`) hands every exchange it proxied, a create request's body and
the upstream's final response, to a `Tape`. The tape follows conversations across
`previous_response_id` chains and `store: false` replays (the whole history resent as input) and,
when a response ends one (a final assistant message, no pending call), returns the
conversation's items. `scenario_from` turns them into a scenario in the emulator's own format:

    match:    the latest user message (a regular expression matching exactly that text, anchored)
              and the function tools the request declared
    turns:    the programs' code, the direct calls with their arguments, the reasoning summaries,
              the message said right before a call or a program in its response (that turn's
              `preamble`), and the final message: a template where its text visibly came from the
              program's result or a direct call's output (it appears there verbatim), else verbatim

`to_yaml` writes it for a person to read (fixed key order, block scalars for code) and
`file_name` names it after its match, so re-recording the same run gives the same file. Nothing
in a scenario comes from a request's headers: keys and tokens are never written.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import yaml
from jinja2 import StrictUndefined, meta

from ptc_emulator.emulator.model.scripted import templating
from ptc_emulator.emulator.model.scripted.scenario import Given, Said, ToolOutput

__all__ = [
    "RECORDED_PRIORITY",
    "Tape",
    "empty_answer",
    "file_name",
    "full_match",
    "items_of",
    "match_context",
    "readable_yaml",
    "scenario_from",
    "template_for",
    "said_text",
    "to_yaml",
    "unrecordable",
    "unreplayable",
    "user_text",
]


def empty_answer(scenario: Any) -> tuple[int, str] | None:
    """The index and kind of a recording's first `message` or `refusal` turn that is empty, null
    or only whitespace (`' '`, `'\\n'`) or characters that show nothing (`_blank`): replayed, it
    is a completed response with nothing in it, a test passing on no answer (the model upstream
    answers such a message with a 502: neither text nor a tool call). Neither the recorder writes
    one nor a cassette replays one; a scenario written by hand may."""
    turns = scenario.get("turns") if isinstance(scenario, dict) else None
    for index, turn in enumerate(turns if isinstance(turns, list) else ()):
        if not isinstance(turn, dict):
            continue
        for kind in ("message", "refusal"):
            if kind in turn and (_blank(turn[kind]) or _renders_empty(turn[kind])):
                return index, kind
    return None


def _blank(text: Any) -> bool:
    """No text, or none a reader sees: whitespace, and the characters that show nothing (format
    characters such as a zero-width space or a byte order mark, controls, the blank letters, and
    marks with no character to sit on): `'\u200b\ufeff'` replays as empty as `' '` does, and so
    does `'\u034f\ufe0f'` (a grapheme joiner and a variation selector: nonspacing marks; a mark
    after a visible character shows with it, and that character makes the text visible)."""
    if text is None:
        return True
    if not isinstance(text, str):
        return False
    return all(_invisible(character) or unicodedata.category(character) in ("Mn", "Me") for character in text.strip())


_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Characters of a letter's (or symbol's) category that show nothing: the Hangul fillers, and
the blank Braille pattern."""


def _invisible(character: str) -> bool:
    return (
        character.isspace()
        or unicodedata.category(character) in ("Cc", "Cf", "Zs", "Zl", "Zp")
        or character in _BLANK_LETTERS
    )


def _renders_empty(text: Any) -> bool:
    """Whether a turn's text is a template of constants only (no name a request gives: `{{ '' }}`,
    `{# a note #}`) that renders empty: replayed, it is as empty as `''` (rendered under the
    templates' bounds; one that cannot be rendered so is left to the scenario's own checks)."""
    if not isinstance(text, str) or _JINJA.search(text) is None:
        return False
    env = _constant_env()
    try:
        tree = env.parse(text)
        if meta.find_undeclared_variables(tree):
            return False
        templating.check(env, text)
        return _blank(templating.render(env.from_string(tree), {}))
    except Exception:  # noqa: BLE001 - refused later, with the scenario's own message
        return False


@functools.cache
def _constant_env() -> templating.BoundedEnvironment:
    return templating.BoundedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


RECORDED_PRIORITY = 1
"""A recording matches one exact message: it wins over hand-written patterns (priority 0)."""

Item = dict[str, Any]
_TERMINAL_STATUS = "completed"
_REGEX_SPECIAL = re.compile(r"([\\.^$*+?{}\[\]|()])")
_JINJA = re.compile(r"\{[{%#]")


# ---- items --------------------------------------------------------------------------------------


def items_of(value: Any) -> list[Item]:
    """A request's `input` as a list of item dicts (a string is one user message)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return [dict(item) for item in value if isinstance(item, dict)]


def _kind(item: Item) -> str:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return str(kind)


def _is_user(item: Item) -> bool:
    return _kind(item) == "message" and item.get("role") == "user"


def _text(value: Any) -> str:
    """A part's text as recorded: null (or absent) is no text, not `'None'` (an answer of null text
    is an empty answer, not recorded: `empty_answer`)."""
    return "" if value is None else str(value)


def user_text(item: Item) -> str:
    """A message's text as the emulator's matcher sees it: its text parts joined by newlines."""
    return _joined(item, ("input_text", "output_text"), "\n")


def said_text(item: Item) -> str:
    """An assistant message's text as a client reads it: its parts' text joined with nothing
    between (the SDKs' `output_text` joins `output_text` parts so), so a reply in two parts,
    `'Hello '` and `'world'`, replays as `'Hello world'`; null text is no text."""
    return _joined(item, ("output_text",), "")


def _joined(item: Item, texts: tuple[str, ...], between: str) -> str:
    """The message's content when a string; else its parts of the `texts` types and its refusals,
    joined by `between`."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for part in content or ():
        if isinstance(part, dict):
            if part.get("type") in texts:
                parts.append(_text(part.get("text")))
            elif part.get("type") == "refusal":
                parts.append(_text(part.get("refusal")))
    return between.join(parts)


def unrecordable(response: dict[str, Any]) -> str | None:
    """Why a finished response must not become a recording, or None. A `completed` response whose
    assistant message is not itself complete (`status: incomplete`, as a model cut short leaves it)
    would replay as a whole answer: the model upstream makes such an answer `incomplete`, and a
    recording cannot say so, so it is not written. Nor is a `completed` one that carries an
    `error` (not null): it says both that it finished and that it failed, and a recording would
    replay only the first."""
    if response.get("error") is not None:
        return "it is completed but carries an error"
    for index, item in enumerate(response.get("output") or ()):
        if not isinstance(item, dict) or _kind(item) != "message" or item.get("role") != "assistant":
            continue
        status = item.get("status")
        if status is not None and status != "completed":
            return f"its message at output.{index} is {str(status)[:40]!r}, not completed"
    return None


def unreplayable(finished_: Finished) -> str | None:
    """Why a finished conversation cannot be replayed as the client saw it, or None. A turn plays
    its reasoning, then its items, and a message or a direct call ends the response it plays in;
    a `call` or `program` turn may say one message before its call(s) (its `preamble`). So a
    response that says a message and then makes a call or runs a program (`'Let me check. '`, then
    a `lookup` call, as models often answer; reasoning before the message) records as one turn.
    One that makes a call and then says something would replay as the call alone (its message said
    with the next answer), and one that says two messages, reasons between its message and its
    call, or refuses before a call, would replay otherwise than it went: such a conversation is not
    recorded, a refusal, not a replay that passes on other than the client saw. Read from the
    items' order after the latest user message: a call's output, which the client sends with its
    next request, stands between one response's items and the next's."""
    if finished_.unclean is not None:
        return finished_.unclean
    items = finished_.items
    anchor = max((i for i, item in enumerate(items) if _is_user(item)), default=-1)
    last: tuple[str, Item] | None = None
    reasoned = False
    """A reasoning item came after the last call, or the last message, in its response."""
    said = 0
    """The assistant messages said one after another, up to this item."""
    for index, item in enumerate(items[anchor + 1 :]):
        kind = _kind(item)
        if kind not in _REPLAYED:
            return (
                f"its item at {index} after the user message is a {kind[:60]!r}, which a recording cannot "
                "replay: the replay would leave it out"
            )
        if kind == "reasoning":
            reasoned = last is not None
            continue
        if kind == "message" and item.get("role") == "assistant":
            status = item.get("status")
            if status is not None and status != _TERMINAL_STATUS:
                return (
                    f"its message at {index} after the user message is {str(status)[:40]!r}, not completed: "
                    "a recording replays every message completed"
                )
            if last is not None and last[0] == "call":
                name = str(last[1].get("name"))[:80]
                return (
                    f"a response makes a call ({name}) and then says a message: a recording says a message "
                    "before a turn's calls, never after them, so the replay would not say it there"
                )
            said = said + 1 if last is not None and last[0] == "message" else 1
            last = ("message", item)
            reasoned = False
        elif (kind == "function_call" and _is_direct(item)) or kind == "program":
            what = "runs a program" if kind == "program" else f"calls {str(item.get('name'))[:80]}"
            if last is not None and last[0] == "message":
                why = _no_preamble(last[1], said, reasoned)
                if why is not None:
                    return f"a response {why} and then {what}: {_PREAMBLE_IS}"
            if kind == "function_call" and reasoned and last is not None and last[0] == "call":
                return (
                    f"a response makes a call, reasons, and calls {str(item.get('name'))[:80]}: a recording "
                    "plays a turn's reasoning before its calls, so the replay would split them in two responses"
                )
            last = ("call", item) if kind == "function_call" else None
            reasoned, said = False, 0
        elif kind == "function_call" and not _is_direct(item):
            continue
        else:
            last = None
            reasoned, said = False, 0
    return None


_PREAMBLE_IS = (
    "a recording says one text message (its reasoning before it) before a turn's calls or program, so the "
    "replay would not say it so"
)


def _no_preamble(message: Item, said: int, reasoned: bool) -> str | None:
    """What keeps an assistant message said right before a call or a program from being that
    turn's preamble (`said`: the messages said in a row, this one the last; `reasoned`: reasoning
    came after it), or None."""
    if said > 1:
        return f"says {said} messages"
    if not _plain_text(message):
        return "says a message that is not text alone (a refusal)"
    content = message.get("content")
    if isinstance(content, list) and not content:
        return "says a message with no content parts (a preamble replays as one text part)"
    if isinstance(content, list) and any(part.get("annotations") for part in content):
        return "says a message whose text carries annotations (a preamble replays its text alone)"
    if message.get("phase") not in (None, "commentary"):
        return f"says a message of phase {str(message.get('phase'))[:40]!r} (a preamble replays as commentary)"
    if reasoned:
        return "says a message, reasons,"
    return None


def _plain_text(message: Item) -> bool:
    """A message of text alone: its content a string, or only `output_text` parts."""
    content = message.get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(part, dict) and part.get("type") == "output_text" for part in content
    )


def _preamble_at(items: list[Item], index: int) -> bool:
    """Whether the assistant message at `index` is said right before a direct call or a program
    (the turn's `preamble`: `unreplayable` refused the conversations where it could not be one)."""
    if index + 1 >= len(items) or not _plain_text(items[index]):
        return False
    after = items[index + 1]
    return _kind(after) == "program" or (_kind(after) == "function_call" and _is_direct(after))


_REPLAYED = frozenset({"message", "reasoning", "function_call", "function_call_output", "program", "program_output"})
"""The output item kinds a recording replays (`scenario_from`); a conversation holding another (a
custom tool's call, a hosted tool's call such as `web_search_call`) is not recorded: before, such
an item was left out, and [message, custom_tool_call] replayed as [message]."""


def match_context(create: dict[str, Any]) -> Given:
    """What `match.instructions`, `history`, `outputs` and `tool_choice` see in a create request's
    body (the recording proxy's question: does a scenario play this conversation?)."""
    items = items_of(create.get("input"))
    messages = [(i, item) for i, item in enumerate(items) if _kind(item) == "message"]
    latest = max((i for i, item in messages if item.get("role") == "user"), default=-1)
    instructions = create.get("instructions")
    calls = {str(item["call_id"]): item for item in items if _kind(item).endswith("_call") and "call_id" in item}
    outputs = []
    for item in items[latest + 1 :]:
        if _kind(item).endswith("_output") and "call_id" in item:
            call = calls.get(str(item["call_id"]))
            name = "" if call is None else str(call.get("name") or _kind(call).removesuffix("_call"))
            output = item.get("output")
            if isinstance(output, list) and all(isinstance(part, dict) and "text" in part for part in output):
                text = user_text({"content": output})  # content parts
            else:
                text = output if isinstance(output, str) else json.dumps(output)
            outputs.append(ToolOutput(name, text))
    choice = create.get("tool_choice")
    return Given(
        instructions=(
            *([instructions] if isinstance(instructions, str) and instructions else []),
            *(user_text(item) for _, item in messages if item.get("role") in ("system", "developer")),
        ),
        history=tuple(
            Said(str(item["role"]), user_text(item))
            for i, item in messages
            if i < latest and item.get("role") in ("user", "assistant")
        ),
        outputs=tuple(outputs),
        tool_choice="auto" if choice is None else choice,
    )


def _is_direct(call: Item) -> bool:
    caller = call.get("caller")
    return not (isinstance(caller, dict) and caller.get("type") == "program")


# ---- following conversations ----------------------------------------------------------------------


@dataclass
class Finished:
    """A conversation a response ended: its items, and which response produced each output item."""

    items: list[Item]
    tools: list[str]
    produced_by: dict[str, str]
    """Output item id -> the id of the response that produced it."""
    unclean: str | None = None
    """Why a response before the last one cannot be replayed as it went (`Tape.exchange`), or None."""


_LINK_BYTES = 16
_Key = bytes
"""A digest (`Tape.bytes` shadows the name in the class)."""
_NO_USER = bytes(_LINK_BYTES)
"""The conversation key before any user message (`_conversation`)."""


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=_LINK_BYTES).digest()


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _conversation(key: bytes, item: Item) -> bytes:
    """The conversation key after `item`: a digest of the texts of the user messages so far, in
    order (the client resends them as it sent them; the other items it may resend otherwise)."""
    if not _is_user(item):
        return key
    return _digest(key + _digest(_encoded(user_text(item))))


def _said_link(key: bytes, text: str) -> bytes:
    """What links an assistant message's text, said in the conversation of `key`, to its response."""
    return _digest(key + _digest(_encoded(text)))


def _said_forms(output: list[Item]) -> set[str]:
    """The texts a client may resend a response's assistant messages as: each message's parts
    joined with nothing between (`said_text`, as the SDKs' `output_text` joins them) or by line
    breaks (`user_text`), and the response's `output_text` whole (every message's `output_text`
    parts joined with nothing between), resent as one EasyInputMessage."""
    messages = [item for item in output if _kind(item) == "message" and item.get("role") == "assistant"]
    forms = {form for item in messages for form in (said_text(item), user_text(item))}
    forms.add(
        "".join(
            _text(part.get("text"))
            for item in messages
            if isinstance(item.get("content"), list)
            for part in item["content"]
            if isinstance(part, dict) and part.get("type") == "output_text"
        )
    )
    forms.discard("")
    return forms


@dataclass
class Tape:
    """Follows conversations through the exchanges a recording server proxies.

    Keeps the items of the latest responses (at most `keep`, and `max_bytes` of their JSON text,
    each history counted in full though a chain's share their items) so `previous_response_id`
    continues them; a `store: false` replay needs nothing kept, as it resends the whole history.
    What links a resent item to the unclean response it came from is kept as ids and digests of a
    fixed size, at most `keep * 8` of each, whatever the texts' length. None of it is a cache: it
    decides what is recorded, so `POST /_emulator/reset` keeps it (forgetting an unclean response
    would record a conversation continued from it)."""

    keep: int = 10_000
    max_bytes: int = 64 * 2**20
    bytes: int = 0
    _histories: OrderedDict[str, tuple[list[Item], int, _Key]] = field(default_factory=OrderedDict)
    """Response id -> its conversation's items, their size, and the conversation key (`_conversation`)."""
    _produced_by: OrderedDict[str, str] = field(default_factory=OrderedDict)
    _unclean: OrderedDict[str, tuple[str, _Key]] = field(default_factory=OrderedDict)
    """Response id -> why it, or one before it in its conversation, cannot be replayed as it went
    (`unrecordable`, not `completed`, or an official SDK raised on its stream: `refused`), and the
    key of the conversation it answered: a conversation continued from it is not recorded."""
    _called_by: OrderedDict[str, str] = field(default_factory=OrderedDict)
    """Call id -> the id of the response whose output item carried it (a call, a program): a
    `store: false` client may resend a call without its item id (or only its output), and is
    linked to the response by it, when the user messages before it are that response's."""
    _unclean_said: OrderedDict[_Key, str] = field(default_factory=OrderedDict)
    """A digest of an assistant message's text an unclean response said (in each form a client
    resends it, `_said_forms`) and of its conversation's key -> why it is unclean: a client may
    resend the message without its item id (an EasyInputMessage, `{"role": "assistant", ...}`).
    The key keeps a common text (`'OK'`) said in another conversation from linking."""

    def exchange(
        self, request: dict[str, Any], response: dict[str, Any], refused: str | None = None
    ) -> Finished | None:
        """Note one create and its final response; the conversation's items if it ended there.
        `refused`: why an official SDK raised on the response's stream; it is noted as unclean
        (its items linked to it, so a conversation continued from it is not recorded), and its
        conversation never ends here."""
        previous = request.get("previous_response_id")
        given = items_of(request.get("input"))
        if isinstance(previous, str):
            found = self._histories.get(previous)
            if found is None:
                return None  # the chain began before this server saw it: nothing complete to write
            before, size, key = found
            history = [*before, *given]
        else:
            history, size, key = given, 0, _NO_USER
        output = [dict(item) for item in response.get("output") or () if isinstance(item, dict)]
        items = [*history, *output]
        response_id = response.get("id")
        found_unclean = self._unclean.get(previous) if isinstance(previous, str) else None
        unclean = found_unclean[0] if found_unclean is not None else None
        for item in given:  # a `store: false` conversation resends the items earlier responses produced
            if unclean is None:
                unclean = self._resent_unclean(item, key)
            key = _conversation(key, item)
        why = refused
        if unclean is None and why is None and not finished(response):
            why = unrecordable(response)
            if why is None and response.get("status") != _TERMINAL_STATUS:
                why = f"it is {str(response.get('status'))[:40]!r}"
        if unclean is None and why is not None:
            unclean = (
                f"its response {str(response_id)[:80]} before the last one: {why}; a recording replays "
                "every response of a conversation completed, without an error"
            )
        if isinstance(response_id, str) and unclean is not None:
            self._unclean[response_id] = (unclean, key)
            self._unclean.move_to_end(response_id)
            while len(self._unclean) > self.keep:
                self._unclean.popitem(last=False)
            for text in _said_forms(output):
                self._unclean_said[_said_link(key, text)] = unclean
            while len(self._unclean_said) > self.keep * 8:
                self._unclean_said.popitem(last=False)
        if isinstance(response_id, str):
            size += len(json.dumps([*given, *output], default=str)) + 64 * len(items)
            old = self._histories.pop(response_id, None)
            self.bytes -= old[1] if old is not None else 0
            if size <= self.max_bytes:
                self._histories[response_id] = (items, size, key)
                self.bytes += size
            for item in output:
                if isinstance(item.get("id"), str):
                    self._produced_by[item["id"]] = response_id
                call_id = item.get("call_id")
                if isinstance(call_id, str) and call_id and not _kind(item).endswith("_output"):
                    self._called_by[call_id] = response_id  # a call's or a program's, not an output's
            while len(self._histories) > self.keep or self.bytes > self.max_bytes:
                self.bytes -= self._histories.popitem(last=False)[1][1]
            while len(self._produced_by) > self.keep * 8:
                self._produced_by.popitem(last=False)
            while len(self._called_by) > self.keep * 8:
                self._called_by.popitem(last=False)
        if refused is not None or not finished(response):
            return None
        tools = sorted({t["name"] for t in request.get("tools") or () if _is_function_tool(t)})
        ids = (item.get("id") for item in items)
        return Finished(
            items,
            tools,
            {i: self._produced_by[i] for i in ids if isinstance(i, str) and i in self._produced_by},
            unclean,
        )

    def _resent_unclean(self, item: Item, key: _Key) -> str | None:
        """Why the earlier response a resent item comes from cannot be replayed as it went (None:
        it can, or it is not known): linked by the item's id; by the call id of a call, a program
        or their output, and by the text of an assistant message, when the user messages before
        the item (`key`) are those that response answered (a call id or a common text, `'OK'`,
        said in another conversation is not a link)."""
        made = self._produced_by.get(item["id"]) if isinstance(item.get("id"), str) else None
        if made is not None and made in self._unclean:
            return self._unclean[made][0]
        made = self._called_by.get(item["call_id"]) if isinstance(item.get("call_id"), str) else None
        if made is not None and (found := self._unclean.get(made)) is not None and found[1] == key:
            return found[0]
        if self._unclean_said and _kind(item) == "message" and item.get("role") == "assistant":
            for text in {said_text(item), user_text(item)} - {""}:
                if (why := self._unclean_said.get(_said_link(key, text))) is not None:
                    return why
        return None


def _is_function_tool(tool: Any) -> bool:
    return isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("name"), str)


def finished(response: dict[str, Any]) -> bool:
    """A completed response with a final assistant message and no call left to answer."""
    if response.get("status") != _TERMINAL_STATUS:
        return False
    output = [item for item in response.get("output") or () if isinstance(item, dict)]
    if any(_kind(item) == "function_call" for item in output):
        return False
    return any(_kind(item) == "message" and item.get("role") == "assistant" for item in output)


# ---- the scenario -----------------------------------------------------------------------------------


def full_match(text: str) -> str:
    """A regular expression that `re.search` finds in exactly `text` (only its specials escaped)."""
    return "^" + _REGEX_SPECIAL.sub(r"\\\1", text) + "$"


def _raw(text: str, before_expression: bool = False) -> str:
    """`text` as a template that renders to itself: Jinja's openers kept literal by a raw block
    (also a trailing `{` that an expression placed right after it would turn into one). A text
    that itself says `endraw` would end such a block early (and an unbalanced one would not
    compile): there each `{` is written as an expression that renders it, which holds for any text."""
    if not _JINJA.search(text) and not (before_expression and text.endswith("{")):
        return text
    if "endraw" in text:
        return text.replace("{", "{{ '{' }}")
    return "{% raw %}" + text + "{% endraw %}"


def _raw_values(value: Any) -> Any:
    if isinstance(value, str):
        return _raw(value)
    if isinstance(value, list):
        return [_raw_values(v) for v in value]
    if isinstance(value, dict):
        return {k: _raw_values(v) for k, v in value.items()}
    return value


def _parse(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text


def _output_text(item: Item) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    return "".join(_text(p.get("text")) for p in output or () if isinstance(p, dict))


def _path(base: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    if isinstance(key, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) and key not in _JINJA_WORDS:
        return f"{base}.{key}"
    return f"{base}[{json.dumps(key, ensure_ascii=False)}]"


_JINJA_WORDS = frozenset({"items", "keys", "values", "get", "pop", "update", "copy", "and", "or", "not", "in", "is"})


def _scalars(value: Any, base: str, depth: int = 0) -> list[tuple[str, str]]:
    """(template expression, how it renders) for each string and number in a JSON value."""
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, str | int | float):
        return [(base, str(value))]
    if depth >= 4:
        return []
    pairs: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            pairs.extend(_scalars(inner, _path(base, key), depth + 1))
    elif isinstance(value, list):
        for index, inner in enumerate(value[:50]):
            pairs.extend(_scalars(inner, _path(base, index), depth + 1))
    return pairs


def template_for(text: str, sources: list[tuple[str, str]]) -> str:
    """`text` as a template: each verbatim, whole-word occurrence of a source's rendering becomes
    `{{ expression }}`; the rest is literal. `sources` are (expression, rendering), first wins."""
    candidates: dict[str, str] = {}
    for expression, rendered in sources:
        if rendered.strip() and rendered not in candidates:
            candidates[rendered] = expression
    spans: list[tuple[int, int, str]] = []
    for rendered in sorted(candidates, key=len, reverse=True):
        if len(rendered) < 2 and not rendered.isdigit():
            continue
        pattern = re.escape(rendered)
        if rendered[0].isalnum():
            pattern = r"(?<![\w.])" + pattern
        if rendered[-1].isalnum():
            pattern += r"(?![\w]|\.\d)"
        for found in re.finditer(pattern, text):
            start, end = found.span()
            if all(end <= s or start >= e for s, e, _ in spans):
                spans.append((start, end, candidates[rendered]))
    if not spans:
        return _raw(text)
    spans.sort()
    pieces, at = [], 0
    for start, end, expression in spans:
        pieces.append(_raw(text[at:start], before_expression=True))
        pieces.append("{{ " + expression + " }}")
        at = end
    pieces.append(_raw(text[at:]))
    return "".join(pieces)


def _sources(program_result: str | None, outputs: dict[str, str]) -> list[tuple[str, str]]:
    """What a final message may quote, as (template expression, rendering), most specific first."""
    sources: list[tuple[str, str]] = []
    if program_result is not None:
        sources.append(("result", program_result))
        data = _parse(program_result)
        if isinstance(data, dict | list):
            sources.extend(_scalars(data, "data"))
    for name, raw in outputs.items():
        base = _path("outputs", name)
        sources.extend(_scalars(_parse(raw), base))
    return sources


def _turn(kind: str, value: Any, reasoning: str | None, preamble: str | None = None) -> dict[str, Any]:
    turn: dict[str, Any] = {}
    if reasoning is not None:
        turn["reasoning"] = reasoning
    if preamble is not None:
        turn["preamble"] = preamble
    turn[kind] = value
    return turn


@dataclass
class _Run:
    """A message turn in the making: the texts of one response's messages said one after another,
    the reasoning summaries before and between them, and what they may quote."""

    turn: dict[str, Any]
    texts: list[str]
    by: str | None
    thought: list[str]
    sources: list[tuple[str, str]]


def scenario_from(finished_: Finished, *, model: str | None = None) -> dict[str, Any] | None:
    """The scenario that replays a finished conversation, or None when it has no user message.

    The turns are what the model did after the latest user message: programs (their tool calls
    and output are the emulator's to produce again), direct calls, and the final message."""
    items = finished_.items
    anchor = max((i for i, item in enumerate(items) if _is_user(item)), default=-1)
    if anchor < 0:
        return None
    text = user_text(items[anchor])
    turns: list[dict[str, Any]] = []
    reasoning: str | None = None
    program_result: str | None = None
    program_output_by: str | None = None
    open_program: dict[str, Any] | None = None
    calls: dict[str, str] = {}
    outputs: dict[str, str] = {}
    pending_calls: list[dict[str, Any]] = []
    runs: list[_Run] = []
    """The message turns, each made of one response's messages said one after another: their texts
    are joined and templated once, at the end (joining each into the turn as it came, and
    templating the whole again, was quadratic: 20,000 messages took 2.5 s)."""

    preamble: str | None = None
    """The message said right before the next call or program, in its response: that turn's."""

    def flush_calls() -> None:
        nonlocal reasoning, preamble
        if pending_calls:
            value: Any = pending_calls[0] if len(pending_calls) == 1 else list(pending_calls)
            turns.append(_turn("call", value, reasoning, preamble))
            reasoning, preamble = None, None
            pending_calls.clear()

    def close_program(next_by: str | None) -> None:
        nonlocal open_program
        if open_program is not None:
            if program_output_by is not None and next_by is not None and program_output_by != next_by:
                open_program["with_output"] = False
            open_program = None

    after = items[anchor + 1 :]
    for at, item in enumerate(after):
        kind = _kind(item)
        by = finished_.produced_by.get(item.get("id") or "")
        if kind == "reasoning":
            flush_calls()
            summary = [str(p.get("text", "")) for p in item.get("summary") or () if isinstance(p, dict)]
            if summary:
                reasoning = "\n\n".join(summary)
        elif kind == "program":
            flush_calls()
            close_program(by)
            open_program = _turn("program", _raw(str(item.get("code", ""))), reasoning, preamble)
            turns.append(open_program)
            reasoning, preamble, program_result, program_output_by = None, None, None, None
        elif kind == "program_output":
            program_result = str(item.get("result", ""))
            program_output_by = by
        elif kind == "function_call" and _is_direct(item):
            close_program(by)
            calls[str(item.get("call_id"))] = str(item.get("name"))
            arguments = _parse(item.get("arguments", "{}"))
            pending_calls.append({"name": item.get("name"), "arguments": _raw_values(arguments)})
        elif kind == "function_call_output":
            flush_calls()
            name = calls.get(str(item.get("call_id")))
            if name is not None:
                outputs[name] = _output_text(item)
        elif kind == "message" and item.get("role") == "assistant":
            flush_calls()
            close_program(by)
            message = said_text(item)
            if _preamble_at(after, at):  # said before the call(s) or program that follow it
                preamble = template_for(message, _sources(program_result, outputs))
                continue
            refused = all(
                isinstance(p, dict) and p.get("type") == "refusal" for p in item.get("content") or ()
            ) and bool(item.get("content"))
            if refused:
                turns.append(_turn("refusal", _raw(message), reasoning))
            elif runs and turns and turns[-1] is runs[-1].turn and runs[-1].by == by:
                # Another message of the same response: a client's `output_text` joins a response's
                # messages with nothing between, and a turn is one message (a second message turn
                # was never played: 'Hello ' and 'world' replayed as 'Hello ').
                runs[-1].texts.append(message)
                if reasoning is not None:
                    runs[-1].thought.append(reasoning)
            else:
                turns.append({})
                runs.append(
                    _Run(
                        turns[-1],
                        [message],
                        by,
                        [] if reasoning is None else [reasoning],
                        _sources(program_result, outputs),
                    )
                )
            reasoning = None
    flush_calls()
    for run in runs:
        if run.thought:
            run.turn["reasoning"] = "\n\n".join(run.thought)
        run.turn["message"] = template_for("".join(run.texts), run.sources)
    if not turns:
        return None
    scenario: dict[str, Any] = {
        "description": f"Recorded from {model}." if model else "Recorded.",
        "priority": RECORDED_PRIORITY,
        "match": {"input": full_match(text)},
        "turns": turns,
    }
    if finished_.tools:
        scenario["match"]["tools"] = list(finished_.tools)
    return scenario


def file_name(scenario: dict[str, Any]) -> str:
    """`recorded__<the message, slugged>__<hash of the match>.yaml`: the same match, the same file."""
    match = scenario["match"]
    pattern = str(match.get("input") or "")
    slug = re.sub(r"[^a-z0-9]+", "_", pattern.strip("^$").replace("\\", "").lower()).strip("_")[:48].strip("_")
    digest = hashlib.sha256(json.dumps(match, sort_keys=True).encode("utf-8")).hexdigest()[:8]
    return f"recorded__{slug or 'conversation'}__{digest}.yaml"


# ---- YAML for people ----------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)  # lists indented under their key, as in fixtures/


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


def _list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.SequenceNode:
    flow = all(isinstance(v, str) and "\n" not in v for v in value) and sum(len(v) for v in value) < 80
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)


_Dumper.add_representer(str, _string)
_Dumper.add_representer(list, _list)


def readable_yaml(value: Any) -> str:
    """YAML for people: keys in the order given, multi-line strings as block scalars (a pytest
    cassette's `scenarios:` list is written this way too)."""
    return yaml.dump(
        value, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100_000, default_flow_style=False
    )


def to_yaml(scenario: dict[str, Any]) -> str:
    """The scenario as YAML: keys in the order given, multi-line strings as block scalars."""
    header = "# Recorded by ptc-emulator serve --record. Edit freely: it is an ordinary scenario file.\n"
    return header + readable_yaml(scenario)
