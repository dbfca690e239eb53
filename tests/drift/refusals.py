"""What the emulator refuses of what the SDK lets a client send, each with its reason and the error
it answers (the hosted API's envelope, status 400). The guard sends each request to a real server
and holds the answer to the entry: a refusal listed here is one the server gives.

A path names what is refused as `requests.render` spells it; a refusal covers everything under
its path. Entries whose path the installed SDK does not have (an older release) are still sent:
they hold whatever the SDK."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["REFUSED", "Refusal"]


@dataclasses.dataclass(frozen=True)
class Refusal:
    reason: str
    url: str
    """The route's path (`{session_id}` and the like are filled in by the test), under `/v1`."""
    body: dict[str, Any]
    param: str
    code: str | None
    message: str
    """The error's message, exactly; or its beginning, when `prefix` (a message that lists what is
    supported, and grows with it)."""
    prefix: bool = False


_HOSTED_ITEMS = {
    "file_search_call": "file search",
    "computer_call": "computer use",
    "computer_call_output": "computer use",
    "web_search_call": "web search",
    "image_generation_call": "image generation",
}
"""Output items of hosted tools the emulator does not run: no conversation here can hold one."""

_ITEM_ROUTES = {
    "POST /v1/responses": ("/responses", "input", {"model": "m"}),
    "POST /v1/responses/input_tokens": ("/responses/input_tokens", "input", {"model": "m"}),
    "POST /v1/responses/compact": ("/responses/compact", "input", {"model": "m"}),
    "POST /v1/conversations": ("/conversations", "items", {}),
    "POST /v1/conversations/{conversation_id}/items": ("/conversations/{conversation_id}/items", "items", {}),
}

REFUSED: dict[tuple[str, str], Refusal] = {
    (route, f"{field}[][type={kind}]"): Refusal(
        reason=f"The emulator runs no {tool} tool, so no conversation here holds its items (docs/tools-hosted.md).",
        url=url,
        body={**base, field: [{"type": kind}]},
        param=f"{field}[0].type",
        code="invalid_value",
        message=f"Invalid value: '{kind}'. Supported values are: 'message', 'function_call',",
        prefix=True,
    )
    for route, (url, field, base) in _ITEM_ROUTES.items()
    for kind, tool in _HOSTED_ITEMS.items()
}

_STDIO = {
    "type": "mcp",
    "server_label": "local",
    "transport": {"type": "stdio", "command": "srv", "cwd": "/", "env": {"TOKEN": "t"}},
}
_STDIO_MESSAGE = (
    "MCP servers over the stdio transport are not emulated: they run in the session's environment. "
    "Serve the MCP server over HTTP (transport type 'http')."
)
_SESSION = {"environment": {"type": "none"}, "input": "hi"}

REFUSED.update(
    {
        ("POST /v1/responses", "prompt"): Refusal(
            reason="Saved prompts were shut down on November 30, 2026 (openai 3.63's docstring); none were kept here.",
            url="/responses",
            body={"model": "m", "input": "hi", "prompt": {"id": "pmpt_1"}},
            param="prompt",
            code="unsupported_parameter",
            message="Saved prompts ('prompt') were shut down on November 30, 2026: put the prompt's text in "
            "'instructions' and 'input' instead (prompts in application code).",
        ),
        ("POST /v1/agents/sessions", "agent.tools[][type=mcp].transport[type=stdio]"): Refusal(
            reason="A stdio MCP server runs in the session's environment, and sessions here have none.",
            url="/agents/sessions",
            body={**_SESSION, "agent": {"model": "m", "tools": [_STDIO]}},
            param="agent.tools[0].transport.type",
            code="unsupported_parameter",
            message=_STDIO_MESSAGE,
        ),
        ("POST /v1/agents/sessions/{session_id}", "agent.tools[][type=mcp].transport[type=stdio]"): Refusal(
            reason="A stdio MCP server runs in the session's environment, and sessions here have none.",
            url="/agents/sessions/{session_id}",
            body={"agent": {"tools": [_STDIO]}},
            param="agent.tools[0].transport.type",
            code="unsupported_parameter",
            message=_STDIO_MESSAGE,
        ),
        ("POST /v1/agents", "tools[][type=mcp].transport[type=stdio]"): Refusal(
            reason="A stdio MCP server runs in a session's environment, and sessions here have none.",
            url="/agents",
            body={"model": "m", "tools": [_STDIO]},
            param="tools[0].transport.type",
            code="unsupported_parameter",
            message=_STDIO_MESSAGE,
        ),
        ("POST /v1/agents/sessions", "vault_ids"): Refusal(
            reason="Vaults hold credentials for hosted environments; the emulator keeps none (null or [] is taken).",
            url="/agents/sessions",
            body={**_SESSION, "agent": {"model": "m"}, "vault_ids": ["vlt_1"]},
            param="vault_ids",
            code="unsupported_parameter",
            message="Vaults are not supported by the emulator.",
        ),
        ("POST /v1/agents/sessions/{session_id}", "vault_ids"): Refusal(
            reason="Vaults hold credentials for hosted environments; the emulator keeps none (null or [] clears).",
            url="/agents/sessions/{session_id}",
            body={"vault_ids": ["vlt_1"]},
            param="vault_ids",
            code="unsupported_parameter",
            message="Vaults are not supported by the emulator.",
        ),
        **{
            ("POST /v1/agents/sessions", f"environment[type={kind}]"): Refusal(
                reason="Only environment {type: none}: programs run in the emulator's V8 sandbox, not in a "
                "hosted or self-hosted environment.",
                url="/agents/sessions",
                body={"environment": {"type": kind}, "input": "hi", "agent": {"model": "m"}},
                param="environment.type",
                code="unsupported_parameter",
                message=f"Execution environments of type '{kind}' are not supported by the emulator: create the "
                'session with environment {"type": "none"} (programs and function tools need no environment).',
            )
            for kind in ("openai_hosted", "self_hosted")
        },
    }
)
