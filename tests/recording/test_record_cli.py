"""`ptc-emulator serve --upstream URL --upstream-api-key-env NAME --record DIR`, as processes."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
import yaml

from ptc_emulator.api.cli import main
from ptc_emulator.testing.process import ServerProcess
from ptc_emulator.testing.server import PTCEmulator
from tests.recording.recording_support import chain_loop
from tests.recording.test_record_replay import PARCEL_QUESTION, PARCEL_TOOLS, PARCELS, parcels, recorded
from tests.support import validating_client

UPSTREAM_KEY = "sk-upstream-0123456789abcdef"
CLIENT_KEY = "sk-client-fedcba9876543210"


def sdk_for(server: ServerProcess) -> openai.OpenAI:
    """A client with the client's own key, every body validated by the SDK's models."""
    view = PTCEmulator(server.base_url, api_key=CLIENT_KEY)
    view.admin.close()  # only its client is used
    return validating_client(view, max_retries=0)


def test_record_with_the_cli_then_replay_with_the_upstream_stopped(tmp_path: Path) -> None:
    scenarios = tmp_path / "upstream-scenarios"
    scenarios.mkdir()
    (scenarios / "parcels.yaml").write_text(yaml.safe_dump(PARCELS), encoding="utf-8")
    cassettes = tmp_path / "cassettes"
    up = ServerProcess(tmp_path / "up", store="memory", api_key=UPSTREAM_KEY, args=("--fixtures", str(scenarios)))
    with up:
        args = ("--upstream", up.base_url, "--upstream-api-key-env", "THE_UPSTREAM_KEY", "--record", str(cassettes))
        rec = ServerProcess(
            tmp_path / "rec", store="memory", api_key=CLIENT_KEY, args=args, env={"THE_UPSTREAM_KEY": UPSTREAM_KEY}
        )
        with rec, sdk_for(rec) as sdk:
            live = chain_loop(sdk, PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
    assert live[-1].output_text == "3 parcels: P1 shipped p1; P2 shipped p2; P3 shipped p3."
    # The upstream requires its key: the recorder sent it in place of the client's.
    [text] = recorded(cassettes).values()
    assert UPSTREAM_KEY not in text and CLIENT_KEY not in text and "sk-" not in text
    assert UPSTREAM_KEY not in rec.log() and CLIENT_KEY not in rec.log()
    # Replay: the same directory, nothing upstream (the upstream process is stopped).
    rep = ServerProcess(tmp_path / "rep", store="memory", args=("--record", str(cassettes), "--record-mode", "none"))
    with rep, sdk_for(rep) as sdk:
        again = chain_loop(sdk, PARCEL_QUESTION, PARCEL_TOOLS, parcels("shipped"))
        assert again[-1].output_text == live[-1].output_text
        with pytest.raises(openai.BadRequestError, match="No scenario matches"):
            sdk.responses.create(model="m", input="Something never recorded.")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--upstream", "http://127.0.0.1:9/v1"], "--upstream needs --record DIR"),
        (["--upstream", "api.example/v1", "--record", "DIR"], "not an http:// or https:// base URL"),
        (["--record", "DIR"], "--record-mode new needs --upstream URL"),
        (["--record", "DIR", "--record-mode", "none"], "cassettes: no such directory"),
        (
            ["--upstream", "http://127.0.0.1:9/v1", "--record", "DIR", "--upstream-api-key-env", "PTC_NO_SUCH_VAR"]
            + ["--api-key", "sk-local"],
            "PTC_NO_SUCH_VAR: the variable is not set",
        ),
        (
            ["--upstream", "http://127.0.0.1:9/v1", "--record", "DIR", "--upstream-api-key-env", "HOME"],
            "must require a key of its own",
        ),
    ],
)
def test_settings_that_cannot_record_are_refused(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(tmp_path / "cassettes") if a == "DIR" else a for a in argv]
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--store", "memory", "--port", "0", *argv])
    assert exited.value.code == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--upstream-api-key-env", "--model-upstream-api-key-env"])
def test_a_key_no_header_can_carry_is_refused_at_startup(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: accepted, then every proxied request was a 500 (the HTTP client writes header values as ASCII)."""
    monkeypatch.setenv("PTC_ODD_KEY", 'sk-\u00e9"\\/\u00fc\U0001f600+0123456789abcdef')
    upstream = ["--upstream", "http://127.0.0.1:9/v1", "--record", str(tmp_path / "cassettes")]
    if option.startswith("--model"):
        upstream = ["--model-upstream", "http://127.0.0.1:9/v1"]
    argv = [*upstream, option, "PTC_ODD_KEY", "--allow-unguarded-upstream-key"]
    from ptc_emulator.api import cli

    class Started:  # the server is not run: before, it started (and served 500s)
        def __init__(self, config: object) -> None:
            pass

        def run(self, sockets: object) -> None:
            raise AssertionError("the server started with a key no header can carry")

    monkeypatch.setattr(cli, "_server_class", lambda: Started)
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--store", "memory", "--port", "0", *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"{option} PTC_ODD_KEY: the key holds a character an HTTP header cannot carry" in err
    assert "0123456789abcdef" not in err and len(err.strip().splitlines()) == 1, err
