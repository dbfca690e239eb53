"""Three replicas on one PostgreSQL database with one secret, the official client sending each
request to the next replica in turn: what one server gives, whichever replica answers.

The replicas share a database for the module (each test uses its own scope or ids); they are
started once, as a deployment would be.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import psycopg
import pytest
import websockets
import websockets.sync.client

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.storage import pgpool
from ptc_emulator.emulator.storage.pgpool import WAIT_S
from ptc_emulator.testing.process import ServerProcess
from tests.agents.agents_support import GET_CUSTOMER, customer, events_until, get_customer_code, js, valid
from tests.conversations.test_concurrent_continuations import Gate
from tests.replicas.cluster import Cluster
from tests.replicas.replicas_support import FIXTURES, SECRET, admin, replicas, round_robin_client
from tests.scenarios.test_faults import counted_afresh
from tests.support import in_process_http

EXPECTED = "sku_123: 42 units available against 31 requested, so the shortage is 0 units."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": name,
        "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        "allowed_callers": ["programmatic"],
    }
    for name in ("get_inventory", "get_demand")
] + [{"type": "programmatic_tool_calling"}]


def run_tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name == "get_inventory":
        return {"sku": args["sku"], "available_units": 42}
    return {"sku": args["sku"], "requested_units": 31}


@pytest.fixture(scope="module")
def three(postgres_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[ServerProcess]]:
    url = postgres_cluster.database()
    with replicas(tmp_path_factory.mktemp("replicas"), url, 3) as started:
        # The inventory scenario, added at run time through one replica's admin API only.
        text = (FIXTURES / "inventory__sku_123.yaml").read_text(encoding="utf-8")
        added = admin(started[0], "POST", "/scenarios", json={"yaml": text, "name": "inventory"})
        assert added.status_code == 201, added.text
        yield started


def outputs(response: Any) -> list[dict[str, Any]]:
    calls = [item for item in response.output if item.type == "function_call"]
    return [
        {
            "type": "function_call_output",
            "call_id": call.call_id,
            "output": json.dumps(run_tool(call.name, json.loads(call.arguments))),
            "caller": call.caller.model_dump() if call.caller else None,
        }
        for call in calls
    ]


def test_every_replica_reports_the_shared_database(three: list[ServerProcess]) -> None:
    for server in three:
        health = server.health()
        assert health["store"] == "postgresql" and health["database"] == "ok"


def test_the_ptc_loop_with_store_false_across_replicas(three: list[ServerProcess]) -> None:
    client, transport = round_robin_client(three)
    items: list[Any] = [{"role": "user", "content": "Compare inventory with demand for sku_123."}]
    with client:
        for _ in range(4):
            response = client.responses.create(model="gpt-6-astra", store=False, input=items, tools=TOOLS)
            assert response.status == "completed"
            items.extend(item.model_dump(exclude_none=True) for item in response.output)
            if not outputs(response):
                break
            items.extend(outputs(response))
    assert response.output_text == EXPECTED
    assert len(transport.served) == 2, "two steps, two replicas"


def test_the_ptc_loop_by_previous_response_id_across_replicas(three: list[ServerProcess]) -> None:
    client, transport = round_robin_client(three)
    with client:
        first = client.responses.create(
            model="gpt-6-astra", input="Compare inventory with demand for sku_123.", tools=TOOLS
        )
        assert [i.type for i in first.output if i.type == "function_call"] == ["function_call"] * 2
        second = client.responses.create(
            model="gpt-6-astra", previous_response_id=first.id, input=outputs(first), tools=TOOLS
        )
        assert second.output_text == EXPECTED
        again = client.responses.retrieve(second.id)  # stored by one replica, read from another
        assert again.output_text == EXPECTED and again.previous_response_id == first.id
        items = client.responses.input_items.list(second.id)
        assert [i.type for i in items.data] == ["function_call_output"] * 2
        client.responses.delete(first.id)  # on yet another replica
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(first.id)
    assert set(transport.served) == {s.port for s in three}, "every replica answered a step"


def test_a_conversation_across_replicas(three: list[ServerProcess]) -> None:
    client, transport = round_robin_client(three)
    with client:
        conversation = client.conversations.create(metadata={"topic": "inventory"})
        first = client.responses.create(
            model="gpt-6-astra",
            conversation=conversation.id,
            input="Compare inventory with demand for sku_123.",
            tools=TOOLS,
        )
        second = client.responses.create(
            model="gpt-6-astra", conversation=conversation.id, input=outputs(first), tools=TOOLS
        )
        assert second.output_text == EXPECTED
        items = client.conversations.items.list(conversation.id, order="asc")
        types = [i.type for i in items.data]
    assert types[0] == "message" and types[-1] == "message" and types.count("function_call_output") == 2
    assert len(transport.served) == 3


def test_scenarios_added_on_one_replica_match_on_the_others_and_go_when_removed(three: list[ServerProcess]) -> None:
    scenario = {"name": "hello-replicas", "match": {"input": "hello replicas"}, "turns": [{"message": "hi all"}]}
    scope = {"x-ptc-emulator-scope": "test-scenarios"}
    assert admin(three[1], "POST", "/scenarios", json=scenario, headers=scope).status_code == 201
    for server in three:
        listed = admin(server, "GET", "/scenarios", headers=scope).json()["data"]
        assert "hello-replicas" in [s["name"] for s in listed]
        reply = httpx.post(
            f"{server.base_url}/responses", json={"model": "m", "input": "hello replicas"}, headers=scope, timeout=30
        )
        assert reply.status_code == 200 and reply.json()["output"][0]["content"][0]["text"] == "hi all"
    assert admin(three[2], "DELETE", "/scenarios/hello-replicas", headers=scope).status_code == 200
    for server in three:
        listed = admin(server, "GET", "/scenarios", headers=scope).json()["data"]
        assert "hello-replicas" not in [s["name"] for s in listed]


def test_a_scenario_added_on_one_replica_and_removed_on_another_is_gone_on_the_first(
    three: list[ServerProcess],
) -> None:
    scenario = {"name": "short-lived", "match": {"input": "short lived"}, "turns": [{"message": "still here"}]}
    scope = {"x-ptc-emulator-scope": "test-short-lived"}
    assert admin(three[0], "POST", "/scenarios", json=scenario, headers=scope).status_code == 201
    assert admin(three[1], "DELETE", "/scenarios/short-lived", headers=scope).status_code == 200
    reply = httpx.post(
        f"{three[0].base_url}/responses", json={"model": "m", "input": "short lived"}, headers=scope, timeout=30
    )
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "no_scenario_matched", reply.text


def test_end_and_reset_on_a_replica_that_never_read_the_scopes_scenarios_see_them(three: list[ServerProcess]) -> None:
    """The pytest plugin's teardown behind a load balancer: `end` on a replica no request of the
    test reached names the scenario added through another and never used (before, it answered
    `ended: true` and removed it), and `reset` counts what it removed (before, 0)."""
    scope = {"x-ptc-emulator-scope": "test-end-elsewhere"}
    for name in ("never-used", "also-never-used"):
        scenario = {"name": name, "match": {"input": f"^{name}$"}, "turns": [{"message": "x"}]}
        assert admin(three[0], "POST", "/scenarios", json=scenario, headers=scope).status_code == 201
    ended = admin(three[1], "POST", "/end", json={}, headers=scope).json()
    assert ended == {"ended": False, "unmatched": 0, "unused": ["also-never-used", "never-used"]}, ended
    listed = admin(three[0], "GET", "/scenarios", headers=scope).json()["data"]
    assert len([s for s in listed if s["scope"] == "test-end-elsewhere"]) == 2, "nothing forgotten"
    reset = admin(three[2], "POST", "/reset", json={}, headers=scope).json()
    assert reset["scenarios_removed"] == 2, reset
    # the replica that added them no longer names them
    ended = admin(three[0], "POST", "/end", json={}, headers=scope).json()
    assert ended["ended"] is True and ended["unused"] == [], ended


def test_end_counts_a_use_on_another_replica(three: list[ServerProcess]) -> None:
    """A scenario added on one replica, played on a second, ended on a third: used (the journal
    the replicas share says so), so the end passes and forgets it everywhere."""
    scope = {"x-ptc-emulator-scope": "test-end-used-elsewhere"}
    scenario = {"name": "used-elsewhere", "match": {"input": "used elsewhere"}, "turns": [{"message": "ok"}]}
    assert admin(three[0], "POST", "/scenarios", json=scenario, headers=scope).status_code == 201
    reply = httpx.post(
        f"{three[1].base_url}/responses", json={"model": "m", "input": "used elsewhere"}, headers=scope, timeout=30
    )
    assert reply.status_code == 200, reply.text
    ended = admin(three[2], "POST", "/end", json={}, headers=scope).json()
    assert ended["ended"] is True and ended["scenarios_removed"] == 1, ended
    for server in three:
        listed = admin(server, "GET", "/scenarios", headers=scope).json()["data"]
        assert "used-elsewhere" not in [s["name"] for s in listed]


def test_hosted_results_set_on_one_replica_serve_the_others_and_go_when_deleted(three: list[ServerProcess]) -> None:
    scope = {"x-ptc-emulator-scope": "test-hosted"}
    script = {"code_interpreter": [{"logs": "4\n"}]}
    assert admin(three[0], "PUT", "/hosted", json=script, headers=scope).status_code == 200
    ci = {"type": "code_interpreter", "container": {"type": "auto"}, "allowed_callers": ["programmatic"]}
    program = (
        "```js\nconst r = await tools.code_interpreter({code: 'print(2 + 2)'}); text('got ' + r.logs.trim());\n```"
    )
    body = {"model": "m", "input": program, "tools": [{"type": "programmatic_tool_calling"}, ci]}

    def ask(server: ServerProcess) -> str:
        reply = httpx.post(f"{server.base_url}/responses", json=body, headers=scope, timeout=30)
        assert reply.status_code == 200, reply.text
        return str(reply.json()["output"][-1]["content"][0]["text"])

    assert [ask(server) for server in three[1:]] == ["got 4", "got 4"]
    assert admin(three[2], "DELETE", "/hosted", headers=scope).status_code == 200
    for server in three:
        assert "got 4" not in ask(server), "the script deleted on one replica is gone on every one"


def test_the_journal_of_any_replica_shows_every_replicas_requests(three: list[ServerProcess]) -> None:
    scope = {"x-ptc-emulator-scope": "test-journal"}
    scenario = {"name": "ping", "match": {"input": "ping"}, "turns": [{"message": "pong"}]}
    assert admin(three[0], "POST", "/scenarios", json=scenario, headers=scope).status_code == 201
    made = []
    for server in three:
        reply = httpx.post(
            f"{server.base_url}/responses", json={"model": "m", "input": "ping"}, headers=scope, timeout=30
        )
        assert reply.status_code == 200
        made.append(reply.json()["id"])
    for server in three:
        entries = admin(server, "GET", "/journal", headers=scope).json()["data"]
        assert [e["response_id"] for e in entries] == made, f"replica {server.port}"
        seqs = [e["seq"] for e in entries]
        assert seqs == sorted(seqs)
    assert admin(three[1], "DELETE", "/journal", headers=scope).json()["cleared"] == 3
    assert admin(three[2], "GET", "/journal", headers=scope).json()["data"] == []


def test_a_faults_times_count_the_deployments_requests(three: list[ServerProcess]) -> None:
    """A fault with `times: 2`, added on one replica: the same request sent to each replica in turn
    is answered by the fault twice in all, then plays (not twice per replica)."""
    scope = {"x-ptc-emulator-scope": "test-fault-times"}
    scenario = {
        "name": "flaky",
        "match": {"input": "flaky"},
        "turns": [{"message": "through", "fault": {"http_error": 503, "times": 2}}],
    }
    assert admin(three[0], "POST", "/scenarios", json=scenario, headers=scope).status_code == 201
    body = {"model": "m", "input": "flaky"}
    statuses = [
        httpx.post(f"{server.base_url}/responses", json=body, headers=scope, timeout=30).status_code
        for server in [*three, *three]
    ]
    assert statuses == [503, 503, 200, 200, 200, 200]
    faults = [e.get("fault") for e in admin(three[1], "GET", "/journal", headers=scope).json()["data"]]
    assert faults[:2] == ["http_error 503 (1 of 2)", "http_error 503 (2 of 2)"]


def test_a_faults_times_are_counted_afresh_deployment_wide(three: list[ServerProcess]) -> None:
    """Deleted and added again, replaced, or its scope reset, each step on another replica: the
    fault answers the first request again (the counts, in the database, are forgotten with the
    scenario)."""
    counted_afresh([server.root for server in three], "test-refault")


def test_a_replica_refuses_to_start_without_a_shared_secret(postgres_url: str, tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", store=postgres_url, secret=None)
    with pytest.raises(RuntimeError, match="needs --secret"):
        server.start(timeout=30)


def test_a_replica_with_another_secret_refuses_to_start_and_says_why(postgres_url: str, tmp_path: Path) -> None:
    """Every program crossing it would fail: it does not start, and the replicas running go on."""
    with replicas(tmp_path, postgres_url, 1) as (running,):
        odd = ServerProcess(tmp_path / "odd", store=postgres_url, secret="another-secret-of-its-own")
        with pytest.raises(RuntimeError, match="sign with another secret: give every replica the same --secret"):
            odd.start(timeout=60)
        assert odd.proc is not None and odd.proc.returncode == 1
        assert running.health()["status"] == "ok"
        same = ServerProcess(tmp_path / "same", store=postgres_url, secret=SECRET).start()
        try:
            assert same.health()["status"] == "ok", "one with the same secret joins"
        finally:
            same.stop()


def test_health_says_when_the_database_does_not_answer(postgres_cluster: Cluster, tmp_path: Path) -> None:
    url = postgres_cluster.database()
    with replicas(tmp_path, url, 1) as (server,):
        assert server.health()["database"] == "ok"
        with psycopg.connect(postgres_cluster.admin_url, autocommit=True) as db:
            db.execute(f'DROP DATABASE "{url.rsplit("/", 1)[1]}" WITH (FORCE)')
        reply = admin(server, "GET", "/health")
        assert reply.status_code == 503 and reply.json()["database"] == "unreachable"


def test_with_the_database_away_health_and_requests_fail_at_once_with_a_503(tmp_path: Path) -> None:
    """The test stops the database itself (a cluster of its own): health answers 503 and a request
    a 503 in the OpenAI envelope, each before the server's own wait for a pooled connection
    (`WAIT_S`, 10 s) could have passed: the code before waited it out, then answered health with a
    503 and requests with a 500. Once the database is back, requests are answered again."""
    with Cluster.started() as cluster, replicas(tmp_path, cluster.database(), 1) as (server,):
        ptc = [{"type": "programmatic_tool_calling"}]
        body = {"model": "m", "input": js("text('up')"), "tools": ptc}
        made = httpx.post(f"{server.base_url}/responses", json=body, timeout=30)
        assert made.status_code == 200, made.text
        socket = websockets.sync.client.connect(f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=30)
        cluster.halt()
        with socket:  # a socket open before: its create gets the 503 (a generic server error before)
            socket.send(json.dumps({"type": "response.create", **body}))
            event = json.loads(socket.recv(timeout=60))
            assert event["type"] == "error" and event["status"] == 503, event
            assert event["error"]["code"] == "database_unavailable"
        with httpx.Client(timeout=WAIT_S * 0.8) as http:  # not a measure: less than the wait it must not do
            for _ in range(3):
                health = http.get(f"{server.root}/_emulator/health")
                assert health.status_code == 503 and health.json()["database"] == "unreachable"
            for method, path, sent in [
                ("POST", "/responses", body),
                ("GET", f"/responses/{made.json()['id']}", None),
                ("POST", "/conversations", {}),
            ]:
                reply = http.request(method, f"{server.base_url}{path}", json=sent)
                assert reply.status_code == 503, reply.text
                error = reply.json()["error"]
                assert (error["type"], error["code"]) == ("server_error", "database_unavailable")
                assert error["message"] == "The emulator's database does not answer; try again once it is back."
            # A WebSocket's handshake: the same 503 and envelope (it was a bare 403, no body, before).
            with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
                websockets.sync.client.connect(f"ws://127.0.0.1:{server.port}/v1/responses", open_timeout=30)
            assert refused.value.response.status_code == 503
            assert json.loads(refused.value.response.body)["error"]["code"] == "database_unavailable"
        cluster.resume()
        deadline = time.monotonic() + 60  # a guard: the pool connects again within seconds
        while (again := httpx.get(f"{server.base_url}/responses/{made.json()['id']}", timeout=30)).status_code != 200:
            assert again.status_code == 503 and time.monotonic() < deadline, again.text
            time.sleep(0.2)
        assert server.health()["database"] == "ok"


@pytest.mark.anyio
async def test_a_database_that_answers_nothing_is_a_503_not_a_hang(tmp_path: Path, monkeypatch: Any) -> None:
    """A database that accepts connections and answers nothing (its server frozen, as a paused host
    is): a statement waited on its socket for ever, so requests (and /v1/models, which reads the
    scenarios) hung and held their threads. Each use of a connection now has a deadline, here made
    short (`DEADLINE_S`), past which the request is the 503 `database_unavailable`; health is a 503
    too, and once the database answers again so do the requests. (The 120 s is a guard, not a
    measure: the code before never answered.)"""
    monkeypatch.setattr(pgpool, "DEADLINE_S", 1.0, raising=False)  # (absent before: the old code runs too)
    monkeypatch.setattr(pgpool, "WAIT_S", 1.0)
    body = {"model": "m", "input": js("text('up')"), "tools": [{"type": "programmatic_tool_calling"}]}
    with Cluster.started() as cluster:
        settings = Settings(
            data_dir=tmp_path, store=cluster.database(), secret=SECRET, bundled_fixtures=False, pool_size=1
        )
        async with in_process_http(settings) as (http, app):
            made = await http.post("/v1/responses", json=body)
            assert made.status_code == 200, made.text
            cluster.freeze()
            try:
                for method, path, sent in [
                    ("POST", "/v1/responses", body),
                    ("GET", f"/v1/responses/{made.json()['id']}", None),
                    ("GET", "/v1/models", None),
                    ("POST", "/v1/responses", body),
                ]:
                    reply = await asyncio.wait_for(http.request(method, path, json=sent), 120)
                    assert reply.status_code == 503, reply.text
                    assert reply.json()["error"]["code"] == "database_unavailable"
                plain = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=str(http.base_url))
                async with plain:  # health's 503 is its own body, not the envelope the hooks expect
                    health = await asyncio.wait_for(plain.get("/_emulator/health"), 120)
                assert health.status_code == 503 and health.json()["database"] == "unreachable"
            finally:
                cluster.thaw()
            for _ in range(600):  # a guard: the pool connects again within seconds
                again = await http.get(f"/v1/responses/{made.json()['id']}")
                if again.status_code == 200:
                    break
                assert again.status_code == 503, again.text
                await asyncio.sleep(0.1)
            assert again.status_code == 200


def test_an_agents_session_streamed_from_one_replica_while_others_run_it(three: list[ServerProcess]) -> None:
    """sessions.stream(..., tool_handlers=...) through the round-robin client: the stream is read
    from one replica, the input and the tool result go to others, and the turn runs on whichever
    replica claimed it: every event arrives on the stream, in order, through the database."""
    client, transport = round_robin_client(three)
    calls: list[dict[str, Any]] = []

    def get_customer(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        return customer(args)

    with client:
        session = valid(
            client.beta.agents.sessions.create(
                environment={"type": "none"},
                agent={"model": "gpt-5", "tools": [GET_CUSTOMER]},
                input=js('text("ready")'),
            )
        )
        seen = events_until(client, session.id, "agent.session.idle")
        assert [e.type for e in seen][-1] == "agent.session.idle"
        with client.beta.agents.sessions.stream(
            session.id, input=get_customer_code("123"), tool_handlers={"get_customer": get_customer}
        ) as stream:
            result = stream.get_final_result()
        assert calls == [{"customer_id": "123"}]
        assert json.loads(result.output_text) == customer({"customer_id": "123"})
        assert result.turn.status == "completed"
        items = [valid(i) for i in client.beta.agents.sessions.items.list(session.id)]
    assert [i.type for i in items].count("function_call_output") == 1
    assert len(transport.served) == 3


def test_a_background_response_made_on_one_replica_is_streamed_and_read_from_others(
    three: list[ServerProcess],
) -> None:
    scope = {"x-ptc-emulator-scope": "test-background"}
    scenario = {"name": "slow-hello", "match": {"input": "background hello"}, "turns": [{"message": "hello later"}]}
    assert admin(three[0], "POST", "/scenarios", json=scenario, headers=scope).status_code == 201
    made, streamed, read = (openai.OpenAI(base_url=s.base_url, api_key="sk-local", max_retries=0) for s in three)
    with made, streamed, read:
        queued = made.responses.create(model="m", input="background hello", background=True, extra_headers=scope)
        assert queued.status in ("queued", "in_progress", "completed")
        with streamed.responses.retrieve(queued.id, stream=True, extra_headers=scope) as stream:
            kinds = [event.type for event in stream]
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        final = read.responses.retrieve(queued.id, extra_headers=scope)
    assert final.status == "completed" and final.output_text == "hello later"


class _Played(Gate):
    """The gate, also saying when the held response was played: its store write follows at once,
    with no await between."""

    def __init__(self, model: Any) -> None:
        super().__init__(model, expected=1)
        self.played = asyncio.Event()

    async def play(self, prepared: Any, runner: Any) -> Any:
        output = await super().play(prepared, runner)
        self.played.set()
        return output


@pytest.mark.anyio
async def test_a_background_response_finishing_while_the_database_is_away_is_kept_once_it_is_back(
    tmp_path: Path,
) -> None:
    """The replica running a background response is alive; the database goes away just as the
    response finishes. Its end is written once the database is back: the response is `completed`,
    not failed as if its replica had died (the code before let the write fail, the task ended,
    and once the lease, 1 s here, expired the response was read as orphaned and failed)."""
    with Cluster.started() as cluster:
        settings = Settings(
            data_dir=tmp_path, store=cluster.database(), secret=SECRET, bundled_fixtures=False, pool_size=1, lease_s=1.0
        )
        async with in_process_http(settings) as (http, app):
            engine = app.state.emulator.engine
            gate = _Played(engine.model)
            engine.model = gate
            body = {"model": "m", "input": js("text('kept')"), "tools": [{"type": "programmatic_tool_calling"}]}
            queued = await http.post("/v1/responses", json={**body, "background": True})
            assert queued.status_code == 200, queued.text
            await asyncio.wait_for(gate.all_in.wait(), 60)  # (a guard)
            await asyncio.to_thread(cluster.halt)
            gate.open.set()
            await asyncio.wait_for(gate.played.wait(), 60)  # played; its write found the database away
            await asyncio.to_thread(cluster.resume)
            deadline = time.monotonic() + 60  # a guard: the write is made again within seconds
            while True:
                reply = await http.get(f"/v1/responses/{queued.json()['id']}")
                if reply.status_code == 200 and reply.json()["status"] not in ("queued", "in_progress"):
                    break
                assert reply.status_code in (200, 503) and time.monotonic() < deadline, reply.text
                await asyncio.sleep(0.2)
            final = reply.json()
            assert final["status"] == "completed", final.get("error")
            assert final["output"][-1]["content"][0]["text"] == "kept"
