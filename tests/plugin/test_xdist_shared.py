"""Under pytest-xdist every worker uses one server by default, the first worker's, and each test is
still in its own scope; the server stops by itself when the run ends. `--ptc-emulator-shared=no`
(or the ini option `ptc_emulator_shared = false`) gives each worker a server of its own."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.plugin.plugin_support import run

SUITE = """
import os

import pytest


@pytest.mark.parametrize("n", range(20))
def test_own_answer(ptc_emulator, n, tmp_path_factory):
    ptc_emulator.add_scenario(
        {"name": "answer", "match": {"input": "(?i)which answer"}, "turns": [{"message": f"answer {n}"}]}
    )
    client = ptc_emulator.client(max_retries=0)
    assert client.responses.create(model="m", input="Which answer is mine?").output_text == f"answer {n}"
    assert [e["scope"] for e in ptc_emulator.journal] == [ptc_emulator.scope]
    seen = tmp_path_factory.getbasetemp().parent / f"seen-{os.environ['PYTEST_XDIST_WORKER']}-{n}"
    seen.write_text(ptc_emulator.server_url)
"""


def test_workers_share_one_server(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_shared=SUITE)
    base = pytester.path / "basetemp"

    result = run(pytester, "-n", "2", f"--basetemp={base}")  # no option: the default

    result.assert_outcomes(passed=20)
    seen = {p.name.split("-")[1]: p.read_text() for p in base.glob("seen-*")}
    workers = {p.name.split("-")[1] for p in base.glob("seen-*")}
    urls = {p.read_text() for p in base.glob("seen-*")}
    assert workers == {"gw0", "gw1"} and len(seen) == 2  # both workers ran tests...
    [url] = urls  # ...on one server
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # it watches the run's controller, which has exited
        try:
            httpx.get(url.removesuffix("/v1") + "/_emulator/health", timeout=5)
        except httpx.TransportError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the shared server at {url} still answers after the run")


@pytest.mark.parametrize("opt_out", [["--ptc-emulator-shared=no"], ["-o", "ptc_emulator_shared=false"]])
def test_each_worker_has_its_own_server_when_asked(pytester: pytest.Pytester, opt_out: list[str]) -> None:
    pytester.makepyfile(test_shared=SUITE)
    base = pytester.path / "basetemp"

    result = run(pytester, "-n", "2", *opt_out, f"--basetemp={base}")

    result.assert_outcomes(passed=20)
    by_worker = {p.name.split("-")[1]: p.read_text() for p in base.glob("seen-*")}
    assert set(by_worker) == {"gw0", "gw1"} and len(set(by_worker.values())) == 2, by_worker
