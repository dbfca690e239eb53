#!/usr/bin/env bash
# The drift guard against the newest official SDKs: `make sdk-drift` runs it.
#
# In a throwaway virtual environment, everything the lock (locks/python.txt) pins except openai and
# openai-agents is installed as pinned, and those two at their newest releases on PyPI. Then it
# prints what differs from the lock (every Python package whose version moved, and the newest npm
# `openai` and `@openai/agents`, openai-go and openai-java against what tests/node/package.json,
# tests/sdk/go/go.mod and tests/sdk/java/pom.xml pin, where those files exist), and runs the drift
# guard (tests/drift) and the Agents SDK's tests against the server. Its status is the tests'.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT

grep -v -E '^(openai|openai-agents)==' locks/python.txt >"$venv/constraints.txt"
install() {  # pip's output goes to a log, shown when it fails (the editable build is chatty)
  if ! "$venv/bin/python" -m pip install --quiet --no-compile "$@" >"$venv/pip.log" 2>&1; then
    cat "$venv/pip.log" >&2
    exit 1
  fi
}
"$python" -m venv "$venv"
install --upgrade pip
install -c "$venv/constraints.txt" -e '.[dev]'
install --upgrade openai openai-agents

"$venv/bin/python" - <<'EOF'
"""What moved since the lock: the Python packages, then the other languages' official SDKs."""
import json
import re
import subprocess
import urllib.request
from importlib import metadata
from pathlib import Path


def locked(path):
    pins = {}
    for line in Path(path).read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            pins[name.strip().lower()] = version.strip()
    return pins


def report(title, rows):
    if title:
        print(f"\n{title}")
    width = max((len(r[0]) for r in rows), default=10)
    for name, pinned, newest in rows:
        mark = "  (same)" if pinned and pinned == newest else ""
        print(f"  {name:<{width}}  {pinned or '-':>12}  ->  {newest or '?':<12}{mark}")


pins = locked("locks/python.txt")
installed = {d.metadata["Name"].lower(): d.version for d in metadata.distributions()}
sdks = [(name, pins.get(name), installed.get(name)) for name in ("openai", "openai-agents")]
report("Python SDKs (lock -> newest on PyPI, installed here):", sdks)
moved = sorted(
    (name, pins.get(name), version)
    for name, version in installed.items()
    if name not in ("openai", "openai-agents", "ptc-emulator", "pip") and pins.get(name) != version
)
print("\nOther Python packages that differ from the lock (what the newest SDKs pulled in):")
if moved:
    report("", moved)
else:
    print("  none")


def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            return reply.read().decode()
    except OSError as e:
        return f"error: {e}"


def npm_latest(package):
    try:
        found = subprocess.run(["npm", "view", package, "version"], capture_output=True, text=True, timeout=60)
        return found.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


rows = []
package = Path("tests/node/package.json")
if package.exists():
    deps = json.loads(package.read_text()).get("dependencies", {})
    for name in ("openai", "@openai/agents"):
        rows.append((f"npm {name}", deps.get(name), npm_latest(name)))
gomod = Path("tests/sdk/go/go.mod")
pinned = re.search(r"github\.com/openai/openai-go/v3\s+v(\S+)", gomod.read_text()) if gomod.exists() else None
releases = [v.lstrip("v") for v in fetch("https://proxy.golang.org/github.com/openai/openai-go/v3/@v/list").split()]
releases = [v for v in releases if re.fullmatch(r"\d+\.\d+\.\d+", v)]  # no pre-releases
newest = max(releases, key=lambda v: tuple(map(int, v.split(".")))) if releases else None
rows.append(("go github.com/openai/openai-go/v3", pinned.group(1) if pinned else None, newest))
pom = Path("tests/sdk/java/pom.xml")
pinned = re.search(r"<openai-java\.newest>([^<]+)</openai-java\.newest>", pom.read_text()) if pom.exists() else None
meta = fetch("https://repo1.maven.org/maven2/com/openai/openai-java/maven-metadata.xml")
newest = re.search(r"<release>([^<]+)</release>", meta)
rows.append(("maven com.openai:openai-java", pinned.group(1) if pinned else None, newest.group(1) if newest else None))
if rows:
    report("Other languages' SDKs (pinned by the suites -> newest on the registry):", rows)
for missing in (p for p in (package, gomod, pom) if not p.exists()):
    print(f"  ({missing} does not exist here: nothing pinned to compare with)")
print()
EOF

PYTHONDONTWRITEBYTECODE= "$venv/bin/python" -m pytest -q -p no:cacheprovider -n "${JOBS:-2}" --dist loadfile \
  tests/drift tests/api/test_agents_sdk.py tests/api/test_agents_sdk_compaction.py tests/tools/test_agents_sdk.py \
  tests/tools/test_tool_search_agents.py
