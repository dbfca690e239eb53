"""The body of `POST /v1/responses` (and of a WebSocket `response.create`), validated strictly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from ptc_emulator.emulator import jsonreply, messages
from ptc_emulator.emulator.wire.items import (
    MAX_DEPTH,
    InputItem,
    JsonObjectFormat,
    OpenJSON,
    PlainTextFormat,
    SchemaTextFormat,
    WireModel,
    check_depth,
)
from ptc_emulator.emulator.wire.known import known_count
from ptc_emulator.emulator.wire.stepped import stepped
from ptc_emulator.emulator.wire.tools import FunctionTool, ProgrammaticToolCalling, Tool, ToolChoice

__all__ = [
    "AccessPrograms",
    "SafetyIdentifier",
    "CompactRequest",
    "Conversational",
    "Includable",
    "conversation_id",
    "MAX_DEPTH",
    "Model",
    "OpenJSON",
    "CountTokensRequest",
    "CreateRequest",
    "check_depth",
    "check_json",
    "check_stream_options",
    "check_metadata",
    "metadata_few_keys",
    "metadata_overfull",
    "check_text",
    "text_format",
    "TextConfig",
]


def check_json(value: Any) -> None:
    """What JSON can carry but a response cannot: NaN and the infinities (Python reads them), and
    lone UTF-16 surrogates (not encodable as UTF-8). Encoding it, in C, finds both: a dict's
    long list (a create's 200,000 input items) a slice at a time, in order (the same first error),
    each slice under its key (the same depth), so that a worker thread checking a large body never
    holds the interpreter for the whole of it (the encoder lets go of it only when done)."""
    try:
        for piece in _pieces(value):
            # A long string (a 14 MB tool output) a slice at a time too; NaN found before a surrogate.
            for text in jsonreply.texts(piece, ensure_ascii=False, allow_nan=False):
                text.encode("utf-8")
    except RecursionError as e:
        raise ValueError(messages.json_too_deep(MAX_DEPTH)) from e
    except ValueError as e:
        if isinstance(e, UnicodeEncodeError):
            raise ValueError(messages.lone_surrogate()) from e
        raise ValueError(messages.number_not_finite()) from e


_CHECKED_ITEMS = 200
"""The items of a long list `check_json` encodes at once."""


def _pieces(value: Any) -> Iterator[Any]:
    if not isinstance(value, dict) or not any(isinstance(v, list) and len(v) > _CHECKED_ITEMS for v in value.values()):
        yield value
        return
    for key, item in value.items():
        if isinstance(item, list) and len(item) > _CHECKED_ITEMS:
            for start in range(0, len(item), _CHECKED_ITEMS):
                yield {key: item[start : start + _CHECKED_ITEMS]}
        else:
            yield {key: item}


MAX_METADATA_KEYS = 16


def metadata_few_keys(value: Any) -> Any:
    """Before `metadata`'s values are checked: more than 16 keys refused at once, whatever the
    values. After them, 300,000 members of the wrong type made an error each (5.5 s and 1.6 s of
    every client's time; 1,450,000 of them 1.3 GB) before the count was looked at."""
    if isinstance(value, dict) and len(value) > MAX_METADATA_KEYS:
        raise ValueError(messages.metadata_too_many_keys())
    return value


def metadata_overfull(body: Any) -> bool:
    """Whether a body's `metadata` has more than 16 keys: it is refused for that (see
    `metadata_few_keys`), and the body's other values are not walked first (`check_json`)."""
    metadata = body.get("metadata") if isinstance(body, dict) else None
    return isinstance(metadata, dict) and len(metadata) > MAX_METADATA_KEYS


def check_metadata(value: dict[str, str] | None) -> dict[str, str] | None:
    """The hosted limits on `metadata`: 16 keys, keys of 64 characters, values of 512."""
    if value is not None:
        if len(value) > MAX_METADATA_KEYS:
            raise ValueError(messages.metadata_too_many_keys())
        for key, item in value.items():
            if len(key) > 64:
                raise ValueError(messages.metadata_key_too_long(key))
            if len(item) > 512:
                raise ValueError(messages.metadata_value_too_long(key))
    return value


SafetyIdentifier = Annotated[str, StringConstraints(max_length=128)]
"""`safety_identifier`: "a maximum length of 128 characters" (the SDK's docstring), on every route
that takes it (create, compact, conversations), refused alike above it."""

ServiceTier = Literal["auto", "default", "flex", "scale", "priority", "fast", "ultrafast"]
"""`service_tier` on a create (the SDK's `ServiceTier`, the same in the oldest SDK the project locks)."""

PromptCacheRetention = Literal["in_memory", "24h"]

MAX_OUTPUT_TOKENS = 2**31 - 1
"""The most `max_output_tokens` may ask for (a 32-bit integer, past any model's output limit): the
response echoes it, and an integer past 64 bits (10**30) was taken and echoed, which no client's
JSON reads back as sent."""

MODEL_PATTERN = r"^[^\x00-\x1f\x7f]*$"
"""What a `model` may hold: no control character (a NUL or a line break names no model, and the
response echoes its `model`)."""

Model = Annotated[str, StringConstraints(min_length=1, pattern=MODEL_PATTERN)]
"""`model`: an empty string is refused as the hosted API refuses any empty string it requires
(`empty_string`), and one holding a control character as a string that does not match its pattern
(`invalid_value`, param `model`); a missing or null one is left to the emulator's default author."""


class Reasoning(WireModel):
    """`reasoning` (the SDK's shared `Reasoning`): its enums checked, its keys the SDK's. The request
    keeps the object as sent (a dict): the response echoes it as given."""

    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None
    """Deprecated for `summary` (the SDK's docstring), still taken."""
    context: Literal["auto", "current_turn", "all_turns"] | None = None
    mode: str | None = None
    """"standard", "pro" or another string (the SDK types it open)."""


def check_reasoning(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Validates `reasoning` as `Reasoning` (its errors located under `reasoning`) and keeps the dict."""
    if value is not None:
        Reasoning.model_validate(value)
    return value


class StreamOptions(WireModel):
    """`stream_options` (the SDK's `StreamOptions`, on a create and on an agent session): its one
    key, any other an unknown parameter as elsewhere. The request keeps the object as sent."""

    include_obfuscation: bool | None = None


def check_stream_options(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Validates `stream_options` as `StreamOptions` (its errors located under `stream_options`)."""
    if value is not None:
        StreamOptions.model_validate(value)
    return value


class TextConfig(WireModel):
    """`text` (the SDK's `ResponseTextConfig`): a `format` of a known type with its keys, a known
    `verbosity`. Kept as sent (a dict), as `reasoning` is; a json_schema format's schema is checked
    as a JSON Schema with the tools' (`contract.check_text_formats`)."""

    format: Annotated[PlainTextFormat | SchemaTextFormat | JsonObjectFormat, Field(discriminator="type")] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


def check_text(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """Validates `text` as `TextConfig` (its errors located under `text`) and keeps the dict."""
    if value is not None:
        TextConfig.model_validate(value)
    return value


def text_format(value: dict[str, Any] | None) -> SchemaTextFormat | None:
    """The json_schema format of a request's `text` (validated by `check_text`), or None. Built
    without validating it again (its schema is not walked a second time)."""
    found = (value or {}).get("format")
    if isinstance(found, dict) and found.get("type") == "json_schema":
        return SchemaTextFormat.model_construct(**found)
    return None


Includable = Literal[
    "file_search_call.results",
    "web_search_call.results",
    "web_search_call.action.sources",
    "message.input_image.image_url",
    "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
    "reasoning.encrypted_content",
    "message.output_text.logprobs",
]


class Conversational(WireModel):
    """The fields a create and a token count share; checked with `check_json` before validation."""

    model: Model | None = None
    input: str | list[InputItem] | None = None
    instructions: str | None = None
    tools: list[Tool] | None = None

    @field_validator("input", mode="wrap")
    @classmethod
    def _known_first(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """A replayed conversation's known items are validated models already (`wire.known`):
        only the items after them are validated. Should those fail, the whole input is validated,
        so that the errors name the items by their place in the input as sent."""
        known = known_count(value)
        if not known:
            return stepped(value, handler)
        try:
            new = stepped(list(value[known:]), handler)
        except ValidationError:
            return stepped(list(value), handler)
        return [*value[:known], *new]

    _tools_stepped = field_validator("tools", mode="wrap")(stepped)

    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    previous_response_id: str | None = None
    conversation: str | OpenJSON | None = None
    reasoning: OpenJSON | None = None
    text: OpenJSON | None = None
    truncation: Literal["auto", "disabled"] | None = None

    _reasoning_checked = field_validator("reasoning")(check_reasoning)
    _text_checked = field_validator("text")(check_text)

    @model_validator(mode="before")
    @classmethod
    def _sane(cls, value: Any) -> Any:
        check_json(value)
        return value

    @property
    def function_tools(self) -> list[FunctionTool]:
        return [t for t in self.tools or () if isinstance(t, FunctionTool)]

    @property
    def ptc_enabled(self) -> bool:
        return any(isinstance(t, ProgrammaticToolCalling) for t in self.tools or ())

    @property
    def programmatic_tools(self) -> tuple[str, ...]:
        """Top-level function tools that allow programmatic callers, in order, as declared. What a
        program may call (namespaces, deferred and loaded tools) is `toolset.Toolset.programmatic`."""
        if not self.ptc_enabled:
            return ()
        return tuple(t.name for t in self.function_tools if t.programmatic)


class BackgroundOptions(WireModel):
    """`background_options` (openai 3.57): how a background response is run."""

    completion_window: Literal["soonest", "2h", "8h"] | None = None
    """`soonest` (the default); `2h` and `8h` select discounted background execution and need
    `background: true`, Standard processing and no `stream`."""
    continuation_id: str | None = None
    """Groups background requests; it adds no prior history to the input."""


class AccessPrograms(WireModel):
    """`access_programs` (openai 3.63): the domain-specific access programs a request asks for. The
    Response reports the effective one (`Response.access_programs`): the one asked for, or null for
    the implicit Standard fallback when none was (models without a Cyber tier use Standard). The
    emulator's one project holds every program, so a Daybreak request is granted, never the 403 an
    unauthorized organization gets."""

    cyber: Literal["standard", "daybreak_blue", "daybreak_red"] | None = None

    def effective(self) -> dict[str, str] | None:
        return {"cyber": self.cyber} if self.cyber is not None else None


class CreateRequest(Conversational):
    """`ResponseCreateParams`: every field optional, as in the SDK."""

    store: bool | None = None
    stream: bool | None = None
    stream_options: OpenJSON | None = None
    include: list[Includable] | None = None
    metadata: dict[str, str] | None = None
    max_tool_calls: Annotated[int, Field(ge=1)] | None = None
    """The hosted bound: below 1 is `integer_below_min_value`."""
    max_output_tokens: Annotated[int, Field(ge=16, le=MAX_OUTPUT_TOKENS)] | None = None
    """The hosted bound: below 16 is `integer_below_min_value`."""
    background: bool | None = None
    background_options: BackgroundOptions | None = None
    user: str | None = None
    safety_identifier: SafetyIdentifier | None = None
    prompt_cache_key: str | None = None
    prompt_cache_options: OpenJSON | None = None
    prompt_cache_retention: PromptCacheRetention | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    """"between 0 and 2" (the SDK's docstring), refused outside it as the hosted API refuses it."""
    top_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    """A probability mass: 0 to 1."""
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    """"An integer between 0 and 20" (the SDK's docstring)."""
    service_tier: ServiceTier | None = None
    prompt: OpenJSON | None = None
    context_management: list[OpenJSON] | None = None
    moderation: OpenJSON | None = None
    image: OpenJSON | None = None
    access_programs: AccessPrograms | None = None
    # WebSocket mode only (`response.create` frames).
    generate: bool | None = None
    stream_id: str | None = None

    _metadata_counted = field_validator("metadata", mode="before")(metadata_few_keys)
    _metadata_limits = field_validator("metadata")(check_metadata)
    _stream_options_checked = field_validator("stream_options")(check_stream_options)
    _include_stepped = field_validator("include", mode="wrap")(stepped)

    @model_validator(mode="before")
    @classmethod
    def _sane(cls, value: Any) -> Any:
        if metadata_overfull(value):
            return value
        items = value.get("input") if isinstance(value, dict) else None
        known = known_count(items)  # a replayed conversation's known items, already validated
        check_json({**value, "input": items[known:]} if items is not None and known else value)
        return value


class CountTokensRequest(Conversational):
    """`POST /v1/responses/input_tokens`."""

    personality: str | None = None


class CompactRequest(WireModel):
    """`POST /v1/responses/compact` (`ResponseCompactParams`): `model` is required (it may be null)."""

    model: Model | None
    input: str | list[InputItem] | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_options: OpenJSON | None = None
    prompt_cache_retention: PromptCacheRetention | None = None
    service_tier: Literal["auto", "default", "fast", "flex", "priority"] | None = None
    image: OpenJSON | None = None
    safety_identifier: SafetyIdentifier | None = None
    """openai 3.60; echoed on the `CompactedResponse`."""

    _input_stepped = field_validator("input", mode="wrap")(stepped)

    @model_validator(mode="before")
    @classmethod
    def _sane(cls, value: Any) -> Any:
        check_json(value)
        return value


def conversation_id(value: Any) -> str | None:
    """The id in a request's `conversation` field: a string, or `{"id": ...}`."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        extra = sorted(key for key in value if key != "id")
        if extra:  # the SDK's object has its id alone: another key would be taken and ignored
            raise messages.unknown_parameter(f"conversation.{extra[0]}")
        return str(value["id"])
    raise messages.conversation_id_invalid()
