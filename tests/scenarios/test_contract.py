"""Contract checks: tool outputs against `output_schema`, program call arguments against the
`parameters` of a `strict: true` tool. Reported by default; a 400 in strict mode."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.scenarios.scenarios_support import inventory_tools

WARNING = "x-ptc-emulator-contract-warning"
TEXT = "Check the stock of sku_7."

LOOKUP = {
    "name": "stock",
    "match": {"input": "(?i)check the stock of (?P<sku>sku_\\w+)", "tools": ["get_inventory"]},
    "turns": [
        {"program": "const s = await tools.get_inventory({sku: {{ sku }}});\ntext(String(s.available_units));"},
        {"message": "{{ result }} units."},
    ],
}


def start(emulator: PTCEmulator, tools: list[dict[str, Any]]) -> list[Any]:
    """The first response (the program pauses on get_inventory) and the items to continue with."""
    client = emulator.client(max_retries=0)
    items: list[Any] = [{"role": "user", "content": TEXT}]
    first = client.responses.create(model="m", store=False, input=items, tools=tools)
    assert [item.type for item in first.output] == ["program", "function_call"]
    items.extend(item.model_dump(exclude_none=True) for item in first.output)
    return items


def answer(items: list[Any], output: str) -> list[Any]:
    call = items[-1]
    return [
        *items,
        {"type": "function_call_output", "call_id": call["call_id"], "output": output, "caller": call["caller"]},
    ]


def resume(emulator: PTCEmulator, tools: list[dict[str, Any]], output: str) -> Any:
    """The raw reply to the request that returns `output` for get_inventory."""
    items = answer(start(emulator, tools), output)
    client = emulator.client(max_retries=0)
    return client.responses.with_raw_response.create(model="m", store=False, input=items, tools=tools)


GOOD = json.dumps({"sku": "sku_7", "available_units": 5})
BAD = json.dumps({"sku": "sku_7", "available_units": "five"})


def test_a_conforming_output_is_not_reported(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(LOOKUP)
    raw = resume(ptc_emulator, inventory_tools(), GOOD)
    assert raw.parse().output_text == "5 units."
    assert WARNING not in raw.headers
    assert [e["contract"] for e in ptc_emulator.journal] == [[], []]


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (BAD, "'five' is not of type 'number' (at available_units)"),
        (json.dumps({"sku": "sku_7"}), "'available_units' is a required property"),
        (json.dumps({"sku": "sku_7", "available_units": 5, "extra": 1}), "Additional properties are not allowed"),
        ("five units", "the output is not JSON"),
    ],
)
def test_output_schema_violation_is_reported(ptc_emulator: PTCEmulator, output: str, message: str) -> None:
    ptc_emulator.add_scenario(LOOKUP)
    raw = resume(ptc_emulator, inventory_tools(), output)

    assert raw.status_code == 200
    response = raw.parse()
    assert response.output[0].type == "program_output"
    call_id = response.output[0].call_id
    entry = ptc_emulator.journal[-1]
    [violation] = entry["contract"]
    assert violation["kind"] == "output" and violation["tool"] == "get_inventory"
    assert violation["call_id"] != call_id and violation["call_id"].startswith("call_")
    assert violation["message"].startswith(message), violation["message"]
    warning = raw.headers[WARNING]
    assert warning.startswith(
        f"1 violation(s); first: The output of function call {violation['call_id']} does not match the "
        "output_schema of 'get_inventory': "
    )
    assert message[:40].encode("ascii", "replace").decode() in warning


def test_strict_scenario_rejects_the_output(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario({**LOOKUP, "strict_contract": True})
    tools = inventory_tools()
    items = answer(start(ptc_emulator, tools), BAD)

    with pytest.raises(openai.BadRequestError) as caught:
        ptc_emulator.client(max_retries=0).responses.create(model="m", store=False, input=items, tools=tools)

    error = caught.value
    assert error.code == "contract_violation" and error.param == "input"
    assert "does not match the output_schema of 'get_inventory'" in error.message
    assert "'five' is not of type 'number' (at available_units)" in error.message
    assert ptc_emulator.journal[-1]["status"] == 400
    # Corrected, the same conversation goes on.
    fixed = answer(items[:-1], GOOD)
    ok = ptc_emulator.client().responses.create(model="m", store=False, input=fixed, tools=tools)
    assert ok.output_text == "5 units."


def test_journal_keeps_the_violation_a_strict_check_rejected(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario({**LOOKUP, "strict_contract": True})
    tools = inventory_tools()
    with pytest.raises(openai.BadRequestError):
        resume(ptc_emulator, tools, BAD)
    entry = ptc_emulator.journal[-1]
    assert entry["status"] == 400
    assert [v["kind"] for v in entry["contract"]] == ["output"]


def test_strict_server_rejects_and_a_scenario_may_opt_out(own_server: Callable[..., PTCEmulator]) -> None:
    server = own_server(strict_contract=True)
    server.add_scenario(LOOKUP)
    with pytest.raises(openai.BadRequestError) as caught:
        resume(server, inventory_tools(), BAD)
    assert caught.value.code == "contract_violation"

    server.add_scenario({**LOOKUP, "strict_contract": False})
    raw = resume(server, inventory_tools(), BAD)
    assert raw.status_code == 200 and WARNING in raw.headers


BAD_ARGUMENTS = {
    "name": "bad-arguments",
    "match": {"input": "(?i)check the stock of", "tools": ["get_inventory"]},
    "turns": [
        {"program": "const s = await tools.get_inventory({sku: 7});\ntext(String(s.available_units));"},
        {"message": "{{ result }} units."},
    ],
}


@pytest.mark.parametrize("strict", [True, None])  # strict is the default, as the echoed tool says
def test_program_arguments_checked_against_a_strict_tools_parameters(
    ptc_emulator: PTCEmulator, strict: bool | None
) -> None:
    ptc_emulator.add_scenario(BAD_ARGUMENTS)
    client = ptc_emulator.client()

    raw = client.responses.with_raw_response.create(model="m", input=TEXT, tools=inventory_tools(strict=strict))

    response = raw.parse()
    call = response.output[1]
    assert call.type == "function_call" and json.loads(call.arguments) == {"sku": 7}
    [violation] = ptc_emulator.journal[-1]["contract"]
    assert violation == {
        "kind": "arguments",
        "tool": "get_inventory",
        "call_id": call.call_id,
        "message": "7 is not of type 'string' (at sku)",
    }
    assert raw.headers[WARNING] == (
        f"1 violation(s); first: The arguments of function call {call.call_id} do not match the parameters of "
        "'get_inventory': 7 is not of type 'string' (at sku)"
    )


def test_arguments_of_a_tool_that_is_not_strict_are_not_checked(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(BAD_ARGUMENTS)
    raw = ptc_emulator.client().responses.with_raw_response.create(
        model="m", input=TEXT, tools=inventory_tools(strict=False)
    )
    assert WARNING not in raw.headers
    assert ptc_emulator.journal[-1]["contract"] == []


def test_strict_mode_rejects_program_arguments(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario({**BAD_ARGUMENTS, "strict_contract": True})
    with pytest.raises(openai.BadRequestError) as caught:
        ptc_emulator.client(max_retries=0).responses.create(model="m", input=TEXT, tools=inventory_tools(strict=True))
    assert caught.value.code == "contract_violation" and caught.value.param == "tools"
    assert caught.value.message.endswith(
        "do not match the parameters of 'get_inventory': 7 is not of type 'string' (at sku)"
    )
    entry = ptc_emulator.journal[-1]
    assert entry["status"] == 400
    assert [v["kind"] for v in entry["contract"]] == ["arguments"]
