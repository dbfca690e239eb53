"""`serve --store`: sqlite, memory or a postgresql:// URL (also from PTC_EMULATOR_STORE)."""

from __future__ import annotations

import pytest

from ptc_emulator.api import cli


def test_store_takes_a_postgresql_url_and_refuses_other_words() -> None:
    settings, _ = cli.parse(["serve", "--store", "postgresql://u:pw@127.0.0.1:5432/ptc"])
    assert settings.store == "postgresql://u:pw@127.0.0.1:5432/ptc"
    with pytest.raises(SystemExit):
        cli.parse(["serve", "--store", "mysql://127.0.0.1/ptc"])


def test_store_comes_from_the_environment_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cli.STORE_ENV, "postgresql://127.0.0.1/ptc")
    assert cli.parse(["serve"])[0].store == "postgresql://127.0.0.1/ptc"
    assert cli.parse(["serve", "--store", "memory"])[0].store == "memory"


def test_the_startup_line_shows_no_password() -> None:
    assert cli._shown_store("postgresql://u:pw@127.0.0.1:5432/ptc") == "postgresql://u:***@127.0.0.1:5432/ptc"
    assert cli._shown_store("postgresql://u@127.0.0.1/ptc") == "postgresql://u@127.0.0.1/ptc"
    assert cli._shown_store("sqlite") == "sqlite"
