"""The OpenAI Agents SDK as users write its tests (docs/agents-sdk.md): several async tests with
Programmatic Tool Calling and faults in one session (the SDK's shared HTTP client would carry a
closed loop's connections from one test to the next), what the SDK retries, and its rule that a
programmatic tool's return type is a strict JSON object schema."""

from __future__ import annotations

import sys
from typing import Any, TypedDict

import openai
import pytest
import typing_extensions
from agents import (
    Agent,
    ModelRetrySettings,
    ModelSettings,
    ProgrammaticToolCallingTool,
    Runner,
    UserError,
    function_tool,
    retry_policies,
    set_tracing_disabled,
)
from pydantic import BaseModel

from ptc_emulator.testing.server import PTCEmulator
from tests.plugin.plugin_support import run

# ---- several async tests in one session ------------------------------------------------------------

SESSION = '''
import openai
import pytest
{imports}

set_tracing_disabled(True)


@pytest.fixture
def anyio_backend():
    return "asyncio"


class Stock(BaseModel):
    sku: str
    available_units: int


def get_inventory(sku: str) -> Stock:
    """Units in stock for a SKU."""
    return Stock(sku=sku, available_units=42)


def scenario(fault=None):
    code = "const s = await tools.get_inventory({{ sku: {{{{ sku }}}} }});\\ntext(String(s.available_units));"
    program = {{"program": code}}
    if fault:
        program["fault"] = fault
    return {{"name": "stock", "match": {{"input": "(?i)stock of (?P<sku>sku_\\\\w+)", "tools": ["get_inventory"]}},
            "turns": [program, {{"message": "{{{{ result }}}} units"}}]}}


async def ask(ptc_emulator, monkeypatch, **settings):
    {lazy}
    ptc_emulator.use_env(monkeypatch)  # the SDK's default client, as agent code has it
    tool = function_tool(get_inventory, allowed_callers=["programmatic"])
    agent = Agent(name="stock", instructions="Use a program.", model="gpt-test",
                  tools=[ProgrammaticToolCallingTool(), tool], model_settings=ModelSettings(**settings))
    return (await Runner.run(agent, "What is the stock of sku_7?")).final_output


{marker}
{prefix}def test_first(ptc_emulator, monkeypatch):
    ptc_emulator.add_scenario(scenario())
    assert {run}(ask(ptc_emulator, monkeypatch)) == "42 units"


{marker}
{prefix}def test_second_a_rate_limit(ptc_emulator, monkeypatch):
    ptc_emulator.add_scenario(scenario({{"http_error": 429, "should_retry": True, "retry_after": 0.01}}))
    with pytest.raises(openai.RateLimitError):
        {run}(ask(ptc_emulator, monkeypatch))
    assert [e.status for e in ptc_emulator.entries] == [429]


{marker}
{prefix}def test_third_retried(ptc_emulator, monkeypatch):
    ptc_emulator.add_scenario(scenario({{"http_error": 500, "times": 2, "should_retry": True, "retry_after": 0.01}}))
    retry = ModelRetrySettings(max_retries=2, policy=retry_policies.provider_suggested())
    assert {run}(ask(ptc_emulator, monkeypatch, retry=retry)) == "42 units"
    assert [e.status for e in ptc_emulator.entries] == [500, 500, 200, 200]
'''

IMPORTS = (
    "from agents import (Agent, ModelRetrySettings, ModelSettings, ProgrammaticToolCallingTool, Runner,\n"
    "                    function_tool, retry_policies, set_tracing_disabled)\n"
    "from pydantic import BaseModel"
)
ANYIO = {"marker": "@pytest.mark.anyio", "prefix": "async ", "run": "await ", "lazy": "", "imports": IMPORTS}

# The plugin's step switched off: the SDK makes its own, pooled client.
WITHOUT_THE_FIX = """
import ptc_emulator.testing.agents_sdk

ptc_emulator.testing.agents_sdk.unpool_shared_clients = lambda: None
"""


@pytest.mark.timeout(260)  # 2 inner pytest runs of at most 100 s each (`plugin_support.run`)
def test_three_async_tests_with_ptc_and_faults_pass_in_one_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_stock=SESSION.format(**ANYIO))

    run(pytester, "-v").assert_outcomes(passed=3)

    # What the plugin prevents: without its client, every test after the first fails.
    pytester.makeconftest(WITHOUT_THE_FIX)
    broken = run(pytester, "-v")
    outcomes = broken.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1 and outcomes.get("passed", 0) < 3, outcomes
    broken.stdout.fnmatch_lines(["*test_first PASSED*", "*test_second_a_rate_limit FAILED*"])
    broken.stdout.fnmatch_lines(["*RuntimeError: Event loop is closed*"])


def test_an_sdk_first_imported_inside_a_test(pytester: pytest.Pytester) -> None:
    """Agent code that imports the SDK late: the plugin fills the SDK's slot as it loads."""
    lazy = (
        "from agents import (Agent, ModelRetrySettings, ModelSettings, ProgrammaticToolCallingTool, Runner, "
        "function_tool, retry_policies)"
    )
    body = SESSION.format(**(ANYIO | {"imports": "from pydantic import BaseModel", "lazy": lazy}))
    # The module-level names the tests use come from the SDK, imported in each test's own call.
    body = body.replace(
        "set_tracing_disabled(True)\n",
        "import os\nimport sys\n\nos.environ['OPENAI_AGENTS_DISABLE_TRACING'] = '1'\n"
        "assert 'agents' not in sys.modules  # nothing loaded the SDK before the tests run\n",
    )
    body = body.replace("    retry = ModelRetrySettings(", f"    {lazy}\n    retry = ModelRetrySettings(")
    pytester.makepyfile(test_stock=body)

    run(pytester, "-v").assert_outcomes(passed=3)


def test_sync_tests_that_run_their_own_loop(pytester: pytest.Pytester) -> None:
    """`asyncio.run(...)` in plain tests: a loop per test, as under an async test plugin."""
    sync = {"marker": "", "prefix": "", "run": "asyncio.run", "lazy": "", "imports": "import asyncio\n" + IMPORTS}
    pytester.makepyfile(test_stock=SESSION.format(**sync))

    run(pytester, "-v").assert_outcomes(passed=3)


# ---- what the SDK retries ----------------------------------------------------------------------------

set_tracing_disabled(True)


class Stock(BaseModel):
    sku: str
    available_units: int


@function_tool(allowed_callers=["programmatic"])
def get_inventory(sku: str) -> Stock:
    """Units in stock for a SKU."""
    return Stock(sku=sku, available_units=42)


RETRY = ModelRetrySettings(max_retries=2, policy=retry_policies.provider_suggested())


def stock_scenario(fault: dict[str, Any] | None) -> dict[str, Any]:
    program: dict[str, Any] = {
        "program": "const s = await tools.get_inventory({ sku: {{ sku }} });\ntext(String(s.available_units));"
    }
    if fault is not None:
        program["fault"] = fault
    return {
        "name": "stock",
        "match": {"input": "(?i)stock of (?P<sku>sku_\\w+)", "tools": ["get_inventory"]},
        "turns": [program, {"message": "{{ result }} units"}],
    }


def planner(ptc: bool = True, **settings: Any) -> Agent[Any]:
    tools: list[Any] = [ProgrammaticToolCallingTool(), get_inventory] if ptc else []
    return Agent(
        name="stock", instructions="Answer.", model="gpt-test", tools=tools, model_settings=ModelSettings(**settings)
    )


def statuses(emulator: PTCEmulator) -> list[tuple[int, int]]:
    return [(e.status, e.figures.retries) for e in emulator.entries]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fault", "settings", "seen"),
    [
        # PTC and no retry settings: one request, whatever the server says.
        ({"http_error": 429, "should_retry": True, "retry_after": 0.01}, {}, [(429, 0)]),
        ({"http_error": 500}, {}, [(500, 0)]),
        # The Runner's retries, with PTC: only what the server marks safe to replay.
        ({"http_error": 429, "retry_after": 0.01}, {"retry": RETRY}, [(429, 0)]),
        ({"http_error": 429, "should_retry": False}, {"retry": RETRY}, [(429, 0)]),
    ],
)
async def test_with_ptc_a_fault_fails_the_run_after_one_request(
    ptc_emulator: PTCEmulator,
    monkeypatch: pytest.MonkeyPatch,
    fault: dict[str, Any],
    settings: dict[str, Any],
    seen: list[tuple[int, int]],
) -> None:
    ptc_emulator.add_scenario(stock_scenario(fault))
    ptc_emulator.use_env(monkeypatch)

    with pytest.raises(openai.APIStatusError) as caught:
        await Runner.run(planner(**settings), "What is the stock of sku_7?")

    assert caught.value.status_code == fault["http_error"]
    assert statuses(ptc_emulator) == seen


@pytest.mark.anyio
async def test_with_ptc_the_runner_retries_what_the_server_says_is_safe(
    ptc_emulator: PTCEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    ptc_emulator.add_scenario(stock_scenario({"http_error": 503, "times": 2, "should_retry": True}))
    ptc_emulator.use_env(monkeypatch)

    result = await Runner.run(planner(retry=RETRY), "What is the stock of sku_7?")

    assert result.final_output == "42 units"
    assert statuses(ptc_emulator) == [(503, 0), (503, 0), (200, 0), (200, 0)]  # new requests: retries 0


@pytest.mark.anyio
async def test_with_ptc_the_runner_retries_a_request_that_continues_a_stored_response(
    ptc_emulator: PTCEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    ptc_emulator.add_scenario(stock_scenario(None))
    thanks = {"http_error": 429, "retry_after": 0.01}  # no x-should-retry: the state on the server decides
    ptc_emulator.add_scenario(
        {"name": "thanks", "match": {"input": "(?i)thanks"}, "turns": [{"message": "Welcome.", "fault": thanks}]}
    )
    ptc_emulator.use_env(monkeypatch)
    agent = planner(retry=RETRY)
    first = await Runner.run(agent, "What is the stock of sku_7?")

    later = await Runner.run(agent, "thanks", previous_response_id=first.last_response_id)

    assert later.final_output == "Welcome."
    followed = ptc_emulator.entries[2:]
    assert [(e.status, e.request.get("previous_response_id")) for e in followed] == [
        (429, first.last_response_id),
        (200, first.last_response_id),
    ]


@pytest.mark.anyio
async def test_without_ptc_the_client_retries(ptc_emulator: PTCEmulator, monkeypatch: pytest.MonkeyPatch) -> None:
    fault = {"http_error": 429, "times": 2, "retry_after": 0.01}
    hello = {"message": "Hello.", "fault": fault}
    ptc_emulator.add_scenario({"name": "hi", "match": {"input": "hi"}, "turns": [hello]})
    ptc_emulator.use_env(monkeypatch)

    result = await Runner.run(planner(ptc=False), "hi")

    assert result.final_output == "Hello."
    assert statuses(ptc_emulator) == [(429, 0), (429, 1), (200, 2)]  # the client's x-stainless-retry-count


# ---- programmatic tools need strict output types ---------------------------------------------------


class Plain(TypedDict):
    sku: str


class Portable(typing_extensions.TypedDict):
    sku: str


def programmatic(annotation: Any) -> Any:
    def lookup(sku: str) -> Any:
        """Look a SKU up."""
        return {"sku": sku}

    lookup.__annotations__["return"] = annotation
    return function_tool(lookup, allowed_callers=["programmatic"])


STRICT_RULE = "A programmatic function tool return annotation must define a strict JSON object schema"


@pytest.mark.parametrize("annotation", [Stock, Portable])
def test_a_programmatic_tool_returning_an_object_type_has_an_output_schema(annotation: Any) -> None:
    schema = programmatic(annotation).output_json_schema
    assert schema["type"] == "object" and schema["additionalProperties"] is False and "sku" in schema["properties"]


@pytest.mark.parametrize("annotation", [dict, dict[str, int], int, list[str]])
def test_a_programmatic_tool_returning_no_object_type_is_refused(annotation: Any) -> None:
    with pytest.raises(UserError, match=STRICT_RULE):
        programmatic(annotation)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="typing.TypedDict is readable from Python 3.12")
def test_typing_typeddict_is_refused_before_python_3_12() -> None:
    with pytest.raises(UserError, match=STRICT_RULE):
        programmatic(Plain)


@pytest.mark.parametrize("annotation", [str, Any])
def test_an_untyped_programmatic_tool_has_no_output_schema(annotation: Any) -> None:
    assert programmatic(annotation).output_json_schema is None
