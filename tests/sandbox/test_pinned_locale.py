"""Replays do not depend on the server's TZ and LANG: workers run with a pinned time zone and
locale, whatever the environment the server was started in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptc_emulator.api.settings import Settings
from tests.api.api_support import PTC_TOOLS, program_message
from tests.support import in_process

pytestmark = pytest.mark.anyio

CODE = (
    "const o = Intl.DateTimeFormat().resolvedOptions();"
    " text(JSON.stringify([new Date().getTimezoneOffset(), o.timeZone, o.locale, (1234.5).toLocaleString(),"
    " new Date(0).toString()]));"
)


async def test_a_server_started_in_another_time_zone_and_locale_runs_programs_in_utc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    async with in_process(Settings(data_dir=tmp_path, store="memory", pool_size=1, bundled_fixtures=False)) as client:
        reply = await client.responses.create(
            model="m",
            input=program_message(CODE),
            tools=PTC_TOOLS,  # type: ignore[arg-type]
        )
    offset, zone, locale, number, epoch = json.loads(reply.output_text)
    assert (offset, zone) == (0, "UTC")
    assert epoch == "Thu Jan 01 1970 00:00:00 GMT+0000 (Coordinated Universal Time)"
    assert (locale, number) == ("en-US", "1,234.5")
