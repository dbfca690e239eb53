"""A scenario's templates are checked when it is added (their constant expressions folded), and
all of them together within one render's bounds: what they build (`MAX_BUILT_CHARS`) and the time
folding takes (`MAX_SECONDS`). Before, the check had no bound at all: 850 bytes of
`{{[0]*100000}}` took 3.7 s to add (each list walked), 300 copies 12 s, and a 16 KiB body some
40 s of CPU. No clock: the built characters are counted, and the deadline is kept by a clock the
test moves (`templating._clock`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from starlette.testclient import TestClient

from ptc_emulator.emulator.model.scripted import templating


def _add(http: TestClient, turns: list[dict[str, Any]]) -> Any:
    name = f"check-{uuid.uuid4().hex[:8]}"
    body = {"name": name, "match": {"input": "^never$"}, "turns": turns}
    answered = http.post("/_emulator/scenarios", content=json.dumps(body), headers={"content-type": "application/json"})
    if answered.status_code == 201:
        http.delete(f"/_emulator/scenarios/{name}")
    return answered


def test_what_a_scenarios_constant_templates_build_together_is_bounded(unit_http: TestClient) -> None:
    marker = uuid.uuid4().hex  # templates of their own: never checked before (a template passed is kept)

    def turn(k: int) -> dict[str, str]:  # 6,000,000 characters a turn, and a name a request gives
        # (without it, the template renders the same at every request and is rendered when added:
        # more than 1,000,000 characters, refused for that on turn 0)
        return {"message": "{{ input[:0] }}" + "".join(f"{{{{ 'x' * 100000 }}}}{marker}{k}.{i}" for i in range(60))}

    answered = _add(unit_http, [turn(0), turn(1), turn(2)])
    assert answered.status_code == 400, answered.text
    error = answered.json()["error"]
    assert error["code"] == "invalid_scenario" and error["type"] == "invalid_request_error"
    assert "turns.2.message: invalid template" in error["message"]
    assert f"built more than {templating.MAX_BUILT_CHARS} characters" in error["message"]
    assert _add(unit_http, [turn(3), turn(4)]).status_code == 201  # within it


def test_the_time_a_scenarios_constant_templates_take_together_is_bounded(
    unit_http: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0.0]

    def moving() -> float:  # every look at the clock is a twentieth of a second later
        now[0] += 0.05
        return now[0]

    monkeypatch.setattr(templating, "_clock", moving)
    marker = uuid.uuid4().hex
    turns = [{"message": f"{{{{ [0] * 10000 }}}}{marker}{i}"} for i in range(40)]
    answered = _add(unit_http, turns)
    assert answered.status_code == 400, answered.text
    error = answered.json()["error"]
    assert error["code"] == "invalid_scenario"
    assert f"ran longer than {templating.MAX_SECONDS:g} s" in error["message"]
