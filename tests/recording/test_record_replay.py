"""Record against an upstream emulator, stop it, replay offline (serve --upstream --record)."""

from __future__ import annotations

import json
import runpy
import socket
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from tests.api.test_seed_loops import EXPECTED, SEEDS
from tests.recording.recording_support import (
    chain_loop,
    client,
    journal,
    recorder,
    replay_loop,
    replayer,
    upstream,
)
from tests.streaming.streaming_support import SERVER_EVENT, check_event

PARCEL_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "get_parcel",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        "allowed_callers": ["programmatic"],
    },
    {"type": "programmatic_tool_calling"},
]
PARCELS = {
    "match": {"input": "(?i)where are my parcels", "tools": ["get_parcel"]},
    "turns": [
        {
            "reasoning": "Look the parcels up one at a time.",
            "program": (
                "const seen = [];\n"
                'for (const id of ["P1", "P2", "P3"]) {\n'
                "  const parcel = await tools.get_parcel({ id });\n"
                "  seen.push(`${id} ${parcel.status}`);\n"
                "}\n"
                "text(JSON.stringify({ count: seen.length, summary: seen.join('; ') }));\n"
            ),
        },
        {"message": "{{ data.count }} parcels: {{ data.summary }}."},
    ],
}
PARCEL_QUESTION = "Where are my parcels?"
ORDER_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "get_order",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    }
]


def parcels(status: str) -> Any:
    return lambda name, args: {"id": args["id"], "status": f"{status} {args['id'].lower()}"}


def order(date: str) -> Any:
    return lambda name, args: {"order_id": args["order_id"], "promised_date": date}


def recorded(directory: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(directory.glob("*.yaml"))}


def test_a_program_that_pauses_three_times_records_and_replays_offline(tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with upstream(tmp_path) as up:
        up.add_scenario(PARCELS)
        with recorder(tmp_path, up.base_url, cassettes) as rec:
            live = chain_loop(client(rec), PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
        upstream_ids = [entry["response_id"] for entry in up.journal]
    assert [r.id for r in live] == upstream_ids  # the client got the upstream's responses
    assert len(live) == 4  # three pauses, then the output and the message
    assert live[-1].output_text == "3 parcels: P1 shipped p1; P2 shipped p2; P3 shipped p3."
    (name, text), *others = recorded(cassettes).items()
    assert not others
    scenario = yaml.safe_load(text)
    assert scenario["match"] == {"input": r"^Where are my parcels\?$", "tools": ["get_parcel"]}
    assert scenario["turns"][0]["program"] == PARCELS["turns"][0]["program"]  # type: ignore[index]
    assert scenario["turns"][0]["reasoning"] == "Look the parcels up one at a time."
    assert scenario["turns"][1] == {"message": "{{ data.count }} parcels: {{ data.summary }}."}
    assert "program: |" in text  # code as a block scalar

    # The upstream is gone: the replay runs the recorded program in this emulator's V8.
    with replayer(tmp_path, cassettes) as rep:
        sdk = client(rep)
        again = chain_loop(sdk, PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
        assert again[-1].output_text == live[-1].output_text
        assert len(again) == 4
        assert again[0].output[1].fingerprint != live[0].output[1].fingerprint  # its own signature
        # The client's tools run again: what they answer now is what the message says.
        changed = chain_loop(sdk, PARCEL_QUESTION, PARCEL_TOOLS, parcels("delayed"))
        assert changed[-1].output_text == "3 parcels: P1 delayed p1; P2 delayed p2; P3 delayed p3."
        assert [e["scenario"] for e in rep.journal][-1] == Path(name).stem


def test_a_direct_call_records_its_arguments_and_a_template_from_the_output(tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    question = "Why is order A-104 late?"
    with upstream(tmp_path) as up, recorder(tmp_path, up.base_url, cassettes) as rec:
        live = chain_loop(client(rec), question, ORDER_TOOLS, order("2026-11-30"))  # the bundled scenario
    assert live[0].output[0].type == "function_call"
    assert live[-1].output_text.startswith("Order A-104 was promised for 2026-11-30;")
    [text] = recorded(cassettes).values()
    turns = yaml.safe_load(text)["turns"]
    assert turns[0] == {"call": {"name": "get_order", "arguments": {"order_id": "A-104"}}}
    assert "{{ outputs.get_order.promised_date }}" in turns[1]["message"]
    with replayer(tmp_path, cassettes) as rep:
        again = chain_loop(client(rep), question, ORDER_TOOLS, order("2026-12-24"))
    assert again[-1].output_text == live[-1].output_text.replace("2026-11-30", "2026-12-24")


def test_a_stream_is_passed_through_and_recorded(tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with upstream(tmp_path) as up:
        up.add_scenario(PARCELS)
        with recorder(tmp_path, up.base_url, cassettes) as rec:
            live = chain_loop(client(rec), PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"), stream=True)
        assert [r.id for r in live] == [e["response_id"] for e in journal(up, len(live))]
    with replayer(tmp_path, cassettes) as rep:
        again = chain_loop(client(rep), PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"), stream=True)
    assert again[-1].output_text == live[-1].output_text


def test_the_seed_loop_replays_offline_with_the_same_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guide's store:false loop, verbatim, recorded and then replayed with the upstream stopped."""
    cassettes = tmp_path / "cassettes"

    def run(view: Any) -> str:
        monkeypatch.undo()  # the real OpenAI class for the client, then the seed's OpenAI() is it
        sdk = client(view)
        monkeypatch.setattr(openai, "OpenAI", lambda: sdk)
        runpy.run_path(str(SEEDS / "python_loop.py"), run_name="__main__")
        return capsys.readouterr().out.strip()

    with upstream(tmp_path) as up:
        with recorder(tmp_path, up.base_url, cassettes) as rec:
            recorded_text = run(rec)
        seen = len(up.journal)
    assert recorded_text == EXPECTED
    assert seen == 2
    [text] = recorded(cassettes).values()
    assert "{{ data.shortage_units }}" in text
    # The replayer also loads the bundled fixtures, whose inventory scenario matches this message
    # too: the recording wins.
    with replayer(tmp_path, cassettes) as rep:
        assert run(rep) == EXPECTED
        assert rep.journal[-1]["scenario"].startswith("recorded__compare_inventory")


def test_record_mode_new_replays_what_is_recorded_and_the_upstream_sees_nothing(tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with upstream(tmp_path) as up:
        up.add_scenario(PARCELS)
        with recorder(tmp_path, up.base_url, cassettes) as rec:
            first = chain_loop(client(rec), PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
            before = len(up.journal)
            second = chain_loop(client(rec), PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
            stored = replay_loop(client(rec), PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
            assert len(up.journal) == before  # both came from the recording
        assert second[-1].output_text == first[-1].output_text == stored[-1].output_text
        # A conversation nothing matches goes upstream and is recorded.
        with recorder(tmp_path, up.base_url, cassettes) as rec:
            chain_loop(client(rec), "Why is order A-104 late?", ORDER_TOOLS, order("2026-11-30"))
        assert len(up.journal) == before + 2
    assert len(recorded(cassettes)) == 2


def test_record_mode_none_never_records_and_fails_on_what_nothing_matches(tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()
    with upstream(tmp_path) as up:
        up.add_scenario(PARCELS)
        with recorder(tmp_path, up.base_url, cassettes, mode="none") as rec:
            with pytest.raises(openai.BadRequestError) as caught:
                chain_loop(client(rec), PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
        assert caught.value.code == "no_scenario_matched"
        assert up.journal == []
    assert recorded(cassettes) == {}


def test_record_mode_all_rerecords_the_same_file(tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with upstream(tmp_path) as up:
        up.add_scenario(PARCELS)
        with recorder(tmp_path, up.base_url, cassettes, mode="all") as rec:
            replay_loop(client(rec), PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
            first = recorded(cassettes)
            before = len(up.journal)
            replay_loop(client(rec), PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
            assert len(up.journal) == before * 2  # everything went upstream again
        with recorder(tmp_path, up.base_url, cassettes, mode="all") as rec:
            chain_loop(client(rec), PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
    assert recorded(cassettes) == first  # byte for byte: store:false or chained, twice
    assert len(first) == 1


def test_secrets_are_not_written(tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with upstream(tmp_path) as up:
        up.add_scenario(PARCELS)
        with recorder(tmp_path, up.base_url, cassettes) as rec:
            sdk = client(rec).with_options(api_key="sk-secret-0123456789")
            chain_loop(sdk, PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
    [text] = recorded(cassettes).values()
    assert "sk-" not in text and "uthorization" not in text and "Bearer" not in text
    assert json.dumps(yaml.safe_load(text))  # plain data


def test_an_unreachable_upstream_is_a_clear_error(tmp_path: Path) -> None:
    # A port held bound but not listening: refused, and no other server of the suite can take it
    # meanwhile (a port freed again could be, and would then answer).
    with socket.socket() as held, recorder(tmp_path, _bound_url(held), tmp_path / "cassettes") as rec:
        sdk = client(rec)
        with pytest.raises(openai.InternalServerError) as caught:
            sdk.responses.create(model="m", input=PARCEL_QUESTION, tools=PARCEL_TOOLS)
        assert caught.value.status_code == 502
        assert caught.value.code == "upstream_unreachable"
        with sdk.responses.connect() as conn:
            conn.response.create(model="m", input=PARCEL_QUESTION, tools=PARCEL_TOOLS)
            event = json.loads(conn.recv_bytes())
        check_event(event, SERVER_EVENT)
        assert event["type"] == "error" and event["status"] == 502
        assert event["error"]["code"] == "upstream_unreachable"
        # The emulator's own endpoints still answer.
        assert rec.scenarios == []


def _bound_url(sock: socket.socket) -> str:
    sock.bind(("127.0.0.1", 0))
    return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def test_record_mode_new_asks_the_instructions_matcher_where_a_conversation_plays(tmp_path: Path) -> None:
    """A scenario of the recorder that matches by instructions keeps a request whose instructions
    match (the upstream sees nothing), and lets one whose instructions do not go upstream."""
    cassettes = tmp_path / "cassettes"
    with upstream(tmp_path) as up:
        up.add_scenario({"match": {"input": "(?i)hello"}, "turns": [{"message": "Hello from upstream."}]})
        with recorder(tmp_path, up.base_url, cassettes) as rec:
            rec.add_scenario(
                {
                    "name": "clerk",
                    "match": {"input": "(?i)hello", "instructions": "(?i)clerk", "tool_choice": "auto"},
                    "turns": [{"message": "Hello from the clerk."}],
                }
            )
            sdk = client(rec)
            local = sdk.responses.create(model="gpt-test", instructions="You are a clerk.", input="Hello")
            assert up.journal == []
            recorded_answer = sdk.responses.create(model="gpt-test", instructions="You are a pirate.", input="Hello")
            forced = sdk.responses.create(
                model="gpt-test", instructions="You are a clerk.", input="Hello", tool_choice="none"
            )
    assert local.output_text == "Hello from the clerk."
    assert recorded_answer.output_text == forced.output_text == "Hello from upstream."
