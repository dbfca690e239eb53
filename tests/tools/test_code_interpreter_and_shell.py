"""Code interpreter and hosted shell: results come from the scenario (or the test's hosted script);
a program's calls stay inside the runtime; an unscripted call ends the program `incomplete`."""

from __future__ import annotations

from typing import Any

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, validating_client

PTC = {"type": "programmatic_tool_calling"}
CI = {"type": "code_interpreter", "container": {"type": "auto"}, "allowed_callers": ["programmatic"]}
SHELL = {"type": "shell", "environment": {"type": "container_auto"}, "allowed_callers": ["programmatic"]}

HOSTED: dict[str, Any] = {
    "code_interpreter": [
        {"code": "sum\\(", "logs": "6\n"},
        {"code": "1 / 0", "error": "ZeroDivisionError: division by zero"},
    ],
    "shell": [
        {"command": "ls( -l)?", "stdout": "a.txt\nb.txt\n"},
        {"command": "false", "exit_code": 1, "stderr": "nope"},
    ],
}

CI_PROGRAM = """
const r = await tools.code_interpreter({code: 'print(sum([1, 2, 3]))'});
let failed = '';
try { await tools.code_interpreter({code: '1 / 0'}); } catch (e) { failed = e.message; }
text(`${r.logs.trim()} from ${r.outputs.length} output; ${failed}`);
"""


def test_a_program_calls_a_scripted_code_interpreter(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {
            "match": {"input": "^crunch"},
            "hosted": HOSTED,
            "turns": [{"program": CI_PROGRAM}, {"message": "Result: {{ result }}"}],
        }
    )
    client = validating_client(ptc_emulator)
    response = client.responses.create(model="gpt-test", tools=[PTC, CI], input="crunch the numbers")
    assert [i.type for i in response.output] == ["program", "program_output", "message"]
    assert response.output_text == "Result: 6 from 1 output; ZeroDivisionError: division by zero"
    [entry] = ptc_emulator.journal
    assert [(c["kind"], c["route"], c["status"]) for c in entry["hosted_calls"]] == [
        ("code_interpreter", "program", "completed"),
        ("code_interpreter", "program", "failed"),
    ]
    assert entry["figures"]["tool_calls"]["code_interpreter"] == {"direct": 0, "program": 2}


def test_an_inline_program_uses_the_tests_hosted_script(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.set_hosted(HOSTED)
    client = validating_client(ptc_emulator)
    response = client.responses.create(model="gpt-test", tools=[PTC, CI], input=js(CI_PROGRAM))
    assert response.output_text == "6 from 1 output; ZeroDivisionError: division by zero"


def test_an_unscripted_code_interpreter_call_ends_the_program_incomplete(ptc_emulator: PTCEmulator) -> None:
    client = validating_client(ptc_emulator)
    response = client.responses.create(
        model="gpt-test", tools=[PTC, CI], input=js("text('before'); await tools.code_interpreter({code: 'x'});")
    )
    output = response.output[1]
    assert output.type == "program_output" and output.status == "incomplete"
    assert output.result.startswith("before\nunscripted: The program called tools.code_interpreter")
    assert "hosted.code_interpreter" in output.result
    assert "did not complete" in response.output_text


def test_a_program_runs_commands_in_a_hosted_shell(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.set_hosted(HOSTED)
    client = validating_client(ptc_emulator)
    code = """
const out = await tools.shell({commands: ['ls', 'false']});
text(JSON.stringify(out.map(o => [o.stdout, o.stderr, o.outcome])));
"""
    response = client.responses.create(model="gpt-test", tools=[PTC, SHELL], input=js(code))
    assert [i.type for i in response.output] == ["program", "program_output", "message"]
    assert response.output_text == (
        '[["a.txt\\nb.txt\\n","",{"type":"exit","exit_code":0}],["","nope",{"type":"exit","exit_code":1}]]'
    )


def test_an_unscripted_hosted_shell_command_ends_the_program_incomplete(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.set_hosted(HOSTED)
    client = validating_client(ptc_emulator)
    response = client.responses.create(
        model="gpt-test", tools=[PTC, SHELL], input=js("await tools.shell({commands: ['rm -rf /']})")
    )
    output = response.output[1]
    assert output.type == "program_output" and output.status == "incomplete"
    assert "'rm -rf /'" in output.result and "hosted.shell" in output.result
