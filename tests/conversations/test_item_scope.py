"""An `item_reference` names a stored item of the caller's own scope (`x-ptc-emulator-scope`):
another scope's item is refused exactly as a missing one, whether the reference is in a
conversation's items or in a response's input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest

from ptc_emulator.testing.server import SCOPE_HEADER, PTCEmulator
from tests.support import validating_client


def _refusals(client: openai.OpenAI, item_id: str) -> list[tuple[int, dict[str, Any]]]:
    """The error of each way to reference `item_id`: in a new conversation's items, in an
    existing one's, in a response's input."""
    target = client.conversations.create()
    reference = [{"type": "item_reference", "id": item_id}]
    ways: list[Callable[[], Any]] = [
        lambda: client.conversations.create(items=reference),  # type: ignore[list-item]
        lambda: client.conversations.items.create(target.id, items=reference),  # type: ignore[list-item]
        lambda: client.responses.create(model="m", input=reference),  # type: ignore[arg-type]
    ]
    refusals = []
    for way in ways:
        with pytest.raises(openai.BadRequestError) as caught:
            way()
        assert isinstance(caught.value.body, dict)
        refusals.append((caught.value.status_code, caught.value.body))
    assert client.conversations.items.list(target.id).data == [], "nothing was added"
    return refusals


def test_another_scopes_item_is_as_missing(ptc_emulator: PTCEmulator) -> None:
    ptc_emulator.add_scenario({"match": {"input": "^hello$"}, "turns": [{"message": "Secret of scope A."}]})
    mine = validating_client(ptc_emulator)
    response = mine.responses.create(model="m", input="hello")
    item_id = response.output[0].id
    assert item_id is not None
    # In its own scope the reference resolves (as tests/conversations/test_api.py shows in full).
    conv = mine.conversations.create(items=[{"type": "item_reference", "id": item_id}])
    assert len(mine.conversations.items.list(conv.id).data) == 1

    other = validating_client(ptc_emulator, default_headers={SCOPE_HEADER: ptc_emulator.scope + "-other"})
    unscoped = openai.OpenAI(base_url=ptc_emulator.server_url, api_key=ptc_emulator.api_key, max_retries=0)
    try:
        for client in (other, unscoped):
            missing = _refusals(client, "msg_missing")
            for (status, body), (missing_status, missing_body) in zip(_refusals(client, item_id), missing, strict=True):
                assert status == missing_status == 400
                assert body == {**missing_body, "message": missing_body["message"].replace("msg_missing", item_id)}
    finally:
        unscoped.close()
