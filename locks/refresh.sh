#!/usr/bin/env bash
# Resolve the package's dependencies afresh and write the locks that `make test` and `make run`
# install from (pip constraints: the newest release of everything the package allows, and the
# same with the oldest openai the package supports). `make lock` runs it; commit what it changes
# on its own, after `make test` passes on it.
#
#   locks/refresh.sh [PIN ...]   e.g. locks/refresh.sh 'openai==3.57.0' holds a package back in the
#                                newest lock (the oldest lock holds openai at OLDEST_SDK)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
oldest=$(sed -n 's/^OLDEST_SDK *?= *//p' Makefile)

resolve() {  # resolve OUT [extra requirement ...]: '.[dev]' plus the extras, frozen into OUT
  local out=$1; shift
  local venv
  venv=$(mktemp -d)
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet --no-compile -e '.[dev]' "$@"
  {
    echo "# What \`make test\` installs (pip constraints). Written by \`make lock\`; do not edit by hand."
    echo "# Resolved $(date -u +%Y-%m-%d) with Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())')${*:+; held: $*}."
    "$venv/bin/python" -m pip freeze --exclude-editable --all | grep -v '^ptc-emulator' | LC_ALL=C sort -f
  } >"$out"
  rm -rf "$venv"
  echo "wrote $out"
}

resolve locks/python.txt "$@"           # a hold applies to the newest lock
resolve locks/python-oldest.txt "openai==$oldest"
