"""The inspector's JSON shows a caller in a scope (the scope header, or a `/scopes/<scope>/` URL:
how a test's client is scoped) that scope alone; a caller in no scope, the server's owner (with
its key, where the server has one), sees every scope. On the code before, the list named every
scope (and every scenario) to a caller of any scope.
"""

from __future__ import annotations

from typing import Any

import httpx

from ptc_emulator.names import SCOPE_HEADER
from ptc_emulator.testing.server import PTCEmulator


def test_the_inspector_shows_a_caller_in_a_scope_that_scope_alone(
    ptc_emulator: PTCEmulator,
) -> None:
    """A caller in another scope (header or scoped URL) sees none of this scope's conversations,
    names, scenarios or requests; a caller in no scope (the server's owner, with its key) sees
    them, and a caller in this scope its own."""
    scenario = ptc_emulator.add_scenario({"match": {"input": "^hello$"}, "turns": [{"message": "hi"}]})
    ptc_emulator.client(max_retries=0).responses.create(model="m", input="hello")
    root, key = ptc_emulator.server_url[: -len("/v1")], {"Authorization": f"Bearer {ptc_emulator.api_key}"}
    other_scope = ptc_emulator.scope + "-other"

    def listing(url: str, **headers: str) -> dict[str, Any]:
        reply = httpx.get(url, headers={**key, **headers}, timeout=30)
        assert reply.status_code == 200, reply.text
        return reply.json()  # type: ignore[no-any-return]

    owner = listing(f"{root}/_emulator/inspector/conversations")
    assert ptc_emulator.scope in owner["scopes"] and scenario in owner["scenarios"]
    [mine] = [row for row in owner["data"] if row["scope"] == ptc_emulator.scope]
    own = listing(f"{root}/_emulator/inspector/conversations", **{SCOPE_HEADER: ptc_emulator.scope})
    assert [row["id"] for row in own["data"]] == [mine["id"]] and own["scopes"] == [ptc_emulator.scope]

    for seen in (
        listing(f"{root}/_emulator/inspector/conversations", **{SCOPE_HEADER: other_scope}),
        listing(f"{root}/scopes/{other_scope}/_emulator/inspector/conversations"),
        # naming this scope as a filter does not take a caller out of its own
        listing(f"{root}/_emulator/inspector/conversations?scope={ptc_emulator.scope}", **{SCOPE_HEADER: other_scope}),
    ):
        assert seen["data"] == [] and seen["scopes"] == [] and seen["scenarios"] == [], seen
        assert seen["latest_seq"] == 0
    read = httpx.get(
        f"{root}/_emulator/inspector/conversations/{mine['id']}", headers={**key, SCOPE_HEADER: other_scope}, timeout=30
    )
    assert read.status_code == 404 and set(read.json()["error"]) == {"message", "type", "param", "code"}
    journal = httpx.get(f"{root}/_emulator/journal", headers={**key, SCOPE_HEADER: other_scope}, timeout=30)
    assert journal.json()["data"] == []
