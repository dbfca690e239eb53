"""Drive catalogue programs in this process by replay and by live resume; print both as JSON.

Run by `test_live.py` as a subprocess (`python -m tests.sandbox.engine_driver NAME...`), so V8 never
lives in the pytest process. Its output is one JSON object: {name: {"replay": ..., "live": ...}}.
"""

from __future__ import annotations

import json
import sys

from ptc_emulator.sandbox import _v8
from tests.sandbox.sandbox_support import CATALOGUE, drive, drive_live


def main(names: list[str]) -> None:
    _v8.init()
    result = {}
    for name in names:
        prog = CATALOGUE[name]
        result[name] = {"replay": drive(_v8.run, prog).as_json(), "live": drive_live(prog).as_json()}
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(CATALOGUE))
