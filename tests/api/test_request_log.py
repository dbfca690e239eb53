"""The request log: one line per request a person can read (method, path, scope, scenario or
"no match", route, status, error code and reason, ms), and `--log-format json` for CI."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import openai
import pytest

from ptc_emulator.testing.process import ServerProcess
from ptc_emulator.testing.server import PTCEmulator

GREET = {"name": "greet", "match": {"input": "(?i)hello"}, "turns": [{"message": "hi"}]}


def lines(caplog: pytest.LogCaptureFixture, scope: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "ptc_emulator.requests" and r.request["scope"] == scope]  # type: ignore[attr-defined]


@pytest.mark.ptc_strict(unmatched=False)  # it logs a request no scenario matches, on purpose
def test_one_readable_line_per_request(ptc_emulator: PTCEmulator, caplog: pytest.LogCaptureFixture) -> None:
    ptc_emulator.add_scenario(GREET)
    client = ptc_emulator.client(max_retries=0)
    with caplog.at_level(logging.INFO, logger="ptc_emulator.requests"):
        client.responses.create(model="gpt-test", input="hello")
        with pytest.raises(openai.BadRequestError):
            client.responses.create(model="gpt-test", input="goodbye")
        assert len(ptc_emulator.journal) == 2  # an admin request: no scenario

    served, refused, admin = lines(caplog, ptc_emulator.scope)[-3:]
    scoped = f"/scopes/{ptc_emulator.scope}/v1/responses"
    assert served.getMessage().startswith(
        f"POST {scoped} scope={ptc_emulator.scope} scenario=greet route=message -> 200 ("
    )
    assert served.getMessage().endswith(" ms)")
    assert refused.getMessage().startswith(
        f"POST {scoped} scope={ptc_emulator.scope} no match -> 400 no_scenario_matched: No scenario matches this "
        "request. Closest: 'greet' (input)"
    )
    fields = refused.request  # type: ignore[attr-defined]
    assert (fields["status"], fields["code"], fields["scenario"], fields["unmatched"]) == (
        400,
        "no_scenario_matched",
        None,
        True,
    )
    assert isinstance(fields["ms"], float)
    assert admin.getMessage().startswith(f"GET /_emulator/journal scope={ptc_emulator.scope} -> 200 (")


def test_the_cli_logs_json_lines(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data", store="memory", args=("--log-format", "json")) as server:
        with openai.OpenAI(base_url=server.root + "/scopes/ci-run/v1", api_key="sk-test", max_retries=0) as client:
            with pytest.raises(openai.BadRequestError):
                client.responses.create(model="gpt-test", input="hello")
        refused = httpx.get(server.root + "/v1/responses/resp_missing", timeout=30)
        assert refused.status_code == 404
        log = server.log()

    logged = [text for text in log.splitlines() if text.strip() and not text.startswith("ptc-emulator: ")]
    records = [json.loads(text) for text in logged]  # every line but the banner is JSON, uvicorn's too
    requests = [r for r in records if r["logger"] == "ptc_emulator.requests"]
    created = next(r for r in requests if r["path"] == "/scopes/ci-run/v1/responses")
    assert created["scope"] == "ci-run" and created["status"] == 400 and created["code"] == "no_scenario_matched"
    assert created["unmatched"] is True and created["reason"].startswith("No scenario matches this request")
    missing = next(r for r in requests if r["path"] == "/v1/responses/resp_missing")
    assert (missing["scope"], missing["status"], missing["method"]) == (None, 404, "GET")
