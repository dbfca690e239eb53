"""The official Java SDK, `com.openai:openai-java`, runs the guide's flows against the server with
`responseValidation(true)` on every call: the strictest response check of the official SDKs, which
throws on a missing required field, a wrong type, an unknown union variant or an unknown enum value.

The program is tests/sdk/java (`ptcemulator.sdk.Flows`), one source built by `make test` with Maven
against the two releases tests/sdk/java/pom.xml names (the newest, and an earlier one), each into
tests/sdk/java/target/openai-java-<release>; each test starts one build for one flow on its own
scoped URL, then checks what it printed and what the server's journal recorded. The bundled demo
scenarios play the model: the guide's inventory example (`inventory__sku_123`) and the Agents
guide's customer lookup (`customer__lookup`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import valid
from tests.support import validating_client

# A JVM per flow takes seconds idle, and many times that on two cores shared with busy neighbours.
pytestmark = [pytest.mark.sdk, pytest.mark.timeout(300)]

JAVA_DIR = Path(__file__).parent / "java"
_POM = (JAVA_DIR / "pom.xml").read_text("utf-8")


def _release(role: str) -> str:
    found = re.search(rf"<openai-java\.{role}>([^<]+)</openai-java\.{role}>", _POM)
    assert found is not None, f"tests/sdk/java/pom.xml names no openai-java.{role} release"
    return found.group(1)


NEWEST, EARLIER = _release("newest"), _release("earlier")
RELEASES = (EARLIER, NEWEST)

TASK = "Compare inventory with demand for sku_123."
EXPECTED = "sku_123: 42 units available against 31 requested, so the shortage is 0 units."
PAUSED = ["program", "function_call", "function_call"]
FINISHED = ["program_output", "message"]
OUTPUTS = {
    "get_inventory": {"sku": "sku_123", "available_units": 42},
    "get_demand": {"sku": "sku_123", "requested_units": 31},
}
# The JVM runs each flow for a few seconds: C1 alone compiles what it needs in half the CPU time.
JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


class CompactedOutputRejected(AssertionError):
    """openai-java refused the body of `POST /v1/responses/compact` (see the compaction case)."""


INVALID_DATA = "com.openai.errors.OpenAIInvalidDataException"


class UnlimitedSpendControlRejected(AssertionError):
    """openai-java refused an unlimited session's `spend_control` (see the agents case on the earlier release)."""


def run_flow(emulator: PTCEmulator, release: str, flow: str) -> dict[str, Any]:
    """Run one flow of the Java program built against `release` on this test's scoped URL; its one
    JSON line, parsed."""
    build = JAVA_DIR / "target" / f"openai-java-{release}"
    classes, lib = build / "classes", build / "lib"
    java = shutil.which("java")
    if java is None or not (classes / "ptcemulator" / "sdk" / "Flows.class").is_file() or not lib.is_dir():
        pytest.fail(
            f"tests/sdk/java is not built against openai-java {release} (or java is not on PATH): run `make test`, "
            "which builds it with Maven"
        )
    classpath = os.pathsep.join([str(classes), str(lib / "*")])
    done = subprocess.run(
        [java, *JVM_OPTIONS, "-cp", classpath, "ptcemulator.sdk.Flows", emulator.base_url, flow],
        env={**os.environ, "OPENAI_API_KEY": emulator.api_key},
        capture_output=True,
        text=True,
        timeout=240,  # a hang guard only, under the module's test timeout
    )
    lines = done.stdout.splitlines()
    assert len(lines) == 1, f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    result: dict[str, Any] = json.loads(lines[0])
    assert (result["flow"], result["client"]) == (flow, "openai-java")
    assert result["version"] == release, "the SDK on the program's classpath is the build's release"
    if not result["ok"]:
        failure = f"{result['error']}\n{result['trace']}"
        if "Unknown Content" in result["error"] and "CompactedResponse.validate" in result["trace"]:
            raise CompactedOutputRejected(failure)
        if (
            result["error"] == f"{INVALID_DATA}: `limit` is null"
            and "AgentSession$SpendControl.validate" in result["trace"]
        ):
            raise UnlimitedSpendControlRejected(failure)
        raise AssertionError(failure)
    assert done.returncode == 0, done.stderr
    return result


def responses(emulator: PTCEmulator) -> list[dict[str, Any]]:
    """This test's Responses API requests (HTTP and WebSocket), oldest first, every one answered."""
    journal = emulator.journal
    assert all(e["status"] == 200 and e["contract"] == [] for e in journal), journal
    return journal


def check_replay(first: dict[str, Any], second: dict[str, Any], history: list[dict[str, Any]]) -> None:
    """`second` replays `history`, then every output item of `first` exactly as the server sent it,
    then one output per function call with its call_id and its caller copied."""
    sent = second["request"]["input"]
    outputs = first["response"]["output"]
    assert sent[: len(history)] == history
    assert sent[len(history) : len(history) + len(outputs)] == outputs
    check_outputs(first, sent[len(history) + len(outputs) :])


def check_outputs(first: dict[str, Any], sent: list[dict[str, Any]]) -> None:
    calls = [item for item in first["response"]["output"] if item["type"] == "function_call"]
    assert [item["type"] for item in sent] == ["function_call_output"] * len(calls)
    program = next(item for item in first["response"]["output"] if item["type"] == "program")
    for call, output in zip(calls, sent, strict=True):
        assert call["caller"] == {"type": "program", "caller_id": program["call_id"]}
        assert (output["call_id"], output["caller"]) == (call["call_id"], call["caller"])
        assert json.loads(output["output"]) == OUTPUTS[call["name"]]


USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]}


# ---- what each flow printed, and what the server recorded ----------------------------------------


def store_false(result: dict[str, Any], emulator: PTCEmulator) -> None:
    assert result["answer"] == EXPECTED
    assert (result["responses"], result["pauses"], result["routes"]) == (2, 1, [PAUSED, FINISHED])
    assert result["store"] is False
    first, second = responses(emulator)
    assert [first["route"], second["route"]] == [PAUSED, FINISHED]
    assert all(e["request"]["store"] is False and e["scenario"] == "inventory__sku_123" for e in (first, second))
    assert first["request"]["input"] == [USER]
    check_replay(first, second, [USER])


def previous_response_id(result: dict[str, Any], emulator: PTCEmulator) -> None:
    assert result["answer"] == EXPECTED
    assert (result["responses"], result["pauses"], result["routes"]) == (2, 1, [PAUSED, FINISHED])
    first, second = responses(emulator)
    assert result["previous_response_id"] == first["response_id"] == second["request"]["previous_response_id"]
    assert result["first_status"] == "completed"
    assert result["last_input_items"] == ["function_call_output", "function_call_output"]
    assert "store" not in first["request"] and first["response"]["store"] is True
    check_outputs(first, second["request"]["input"])


def streamed(result: dict[str, Any], emulator: PTCEmulator) -> None:
    store_false(result, emulator)
    assert all(e["request"]["stream"] is True for e in emulator.journal)
    events = result["events"]
    assert events["response.created"] == events["response.completed"] == 2
    assert events["response.output_item.done"] == len(PAUSED) + len(FINISHED)
    assert events["response.output_text.delta"] >= 1


def websocket(result: dict[str, Any], emulator: PTCEmulator) -> None:
    lanes = {"sku_123": "lane-sku_123", "sku_456": "lane-sku_456"}
    journal = responses(emulator)
    assert all(e["method"] == "WS" for e in journal)
    # Both lanes' first creates went out before either continuation.
    assert {e["request"]["stream_id"] for e in journal[:2]} == set(lanes.values())
    for sku, lane in lanes.items():
        assert result[sku]["answer"] == EXPECTED.replace("sku_123", sku)
        assert result[sku]["routes"] == [PAUSED, FINISHED]
        first, second = [e for e in journal if e["request"]["stream_id"] == lane]
        assert first["request"]["store"] is False and second["request"]["previous_response_id"] == first["response_id"]
        assert [first["route"], second["route"]] == [PAUSED, FINISHED]
        assert [item["type"] for item in second["request"]["input"]] == ["function_call_output"] * 2


def compaction(result: dict[str, Any], emulator: PTCEmulator) -> None:
    assert result["answer"] == EXPECTED
    assert result["compacted_object"] == "response.compaction"
    assert result["compacted_output"] == ["message", "compaction"]
    assert result["sent"] == ["message", "compaction", "function_call_output", "function_call_output"]
    first, second = responses(emulator)
    assert [first["route"], second["route"]] == [PAUSED, FINISHED]
    check_outputs(first, second["request"]["input"][2:])


def context_compaction(result: dict[str, Any], emulator: PTCEmulator) -> None:
    assert result["answer"] == EXPECTED
    assert result["routes"] == [["compaction", *PAUSED], ["compaction", *FINISHED]]
    first, second = responses(emulator)
    assert first["request"]["context_management"] == [{"type": "compaction", "compact_threshold": 1}]
    check_replay(first, second, [USER])


def conversation(result: dict[str, Any], emulator: PTCEmulator) -> None:
    everything = ["message", *PAUSED, "function_call_output", "function_call_output", *FINISHED]
    assert result["answer"] == EXPECTED
    assert result["routes"] == [PAUSED, FINISHED]
    assert result["response_conversation"] == result["conversation"]
    assert result["items"] == everything  # listed three a page, by the SDK's auto-pager
    assert result["metadata"] == "{flow=java}"
    first, second = responses(emulator)
    assert first["conversation"] == second["conversation"] == result["conversation"]
    assert second["request"]["conversation"] == result["conversation"]
    check_outputs(first, second["request"]["input"])
    with validating_client(emulator) as client:
        listed = client.conversations.items.list(result["conversation"], order="asc")
        assert [item.type for item in listed] == everything


def agents(result: dict[str, Any], emulator: PTCEmulator) -> None:
    assert result["answer"] == "Customer 123 is Example Customer, on the pro plan."
    assert result["session_agent"] == result["agent"]
    assert (result["answered"], result["status"], result["required_actions_after"]) == (1, "idle", 0)
    assert result["items"] == ["message", "command_execution", "function_call", "function_call_output", "message"]
    assert result["turns"] == ["completed"]
    before, after = result["events"][: result["events"].index("|")], result["events"][result["events"].index("|") :]
    assert before[-1] == "agent.session.requires_action" and after[-1] == "agent.session.idle"
    # The server's record, read back through the Python SDK's strictly validated models.
    with emulator.client(max_retries=0) as client:
        session = valid(client.beta.agents.sessions.retrieve(result["session"]))
        assert (session.status, session.agent.id, session.required_actions) == ("idle", result["agent"], [])
        items = [valid(item) for item in client.beta.agents.sessions.items.list(result["session"])]
        output = next(item for item in items if item.type == "function_call_output")
        assert json.loads(output.output) == {"found": True, "customer": {"name": "Example Customer", "plan": "pro"}}
    assert emulator.journal == [], "an Agents API turn is no Responses API request"


FLOWS: dict[str, Callable[[dict[str, Any], PTCEmulator], None]] = {
    "store-false": store_false,
    "previous-response-id": previous_response_id,
    "streamed": streamed,
    "websocket": websocket,
    "compaction": compaction,
    "context-compaction": context_compaction,
    "conversation": conversation,
    "agents": agents,
}

COMPACT_REJECTED = pytest.mark.xfail(
    raises=CompactedOutputRejected,
    strict=True,
    reason=(
        "POST /v1/responses/compact returns the window's user messages as output items "
        '{"type": "message", "role": "user", "content": [{"type": "input_text", ...}]}, as the hosted API '
        "does; openai-java's CompactedResponse.output is List<ResponseOutputItem>, whose message variant "
        "(ResponseOutputMessage) allows role `assistant` and content output_text|refusal only, so "
        "responseValidation(true) throws `Unknown Content` on output[0].content[0]"
    ),
)

UNLIMITED_REJECTED = pytest.mark.xfail(
    raises=UnlimitedSpendControlRejected,
    strict=True,
    reason=(
        'an unlimited session\'s spend_control is {"consumed": null, "limit": null}: openai-python 3.63 '
        "requires the key and says the limit is null when unlimited; openai-java 4.105.0 types spend_control "
        'as optional ("unlimited sessions omit this object") with a non-null limit, so responseValidation(true) '
        "throws `limit` is null on the session's create. No body satisfies both; the server follows the newer "
        "types, and openai-java 4.109.0 no longer has the field"
    ),
)


def cases() -> list[Any]:
    out = []
    for release in RELEASES:
        for flow in FLOWS:
            marks = []
            if flow == "compaction":
                marks.append(COMPACT_REJECTED)
            if (release, flow) == (EARLIER, "agents"):
                marks.append(UNLIMITED_REJECTED)
            out.append(pytest.param(release, flow, id=f"{release}-{flow}", marks=marks))
    return out


@pytest.mark.parametrize(("release", "flow"), cases())
def test_java_flow(
    release: str, flow: str, ptc_emulator: PTCEmulator, client_version: Callable[[str, str], None]
) -> None:
    result = run_flow(ptc_emulator, release, flow)
    client_version("openai-java", result["version"])
    FLOWS[flow](result, ptc_emulator)
