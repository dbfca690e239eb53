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
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator import jsonpieces
from ptc_emulator.emulator.model.scripted import files
from ptc_emulator.emulator.model.scripted.scenario import ScenarioError

JSON = {"content-type": "application/json"}
pytestmark = pytest.mark.anyio
ADMIN = "/_emulator"
VALUES = 300_000
"""Empty arrays in a scenario's extra member: 900 KB of JSON, `VALUES / PIECE` pieces."""


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
    return {"name": name, "match": {"input": f"^{name}$", "outputs": [{"json": [[]] * values}]}, "turns": [{"message": "x"}]}


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


@pytest.mark.parametrize(
    ("metadata", "said"),
    [
        ({"k" * 65: "v"}, "is longer than 64 characters"),
        ({"k": "v" * 513}, "is longer than 512 characters"),
    ],
    ids=["key", "value"],
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
