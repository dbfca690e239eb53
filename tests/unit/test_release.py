"""One version for the Python and the npm package, and a changelog entry for it.

The version is spelt in `_root/__init__.py` (`ptc_emulator.__version__`); `make dist` writes it
into `js/package.json` and `js/package-lock.json`. A commit that bumps one and not the others, or
that forgets CHANGELOG.md's entry, fails here. (tests/packaging/test_dist.py checks the built
artifacts carry it.)
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import ptc_emulator

ROOT = Path(__file__).resolve().parents[2]
RELEASE = re.compile(r"^## \[(?P<version>[^\]]+)\] - (?P<date>\d{4}-\d{2}-\d{2})$", re.M)


def test_the_version_is_a_release_number() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", ptc_emulator.__version__), ptc_emulator.__version__


def test_the_npm_package_has_the_python_packages_version() -> None:
    package = json.loads((ROOT / "js" / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((ROOT / "js" / "package-lock.json").read_text(encoding="utf-8"))
    assert package["name"] == lock["name"] == "ptc-emulator"
    assert package["version"] == ptc_emulator.__version__, "run `make dist` and commit js/package.json"
    assert lock["version"] == lock["packages"][""]["version"] == ptc_emulator.__version__


def test_the_changelogs_newest_entry_is_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog\n")
    releases = list(RELEASE.finditer(text))
    assert releases, "no '## [x.y.z] - yyyy-mm-dd' entry"
    assert releases[0]["version"] == ptc_emulator.__version__
    # Newest first, one entry per version, each with at least one Keep a Changelog section.
    assert [r["date"] for r in releases] == sorted((r["date"] for r in releases), reverse=True)
    assert len({r["version"] for r in releases}) == len(releases)
    for release, end in zip(releases, [*[r.start() for r in releases[1:]], len(text)], strict=True):
        body = text[release.end() : end]
        assert re.search(r"^### (Added|Changed|Deprecated|Removed|Fixed|Security)$", body, re.M), release[0]
