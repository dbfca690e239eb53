"""The `ptc_emulator` fixture as a user's suite meets it: pytest runs in a subprocess on test
files written here, with nothing but the installed package to provide the fixture."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ptc_emulator.api.settings import Settings
from ptc_emulator.testing.server import EmulatorServer
from tests.plugin.plugin_support import run


def test_fixture_needs_no_configuration(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_agent="""
        import asyncio
        from pathlib import Path

        import openai
        import pytest


        def test_dict(ptc_emulator):
            name = ptc_emulator.add_scenario(
                {"name": "greet", "match": {"input": "(?i)^hello"}, "turns": [{"message": "hi, {{ input }}"}]}
            )
            assert name == "greet"
            response = ptc_emulator.client().responses.create(model="gpt-test", input="hello there")
            assert response.output_text == "hi, hello there"


        def test_yaml_string(ptc_emulator):
            name = ptc_emulator.add_scenario("match:\\n  input: '^yaml'\\nturns:\\n  - message: from yaml\\n")
            assert name.startswith("scenario-")
            assert ptc_emulator.client().responses.create(model="m", input="yaml?").output_text == "from yaml"


        def test_path(ptc_emulator, tmp_path):
            path = tmp_path / "weather__oslo.yaml"
            path.write_text(
                "match:\\n  input: '(?i)weather in (?P<city>\\\\w+)'\\nturns:\\n  - message: Rain in {{ city }}.\\n"
            )
            assert ptc_emulator.add_scenario(path) == "weather__oslo"
            client = ptc_emulator.client()
            assert client.responses.create(model="m", input="Weather in Oslo?").output_text == "Rain in Oslo."


        def test_invalid_scenario_list_and_remove(ptc_emulator):
            with pytest.raises(ValueError, match="turns"):
                ptc_emulator.add_scenario({"match": {"input": "x"}})
            ptc_emulator.add_scenario({"name": "mine", "match": {"input": "x"}, "turns": [{"message": "y"}]})
            listed = ptc_emulator.scenarios
            mine = {"name": "mine", "source": "api", "scope": ptc_emulator.scope, "priority": 0, "turns": 1,
                    "uses": 0}
            assert listed[0] == mine
            assert {"inventory__sku_123", "order__a104_delay"} <= {s["name"] for s in listed}  # bundled files
            ptc_emulator.remove_scenario("mine")
            assert "mine" not in [s["name"] for s in ptc_emulator.scenarios]
            with pytest.raises(KeyError, match="No scenario named 'mine'"):
                ptc_emulator.remove_scenario("mine")


        def test_async_client(ptc_emulator):
            ptc_emulator.add_scenario({"match": {"input": "ping"}, "turns": [{"message": "pong"}]})

            async def main():
                client = ptc_emulator.async_client()  # not closed: the plugin must not leak its sockets
                return [(await client.responses.create(model="m", input="ping")).output_text for _ in range(3)]

            assert asyncio.run(main()) == ["pong"] * 3


        def test_journal(ptc_emulator):
            \"\"\"The guide's loop against a bundled scenario, and assertions over the journal.\"\"\"
            tools = [
                {"type": "function", "name": name, "parameters": {"type": "object"},
                 "allowed_callers": ["programmatic"]}
                for name in ("get_inventory", "get_demand")
            ] + [{"type": "programmatic_tool_calling"}]
            results = {"get_inventory": '{"sku": "sku_123", "available_units": 42}',
                       "get_demand": '{"sku": "sku_123", "requested_units": 50}'}
            client = ptc_emulator.client()
            items = [{"role": "user", "content": "Compare inventory with demand for sku_123."}]
            while True:
                response = client.responses.create(model="m", store=False, input=items, tools=tools)
                items += [item.model_dump(exclude_none=True) for item in response.output]
                calls = [item for item in response.output if item.type == "function_call"]
                if not calls:
                    break
                items += [{"type": "function_call_output", "call_id": c.call_id, "output": results[c.name],
                           "caller": c.caller.model_dump()} for c in calls]
            assert "shortage is 8 units" in response.output_text
            journal = ptc_emulator.journal
            assert [e["scenario"] for e in journal] == ["inventory__sku_123"] * 2
            assert [e["route"] for e in journal] == [
                ["program", "function_call", "function_call"], ["program_output", "message"]
            ]
            assert sum(e["figures"]["program_tool_calls"] for e in journal) == 2
            assert sum(e["figures"]["direct_tool_calls"] for e in journal) == 0
            assert journal[1]["figures"]["kept_out_bytes"] == sum(len(v.encode()) for v in results.values())
            ptc_emulator.clear_journal()
            assert ptc_emulator.journal == []
        """
    )
    assert not (pytester.path / "conftest.py").exists()

    result = run(pytester, "-v", "--ptc-emulator-demo")  # two tests use the bundled demos: asked for

    result.assert_outcomes(passed=6)
    result.stdout.no_fnmatch_line("*ResourceWarning*")


def test_fixture_comes_from_the_entry_point(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_it(ptc_emulator):\n    pass\n")
    result = run(pytester, "-p", "no:ptc_emulator")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'ptc_emulator' not found*"])


def test_each_test_has_its_own_scope(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_isolation="""
        import openai
        import pytest

        scopes = []
        PING = {"name": "ping", "match": {"input": "(?i)^ping"}, "turns": [{"message": "pong"}]}


        def names(ptc_emulator):
            return [s["name"] for s in ptc_emulator.scenarios]


        def test_adds_a_scenario_then_fails(ptc_emulator):
            scopes.append(ptc_emulator.scope)
            ptc_emulator.add_scenario(PING)
            assert ptc_emulator.client().responses.create(model="m", input="ping").output_text == "pong"
            assert "ping" in names(ptc_emulator)
            pytest.fail("on purpose: the teardown must still clean up")


        @pytest.mark.ptc_strict(False)  # its request goes unmatched on purpose
        def test_does_not_see_it(ptc_emulator):
            scopes.append(ptc_emulator.scope)
            assert scopes[0] != scopes[1]
            assert ptc_emulator.journal == []
            assert "ping" not in names(ptc_emulator)
            with pytest.raises(openai.BadRequestError) as caught:
                ptc_emulator.client(max_retries=0).responses.create(model="m", input="ping")
            assert caught.value.code == "no_scenario_matched"


        def test_same_name_again(ptc_emulator):
            ptc_emulator.add_scenario({**PING, "turns": [{"message": "pong again"}]})
            assert ptc_emulator.client().responses.create(model="m", input="ping").output_text == "pong again"
            assert len(ptc_emulator.journal) == 1
        """
    )
    result = run(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*on purpose: the teardown must still clean up*"])


@pytest.fixture
def outer_server(tmp_path: Path) -> Iterator[EmulatorServer]:
    server = EmulatorServer(Settings(data_dir=tmp_path / "outer", store="memory", pool_size=2)).start()
    yield server
    server.stop()


def unscoped(server: EmulatorServer, path: str) -> list[dict[str, object]]:
    reply = httpx.get(f"http://127.0.0.1:{server.port}/_emulator{path}", timeout=30)
    reply.raise_for_status()
    data: list[dict[str, object]] = reply.json()["data"]
    return data


def test_url_option_uses_a_running_server(pytester: pytest.Pytester, outer_server: EmulatorServer) -> None:
    pytester.makepyfile(
        test_remote=f"""
        def test_uses_the_given_server(ptc_emulator):
            assert ptc_emulator.server_url == {outer_server.base_url!r}
            ptc_emulator.add_scenario({{"name": "remote", "match": {{"input": "ping"}}, "turns": [{{"message": "1"}}]}})
            assert ptc_emulator.client().responses.create(model="m", input="ping").output_text == "1"


        def test_second(ptc_emulator):
            ptc_emulator.add_scenario({{"name": "remote", "match": {{"input": "ping"}}, "turns": [{{"message": "2"}}]}})
            assert ptc_emulator.client().responses.create(model="m", input="ping").output_text == "2"
        """
    )

    result = run(pytester, f"--ptc-emulator-url={outer_server.base_url}")

    result.assert_outcomes(passed=2)
    # The requests reached the outer server: it stored both responses...
    health = httpx.get(f"http://127.0.0.1:{outer_server.port}/_emulator/health", timeout=30).json()
    assert health["stored_responses"] == 2
    # ...and each test reset its scope when it ended: no scenario, no journal entry is left.
    assert [s for s in unscoped(outer_server, "/scenarios") if s["source"] == "api"] == []
    assert unscoped(outer_server, "/journal") == []


def test_settings_fixture_can_be_overridden(pytester: pytest.Pytester, tmp_path: Path) -> None:
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "billing__refund.yaml").write_text(
        "match:\n  input: '(?i)refund'\nturns:\n  - message: Refund issued.\n", encoding="utf-8"
    )
    pytester.makeconftest(
        f"""
        import pytest
        from pathlib import Path

        from ptc_emulator.api.settings import Settings


        @pytest.fixture(scope="session")
        def ptc_emulator_settings(tmp_path_factory):
            return Settings(
                data_dir=tmp_path_factory.mktemp("emulator"),
                store="memory",
                fixtures=(Path({str(scenarios)!r}),),
                bundled_fixtures=False,
                pool_size=1,
                api_key="sk-this-suite",
            )
        """
    )
    pytester.makepyfile(
        """
        def test_settings_apply(ptc_emulator):
            health = ptc_emulator.admin.get("/health").json()
            assert health["store"] == "memory" and len(health["workers"]) == 1
            listed = ptc_emulator.admin.get("/scenarios").json()["data"]
            assert [s["name"] for s in listed] == ["billing__refund"]
            assert ptc_emulator.client().responses.create(model="m", input="A refund?").output_text == "Refund issued."
            assert ptc_emulator.api_key == "sk-this-suite"  # the plugin uses the key it started the server with
        """
    )
    run(pytester).assert_outcomes(passed=1)


@pytest.mark.timeout(360)  # 3 inner pytest runs of at most 100 s each (`plugin_support.run`)
def test_api_key_of_a_running_server(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PTC_EMULATOR_API_KEY", raising=False)
    server = EmulatorServer(
        Settings(data_dir=tmp_path / "keyed", store="memory", pool_size=1, api_key="sk-shared-secret")
    ).start()
    try:
        pytester.makepyfile(
            """
            def test_talks_to_it(ptc_emulator):
                ptc_emulator.add_scenario({"match": {"input": "ping"}, "turns": [{"message": "pong"}]})
                assert ptc_emulator.client().responses.create(model="m", input="ping").output_text == "pong"
            """
        )
        url = f"--ptc-emulator-url={server.base_url}"

        run(pytester, url, "--ptc-emulator-api-key=sk-shared-secret").assert_outcomes(passed=1)

        refused = run(pytester, url)
        assert refused.ret != 0
        refused.stdout.fnmatch_lines(["*Incorrect API key provided*"])

        monkeypatch.setenv("PTC_EMULATOR_API_KEY", "sk-shared-secret")
        run(pytester, url).assert_outcomes(passed=1)
    finally:
        server.stop()


def test_tests_clients_share_a_connection_unless_a_response_was_left_unread(
    pytester: pytest.Pytester, outer_server: EmulatorServer
) -> None:
    """On a server given by URL, the SDK clients of one test after another reuse the connection
    the previous test's opened (closing a client leaves it open); a test that leaves a streamed
    response unread does not hold up the next, whose clients get a connection of their own."""
    pytester.makepyfile(
        test_connections="""
        import pytest

        PING = {"name": "ping", "match": {"input": "(?i)^ping"}, "turns": [{"message": "pong"}]}
        ports = []


        def local_port(ptc_emulator, **options):
            client = ptc_emulator.client(**options)
            raw = client.responses.with_raw_response.create(model="m", input="ping")
            assert raw.parse().output_text == "pong"
            port = raw.http_response.extensions["network_stream"].get_extra_info("client_addr")[1]
            client.close()  # the shared connection stays open
            return port


        @pytest.mark.parametrize("n", range(3))
        def test_ping(ptc_emulator, n):
            ptc_emulator.add_scenario(PING)
            ports.append(local_port(ptc_emulator))


        def test_all_on_one_connection():
            assert len(ports) == 3 and len(set(ports)) == 1


        def test_leaves_a_stream_unread(ptc_emulator):
            ptc_emulator.add_scenario(PING)
            stream = ptc_emulator.client().responses.create(model="m", input="ping", stream=True)
            ports.append(stream.response.extensions["network_stream"].get_extra_info("client_addr")[1])


        def test_after_it(ptc_emulator):
            ptc_emulator.add_scenario(PING)
            port = local_port(ptc_emulator, timeout=20)
            assert port not in ports
        """
    )
    result = run(pytester, "-p", "no:randomly", f"--ptc-emulator-url={outer_server.base_url}")
    result.assert_outcomes(passed=6)


def test_the_fixtures_clients_reach_its_own_server_in_process(pytester: pytest.Pytester) -> None:
    """The clients of `ptc_emulator.client()` hand their requests to the app of the server the
    plugin started in the test's own process, with no socket; a client a test builds itself from
    `base_url` goes over the socket. Both get the same answers: the same headers, a stream's events
    as they come (the first of a response held back for a minute arrives before the rest, and
    closing the stream is a disconnect, journaled as 499), an error status raised as the SDK's
    exception with OpenAI's error body, the SDK's retries of a 429, its read timeout, and a
    continuation by `previous_response_id`."""
    pytester.makepyfile(
        test_in_process="""
        import time

        import openai
        import pytest

        TOOLS = [
            {"type": "function", "name": "get_stock", "parameters": {"type": "object"},
             "allowed_callers": ["programmatic"]},
            {"type": "programmatic_tool_calling"},
        ]
        SCENARIOS = [
            {"name": "ping", "match": {"input": "(?i)^ping"}, "turns": [{"message": "pong"}]},
            {"name": "stock", "match": {"input": "(?i)^stock", "tools": ["get_stock"]},
             "turns": [{"program": "const r = await tools.get_stock({ sku: 'a' });\\ntext(JSON.stringify(r));"},
                       {"message": "{{ data.units }} units"}]},
            {"name": "slow", "match": {"input": "(?i)^slow"},
             "turns": [{"message": "late", "fault": {"latency_ms": 60000}}]},
            {"name": "busy", "match": {"input": "(?i)^busy"},
             "turns": [{"message": "ok", "fault": {"http_error": 429, "times": 2, "retry_after": 0.01}}]},
        ]


        def exercise(ptc_emulator, client):
            for scenario in SCENARIOS:
                ptc_emulator.add_scenario(scenario)
            raw = client.responses.with_raw_response.create(model="m", input="ping")
            first = raw.parse()
            seen = {
                "socket": "network_stream" in raw.http_response.extensions,
                "status": (raw.http_response.status_code, raw.http_response.reason_phrase),
                "headers": sorted(raw.http_response.headers.keys()),
                "text": first.output_text,
            }
            paused = client.responses.create(model="m", input="stock?", tools=TOOLS)
            call = next(item for item in paused.output if item.type == "function_call")
            output = {"type": "function_call_output", "call_id": call.call_id, "output": '{"units": 7}',
                      "caller": call.caller.model_dump()}
            seen["continued"] = client.responses.create(
                model="m", input=[output], tools=TOOLS, previous_response_id=paused.id
            ).output_text
            seen["events"] = [event.type for event in client.responses.create(model="m", input="ping", stream=True)]
            with pytest.raises(openai.BadRequestError) as refused:
                client.responses.create(model="m", input="nothing matches")
            seen["error"] = (refused.value.status_code, refused.value.code, refused.value.body["type"])
            seen["retried"] = client.with_options(max_retries=2).responses.create(model="m", input="busy").output_text
            with pytest.raises(openai.APITimeoutError):
                client.with_options(timeout=0.5, max_retries=0).responses.create(model="m", input="slow")
            stream = client.responses.create(model="m", input="slow", stream=True)
            seen["first event"] = next(iter(stream)).type  # before the minute the rest waits
            stream.close()
            return seen


        def journaled(ptc_emulator):
            # The closed stream's entry is written once the server has heard the disconnect.
            for _ in range(500):
                statuses = [entry["status"] for entry in ptc_emulator.journal]
                if len(statuses) == 10:
                    return statuses
                time.sleep(0.01)
            return statuses


        EXPECTED = {
            "status": (200, "OK"),
            "text": "pong",
            "continued": "7 units",
            "events": ["response.created", "response.in_progress", "response.output_item.added",
                       "response.content_part.added", "response.output_text.delta", "response.output_text.done",
                       "response.content_part.done", "response.output_item.done", "response.completed"],
            "error": (400, "no_scenario_matched", "invalid_request_error"),
            "retried": "ok",
            "first event": "response.created",
        }
        ANSWERS = []


        @pytest.mark.ptc_strict(False)
        @pytest.mark.parametrize("way", ["fixture", "own"])
        def test_both_ways(ptc_emulator, way):
            if way == "fixture":
                client = ptc_emulator.client()
            else:
                client = openai.OpenAI(base_url=ptc_emulator.base_url, api_key=ptc_emulator.api_key)
            seen = exercise(ptc_emulator, client)
            assert seen.pop("socket") == (way == "own")
            assert {key: seen[key] for key in EXPECTED} == EXPECTED
            assert journaled(ptc_emulator) == [200, 200, 200, 200, 400, 429, 429, 200, 499, 499]
            ANSWERS.append(seen["headers"])


        def test_same_headers():
            assert len(ANSWERS) == 2 and ANSWERS[0] == ANSWERS[1]
            assert {"content-length", "content-type", "date", "server", "x-request-id"} <= set(ANSWERS[0])
        """
    )
    result = run(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=3)


def test_what_the_server_loads_after_it_is_ready_is_frozen_too(pytester: pytest.Pytester) -> None:
    """The server is ready before its tokenizer has loaded and its checkers' modules are imported
    (`api/app.py`); the fixture freezes what they made once they are done, as it freezes the rest
    of the server's start, so that the tests' collections do not walk it. Nothing is timed: the
    first test's request waits for them; the second looks for the checkers' objects among those
    the collector walks."""
    pytester.makepyfile(
        test_frozen="""
        import gc


        def test_first(ptc_emulator):
            ptc_emulator.add_scenario({"name": "greet", "match": {"input": "hello"}, "turns": [{"message": "hi"}]})
            assert ptc_emulator.client().responses.create(model="m", input="hello").output_text == "hi"


        def test_then(ptc_emulator):
            import jsonschema.validators
            import lark

            made = {id(lark.Lark.__init__), id(jsonschema.validators.extend), id(vars(lark))}
            assert not [o for o in gc.get_objects() if id(o) in made]
        """
    )
    run(pytester).assert_outcomes(passed=2)
