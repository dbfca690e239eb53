"""The inspector's read endpoints and its page's files, over real HTTP: grouping, filters,
the conversation view's data, the event stream, and the API key."""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.inspector.inspector_support import EXPECTED, run_seed_loop
from tests.support import validating_client

INVENTORY_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": name,
        "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        "output_schema": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, field: {"type": "number"}},
            "required": ["sku", field],
        },
        "allowed_callers": ["programmatic"],
    }
    for name, field in (("get_inventory", "available_units"), ("get_demand", "requested_units"))
] + [{"type": "programmatic_tool_calling"}]


def inspector(emulator: PTCEmulator, path: str, **params: str) -> Any:
    """GET /_emulator/inspector/<path> in the test's scope, as the page would (no scope header)."""
    root = emulator.server_url[: -len("/v1")]
    reply = httpx.get(f"{root}/_emulator/inspector/{path}", params={"scope": emulator.scope, **params}, timeout=30)
    reply.raise_for_status()
    return reply.json()


def chain(client: openai.OpenAI, units: Any = 42) -> openai.types.responses.Response:
    """store:true, continued with previous_response_id and only the outputs."""
    response = client.responses.create(
        model="gpt-6-astra", input="Compare inventory with demand for sku_123.", tools=INVENTORY_TOOLS
    )
    outputs: list[Any] = []
    for call in response.output:
        if call.type == "function_call":
            result = {"sku": "sku_123", "available_units": units} if call.name == "get_inventory" else None
            result = result or {"sku": "sku_123", "requested_units": 31}
            outputs.append(
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": json.dumps(result),
                    "caller": call.caller.model_dump() if call.caller else None,
                }
            )
    return client.responses.create(
        model="gpt-6-astra", previous_response_id=response.id, input=outputs, tools=INVENTORY_TOOLS
    )


def test_the_seed_loop_is_one_conversation_with_its_program(ptc_emulator: PTCEmulator) -> None:
    run_seed_loop(ptc_emulator)
    listing = inspector(ptc_emulator, "conversations")
    [row] = listing["data"]
    assert row["requests"] == 2 and row["state"] == "completed" and row["errors"] is False
    assert row["scenarios"] == ["inventory__sku_123"]
    assert row["links"] == ["program", "store:false replay"]
    assert row["title"] == "Compare inventory with demand for sku_123."
    assert row["final"] == EXPECTED
    assert ptc_emulator.scope in listing["scopes"] and "inventory__sku_123" in listing["scenarios"]

    view = inspector(ptc_emulator, f"conversations/{row['id']}")
    [program] = view["programs"]
    assert 'tools.get_inventory({ sku: "sku_123" })' in program["code"]
    [pause] = program["pauses"]
    assert [c["name"] for c in pause["calls"]] == ["get_inventory", "get_demand"]
    assert all(c["route"] == "program" and c["caller"]["caller_id"] == program["call_id"] for c in pause["calls"])
    assert [json.loads(c["arguments"]) for c in pause["calls"]] == [{"sku": "sku_123"}, {"sku": "sku_123"}]
    outputs = [json.loads(c["output"]["output"]) for c in pause["calls"]]
    assert outputs == [{"sku": "sku_123", "available_units": 42}, {"sku": "sku_123", "requested_units": 31}]
    assert json.loads(program["output"]["result"])["shortage_units"] == 0
    figures = view["figures"]
    assert figures["requests"] == 2 and figures["program_tool_calls"] == 2
    # One program, started and resumed once: counted once, its two steps apart.
    assert figures["programs"] == 1 and figures["programs_run"] == 2
    assert figures["calls"] == {"program": 1, "function_call (program)": 2}
    assert figures["latency_ms"] > 0 and figures["input_tokens"] > 0 and figures["kept_out_bytes"] > 0
    assert [e["seq"] for e in view["entries"]] == row["seqs"]
    # Any request of the conversation finds it.
    assert inspector(ptc_emulator, f"conversations/{row['seqs'][1]}")["summary"]["id"] == row["id"]


def test_a_previous_response_id_chain_is_one_conversation_and_violations_are_marked(
    ptc_emulator: PTCEmulator,
) -> None:
    with validating_client(ptc_emulator, max_retries=0) as client:
        chain(client)
        chain(client, units="many")  # breaks get_inventory's output_schema: a warning, not a refusal
    rows = inspector(ptc_emulator, "conversations")["data"]
    assert [r["requests"] for r in rows] == [2, 2]
    assert all(r["links"] == ["program", "previous_response_id"] for r in rows)
    newest, oldest = rows
    assert newest["seqs"][0] > oldest["seqs"][-1]  # newest first
    assert newest["errors"] is True and oldest["errors"] is False
    calls = inspector(ptc_emulator, f"conversations/{newest['id']}")["calls"]
    marked = {c["name"]: c["violations"] for c in calls}
    assert marked["get_demand"] == []
    [violation] = marked["get_inventory"]
    assert violation["kind"] == "output" and violation["tool"] == "get_inventory"
    assert inspector(ptc_emulator, "conversations", errors="1")["data"] == [newest]


@pytest.mark.ptc_strict(unmatched=False)  # its 400 is one of the statuses it filters by
def test_filters_by_scope_scenario_and_status(ptc_emulator: PTCEmulator) -> None:
    run_seed_loop(ptc_emulator)
    client = ptc_emulator.client(max_retries=0)
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="m", input="nothing matches this")
    everything = inspector(ptc_emulator, "conversations")["data"]
    assert [r["state"] for r in everything] == ["failed", "completed"]
    assert [r["statuses"] for r in everything] == [[400], [200, 200]]
    assert [r["state"] for r in inspector(ptc_emulator, "conversations", status="4xx")["data"]] == ["failed"]
    assert [r["state"] for r in inspector(ptc_emulator, "conversations", status="completed")["data"]] == ["completed"]
    assert [r["state"] for r in inspector(ptc_emulator, "conversations", status="200")["data"]] == ["completed"]
    only = inspector(ptc_emulator, "conversations", scenario="inventory__sku_123")["data"]
    assert [r["scenarios"] for r in only] == [["inventory__sku_123"]]
    [failed] = inspector(ptc_emulator, "conversations", errors="1")["data"]
    entry = inspector(ptc_emulator, f"conversations/{failed['id']}")["entries"][0]
    assert entry["near_miss"]["near_misses"][0]["scenario"] == "customer__lookup"
    assert inspector(ptc_emulator, "conversations", scope="test-nobody")["data"] == []


def test_an_unknown_conversation_is_a_404_in_the_error_envelope(ptc_emulator: PTCEmulator) -> None:
    root = ptc_emulator.server_url[: -len("/v1")]
    # a digit that is not ASCII (`int` refuses a superscript), and more digits than `int` reads: 500s before
    odd = (("c%C2%B2", 400), ("c" + "9" * 5000, 400), ("c\u0661\u0662", 400), ("c" + "9" * 30, 400))
    for name, status in (("c999999", 404), ("bogus", 400), *odd):
        reply = httpx.get(f"{root}/_emulator/inspector/conversations/{name}", timeout=30)
        assert reply.status_code == status
        assert set(reply.json()["error"]) == {"message", "type", "param", "code"}


def test_the_event_stream_announces_new_requests(ptc_emulator: PTCEmulator) -> None:
    root = ptc_emulator.server_url[: -len("/v1")]
    ptc_emulator.add_scenario({"match": {"input": "(?i)^ping"}, "turns": [{"message": "pong"}]})
    seen: list[tuple[str, dict[str, Any]]] = []
    hello = threading.Event()
    with httpx.stream("GET", f"{root}/_emulator/inspector/events", timeout=60) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream")
        kind = None
        for line in reply.iter_lines():
            if line.startswith("event: "):
                kind = line[len("event: ") :]
            elif line.startswith("data: ") and kind is not None:
                seen.append((kind, json.loads(line[len("data: ") :])))
                if kind == "hello" and not hello.is_set():
                    hello.set()
                    ptc_emulator.client().responses.create(model="m", input="ping")
                if kind == "journal":
                    break
    assert seen[0][0] == "hello" and seen[-1][0] == "journal"
    assert seen[-1][1]["latest_seq"] > seen[0][1]["latest_seq"]


def test_the_pages_files_are_served_from_the_package(ptc_emulator: PTCEmulator) -> None:
    root = ptc_emulator.server_url[: -len("/v1")]
    with httpx.Client(base_url=root, timeout=30) as http:
        assert http.get("/_emulator/ui").headers["location"] == "/_emulator/ui/"
        page = http.get("/_emulator/ui/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        for name in ("inspector.js", "highlight.js", "inspector.css"):
            reply = http.get(f"/_emulator/ui/{name}")
            assert reply.status_code == 200 and len(reply.content) > 1000
            assert "http://" not in reply.text and "https://" not in reply.text  # no CDN, nothing remote
        script = http.get("/_emulator/ui/inspector.js").text
        assert "innerHTML" not in script and "insertAdjacentHTML" not in script  # text only, never markup
        assert http.get("/_emulator/ui/app.py").status_code == 404
        assert http.get("/_emulator/ui/..%2Fadmin.py").status_code == 404


@pytest.fixture(scope="module")
def keyed() -> Iterator[EmulatorServer]:
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(data_dir=Path(folder), store="memory", pool_size=1, api_key="sk-inspector-key")
        server = EmulatorServer(settings).start()
        try:
            yield server
        finally:
            server.stop()


def test_with_an_api_key_only_the_pages_files_are_open(keyed: EmulatorServer) -> None:
    root = keyed.base_url[: -len("/v1")]
    key = {"Authorization": "Bearer sk-inspector-key"}
    with httpx.Client(base_url=root, timeout=30) as http:
        for name in ("", "index.html", "inspector.js", "highlight.js", "inspector.css"):
            assert http.get(f"/_emulator/ui/{name}").status_code == 200
        assert http.post("/_emulator/ui/").status_code == 401  # only reading the files is open
        assert http.get("/_emulator/uix").status_code == 401
        for path in (
            "/_emulator/inspector/conversations",
            "/_emulator/inspector/events",
            "/_emulator/inspector/trace.json",
            "/_emulator/inspector/trace.html",
            "/_emulator/journal",
        ):
            denied = http.get(path)
            assert denied.status_code == 401 and denied.json()["error"]["code"] == "invalid_api_key"
            assert http.get(path, headers={"Authorization": "Bearer sk-wrong"}).status_code == 401
        assert http.get("/_emulator/inspector/conversations", headers=key).status_code == 200
        with http.stream("GET", "/_emulator/inspector/events", headers=key) as stream:
            assert stream.status_code == 200
            assert next(stream.iter_lines()) == "event: hello"


FAULTY = {
    "name": "ping-with-faults",
    "match": {"input": "(?i)^ping"},
    "turns": [
        {
            "reasoning": "A ping wants a pong.",
            "program": "text(JSON.stringify({ answer: 'pong' }))",
            "fault": {"http_error": 429, "times": 2, "should_retry": True, "retry_after": 0.05},
        },
        {"message": "{{ data.answer }}"},
    ],
}


def ping(emulator: PTCEmulator) -> Any:
    tools: Any = [{"type": "programmatic_tool_calling"}]
    return emulator.client(max_retries=2).responses.create(model="m", input="ping", tools=tools)


def test_retries_join_their_conversation_with_faults_and_reasoning(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(FAULTY)
    assert ping(ptc_emulator).output_text == "pong"
    [row] = inspector(ptc_emulator, "conversations")["data"]
    assert row["statuses"] == [429, 429, 200] and row["links"] == ["program", "retry"]
    assert row["state"] == "completed" and row["errors"] is True  # the injected faults
    entries = inspector(ptc_emulator, f"conversations/{row['id']}")["entries"]
    assert [e["fault"] for e in entries] == ["http_error 429 (1 of 2)", "http_error 429 (2 of 2)", None]
    assert [i["type"] for i in entries[2]["response"]["output"]] == [
        "reasoning",
        "program",
        "program_output",
        "message",
    ]
