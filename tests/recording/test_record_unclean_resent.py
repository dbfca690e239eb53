"""A `store: false` conversation continued from a response a recording cannot replay as it went
(`incomplete`, or carrying an error) is not recorded though the client resends that response's
items without their ids (docs/record-replay.md, "Limits"): the recorder links a resent call, and a
call's output, to the response by its call id, and a resent assistant message by its text. Before,
such a conversation was recorded, and its first response replayed `completed`.
The upstream is a small server on loopback speaking JSON itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.recording.recording_support import recorder
from tests.recording.test_record_both_sdks import CONVERSATIONS, TOOLS, _conversation, _logged, _plain
from tests.recording.test_record_hostile_upstream import raw_upstream


def _bare(item: dict[str, Any]) -> dict[str, Any]:
    """The item as a client may resend it: no id, no status."""
    return {k: v for k, v in item.items() if k not in ("id", "status")}


def _easy(item: dict[str, Any]) -> dict[str, Any]:
    """An assistant message resent as an EasyInputMessage; any other item bare."""
    if item.get("type") != "message":
        return _bare(item)
    return {"role": "assistant", "content": "".join(p["text"] for p in item["content"])}


def _output_only(item: dict[str, Any]) -> None:
    """The client resends none of the earlier output, only the call's output."""
    return None


RESENT = {"bare": _bare, "easy-message": _easy, "output-only": _output_only}
UNCLEAN = {k: CONVERSATIONS[k] for k in ("first-incomplete", "first-with-error", "preamble-incomplete")}


@pytest.mark.parametrize("resend", list(RESENT.values()), ids=list(RESENT))
@pytest.mark.parametrize(("first", "why"), list(UNCLEAN.values()), ids=list(UNCLEAN))
def test_a_resent_conversation_without_ids_is_linked_to_its_unclean_response(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, first: dict[str, Any], why: str, resend: Any
) -> None:
    directory = tmp_path / "recordings"
    with caplog.at_level("INFO"), raw_upstream(_conversation(first)) as url, recorder(tmp_path, url, directory) as rec:
        sdk = _plain(rec)
        items: list[Any] = [{"role": "user", "content": "no scenario matches this"}]
        r1 = sdk.responses.create(model="gpt-test", input=items, tools=TOOLS, store=False)  # type: ignore[arg-type]
        resent = [resend(i.model_dump(exclude_none=True)) for i in r1.output]
        items += [i for i in resent if i is not None]
        items += [{"type": "function_call_output", "call_id": "call_1", "output": "{}"}]
        r2 = sdk.responses.create(model="gpt-test", input=items, tools=TOOLS, store=False)  # type: ignore[arg-type]
        assert r2.output_text == "Done."
    assert not list(directory.glob("*.yaml"))
    said = [m for m in _logged(caplog) if "was not recorded" in m]
    assert any(why in m for m in said), said


def test_a_clean_conversation_resent_without_ids_is_recorded(tmp_path: Path) -> None:
    """The control: the same resending after a clean first response is recorded."""
    directory = tmp_path / "recordings"
    first = {"output": [CONVERSATIONS["first-incomplete"][0]["output"][0]]}
    with raw_upstream(_conversation(first)) as url, recorder(tmp_path, url, directory) as rec:
        sdk = _plain(rec)
        items: list[Any] = [{"role": "user", "content": "no scenario matches this"}]
        r1 = sdk.responses.create(model="gpt-test", input=items, tools=TOOLS, store=False)  # type: ignore[arg-type]
        items += [_bare(i.model_dump(exclude_none=True)) for i in r1.output]
        items += [{"type": "function_call_output", "call_id": "call_1", "output": "{}"}]
        sdk.responses.create(model="gpt-test", input=items, tools=TOOLS, store=False)  # type: ignore[arg-type]
    assert len(list(directory.glob("*.yaml"))) == 1
