"""A `tool_choice` naming a hosted tool the request does not declare is the hosted 400 (`Tool
choice 'image_generation' not found in 'tools' parameter.`), as for `shell` and `apply_patch`.
Before, `{"type": "image_generation"}`, `web_search_preview`, `file_search`, `code_interpreter`,
`computer_use_preview` and `mcp` without their tool were accepted (the scripted model answered as if
nothing were asked), where the hosted API refuses them."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

PTC = {"type": "programmatic_tool_calling"}
CHOICES = ["image_generation", "web_search_preview", "file_search", "code_interpreter", "computer_use_preview"]


def _post(unit_http: TestClient, path: str = "/v1/responses", **body: Any) -> Any:
    return unit_http.post(path, json={"model": "m", "input": "```js\ntext('x');\n```", **body})


@pytest.mark.parametrize("kind", CHOICES)
@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/input_tokens"])
def test_a_hosted_tool_choice_without_its_tool_is_refused(unit_http: TestClient, kind: str, path: str) -> None:
    reply = _post(unit_http, path, tools=[PTC], tool_choice={"type": kind})
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"] == {
        "message": f"Tool choice '{kind}' not found in 'tools' parameter.",
        "type": "invalid_request_error",
        "param": "tool_choice",
        "code": None,
    }


def test_an_mcp_choice_without_an_mcp_tool_is_refused(unit_http: TestClient) -> None:
    reply = _post(unit_http, tools=[PTC], tool_choice={"type": "mcp", "server_label": "docs"})
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"]["message"] == "Tool choice 'mcp' not found in 'tools' parameter."


@pytest.mark.parametrize(
    ("choice", "tool"),
    [
        ("web_search_preview", {"type": "web_search_preview"}),
        ("web_search_preview", {"type": "web_search"}),
        ("web_search_preview_2025_03_11", {"type": "web_search_preview"}),
        (
            "computer_use_preview",
            {"type": "computer_use_preview", "display_width": 8, "display_height": 8, "environment": "browser"},
        ),
        ("computer", {"type": "computer"}),
    ],
)
def test_a_hosted_choice_with_a_tool_of_its_family_passes_the_check(
    unit_http: TestClient, choice: str, tool: dict[str, Any]
) -> None:
    reply = _post(unit_http, "/v1/responses/input_tokens", tools=[tool, PTC], tool_choice={"type": choice})
    assert reply.status_code == 200, reply.text[:300]


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/input_tokens"])
@pytest.mark.parametrize("choice", [{"type": "bogus"}, {"type": "bogus", "name": "f"}, {"type": "x" * 1_000_000}])
def test_a_tool_choice_of_an_unknown_type_is_refused(unit_http: TestClient, path: str, choice: dict[str, Any]) -> None:
    """Before, an open model took any `type` and the choice was ignored (200)."""
    reply = _post(unit_http, path, tools=[PTC], tool_choice=choice)
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    assert error["code"] == "invalid_value" and error["param"] == "tool_choice.type", error
    assert error["message"].startswith(f"Invalid value: '{choice['type'][:256]}"), error["message"][:300]
    assert "Supported values are: 'allowed_tools', 'file_search'," in error["message"]
    assert "'apply_patch', and 'shell'." in error["message"]
    assert len(reply.content) < 2048


HOSTED_TOOLS: dict[str, dict[str, Any]] = {
    "file_search": {"type": "file_search", "vector_store_ids": ["vs_1"]},
    "web_search_preview": {"type": "web_search_preview"},
    "web_search_preview_2025_03_11": {"type": "web_search_preview"},
    "computer": {"type": "computer"},
    "computer_use": {"type": "computer"},
    "computer_use_preview": {"type": "computer"},
    "image_generation": {"type": "image_generation"},
    "code_interpreter": {"type": "code_interpreter", "container": {"type": "auto"}},
}
MCP = {"type": "mcp", "server_label": "docs", "server_url": "https://example.com/mcp"}


@pytest.mark.parametrize("kind", sorted(HOSTED_TOOLS))
@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/input_tokens"])
def test_a_hosted_tool_choice_takes_no_other_field(unit_http: TestClient, kind: str, path: str) -> None:
    """The SDK's `ToolChoiceTypes` has `type` alone: before, `{"type": "file_search", "bogus": 1}` was
    a 200 echoing `bogus` (shell and programmatic_tool_calling choices were already refused)."""
    reply = _post(unit_http, path, tools=[HOSTED_TOOLS[kind], PTC], tool_choice={"type": kind, "bogus": 1})
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    assert error["code"] == "unknown_parameter" and error["param"] == "tool_choice.bogus", error


@pytest.mark.parametrize(
    ("choice", "code", "param"),
    [
        ({"type": "mcp"}, "missing_required_parameter", "tool_choice.server_label"),
        ({"type": "mcp", "server_label": 5}, "invalid_type", "tool_choice.server_label"),
        ({"type": "mcp", "server_label": "docs", "bogus": 1}, "unknown_parameter", "tool_choice.bogus"),
        ({"type": "mcp", "server_label": "other"}, None, "tool_choice"),
    ],
)
def test_an_mcp_choice_is_checked_as_the_sdk_types_it(
    unit_http: TestClient, choice: dict[str, Any], code: str | None, param: str
) -> None:
    """`ToolChoiceMcp.server_label` is a required string naming an `mcp` tool in `tools`: before, a
    choice without it, with a number, or naming no such tool was a 200."""
    reply = _post(unit_http, "/v1/responses/input_tokens", tools=[MCP, PTC], tool_choice=choice)
    assert reply.status_code == 400, reply.text[:300]
    error = reply.json()["error"]
    assert (error["code"], error["param"]) == (code, param), error
    if code is None:
        assert error["message"] == "Tool choice 'mcp' not found in 'tools' parameter."


def test_an_mcp_choice_naming_its_tool_passes_the_check(unit_http: TestClient) -> None:
    for choice in ({"type": "mcp", "server_label": "docs"}, {"type": "mcp", "server_label": "docs", "name": "x"}):
        reply = _post(unit_http, "/v1/responses/input_tokens", tools=[MCP, PTC], tool_choice=choice)
        assert reply.status_code == 200, reply.text[:300]
