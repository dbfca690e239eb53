"""`GET /v1/models` and `GET /v1/models/{id}` in the SDK's shape: `client.models.list()` and
`retrieve()` parse them (the `client` fixture validates each raw body with the SDK's `Model`).
The list names the models the emulator is told of by name (a scenario's plain `match.model`, in
the caller's scope; the model upstream's); a retrieve answers any id, as the emulator plays any."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import openai
import pytest

from ptc_emulator.testing.server import EmulatorServer, PTCEmulator
from tests.support import validating_client

pytestmark = pytest.mark.sdk


def _scenario(name: str, model: str) -> dict[str, object]:
    return {"name": name, "match": {"model": model, "input": "^models$"}, "turns": [{"message": "ok"}]}


@pytest.mark.ptc_strict(unused=False)  # the scenarios are there for the models they name, not to answer
def test_the_list_names_the_scenarios_models_in_the_callers_scope(
    client: openai.OpenAI, ptc_emulator: PTCEmulator
) -> None:
    ptc_emulator.add_scenario(_scenario("named", "gpt-6.2-astra"))
    ptc_emulator.add_scenario(_scenario("pattern", "gpt-5.*|o[0-9]+"))  # a pattern names no one model
    listed = list(client.models.list())
    ids = [m.id for m in listed]
    assert "gpt-6.2-astra" in ids and not any("*" in i or "|" in i for i in ids)
    assert all(m.object == "model" and m.owned_by == "ptc-emulator" and m.created > 0 for m in listed)
    assert ids == sorted(ids)
    other = PTCEmulator(ptc_emulator.server_url)  # another scope sees none of this one's
    try:
        assert "gpt-6.2-astra" not in [m.id for m in other.client(max_retries=0).models.list()]
    finally:
        other.close()


def test_retrieve_answers_any_model_the_emulator_plays(client: openai.OpenAI, ptc_emulator: PTCEmulator) -> None:
    for name in ("gpt-6.2-astra", "m", "qwen/qwen3-coder:30b"):
        model = client.models.retrieve(name)
        assert (model.id, model.object, model.owned_by) == (name, "model", "ptc-emulator")
    raw = httpx.get(ptc_emulator.base_url + "/models/emulated", headers={"Authorization": "Bearer sk-test"})
    assert raw.status_code == 200
    assert set(raw.json()) == {"id", "object", "created", "owned_by"} and raw.json()["id"] == "emulated"


def test_the_model_upstreams_model_is_listed(make_server: Callable[..., EmulatorServer]) -> None:
    server = make_server(model_upstream="http://127.0.0.1:9/v1", model_upstream_model="local-llm")
    emulator = PTCEmulator(server.base_url)
    with validating_client(emulator, max_retries=0) as client:
        assert [m.id for m in client.models.list()] == ["local-llm"]
    emulator.close()
