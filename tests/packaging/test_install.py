"""The built wheel, installed as a user installs it, beside a project with packages of the same names.

The wheel must add one import name (`ptc_emulator`), and a user project whose own `api/`,
`emulator/`, `sandbox/` and `fixtures/` packages sit in a flat or an editable `src/` layout must
still import its own code, under `pytest` and under `python -m pytest`, while the `ptc_emulator`
fixture answers the bundled seed scenario. This builds the wheel and real virtual environments
with pip, so it is marked `slow`. The wheel is installed without its dependencies, which the
new environment finds through a path file naming this environment's site-packages: installing
them again from the package index would only test pip, and take minutes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import ptc_emulator

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# What a checkout holds besides its sources (.gitignore's entries, and the repository itself).
NOT_SOURCES = (
    ".git",
    ".venv",
    ".venv-openai-*",
    ".build",
    "build",
    "dist",
    "*.egg-info",
    "node_modules",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    ".data",
    ".ptc-emulator",
    "target",
    "*.tgz",
)

USER_PACKAGES = {
    "api": "NAME = 'the project api'\n",
    "emulator": "NAME = 'the project emulator'\n",
    "sandbox": "NAME = 'the project sandbox'\n",
    "fixtures": "NAME = 'the project fixtures'\n",
}

USER_TEST = textwrap.dedent(
    """
    import api
    import emulator
    import fixtures
    import sandbox
    from openai import OpenAI


    def test_own_packages_resolve_to_the_project():
        assert api.NAME == "the project api"
        assert emulator.NAME == "the project emulator"
        assert sandbox.NAME == "the project sandbox"
        assert fixtures.NAME == "the project fixtures"


    def test_fixture_answers_the_bundled_seed(ptc_emulator):
        client = ptc_emulator.client()
        schema = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
        tools = [
            {"type": "function", "name": n, "parameters": schema, "allowed_callers": ["programmatic"]}
            for n in ("get_inventory", "get_demand")
        ] + [{"type": "programmatic_tool_calling"}]
        items = [{"role": "user", "content": "Compare inventory with demand for sku_123."}]
        answers = {"get_inventory": '{"sku": "sku_123", "available_units": 42}',
                   "get_demand": '{"sku": "sku_123", "requested_units": 31}'}
        for _ in range(5):
            response = client.responses.create(model="m", input=items, tools=tools, store=False)
            items += [i.model_dump(exclude_none=True) for i in response.output]
            calls = [i for i in response.output if i.type == "function_call"]
            if not calls:
                break
            items += [{"type": "function_call_output", "call_id": c.call_id, "output": answers[c.name],
                       "caller": c.caller.model_dump()} for c in calls]
        assert response.output_text == (
            "sku_123: 42 units available against 31 requested, so the shortage is 0 units."
        )
    """
)


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    assert result.returncode == 0, (
        f"{args} exited {result.returncode}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy of the sources: setuptools builds in place under build/, and a module
    # since moved or deleted would still be in a checkout's old build/lib and so in the wheel.
    source = tmp_path_factory.mktemp("source") / "ptc-emulator"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", out, source, cwd=out)
    (built,) = out.glob("ptc_emulator-*.whl")
    return built


def _venv(where: Path, wheel: Path) -> Path:
    # Without pip of its own: pip, like every other dependency, is borrowed (and the environment
    # gets no old setuptools of its own that would hide the borrowed one that builds editables).
    _run(sys.executable, "-m", "venv", "--without-pip", where, cwd=where.parent)
    python = where / "bin" / "python"
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=where).stdout.strip())
    # Appended after the new environment's own site-packages, and not processed as a site
    # directory, so this checkout's editable install is invisible there: only the wheel is.
    (site / "borrowed-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    _run(
        python, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", wheel, "pytest>=8.2", cwd=where.parent
    )
    found = _run(python, "-c", "import ptc_emulator; print(ptc_emulator.__file__)", cwd=where).stdout
    assert found.startswith(str(site)), found  # the wheel's copy, not this checkout
    return python


def _user_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PTC_EMULATOR", "COV_"))}
    env.pop("PYTHONPATH", None)
    return env


def _write_packages(base: Path) -> None:
    for name, body in USER_PACKAGES.items():
        (base / name).mkdir(parents=True)
        (base / name / "__init__.py").write_text(body)


def test_the_wheel_installs_one_import_name(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"ptc_emulator"}
    assert "ptc_emulator/fixtures/inventory__sku_123.yaml" in names
    assert "ptc_emulator/sandbox/_prelude.js" in names
    for page in ("index.html", "inspector.js", "highlight.js", "inspector.css"):  # the trace inspector
        assert f"ptc_emulator/api/static/inspector/{page}" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "ptc_emulator = ptc_emulator.testing.plugin" in text
    assert "ptc-emulator = ptc_emulator.api.cli:main" in text


def test_the_wheel_has_the_one_version_and_the_mit_license(wheel: Path) -> None:
    """The version is spelt once (`ptc_emulator.__version__`); the LICENSE file ships in the wheel."""
    archive = zipfile.ZipFile(wheel)
    assert wheel.name.startswith(f"ptc_emulator-{ptc_emulator.__version__}-")
    metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert f"\nVersion: {ptc_emulator.__version__}\n" in metadata
    assert "\nLicense-Expression: MIT\n" in metadata
    licence = next(n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE"))
    assert archive.read(licence).decode() == (ROOT / "LICENSE").read_text()
    assert archive.read(licence).decode().startswith("MIT License\n")


@pytest.fixture(scope="module")
def flat_project(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[tuple[Path, Path]]:
    base = tmp_path_factory.mktemp("flat")
    python = _venv(base / "venv", wheel)
    project = base / "project"
    _write_packages(project)
    (project / "tests").mkdir()
    (project / "tests" / "test_agent.py").write_text(USER_TEST)
    # The user's test answers from a bundled demo scenario: asked for, as the demos load only then.
    (project / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\npythonpath = ["."]\ntestpaths = ["tests"]\nptc_emulator_demo = true\n'
    )
    yield python, project


@pytest.mark.parametrize("runner", [["-m", "pytest"], ["pytest"]], ids=["python -m pytest", "pytest"])
def test_a_flat_project_with_the_same_package_names(flat_project: tuple[Path, Path], runner: list[str]) -> None:
    python, project = flat_project
    command = [python, *runner] if runner[0] == "-m" else [python.parent / "pytest"]
    result = _run(*command, "-q", "-p", "no:cacheprovider", cwd=project, env=_user_env())
    assert "2 passed" in result.stdout


def test_an_editable_src_project_with_the_same_package_names(
    tmp_path_factory: pytest.TempPathFactory, wheel: Path
) -> None:
    base = tmp_path_factory.mktemp("src")
    python = _venv(base / "venv", wheel)
    project = base / "project"
    _write_packages(project / "src")
    (project / "tests").mkdir()
    (project / "tests" / "test_agent.py").write_text(USER_TEST)
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=64"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "user-agent-project"
            version = "0.0.1"

            [tool.setuptools.packages.find]
            where = ["src"]

            [tool.pytest.ini_options]
            testpaths = ["tests"]
            ptc_emulator_demo = true
            """
        )
    )
    _run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", project, cwd=project)
    for command in ([python, "-m", "pytest"], [python.parent / "pytest"]):
        result = _run(*command, "-q", "-p", "no:cacheprovider", cwd=project, env=_user_env())
        assert "2 passed" in result.stdout


def test_the_installed_cli_serves_the_quick_start(flat_project: tuple[Path, Path], tmp_path: Path) -> None:
    """After `pip install` of the wheel, `ptc-emulator serve` answers the README's quick start."""
    python, _ = flat_project
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("```python", readme.index("## Quick start"))
    code = readme[start + len("```python") : readme.index("```", start + 9)]
    server = subprocess.Popen(
        [python.parent / "ptc-emulator", "serve", "--demo", "--port", "0", "--store", "memory", "--workers", "1"],
        stderr=subprocess.PIPE,
        text=True,
        env=_user_env(),
        cwd=tmp_path,
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert "serving on http://127.0.0.1:" in line, line
        url = line.split("serving on ")[1].split()[0]
        script = tmp_path / "quick_start.py"
        script.write_text(code.replace("http://127.0.0.1:8000/v1", url))
        result = _run(python, script, cwd=tmp_path, env=_user_env())
        assert result.stdout.strip() == "sku_123: 42 units available against 31 requested, so the shortage is 0 units."
    finally:
        server.terminate()
        server.wait(30)
        if server.stderr is not None:
            server.stderr.close()
