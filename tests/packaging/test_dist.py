"""`make dist` and the install paths it gives a team, from a copy of this checkout.

The copy holds what a clean clone has (the files git tracks, and new ones it does not ignore), so
the builds write nothing into this checkout. `make dist` runs there with this environment (whose
build and twine come from the lock) and must build the sdist, the wheel and the npm package,
with twine's checks passing and no setuptools warning. Then, as a JavaScript team would use
them: a fresh Node project installs the npm tarball (and Vitest and openai from the registry),
and the package's Vitest example runs there, with `ptc-emulator` on no PATH and no Python
environment prepared: the package makes its own with the machine's `python3` and installs the
built wheel into it (PTC_EMULATOR_INSTALL), and a second run reuses it. pip resolves the wheel's
dependencies with the lock as constraints (PIP_CONSTRAINT), so the versions are the tested ones.
Builds, installs and fresh environments: marked `slow`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import ptc_emulator

ROOT = Path(__file__).resolve().parents[2]
VERSION = ptc_emulator.__version__

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

# A Python warning as printed ("...py:215: SetuptoolsDeprecationWarning: Package ... is absent",
# "...py:354: BuildBackendWarning: Editable installation."), and setuptools' box.
WARNING = re.compile(r"\w*Warning\b|would be ignored")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _run(*args: str | Path, cwd: Path, env: Mapping[str, str] | None = None) -> str:
    """Run to the end; its stdout and stderr together, without colour codes. Fails on a non-zero exit."""
    result = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=1200,
        check=False,
    )
    output = ANSI.sub("", result.stdout)
    assert result.returncode == 0, f"{args} exited {result.returncode}:\n{output[-6000:]}"
    return output


def _env(**extra: str) -> dict[str, str]:
    """This process's environment less what would steer the runs: the suite's own server, pytest's
    and make's variables, an activated virtual environment."""
    drop = ("PTC_EMULATOR", "PYTEST", "COV_", "MAKE", "MFLAGS")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    for name in ("PYTHONPATH", "PYTHONWARNINGS", "VIRTUAL_ENV", "PIP_CONSTRAINT"):
        env.pop(name, None)
    return {**env, **extra}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    copy = tmp_path_factory.mktemp("checkout") / "ptc-emulator"
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if not source.is_symlink() and not source.is_file():
            continue  # deleted in the work tree
        target = copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    return copy


@dataclass
class Dist:
    folder: Path
    sdist: Path
    wheel: Path
    npm: Path
    output: str


@pytest.fixture(scope="module")
def dist(checkout: Path, tmp_path_factory: pytest.TempPathFactory) -> Dist:
    folder = tmp_path_factory.mktemp("dist")
    venv = Path(sys.prefix)
    # This environment as it is: --old-file keeps make from reinstalling it mid-run.
    output = _run(
        "make", "--no-print-directory", "dist", f"DIST={folder}", f"VENV={venv}", f"--old-file={venv / '.installed'}",
        cwd=checkout,
        env=_env(),
    )  # fmt: skip
    return Dist(
        folder,
        folder / f"ptc_emulator-{VERSION}.tar.gz",
        folder / f"ptc_emulator-{VERSION}-py3-none-any.whl",
        folder / f"ptc-emulator-{VERSION}.tgz",
        output,
    )


def test_make_dist_builds_the_three_artifacts_twine_passes_them_and_setuptools_warns_of_nothing(dist: Dist) -> None:
    assert sorted(p.name for p in dist.folder.iterdir()) == sorted(p.name for p in (dist.sdist, dist.wheel, dist.npm))
    assert "twine check --strict" in dist.output and dist.output.count("PASSED") == 2, dist.output[-3000:]
    # The build backend's own output is in what make printed (so a warning would be too): none.
    assert "running build_py" in dist.output and "running sdist" in dist.output
    assert WARNING.findall(dist.output) == []


def test_the_artifacts_carry_the_one_version_and_the_license(dist: Dist, checkout: Path) -> None:
    licence = (ROOT / "LICENSE").read_text(encoding="utf-8")
    with zipfile.ZipFile(dist.wheel) as wheel:
        metadata = wheel.read(f"ptc_emulator-{VERSION}.dist-info/METADATA").decode()
    assert f"\nVersion: {VERSION}\n" in metadata
    with tarfile.open(dist.sdist) as sdist:
        top = f"ptc_emulator-{VERSION}"
        pkg_info = sdist.extractfile(f"{top}/PKG-INFO")
        sdist_licence = sdist.extractfile(f"{top}/LICENSE")
        assert pkg_info is not None and sdist_licence is not None
        assert f"\nVersion: {VERSION}\n" in pkg_info.read().decode()
        assert sdist_licence.read().decode() == licence
        assert f"{top}/api/static/inspector/index.html" in sdist.getnames()
    with tarfile.open(dist.npm) as npm:
        names = sorted(npm.getnames())
        manifest = npm.extractfile("package/package.json")
        npm_licence = npm.extractfile("package/LICENSE")
        assert manifest is not None and npm_licence is not None
        package = json.loads(manifest.read())
        assert npm_licence.read().decode() == licence
    assert package["name"] == "ptc-emulator" and package["version"] == VERSION
    shipped = sorted(f"package/src/{p.name}" for p in (checkout / "js" / "src").iterdir())
    assert names == sorted(["package/LICENSE", "package/README.md", "package/package.json", *shipped])
    assert "package/src/install.cjs" in names


def test_the_projects_editable_install_prints_no_setuptools_notice(checkout: Path, tmp_path: Path) -> None:
    """`make`'s own install (here `make run`'s environment) filters the one notice setuptools prints
    for every editable install; the same pip command without the filter shows it (so the output
    read here is where it would be)."""
    venv = tmp_path / "venv"
    output = _run("make", "--no-print-directory", f"VENV={venv}", f"{venv}/.installed-run", cwd=checkout, env=_env())
    assert "pip install --quiet -c locks/python.txt -e ." in output  # the command ran, and printed
    assert WARNING.findall(output) == []
    found = _run(
        venv / "bin" / "python", "-c", "import ptc_emulator.api; print(ptc_emulator.api.__file__)", cwd=tmp_path
    )
    assert found.strip() == str(checkout / "api" / "__init__.py")

    unfiltered = _run(
        venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", "-e", ".", cwd=checkout, env=_env()
    )
    assert re.search(r"\w+Warning: Editable installation", unfiltered), unfiltered


def _without_the_command(path: str) -> str:
    """PATH less every folder that holds a `ptc-emulator` command (an activated environment's)."""
    kept = [d for d in path.split(os.pathsep) if d and shutil.which("ptc-emulator", path=d) is None]
    return os.pathsep.join(kept)


def test_the_npm_package_runs_its_vitest_example_with_the_server_it_installs_from_the_wheel(
    dist: Dist, checkout: Path, tmp_path: Path
) -> None:
    # A fresh Node project: the tarball, and the example's own imports at the versions js/ tests.
    project = tmp_path / "project"
    project.mkdir()
    (project / "package.json").write_text('{"name": "agent-tests", "private": true, "type": "module"}\n')
    pins = json.loads((checkout / "js" / "package.json").read_text(encoding="utf-8"))["devDependencies"]
    _run(
        "npm", "install", "--no-audit", "--no-fund", "--loglevel=error", "--save-dev", "--save-exact",
        dist.npm, f"vitest@{pins['vitest']}", f"openai@{pins['openai']}",
        cwd=project,
    )  # fmt: skip
    shutil.copy(checkout / "js" / "examples" / "agent.js", project / "agent.js")
    shutil.copytree(checkout / "js" / "examples" / "vitest", project / "vitest")

    path = _without_the_command(os.environ["PATH"])
    assert shutil.which("ptc-emulator", path=path) is None
    assert shutil.which("python3", path=path) is not None and shutil.which("node", path=path) is not None
    cache = tmp_path / "cache"
    env = _env(
        PATH=path,
        PTC_EMULATOR_INSTALL=str(dist.wheel),
        PTC_EMULATOR_CACHE=str(cache),
        PIP_CONSTRAINT=str(ROOT / "locks" / "python.txt"),
    )
    vitest = project / "node_modules" / ".bin" / "vitest"

    first = _run(vitest, "run", "--root", "vitest", "--color=false", cwd=project, env=env)
    assert re.search(r"Tests\s+2 passed \(2\)", first), first
    assert f"ptc-emulator: installing {dist.wheel} with " in first
    (made,) = cache.iterdir()  # one environment, and no half-made one left
    assert made.name.startswith(f"env-{VERSION}-py3.")
    assert (made / "pyvenv.cfg").is_file()
    site = next(made.glob("lib/python3*/site-packages"))
    origin = json.loads((site / f"ptc_emulator-{VERSION}.dist-info" / "direct_url.json").read_text())
    assert origin["archive_info"]["hashes"]["sha256"] == hashlib.sha256(dist.wheel.read_bytes()).hexdigest()

    second = _run(vitest, "run", "--root", "vitest", "--color=false", cwd=project, env=env)
    assert re.search(r"Tests\s+2 passed \(2\)", second), second
    assert "ptc-emulator: installing" not in second  # the environment made by the first run
    assert list(cache.iterdir()) == [made]
