"""How scenarios are read and listed: a long JSON scenario (a body posted to
`/_emulator/scenarios`, a `.json` file) is parsed a piece at a time, as `/v1/responses` bodies
are, and a `match.metadata` no request could carry is refused when the scenario is added.

Before, a JSON scenario was one `json.loads` call: 15 MB of empty arrays held every client, the
event loop too, 0.25-2.2 s from the worker thread reading it. No clock: the texts given to one
`json.loads` call are recorded, and none may be the whole scenario.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator import jsonpieces
from ptc_emulator.emulator.model.scripted import files
from ptc_emulator.emulator.model.scripted import scenario as scenario_module
from ptc_emulator.emulator.model.scripted.scenario import ScenarioError

JSON = {"content-type": "application/json"}
pytestmark = pytest.mark.anyio
ADMIN = "/_emulator"
VALUES = 100_000
"""Empty arrays in a scenario's extra member: 400 KB of JSON, counted as 200,000 values (at most 250,000)."""


@contextlib.asynccontextmanager
async def app_client(tmp_path: Path, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(data_dir=tmp_path / "data", pool_size=1, bundled_fixtures=False, **settings))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=120) as http:
            yield http


@pytest.fixture
def whole(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The lengths of the texts read in one `json.loads` call (one C call holding the interpreter)."""
    seen: list[int] = []
    real = json.loads

    def noted(text: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(len(text))
        return real(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", noted)
    return seen


def _long(name: str, values: int = VALUES) -> dict[str, Any]:
    """A valid scenario with a long `match.outputs` json: read and kept, not refused."""
    return {
        "name": name,
        "match": {"input": f"^{name}$", "outputs": [{"json": [[]] * values}]},
        "turns": [{"message": "x"}],
    }


async def test_a_long_scenario_body_is_parsed_a_piece_at_a_time(tmp_path: Path, whole: list[int]) -> None:
    body = {"name": "j", "match": {"input": "^j$"}, "turns": [{"message": "x"}], "x": [[]] * VALUES}
    async with app_client(tmp_path) as http:
        refused = await http.post(f"{ADMIN}/scenarios", content=json.dumps(body), headers=JSON)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "invalid_scenario"
        assert "x: Extra inputs are not permitted" in refused.json()["error"]["message"]
        # before: one json.loads call over the whole body
        assert max(whole, default=0) < jsonpieces.LONG_TEXT
        added = await http.post(f"{ADMIN}/scenarios", content=json.dumps(_long("big")), headers=JSON)
        assert added.status_code == 201, added.text
        assert max(whole, default=0) < jsonpieces.LONG_TEXT
        # more values than a scenario may hold: refused before any is parsed
        many = json.dumps({**body, "x": [0] * 250_001})
        whole.clear()
        refused = await http.post(f"{ADMIN}/scenarios", content=many, headers=JSON)
        assert refused.status_code == 400, refused.text
        assert "JSON of more than 250,000 values and keys" in refused.json()["error"]["message"]
        assert max(whole, default=0) < 1000  # nothing of the body parsed (the answer is read here)
        # not JSON past the first pieces: refused as before, with the same error
        broken = json.dumps(_long("broken"))[:-5]
        refused = await http.post(f"{ADMIN}/scenarios", content=broken, headers=JSON)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["message"].startswith("The body must be a scenario as JSON")


async def test_a_long_json_scenario_file_is_parsed_a_piece_at_a_time(tmp_path: Path, whole: list[int]) -> None:
    folder = tmp_path / "fx"
    folder.mkdir()
    (folder / "big.json").write_text(json.dumps(_long("big")))
    async with app_client(tmp_path, fixtures=(folder,)) as http:
        listed = (await http.get(f"{ADMIN}/scenarios")).json()["data"]
        assert [s["name"] for s in listed] == ["big"]
        assert max(whole, default=0) < jsonpieces.LONG_TEXT  # before: the whole file in one call
        # a key given twice in a long file is still refused, naming the key
        text = json.dumps(_long("big"))
        (folder / "big.json").write_text('{"name": "twice", ' + text[1:])
        reset = await http.post(f"{ADMIN}/reset", content="{}", headers=JSON)
        assert reset.status_code == 200, reset.text
        listed = (await http.get(f"{ADMIN}/scenarios")).json()["data"]
        assert [s["name"] for s in listed] == ["big"]  # the previous files stay
    with pytest.raises(ScenarioError, match="the key 'name' is given twice in one object"):
        files.read(folder / "big.json")
    (folder / "big.json").write_text(json.dumps({**_long("big"), "x": [0] * 250_001}))
    with pytest.raises(ScenarioError, match="JSON of more than 250,000 values and keys"):
        files.read(folder / "big.json")


@pytest.mark.parametrize(
    ("metadata", "said"),
    [
        ({"k" * 65: "v"}, "is longer than 64 characters"),
        ({"k": "v" * 513}, "is longer than 512 characters"),
        ({f"k{i}": "v" for i in range(17)}, "17 keys, more than the 16"),
    ],
    ids=["key", "value", "keys"],
)
async def test_a_match_metadata_no_request_can_carry_is_refused_at_add(
    tmp_path: Path, metadata: dict[str, str], said: str
) -> None:
    """Before, it was added (201), and every request carrying it was refused: it never matched."""
    body = {"name": "md", "match": {"input": "^md$", "metadata": metadata}, "turns": [{"message": "ok"}]}
    async with app_client(tmp_path) as http:
        refused = await http.post(f"{ADMIN}/scenarios", content=json.dumps(body), headers=JSON)
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["code"] == "invalid_scenario"
        assert "match.metadata" in error["message"] and said in error["message"]
        assert "could never match" in error["message"]
        at_most = {"k" * 64: "v" * 512}
        body = {"name": "ok", "match": {"input": "^ok$", "metadata": at_most}, "turns": [{"message": "ok"}]}
        assert (await http.post(f"{ADMIN}/scenarios", content=json.dumps(body), headers=JSON)).status_code == 201
        answer = await http.post(
            "/v1/responses", content=json.dumps({"model": "m", "input": "ok", "metadata": at_most}), headers=JSON
        )
        assert answer.status_code == 200, answer.text


async def test_match_tools_are_bounded_at_add_and_counted_in_the_matching_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, `match.tools` had no bound (201 for 240,000 names) and each request that reached the
    scenario looked every name up on the event loop, outside the request's matching budget and
    outside the weight that moves matching to a worker thread."""
    spent: list[tuple[int, str]] = []
    real = scenario_module.spend

    def noted(units: int, what: str) -> None:
        spent.append((units, what))
        real(units, what)

    monkeypatch.setattr(scenario_module, "spend", noted)
    async with app_client(tmp_path) as http:
        many = {"name": "many", "match": {"tools": [f"t{i}" for i in range(129)]}, "turns": [{"message": "x"}]}
        refused = await http.post(f"{ADMIN}/scenarios", content=json.dumps(many), headers=JSON)
        assert refused.status_code == 400, refused.text
        assert "129 tools, more than the 128" in refused.json()["error"]["message"]
        tools = [f"t{i}" for i in range(128)]
        body = {"name": "most", "match": {"input": "^most$", "tools": tools}, "turns": [{"message": "x"}]}
        assert (await http.post(f"{ADMIN}/scenarios", content=json.dumps(body), headers=JSON)).status_code == 201
        missed = await http.post("/v1/responses", content=json.dumps({"model": "m", "input": "other"}), headers=JSON)
        assert missed.status_code == 400
    assert (scenario_module.TOOL_LOOKUP_COST * 128, "match.tools") in spent


class _Walked(dict):  # type: ignore[type-arg]
    """The registry's table of every scenario, counting the entries any walk of it reads."""

    walked = 0

    def _count(self, n: int) -> None:
        type(self).walked += n

    def __iter__(self) -> Any:
        self._count(len(self))
        return super().__iter__()

    def items(self) -> Any:
        self._count(len(self))
        return super().items()

    def values(self) -> Any:
        self._count(len(self))
        return super().values()

    def keys(self) -> Any:
        self._count(len(self))
        return super().keys()


def _scenario(name: str, priority: int = 0) -> str:
    return json.dumps(
        {"name": name, "priority": priority, "match": {"input": f"^{name}$"}, "turns": [{"message": name}]}
    )


async def test_what_a_scope_asks_costs_what_it_and_the_unscoped_scenarios_hold(tmp_path: Path) -> None:
    """Before, an empty scope's `POST /_emulator/end` (every test's teardown), its listing, its
    matching and its `/v1/models` each walked every scope's scenarios on the event loop (50,000 of
    them: 0.3-0.6 s each, every client waiting)."""
    others = {**JSON, "x-ptc-emulator-scope": "others"}
    mine = {**JSON, "x-ptc-emulator-scope": "mine"}
    async with app_client(tmp_path) as http:
        registry = http._transport.app.state.emulator.scenarios  # type: ignore[attr-defined]
        for n in range(200):
            added = await http.post(f"{ADMIN}/scenarios", content=_scenario(f"o{n:03d}"), headers=others)
            assert added.status_code == 201, added.text
        assert (await http.post(f"{ADMIN}/scenarios", content=_scenario("shared", 5), headers=JSON)).status_code == 201
        registry._scenarios = _Walked(registry._scenarios)
        assert (await http.post(f"{ADMIN}/scenarios", content=_scenario("m1"), headers=mine)).status_code == 201
        listed = (await http.get(f"{ADMIN}/scenarios", headers=mine)).json()["data"]
        assert [(s["name"], s["scope"]) for s in listed] == [("shared", None), ("m1", "mine")]
        answer = await http.post("/v1/responses", content=json.dumps({"model": "m", "input": "m1"}), headers=mine)
        assert answer.status_code == 200, answer.text
        assert (await http.get("/v1/models", headers=mine)).status_code == 200
        ended = await http.post(f"{ADMIN}/end", content="{}", headers=mine)
        assert ended.json()["ended"] is True, ended.text
        empty = await http.post(f"{ADMIN}/end", content="{}", headers={**JSON, "x-ptc-emulator-scope": "empty"})
        assert empty.json() == {
            "ended": True,
            "unmatched": 0,
            "unused": [],
            "scenarios_removed": 0,
            "journal_cleared": 0,
        }
        assert _Walked.walked == 0  # before: every one of the 201 scenarios, at each of these
        # the other scope still sees its own, and its unused ones are named at its end
        unused = await http.post(f"{ADMIN}/end", content="{}", headers=others)
        assert unused.json()["ended"] is False and len(unused.json()["unused"]) == 200


async def test_the_hint_of_an_unscoped_miss_tries_a_bounded_number_of_scoped_scenarios(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, an unscoped request that matched nothing sorted every scenario of every scope and
    tried each scoped one on the event loop for its 400's hint (10,000: 0.1-1.05 s, every client
    waiting). Now at most `SCOPED_HINT_SCENARIOS`, and the table of all is not walked."""
    monkeypatch.setattr(scenario_module, "SCOPED_HINT_SCENARIOS", 20)
    tried: list[str] = []
    real = scenario_module._misses

    def counted(scenario: Any, request: Any) -> bool:
        tried.append(scenario.name)
        return real(scenario, request)

    monkeypatch.setattr(scenario_module, "_misses", counted)
    async with app_client(tmp_path) as http:
        registry = http._transport.app.state.emulator.scenarios  # type: ignore[attr-defined]
        hinted = {**JSON, "x-ptc-emulator-scope": "a"}
        assert (await http.post(f"{ADMIN}/scenarios", content=_scenario("hint"), headers=hinted)).status_code == 201
        for n in range(30):
            scope = {**JSON, "x-ptc-emulator-scope": f"s{n % 3}"}
            added = await http.post(f"{ADMIN}/scenarios", content=_scenario(f"o{n:03d}"), headers=scope)
            assert added.status_code == 201, added.text
        registry._scenarios = _Walked(registry._scenarios)
        _Walked.walked = 0
        missed = await http.post("/v1/responses", content=json.dumps({"model": "m", "input": "hint"}), headers=JSON)
        assert missed.status_code == 400
        assert "1 scenario of a scope would match it" in missed.json()["error"]["message"]
        assert len(tried) == 20  # before: 31
        assert _Walked.walked == 0  # before: all 31, sorted


async def test_the_scenarios_added_at_run_time_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, there was no bound: 50,000 tiny scenarios took 400 MB."""
    from ptc_emulator.emulator.model.scripted import scenario

    monkeypatch.setattr(scenario, "MAX_ADDED_SCENARIOS", 3)
    a = {**JSON, "x-ptc-emulator-scope": "a"}
    async with app_client(tmp_path) as http:
        for name, headers in (("s1", JSON), ("s2", a), ("s3", a)):
            assert (await http.post(f"{ADMIN}/scenarios", content=_scenario(name), headers=headers)).status_code == 201
        refused = await http.post(f"{ADMIN}/scenarios", content=_scenario("s4"), headers=JSON)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["code"] == "too_many_scenarios"
        assert (
            "already keeps 3 scenarios added at run time (every scope together)" in refused.json()["error"]["message"]
        )
        names = [s["name"] for s in (await http.get(f"{ADMIN}/scenarios")).json()["data"]]
        assert "s4" not in names
        # replacing one is not one more; a scope's end makes room
        assert (await http.post(f"{ADMIN}/scenarios", content=_scenario("s2", 1), headers=a)).status_code == 201
        ended = await http.post(f"{ADMIN}/end?unused=false", content="{}", headers=a)
        assert ended.json()["scenarios_removed"] == 2, ended.text
        assert (await http.post(f"{ADMIN}/scenarios", content=_scenario("s4"), headers=JSON)).status_code == 201


async def test_the_bytes_of_the_scenarios_added_at_run_time_are_bounded_and_freed_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, only their count was bounded (10,000 of 25 KB took the server to about 1 GB), and
    `POST /_emulator/reset` freed them all on the event loop."""
    monkeypatch.setattr(scenario_module, "MAX_ADDED_SCENARIO_BYTES", 3_000)
    freed_in: list[str] = []

    class Probe:
        def __del__(self) -> None:
            freed_in.append(threading.current_thread().name)

    def body(name: str) -> str:
        return json.dumps({"name": name, "match": {"input": f"^{name}$"}, "turns": [{"message": "x" * 900}]})

    async with app_client(tmp_path) as http:
        for name in ("a", "b", "c"):
            assert (await http.post(f"{ADMIN}/scenarios", content=body(name), headers=JSON)).status_code == 201
        refused = await http.post(f"{ADMIN}/scenarios", content=body("d"), headers=JSON)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "too_many_scenarios"
        assert "3,000 bytes" in refused.json()["error"]["message"]
        replaced = await http.post(f"{ADMIN}/scenarios", content=body("a"), headers=JSON)
        assert replaced.status_code == 201  # replacing one is not one more
        registry = http._transport.app.state.emulator.scenarios  # type: ignore[attr-defined]
        registry.get("b").__dict__["probe"] = Probe()
        loop_thread = threading.current_thread().name
        assert (await http.post(f"{ADMIN}/reset", content="{}", headers=JSON)).status_code == 200
        assert len(freed_in) == 1 and freed_in[0] != loop_thread  # before: freed on the event loop
        assert (await http.post(f"{ADMIN}/scenarios", content=body("d"), headers=JSON)).status_code == 201
