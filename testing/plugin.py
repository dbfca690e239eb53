"""A pytest plugin: the `ptc_emulator` fixture. Installing the package registers it.

    def test_my_agent(ptc_emulator):
        ptc_emulator.add_scenario({"match": {"input": "hello"}, "turns": [{"message": "hi!"}]})
        client = ptc_emulator.client()                 # an openai.OpenAI aimed at the emulator
        assert client.responses.create(model="m", input="hello").output_text == "hi!"
        assert ptc_emulator.journal[-1]["figures"]["model_turns"] == 1

One server per test session (per xdist worker, or one for all workers with
by default under pytest-xdist: `testing/shared.py`) on a real 127.0.0.1 port; each test gets its own
scope, so its scenarios and journal are its own and vanish when it ends. The test's `base_url` is
scoped (`/scopes/<scope>/v1`): `ptc_emulator.env` / `use_env(monkeypatch)` hand it to code that
builds its own client.

Options: `--ptc-emulator-url URL` uses a server that is already running (its `/v1` URL) instead
of starting one, and `--ptc-emulator-api-key KEY` (or PTC_EMULATOR_API_KEY) is the key for a
server started with `--api-key`; the ini option `ptc_emulator_fixtures` adds scenario
directories (relative to the rootdir). Override the session-scoped `ptc_emulator_settings`
fixture to change the settings of the server the plugin starts.

Record and replay (docs/record-replay.md): `--ptc-emulator-record-mode new|all|none` with
`--ptc-emulator-upstream URL` (and `--ptc-emulator-upstream-api-key-env NAME`) records the
conversations of the run into the ini option `ptc_emulator_record_dir` (or
`--ptc-emulator-record DIR`; by default `ptc-recordings/` under the rootdir); without an
upstream, mode `none` (the default) replays them. `@pytest.mark.ptc_record` moves a test's
recordings into a cassette of its own (`testing/cassettes.py`), through the scrubber of the
`ptc_emulator_scrub` fixture (by default the ini option `ptc_emulator_scrub`, a `module:function`).

pytest loads this module in every run of every project the package is installed in, so it
imports nothing but pytest, the standard library and `ptc_emulator.names` (constants, which imports
nothing): the emulator itself is imported when a
test first asks for the fixture, and a problem there fails that test, not the whole run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import secrets
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from ptc_emulator.names import API_KEY_ENV

__all__: list[str] = []

# A failed test's trace files (HTML and JSON journal): testing/traces.py.
pytest_plugins = ["ptc_emulator.testing.traces"]

_api_key = pytest.StashKey[str]()
_inspector = pytest.StashKey[str]()
_failed = pytest.StashKey[bool]()
_staging = pytest.StashKey[Path]()
_unpooled = pytest.StashKey[bool]()
_transport = pytest.StashKey[Any]()
_own_server = pytest.StashKey[Any]()

DEFAULT_RECORD_DIR = "ptc-recordings"
"""Where recordings go and are replayed from when no directory is given (under the rootdir): a
folder of its own name, as a project's own `recordings/` may hold anything."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ptc-emulator")
    group.addoption(
        "--ptc-emulator-url",
        default=None,
        help="use an emulator that is already running at this /v1 URL instead of starting one",
    )
    group.addoption(
        "--ptc-emulator-api-key",
        default=None,
        help=f"the API key of the emulator at --ptc-emulator-url, if it requires one (or {API_KEY_ENV})",
    )
    group.addoption(
        "--ptc-emulator-upstream",
        default=None,
        metavar="URL",
        help="record: proxy the emulator's /v1/responses to this upstream base URL",
    )
    group.addoption(
        "--ptc-emulator-upstream-api-key-env",
        default=None,
        metavar="NAME",
        help="the environment variable holding the upstream's API key",
    )
    group.addoption(
        "--ptc-emulator-record",
        default=None,
        metavar="DIR",
        help="where recordings are written and replayed from (default: the ini option ptc_emulator_record_dir, "
        f"else {DEFAULT_RECORD_DIR}/ under the rootdir)",
    )
    group.addoption(
        "--ptc-emulator-record-mode",
        choices=("new", "all", "none"),
        default=None,
        help="new: record what nothing matches; all: re-record everything; none: replay only "
        "(default: new with an upstream, else none)",
    )
    group.addoption(
        "--ptc-emulator-demo",
        action="store_true",
        default=None,
        help="the plugin's server also serves the bundled demo scenarios (or the ini option ptc_emulator_demo)",
    )
    group.addoption(
        "--ptc-emulator-strict",
        nargs="?",
        const="yes",
        choices=("yes", "no"),
        default=None,
        help="yes (the default): a test using the fixture fails at teardown if a request matched no scenario or "
        "one of its scenarios answered none; no: it does not (or the ini option ptc_emulator_strict; "
        "@pytest.mark.ptc_strict(False) on a test or module wins over both)",
    )
    group.addoption(
        "--ptc-emulator-shared",
        nargs="?",
        const="yes",
        choices=("yes", "no"),
        default=None,
        help="under pytest-xdist, every worker uses one server, started by the first (the default); "
        "'no': a server per worker (or the ini option ptc_emulator_shared)",
    )
    parser.addini("ptc_emulator_shared", type="bool", default=True, help="see --ptc-emulator-shared")
    parser.addini(
        "ptc_emulator_cassette_dir",
        default="cassettes",
        help="@pytest.mark.ptc_record: the cassettes' folder, beside each test file",
    )
    parser.addini(
        "ptc_emulator_scrub",
        default="",
        help="@pytest.mark.ptc_record: a function (module:name) that takes each text a recording holds and "
        "returns what the cassette keeps (or override the ptc_emulator_scrub fixture)",
    )
    parser.addini("ptc_emulator_strict", type="bool", default=True, help="see --ptc-emulator-strict")
    parser.addini("ptc_emulator_demo", type="bool", default=False, help="serve the bundled demo scenarios too")
    parser.addini(
        "ptc_emulator_record_dir", type="paths", default=[], help="recorded scenarios (see --ptc-emulator-record)"
    )
    parser.addini(
        "ptc_emulator_fixtures",
        type="paths",
        default=[],
        help="scenario directories the plugin's emulator loads (relative to the rootdir)",
    )


def _resolve(config: pytest.Config, path: Path) -> Path:
    return path if path.is_absolute() else Path(config.rootpath) / path


@pytest.fixture(scope="session")
def ptc_emulator_settings(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Settings of the server the plugin starts; override this fixture to change them.

    Under pytest-xdist every worker starts a server, so each gets its share of the CPUs for its
    sandbox workers rather than one per CPU."""
    from ptc_emulator.api.settings import Settings

    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    share = max(1, (os.cpu_count() or 1) // (int(workers) if workers.isdigit() and int(workers) > 0 else 1))
    fixtures = tuple(Path(p) for p in request.config.getini("ptc_emulator_fixtures"))
    return Settings(
        data_dir=tmp_path_factory.mktemp("ptc-emulator"),
        store="sqlite",
        pool_size=share,
        fixtures=fixtures,
        # The demos answer only when asked: a test must not pass on a demo's answer by accident.
        bundled_fixtures=bool(
            request.config.getoption("--ptc-emulator-demo") or request.config.getini("ptc_emulator_demo")
        ),
        **_record_settings(request.config),
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "ptc_strict(on=True, *, unmatched=True, unused=True): strict mode for this test (on by default): the "
        "ptc_emulator fixture fails it at teardown if a request matched no scenario (unmatched) or a "
        "scenario the test added answered none (unused); ptc_strict(False) turns both checks off",
    )
    config.addinivalue_line(
        "markers",
        "ptc_record(mode='once'): record this test's conversations against the upstream into a cassette "
        "named after the test and replay them from it (modes: once, all, none)",
    )
    _record_settings(config)  # refuse record options that cannot work before any test runs


def _record_settings(config: pytest.Config) -> dict[str, Any]:
    """The Settings fields of the record options (nothing when none is given)."""
    upstream = config.getoption("--ptc-emulator-upstream")
    given = config.getoption("--ptc-emulator-record")
    configured = config.getini("ptc_emulator_record_dir")
    directory = Path(given).resolve() if given else (Path(configured[0]) if configured else None)
    default = Path(config.rootpath) / DEFAULT_RECORD_DIR
    if directory is None and (upstream or default.is_dir()):
        directory = default  # recorded into when recording, replayed from when it is there
    mode = config.getoption("--ptc-emulator-record-mode") or ("new" if upstream else "none")
    if mode != "none" and not upstream:
        raise pytest.UsageError(f"--ptc-emulator-record-mode {mode} needs --ptc-emulator-upstream URL")
    if directory is None:
        return {}
    return {
        "upstream": upstream,
        "upstream_api_key_env": config.getoption("--ptc-emulator-upstream-api-key-env"),
        "record_dir": directory,
        "record_mode": mode,
    }


@pytest.fixture(scope="session")
def ptc_emulator_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """The base URL (`.../v1`) of the session's emulator."""
    from ptc_emulator.testing.server import API_KEY

    url = request.config.getoption("--ptc-emulator-url")
    if url:
        key = request.config.getoption("--ptc-emulator-api-key") or os.environ.get(API_KEY_ENV)
        request.config.stash[_api_key] = key or API_KEY
        yield str(url)
        return
    with _collector_paused():
        url, server, made = _start(request)
    if server is None:
        yield url  # the run's shared server: it stops when the run does
        return
    # Held out of the collector's sight until it stops (`_collector_paused`); nothing is lost.
    gc.freeze()
    _freeze_when_warm(server)  # and what the server loads after it is ready, once it is done
    request.config.stash[_own_server] = server  # its admin API is called in process (`_transports`)
    try:
        yield server.base_url
    finally:
        server.stop()
        gc.unfreeze()
        if getattr(request.config, "workerinput", None) is None:
            _remove_if_empty(made)  # (under xdist another worker's server may still record into it)


def _start(request: pytest.FixtureRequest) -> tuple[str, Any, Path | None]:
    """The session's server started: (the run's shared server's URL, None, None) under
    pytest-xdist with a shared server, else ("", the `EmulatorServer` started here, the record
    folder it made if any)."""
    from ptc_emulator.testing.server import API_KEY, EmulatorServer

    settings = request.getfixturevalue("ptc_emulator_settings")
    # Relative paths in the settings mean the project's, wherever pytest was started from.
    settings = dataclasses.replace(
        settings,
        fixtures=tuple(_resolve(request.config, Path(p)) for p in settings.fixtures),
        data_dir=_resolve(request.config, Path(settings.data_dir)),
        record_dir=_resolve(request.config, Path(settings.record_dir)) if settings.record_dir else None,
    )
    if settings.upstream_api_key_env and settings.api_key is None:
        # A server holding the upstream key requires one of its own: a fresh one, known to this session's clients.
        settings = dataclasses.replace(settings, api_key="sk-" + secrets.token_hex(16))
    request.config.stash[_api_key] = getattr(settings, "api_key", None) or API_KEY
    made = None
    if settings.recording:
        request.config.stash[_staging] = Path(settings.record_dir)
        made = None if Path(settings.record_dir).exists() else Path(settings.record_dir)
    chosen = request.config.getoption("--ptc-emulator-shared")
    shared = chosen == "yes" if chosen is not None else bool(request.config.getini("ptc_emulator_shared"))
    # This process is an xdist worker when its config has `workerinput` (the environment variables
    # xdist sets are inherited by any pytest a test starts, which is no worker of this run).
    workerinput = getattr(request.config, "workerinput", None)
    run = str(workerinput.get("testrunuid") or "") if isinstance(workerinput, dict) else ""
    if shared and run:
        from ptc_emulator.testing.shared import shared_url

        directory = request.getfixturevalue("tmp_path_factory").getbasetemp().parent / f"ptc-emulator-{run[:16]}"
        return shared_url(directory, settings, controller=os.getppid()), None, None
    return "", EmulatorServer(settings).start(), made


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The server's start without the garbage collector: importing and making the app makes some
    hundred thousand objects (modules, models, schemas, the tokenizer) that live as long as the
    session, and the collector's full passes walked them over and over while they were made
    (about a tenth of the start's CPU). Once the server has started, the fixture freezes every
    object of the process (`gc.freeze()`), so that the tests' collections walk only what they
    made, not the server's code; it unfreezes them when the server stops, for pytest's last
    collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _freeze_when_warm(server: Any) -> None:
    """The server is ready before its tokenizer has loaded and its checkers' modules are imported
    (`api/app.py`): what they make (some tens of thousands of objects, kept all session) is frozen
    too once they are done, as the rest of the server's start is (`_collector_paused`)."""
    warming = server.app.state.emulator.warming
    if warming is not None and server.loop is not None:
        server.loop.call_soon_threadsafe(warming.add_done_callback, lambda _: gc.freeze())


def _remove_if_empty(directory: Path | None) -> None:
    """The record folder this session made, when every recording left it for a cassette."""
    if directory is not None and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()


@pytest.fixture
def ptc_emulator(request: pytest.FixtureRequest, ptc_emulator_server: str) -> Iterator[Any]:
    """The emulator, scoped to this test (a `ptc_emulator.testing.server.PTCEmulator`): `base_url`,
    `env`, `use_env(monkeypatch)`, `client()`, `async_client()`, `add_scenario(...)`, `scenarios`,
    `remove_scenario(...)`, `journal`, `entries`, `requests(...)`, `calls(...)`,
    `assert_called(name, times, args=...)`, `assert_requests(times, instructions=...)`,
    `assert_all_scenarios_used()`, `assert_no_unmatched()`, `clear_journal()`.

    Strict mode, on by default: a test that passed fails at teardown if a request matched no
    scenario or a scenario it added answered none; `@pytest.mark.ptc_strict(False)` (or
    `unmatched=False` / `unused=False`), `--ptc-emulator-strict=no` or the ini option
    `ptc_emulator_strict = false` turn it off."""
    from ptc_emulator.testing.server import API_KEY, PTCEmulator

    _unpool_agents_sdk(request.config)
    key, transports = request.config.stash.get(_api_key, API_KEY), _transports(request.config, ptc_emulator_server)
    emulator = PTCEmulator(ptc_emulator_server, api_key=key, transports=transports)
    request.node.stash[_inspector] = emulator.inspector_url
    cassette = _cassette(request)
    if cassette is not None:
        _replay_cassette(cassette, emulator)
    ended = False
    try:
        yield emulator
        if cassette is not None and not request.node.stash.get(_failed, False):
            cassette.finish()
        checks = _strict_checks(request)
        if not request.node.stash.get(_failed, False):
            # One call: the checks pass and the scope is forgotten, or nothing changes and the
            # journal is read for the message.
            ended = emulator.end(**checks)
        if not ended and any(checks.values()) and not request.node.stash.get(_failed, False):
            problem = emulator.strict_failure(**checks)
            if problem is not None:
                # Failing at teardown: the trace is written now, while the journal is there.
                request.node.stash[_failed] = True
                from ptc_emulator.testing.traces import keep_trace

                keep_trace(request.node, emulator)
                # The message alone: the plugin's own frames say nothing about the test.
                summary, details = problem.split("\n", 1)
                pytest.fail(f"ptc-emulator strict mode: {summary}\n{_STRICT_HINT}\n{details}", pytrace=False)
    finally:
        if request.node.stash.get(_failed, False):
            # A failed test's journal stays for the inspector link in its report; its scenarios go.
            for scenario in emulator.scenarios:
                if scenario.get("scope") == emulator.scope:
                    emulator.remove_scenario(str(scenario["name"]))
        elif not ended:
            emulator.reset()
        emulator.close()
        if transports is not None:
            transports.settle()


def _transports(config: pytest.Config, url: str) -> Any:
    """The session's connections to a plain-HTTP server, the admin API's and the SDK clients',
    kept open from test to test (`SessionTransports`), closed when the session ends; None for an
    HTTPS server (`--ptc-emulator-url`). The admin API of the server this session started is
    called in process (`InProcessTransport`), and so is the app by the SDK clients of
    `ptc_emulator.client()` (no socket; a client built from `base_url` still uses it)."""
    from ptc_emulator.testing.server import SessionTransports

    if not url.startswith("http://"):
        return None
    transports = config.stash.get(_transport, None)
    if transports is None:
        transports = config.stash[_transport] = SessionTransports(config.stash.get(_own_server, None))
        config.add_cleanup(transports.close)
    return transports


def _unpool_agents_sdk(config: pytest.Config) -> None:
    """The Agents SDK's shared HTTP client made one that keeps no idle connection, now or when
    the SDK is imported: several async tests in a session run each on a loop of its own
    (`testing/agents_sdk.py`). Undone when the session ends."""
    from ptc_emulator.testing.agents_sdk import restore_shared_clients, unpool_shared_clients

    unpool_shared_clients()
    if not config.stash.get(_unpooled, False):
        config.stash[_unpooled] = True
        config.add_cleanup(restore_shared_clients)


@pytest.fixture
def ptc_emulator_scrub(request: pytest.FixtureRequest) -> Any:
    """What `@pytest.mark.ptc_record` applies to each text of a recording before the cassette keeps
    it (`Callable[[str], str]`, or None to keep everything): the function the ini option
    `ptc_emulator_scrub` names (`package.module:function`). Override this fixture in a
    `conftest.py` to return one of your own."""
    named = str(request.config.getini("ptc_emulator_scrub")).strip()
    if not named:
        return None
    import importlib

    module, _, attribute = named.partition(":")
    try:
        found = getattr(importlib.import_module(module), attribute) if attribute else None
    except (ImportError, AttributeError) as error:
        raise pytest.UsageError(f"ptc_emulator_scrub = {named}: {error}") from error
    if not callable(found):
        raise pytest.UsageError(f"ptc_emulator_scrub = {named}: not a function (module:function)")
    return found


def _replay_cassette(cassette: Any, emulator: Any) -> None:
    """Add the cassette's recordings to the test's scope. A cassette that cannot be replayed fails
    the test with one line naming the file and what is wrong (no traceback of the plugin)."""
    from ptc_emulator.testing.cassettes import CassetteError

    problem = None
    try:
        for index, scenario in enumerate(cassette.start()):
            try:
                emulator.add_scenario(scenario)
            except ValueError as e:
                problem = str(cassette.refused(index, scenario, str(e)))
                break
    except CassetteError as e:
        problem = str(e)
    if problem is not None:  # failed out here, so the report shows no exception chain
        pytest.fail(problem, pytrace=False)


def _cassette(request: pytest.FixtureRequest) -> Any:
    """The test's cassette (`testing/cassettes.py`) when it is marked `ptc_record`, else None."""
    marker = request.node.get_closest_marker("ptc_record")
    if marker is None:
        return None
    from ptc_emulator.testing.cassettes import Cassette

    folder = str(request.config.getini("ptc_emulator_cassette_dir"))
    mode = str(marker.kwargs.get("mode", "once"))
    staging = request.config.stash.get(_staging, None)
    scrub = request.getfixturevalue("ptc_emulator_scrub")
    return Cassette.for_test(Path(str(request.node.path)), request.node.name, folder, mode, staging, scrub)


_STRICT_HINT = (
    "(A test that means to leave them: @pytest.mark.ptc_strict(False), or ptc_strict(unmatched=False) / "
    "ptc_strict(unused=False); for a whole run: ptc_emulator_strict = false.)"
)


def _strict_checks(request: pytest.FixtureRequest) -> dict[str, bool]:
    """Which strict checks run for this test. On or off: the closest `ptc_strict` marker's
    `on` (a bare marker is on), else `--ptc-emulator-strict`, else the ini option (on by
    default); the marker's `unmatched=False` / `unused=False` then leave out one check."""
    chosen = request.config.getoption("--ptc-emulator-strict")
    on = chosen == "yes" if chosen is not None else bool(request.config.getini("ptc_emulator_strict"))
    marker = request.node.get_closest_marker("ptc_strict")
    if marker is None:
        return {"unmatched": on, "unused": on}
    if len(marker.args) > 1 or set(marker.kwargs) - {"on", "unmatched", "unused"}:
        raise TypeError(f"ptc_strict(on=True, *, unmatched=True, unused=True), not {marker}")
    if marker.args or "on" in marker.kwargs:
        on = bool(marker.args[0] if marker.args else marker.kwargs["on"])
    elif not marker.kwargs:
        on = True  # @pytest.mark.ptc_strict
    return {
        "unmatched": on and bool(marker.kwargs.get("unmatched", True)),
        "unused": on and bool(marker.kwargs.get("unused", True)),
    }


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test that used the emulator gets the inspector's link to its scope in its report."""
    report: pytest.TestReport = yield
    link = item.stash.get(_inspector, None)
    if link is not None and report.failed:
        item.stash[_failed] = True
        report.sections.append(
            ("ptc-emulator", f"inspector: {link}\n(this test's requests stay in the journal while the server runs)")
        )
    return report
