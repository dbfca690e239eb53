"""The guide's continuation loops, run against the emulator as a user would run them."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import PTCEmulator
from tests.support import ClientVersion, in_process, validated, validating_client

SEEDS = Path(__file__).parent / "seeds"
EXPECTED = "sku_123: 42 units available against 31 requested, so the shortage is 0 units."
INVENTORY_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "get_inventory",
        "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        "allowed_callers": ["programmatic"],
    },
    {
        "type": "function",
        "name": "get_demand",
        "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        "allowed_callers": ["programmatic"],
    },
    {"type": "programmatic_tool_calling"},
]


def implementations(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name == "get_inventory":
        return {"sku": args["sku"], "available_units": 42}
    return {"sku": args["sku"], "requested_units": 31}


@pytest.mark.sdk
@pytest.mark.parametrize("store", [False, True])
def test_python_loop_from_the_guide(
    store: bool,
    ptc_emulator: PTCEmulator,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    client_version: ClientVersion,
) -> None:
    client_version("openai-python", openai.__version__)
    # The loop's code is the guide's; `OpenAI()` is the only thing pointed elsewhere.
    source = (SEEDS / "python_loop.py").read_text(encoding="utf-8")
    assert source.count("store=False") == 1
    path = SEEDS / "python_loop.py"
    if store:
        path = tmp_path / "python_loop_store_true.py"
        path.write_text(source.replace("store=False", "store=True"), encoding="utf-8")
    seed_client = validating_client(ptc_emulator, max_retries=0)
    monkeypatch.setattr(openai, "OpenAI", lambda: seed_client)
    before = len(validated)
    with seed_client:
        runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip() == EXPECTED
    assert len(validated) - before == 2  # two responses, each validated by the SDK's models
    journal = ptc_emulator.journal
    assert [e["route"] for e in journal] == [
        ["program", "function_call", "function_call"],
        ["program_output", "message"],
    ]
    assert all(e["response"]["store"] is store for e in journal)


@pytest.mark.sdk
def test_python_loop_runs_verbatim_in_its_own_process(ptc_emulator: PTCEmulator, client_version: ClientVersion) -> None:
    client_version("openai-python", openai.__version__)  # the same interpreter, so the same package
    env = {**os.environ, "OPENAI_BASE_URL": ptc_emulator.base_url, "OPENAI_API_KEY": "sk-test"}
    done = subprocess.run(
        [sys.executable, str(SEEDS / "python_loop.py")], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == EXPECTED


@pytest.mark.sdk
def test_previous_response_id_loop(
    client: openai.OpenAI, ptc_emulator: PTCEmulator, client_version: ClientVersion
) -> None:
    """store:true, continuing with previous_response_id and only the new outputs."""
    client_version("openai-python", openai.__version__)
    response = client.responses.create(
        model="gpt-6-astra", input="Compare inventory with demand for sku_123.", tools=INVENTORY_TOOLS
    )
    pauses = 0
    while True:
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            if any(item.type == "message" for item in response.output):
                break
            response = client.responses.create(
                model="gpt-6-astra", previous_response_id=response.id, tools=INVENTORY_TOOLS
            )
            continue
        pauses += 1
        outputs: list[Any] = [
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": json.dumps(implementations(call.name, json.loads(call.arguments))),
                "caller": call.caller.model_dump() if call.caller else None,
            }
            for call in calls
        ]
        response = client.responses.create(
            model="gpt-6-astra", previous_response_id=response.id, input=outputs, tools=INVENTORY_TOOLS
        )
    assert pauses == 1
    assert response.output_text == EXPECTED
    assert response.previous_response_id is not None
    # The stored chain is whole: every response can be fetched, and its input items listed.
    first = ptc_emulator.journal[0]["response_id"]
    assert client.responses.retrieve(first).status == "completed"
    items = list(client.responses.input_items.list(response.id))
    assert [i.type for i in items] == ["function_call_output", "function_call_output"]


@pytest.mark.sdk
@pytest.mark.anyio
async def test_in_process_through_the_asgi_transport(tmp_path: Path) -> None:
    """The same loop with no socket: the SDK on httpx's ASGI transport, store:false."""
    async with in_process(Settings(data_dir=tmp_path, store="memory", bundled_fixtures=True)) as client:
        items: list[Any] = [{"role": "user", "content": "Compare inventory with demand for sku_123."}]
        while True:
            response = await client.responses.create(model="m", store=False, input=items, tools=INVENTORY_TOOLS)
            items.extend(item.model_dump(exclude_none=True) for item in response.output)
            calls = [item for item in response.output if item.type == "function_call"]
            if not calls:
                break
            for call in calls:
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": call.call_id,
                        "output": json.dumps(implementations(call.name, json.loads(call.arguments))),
                        "caller": call.caller.model_dump() if call.caller else None,
                    }
                )
        assert response.output_text == EXPECTED


@pytest.mark.sdk
def test_the_readme_quick_start(ptc_emulator: PTCEmulator, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's quick start runs as written, against the bundled scenario."""
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Quick start with the official SDK") :]
    code = section[section.index("```python\n") + len("```python\n") : section.index("\n```\n")]
    assert 'base_url="http://127.0.0.1:8000/v1"' in code
    namespace: dict[str, Any] = {}
    try:
        exec(compile(code.replace("http://127.0.0.1:8000/v1", ptc_emulator.base_url), "README.md", "exec"), namespace)
    finally:
        namespace["client"].close()
    assert capsys.readouterr().out.strip() == EXPECTED
    assert EXPECTED in section  # the README says what it prints
