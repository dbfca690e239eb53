"""`@pytest.mark.ptc_record`: a test's conversations recorded against an upstream into a cassette
named after the test, replayed from it with the upstream gone, and (mode `once`) only what is
missing recorded later."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.model.scripted import scenario as scenario_module
from ptc_emulator.emulator.model.scripted.recording import readable_yaml
from ptc_emulator.testing.cassettes import MAX_CASSETTE_BYTES, MAX_CASSETTE_VALUES, Cassette, CassetteError
from ptc_emulator.testing.server import EmulatorServer
from tests.plugin.plugin_support import run

UPSTREAM = [
    {"name": "eta", "match": {"input": "(?i)when does (?P<p>P\\d) arrive"}, "turns": [{"message": "{{ p }}: Friday."}]},
    {"name": "where", "match": {"input": "(?i)where is (?P<p>P\\d)"}, "turns": [{"message": "{{ p }}: in Oslo."}]},
]

ONE = """
import pytest


@pytest.mark.ptc_record
def test_parcels(ptc_emulator):
    client = ptc_emulator.client(max_retries=0)
    assert client.responses.create(model="gpt-test", input="When does P1 arrive?").output_text == "P1: Friday."
"""
TWO = (
    ONE
    + """    assert client.responses.create(model="gpt-test", input="Where is P1?").output_text == "P1: in Oslo."
"""
)


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[EmulatorServer]:
    scenarios = tmp_path / "upstream-scenarios"
    scenarios.mkdir()
    for scenario in UPSTREAM:
        (scenarios / f"{scenario['name']}.yaml").write_text(yaml.safe_dump(scenario), encoding="utf-8")
    server = EmulatorServer(Settings(data_dir=tmp_path / "up", store="memory", pool_size=1, fixtures=(scenarios,)))
    yield server.start()
    server.stop()


def upstream_requests(server: EmulatorServer) -> int:
    return len(httpx.get(server.base_url.removesuffix("/v1") + "/_emulator/journal", timeout=30).json()["data"])


@pytest.mark.timeout(460)  # 4 inner pytest runs of at most 100 s each (`plugin_support.run`)
def test_record_then_replay_then_record_only_what_is_missing(
    pytester: pytest.Pytester, upstream: EmulatorServer
) -> None:
    staging = pytester.path / "staging"
    staging.mkdir()
    recording = (f"--ptc-emulator-upstream={upstream.base_url}", f"--ptc-emulator-record={staging}")
    cassette = pytester.path / "cassettes" / "test_parcels" / "test_parcels.yaml"
    pytester.makepyfile(test_parcels=ONE)

    run(pytester, *recording).assert_outcomes(passed=1)  # recorded against the upstream

    assert upstream_requests(upstream) == 1
    [first] = yaml.safe_load(cassette.read_text(encoding="utf-8"))["scenarios"]
    assert first["turns"] == [{"message": "P1: Friday."}] and "When does P1 arrive" in first["match"]["input"]
    assert list(staging.iterdir()) == []  # moved into the cassette

    run(pytester).assert_outcomes(passed=1)  # replayed: no upstream at all

    pytester.makepyfile(test_parcels=TWO)
    run(pytester, *recording).assert_outcomes(passed=1)  # once: the first from the cassette, the second recorded

    assert upstream_requests(upstream) == 2
    names = [s["name"] for s in yaml.safe_load(cassette.read_text(encoding="utf-8"))["scenarios"]]
    assert len(names) == 2 and names[0] == first["name"]
    run(pytester).assert_outcomes(passed=1)  # both replay offline


def test_a_conversation_the_cassette_lacks_is_a_400_without_an_upstream(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_parcels=ONE)

    result = run(pytester)

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*400 - No scenario matches this request*"])


# ---- the default record folder, the readable format, the scrubber ------------------------------------

PARCELS = {
    "name": "parcels",
    "match": {"input": "(?i)where are my parcels\\? I am (?P<email>\\S+@\\S+)\\.", "tools": ["get_parcel"]},
    "turns": [
        {
            "reasoning": "Look the parcels up one at a time.",
            "program": (
                "const seen = [];\n"
                'for (const id of ["P1", "P2"]) {\n'
                "  const parcel = await tools.get_parcel({ id });\n"
                "  seen.push(`${id} ${parcel.status}`);\n"
                "}\n"
                "text(JSON.stringify({ count: seen.length, summary: seen.join('; ') }));\n"
            ),
        },
        {"message": "{{ data.count }} parcels for {{ email }}:\n{{ data.summary }}."},
    ],
}
GREETING = {"name": "greeting", "match": {"input": "(?i)^hello$"}, "turns": [{"message": "Hi there."}]}

AGENT = """
import json

import pytest

TOOLS = [{"type": "function", "name": "get_parcel", "allowed_callers": ["programmatic"]},
         {"type": "programmatic_tool_calling"}]


def ask(ptc_emulator, question):
    client = ptc_emulator.client(max_retries=0)
    response = client.responses.create(model="m", input=question, tools=TOOLS)
    while calls := [item for item in response.output if item.type == "function_call"]:
        outputs = [{"type": "function_call_output", "call_id": call.call_id, "caller": call.caller.model_dump(),
                    "output": json.dumps({"status": "at the depot"})} for call in calls]
        response = client.responses.create(model="m", input=outputs, previous_response_id=response.id, tools=TOOLS)
    return response.output_text


@pytest.mark.ptc_record
def test_parcels(ptc_emulator):
    answer = ask(ptc_emulator, "Where are my parcels? I am bob@example.com.")
    assert answer.startswith("2 parcels for ") and answer.endswith(":\\nP1 at the depot; P2 at the depot.")
"""
UNMARKED = """

def test_greeting(ptc_emulator):
    assert ptc_emulator.client(max_retries=0).responses.create(model="m", input="hello").output_text == "Hi there."
"""
SCRUBBER = """
import re


def scrub(text):
    return re.sub(r"[\\w.]+@[\\w.]+\\w", "<email>", text)
"""


@pytest.fixture
def parcel_upstream(tmp_path: Path) -> Iterator[EmulatorServer]:
    scenarios = tmp_path / "upstream-scenarios"
    scenarios.mkdir()
    for scenario in (PARCELS, GREETING):
        (scenarios / f"{scenario['name']}.yaml").write_text(yaml.safe_dump(scenario), encoding="utf-8")
    server = EmulatorServer(Settings(data_dir=tmp_path / "up", store="memory", pool_size=1, fixtures=(scenarios,)))
    yield server.start()
    server.stop()


@pytest.mark.timeout(260)  # 2 inner pytest runs of at most 100 s each (`plugin_support.run`)
def test_a_cassette_is_written_as_record_writes_with_a_scrubber_and_the_default_folder(
    pytester: pytest.Pytester, parcel_upstream: EmulatorServer
) -> None:
    pytester.makepyfile(test_parcels=AGENT + UNMARKED, scrubber=SCRUBBER)
    pytester.makeini("[pytest]\nptc_emulator_scrub = scrubber:scrub\n")

    # No record directory given: ptc-recordings/ under the rootdir.
    run(pytester, f"--ptc-emulator-upstream={parcel_upstream.base_url}").assert_outcomes(passed=2)

    [greeting] = (pytester.path / "ptc-recordings").glob("*.yaml")  # the unmarked test's recording stays there
    assert yaml.safe_load(greeting.read_text(encoding="utf-8"))["turns"] == [{"message": "Hi there."}]
    cassette = pytester.path / "cassettes" / "test_parcels" / "test_parcels.yaml"
    text = cassette.read_text(encoding="utf-8")
    [scenario] = yaml.safe_load(text)["scenarios"]
    # The format of a --record file: the program and the multi-line message as block scalars.
    assert text.split("\n", 1)[1] == readable_yaml({"scenarios": [scenario]})
    assert "        program: |\n          const seen = [];\n          for (const id of" in text
    assert "      - message: |-\n          {{ data.count }} parcels for <email>:\n          {{ data.summary }}." in text
    # The scrubber saw the user message and the model's: the address is nowhere in the file.
    assert "bob" not in text and "example" not in text
    assert scenario["match"]["input"] == "^Where are my parcels\\? I am .+?$"
    assert scenario["name"].startswith("recorded__where_are_my_parcels_i_am__")  # named after the scrubbed match
    assert list(scenario) == ["name", "description", "priority", "match", "turns"]

    # Offline, from the cassette and the default folder: the test's own message still matches.
    run(pytester, "-v").assert_outcomes(passed=2)


def documented_scrub_fixture() -> str:
    """docs/record-replay.md's `ptc_emulator_scrub` fixture, as a conftest.py."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "record-replay.md").read_text(encoding="utf-8")
    [block] = [b for b in re.findall(r"^```python\n(.*?)^```$", doc, flags=re.S | re.M) if "ptc_emulator_scrub" in b]
    return block


@pytest.mark.timeout(260)  # 2 inner pytest runs of at most 100 s each (`plugin_support.run`)
def test_the_scrub_fixture_and_a_record_folder_left_empty(
    pytester: pytest.Pytester, parcel_upstream: EmulatorServer
) -> None:
    pytester.makepyfile(test_parcels=AGENT)
    pytester.makeconftest(documented_scrub_fixture())

    run(pytester, f"--ptc-emulator-upstream={parcel_upstream.base_url}").assert_outcomes(passed=1)

    text = (pytester.path / "cassettes" / "test_parcels" / "test_parcels.yaml").read_text(encoding="utf-8")
    assert "parcels for <email>:" in text and "bob@" not in text
    assert not (pytester.path / "ptc-recordings").exists()  # it held nothing once the cassette took the recording
    run(pytester).assert_outcomes(passed=1)


HOSTILE_TEST = """
import pytest


@pytest.mark.ptc_record
@pytest.mark.ptc_strict(False)
def test_parcels(ptc_emulator):
    pass
"""

LAUGHS = (
    "".join(
        f"{name}: &{name} [{', '.join([f'*{before}'] * 10) if before else ', '.join(['x'] * 10)}]\n"
        for before, name in zip(["", "a", "b", "c", "d", "e", "f"], "abcdefg", strict=True)
    )
    + "scenarios: [{name: laughs, turns: [{message: hi}], match: {metadata: {k: *g}}}]\n"
)
"""A cassette of a few hundred bytes whose aliases expand to 10**7 strings (each level more is
ten times the memory: kept small so the old code's failure stays cheap)."""


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"scenarios: [: bad", "the file is not valid YAML: while parsing"),
        (b"scenarios: [\xff\xfe]", "the file is not UTF-8 text (at byte 12)"),
        (b"scenarios: [abc, 5]", "the recording at scenarios.0 is not a mapping"),
        (b"scenarios: {a: 1}", "a cassette is a mapping with a `scenarios` list"),
        # Two recordings of one name: the later was kept silently, the earlier never replayed.
        (
            b"scenarios: [{name: a, turns: [{message: one}]}, {name: a, turns: [{message: two}]}]",
            "the recording at scenarios.1 is named 'a', as the one at scenarios.0 is: names are unique",
        ),
        (
            b"scenarios: [{name: a, turns: [{mesage: hi}]}]",
            "the recording at scenarios.0 ('a') is refused: Invalid scenario: scenario: turns.0.mesage",
        ),
        (LAUGHS.encode(), "aliases (*name) are not supported"),
        # A merge key beside the key it gives again: one of the two names was kept silently.
        (
            b"scenarios: [{name: m, <<: {name: z}, turns: [{message: hi}]}]",
            "merge keys (<<) are not supported",
        ),
        # Past the bound, refused before any of it is read (a sparse file: no bytes are written).
        (MAX_CASSETTE_BYTES + 1, f"the file is too large to replay: larger than {MAX_CASSETTE_BYTES} bytes"),
        # Each of these was a traceback of the plugin before (RecursionError, ValueError, and
        # TypeError: Object of type date/bytes/set is not JSON serializable), or a line naming
        # JSON's own encoder ("Out of range float values are not JSON compliant").
        (b"scenarios: " + b"[" * 3000 + b"]" * 3000, "the file is not valid YAML: nested too deep"),
        # Short values within the size bound: 1 MiB of them took 23 s and 400 MB to build, linear.
        (
            b"scenarios: [[" + b"a," * MAX_CASSETTE_VALUES + b"a]]",
            f"the file holds more than {MAX_CASSETTE_VALUES} YAML values",
        ),
        (b"scenarios: [{name: a, priority: 1" + b"0" * 5000 + b"}]", "an integer of more than 4300 digits"),
        (b"scenarios: [{name: a, match: {input: 2001-12-14}, turns: [{message: hi}]}]", "a date at match.input"),
        (
            b"scenarios: [{name: a, match: {input: !!binary aGk=}, turns: [{message: hi}]}]",
            "binary values (!!binary) are not supported",
        ),
        (b"scenarios: [{name: a, description: !!set {a}, turns: [{message: hi}]}]", "a set (!!set) at description"),
        (
            b"scenarios: [{name: a, turns: [{message: hi, fault: {latency_ms: .inf}}]}]",
            "NaN or an infinity at turns.0.fault",
        ),
        # An empty answer replayed as a completed response with nothing in it: a test passing on no answer.
        (
            b"scenarios: [{name: a, turns: [{message: ''}]}]",
            "the recording at scenarios.0 has an empty message at turns.0, which would replay as an answer",
        ),
        (
            b"scenarios: [{name: a, turns: [{message: hi}]}, {name: b, turns: [{program: '1'}, {refusal: ''}]}]",
            "the recording at scenarios.1 has an empty refusal at turns.1",
        ),
        # A template of constants that renders empty is as empty (before, each replayed as completed with '').
        (b"scenarios: [{name: a, turns: [{message: \"{{ '' }}\"}]}]", "has an empty message at turns.0"),
        (b"scenarios: [{name: a, turns: [{message: '{# nothing #}'}]}]", "has an empty message at turns.0"),
        (b"scenarios: [{name: a, turns: [{refusal: \"{{ '' }}\"}]}]", "has an empty refusal at turns.0"),
    ],
    ids=[
        "yaml",
        "utf8",
        "entry",
        "shape",
        "twice",
        "scenario",
        "laughs",
        "merge",
        "too_large",
        "deep",
        "values",
        "bigint",
        "date",
        "binary",
        "set",
        "inf",
        "empty-message",
        "empty-refusal",
        "template-empty",
        "template-comment",
        "template-empty-refusal",
    ],
)
def test_a_hostile_cassette_fails_its_test_naming_the_file_without_a_traceback(
    pytester: pytest.Pytester, content: bytes | int, problem: str
) -> None:
    """A cassette is replayed as it is found: a file that is not a cassette fails the test that
    replays it with one line naming the file and what is wrong, not a traceback of the plugin.
    Before, each of these raised a bare parser or `dict()` error naming no file, and the aliases
    (as YAML allows and the scenario loader refuses) were expanded: 10**8 strings took half a
    minute and 1.4 GB before the add was refused for its size, and each level more is ten times that."""
    pytester.makepyfile(test_parcels=HOSTILE_TEST)
    cassette = pytester.path / "cassettes" / "test_parcels" / "test_parcels.yaml"
    cassette.parent.mkdir(parents=True)
    if isinstance(content, int):  # a file of that many bytes, all of them a hole
        with cassette.open("wb") as file:
            file.truncate(content)
    else:
        cassette.write_bytes(content)
    result = run(pytester)
    result.assert_outcomes(errors=1)
    said = f"{cassette}: this cassette cannot be replayed: "
    assert any(line.startswith(said) and problem in line for line in result.outlines), result.outlines
    assert "Traceback" not in result.stdout.str() and "cassettes.py:" not in result.stdout.str()


def test_a_cassette_of_too_many_values_is_refused_before_any_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cassette within 16 MiB of short values (`[a,a,a,...]`) was built whole by Python's YAML
    loader: minutes and gigabytes at 16 MiB. Its values are counted first, and past the bound the
    file is refused with one line naming it before the loader composes or builds any of them."""
    built = {"composed": 0, "constructed": 0}
    loader = scenario_module._NoAliasLoader
    compose, construct = loader.compose_node, loader.construct_object

    def composing(self: object, parent: object, index: object) -> object:
        built["composed"] += 1
        return compose(self, parent, index)  # type: ignore[arg-type]

    def constructing(self: object, node: object, deep: bool = False) -> object:
        built["constructed"] += 1
        return construct(self, node, deep)  # type: ignore[arg-type]

    monkeypatch.setattr(loader, "compose_node", composing)
    monkeypatch.setattr(loader, "construct_object", constructing)
    path = tmp_path / "test_a.yaml"
    path.write_text("scenarios: [[" + "a," * MAX_CASSETTE_VALUES + "a]]\n", encoding="utf-8")
    with pytest.raises(CassetteError) as raised:
        Cassette(path, "none", None).recordings()
    assert str(raised.value) == (
        f"{path}: this cassette cannot be replayed: the file holds more than {MAX_CASSETTE_VALUES} YAML values"
        " (a long text is one), more than a cassette is read with"
    )
    assert built == {"composed": 0, "constructed": 0}
    # the same bound lets a cassette of ordinary recordings load: both counters move
    path.write_text(readable_yaml({"scenarios": [PARCELS, GREETING]}), encoding="utf-8")
    assert [s["name"] for s in Cassette(path, "none", None).recordings()] == ["parcels", "greeting"]
    assert built["composed"] > 0 and built["constructed"] > 0


@pytest.mark.parametrize("c_parser", [True, False], ids=["c-parser", "no-c-parser"])
def test_a_cassette_the_c_parser_refuses_is_counted_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, c_parser: bool
) -> None:
    """`%YAML 1.3` is refused by the C parser before its first value and read by Python's: the
    count stopped there and the loader built every value (900,000 of them: 54 s and 655 MB).
    Without the C parser nothing was counted. Now Python's parser counts them (a smaller
    bound here, the same code path) and the file is refused before the loader reads any value."""
    from ptc_emulator.testing import cassettes

    if not c_parser:
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    monkeypatch.setattr(cassettes, "MAX_CASSETTE_VALUES", 1000)
    composed = []
    loader = scenario_module._NoAliasLoader
    compose = loader.compose_node

    def composing(self: object, parent: object, index: object) -> object:
        composed.append(index)
        return compose(self, parent, index)  # type: ignore[arg-type]

    monkeypatch.setattr(loader, "compose_node", composing)
    path = tmp_path / "test_a.yaml"
    path.write_text("%YAML 1.3\n---\nscenarios: [[" + "a," * 1000 + "a]]\n", encoding="utf-8")
    with pytest.raises(CassetteError) as raised:
        Cassette(path, "none", None).recordings()
    assert str(raised.value) == (
        f"{path}: this cassette cannot be replayed: the file holds more than 1000 YAML values"
        " (a long text is one), more than a cassette is read with"
    )
    assert composed == []
    path.write_text("%YAML 1.3\n---\nscenarios: " + "[" * 100 + "]" * 100 + "\n", encoding="utf-8")
    with pytest.raises(CassetteError, match="the file is not valid YAML: nested too deep"):
        Cassette(path, "none", None).recordings()
    assert composed == []


@pytest.mark.parametrize("kind", ["fifo", "loop", "directory"])
def test_a_cassette_that_is_no_regular_file_fails_its_test_naming_the_file(
    pytester: pytest.Pytester, kind: str
) -> None:
    """A FIFO where the cassette goes was taken as no cassette yet (`is_file()` is false) and the
    test passed with nothing replayed; a symbolic link in a loop likewise. Each is refused with
    one line naming the file, unread (opening a FIFO to read would wait for a writer). A directory
    (which opens read-only) failed with an `IsADirectoryError` traceback at setup."""
    pytester.makepyfile(test_parcels=HOSTILE_TEST)
    cassette = pytester.path / "cassettes" / "test_parcels" / "test_parcels.yaml"
    cassette.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(cassette)
        problem = "the path is not a regular file"
    elif kind == "directory":
        cassette.mkdir()
        problem = "the path is not a regular file"
    else:
        cassette.symlink_to(cassette.name)
        problem = "the file cannot be read: "
    result = run(pytester)
    result.assert_outcomes(errors=1)
    said = f"{cassette}: this cassette cannot be replayed: {problem}"
    assert any(line.startswith(said) for line in result.outlines), result.outlines
    assert "Traceback" not in result.stdout.str() and "cassettes.py:" not in result.stdout.str()
