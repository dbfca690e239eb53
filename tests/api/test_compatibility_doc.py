"""docs/compatibility.md must not rot: the versions it names are the ones the locks and the Go and
Java builds pin, every test it names exists, is marked `sdk` and says which client it ran, a row it
leaves to another language's suite says so exactly while that suite is missing, and the 400s it
quotes are what the server says to a framework's body."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import openai
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")

INVENTORY = "Compare inventory with demand for sku_123."  # the bundled demo scenario's question
TOOLS: list[Any] = [
    *(
        {"type": "function", "name": name, "allowed_callers": ["programmatic"]}
        for name in ("get_inventory", "get_demand")
    ),
    {"type": "programmatic_tool_calling"},
]


def section(title: str) -> str:
    start = DOC.index(f"\n## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end != -1 else len(DOC)]


def pins(lock: str) -> dict[str, str]:
    text = (ROOT / "locks" / lock).read_text(encoding="utf-8")
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", text, re.MULTILINE))


def test_the_python_versions_are_the_locked_ones() -> None:
    named = re.findall(r"`(openai|openai-agents)==([^`]+)`", section("Python"))
    newest, oldest = pins("python.txt"), pins("python-oldest.txt")
    assert sorted(v for n, v in named if n == "openai") == sorted({oldest["openai"], newest["openai"]})
    assert {v for n, v in named if n == "openai-agents"} == {newest["openai-agents"], oldest["openai-agents"]}
    # The oldest is the Makefile's too, and the one pyproject names as the lower bound.
    assert re.search(rf"^OLDEST_SDK\s*\?=\s*{re.escape(oldest['openai'])}$", (ROOT / "Makefile").read_text(), re.M)
    assert f'"openai>={oldest["openai"].removesuffix(".0")}' in (ROOT / "pyproject.toml").read_text()
    # This run's own client is one of the two the page names.
    assert openai.__version__ in {oldest["openai"], newest["openai"]}


def test_the_go_and_java_versions_are_the_builds_ones() -> None:
    """The Go row names the two modules' openai-go, the Java row pom.xml's two openai-java releases."""
    table = section("Node, Go and Java").splitlines()
    rows = {row.split("|")[1].strip(): row.split("|")[2] for row in table if row.startswith("| ")}
    go = ROOT / "tests" / "sdk" / "go"
    modules = [(go / mod).read_text() for mod in ("go.mod", "go.oldest.mod")]
    go_versions = [re.findall(r"^require github.com/openai/openai-go/v3 (\S+)$", m, re.M) for m in modules]
    assert sorted(re.findall(r"v3\.\d+\.\d+", rows["Go `github.com/openai/openai-go/v3`"])) == sorted(
        v for (v,) in go_versions
    )
    pom = (ROOT / "tests" / "sdk" / "java" / "pom.xml").read_text()
    releases = re.findall(r"<openai-java\.(?:newest|earlier)>([^<]+)<", pom)
    assert len(releases) == 2
    assert sorted(set(re.findall(r"\b4\.\d+\.\d+\b", rows["Java `com.openai:openai-java`"]))) == sorted(releases)


def _marked_sdk(node: ast.AST) -> bool:
    return any("pytest.mark.sdk" in ast.unparse(d) for d in getattr(node, "decorator_list", []))


def test_every_test_named_exists_is_marked_sdk_and_says_which_client_ran() -> None:
    named = sorted(set(re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", DOC)))
    assert len(named) >= 15  # both clients' flows
    for path, name in named:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        module_mark = any(
            isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
            and "pytest.mark.sdk" in ast.unparse(n.value)
            for n in tree.body
        )
        [test] = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name]
        assert module_mark or _marked_sdk(test), f"{path}::{name} is not marked sdk"
        calls = [n for n in ast.walk(test) if isinstance(n, ast.Call) and ast.unparse(n.func) == "client_version"]
        assert calls, f"{path}::{name} does not say which client it ran"
    seeds = re.findall(r"`(tests/[\w/]+/seeds/\w+\.py)`", DOC)
    assert seeds and all((ROOT / seed).is_file() for seed in seeds)


@pytest.mark.parametrize("language", ["node", "go", "java"])
def test_a_row_left_to_another_suite_says_so_while_that_suite_is_missing(language: str) -> None:
    suite = f"tests/sdk/test_{language}.py"
    pending = f"added by {suite}" in section("Node, Go and Java")
    assert pending != (ROOT / suite).is_file(), (
        f"{suite} exists: the page's rows must say what it runs" if not pending else f"{suite} is missing"
    )


def quoted_errors() -> list[str]:
    return re.findall(
        r"```text\n(.*?)\n```", section("Why a framework that drops `program` or `caller` fails here"), re.S
    )


def said(error: openai.BadRequestError, call_id: str, program_call_id: str) -> str:
    body = error.body
    assert isinstance(body, dict) and set(body) == {"message", "type", "param", "code"}
    message = str(body["message"]).replace(program_call_id, "<program_call_id>").replace(call_id, "<call_id>")
    return f"{error.status_code} {body['type']}, param {body['param']}\n{message}"


def paused(client: openai.OpenAI, **options: Any) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """The demo's inventory program paused on its two calls: the response id, the program, the calls."""
    response = client.responses.create(model="m", input=INVENTORY, tools=TOOLS, **options)
    program, *calls = (item.model_dump(mode="json", exclude_none=True) for item in response.output)
    assert program["type"] == "program" and [c["type"] for c in calls] == ["function_call", "function_call"]
    return response.id, program, calls


def output(call: dict[str, Any], caller: bool = True) -> dict[str, Any]:
    """The output of a call, with the tool's result, as the guide's loop sends it (or without its caller)."""
    results = {
        "get_inventory": {"sku": "sku_123", "available_units": 42},
        "get_demand": {"sku": "sku_123", "requested_units": 31},
    }
    item = {"type": "function_call_output", "call_id": call["call_id"], "output": json.dumps(results[call["name"]])}
    return {**item, "caller": call["caller"]} if caller else item


def test_the_quoted_400s_are_what_the_server_says(client: openai.OpenAI) -> None:
    dropped_program, dropped_caller = quoted_errors()

    # store:false, replayed as a framework that knows no `program` item rebuilds it.
    _, program, calls = paused(client, store=False)
    replay = [{"role": "user", "content": INVENTORY}, *calls, *map(output, calls)]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input=replay, tools=TOOLS, store=False)
    assert said(caught.value, calls[0]["call_id"], program["call_id"]) == dropped_program
    replay.insert(1, program)  # with it, the same replay goes on
    resumed = client.responses.create(model="m", input=replay, tools=TOOLS, store=False)
    assert [i.type for i in resumed.output] == ["program_output", "message"]

    # previous_response_id, the outputs sent without their callers.
    stored, program, calls = paused(client)
    bare = [output(call, caller=False) for call in calls]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="m", input=bare, tools=TOOLS, previous_response_id=stored)
    assert said(caught.value, calls[0]["call_id"], program["call_id"]) == dropped_caller
    done = client.responses.create(model="m", input=[*map(output, calls)], tools=TOOLS, previous_response_id=stored)
    assert [i.type for i in done.output] == ["program_output", "message"]
