"""A cassette's scrubber (testing/cassettes.py): it sees every text a recording holds, and a
scrubbed user message still matches the message it came from."""

from __future__ import annotations

import re

from ptc_emulator.emulator.model.scripted.recording import file_name, full_match
from ptc_emulator.testing.cassettes import scrubbed


def hide_cards(text: str) -> str:
    return re.sub(r"\b\d{4}(?:-\d{4}){3}\b", "<card>", text)


QUESTION = "Refund card 4111-1111-1111-1111 (order #7) and card 5500-0000-0000-0004, please."


def recording() -> dict[str, object]:
    scenario: dict[str, object] = {
        "description": "Recorded from gpt-test.",
        "priority": 1,
        "match": {"input": full_match(QUESTION), "tools": ["refund"]},
        "turns": [
            {
                "reasoning": "Refund 4111-1111-1111-1111 first.",
                "call": {"name": "refund", "arguments": {"card": "4111-1111-1111-1111", "n": 1}},
            },
            {"program": 'await tools.refund({ card: "5500-0000-0000-0004" });'},
            {"message": "Refunded 4111-1111-1111-1111 and 5500-0000-0000-0004."},
        ],
    }
    scenario = {"name": file_name(scenario).removesuffix(".yaml"), **scenario}
    return scenario


def test_every_text_is_scrubbed_and_names_tools_and_numbers_are_not() -> None:
    clean = scrubbed(recording(), hide_cards)

    assert "4111" not in str(clean) and "5500" not in str(clean)
    call, program, message = clean["turns"]
    assert call == {
        "reasoning": "Refund <card> first.",
        "call": {"name": "refund", "arguments": {"card": "<card>", "n": 1}},
    }
    assert program == {"program": 'await tools.refund({ card: "<card>" });'}
    assert message == {"message": "Refunded <card> and <card>."}
    assert clean["match"]["tools"] == ["refund"] and clean["priority"] == 1


def test_the_scrubbed_match_still_matches_the_message_and_names_the_recording() -> None:
    clean = scrubbed(recording(), hide_cards)

    pattern = clean["match"]["input"]
    assert pattern == r"^Refund card .+? \(order #7\) and card .+? please\.$"
    assert re.search(pattern, QUESTION)
    assert clean["name"] == file_name(clean).removesuffix(".yaml") != recording()["name"]


def test_what_the_scrubber_leaves_alone_stays_as_recorded() -> None:
    original = recording()
    untouched = scrubbed(original, lambda text: text)
    assert untouched == original

    hand_written = {**original, "name": "mine", "match": {"input": "(?i)refund card (?P<card>[\\d-]+)"}}
    kept = scrubbed(hand_written, hide_cards)
    assert kept["name"] == "mine" and kept["match"]["input"] == "(?i)refund card (?P<card>[\\d-]+)"
