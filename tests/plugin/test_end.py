"""`POST /_emulator/end`, the fixture's teardown in one call: a scope whose strict checks pass is
forgotten; one whose checks fail is left as it is, for the journal to say what happened."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import PTCEmulator

# This test leaves an unmatched request and an unused scenario on purpose, then ends its scope itself.
pytestmark = pytest.mark.ptc_strict(False)


def _mine(emulator: PTCEmulator) -> list[str]:
    return sorted(str(s["name"]) for s in emulator.scenarios if s.get("scope") == emulator.scope)


def test_end_forgets_the_scope_only_when_its_checks_pass(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario({"name": "greets", "match": {"input": "hello"}, "turns": [{"message": "hi"}]})
    ptc_emulator.add_scenario({"name": "never", "match": {"input": "nobody asks this"}, "turns": [{"message": "x"}]})
    client = ptc_emulator.client()
    assert client.responses.create(model="m", input="hello").output_text == "hi"
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model="m", input="something else")

    reply: Any = ptc_emulator.admin.post("/end").json()
    assert reply == {"ended": False, "unmatched": 1, "unused": ["never"]}
    assert len(ptc_emulator.journal) == 2 and _mine(ptc_emulator) == ["greets", "never"]  # nothing forgotten
    assert ptc_emulator.admin.post("/end", params={"unused": "false"}).json()["unused"] == []
    assert ptc_emulator.end(unmatched=False) is False  # "never" still answered nothing

    ptc_emulator.remove_scenario("never")
    assert ptc_emulator.end(unmatched=False) is True
    assert ptc_emulator.journal == [] and _mine(ptc_emulator) == []


def test_end_of_a_clean_scope_leaves_the_others(ptc_emulator: PTCEmulator) -> None:
    other = PTCEmulator(ptc_emulator.server_url, api_key=ptc_emulator.api_key)
    try:
        other.add_scenario({"name": "elsewhere", "match": {"input": "x"}, "turns": [{"message": "y"}]})
        ptc_emulator.add_scenario({"name": "here", "match": {"input": "hello"}, "turns": [{"message": "hi"}]})
        ptc_emulator.client().responses.create(model="m", input="hello")
        assert ptc_emulator.end() is True
        assert _mine(ptc_emulator) == [] and _mine(other) == ["elsewhere"]
    finally:
        other.reset()
        other.close()


def test_end_refuses_a_check_that_is_no_boolean(ptc_emulator: PTCEmulator) -> None:
    reply = ptc_emulator.admin.post("/end", params={"unused": "perhaps"})
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "unused"


def test_end_forgets_what_the_prompt_cache_would_serve_the_scope(ptc_emulator: PTCEmulator) -> None:
    """The prompt cache is behaviour (`cached_tokens`), not a saving: a test's prompts are not
    served to the next test of the same scope, as `POST /_emulator/reset` never served them."""
    long = "You answer questions about inventory. " * 200  # well past the 1,024 tokens a cache serves
    client = ptc_emulator.client()

    def cached() -> int:
        made = client.responses.create(
            model="m", instructions=long, input=[{"role": "user", "content": "```js\ntext('x');\n```"}]
        )
        assert made.usage is not None
        return made.usage.input_tokens_details.cached_tokens

    assert cached() == 0
    assert cached() > 0  # the same prompt again: served
    assert ptc_emulator.end() is True
    assert cached() == 0  # the scope's next test starts cold
