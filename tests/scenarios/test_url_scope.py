"""A scope in the base URL: `/scopes/<scope>/v1` serves every route in that scope, with no header.

Agent code that builds its own client sends no custom header; these clients are made the way such
code makes them (a base URL and a key, nothing else)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import openai
import pytest

from ptc_emulator.testing.server import SCOPE_HEADER, PTCEmulator

HELLO = {"name": "greeting", "match": {"input": "(?i)^hello"}, "turns": [{"message": "hi from {{ input }}"}]}


@pytest.fixture(scope="module")
def shared(module_server: Callable[..., PTCEmulator]) -> PTCEmulator:
    return module_server(bundled_fixtures=False)


@pytest.fixture
def root(shared: PTCEmulator) -> str:
    shared.admin.post("/reset", headers={SCOPE_HEADER: ""}).raise_for_status()
    return shared.server_url[: -len("/v1")]


def plain(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url=base_url, max_retries=0)


def test_a_scenario_added_under_a_scoped_url_is_seen_only_there(root: str) -> None:
    admin = httpx.Client(base_url=f"{root}/scopes/team-a/_emulator", timeout=30)
    with admin:
        added = admin.post("/scenarios", json=HELLO)
        assert added.status_code == 201, added.text
        assert added.json()["scope"] == "team-a"  # the URL's scope, with no header sent

    with plain(f"{root}/scopes/team-a/v1") as mine:
        assert mine.responses.create(model="gpt-test", input="hello there").output_text == "hi from hello there"
    with plain(f"{root}/scopes/team-b/v1") as other, pytest.raises(openai.BadRequestError) as caught:
        other.responses.create(model="gpt-test", input="hello there")
    assert caught.value.code == "no_scenario_matched"


def test_stored_responses_and_streams_work_under_the_prefix(root: str) -> None:
    with plain(f"{root}/scopes/team-c/v1") as client:
        created = client.responses.create(
            model="gpt-test", input=[{"role": "user", "content": "```js\ntext('x')\n```"}]
        )
        assert client.responses.retrieve(created.id).id == created.id
        with client.responses.stream(model="gpt-test", input="```js\ntext('streamed')\n```") as stream:
            final = stream.get_final_response()
        assert final.status == "completed"


def test_a_header_that_names_another_scope_is_refused(root: str) -> None:
    client = openai.OpenAI(
        api_key="sk-test", base_url=f"{root}/scopes/team-a/v1", default_headers={SCOPE_HEADER: "team-b"}, max_retries=0
    )
    with client, pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-test", input="hello")
    assert caught.value.code == "invalid_scope"
    assert "team-a" in caught.value.message and "team-b" in caught.value.message


@pytest.mark.parametrize("bad", ["", "a%20b", "x" * 201])
def test_an_unusable_scope_in_the_url_is_a_clear_400(root: str, bad: str) -> None:
    answer = httpx.post(f"{root}/scopes/{bad}/v1/responses", json={"model": "m", "input": "hi"}, timeout=30)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "invalid_scope" and error["param"] == "scope"
    assert "/scopes/<scope>/v1" in error["message"]
