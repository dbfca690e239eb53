"""The official Go SDK, github.com/openai/openai-go/v3, against the real server.

`tests/sdk/go` is a program of the project's own (`sdkflows`) that runs each flow of the SDK
matrix with the Go SDK and prints what the client saw as JSON. `make test` builds it first, twice
from the same source (`.build/sdk-go/`): `sdkflows` against the newest release (go.mod) and
`sdkflows-oldest` against the oldest release that has both the PTC types and the beta Agents
sessions (go.oldest.mod; it predates Responses WebSockets, so that flow is not in it). Each test
checks the flow's result and what the server's journal says it saw, and names the release it ran,
as the binary itself reports it (`runtime/debug.ReadBuildInfo`).

The Go decoder is lenient (a missing field decodes as its zero value), so the program also walks
every body it decodes and reports each field the SDK's types declare required that the body left
out, each value it could not decode as its type, and each union variant it does not know. A test
fails on any such problem not listed in `GAPS` below, and on a listed one that no longer happens.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import valid

pytestmark = pytest.mark.sdk

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / ".build" / "sdk-go"
BINARIES = {"newest": BUILD / "sdkflows", "oldest": BUILD / "sdkflows-oldest"}

EXPECTED = "sku_123: 42 units available against 31 requested, so the shortage is 0 units."
CUSTOMER = "Customer 123 is Example Customer, on the pro plan."
PAUSED = ["program", "function_call", "function_call"]
FINISHED = ["program_output", "message"]

RESPONSE_FLOWS = ("store_false", "previous_response_id", "stream", "websocket", "compact", "conversation")
FLOWS = (*RESPONSE_FLOWS, "agents")
NO_WEBSOCKET = "the oldest build has no Responses WebSocket (client.Responses.Connect came in openai-go v3.62.0)"


@dataclass(frozen=True)
class Gap:
    """A problem the Go program reports today that a test accepts, and why."""

    pattern: str
    """Matched against a problem with its list indexes dropped (`items.data[3]` is `items.data[]`)."""
    flows: tuple[str, ...]
    builds: tuple[str, ...]
    reason: str


GAPS = (
    Gap(
        r'^compacted\.output\[\]\.content\[\]: type "input_text" is no variant of ResponseOutputMessageContentUnion$',
        ("compact",),
        ("newest", "oldest"),
        "Not the server's fault: the compacted output is the window's user messages, then one compaction item "
        "(the SDK's docstring); openai-go types an output `message` as an assistant message, whose content knows "
        "output_text and refusal only. Its README says to replay those items from their raw JSON, as the flow does.",
    ),
)


def check_problems(problems: list[str], flow: str, build: str) -> None:
    gaps = [g for g in GAPS if flow in g.flows and build in g.builds]
    shapes = {re.sub(r"\[\d+\]", "[]", p) for p in problems}
    new = sorted(s for s in shapes if not any(re.search(g.pattern, s) for g in gaps))
    assert not new, "the Go SDK's types disagree with what the server sent:\n" + "\n".join(new)
    gone = [g.reason for g in gaps if not any(re.search(g.pattern, s) for s in shapes)]
    assert not gone, "fixed (drop them from GAPS):\n" + "\n".join(gone)


@functools.cache
def sdk_version(build: str) -> str:
    binary = BINARIES[build]
    if not binary.is_file():
        pytest.fail(f"{binary.relative_to(ROOT)} is missing: run `make test` (it builds tests/sdk/go first)")
    done = subprocess.run([str(binary), "version"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def run_flow(build: str, flow: str, emulator: PTCEmulator) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["OPENAI_API_KEY"] = emulator.api_key  # the key in the environment, the scoped URL as an argument
    done = subprocess.run(
        [str(BINARIES[build]), flow, emulator.base_url], env=env, capture_output=True, text=True, timeout=110
    )
    assert done.returncode == 0, f"the Go flow {flow} failed:\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["flow"] == flow
    return result


def cases() -> list[Any]:
    out = []
    for build in BINARIES:
        for flow in FLOWS:
            marks = [pytest.mark.skip(reason=NO_WEBSOCKET)] if (build, flow) == ("oldest", "websocket") else []
            out.append(pytest.param(build, flow, id=f"{build}-{flow}", marks=marks))
    return out


@pytest.mark.parametrize(("build", "flow"), cases())
def test_go_sdk_flow(build: str, flow: str, ptc_emulator: PTCEmulator, client_version: Any) -> None:
    version = sdk_version(build)
    result = run_flow(build, flow, ptc_emulator)
    assert result["sdk"] == version
    check_problems(result["problems"], flow, build)
    if flow == "agents":
        check_agents(result, ptc_emulator)
    else:
        check_loop(result, flow, ptc_emulator)
    client_version("openai-go", version)


# ---- the guide's loop, however it continues --------------------------------------------------


def check_loop(result: dict[str, Any], flow: str, emulator: PTCEmulator) -> None:
    assert result["answer"] == EXPECTED
    assert [r["output"] for r in result["responses"]] == [PAUSED, FINISHED]
    (program,) = result["programs"]
    assert program["fingerprint"] and "tools.get_inventory" in program["code"]
    # Both calls came from the program, and went back with the caller the client copied.
    assert sorted(c["name"] for c in result["calls"]) == ["get_demand", "get_inventory"]
    assert all(c["caller"] == {"type": "program", "caller_id": program["call_id"]} for c in result["calls"])
    stored = flow in ("previous_response_id", "conversation")
    assert [r["store"] for r in result["responses"]] == [stored, stored]

    journal = [e for e in emulator.journal if e["path"] == "/v1/responses"]
    assert [e["route"] for e in journal] == [PAUSED, FINISHED], "what the server's scripted model did"
    assert [e["response_id"] for e in journal] == [r["id"] for r in result["responses"]]
    assert all(e["status"] == 200 and e["scenario"] == "inventory__sku_123" for e in journal)
    assert all(e["response"]["store"] is stored for e in journal)
    assert {e["method"] for e in journal} == ({"WS"} if flow == "websocket" else {"POST"})
    first, second = (e["request"] for e in journal)
    (message,) = first["input"]
    assert message["role"] == "user" and message["content"] == "Compare inventory with demand for sku_123."
    assert_tools_sent(first)
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert sorted(o["call_id"] for o in outputs) == sorted(c["call_id"] for c in result["calls"])
    for output in outputs:
        assert output["caller"] == {"type": "program", "caller_id": program["call_id"]}
        assert json.loads(output["output"])["sku"] == "sku_123"
    CHECKS[flow](result, first, second, journal)


def assert_tools_sent(request: dict[str, Any]) -> None:
    tools = {t.get("name", t["type"]): t for t in request["tools"]}
    assert set(tools) == {"get_inventory", "get_demand", "programmatic_tool_calling"}
    for name in ("get_inventory", "get_demand"):
        assert tools[name]["allowed_callers"] == ["programmatic"]
        assert tools[name]["output_schema"]["required"][0] == "sku"


def replayed(first_response: dict[str, Any], second: dict[str, Any]) -> None:
    """store:false: the second request replays the first response's items exactly as sent."""
    types = [i.get("type", "message") for i in second["input"]]
    assert types == ["message", *PAUSED, "function_call_output", "function_call_output"]
    assert second["input"][1:4] == first_response["output"]  # program (fingerprint too) and calls, unchanged
    assert "previous_response_id" not in second


def check_store_false(result: dict[str, Any], first: Any, second: Any, journal: list[dict[str, Any]]) -> None:
    assert first["store"] is False and second["store"] is False
    replayed(journal[0]["response"], second)


def check_previous_response_id(result: dict[str, Any], first: Any, second: Any, journal: list[dict[str, Any]]) -> None:
    assert "store" not in first  # stored by default
    assert second["previous_response_id"] == result["responses"][0]["id"]
    assert [i["type"] for i in second["input"]] == ["function_call_output", "function_call_output"]
    assert result["responses"][1]["previous_response_id"] == result["responses"][0]["id"]
    extra = result["extra"]
    assert extra["retrieved_first"] == {"id": result["responses"][0]["id"], "status": "completed", "output": PAUSED}
    assert extra["last_input_items"] == ["function_call_output", "function_call_output"]


def check_stream(result: dict[str, Any], first: Any, second: Any, journal: list[dict[str, Any]]) -> None:
    assert first["stream"] is True and second["stream"] is True
    replayed(journal[0]["response"], second)
    streams = result["extra"]["streams"]
    assert [s["items_done"] for s in streams] == [PAUSED, FINISHED]
    assert all(s["sequence_ordered"] for s in streams)
    assert streams[0]["text"] == "" and streams[1]["text"] == EXPECTED  # the deltas make the answer


def check_websocket(result: dict[str, Any], first: Any, second: Any, journal: list[dict[str, Any]]) -> None:
    # Every event of both responses reached the lane: each carried its stream_id.
    assert all(set(t["stream_ids"]) == {"inventory"} for t in result["extra"]["socket"])
    assert first["stream_id"] == second["stream_id"] == "inventory"
    # store:false continued by id on the socket that holds it, with the new items only.
    assert second["previous_response_id"] == result["responses"][0]["id"]
    assert [i["type"] for i in second["input"]] == ["function_call_output", "function_call_output"]


def check_compact(result: dict[str, Any], first: Any, second: Any, journal: list[dict[str, Any]]) -> None:
    compacted = result["extra"]["compacted"]
    assert compacted["object"] == "response.compaction"
    assert compacted["output"] == ["message", "compaction"]
    assert compacted["input_tokens"] > 0 and compacted["output_tokens"] == 0
    # The program paused before the compaction resumes from the calls' outputs sent after it.
    types = [i.get("type", "message") for i in second["input"]]
    assert types == ["message", "compaction", "function_call_output", "function_call_output"]
    assert second["input"][1]["encrypted_content"]


def check_conversation(result: dict[str, Any], first: Any, second: Any, journal: list[dict[str, Any]]) -> None:
    conversation = result["extra"]["conversation_id"]
    assert first["conversation"] == conversation and second["conversation"] == {"id": conversation}
    assert [i["type"] for i in second["input"]] == ["function_call_output", "function_call_output"]
    assert [r["conversation"] for r in result["responses"]] == [conversation, conversation]
    items = result["extra"]["items"]
    assert [i["type"] for i in items] == [
        "message",
        *PAUSED,
        "function_call_output",
        "function_call_output",
        *FINISHED,
    ]
    program = result["programs"][0]["call_id"]
    assert all(i["caller"] == {"type": "program", "caller_id": program} for i in items[2:4])
    assert result["extra"]["has_more"] is False


CHECKS = {
    "store_false": check_store_false,
    "previous_response_id": check_previous_response_id,
    "stream": check_stream,
    "websocket": check_websocket,
    "compact": check_compact,
    "conversation": check_conversation,
}


# ---- the Agents API's function-tool flow ------------------------------------------------------


def check_agents(result: dict[str, Any], emulator: PTCEmulator) -> None:
    assert result["answer"] == CUSTOMER
    extra = result["extra"]
    (action,) = extra["actions"]
    assert action["name"] == "get_customer" and action["arguments"] == {"customer_id": "123"}
    assert extra["session_agent_id"] == extra["agent_id"]
    events = extra["events"]
    assert "agent.session.requires_action" in events and events[-1] == "agent.session.idle"
    assert events.index("agent.session.requires_action") < events.index("agent.session.idle")
    assert extra["final_status"] == "idle" and extra["final_required_actions"] == 0
    assert extra["turns"] == ["completed"]
    # The program is one command_execution item, completed once it returned; its call and the
    # client's output; the answer.
    assert extra["items"] == ["message", "command_execution", "function_call", "function_call_output", "message"]
    # What the server holds, read with openai-python's models (strictly validated).
    with emulator.client(max_retries=0) as python:
        session = valid(python.beta.agents.sessions.retrieve(extra["session_id"]))
        assert session.status == "idle" and session.agent.id == extra["agent_id"]
        items = [valid(i) for i in python.beta.agents.sessions.items.list(extra["session_id"])]
        call = next(i for i in items if i.type == "function_call")
        output = next(i for i in items if i.type == "function_call_output")
        assert call.call_id == output.call_id == action["call_id"] and output.status == "completed"
        assert json.loads(output.output) == {"found": True, "customer": {"name": "Example Customer", "plan": "pro"}}
        (turn,) = [valid(t) for t in python.beta.agents.sessions.turns.list(extra["session_id"])]
        assert turn.id == action["turn_id"] and turn.status == "completed"
    # Every route needs `OpenAI-Beta: agents=v1`: the flow ran because the Go SDK sent it.
    refused = httpx.get(
        f"{emulator.base_url}/agents/sessions/{extra['session_id']}",
        headers={"Authorization": f"Bearer {emulator.api_key}"},
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_beta"
