"""The pytest plugin puts the inspector's link to a failing test's scope in its report."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.plugin.plugin_support import run


def test_a_failing_test_reports_its_inspector_link(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_agent="""
        import httpx

        PING = {"name": "ping", "match": {"input": "(?i)^ping"}, "turns": [{"message": "pong"}]}


        def test_fails_after_a_request(ptc_emulator):
            ptc_emulator.add_scenario(PING)
            assert ptc_emulator.client().responses.create(model="m", input="ping").output_text == "pong"
            # While the server runs, the link shows this test's conversation: read its data as the page does.
            root = ptc_emulator.server_url[: -len("/v1")]
            rows = httpx.get(root + "/_emulator/inspector/conversations", params={"scope": ptc_emulator.scope}).json()
            print("TITLES", [r["title"] for r in rows["data"]])
            assert ptc_emulator.inspector_url.endswith("/_emulator/ui/#scope=" + ptc_emulator.scope)
            assert False, "on purpose"


        def test_passes(ptc_emulator):
            assert ptc_emulator.journal == []
        """
    )
    result = run(pytester, "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "TITLES ?'ping'?",
            "*- ptc-emulator -*",
            "inspector: http://127.0.0.1:*/_emulator/ui/#scope=test-*",
        ]
    )
    links = re.findall(r"inspector: (http://\S+)", result.stdout.str())
    assert len(links) == 1  # only the failing test's report carries one
    # The page the link names is served (the session's server has stopped by now, so only its shape is checked).
    assert links[0].split("#")[0].endswith("/_emulator/ui/")


def test_a_failed_tests_journal_outlives_it_on_a_running_server(pytester: pytest.Pytester) -> None:
    from ptc_emulator.api.settings import Settings
    from ptc_emulator.testing.server import EmulatorServer

    server = EmulatorServer(Settings(data_dir=pytester.path / "data", store="memory", pool_size=1)).start()
    try:
        pytester.makepyfile(
            test_remote="""
            def test_fails(ptc_emulator):
                ptc_emulator.add_scenario({"name": "p", "match": {"input": "ping"}, "turns": [{"message": "pong"}]})
                ptc_emulator.client().responses.create(model="m", input="ping")
                assert False


            def test_passes(ptc_emulator):
                ptc_emulator.add_scenario({"name": "p", "match": {"input": "ping"}, "turns": [{"message": "pong"}]})
                ptc_emulator.client().responses.create(model="m", input="ping")
            """
        )
        result = run(pytester, f"--ptc-emulator-url={server.base_url}", "-p", "no:randomly")
        result.assert_outcomes(passed=1, failed=1)
        [link] = re.findall(r"inspector: (http://\S+)", result.stdout.str())
        scope = link.split("#scope=")[1]
        root = f"http://127.0.0.1:{server.port}"
        # After the run, the link still finds the failed test's conversation; the passing test's is gone.
        rows = httpx.get(f"{root}/_emulator/inspector/conversations", timeout=30).json()["data"]
        assert [(r["scope"], r["title"], r["final"]) for r in rows] == [(scope, "ping", "pong")]
        # Its scenarios were removed all the same.
        listed = httpx.get(f"{root}/_emulator/scenarios", timeout=30).json()["data"]
        assert [s for s in listed if s["source"] == "api"] == []
        assert httpx.get(link.split("#")[0], timeout=30).status_code == 200
    finally:
        server.stop()


@pytest.mark.timeout(260)  # 2 inner pytest runs of at most 100 s each (`plugin_support.run`)
def test_a_run_clears_the_traces_of_earlier_runs_and_nothing_else(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_flaky="""
        import os

        def test_once_failing(ptc_emulator):
            ptc_emulator.add_scenario({"match": {"input": "hi"}, "turns": [{"message": "hello"}]})
            ptc_emulator.client().responses.create(model="m", input="hi")
            assert os.environ.get("PASS_NOW") == "1"
        """
    )
    traces = pytester.path / ".ptc-emulator" / "traces"
    run(pytester, "-p", "no:randomly").assert_outcomes(failed=1)
    written = sorted(p.name for p in traces.iterdir())
    assert [name.rsplit(".", 1)[1] for name in written] == ["html", "json"]
    (traces / "notes.json").write_text('{"object": "emulator.trace"}')  # not a trace's name
    (traces / "mine-0123abcd.json").write_text('{"object": "something else"}')  # a trace's name, not one
    (traces / "readme.txt").write_text("kept")
    monkeypatch.setenv("PASS_NOW", "1")
    run(pytester, "-p", "no:randomly").assert_outcomes(passed=1)
    assert sorted(p.name for p in traces.iterdir()) == ["mine-0123abcd.json", "notes.json", "readme.txt"]
