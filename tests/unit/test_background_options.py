"""`background_options` (openai 3.57): accepted as the SDK sends it, and its constraint enforced
as its docstring states it: the `2h` and `8h` completion windows require `background: true`,
Standard processing, and `stream: false` or omitted. (Sent with `extra_body` so that the same test
runs on SDKs older than the field.)"""

from __future__ import annotations

from typing import Any

import openai
import pytest

CODE = "```js\ntext('hi')\n```"


@pytest.mark.parametrize(
    ("options", "params"),
    [
        ({"completion_window": "soonest"}, {}),
        ({"completion_window": "2h"}, {"background": True}),
        ({"completion_window": "8h", "continuation_id": "batch-7"}, {"background": True, "service_tier": "default"}),
        ({}, {}),
    ],
)
def test_what_the_constraint_allows_is_accepted(
    unit_sdk: openai.OpenAI, options: dict[str, Any], params: dict[str, Any]
) -> None:
    response = unit_sdk.responses.create(model="m", input=CODE, extra_body={"background_options": options}, **params)
    assert response.status in ("completed", "queued", "in_progress")
    assert "background_options" not in response.model_dump()  # not echoed on the Response


@pytest.mark.parametrize(
    ("options", "params", "message", "param"),
    [
        ({"completion_window": "2h"}, {}, "The '2h' completion window requires background: true.", None),
        (
            {"completion_window": "8h"},
            {"background": True, "service_tier": "flex"},
            "requires Standard processing",
            "service_tier",
        ),
        (
            {"completion_window": "2h"},
            {"background": True, "stream": True},
            "cannot be used with stream: true",
            "stream",
        ),
        ({"completion_window": "1h"}, {}, "Invalid value: '1h'", "background_options.completion_window"),
        ({"completion_window": "2h", "extra": 1}, {}, "Unknown parameter: 'background_options.extra'", None),
    ],
    ids=["2h-without-background", "8h-flex", "2h-stream", "unknown-window", "unknown-field"],
)
def test_what_it_refuses(
    unit_http: Any, options: dict[str, Any], params: dict[str, Any], message: str, param: str | None
) -> None:
    reply = unit_http.post("/v1/responses", json={"model": "m", "input": CODE, "background_options": options, **params})
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert message in error["message"]
    assert error["param"] == (param or error["param"])
    if param is None and "completion window requires background" in message:
        assert error["param"] == "background_options.completion_window"
