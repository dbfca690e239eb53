"""The body of `POST /v1/responses` (and of a WebSocket `response.create`), validated strictly."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Discriminator, Field, StringConstraints, Tag, field_validator, model_validator

from .hosted import CodeInterpreterTool
from .items import MAX_DEPTH, InputItem, OpenJSON, OpenModel, WireModel, check_depth
from .mcp import McpTool

__all__ = [
    "MAX_DEPTH",
    "OpenJSON",
    "AllowedToolsChoice",
    "CountTokensRequest",
    "CreateRequest",
    "FunctionTool",
    "FunctionToolChoice",
    "OtherTool",
    "ProgrammaticToolCalling",
    "ProgrammaticToolChoice",
    "Tool",
    "ToolChoice",
    "check_depth",
    "check_json",
]

ToolName = Annotated[str, StringConstraints(pattern=r"^[a-zA-Z0-9_-]{1,128}$")]


def check_json(value: Any) -> None:
    """What JSON can carry but a response cannot: NaN and the infinities (Python reads them), and
    lone UTF-16 surrogates (not encodable as UTF-8). Encoding it once, in C, finds both."""
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except RecursionError as e:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels") from e
    except ValueError as e:
        if isinstance(e, UnicodeEncodeError):
            raise ValueError("a string holds a lone UTF-16 surrogate, which is not valid Unicode") from e
        raise ValueError("numbers must be finite (NaN and Infinity are not JSON)") from e


class FunctionTool(WireModel):
    type: Literal["function"] = "function"
    name: ToolName
    description: str | None = None
    parameters: OpenJSON | None = None
    strict: bool | None = None
    allowed_callers: list[Literal["direct", "programmatic"]] | None = None
    """Who may call the tool; omitted means `["direct"]`."""
    output_schema: OpenJSON | None = None
    defer_loading: bool | None = None
    async_: bool | None = Field(default=None, alias="async")

    @property
    def programmatic(self) -> bool:
        return "programmatic" in (self.allowed_callers or ())

    @property
    def direct(self) -> bool:
        return self.allowed_callers is None or "direct" in self.allowed_callers


class ProgrammaticToolCalling(WireModel):
    type: Literal["programmatic_tool_calling"] = "programmatic_tool_calling"


class OtherTool(OpenModel):
    """A hosted tool the scripted model never uses (web search, MCP, ...): accepted and echoed."""

    type: str


def _tool_tag(value: Any) -> str:
    tag = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return tag if tag in ("function", "programmatic_tool_calling", "mcp", "code_interpreter") else "other"


Tool: TypeAlias = Annotated[
    Annotated[FunctionTool, Tag("function")]
    | Annotated[ProgrammaticToolCalling, Tag("programmatic_tool_calling")]
    | Annotated[McpTool, Tag("mcp")]
    | Annotated[CodeInterpreterTool, Tag("code_interpreter")]
    | Annotated[OtherTool, Tag("other")],
    Discriminator(_tool_tag),
]


class FunctionToolChoice(WireModel):
    type: Literal["function"]
    name: str


class ProgrammaticToolChoice(WireModel):
    type: Literal["programmatic_tool_calling"]


class AllowedToolsChoice(WireModel):
    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: list[OpenJSON]


class OtherToolChoice(OpenModel):
    type: str


def _choice_tag(value: Any) -> str:
    if isinstance(value, str):
        return "mode"
    tag = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return tag if tag in ("function", "programmatic_tool_calling", "allowed_tools") else "other"


ToolChoice: TypeAlias = Annotated[
    Annotated[Literal["none", "auto", "required"], Tag("mode")]
    | Annotated[FunctionToolChoice, Tag("function")]
    | Annotated[ProgrammaticToolChoice, Tag("programmatic_tool_calling")]
    | Annotated[AllowedToolsChoice, Tag("allowed_tools")]
    | Annotated[OtherToolChoice, Tag("other")],
    Discriminator(_choice_tag),
]

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

    model: str | None = None
    input: str | list[InputItem] | None = None
    instructions: str | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    previous_response_id: str | None = None
    conversation: str | OpenJSON | None = None
    reasoning: OpenJSON | None = None
    text: OpenJSON | None = None
    truncation: Literal["auto", "disabled"] | None = None

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
        """What a program may call: function tools that allow programmatic callers, in order."""
        if not self.ptc_enabled:
            return ()
        return tuple(t.name for t in self.function_tools if t.programmatic)


class CreateRequest(Conversational):
    """`ResponseCreateParams`: every field optional, as in the SDK."""

    store: bool | None = None
    stream: bool | None = None
    stream_options: OpenJSON | None = None
    include: list[Includable] | None = None
    metadata: dict[str, str] | None = None
    max_tool_calls: int | None = None
    max_output_tokens: int | None = None
    background: bool | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_options: OpenJSON | None = None
    prompt_cache_retention: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_logprobs: int | None = None
    service_tier: str | None = None
    prompt: OpenJSON | None = None
    context_management: list[OpenJSON] | None = None
    moderation: OpenJSON | None = None
    image: OpenJSON | None = None
    access_programs: OpenJSON | None = None
    # WebSocket mode only (`response.create` frames).
    generate: bool | None = None
    stream_id: str | None = None

    @field_validator("metadata")
    @classmethod
    def _metadata_limits(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None:
            if len(value) > 16:
                raise ValueError("metadata can hold at most 16 keys")
            for key, item in value.items():
                if len(key) > 64:
                    raise ValueError(f"metadata key '{key[:64]}...' is longer than 64 characters")
                if len(item) > 512:
                    raise ValueError(f"metadata value for '{key}' is longer than 512 characters")
        return value


class CountTokensRequest(Conversational):
    """`POST /v1/responses/input_tokens`."""

    personality: str | None = None
