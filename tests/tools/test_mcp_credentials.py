"""An `mcp` tool's credentials reach its server and nothing else: the Response echoes the tool
without `authorization` and with its header values redacted, and so do the stored response, the
journal's entry of the request and the inspector's view of it."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from ptc_emulator.testing.server import PTCEmulator
from tests.support import js, validating_client
from tests.tools.tools_support import DocsServer, docs_server

SECRET = "tok-very-secret-1"


@pytest.fixture(scope="module")
def docs() -> Iterator[DocsServer]:
    logging.getLogger("mcp").setLevel(logging.WARNING)
    with docs_server() as server:
        yield server


def test_credentials_go_to_the_server_and_are_never_echoed_or_stored(
    ptc_emulator: PTCEmulator, docs: DocsServer
) -> None:
    client = validating_client(ptc_emulator)
    tool = {
        "type": "mcp",
        "server_label": "docs_server",
        "server_url": docs.url,
        "require_approval": "never",
        "allowed_callers": ["programmatic"],
        "authorization": SECRET,
        "headers": {"X-Api-Key": SECRET + "-header"},
    }
    response = client.responses.create(
        model="gpt-test",
        tools=[{"type": "programmatic_tool_calling"}, tool],
        input=js("text(await tools.docs_server.lookup({topic: 'ptc'}))"),
    )
    assert response.output_text == "The docs say ptc is fine."
    assert f"Bearer {SECRET}" in docs.authorizations  # the server got them
    for shown in (response.model_dump(), client.responses.retrieve(response.id).model_dump()):
        [echoed] = [t for t in shown["tools"] if t["type"] == "mcp"]
        assert echoed.get("authorization") is None
        assert echoed["headers"] == {"X-Api-Key": "[redacted]"}
        assert SECRET not in json.dumps(shown)

    # The journal keeps the request as the client sent it, but not the credentials.
    [entry] = ptc_emulator.journal
    [journaled] = [t for t in entry["request"]["tools"] if t["type"] == "mcp"]
    assert "authorization" not in journaled
    assert journaled["headers"] == {"X-Api-Key": "[redacted]"}
    assert journaled["server_url"] == docs.url  # the rest of the declaration stays
    assert SECRET not in json.dumps(entry)
    # The inspector reads the journal: its list and its conversation view show no credential.
    listed = ptc_emulator.admin.get("/inspector/conversations")
    listed.raise_for_status()
    [conversation] = listed.json()["data"]
    shown = ptc_emulator.admin.get(f"/inspector/conversations/{conversation['id']}")
    shown.raise_for_status()
    for text in (listed.text, shown.text):
        assert SECRET not in text
    assert "[redacted]" in shown.text
