"""Scenario mistakes refused when the scenario is added, naming the field, rather than played as
something else: a program fault on a turn with no program (which injected nothing, and the journal
said it had), a group named twice in a pattern (the second alternative's capture was lost, a 400 at
request time), a group named as a template variable (one hid the other), and `true` or `false`
where a number goes (read as 1 or 0). And a turn's fault applies once, to the response that starts
the turn, also when its calls are played one a response."""

from __future__ import annotations

from typing import Any

import pytest

from ptc_emulator.testing.server import PTCEmulator

LOOKUP = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}


def refused(emulator: PTCEmulator, scenario: dict[str, Any]) -> str:
    with pytest.raises(ValueError) as caught:
        emulator.add_scenario({"name": "refused", **scenario})
    message = str(caught.value)
    assert message.startswith("Invalid scenario: ")
    return message.removeprefix("Invalid scenario: ")


@pytest.mark.parametrize(
    "fault", [{"program_timeout": True}, {"program_incomplete": "boom"}], ids=lambda f: next(iter(f))
)
@pytest.mark.parametrize(
    ("turn", "kind"),
    [({"message": "m"}, "a message"), ({"call": {"name": "lookup", "arguments": {}}}, "a call")],
    ids=["message", "call"],
)
def test_a_program_fault_on_a_turn_without_a_program_is_refused(
    ptc_emulator: PTCEmulator, fault: dict[str, Any], turn: dict[str, Any], kind: str
) -> None:
    turns = [{**turn, "fault": fault}, {"message": "after"}]
    message = refused(ptc_emulator, {"match": {"input": "^g0$"}, "turns": turns})
    name = next(iter(fault))
    assert message.startswith(f"scenario: turns.0: Value error, {name} goes with a program turn: ")
    assert f"{kind} turn has none (the fault would inject nothing)" in message


def test_a_program_fault_that_injects_nothing_said_is_accepted(ptc_emulator: PTCEmulator) -> None:
    """`program_timeout: false` says no fault: the turn's kind does not matter."""
    ptc_emulator.add_scenario(
        {"match": {"input": "^g1$"}, "turns": [{"message": "m", "fault": {"program_timeout": False}}]}
    )
    assert ptc_emulator.client().responses.create(model="gpt-test", input="g1").output_text == "m"


def test_a_call_turns_fault_applies_once_when_its_calls_come_one_a_response(ptc_emulator: PTCEmulator) -> None:
    """`parallel_tool_calls: false` plays a two-call turn in two responses: only the first starts
    the turn, so `times: 1` is one 500 (and the latency one delay), not one for each call."""
    fault = {"http_error": 500, "times": 1, "retry_after": 0.01, "latency_ms": 1}
    calls = [{"name": "lookup", "arguments": {"n": 1}}, {"name": "lookup", "arguments": {"n": 2}}]
    ptc_emulator.add_scenario(
        {"match": {"input": "^two lookups$"}, "turns": [{"call": calls, "fault": fault}, {"message": "done"}]}
    )
    client = ptc_emulator.client(max_retries=2)
    history: list[Any] = [{"role": "user", "content": "two lookups"}]
    texts = []
    for _ in range(3):
        response = client.responses.create(
            model="gpt-test", input=history, tools=[LOOKUP], store=False, parallel_tool_calls=False
        )
        history += [item.model_dump(exclude_none=True) for item in response.output]
        for item in response.output:
            if item.type == "function_call":
                texts.append(item.arguments)
                history.append({"type": "function_call_output", "call_id": item.call_id, "output": "ok"})
    assert texts == ['{"n":1}', '{"n":2}'] and response.output_text == "done"
    assert [(e["status"], e["fault"]) for e in ptc_emulator.journal] == [
        (500, "http_error 500 (1 of 1)"),
        (200, "latency 1 ms"),
        (200, None),  # the turn's second call: the turn started a response before
        (200, None),
    ]


GROUPED_FIELDS = [
    ({"input": "^q5 (?P<x>a)|^q5 (?P<x>b)"}, "match.input", "^q5 (?P<x>a)|^q5 (?P<x>b)"),
    ({"instructions": "(?P<x>a)|(?<x>b)"}, "match.instructions", "(?P<x>a)|(?<x>b)"),
    ({"history": [{"text": "(?P<x>a)(?P<y>c)|(?P<x>b)"}]}, "match.history.0.text", "(?P<x>a)(?P<y>c)|(?P<x>b)"),
    ({"outputs": [{"output": "(?P<x>a)|(?P<x>b)"}]}, "match.outputs.0.output", "(?P<x>a)|(?P<x>b)"),
]


@pytest.mark.parametrize(("match", "field", "pattern"), GROUPED_FIELDS, ids=[f[1] for f in GROUPED_FIELDS])
def test_a_group_named_twice_is_refused(
    ptc_emulator: PTCEmulator, match: dict[str, Any], field: str, pattern: str
) -> None:
    message = refused(ptc_emulator, {"match": match, "turns": [{"message": "x={{ x }}"}]})
    assert message == (
        f"scenario: {field}: Value error, the regular expression {pattern!r} names two groups 'x': only the "
        "first would bind {{ x }}; give each group its own name"
    )


def test_a_name_twice_only_in_appearance_is_accepted(ptc_emulator: PTCEmulator) -> None:
    """An escaped parenthesis, a character class and `\\Q...\\E` hold no group: one `x` only."""
    pattern = r"^q6 \(?P<x>\) [(?P<x>] \Q(?P<x>)\E(?P<x>\w+)"
    ptc_emulator.add_scenario({"match": {"input": pattern}, "turns": [{"message": "x={{ x }}"}]})
    response = ptc_emulator.client().responses.create(model="gpt-test", input="q6 P<x>) x (?P<x>)word")
    assert response.output_text == "x=word"


def test_both_alternatives_bind_when_named_apart(ptc_emulator: PTCEmulator) -> None:
    """What the refusal asks for, shown working: a name for each alternative."""
    ptc_emulator.add_scenario(
        {"match": {"input": "^q7 (?P<a>a)|^q7 (?P<b>b)"}, "turns": [{"message": "{{ a if a is defined else b }}"}]}
    )
    client = ptc_emulator.client()
    assert [client.responses.create(model="gpt-test", input=t).output_text for t in ("q7 a", "q7 b")] == ["a", "b"]


TEMPLATE_NAMES = ["input", "result", "data", "program", "output", "outputs", "loaded"]


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_a_group_named_as_a_template_variable_is_refused(ptc_emulator: PTCEmulator, name: str) -> None:
    pattern = f"^q8 (?P<{name}>\\w+)"
    message = refused(ptc_emulator, {"match": {"input": pattern}, "turns": [{"message": f"{{{{ {name} }}}}"}]})
    assert message == (
        f"scenario: match.input: Value error, the regular expression {pattern!r} has a group named {name!r}, "
        f"a name the templates already have ({{{{ {name} }}}}: see the template variables); give the group "
        "another name"
    )


def test_a_group_named_as_a_template_variable_is_refused_in_history_too(ptc_emulator: PTCEmulator) -> None:
    message = refused(ptc_emulator, {"match": {"history": [{"text": "(?P<result>\\w+)"}]}, "turns": [{"message": "m"}]})
    assert message.startswith("scenario: match.history.0.text: Value error, the regular expression")
    assert "has a group named 'result'" in message


JINJA_GLOBALS = ["range", "namespace", "dict", "lipsum", "cycler", "joiner"]


@pytest.mark.parametrize("name", JINJA_GLOBALS)
def test_a_group_named_as_a_jinja_global_is_refused(ptc_emulator: PTCEmulator, name: str) -> None:
    """Before, it was added, and every request it matched was a 400: `'str' object is not callable`
    (the capture hid the global)."""
    pattern = f"^q9 (?P<{name}>\\w+)"
    message = refused(ptc_emulator, {"match": {"input": pattern}, "turns": [{"message": "{{ range(2)|list }}"}]})
    assert message == (
        f"scenario: match.input: Value error, the regular expression {pattern!r} has a group named {name!r}, "
        f"a name the templates already have ({{{{ {name} }}}}: see the template variables); give the group "
        "another name"
    )


@pytest.mark.parametrize("name", ["none", "None", "true", "True", "false", "False", "self"])
def test_a_group_named_as_a_jinja_literal_or_self_is_refused(ptc_emulator: PTCEmulator, name: str) -> None:
    """Before, it was added, and `{{ none }}` rendered Jinja's None (`{{ self }}` the template
    reference), never the text the group captured."""
    pattern = f"^q12 (?P<{name}>\\w+)"
    message = refused(ptc_emulator, {"match": {"input": pattern}, "turns": [{"message": f"got {{{{ {name} }}}}"}]})
    assert message == (
        f"scenario: match.input: Value error, the regular expression {pattern!r} has a group named {name!r}, "
        f"a name the templates already have ({{{{ {name} }}}}: see the template variables); give the group "
        "another name"
    )


def test_the_globals_the_templates_call_still_work(ptc_emulator: PTCEmulator) -> None:
    turn = {
        "message": "{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"
    }
    ptc_emulator.add_scenario({"match": {"input": "^q10 (?P<word>\\w+)"}, "turns": [turn]})
    assert ptc_emulator.client().responses.create(model="gpt-test", input="q10 go").output_text == "3"


TWO_FIELDS = [
    ({"input": "^q11 (?P<x>\\w+)", "instructions": "^(?P<x>\\w+)"}, "match.input", "match.instructions"),
    ({"model": "(?P<x>gpt)-test", "input": "^q11 (?P<x>\\w+)"}, "match.input", "match.model"),
    ({"input": "^q11 (?P<x>\\w+)", "history": [{"text": "(?P<x>\\w+)"}]}, "match.input", "match.history.0.text"),
    ({"history": [{"text": "(?P<x>a)"}, {"text": "(?P<x>b)"}]}, "match.history.0.text", "match.history.1.text"),
    (
        {"instructions": "(?P<x>a)", "outputs": [{"output": "(?P<x>\\w+)"}]},
        "match.instructions",
        "match.outputs.0.output",
    ),
]


@pytest.mark.parametrize(("match", "first", "second"), TWO_FIELDS, ids=[f"{f[1]}+{f[2]}" for f in TWO_FIELDS])
def test_a_group_named_in_two_fields_is_refused(
    ptc_emulator: PTCEmulator, match: dict[str, Any], first: str, second: str
) -> None:
    """Before, it was added, and one field's capture silently hid the other's."""
    message = refused(ptc_emulator, {"match": match, "turns": [{"message": "x={{ x }}"}]})
    assert message == (
        f"scenario: match: Value error, {min(first, second, key=ORDER.index)} and "
        f"{max(first, second, key=ORDER.index)} both name a group 'x': only one of their captures would bind "
        "{{ x }}; give each group its own name"
    )


ORDER = [
    "match.input",
    "match.model",
    "match.instructions",
    "match.history.0.text",
    "match.history.1.text",
    "match.outputs.0.output",
]


def test_groups_named_apart_in_two_fields_both_bind(ptc_emulator: PTCEmulator) -> None:
    """What the refusal asks for, shown working: a name for each field's group."""
    match = {"input": "^q12 (?P<x>\\w+)", "instructions": "^(?P<y>\\w+)"}
    ptc_emulator.add_scenario({"match": match, "turns": [{"message": "{{ x }}/{{ y }}"}]})
    client = ptc_emulator.client()
    response = client.responses.create(model="gpt-test", input="q12 fromInput", instructions="fromInstructions")
    assert response.output_text == "fromInput/fromInstructions"


BOOLEANS = [
    ({"priority": True}, "priority", "true", "1"),
    ({"turns": [{"message": "m", "fault": {"latency_ms": True}}]}, "turns.0.fault.latency_ms", "true", "1"),
    ({"turns": [{"message": "m", "fault": {"http_error": 500, "times": True}}]}, "turns.0.fault.times", "true", "1"),
    (
        {"turns": [{"message": "m", "fault": {"http_error": 500, "retry_after": False}}]},
        "turns.0.fault.retry_after",
        "false",
        "0",
    ),
    (
        {"turns": [{"message": "m", "fault": {"cut_stream_after": False}}]},
        "turns.0.fault.cut_stream_after",
        "false",
        "0",
    ),
    ({"turns": [{"search": {"query": "q", "limit": True}}, {"message": "m"}]}, "turns.0.search.limit", "true", "1"),
]


@pytest.mark.parametrize(("scenario", "field", "given", "read"), BOOLEANS, ids=[b[1] for b in BOOLEANS])
def test_a_boolean_where_a_number_goes_is_refused(
    ptc_emulator: PTCEmulator, scenario: dict[str, Any], field: str, given: str, read: str
) -> None:
    message = refused(ptc_emulator, {"match": {"input": "^b$"}, "turns": [{"message": "m"}], **scenario})
    assert message == (
        f"scenario: {field}: Value error, a number is wanted here, not {given} (a boolean would be read as {read})"
    )


def test_a_number_where_a_number_goes_is_accepted(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario(
        {"match": {"input": "^b1$"}, "priority": 1, "turns": [{"message": "m", "fault": {"latency_ms": 1}}]}
    )
    assert ptc_emulator.client().responses.create(model="gpt-test", input="b1").output_text == "m"
    assert ptc_emulator.journal[-1]["fault"] == "latency 1 ms"


def test_the_admin_api_answers_the_refusal_as_a_400(ptc_emulator: PTCEmulator) -> None:
    """Through the admin API the refusal is OpenAI's envelope (`invalid_scenario`)."""
    reply = ptc_emulator.admin.post(
        "/scenarios", json={"match": {"input": "^g$"}, "turns": [{"message": "m", "fault": {"program_timeout": True}}]}
    )
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == "invalid_scenario"
    assert "program_timeout goes with a program turn" in error["message"]


def test_a_direct_mcp_calls_fault_applies_once_not_again_at_its_approval(ptc_emulator: PTCEmulator) -> None:
    """The turn's first response asks the approval; the one that plays the approved call goes on
    with the same turn, so the fault is not injected again (`times: 1` is one 500)."""
    hosted = {"mcp_servers": {"docs": {"tools": [{"name": "wipe", "output": "wiped"}]}}}
    fault = {"http_error": 500, "times": 1, "retry_after": 0.01, "latency_ms": 1}
    turns = [{"mcp": {"server_label": "docs", "name": "wipe"}, "fault": fault}, {"message": "done: {{ outputs.wipe }}"}]
    ptc_emulator.add_scenario({"match": {"input": "^approve wipe$"}, "hosted": hosted, "turns": turns})
    mcp = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/mcp"}
    user = {"role": "user", "content": "approve wipe"}
    client = ptc_emulator.client(max_retries=2)
    first = client.responses.create(model="gpt-test", tools=[mcp], input=[user], store=False)
    [request] = [item for item in first.output if item.type == "mcp_approval_request"]
    answer = {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
    sent = [user, *(item.model_dump(exclude_none=True) for item in first.output), answer]
    final = client.responses.create(model="gpt-test", tools=[mcp], input=sent, store=False)
    assert final.output_text == "done: wiped"
    assert [(e["status"], e["fault"]) for e in ptc_emulator.journal] == [
        (500, "http_error 500 (1 of 1)"),
        (200, "latency 1 ms"),
        (200, None),
    ]
