"""Drive programs by replay and by live resume in this process, one JSON request per stdin line.

Run by `test_determinism_property.py` as one long-lived subprocess, so V8 never lives in
the pytest process. Each request line is `{"code": ..., "tools": [...], "text_tools": [...]}`;
each answer line is `{"replay": Drive, "live": Drive}` (see `sandbox_support.Drive.as_json`):
the same program resumed by replay (a fresh context per resume, answered from the items) and
by live resume (one context, handed the results).
"""

from __future__ import annotations

import json
import sys

from ptc_emulator.sandbox import _v8
from tests.sandbox.sandbox_support import drive, drive_live, program


def main() -> None:
    _v8.init()
    for line in sys.stdin:
        request = json.loads(line)
        prog = program(request["code"], timeout_s=request.get("timeout_s", 5.0), max_tool_calls=200)
        result = {"replay": drive(_v8.run, prog).as_json(), "live": drive_live(prog).as_json()}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
