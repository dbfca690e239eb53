"""The admin API, `/_emulator/`: scenarios at run time, the journal, reset, health, scopes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.testing.server import SCOPE_HEADER, PTCEmulator

HELLO = {"name": "greeting", "match": {"input": "(?i)^hello"}, "turns": [{"message": "hi from {{ input }}"}]}


@pytest.fixture(scope="module")
def shared(module_server: Callable[..., PTCEmulator]) -> PTCEmulator:
    return module_server(bundled_fixtures=False)


@pytest.fixture
def server(shared: PTCEmulator) -> PTCEmulator:
    """This module's own server, emptied (every scope) before each test, so unscoped calls, which
    see every scope, see only this test."""
    shared.admin.post("/reset", headers={SCOPE_HEADER: ""}).raise_for_status()
    return shared


@pytest.fixture
def admin(server: PTCEmulator) -> Iterator[Callable[[str | None], httpx.Client]]:
    """`admin(scope)`: an HTTP client for `/_emulator/`, sending the scope header unless None."""
    clients: list[httpx.Client] = []

    def make(scope: str | None) -> httpx.Client:
        headers = {SCOPE_HEADER: scope} if scope else {}
        headers["content-type"] = "application/json"  # admin writes must declare JSON
        clients.append(httpx.Client(base_url=str(server.admin.base_url), headers=headers, timeout=30))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


def sdk(server: PTCEmulator, scope: str | None) -> openai.OpenAI:
    headers = {SCOPE_HEADER: scope} if scope else {}
    return openai.OpenAI(api_key="sk-test", base_url=server.server_url, default_headers=headers, max_retries=0)


def ask(server: PTCEmulator, scope: str | None, text: str) -> str:
    with sdk(server, scope) as client:
        return str(client.responses.create(model="gpt-test", input=text).output_text)


def names(listing: httpx.Response) -> list[str]:
    assert listing.status_code == 200
    body: dict[str, Any] = listing.json()
    assert body["object"] == "list"
    return [s["name"] for s in body["data"]]


def test_add_list_use_delete_a_scenario(server: PTCEmulator, admin: Callable[[str | None], httpx.Client]) -> None:
    a = admin("team-a")

    added = a.post("/scenarios", json=HELLO)
    assert added.status_code == 201
    assert added.json() == {"name": "greeting", "scope": "team-a", "turns": 1}
    [listed] = a.get("/scenarios").json()["data"]
    assert listed == {"name": "greeting", "source": "api", "scope": "team-a", "priority": 0, "turns": 1, "uses": 0}
    assert ask(server, "team-a", "hello there") == "hi from hello there"
    assert [s["uses"] for s in a.get("/scenarios").json()["data"]] == [1]  # the requests it was chosen for
    assert a.post("/scenarios", json=HELLO).status_code == 201
    assert [s["uses"] for s in a.get("/scenarios").json()["data"]] == [0]  # replaced: counted afresh
    assert ask(server, "team-a", "hello there") == "hi from hello there"

    assert a.delete("/scenarios/greeting").json() == {"name": "greeting", "deleted": True}
    assert names(a.get("/scenarios")) == []
    with pytest.raises(openai.BadRequestError) as caught:
        ask(server, "team-a", "hello there")
    assert caught.value.code == "no_scenario_matched"

    missing = a.delete("/scenarios/greeting")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "No scenario named 'greeting' in this scope."


def test_add_a_scenario_as_yaml_text(server: PTCEmulator, admin: Callable[[str | None], httpx.Client]) -> None:
    text = "match:\n  input: '(?i)^yaml'\nturns:\n  - message: from yaml\n"
    added = admin("s").post("/scenarios", json={"yaml": text, "name": "from-yaml"})
    assert added.status_code == 201 and added.json()["name"] == "from-yaml"
    unnamed = admin("s").post("/scenarios", json={"yaml": text.replace("yaml'", "yml'")})
    assert unnamed.status_code == 201 and unnamed.json()["name"].startswith("scenario-")
    assert ask(server, "s", "yaml please") == "from yaml"


def test_adding_a_name_again_replaces_it(server: PTCEmulator, admin: Callable[[str | None], httpx.Client]) -> None:
    a = admin("s")
    a.post("/scenarios", json=HELLO).raise_for_status()
    a.post("/scenarios", json={**HELLO, "turns": [{"message": "second version"}]}).raise_for_status()
    assert names(a.get("/scenarios")) == ["greeting"]
    assert ask(server, "s", "hello") == "second version"


def test_scope_confines_scenarios(server: PTCEmulator, admin: Callable[[str | None], httpx.Client]) -> None:
    admin("team-a").post("/scenarios", json=HELLO).raise_for_status()
    admin("team-b").post("/scenarios", json={**HELLO, "turns": [{"message": "hi, b"}]}).raise_for_status()

    assert ask(server, "team-a", "hello") == "hi from hello"
    assert ask(server, "team-b", "hello") == "hi, b"
    for scope in (None, "team-c"):
        with pytest.raises(openai.BadRequestError) as caught:
            ask(server, scope, "hello")
        assert caught.value.code == "no_scenario_matched"
        # Another scope's scenario is invisible, not a near miss.
        assert "greeting" not in caught.value.message

    assert names(admin("team-c").get("/scenarios")) == []
    assert sorted(s["scope"] for s in admin(None).get("/scenarios").json()["data"]) == ["team-a", "team-b"]
    assert names(admin(None).get("/scenarios", params={"scope": "team-b"})) == ["greeting"]


def test_scope_from_metadata(server: PTCEmulator, admin: Callable[[str | None], httpx.Client]) -> None:
    """A client that cannot set headers may put the scope in `metadata.ptc_emulator_scope`."""
    admin("meta").post("/scenarios", json=HELLO).raise_for_status()
    with sdk(server, None) as client:
        response = client.responses.create(model="m", input="hello", metadata={"ptc_emulator_scope": "meta"})
    assert response.output_text == "hi from hello"
    assert [e["scope"] for e in admin("meta").get("/journal").json()["data"]] == ["meta"]


def test_unscoped_scenarios_are_seen_by_every_scope(
    server: PTCEmulator, admin: Callable[[str | None], httpx.Client]
) -> None:
    admin(None).post("/scenarios", json={**HELLO, "name": "everyone"}).raise_for_status()
    admin("own").post("/scenarios", json={**HELLO, "turns": [{"message": "own"}]}).raise_for_status()
    assert ask(server, None, "hello") == "hi from hello"
    assert ask(server, "other", "hello") == "hi from hello"
    assert ask(server, "own", "hello") == "own"  # same priority: a scope's own scenario first
    assert names(admin("own").get("/scenarios")) == ["greeting", "everyone"]


def test_journal_read_and_clear(server: PTCEmulator, admin: Callable[[str | None], httpx.Client]) -> None:
    for scope in ("a", "b"):
        admin(scope).post("/scenarios", json=HELLO).raise_for_status()
    ask(server, "a", "hello 1")
    ask(server, "a", "hello 2")
    ask(server, "b", "hello 3")

    journal = admin("a").get("/journal").json()
    assert journal["object"] == "list"
    entries = journal["data"]
    assert [e["request"]["input"] for e in entries] == ["hello 1", "hello 2"]
    assert [e["scope"] for e in entries] == ["a", "a"]
    assert entries[0]["seq"] < entries[1]["seq"]
    assert {e["path"] for e in entries} == {"/v1/responses"} and {e["method"] for e in entries} == {"POST"}
    assert entries[1]["response"]["output"][0]["content"][0]["text"] == "hi from hello 2"
    assert entries[1]["response_id"] == entries[1]["response"]["id"]
    assert len(admin(None).get("/journal").json()["data"]) == 3

    assert admin("a").delete("/journal").json() == {"cleared": 2}
    assert admin("a").get("/journal").json()["data"] == []
    assert [e["scope"] for e in admin(None).get("/journal").json()["data"]] == ["b"]
    assert admin(None).delete("/journal").json() == {"cleared": 1}


def test_reset_one_scope_or_all(server: PTCEmulator, admin: Callable[[str | None], httpx.Client]) -> None:
    for scope in ("a", "b"):
        admin(scope).post("/scenarios", json=HELLO).raise_for_status()
        ask(server, scope, "hello")

    assert admin("a").post("/reset").json() == {"scenarios_removed": 1, "journal_cleared": 1}
    assert names(admin("a").get("/scenarios")) == []
    assert names(admin("b").get("/scenarios")) == ["greeting"]
    assert len(admin("b").get("/journal").json()["data"]) == 1

    assert admin(None).post("/reset").json() == {"scenarios_removed": 1, "journal_cleared": 1}
    assert names(admin(None).get("/scenarios")) == []


def test_reset_keeps_scenario_files(own_server: Callable[..., PTCEmulator]) -> None:
    server = own_server(bundled_fixtures=True)  # with the bundled fixtures
    before = server.admin.get("/scenarios", headers={SCOPE_HEADER: ""}).json()["data"]
    assert {s["source"] for s in before} != {"api"} and before
    server.admin.post("/reset", headers={SCOPE_HEADER: ""}).raise_for_status()
    assert server.admin.get("/scenarios", headers={SCOPE_HEADER: ""}).json()["data"] == before


def test_health(server: PTCEmulator, admin: Callable[[str | None], httpx.Client]) -> None:
    health = admin(None).get("/health").json()
    assert health["status"] == "ok"
    assert health["store"] == "memory"
    assert len(health["workers"]) == 1


INVALID = [
    ({"match": {"input": "hi"}}, "turns: Field required"),
    ({"match": {"input": "hi"}, "turns": []}, "turns: List should have at least 1 item"),
    ({"match": {"input": "(unclosed"}, "turns": [{"message": "x"}]}, "invalid regular expression '(unclosed'"),
    ({"turns": [{"message": "x", "program": "text(1)"}]}, "a turn needs exactly one of program, call, "),
    ({"name": "has space", "turns": [{"message": "x"}]}, "name: String should match pattern"),
    ({"turns": [{"message": "x", "fault": {"http_error": 418}}]}, "turns.0.fault.http_error"),
    ({"turns": [{"message": "x"}], "unknown": 1}, "unknown"),
    ({"yaml": "match: [unclosed"}, "invalid YAML"),
    ({"yaml": "- just\n- a list"}, "a scenario is a mapping with `match` and `turns`"),
    ({"yaml": 42}, "'yaml' must be the text of a scenario file."),
]


@pytest.mark.parametrize(("body", "says"), INVALID, ids=[says for _, says in INVALID])
def test_invalid_scenario_is_a_400_in_openais_envelope(
    admin: Callable[[str | None], httpx.Client], body: dict[str, Any], says: str
) -> None:
    reply = admin("s").post("/scenarios", json=body)

    assert reply.status_code == 400
    assert reply.headers["content-type"] == "application/json"
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert says in error["message"], error["message"]
    if "yaml" not in body or isinstance(body["yaml"], str):
        assert error["code"] == "invalid_scenario"
        assert error["message"].startswith("Invalid scenario: ")
    assert names(admin("s").get("/scenarios")) == []


def test_yaml_the_c_parser_refuses_is_counted_before_it_is_built(
    admin: Callable[[str | None], httpx.Client],
) -> None:
    """`%YAML 1.3` stopped the C parser's count before its first value, and Python's loader read
    it whole: 100,000 values took 4.4 s of the event loop. Now it is refused at the scenario bound
    with the one line other YAML of too many values gets."""
    text = "%YAML 1.3\n---\nname: x\nmatch: {input: zz}\nturns: [" + "a," * 50_000 + "a]\n"
    reply = admin("s").post("/scenarios", json={"yaml": text})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == "invalid_scenario"
    assert error["message"] == "Invalid scenario: scenario: YAML of more than 50000 values (a long text is one value)"
    assert names(admin("s").get("/scenarios")) == []


def test_body_that_is_not_json(admin: Callable[[str | None], httpx.Client]) -> None:
    reply = admin("s").post("/scenarios", content=b"{not json", headers={"content-type": "application/json"})
    assert reply.status_code == 400
    assert reply.json()["error"]["message"] == 'The body must be a scenario as JSON, or {"yaml": "..."}.'


def test_plugin_add_scenario_raises_with_the_message(ptc_emulator: PTCEmulator) -> None:
    with pytest.raises(ValueError, match=r"^Invalid scenario: scenario: turns: Field required"):
        ptc_emulator.add_scenario({"match": {"input": "x"}})
