"""An `input_image` part's `detail` is one of the SDK's `ImageDetail` values (`low`, `high`, `auto`,
`original`); another is the hosted `Invalid value` 400. Before, any string was taken (`detail:
"bogus"` answered 200), in a message's content and in a tool output's parts."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

IMAGE = "data:image/png;base64,iVBORw0KGgo="


def _post(unit_http: TestClient, detail: str) -> Any:
    part = {"type": "input_image", "image_url": IMAGE, "detail": detail}
    message = {"role": "user", "content": [part, {"type": "input_text", "text": "```js\ntext('x');\n```"}]}
    return unit_http.post("/v1/responses", json={"model": "m", "input": [message]})


def test_an_unknown_image_detail_is_refused(unit_http: TestClient) -> None:
    reply = _post(unit_http, "bogus")
    assert reply.status_code == 400, reply.text[:300]
    assert reply.json()["error"] == {
        "message": "Invalid value: 'bogus'. Supported values are: 'low', 'high', 'auto', and 'original'.",
        "type": "invalid_request_error",
        "param": "input[0].content[0].detail",
        "code": "invalid_value",
    }


@pytest.mark.parametrize("detail", ["low", "high", "auto", "original"])
def test_every_image_detail_of_the_sdk_is_taken(unit_http: TestClient, detail: str) -> None:
    assert _post(unit_http, detail).status_code == 200
