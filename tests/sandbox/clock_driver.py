"""Drive one program by live resumes under a fake clock; print each step's outcome as JSON.

Run by `test_live_cache.py` as `python -m tests.sandbox.clock_driver STEP_S`, so V8 never
lives in the pytest process. The clock advances by exactly STEP_S seconds across every start or
resume, whatever the machine's speed, so the live-resume budget is tested without a wall clock.
"""

from __future__ import annotations

import json
import sys

from ptc_emulator.sandbox import Suspended, _v8
from tests.sandbox.sandbox_support import answer, outcome_json, program

CODE = "let n = 0;\nfor (let step = 0; step < 5; step++) n += await tools.add({a: step, b: 1});\ntext(String(n));"


class SteppingClock:
    """Each reading is `step` seconds after the one before it: a start or resume, timed by two
    readings, takes exactly `step` seconds."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def main(step: float) -> None:
    _v8.init()
    execution = _v8.Execution(program(CODE, timeout_s=10.0), clock=SteppingClock(step))
    outcomes = [execution.start()]
    while isinstance(outcomes[-1], Suspended):
        outcomes.append(execution.resume([answer(c) for c in outcomes[-1].pending]))
    execution.close()
    sys.stdout.write(json.dumps([outcome_json(o) for o in outcomes]) + "\n")


if __name__ == "__main__":
    main(float(sys.argv[1]))
