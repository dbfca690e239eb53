"""`ptc-emulator validate DIR...`: every file the loader refuses is a non-zero exit with the file
and the field (the malformed examples of tests/unit/test_scenario_loader.py, as files); the bundled
scenarios pass; and `serve` says how many scenarios it loaded from where."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ptc_emulator.api.cli import main
from ptc_emulator.api.settings import bundled_fixtures
from ptc_emulator.emulator.model.scripted.scenario import MAX_YAML_NODES
from tests.cli.test_cli import CLI, run
from tests.unit import test_scenario_loader as loader_tests


def examples(test: Any) -> list[tuple[Any, ...]]:
    """The cases of one of the loader's parametrized tests."""
    [mark] = [m for m in test.pytestmark if m.name == "parametrize"]
    return list(mark.args[1])


def malformed() -> list[tuple[str, str, str]]:
    """(file name, its text, what the refusal must say) for every malformed scenario the loader's tests refuse."""
    cases: list[tuple[str, str, str]] = []
    for i, (data, why) in enumerate(examples(loader_tests.test_a_malformed_scenario_is_refused_naming_the_field)):
        text = data if isinstance(data, str) else yaml.safe_dump(data)
        cases.append((f"shape_{i}.yaml", text, why))
    for i, (template, why) in enumerate(examples(loader_tests.test_a_template_that_always_fails_is_refused)):
        data = {"name": "alwaysfails", "turns": [{"message": "ok"}, {"message": template}]}
        cases.append((f"template_{i}.json", json.dumps(data), "turns.1.message"))
        assert why
    for i, (turn, field) in enumerate(examples(loader_tests.test_every_template_field_is_checked)):
        cases.append((f"field_{i}.json", json.dumps({"name": "fields", "turns": [turn]}), f"{field}: invalid template"))
    for i, (template, why) in enumerate(examples(loader_tests.test_a_template_that_cannot_render_is_refused)):
        cases.append((f"render_{i}.yaml", yaml.safe_dump({"name": "bad", "turns": [{"message": template}]}), why))
    aliases = ["a: &a [x, x]", "b: [*a, *a]", "turns: [{message: x}]"]
    cases += [
        ("aliases.yaml", "\n".join(aliases) + "\n", "aliases (*name) are not supported in scenarios"),
        ("deep.yaml", "turns: " + "[" * 100 + "]" * 100, "nested deeper than 64 levels"),
        ("invalid.yaml", "turns: [", "invalid YAML"),
        ("big.yaml", "turns:\n  - message: '" + "x" * (2 * 2**20) + "'\n", "larger than"),
        ("broken.json", '{"turns": [', "invalid JSON"),
        ("list.json", "[1, 2]", "a scenario is a mapping"),
        ("deep.json", '{"turns": ' + "[" * 100_000 + "]" * 100_000 + "}", "JSON nested too deep"),
        ("surrogate.yaml", 'turns: [{message: "\\ud800"}]\n', "a lone surrogate ('\\ud800') in a string"),
        ("surrogate.json", '{"turns": [{"message": "\\udfff"}]}', "a lone surrogate ('\\udfff') in a string"),
        # Python's parsers refuse these with a ValueError of their own (a traceback before)
        ("integer.json", '{"priority": ' + "9" * 5000 + "}", "invalid JSON: an integer of more than 4300 digits"),
        ("integer.yaml", "priority: " + "9" * 5000 + "\n", "invalid YAML: an integer of more than 4300 digits"),
        ("date.yaml", "turns: [{message: 2024-02-30}]\n", "invalid YAML: day is out of range for month"),
        # a key given twice: the loaders kept its last value and dropped the first without a word
        ("twice.yaml", "turns: [{message: a}]\nturns: []\n", "the key 'turns' is given twice"),
        ("twice_nested.yaml", "match: {input: a, input: b}\nturns: [{message: a}]\n", "the key 'input' is given twice"),
        ("twice.json", '{"turns": [{"message": "a"}], "turns": []}', "invalid JSON: the key 'turns' is given twice"),
        # a merge key gives a key again by another road: one of the two names was kept silently
        ("merge.yaml", "name: m\n<<: {name: z}\nturns: [{message: a}]\n", "merge keys (<<) are not supported"),
        # a valid scenario of more values than Python's loader builds in reasonable time and memory
        # (1 MiB of them took 14 s and 250 MB; accepted before)
        (
            "many.yaml",
            "turns:\n" + "- {message: a}\n" * (MAX_YAML_NODES // 3 + 1),
            f"more than {MAX_YAML_NODES} values",
        ),
    ]
    return cases


MALFORMED = malformed()


def test_the_bundled_scenarios_are_valid() -> None:
    done = run("validate", str(bundled_fixtures()), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout.strip().endswith("all valid")


def validate(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, str, str]:
    """`ptc-emulator validate` in this process (its exit status, stdout, stderr): the same main()."""
    with pytest.raises(SystemExit) as ended:
        main(["validate", *map(str, paths)])
    out, err = capsys.readouterr()
    return int(ended.value.code or 0), out, err


@pytest.mark.parametrize(("name", "text", "why"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_each_malformed_file_is_a_failure_naming_file_and_field(
    name: str, text: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    status, out, err = validate(capsys, tmp_path)
    assert status == 1, out
    lines = err.strip().splitlines()
    assert lines and all(line.startswith(f"{path}: ") for line in lines), lines
    assert any(why in line for line in lines), (why, lines)


def test_every_problem_of_every_file_in_one_run(tmp_path: Path) -> None:
    good, more = tmp_path / "good", tmp_path / "more"
    good.mkdir()
    more.mkdir()
    (good / "ping.yaml").write_text("match: {input: ping}\nturns: [{message: pong}]\n", encoding="utf-8")
    (more / "ping.json").write_text('{"turns": [{"message": "again"}]}', encoding="utf-8")  # also `ping`
    (more / "two.yaml").write_text("name: two\nturns: []\ncolour: red\n", encoding="utf-8")
    done = run("validate", str(good), str(more), str(tmp_path / "absent"), timeout=60)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert f"{more / 'two.yaml'}: turns: List should have at least 1 item after validation, not 0" in lines
    assert f"{more / 'two.yaml'}: colour: Extra inputs are not permitted" in lines
    assert f"{more / 'ping.json'}: name: duplicate scenario name 'ping': {good / 'ping.yaml'} already has it" in lines
    assert f"{tmp_path / 'absent'}: no such file or directory" in lines
    assert len(lines) == 4 and done.stdout.strip() == "ptc-emulator validate: 4 problems in 3 files"


def test_serve_says_how_many_scenarios_it_loaded_from_where(tmp_path: Path) -> None:
    (tmp_path / "ping.yaml").write_text("match: {input: ping}\nturns: [{message: pong}]\n", encoding="utf-8")
    (tmp_path / "hello.json").write_text('{"turns": [{"message": "hi"}]}', encoding="utf-8")
    server = subprocess.Popen(
        [*CLI, "serve", "--port", "0", "--store", "memory", "--workers", "1", "--no-bundled-fixtures"]
        + ["--fixtures", str(tmp_path), "--watch"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        lines = [server.stderr.readline() for _ in range(2)]
        expected = f"ptc-emulator: 2 scenarios loaded: 2 from {tmp_path} (watching them for changes)"
        assert lines[1].strip() == expected, lines
    finally:
        server.terminate()  # the process this test started, by its handle
        server.wait(60)
        if server.stderr is not None:
            server.stderr.close()


def test_a_file_over_the_bound_is_refused_before_it_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 200 MB scenario file was read whole before the 1 MiB check: now its size is looked at first."""
    path = tmp_path / "huge.yaml"
    with path.open("wb") as file:
        file.truncate(200 * 2**20)  # sparse: 200 MB that take no disk
    status, _, err = validate(capsys, tmp_path)
    assert status == 1
    assert err.strip() == f"{path}: larger than {2**20} bytes ({200 * 2**20} bytes)"


def test_watching_reads_a_file_again_only_when_its_time_or_size_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ptc_emulator.emulator.model.scripted import files

    path = tmp_path / "ping.yaml"
    path.write_text("turns: [{message: pong}]\n", encoding="utf-8")
    settled = path.stat().st_mtime - 60
    os.utime(path, (settled, settled))  # modified a minute ago: a file just written is hashed each time
    reads: list[Path] = []
    real = Path.read_bytes

    def counted(self: Path) -> bytes:
        reads.append(self)
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    fingerprint = files._Fingerprints()
    first = fingerprint([tmp_path])
    assert fingerprint([tmp_path]) == first and fingerprint([tmp_path]) == first
    assert reads == [path]  # the checks after the first looked at the file's status only
    path.write_text("turns: [{message: pong pong}]\n", encoding="utf-8")
    assert fingerprint([tmp_path]) != first
    assert reads == [path, path]


def test_serve_lists_every_broken_scenario_file_as_validate_does(tmp_path: Path) -> None:
    good, more = tmp_path / "good", tmp_path / "more"
    good.mkdir()
    more.mkdir()
    (good / "ping.yaml").write_text("match: {input: ping}\nturns: [{message: pong}]\n", encoding="utf-8")
    (good / "invalid.yaml").write_text("turns: [", encoding="utf-8")
    (more / "ping.json").write_text('{"turns": [{"message": "again"}]}', encoding="utf-8")  # also `ping`
    (more / "two.yaml").write_text("name: two\nturns: []\ncolour: red\n", encoding="utf-8")
    checked = run("validate", str(good), str(more), timeout=60)
    done = run(
        "serve", "--port", "0", "--store", "memory", "--workers", "1", "--no-bundled-fixtures",
        "--fixtures", str(good), "--fixtures", str(more),
    )  # fmt: skip
    assert done.returncode == 2 and "serving on" not in done.stderr and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    problems = checked.stderr.strip().splitlines()
    assert len(problems) == 4 and any(f"{good / 'invalid.yaml'}: invalid YAML" in p for p in problems), problems
    assert lines[:-1] == [f"ptc-emulator: {problem}" for problem in problems]  # every file, as validate says it
    summary = "4 problems in the scenario files, nothing served (`ptc-emulator validate DIR` checks them)"
    assert lines[-1] == f"ptc-emulator: {summary}"


def test_a_program_whose_javascript_does_not_parse_fails_naming_file_turn_and_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = "const order = await tools.get_order({id: {{ id }}});\nconst total = ;\nreturn order\n"
    fine = "const r = await tools.get({q: {{ input }}, n: {{ data.items | length }}});\nreturn r\n"
    (tmp_path / "broken.yaml").write_text(
        yaml.safe_dump({"match": {"input": r"order (?P<id>\d+)"}, "turns": [{"message": "hi"}, {"program": broken}]}),
        encoding="utf-8",
    )
    (tmp_path / "fine.yaml").write_text(
        yaml.safe_dump({"turns": [{"program": fine}, {"message": "{{ result }}"}]}), encoding="utf-8"
    )
    status, out, err = validate(capsys, tmp_path)
    assert status == 1
    assert err.strip().splitlines() == [
        f"{tmp_path / 'broken.yaml'}: turns.1.program: JavaScript does not parse: "
        "SyntaxError: Unexpected token ';' (line 2): const total = ;"
    ]
    assert out.strip() == "ptc-emulator validate: 1 problem in 2 files"
    # The same program with the error fixed passes: the templates rendered as placeholders parse.
    # (Its `id` a capture: with none, `{{ id }}` could never render, and that is refused too.)
    fixed = {"match": {"input": r"order (?P<id>\d+)"}, "turns": [{"program": broken.replace("= ;", "= 1;")}]}
    (tmp_path / "broken.yaml").write_text(
        yaml.safe_dump({**fixed, "turns": [*fixed["turns"], {"message": "ok"}]}), encoding="utf-8"
    )
    status, out, err = validate(capsys, tmp_path)
    assert status == 0 and err == "", err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_or_a_device_given_is_refused_unread_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Named on the command line, neither is opened (a FIFO's `open` would wait for a writer); each
    is one line saying what it is, no longer "no such file or directory"."""
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    given = [fifo, *(p for p in (Path("/dev/zero"),) if p.exists())]
    status, out, err = validate(capsys, *given)
    assert status == 1
    assert err.splitlines() == [f"{p}: not a regular file or a directory" for p in given]
    assert out.strip() == f"ptc-emulator validate: {len(given)} problems in 0 files"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_directory_s_scenario_names_that_are_no_readable_file_are_named_not_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a directory, a `*.yaml` that is a dangling or looping symlink, a FIFO or a device was
    left out without a word: `validate` said "all valid" and the server loaded the folder without
    that scenario. Each is now one line naming it (a FIFO unread); an editor's hidden lock link
    (`.#name.yaml`, which points nowhere) is still left alone."""
    (tmp_path / "fine.yaml").write_text(yaml.safe_dump({"turns": [{"message": "hi"}]}), encoding="utf-8")
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "gone.yaml")
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / ".#fine.yaml").symlink_to("someone@host.123")
    status, out, err = validate(capsys, tmp_path)
    assert status == 1
    lines = err.strip().splitlines()
    named = [str(tmp_path / n) for n in ("dangling.yaml", "fifo.json", "loop.yaml")]
    assert [line.split(":")[0] for line in lines] == named
    assert lines[1] == f"{tmp_path / 'fifo.json'}: not a regular file"
    assert "cannot read it" in lines[0] and "cannot read it" in lines[2]
    assert out.strip() == "ptc-emulator validate: 3 problems in 4 files"


def test_a_symlink_loop_is_said_to_be_one_by_validate_serve_and_the_watcher(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ln -s l.yaml l.yaml; ptc-emulator validate l.yaml` said "no such file or directory" (and
    `serve --fixtures` of a looping link "no such directory"): the file is there, a link that
    leads back to itself. Each now says so, one line naming it, as a loop inside a folder is said
    by validate, by serve and by the watcher's reload."""
    from ptc_emulator.emulator.model import ScenarioFiles, ScenarioRegistry

    loop = tmp_path / "l.yaml"
    loop.symlink_to(loop)
    said = f"{loop}: cannot read it: a symlink loop (Too many levels of symbolic links)"
    status, out, err = validate(capsys, loop)
    assert (status, err.splitlines()) == (1, [said])
    assert out.strip() == "ptc-emulator validate: 1 problem in 0 files"

    looping_folder = tmp_path / "folder"
    looping_folder.symlink_to(looping_folder)
    done = run("serve", "--port", "0", "--store", "memory", "--workers", "1", "--no-bundled-fixtures",
               "--fixtures", str(looping_folder))  # fmt: skip
    assert done.returncode == 2 and "serving on" not in done.stderr
    assert done.stderr.strip() == f"ptc-emulator: --fixtures {looping_folder}: cannot read it: a symlink loop " + (
        "(Too many levels of symbolic links)"
    )

    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "fine.yaml").write_text("turns: [{message: hi}]\n", encoding="utf-8")
    watched = ScenarioFiles(ScenarioRegistry(), [folder]).load()
    (folder / "l.yaml").symlink_to(folder / "l.yaml")
    assert watched.check() is False  # the reload is refused, the scenarios stay
    assert watched.error == f"{folder / 'l.yaml'}: cannot read it: a symlink loop (Too many levels of symbolic links)"
    served = run("serve", "--port", "0", "--store", "memory", "--workers", "1", "--no-bundled-fixtures",
                 "--fixtures", str(folder))  # fmt: skip
    assert served.returncode == 2 and f"ptc-emulator: {watched.error}" in served.stderr.splitlines()


def test_a_directory_with_a_scenario_suffix_is_named_not_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory named `x.yaml` (or .yml, .json) in a scenario folder was left out without a
    word by validate, serve and --watch (a scenario meant to be there was silently missing).
    It is now one line naming it, as a FIFO or a dangling link is; a hidden one is left alone."""
    from ptc_emulator.emulator.model import ScenarioFiles, ScenarioRegistry

    (tmp_path / "fine.yaml").write_text("turns: [{message: hi}]\n", encoding="utf-8")
    watched = ScenarioFiles(ScenarioRegistry(), [tmp_path]).load()
    for name in ("x.yaml", "y.YML", "z.json", ".hidden.yaml"):
        (tmp_path / name).mkdir()
    status, out, err = validate(capsys, tmp_path)
    named = [f"{tmp_path / n}: a directory, not a scenario file" for n in ("x.yaml", "y.YML", "z.json")]
    assert (status, err.splitlines()) == (1, named)
    assert out.strip() == "ptc-emulator validate: 3 problems in 4 files"
    assert watched.check() is False and watched.error == "; ".join(named)
    done = run("serve", "--port", "0", "--store", "memory", "--workers", "1", "--no-bundled-fixtures",
               "--fixtures", str(tmp_path))  # fmt: skip
    assert done.returncode == 2 and done.stderr.splitlines()[:-1] == [f"ptc-emulator: {line}" for line in named]
