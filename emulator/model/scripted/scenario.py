"""Scenario files: what the scripted model does for requests that match.

One scenario per YAML file, named `group__case.yaml`:

    name: inventory__sku_123                  # optional; defaults to the file name
    priority: 0                               # higher wins when several match
    match:
      input: '(?i)compare inventory with demand for (?P<sku>sku_\\w+)'   # re.search, latest user message
      tools: [get_inventory, get_demand]      # the request must declare these function tools
      # also: model, metadata, instructions, history, outputs, tool_choice (see `Match`)
    turns:
      - reasoning: Both lookups are independent.   # optional, on any turn
        program: |
          const [s, d] = await Promise.all([tools.get_inventory({sku: {{ sku }}}),
                                            tools.get_demand({sku: {{ sku }}})]);
          text(JSON.stringify({sku: s.sku, shortage: Math.max(d.requested_units - s.available_units, 0)}));
      - message: "Shortage for {{ data.sku }}: {{ data.shortage }} units."

Turn kinds: `program`, `call` (direct function calls), `search` (tool search: see
docs/tool-search.md), `message`, `refusal`, `error`. A `call` or `program` turn may say a message
before its call(s) in the same response (`preamble: Let me look that up.`). The
templates are Jinja2; in `program` code and `call` arguments every `{{ value }}` is inserted
JSON-encoded, never spliced raw. See `script.py` for the variables a template sees.
"""

from __future__ import annotations

import copy
import difflib
import errno
import functools
import json
import math
import os
import re
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

import yaml
from jinja2 import StrictUndefined, TemplateError
from pydantic import BeforeValidator, Field, ValidationError, field_validator, model_validator

from ptc_emulator.emulator import jsontext, messages
from ptc_emulator.emulator.caches import PROCESS, Memo
from ptc_emulator.emulator.errors import EmulatorError
from ptc_emulator.emulator.model.runtime import HostedScript
from ptc_emulator.emulator.model.scripted import templating
from ptc_emulator.emulator.patterns import (
    MatchingTooCostly,
    Pattern,
    PatternError,
    PatternTooCostly,
    compile_pattern,
    group_names,
    metered,
    spend,
)
from ptc_emulator.emulator.wire.items import MAX_DEPTH, WireModel, check_depth

__all__ = [
    "CallSpec",
    "ErrorSpec",
    "Fault",
    "Match",
    "NearMiss",
    "Scenario",
    "ScenarioError",
    "SearchSpec",
    "ScenarioRegistry",
    "Turn",
    "load_scenario",
    "TooManyNodes",
    "load_yaml_without_aliases",
]


class ScenarioError(ValueError):
    """A scenario file or dict that cannot be used, with the reason."""


def _not_bool(value: Any) -> Any:
    """A number field's value, refused when it is `true` or `false` (the loader reads a scenario
    leniently, where a boolean would pass as 1 or 0: `latency_ms: true` delayed 1 ms unsaid)."""
    if isinstance(value, bool):
        raise ValueError(messages.scenario_number_not_bool(value))
    return value


Int = Annotated[int, BeforeValidator(_not_bool)]
Float = Annotated[float, BeforeValidator(_not_bool)]


class CallSpec(WireModel):
    name: str
    """The tool: a function or custom tool's name, or `shell`, `apply_patch`, `local_shell`."""
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    """An object (its strings are templates) or a template that renders to a JSON object: a
    function's arguments, a shell call's `{commands, timeout_ms?, max_output_length?}`, an
    apply_patch operation `{type, path, diff?}`, a local_shell action `{command, env?, ...}`."""
    input: str | None = None
    """A custom tool call's input (a template)."""


class SearchSpec(WireModel):
    """A tool search turn: loads deferred tools before a later turn calls them."""

    query: str | None = None
    """Ranked with BM25 over the deferred tools' names and descriptions (a template)."""
    load: list[str] | None = None
    """Exactly these deferred tools, by qualified name (`shipping.get_delivery_eta`)."""
    limit: Int = Field(default=5, ge=1, le=100)
    """At most this many tools for a `query`."""
    arguments: dict[str, Any] | None = None
    """The `tool_search_call.arguments` as the model writes them; default `{"query": ...}` or
    `{"paths": [...]}`. With `execution: "client"` they must fit the tool's `parameters`."""

    @model_validator(mode="after")
    def _one_way(self) -> SearchSpec:
        if (self.query is None) == (self.load is None):
            raise ValueError("a search needs exactly one of query, load")
        return self


class ErrorSpec(WireModel):
    status: Int = Field(default=400, ge=400, le=599)
    message: str
    type: str = "invalid_request_error"
    code: str | None = None
    param: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a valid HTTP header name")
            if name.lower() in _FRAMING_HEADERS:
                raise ValueError(
                    f"header {name!r} frames the HTTP message itself, which the server writes: "
                    "a scripted value would break the response"
                )
            if not _HEADER_VALUE.fullmatch(text):
                raise ValueError(f"the value of header {name!r} holds a line break or a character HTTP cannot carry")
        return value


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}")
_FRAMING_HEADERS = frozenset(
    (
        "content-length",
        "transfer-encoding",
        "content-encoding",
        "connection",
        "keep-alive",
        "upgrade",
        "te",
        "trailer",
        "proxy-connection",
    )
)
"""Headers an error turn may not script: they say how the message is framed or encoded, and a
value that disagrees with the body the server writes broke the response (`content-length: 5`
cut the connection mid-body; `content-encoding: gzip` made a client fail to decode the JSON)."""
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]{0,4096}")


class Fault(WireModel):
    """Failure injected into one turn (see the README's "Testing your agent")."""

    http_error: Literal[429, 500, 503] | None = None
    retry_after: Float | None = Field(default=None, ge=0, le=86_400, allow_inf_nan=False)
    should_retry: bool | None = None
    times: Int = Field(default=1, ge=1, le=1_000_000)
    """How many requests in a row the HTTP error answers before the turn plays normally."""
    latency_ms: Int = Field(default=0, ge=0, le=600_000)
    cut_stream_after: Int | None = Field(default=None, ge=0)
    """Close a streamed response after this many events, without a terminal event."""
    program_timeout: bool = False
    program_incomplete: str | None = None
    response_incomplete: Literal["max_output_tokens", "content_filter"] | None = None

    @model_validator(mode="after")
    def _with_http_error(self) -> Fault:
        # Each of these shapes the HTTP error alone: without one, it would be dropped unsaid (a
        # test of the client's retries would pass with no failure ever injected).
        if self.http_error is None:
            given = [f for f in ("times", "retry_after", "should_retry") if f in self.model_fields_set]
            if given:
                raise ValueError(f"{given[0]} goes with http_error: it says how the HTTP error is answered")
        return self


class McpCallSpec(WireModel):
    """A direct MCP call the emulator makes itself (the hosted model's `mcp_call`)."""

    server_label: str
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class CodeInterpreterCallSpec(WireModel):
    """A direct code interpreter call; its result comes from the scenario's `hosted.code_interpreter`."""

    code: str


class ShellCallSpec(WireModel):
    """A direct shell call in the request's hosted container (`shell` with `container_auto` or
    `container_reference`): the server runs it, each command's result comes from the scenario's
    `hosted.shell`, and the output carries `shell_call` and `shell_call_output`."""

    commands: list[str] = Field(min_length=1)
    timeout_ms: Int | None = None
    max_output_length: Int | None = None


KINDS = ("program", "call", "search", "mcp", "code_interpreter", "shell", "message", "refusal", "error")


class Turn(WireModel):
    program: str | None = None
    call: CallSpec | list[CallSpec] | None = None
    search: SearchSpec | None = None
    mcp: McpCallSpec | None = None
    """A direct MCP call, made by the emulator in the same response (or paused on its approval)."""
    code_interpreter: CodeInterpreterCallSpec | None = None
    shell: ShellCallSpec | None = None
    """A direct call of a hosted shell, run by the server in the same response."""
    message: str | None = None
    refusal: str | None = None
    error: ErrorSpec | None = None
    reasoning: str | None = None
    """Emit a reasoning item with this summary before the turn's items."""
    with_output: bool = True
    """For a program turn: play the next turn in the same response as the program_output."""
    preamble: str | None = None
    """For a call or program turn: a message (a template, as `message`) said before its call(s) or
    its program, in the same response, as models often begin (`Let me look that up.`): the output
    is the turn's reasoning, this message (`phase: commentary`), then the call(s) or program."""
    on_program_error: str | None = None
    """For a message turn: what the model answers instead when the program before it failed (its
    program_output `incomplete`: a JavaScript exception, a limit, a fault); without it the answer
    is `The program did not complete: <error>`."""
    fault: Fault | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Turn:
        kinds = [k for k in KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"a turn needs exactly one of {', '.join(KINDS)}")
        if self.on_program_error is not None and self.message is None:
            raise ValueError("on_program_error goes with a message turn: what is said after a failed program")
        if self.preamble is not None and kinds[0] not in ("call", "program"):
            raise ValueError(messages.scenario_preamble_misplaced(kinds[0]))
        if self.fault is not None and kinds[0] != "program":
            # it fails the turn's program: on another turn it would inject nothing, and the journal
            # would still say it did (a test of the agent's handling of a failed program passes)
            fault = self.fault
            given = ["program_timeout"] if fault.program_timeout else []
            given += ["program_incomplete"] if fault.program_incomplete is not None else []
            if given:
                raise ValueError(messages.scenario_program_fault_misplaced(given[0], kinds[0]))
        return self

    @functools.cached_property
    def kind(self) -> str:
        return next(k for k in KINDS if getattr(self, k) is not None)

    @property
    def calls(self) -> list[CallSpec]:
        if self.call is None:
            return []
        return self.call if isinstance(self.call, list) else [self.call]


def _pattern(value: str | None) -> str | None:
    """A field's regular expression, refused when it does not compile (as the scenario is added),
    when it names two groups alike (RE2 allows it, but only the first would bind the variable: a
    text that matched the other left it undefined), or names one as a variable or global the
    templates already have (`RESERVED_NAMES`: one of the two would hide the other)."""
    if value is not None:
        try:
            compile_pattern(value)
        except PatternError as e:
            raise ValueError(f"invalid regular expression {value!r}: {e}") from e
        seen: set[str] = set()
        for name in group_names(value):
            if name in RESERVED_NAMES:
                raise ValueError(messages.scenario_group_name_reserved(name, value))
            if name in seen:
                raise ValueError(messages.scenario_group_named_twice(name, value))
            seen.add(name)
    return value


class HistoryMatch(WireModel):
    """A message of the conversation before the latest user message (`match.history`)."""

    text: str
    """A regular expression searched in the message's text; named groups become variables."""
    role: Literal["user", "assistant"] | None = None
    """Only messages of this role; either when left out."""

    @field_validator("text")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return _pattern(value)


class OutputMatch(WireModel):
    """A tool output the client sent back since the latest user message (`match.outputs`): for a
    direct call or a program's, of any tool kind."""

    tool: str | None = None
    """The tool whose call it answers, by the name a scenario's `call` uses (a function or custom
    tool's name, `shell`, `apply_patch`, `local_shell`); any tool when left out."""
    output: str | None = None
    """A regular expression searched in the output's text; named groups become variables."""
    json_: Any = Field(default=None, alias="json")
    """What the output, parsed as JSON, must have: an object's entries (it may have more),
    recursively; anything else equal."""

    @field_validator("output")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return _pattern(value)

    @model_validator(mode="after")
    def _says_something(self) -> OutputMatch:
        if self.tool is None and self.output is None and "json_" not in self.model_fields_set:
            raise ValueError("an output matcher needs at least one of tool, output, json")
        _ = self.json_values  # counted as the scenario is read, kept with it (as `Match.compiled`)
        return self

    @functools.cached_property
    def json_values(self) -> int:
        """How many values `json` holds (`jsontext.values`), 0 when the entry gives none: counted
        once when the scenario is read. Each request counted them again for every entry it reached
        (six scenarios of a 1,000,000-value `json`, four requests at once, held every client 0.5 s)."""
        return jsontext.values(self.json_) if "json_" in self.model_fields_set else 0


TOOL_CHOICE_MODES = ("auto", "none", "required")
METADATA_KEY_CHARS = 64
"""The longest `metadata` key a request may carry (and so a scenario's `match.metadata`)."""
METADATA_VALUE_CHARS = 512
"""The longest `metadata` value a request may carry (and so a scenario's `match.metadata`)."""
METADATA_KEYS = 16
"""The most `metadata` keys a request may carry (and so a scenario's `match.metadata`)."""
MAX_MATCH_TOOLS = 128
"""The most tools a scenario's `match.tools` may name: each request that reaches the scenario looks
each one up among its own tools (`TOOL_LOOKUP_COST`), on the event loop for a short request;
40 scenarios of 240,000 names held every client 0.24-0.74 s at each request they did not match."""
TOOL_LOOKUP_COST = 5
"""What looking up one `match.tools` name among a request's tools costs, in the units of a match's
budget (`patterns.MATCH_BUDGET`: about 8 ns each)."""


class Match(WireModel):
    input: str | None = None
    """A regular expression searched in the latest user message; named groups become variables."""
    tools: list[str] = Field(default_factory=list)
    """Tools the request must declare, by name: function and custom tools' names, `shell`,
    `apply_patch`, `local_shell`."""
    model: str | None = None
    """A regular expression the request's `model` must match in full."""
    metadata: dict[str, str] = Field(default_factory=dict)
    """Metadata entries the request must carry."""
    instructions: str | None = None
    """A regular expression searched in the request's `instructions` and in each system or developer
    message of the conversation: one of them must match; named groups become variables."""
    history: list[HistoryMatch] = Field(default_factory=list)
    """Messages the conversation must have before the latest user message: each entry is matched by
    one of them, in any order."""
    outputs: list[OutputMatch] = Field(default_factory=list)
    """Tool outputs the client must have sent back since the latest user message: each entry is
    matched by one of them."""
    tool_choice: str | dict[str, Any] | None = None
    """The request's `tool_choice` (`auto` when it sends none): `auto`, `none` or `required`, or
    the entries of an object choice (`{type: function, name: get_inventory}`)."""

    @field_validator("input", "model", "instructions")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return _pattern(value)

    @field_validator("tools")
    @classmethod
    def _few_tools(cls, value: list[str]) -> list[str]:
        if len(value) > MAX_MATCH_TOOLS:
            raise ValueError(messages.scenario_match_too_many_tools(len(value), MAX_MATCH_TOOLS))
        return value

    @field_validator("metadata")
    @classmethod
    def _carried(cls, value: dict[str, str]) -> dict[str, str]:
        """Entries a request can carry (16 keys, keys of 64 characters, values of 512): a request
        carrying more or a longer one is refused, so a scenario asking for it could never match."""
        if len(value) > METADATA_KEYS:
            raise ValueError(messages.scenario_metadata_too_many_keys(len(value), METADATA_KEYS))
        for key, item in value.items():
            if len(key) > METADATA_KEY_CHARS:
                raise ValueError(messages.scenario_metadata_key_too_long(key, METADATA_KEY_CHARS))
            if len(item) > METADATA_VALUE_CHARS:
                raise ValueError(messages.scenario_metadata_value_too_long(key, METADATA_VALUE_CHARS))
        return value

    @model_validator(mode="after")
    def _named_once(self) -> Match:
        """A group named in two fields' patterns is refused: each would bind the variable, and
        one capture would silently hide the other."""
        fields = [("match.input", self.input), ("match.model", self.model), ("match.instructions", self.instructions)]
        fields += [(f"match.history.{i}.text", h.text) for i, h in enumerate(self.history)]
        fields += [(f"match.outputs.{i}.output", o.output) for i, o in enumerate(self.outputs)]
        named: dict[str, str] = {}
        for where, pattern in fields:
            for name in dict.fromkeys(group_names(pattern) if pattern is not None else []):
                if name in named:
                    raise ValueError(messages.scenario_group_in_two_fields(name, named[name], where))
                named[name] = where
        return self

    @model_validator(mode="after")
    def _kept(self) -> Match:
        _ = self.compiled  # built as the scenario is read (in a worker thread), kept with it
        return self

    def patterns(self) -> list[str]:
        """Every pattern of the matchers, in order (one given twice, twice)."""
        given = [self.input, self.model, self.instructions, *(h.text for h in self.history)]
        return [p for p in [*given, *(o.output for o in self.outputs)] if p is not None]

    @functools.cached_property
    def compiled(self) -> dict[str, Pattern]:
        """The matchers' patterns, compiled once (with their fast matchers) when the scenario is
        read: a match never compiles, nor depends on the shared cache of `compile_pattern`, which
        any client's patterns can flush (600 scenarios of distinct patterns recompiled all of
        them at every request that matched none)."""
        return {p: compile_pattern(p).ready() for p in self.patterns()}

    @field_validator("tool_choice")
    @classmethod
    def _choice(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        if isinstance(value, str) and value not in TOOL_CHOICE_MODES:
            raise ValueError(
                f"tool_choice is one of {', '.join(TOOL_CHOICE_MODES)}, or an object such as "
                f"{{type: function, name: {value}}}, not {value!r}"
            )
        if isinstance(value, dict) and not isinstance(value.get("type"), str):
            raise ValueError("an object tool_choice needs its type (function, custom, allowed_tools, ...)")
        return value


class Scenario(WireModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    description: str | None = None
    priority: Int = 0
    match: Match = Field(default_factory=Match)
    turns: list[Turn] = Field(min_length=1)
    scope: str | None = None
    """Visible only to requests that carry this scope (header or metadata key); None: to all."""
    strict_contract: bool | None = None
    """Reject (400) tool outputs and program arguments that violate the tools' schemas."""
    hosted: HostedScript | None = None
    """Results of the tools that run on OpenAI's side: MCP servers, code interpreter, hosted shell."""

    @property
    def needs_ptc(self) -> bool:
        return any(t.program is not None for t in self.turns)


def load_scenario(
    data: dict[str, Any] | str | Path, *, default_name: str | None = None, source: str = "scenario"
) -> Scenario:
    """A scenario from a dict, a YAML string or a path to a YAML file; errors start with `source`
    (a path's own name)."""
    if isinstance(data, Path):
        source = str(data)
        default_name = default_name or data.stem
        data = read_text(data, MAX_SCENARIO_BYTES)
    if isinstance(data, str):
        if len(data.encode("utf-8", "replace")) > MAX_SCENARIO_BYTES:
            raise ScenarioError(f"{source}: larger than {MAX_SCENARIO_BYTES} bytes")
        try:
            data = _parsed(data)
        except yaml.YAMLError as e:
            raise ScenarioError(f"{source}: invalid YAML: {e}") from e
        except RecursionError as e:
            raise ScenarioError(f"{source}: YAML nested deeper than {MAX_DEPTH} levels") from e
        except TooManyNodes as e:
            raise ScenarioError(f"{source}: YAML of {e}") from e
        except (ValueError, OverflowError) as e:  # a scalar YAML reads but Python cannot make
            raise ScenarioError(f"{source}: invalid YAML: {_unmade(e)}") from e
    try:
        check_depth(data)
    except ValueError as e:
        raise ScenarioError(f"{source}: {e}") from e
    surrogate = _lone_surrogate(data)
    if surrogate is not None:
        raise ScenarioError(f"{source}: {surrogate}")
    not_finite = _not_finite(data)
    if not_finite is not None:
        raise ScenarioError(f"{source}: {not_finite}")
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario is a mapping with `match` and `turns`")
    if "name" not in data and default_name:
        data = {**data, "name": default_name}
    try:
        scenario = Scenario.model_validate(data, strict=False)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ScenarioError(f"{source}: {where}: {first['msg']}") from e
    _check_templates(scenario, source)
    return scenario


MAX_SCENARIO_BYTES = 1 * 2**20
"""A scenario's YAML text; a JSON one is bounded by the request body limit."""


def read_text(path: Path, limit: int) -> str:
    """A file's text, strict UTF-8, refused (`ScenarioError` naming the file, one line) when it is
    longer than `limit` bytes before any of it is read."""
    try:
        # Opened without blocking, then looked at: a FIFO (which `open` would wait on for a writer)
        # or a device (`/dev/zero`, endless) is refused unread, even one swapped in after a listing.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as file:
            status = os.fstat(file.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise ScenarioError(f"{path}: not a regular file")
            if status.st_size > limit:
                raise ScenarioError(f"{path}: larger than {limit} bytes ({status.st_size} bytes)")
            raw = file.read(limit + 1)
    except OSError as e:
        raise ScenarioError(unreadable(path, e)) from e
    if len(raw) > limit:  # it grew while it was read
        raise ScenarioError(f"{path}: larger than {limit} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {e.start})") from e


def unreadable(path: Path | str, error: OSError) -> str:
    """Why a scenario file (or directory) cannot be read, one line naming it: a symlink loop said
    as one (the system's words alone, "too many levels of symbolic links", are easily misread), a
    link to nothing as one, else the system's reason."""
    if error.errno == errno.EISDIR:  # a directory named `x.yaml` in a scenario folder
        return f"{path}: a directory, not a scenario file"
    if error.errno == errno.ELOOP:
        return f"{path}: cannot read it: a symlink loop ({error.strerror or error})"
    if error.errno == errno.ENOENT and os.path.islink(path):
        return f"{path}: cannot read it: a symlink to nothing ({error.strerror or error})"
    return f"{path}: cannot read it ({error.strerror or error})"


def missing(path: Path) -> str | None:
    """Why `path`, which is neither a file nor a directory, is there in no usable way: a symlink
    loop or a dangling link (`unreadable`'s line), or None when nothing is there at all."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ENOENT and not os.path.islink(path):
            return None
        return unreadable(path, e)
    return None


def _unmade(error: Exception) -> str:
    """What a YAML scalar's constructor said: an integer past Python's 4300 digits, a date that
    does not exist (`2024-02-30`: "day is out of range for month")."""
    if "integer string conversion" in str(error):
        return "an integer of more than 4300 digits"
    return str(error)


def _lone_surrogate(data: Any) -> str | None:
    """Why `data` holds a string that is not valid Unicode (a YAML or JSON escape such as
    `\\ud800` makes a lone surrogate, which no response can carry), or None."""
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError as e:
                return f"a lone surrogate ({node[e.start]!a}) in a string: not valid Unicode"
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _not_finite(data: Any) -> str | None:
    """Where `data` holds NaN or an infinity (YAML's `.nan`, `.inf`), which no response can carry,
    or None. Before, a call turn's `arguments: {x: .nan}` reached the client as `{"x":NaN}`, which
    no JSON reader takes, and a declared MCP schema's or code interpreter output's became `null`."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        node, path = stack.pop()
        if path and isinstance(node, float) and not math.isfinite(node):  # a bare number is no mapping
            return messages.scenario_number_not_finite(".".join(str(p) for p in path))
        if isinstance(node, dict):
            stack.extend((value, (*path, key)) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, (*path, i)) for i, value in enumerate(node))
    return None


_PARSED_TEXT_CHARS = 16_384
"""A scenario's YAML text up to this long is parsed once (at most 64 are kept): a test suite
adds the same scenario text for test after test, and YAML's parser costs more than the rest of
loading it."""


def _parsed(text: str) -> Any:
    """`text` parsed as YAML, a copy of its own (the caller may keep or change what it gets)."""
    if len(text) > _PARSED_TEXT_CHARS:
        return _parse(text)
    return copy.deepcopy(_parsed_once(text))


def _parse(text: str) -> Any:
    _count_nodes(text)
    return _load(text, MAX_YAML_NODES, MAX_DEPTH)


def load_yaml_without_aliases(text: str, max_nodes: int, depth_above: int = 0) -> Any:
    """`text` parsed as YAML as scenario files are (a safe loader refusing aliases and a key given
    twice), for a file of many scenarios (a cassette), each checked again when it is added. Its
    values are counted first as a scenario's are (`_count_nodes`), at most `max_nodes` of them
    (`TooManyNodes`), nested at most `MAX_DEPTH` levels below the `depth_above` its scenarios sit
    at (`RecursionError`), before Python's loader builds any of it."""
    _count_nodes(text, max_nodes, MAX_DEPTH + depth_above)
    return _load(text, max_nodes, MAX_DEPTH + depth_above)


def _load(text: str, max_nodes: int, max_depth: int) -> Any:
    """`text` built by Python's loader (a SafeLoader without aliases), which counts the values it
    reads as `_count_nodes` does, by the same bounds: what the C parser could not count (a text it
    refuses that Python's parser reads, `%YAML 1.3`; or no C parser at all) is counted here, on
    the events the loader builds from, and refused before more than `max_nodes` are built."""
    loader = _NoAliasLoader(text)
    loader.counter = _Counter(max_nodes, max_depth)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


MAX_YAML_NODES = 50_000
"""Values (scalars, lists, mappings) one scenario's YAML may hold. Python's YAML loader spends
about 50 µs and a kilobyte on each: 1 MiB of `[a,a,a,...]` held 300,000 of them, 14 s and
250 MB to load. A scenario's long texts are one value each."""


def _count_nodes(text: str, max_nodes: int = MAX_YAML_NODES, max_depth: int = MAX_DEPTH) -> None:
    """Refuse a text of more than `max_nodes` values, or nested deeper than `max_depth`, before
    Python's loader builds any of it, counted by the C parser where there is one, some twenty
    times faster than Python's. Python's loader recursed 1,000 levels into `[[[[...` (a few
    kilobytes) before its RecursionError: 0.3 to 0.6 s on the event loop of the server a scenario
    is added to. A text the C parser refuses is counted again by Python's parser, the one the
    loader reads with (its events only, building nothing): it reads some texts the C parser
    refuses (`%YAML 1.3`, an unknown directive, a `\\ud800` escape), and before, their values went
    uncounted: 900,000 of them in a cassette took 54 s and 655 MB to load. So is every text
    without the C parser (a PyYAML built without libyaml): bounded all the same, at Python's
    speed (some 10 µs a value, counted and then loaded). The loader counts what it reads too
    (`_load`), so it never builds what was not counted."""
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            _count_events(text, loader, max_nodes, max_depth)
            return
        except yaml.YAMLError as e:
            if "maximum nesting depth" in str(e):  # the C parser's own bound, met before any event
                raise RecursionError from e
    try:  # counted again by Python's parser, as the loader will read it: its events only, no nodes
        _count_events(text, yaml.SafeLoader, max_nodes, max_depth)
    except yaml.YAMLError:
        return  # the loader words the problem (the values before it are counted all the same)


def _count_events(text: str, loader: Any, max_nodes: int, max_depth: int) -> None:
    counter = _Counter(max_nodes, max_depth)
    for event in yaml.parse(text, Loader=loader):
        counter.count(event)


class _Counter:
    """Values and nesting seen in a stream of YAML events, refused past their bounds:
    `TooManyNodes` past `max_nodes` values, `RecursionError` past `max_depth` levels."""

    def __init__(self, max_nodes: int, max_depth: int) -> None:
        self.max_nodes, self.max_depth = max_nodes, max_depth
        self.nodes = self.depth = 0

    def count(self, event: Any) -> None:
        if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            self.depth -= 1
        elif isinstance(event, (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            self.nodes += 1
            if self.nodes > self.max_nodes:
                raise TooManyNodes(f"more than {self.max_nodes} values (a long text is one value)")
            if not isinstance(event, yaml.ScalarEvent):
                self.depth += 1
                if self.depth > self.max_depth + 1:  # check_depth's bound: the outermost one is level 0
                    raise RecursionError


class TooManyNodes(ValueError):
    """A scenario's YAML of more values than `MAX_YAML_NODES`."""


_parsed_once = functools.lru_cache(maxsize=64)(_parse)
PROCESS.add("parsed scenario texts", Memo(_parsed_once))


_INT_TAG, _FLOAT_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_INT = re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
"""YAML's safe loader's int and float forms without the base-60 ones (`1:30`, `1:0:0.5`), as YAML
1.2 has none: `construct_yaml_int` turned each `:`-separated part into a bigger integer, quadratic
in their count (1 MiB of `1:0:0:...`, 500,000 parts, took 24 s). Such a value is a string."""


class _NoAliasLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing aliases: a chain of them expands a few hundred bytes into
    millions of nodes (a "billion laughs"). Scenarios have no need for them. Its `counter`
    (`_load` sets one) sees every event the composer takes, before the node is built. Its ints
    and floats have no base-60 form (`_INT`, `_FLOAT`); one tagged `!!int` or `!!float` is refused."""

    counter: _Counter | None = None

    yaml_implicit_resolvers = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag not in (_INT_TAG, _FLOAT_TAG)]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_yaml_int(self, node: Any) -> Any:
        return super().construct_yaml_int(self._decimal(node))

    def construct_yaml_float(self, node: Any) -> Any:
        return super().construct_yaml_float(self._decimal(node))

    def construct_yaml_binary(self, node: Any) -> Any:
        """Refused: a scenario's values are text, and bytes became a string silently
        (`!!binary aGVsbG8=` played the message "hello")."""
        raise yaml.constructor.ConstructorError(
            None, None, "binary values (!!binary) are not supported in scenarios", node.start_mark
        )

    def _decimal(self, node: Any) -> Any:
        if isinstance(node, yaml.ScalarNode) and ":" in str(node.value):
            raise yaml.constructor.ConstructorError(
                None, None, "base-60 numbers (1:30) are not supported in scenarios", node.start_mark
            )
        return node

    def get_event(self) -> Any:
        event = super().get_event()  # type: ignore[no-untyped-call]
        if self.counter is not None:
            self.counter.count(event)
        return event

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "aliases (*name) are not supported in scenarios", event.start_mark
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        """A key given twice in one mapping is refused: YAML's loader kept the last value and
        dropped the first without a word (`turns` twice: the first list of turns never played).
        So is a merge key (`<<: {name: z}`), which gives keys again by another road: beside
        `name: m` the loader kept one of the two names silently."""
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        "merge keys (<<) are not supported in scenarios",
                        key_node.start_mark,
                    )
                key = self.construct_object(key_node, deep=True)
                try:
                    repeated = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: the loader words that itself
                    continue
                if repeated:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"the key {key!r} is given twice",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


_NoAliasLoader.add_implicit_resolver(_INT_TAG, _INT, list("-+0123456789"))
_NoAliasLoader.add_implicit_resolver(_FLOAT_TAG, _FLOAT, list("-+0123456789."))
_NoAliasLoader.add_constructor(_INT_TAG, _NoAliasLoader.construct_yaml_int)
_NoAliasLoader.add_constructor(_FLOAT_TAG, _NoAliasLoader.construct_yaml_float)
_NoAliasLoader.add_constructor("tag:yaml.org,2002:binary", _NoAliasLoader.construct_yaml_binary)

_template_env = templating.BoundedEnvironment()
TEXT_ENV = templating.BoundedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
"""What a turn's texts render in (a message, a refusal, a command, a value of call arguments)."""
CODE_ENV = templating.BoundedEnvironment(
    undefined=StrictUndefined,
    autoescape=False,
    keep_trailing_newline=True,
    finalize=lambda value: json.dumps(value, ensure_ascii=False),
)
"""What program code and call arguments given as one text render in: every `{{ ... }}` as JSON."""

TEMPLATE_NAMES = frozenset({"input", "result", "data", "program", "output", "outputs", "loaded"})
"""The names a turn's templates see besides the captures (`script.py`, `player._template_context`):
no capture may take one (`_pattern`)."""
JINJA_NAMES = frozenset({"true", "false", "none", "True", "False", "None", "self"})
"""What a template's `{{ name }}` reads as Jinja's own, whatever the context holds: the literals,
and `self` (the template itself)."""
RESERVED_NAMES = frozenset(
    {*TEMPLATE_NAMES, *JINJA_NAMES, *templating.GLOBAL_NAMES, *TEXT_ENV.globals, *CODE_ENV.globals}
)
"""What no capture may be named (`_pattern`): the templates' variables, Jinja's literals and
`self` (a capture `none` was never read: `{{ none }}` is None), and the globals of their
environments (`range`, `namespace`, `dict`, ...): a capture `range` would hide `range()`."""


def _check_templates(scenario: Scenario, source: str) -> None:
    """Every template compiles now, so a bad one is refused when the scenario is added; the
    constant expressions of all of them are folded within one render's bounds (`checking`)."""
    with templating.checking():
        _check_each_template(scenario, source)


def _check_each_template(scenario: Scenario, source: str) -> None:

    def strings(value: Any, where: str) -> list[tuple[str, str]]:
        if isinstance(value, str):
            return [(where, value)]
        if isinstance(value, list):
            return [s for i, v in enumerate(value) for s in strings(v, f"{where}.{i}")]
        if isinstance(value, dict):
            return [s for k, v in value.items() for s in strings(v, f"{where}.{k}")]
        return []

    # what a request may give the templates: a render that reads none of these is the same at
    # every request, so one that fails now always fails (`templating.check_renders`)
    given = TEMPLATE_NAMES | {n for p in scenario.match.patterns() for n in group_names(p)}

    def arguments(value: Any, where: str, found: list[tuple[str, str]], code: set[str]) -> None:
        found.extend(strings(value, where))
        if isinstance(value, str):
            code.add(where)  # arguments given as one text render as program code does

    for i, turn in enumerate(scenario.turns):
        found: list[tuple[str, str]] = []
        code: set[str] = set()  # the fields rendered as program code (`CODE_ENV`)

        for name in ("program", "preamble", "message", "refusal", "on_program_error"):
            value = getattr(turn, name, None)
            if isinstance(value, str):
                found.append((f"turns.{i}.{name}", value))
        if turn.program is not None:
            code.add(f"turns.{i}.program")
        for k, call in enumerate(turn.calls):
            arguments(call.arguments, f"turns.{i}.call.{k}.arguments", found, code)
            if call.input is not None:
                found.append((f"turns.{i}.call.{k}.input", call.input))
        if turn.search is not None:
            if turn.search.query is not None:
                found.append((f"turns.{i}.search.query", turn.search.query))
            arguments(turn.search.arguments, f"turns.{i}.search.arguments", found, code)
        if turn.mcp is not None:
            arguments(turn.mcp.arguments, f"turns.{i}.mcp.arguments", found, code)
        if turn.code_interpreter is not None:
            found.append((f"turns.{i}.code_interpreter.code", turn.code_interpreter.code))
        if turn.shell is not None:
            found += [(f"turns.{i}.shell.commands.{k}", c) for k, c in enumerate(turn.shell.commands)]
        for where, text in found:
            try:
                templating.check(_template_env, text)
            except Exception as e:  # any compile failure is the author's, never the server's
                raise ScenarioError(f"{source}: {where}: invalid template: {e}") from e
            try:
                templating.check_renders(CODE_ENV if where in code else TEXT_ENV, text, given)
            except TemplateError as e:  # as the render at play says it (`Script._render`)
                raise ScenarioError(f"{source}: {where}: invalid template: {messages.template_error(str(e))}") from e
            except Exception as e:
                failed = messages.template_failed(type(e).__name__, str(e))
                raise ScenarioError(f"{source}: {where}: invalid template: {failed}") from e


@dataclass(frozen=True, slots=True)
class Said:
    """A message before the latest user message, as `match.history` sees it."""

    role: str
    text: str


class ToolOutput:
    """A tool output sent back since the latest user message, as `match.outputs` sees it."""

    __slots__ = ("_data", "text", "tool")

    def __init__(self, tool: str, text: str) -> None:
        self.tool = tool
        """The name of the tool whose call it answers ('' when the call is not known)."""
        self.text = text
        self._data: Any = _UNPARSED

    @property
    def data(self) -> Any:
        """The text parsed as JSON (once), or `NOT_JSON`."""
        if self._data is _UNPARSED:
            try:
                self._data = jsontext.loads(self.text)
            except ValueError:
                self._data = NOT_JSON
        return self._data


_UNPARSED = object()
NOT_JSON = object()


class Context(Protocol):
    """What a request says besides its latest user message, tools, model and metadata: read only
    when a scenario asks (a conversation's may be long)."""

    @property
    def instructions(self) -> Sequence[str]:
        """The request's `instructions`, then each system or developer message's text."""
        ...

    @property
    def history(self) -> Sequence[Said]:
        """The user and assistant messages before the latest user message, oldest first."""
        ...

    @property
    def outputs(self) -> Sequence[ToolOutput]:
        """The tool outputs sent back since the latest user message, in order."""
        ...

    @property
    def tool_choice(self) -> Any:
        """The request's `tool_choice` as JSON (`"auto"` when it sends none)."""
        ...


@dataclass(frozen=True)
class Given:
    """A `Context` read up front."""

    instructions: tuple[str, ...] = ()
    history: tuple[Said, ...] = ()
    outputs: tuple[ToolOutput, ...] = ()
    tool_choice: Any = "auto"


@dataclass(frozen=True, slots=True)
class Request:
    """What matching looks at."""

    text: str
    tools: frozenset[str]
    ptc: bool
    model: str
    metadata: dict[str, str]
    scope: str | None
    deferred: frozenset[str] = frozenset()
    """Declared tools deferred and not loaded yet (qualified names): a scenario must search first."""
    choice: Callable[[Scenario], str | None] | None = None
    """Why the scenario's next turn contradicts the request's tool_choice, or None."""
    context: Context = Given()
    """The instructions, earlier messages, tool outputs and tool_choice (`match.instructions`,
    `history`, `outputs`, `tool_choice`)."""


@dataclass(frozen=True, slots=True)
class NearMiss:
    scenario: str
    field: str
    reason: str
    score: float

    def as_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "field": self.field, "reason": self.reason}


_PLAIN_NAME = re.compile(r"[A-Za-z0-9._:/-]+")


MAX_SCENARIO_JSON_VALUES = 250_000
"""Values and keys a scenario's JSON (a body posted to `/_emulator/scenarios`, a `.json` file)
holds at most, counted in its text before any is parsed (five times a YAML scenario's
`MAX_YAML_NODES`: 20,000 turns of a message are 60,000). Within 16 MiB, 5,000,000 empty arrays,
read a piece at a time, were still copied, checked and freed a container at a time in single C
calls that held every client 0.4-2.3 s each."""

MAX_ADDED_SCENARIOS = 10_000
"""Scenarios added at run time one server keeps at most, every scope together (a scenario that
replaces one of the same scope and name is not one more): 50,000 tiny ones took 400 MB, and each
request's matching and each listing walked them all."""


SCOPED_HINT_SCENARIOS = 256
"""The most scoped scenarios an unscoped request that matched none is tried against for the hint of
its 400 (`scoped_matches`), on the event loop: every scope's 10,000 scenarios, sorted and tried,
held every client 0.1-1.05 s at each such request."""


MAX_ADDED_SCENARIO_BYTES = 64 * 2**20
"""What the scenarios added at run time one server keeps may weigh together, by the bodies that
added them (`POST /_emulator/scenarios`, as sent; a scenario read from the store or from another
replica counts nothing here: it was bounded when added): a scenario takes several times its body
in memory, and 10,000 of 25 KB took the server to about 1 GB."""


@dataclass
class ScenarioRegistry:
    """Scenarios by (scope, name): callers in different scopes may use the same names. Indexed by
    scope too, so what one scope asks (its count, its listing, its end, its matching weight) costs
    what that scope and the unscoped scenarios hold, not what every scope holds."""

    _scenarios: dict[tuple[str | None, str], tuple[Scenario, str]] = field(default_factory=dict)
    _hosted: dict[str | None, HostedScript] = field(default_factory=dict)
    """Hosted tool results registered at run time, per scope: for inline programs and for
    scenarios that script none of their own."""
    _weights: dict[tuple[str | None, str], tuple[Scenario, int]] = field(default_factory=dict)
    """Each scenario's `_weight`, with the scenario it was counted for (`match_weight`)."""
    _uses: dict[tuple[str | None, str], int] = field(default_factory=dict)
    """How many requests each scenario was chosen for (this process's count), whatever surface
    asked (a response, a WebSocket, an Agents API session): the test fixture's unused check."""
    _scopes: dict[str | None, dict[str, tuple[Scenario, str]]] = field(default_factory=dict)
    """The scenarios by scope, then name (the same as `_scenarios`)."""
    _sums: dict[str | None, int] = field(default_factory=dict)
    """The weights of each scope's scenarios together (`match_weight`)."""
    _visible: dict[str | None, list[tuple[Scenario, str]]] = field(default_factory=dict)
    """Each scope's scenarios and the unscoped ones in matching order, made when first asked after
    a change (`_seen`)."""
    _added = 0
    """How many scenarios added at run time are kept (`MAX_ADDED_SCENARIOS`)."""
    _sizes: dict[tuple[str | None, str], int] = field(default_factory=dict)
    """The size of the body each scenario added at run time came in (`MAX_ADDED_SCENARIO_BYTES`)."""
    _added_bytes = 0
    """Their sizes together."""
    _files: set[tuple[str | None, str]] = field(default_factory=set)
    """The (scope, name) of the scenarios held from files (`replace_files` swaps only those)."""

    def set_hosted(self, script: HostedScript | None, scope: str | None = None) -> None:
        if script is None:
            self._hosted.pop(scope, None)
        else:
            self._hosted[scope] = script

    def hosted(self, scope: str | None = None) -> HostedScript | None:
        return self._hosted.get(scope) or self._hosted.get(None)

    def add(self, scenario: Scenario, source: str = "api", size: int = 0) -> None:
        self._put(scenario, source)
        if source == "api" and size:
            key = (scenario.scope, scenario.name)
            self._sizes[key] = size
            self._added_bytes += size
        self._uses.pop((scenario.scope, scenario.name), None)  # a replaced scenario starts again

    def has_room(self, scope: str | None, name: str) -> bool:
        """Whether a scenario added at run time as (`scope`, `name`) is kept: one more than
        `MAX_ADDED_SCENARIOS` is not, one that replaces a scenario already added is."""
        kept = self._scenarios.get((scope, name))
        return self._added < MAX_ADDED_SCENARIOS or (kept is not None and kept[1] == "api")

    def has_bytes(self, scope: str | None, name: str, size: int) -> bool:
        """Whether a scenario of a body of `size` bytes added at run time as (`scope`, `name`)
        keeps the scenarios added at run time within `MAX_ADDED_SCENARIO_BYTES` (the one it
        replaces no longer counted)."""
        return self._added_bytes - self._sizes.get((scope, name), 0) + size <= MAX_ADDED_SCENARIO_BYTES

    @staticmethod
    def most_added_bytes() -> int:
        return MAX_ADDED_SCENARIO_BYTES

    @staticmethod
    def most_added() -> int:
        """`MAX_ADDED_SCENARIOS`: how many scenarios added at run time are kept at most."""
        return MAX_ADDED_SCENARIOS

    def _put(self, scenario: Scenario, source: str) -> None:
        key = (scenario.scope, scenario.name)
        self._drop(key)
        self._scenarios[key] = (scenario, source)
        self._scopes.setdefault(scenario.scope, {})[scenario.name] = (scenario, source)
        weight = _weight(scenario)
        self._weights[key] = (scenario, weight)
        self._sums[scenario.scope] = self._sums.get(scenario.scope, 0) + weight
        self._added += source == "api"
        if source != "api":
            self._files.add(key)
        self._changed(scenario.scope)

    def _drop(self, key: tuple[str | None, str]) -> bool:
        found = self._scenarios.pop(key, None)
        if found is None:
            return False
        scope, name = key
        held = self._scopes.get(scope)
        if held is not None:
            held.pop(name, None)
            if not held:
                del self._scopes[scope]
        kept = self._weights.pop(key, None)
        if kept is not None:
            self._sums[scope] = self._sums.get(scope, 0) - kept[1]
            if scope not in self._scopes:
                self._sums.pop(scope, None)
        self._added -= found[1] == "api"
        self._added_bytes -= self._sizes.pop(key, 0)
        if self._dropped is not None:
            self._dropped.append(found)
        self._files.discard(key)
        self._changed(scope)
        return True

    def _changed(self, scope: str | None) -> None:
        if scope is None:
            self._visible.clear()
        else:
            self._visible.pop(scope, None)

    def load_dir(self, directory: Path) -> list[Scenario]:
        loaded = []
        for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
            scenario = load_scenario(path)
            self.add(scenario, str(path))
            loaded.append(scenario)
        return loaded

    def replace_files(self, loaded: list[tuple[Scenario, str]]) -> None:
        """The scenarios from files become `loaded` (scenario, its file); those added at run time stay
        and still win over a file's of the same name, as when they were added after it. Only the
        files' scenarios are dropped and put: those added at run time (up to 10,000) are left as
        they are, where re-indexing them all held the event loop 0.07-0.32 s at each reload."""
        for key in list(self._files):
            self._drop(key)
        for scenario, source in loaded:
            kept = self._scenarios.get((scenario.scope, scenario.name))
            if kept is None or kept[1] != "api":
                self._put(scenario, source)

    def remove(self, name: str, scope: str | None = None) -> bool:
        self._uses.pop((scope, name), None)
        return self._drop((scope, name))

    def clear(self, scope: str | None = None, dropped: list[Any] | None = None) -> int:
        """Remove the scenarios added at run time (in `scope`, or all); loaded files stay. Given
        `dropped`, the scenarios removed are put there (the caller frees them in a worker thread:
        freeing 10,000 large ones held the event loop)."""
        self._dropped = dropped
        try:
            return self._clear(scope)
        finally:
            self._dropped = None

    _dropped: list[Any] | None = None

    def _clear(self, scope: str | None) -> int:
        if scope is None:
            doomed = [k for k, (_, src) in self._scenarios.items() if src == "api"]
            self._hosted.clear()
        else:
            doomed = [(scope, name) for name, (_, src) in self._scopes.get(scope, {}).items() if src == "api"]
            self._hosted.pop(scope, None)
        for key in doomed:
            self._drop(key)
            self._uses.pop(key, None)
        return len(doomed)

    def get(self, name: str, scope: str | None = None) -> Scenario | None:
        found = self._scenarios.get((scope, name))
        return found[0] if found else None

    def added(self) -> dict[tuple[str | None, str], Scenario]:
        """The scenarios added at run time (`add` with its default source), by (scope, name)."""
        return {key: scenario for key, (scenario, source) in self._scenarios.items() if source == "api"}

    def unused(self, scope: str | None, used: set[str]) -> list[str]:
        """The names of the scenarios added at run time in `scope` (every scope: None) that were
        never chosen and are not in `used`, in listing order: what `POST /_emulator/end` asks, at
        the cost of that scope's scenarios."""
        held = self._ordered() if scope is None else self._sorted(self._scopes.get(scope, {}).values())
        return [
            s.name for s, src in held if src == "api" and not self._uses.get((s.scope, s.name)) and s.name not in used
        ]

    def hosted_scripts(self) -> dict[str | None, HostedScript]:
        """The hosted tool results set at run time, by scope."""
        return dict(self._hosted)

    def count(self, scope: str | None = None) -> int:
        """How many scenarios a request of `scope` may match: its scope's and the unscoped ones."""
        mine = len(self._scopes.get(scope, {})) if scope is not None else 0
        return len(self._scopes.get(None, {})) + mine

    def listed(self, scope: str | None = None) -> tuple[list[tuple[Scenario, str]], dict[tuple[str | None, str], int]]:
        """What `listing` describes, taken on the event loop (the scenarios in order and a copy of
        their uses): `described` makes the listing of it in any thread."""
        return (self._ordered() if scope is None else self.visible(scope)), dict(self._uses)

    @staticmethod
    def described(held: list[tuple[Scenario, str]], uses: dict[tuple[str | None, str], int]) -> list[dict[str, Any]]:
        return [
            {
                "name": s.name,
                "source": src,
                "scope": s.scope,
                "priority": s.priority,
                "turns": len(s.turns),
                "uses": uses.get((s.scope, s.name), 0),
            }
            for s, src in held
        ]

    def listing(self, scope: str | None = None) -> list[dict[str, Any]]:
        return self.described(*self.listed(scope))

    def models(self, scope: str | None = None) -> list[str]:
        """The model names the scenarios a caller in `scope` can match name outright: a `match.model`
        that is a plain name (letters, digits and `.-_:/`), not a pattern of several."""
        named = {
            s.match.model
            for s, _ in self.visible(scope)
            if s.match.model is not None and _PLAIN_NAME.fullmatch(s.match.model)
        }
        return sorted(named)

    def visible(self, scope: str | None) -> list[tuple[Scenario, str]]:
        """The scenarios a request of `scope` may match (its scope's and the unscoped ones), in
        matching order; kept until one of them changes."""
        held = self._visible.get(scope)
        if held is None:
            mine = list(self._scopes.get(scope, {}).values()) if scope is not None else []
            held = self._visible[scope] = self._sorted([*self._scopes.get(None, {}).values(), *mine])
        return held

    @staticmethod
    def _sorted(held: Iterable[tuple[Scenario, str]]) -> list[tuple[Scenario, str]]:
        return sorted(held, key=lambda v: (-v[0].priority, v[0].scope is None, v[0].name))

    def _ordered(self) -> list[tuple[Scenario, str]]:
        return self._sorted(self._scenarios.values())

    def match(self, request: Request, *, count: bool = True) -> tuple[Scenario, dict[str, str]] | list[NearMiss]:
        """The first matching scenario and its captures, or the near misses, closest first.
        `count=False`: only asking (the recording proxy's question), not choosing it to answer.
        A scenario whose matcher is too costly for the request's text is passed over; when no
        other matches, its 400 (`scenario_pattern_too_costly`) is raised, naming the matcher. All
        the request's matches together cost at most a request's budget (`patterns.metered`: a few
        ms on the event loop, where `match_weight` keeps a request that could cost more from being
        matched); past it, the 400 `scenario_matching_too_costly`."""
        try:
            with metered():
                return self._match(request, count=count)
        except MatchingTooCostly as e:
            raise messages.scenario_matching_too_costly(e.budget) from None

    def _match(self, request: Request, *, count: bool) -> tuple[Scenario, dict[str, str]] | list[NearMiss]:
        misses = []
        costly: EmulatorError | None = None
        ordered = self.visible(request.scope)  # another caller's scenarios: invisible, not near misses
        ranking = _Ranking(len(ordered))
        for scenario, _ in ordered:
            try:
                result = _try(scenario, request, ranking)
            except _TooCostly as e:  # cannot tell: another scenario may still match
                costly = costly or e.error
                continue
            if isinstance(result, NearMiss):
                misses.append(result)
            else:
                if count:
                    key = (scenario.scope, scenario.name)
                    self._uses[key] = self._uses.get(key, 0) + 1
                return scenario, result
        if costly is not None:  # none matched, and one could not be told: its 400 names the matcher
            raise costly
        misses.sort(key=lambda m: -m.score)
        return misses

    def scoped_matches(self, request: Request) -> int:
        """How many scenarios of some scope would match this request if it carried their scope: the
        usual mistake behind an unscoped request's 400 is a client built without the test's URL.
        At most `SCOPED_HINT_SCENARIOS` are looked at (in no order: none is sorted), within the
        request's matching budget."""
        found = checked = 0
        try:
            with metered():
                for scope, held in self._scopes.items():
                    if scope is None or scope == request.scope:
                        continue
                    for s, _ in held.values():
                        if checked >= SCOPED_HINT_SCENARIOS:
                            return found  # a hint for the 400: those counted within the bound
                        checked += 1
                        if not _misses(s, request):
                            found += 1
        except MatchingTooCostly:
            pass  # a hint for the 400: those counted within the budget
        return found

    def match_weight(self, scope: str | None) -> int:
        """The RE2 instructions of all the patterns a request of `scope` may be matched against
        (each scenario's, counted once when it is added or replaced, and summed by scope): times
        the bytes of the request's texts, a bound on what matching it costs."""
        return self._sums.get(None, 0) + (self._sums.get(scope, 0) if scope is not None else 0)


def _weight(scenario: Scenario) -> int:
    """The RE2 instructions of the scenario's matchers together, and for each `match.outputs` entry
    what comparing it with one tool output costs (`_output_cost`) per byte such an output takes in
    a request at least (`_OUTPUT_ITEM_BYTES`), and for each role its `match.history` entries name
    the walk of the earlier messages (`HISTORY_SCAN_COST` per message, one at least as long), and
    the lookups of its `match.tools` (`TOOL_LOOKUP_COST` each, over the fewest bytes a request
    brings): times the request's bytes, a bound on its matching."""
    compiled = scenario.match.compiled
    patterns = sum(compiled[p].size for p in scenario.match.patterns())
    roles = len({wanted.role for wanted in scenario.match.history})
    history = roles * -(-HISTORY_SCAN_COST // _OUTPUT_ITEM_BYTES)
    tools = -(-TOOL_LOOKUP_COST * len(scenario.match.tools) // _OUTPUT_ITEM_BYTES)
    outputs = sum(-(-_output_cost(o) // _OUTPUT_ITEM_BYTES) for o in scenario.match.outputs)
    return patterns + history + tools + outputs


OUTPUT_SCAN_COST = 20
"""What looking at one tool output for a `match.outputs` entry costs, in the units of a match's
budget (`patterns.MATCH_BUDGET`: about 8 ns each)."""
OUTPUT_JSON_COST = 250
"""What comparing one tool output with an entry's `json` costs, per value of that `json`, in the
same units: entry by entry over every output, thousands of each cost seconds (about 1.2 us a
comparison of a one-entry object measured, so the 300,000,000 of a worker thread refuse 4,000
entries and outputs after about half a second), and it counts in the request's budget as its
patterns' matches do."""
HISTORY_SCAN_COST = 20
"""What looking at one earlier message for a `match.history` entry costs, in the same units (the
messages of one role are gathered once per scenario)."""
_OUTPUT_ITEM_BYTES = 20
"""The fewest bytes of a request's texts one tool output brings (`function_call_output`, its type)."""


def _output_cost(expected: OutputMatch) -> int:
    """What one output costs `expected` at most: a look, and its `json` comparison."""
    return OUTPUT_SCAN_COST + OUTPUT_JSON_COST * expected.json_values


def _wants_json(expected: OutputMatch) -> bool:
    return "json_" in expected.model_fields_set


SIMILARITY_CHARS = 100
"""How many characters of the pattern's literal text and of the request's text the near-miss
ranking compares (their beginnings): the comparison is quadratic, and a 2,000-character literal
against a 40,000-character message held the event loop 4 s."""
SIMILARITY_BUDGET = 1_000_000
"""Character pairs the near-miss ranking of one request compares at most, all scenarios together
(about 10 ms at worst). A request facing more scenarios than the budget compares in full (100 of
100-character texts) ranks every one by the characters the two texts share instead, in linear
work (`quick_ratio`): the same measure for all, so none drops out of the ranking (past the
budget, those after it ranked 0 and the wrong scenario was named closest)."""


class _Ranking:
    """The near-miss ranking of one request: one measure for all its scenarios, and what it has
    left to spend (`SIMILARITY_BUDGET`)."""

    __slots__ = ("left", "quick")

    def __init__(self, scenarios: int = 1) -> None:
        self.left = SIMILARITY_BUDGET
        self.quick = scenarios * SIMILARITY_CHARS * SIMILARITY_CHARS > SIMILARITY_BUDGET

    def similarity(self, pattern: str, text: str) -> float:
        """How alike the pattern's literal text and `text` are, 0 to 1, from their beginnings."""
        literal = _literal(pattern)[:SIMILARITY_CHARS].lower()
        said = text[:SIMILARITY_CHARS].lower()
        cost = len(literal) + len(said) if self.quick else max(len(literal), 1) * max(len(said), 1)
        if cost > self.left:
            return 0.0
        self.left -= cost
        compared = difflib.SequenceMatcher(None, literal, said)
        return compared.quick_ratio() if self.quick else compared.ratio()


def _misses(scenario: Scenario, request: Request) -> bool:
    try:
        return isinstance(_try(scenario, request, None), NearMiss)
    except _TooCostly:
        return True


class _TooCostly(Exception):
    """A matcher whose match would cost more than one may: `error` is the scenario's 400."""

    def __init__(self, error: EmulatorError) -> None:
        super().__init__(error)
        self.error = error


def _try(scenario: Scenario, request: Request, ranking: _Ranking | None) -> dict[str, str] | NearMiss:
    """The scenario's captures for the request, or the first check it fails. The checks run in the
    order tools, model, metadata, tool_choice, instructions, history, input, outputs: a near miss
    that got further is closer (`score`); of two that missed the input, the one whose pattern's
    text is more like the message's (`ranking`; None: no ranking wanted)."""
    m = scenario.match
    passed = 0.0
    if m.tools:
        spend(TOOL_LOOKUP_COST * len(m.tools), "match.tools")
        missing = next((t for t in m.tools if t not in request.tools), None)
        if missing is not None:
            return NearMiss(scenario.name, "tools", f"the request does not declare the function tool '{missing}'", 0)
    passed += 1
    unloaded = _unloaded_call(scenario, request.deferred)
    if unloaded is not None:
        return NearMiss(
            scenario.name,
            "tools",
            f"turn {unloaded[0] + 1} calls '{unloaded[1]}' directly, but it is deferred, not loaded (no search turn "
            "loads it before that turn)",
            passed - 0.5,
        )
    if scenario.needs_ptc and not request.ptc:
        return NearMiss(
            scenario.name, "tools", "the request does not declare the programmatic_tool_calling tool", passed
        )
    passed += 1
    if m.model is not None and not _matched(scenario, "model", m.model, request.model, full=True):
        return NearMiss(scenario.name, "model", f"model '{request.model}' does not match /{m.model}/", passed)
    passed += 1
    for key, value in m.metadata.items():
        if request.metadata.get(key) != value:
            return NearMiss(scenario.name, f"metadata.{key}", f"metadata '{key}' is not '{value}'", passed)
    passed += 1
    context = request.context
    captures: dict[str, str] = {}
    if m.tool_choice is not None and not _choice_matches(m.tool_choice, context.tool_choice):
        shown = f"tool_choice is {_shown(context.tool_choice)}, not {_shown(m.tool_choice)}"
        return NearMiss(scenario.name, "tool_choice", shown, passed)
    passed += 1
    if m.instructions is not None:
        found = _search(scenario, "instructions", m.instructions, context.instructions)
        if found is None:
            return NearMiss(
                scenario.name, "instructions", _instructions_miss(m.instructions, context.instructions), passed
            )
        captures.update(found)
    passed += 1
    by_role: dict[str | None, list[str]] = {}
    for index, wanted in enumerate(m.history):
        # Each entry walked every earlier message, uncounted: 4,000 entries over 20,000 messages
        # held every client 2-5 s. The walk counts in the request's budget, once per role.
        said = by_role.get(wanted.role)
        if said is None:
            spend(HISTORY_SCAN_COST * len(context.history), f"match.history.{index}")
            said = by_role[wanted.role] = [
                message.text for message in context.history if wanted.role in (None, message.role)
            ]
        found = _search(scenario, f"history.{index}.text", wanted.text, said)
        if found is None:
            whose = f"{wanted.role} message" if wanted.role else "user or assistant message"
            why = (
                f"none of the {len(said)} earlier {whose}s matches /{wanted.text}/"
                if len(said) > 1
                else f"the earlier {whose} {_quoted(said[0])} does not match /{wanted.text}/"
                if said
                else f"the conversation has no earlier {whose} to match /{wanted.text}/"
            )
            return NearMiss(scenario.name, f"history.{index}", why, passed + index / (len(m.history) + 1))
        captures.update(found)
    passed += 1
    if m.input is not None:
        matched = _matched(scenario, "input", m.input, request.text)
        if matched is None:
            similarity = ranking.similarity(m.input, request.text) if ranking is not None else 0.0
            return NearMiss(
                scenario.name,
                "input",
                f"the latest user message {_quoted(request.text)} does not match /{m.input}/",
                passed + similarity,
            )
        captures.update({k: v for k, v in matched.groupdict().items() if v is not None})
    passed += 1
    for index, expected in enumerate(m.outputs):
        answered = _output_found(scenario, index, expected, context.outputs)
        if isinstance(answered, str):
            return NearMiss(scenario.name, f"outputs.{index}", answered, passed + index / (len(m.outputs) + 1))
        captures = {**answered, **captures}  # the input's captures win over an output's
    passed += 1
    reason = request.choice(scenario) if request.choice is not None else None
    if reason is not None:
        return NearMiss(scenario.name, "tool_choice", reason, passed)
    return captures


def _matched(scenario: Scenario, field: str, pattern: str, text: str, *, full: bool = False) -> Any:
    """`pattern`'s match in `text` (searched, or `full`), or `_TooCostly` (the scenario's 400) when
    the match would cost more than one may (`emulator/patterns.py`); `field` names the matcher under `match.`."""
    compiled = scenario.match.compiled.get(pattern) or compile_pattern(pattern)
    try:
        return compiled.fullmatch(text) if full else compiled.search(text)
    except MatchingTooCostly:
        raise  # the request's matches together: no other scenario can be told either
    except PatternTooCostly as e:
        raise _TooCostly(
            messages.scenario_pattern_too_costly(scenario.name, f"match.{field}", e.instructions, e.length, e.budget)
        ) from None


def _search(scenario: Scenario, field: str, pattern: str, texts: Sequence[str]) -> dict[str, str] | None:
    """The named groups of the first text `pattern` is found in, or None."""
    for text in texts:
        found = _matched(scenario, field, pattern, text)
        if found is not None:
            return {k: v for k, v in found.groupdict().items() if v is not None}
    return None


def _quoted(text: str, limit: int = 80) -> str:
    return "'" + (text if len(text) <= limit else text[: limit - 3] + "...") + "'"


def _shown(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _instructions_miss(pattern: str, texts: Sequence[str]) -> str:
    if not texts:
        return f"the request has no instructions (nor a system or developer message) to match /{pattern}/"
    if len(texts) == 1:
        return f"the instructions {_quoted(texts[0])} do not match /{pattern}/"
    shown = "; ".join(_quoted(t, 40) for t in texts[:3]) + ("; ..." if len(texts) > 3 else "")
    return f"none of the request's {len(texts)} instructions ({shown}) matches /{pattern}/"


def _choice_matches(expected: str | dict[str, Any], given: Any) -> bool:
    if isinstance(expected, str):
        return bool(given == expected)
    return isinstance(given, dict) and jsontext.includes(given, expected)


def _output_found(
    scenario: Scenario, index: int, expected: OutputMatch, outputs: Sequence[ToolOutput]
) -> dict[str, str] | str:
    """The captures of the first output `expected` matches, or why none does."""
    spend(OUTPUT_SCAN_COST * len(outputs), f"match.outputs.{index}")
    candidates = [o for o in outputs if expected.tool is None or o.tool == expected.tool]
    wants_json = _wants_json(expected)
    json_cost = OUTPUT_JSON_COST * expected.json_values
    what = f"{expected.tool} output" if expected.tool is not None else "tool output"
    if not candidates:
        return f"no {what} has come back since the latest user message"
    for output in candidates:
        captures: dict[str, str] = {}
        if expected.output is not None:
            found = _matched(scenario, f"outputs.{index}.output", expected.output, output.text)
            if found is None:
                continue
            captures = {k: v for k, v in found.groupdict().items() if v is not None}
        if wants_json:
            spend(json_cost, f"match.outputs.{index}.json")
            if output.data is NOT_JSON or not jsontext.includes(output.data, expected.json_):
                continue
        return captures
    wants = []
    if expected.output is not None:
        wants.append(f"matches /{expected.output}/")
    if "json_" in expected.model_fields_set:
        wants.append(f"has {_shown(expected.json_)}")
    latest = candidates[-1].text
    return f"no {what} since the latest user message {' and '.join(wants)} (the latest: {_quoted(latest)})"


def _unloaded_call(scenario: Scenario, deferred: frozenset[str]) -> tuple[int, str] | None:
    """The first direct call of a deferred tool that no earlier search turn may have loaded. A
    `query` search may load anything (its ranking runs when it plays); a `load` list loads those."""
    if not deferred:
        return None
    loaded: set[str] = set()
    for index, turn in enumerate(scenario.turns):
        if turn.search is not None:
            if turn.search.load is None:
                return None
            loaded.update(turn.search.load)
        for spec in turn.calls:
            if spec.name in deferred and spec.name not in loaded:
                return index, spec.name
    return None


def _literal(pattern: str) -> str:
    """The pattern's plain text, for ranking near misses by similarity."""
    text = re.sub(r"\(\?P<\w+>[^)]*\)|\(\?[a-zA-Z]+\)|\\[a-zA-Z]", " ", pattern)
    return re.sub(r"[\\^$.|?*+()\[\]{}]", "", text)
