"""Shared pieces of the tests that drive a real server: programs, a client-side driver, the envelope check.

Those tests talk to a real server over HTTP on 127.0.0.1: either the app under uvicorn in a
thread of the test process (`make_server`) or `python -m ptc_emulator serve` as a subprocess
(`server_process`, for restarts, `kill -9`, the CLI and the server's own log output); both
fixtures are in tests/conftest.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.support import ADD_TOOL

# ---- programs and tools ---------------------------------------------------------------------------

ECHO_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "echo",
    "description": "returns the text it was given, or a generated text of the requested size",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}, "size": {"type": "integer"}}},
    "allowed_callers": ["programmatic"],
}
PTC_TOOLS: list[dict[str, Any]] = [{"type": "programmatic_tool_calling"}, ADD_TOOL, ECHO_TOOL]


def program_message(code: str) -> str:
    """A user message whose fenced js block the scripted model runs as its program."""
    return f"Run this program.\n```js\n{code}\n```"


def pausing_program(start: int, pauses: int) -> str:
    """A program that pauses `pauses` times, on two parallel calls each time.

    Each pause adds 3 * i to the total, so it ends with `total=<expected_total(start, pauses)>`;
    a distinct `start` per client makes a crossed wire between two conversations show."""
    return (
        f"let total = {start};\n"
        f"for (let i = 1; i <= {pauses}; i++) {{\n"
        "  const [x, y] = await Promise.all([tools.add({a: total, b: i}), tools.add({a: i, b: i})]);\n"
        "  total = x.value + y.value;\n"
        "}\n"
        "text(`total=${total}`);"
    )


def expected_total(start: int, pauses: int) -> str:
    return f"total={start + 3 * pauses * (pauses + 1) // 2}"


def answer_tool(name: str, arguments: dict[str, Any]) -> str:
    """What the client answers to a program's tool call (the output's text)."""
    if name == "add":
        return json.dumps({"value": arguments["a"] + arguments["b"]})
    if name == "echo":
        if "size" in arguments:
            return json.dumps({"text": "e" * int(arguments["size"])})
        return json.dumps({"text": arguments.get("text", "")})
    raise AssertionError(f"unexpected tool {name!r}")


# ---- a client-side driver ---------------------------------------------------------------------------


@dataclass
class ProgramRun:
    """One conversation driven to its end: the requests to send, given the responses received.

    With `store=False` every request replays the whole conversation (state lives in the items,
    their fingerprints and the server's secret); with `store=True` each continues from the
    previous response by id and sends only the new tool outputs."""

    code: str
    store: bool
    tools: list[dict[str, Any]] = field(default_factory=lambda: list(PTC_TOOLS))
    answer: Callable[[str, dict[str, Any]], str] = answer_tool
    max_requests: int = 200
    items: list[dict[str, Any]] = field(default_factory=list)
    response_ids: list[str] = field(default_factory=list)
    final: Any = None

    def first(self) -> dict[str, Any]:
        self.items = [{"type": "message", "role": "user", "content": program_message(self.code)}]
        return {"model": "ptc-test", "input": list(self.items), "tools": self.tools, "store": self.store}

    def next(self, response: Any) -> dict[str, Any] | None:
        """The request after `response`, or None when the conversation has ended."""
        self.response_ids.append(response.id)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            self.final = response
            return None
        if len(self.response_ids) >= self.max_requests:
            raise AssertionError(f"still calling tools after {self.max_requests} requests")
        outputs = [
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": self.answer(call.name, json.loads(call.arguments)),
                "caller": call.caller.model_dump(mode="json", exclude_none=True) if call.caller else None,
            }
            for call in calls
        ]
        if self.store:
            return {
                "model": "ptc-test",
                "input": outputs,
                "tools": self.tools,
                "store": True,
                "previous_response_id": response.id,
            }
        self.items += [item.model_dump(mode="json", exclude_none=True) for item in response.output]
        self.items += outputs
        return {"model": "ptc-test", "input": list(self.items), "tools": self.tools, "store": False}

    # the outcome, once `next` returned None

    @property
    def program_output(self) -> Any:
        outputs = [item for item in self.final.output if item.type == "program_output"]
        assert len(outputs) == 1, [item.type for item in self.final.output]
        return outputs[0]

    @property
    def text(self) -> str:
        return str(self.final.output_text)


def drive(client: Any, run: ProgramRun) -> ProgramRun:
    """Drive `run` to its end with a synchronous `openai.OpenAI`."""
    request: dict[str, Any] | None = run.first()
    while request is not None:
        request = run.next(client.responses.create(**request))
    return run


async def adrive(client: Any, run: ProgramRun) -> ProgramRun:
    """Drive `run` to its end with an `openai.AsyncOpenAI`."""
    request: dict[str, Any] | None = run.first()
    while request is not None:
        request = run.next(await client.responses.create(**request))
    return run


# ---- the error envelope -----------------------------------------------------------------------------


def assert_envelope(
    response: httpx.Response,
    status: int,
    message: str | re.Pattern[str] | None = None,
    *,
    type: str | None = "invalid_request_error",
    param: Any = ...,
    code: Any = ...,
) -> dict[str, Any]:
    """`response` is OpenAI's error envelope with this status; `message` is a substring or a pattern.

    `param` and `code` are checked when given (None included); `...` leaves them unchecked."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"].strip(), error
    assert isinstance(error["type"], str) and error["type"], error
    assert error["param"] is None or isinstance(error["param"], str), error
    assert error["code"] is None or isinstance(error["code"], str), error
    if type is not None:
        assert error["type"] == type, error
    if isinstance(message, re.Pattern):
        assert message.search(error["message"]), error
    elif message is not None:
        assert message in error["message"], error
    if param is not ...:
        assert error["param"] == param, error
    if code is not ...:
        assert error["code"] == code, error
    return error  # type: ignore[no-any-return]


def is_envelope(body: Any) -> bool:
    if not isinstance(body, dict) or set(body) != {"error"} or not isinstance(body["error"], dict):
        return False
    error = body["error"]
    return (
        set(error) == {"message", "type", "param", "code"}
        and isinstance(error["message"], str)
        and bool(error["message"])
        and isinstance(error["type"], str)
        and (error["param"] is None or isinstance(error["param"], str))
        and (error["code"] is None or isinstance(error["code"], str))
    )


# ---- servers ---------------------------------------------------------------------------------------
