"""What following and making a recording of one answer of many short messages costs
(`emulator/model/scripted/recording.py`: `Tape.exchange`, then `scenario_from`).

A response's messages said one after another are recorded as one message turn, their texts
joined as a client's `output_text` joins them. Each row follows one completed answer of N
one-part messages (24 characters each) on a fresh tape and makes its scenario, and prints the
medians of three runs in seconds. Joining each message onto the text so far and templating the
whole again was quadratic: 5,000 / 10,000 / 20,000 messages took 0.11 / 0.69 / 2.49 s in
scenario_from. Joined once and templated once, on a loaded 2-core machine (load 9), tape /
scenario: 5,000 0.04 / 0.03 s, 20,000 0.11 / 0.08 s, 100,000 1.02 / 0.38 s.

    .venv/bin/python bench/recording_join.py
"""

from __future__ import annotations

import statistics
import time

from ptc_emulator.emulator.model.scripted.recording import Tape, scenario_from

TEXT = "sk-h6bNOTaKEY0123456789 "


def answer(n: int) -> dict[str, object]:
    part = {"type": "output_text", "text": TEXT, "annotations": []}
    message = {"type": "message", "role": "assistant", "status": "completed", "content": [part]}
    return {"id": f"resp_{n}", "object": "response", "status": "completed", "output": [dict(message) for _ in range(n)]}


def main() -> None:
    print(f"{'messages':>9} {'tape s':>8} {'scenario s':>11}")
    for n in (5_000, 20_000, 100_000):
        tape_times, scenario_times = [], []
        for _ in range(3):
            body = answer(n)
            start = time.perf_counter()
            finished = Tape(keep=2_000).exchange({"model": "m", "input": f"hi {n}"}, body)
            middle = time.perf_counter()
            assert finished is not None and scenario_from(finished, model="m") is not None
            tape_times.append(middle - start)
            scenario_times.append(time.perf_counter() - middle)
        print(f"{n:>9} {statistics.median(tape_times):>8.2f} {statistics.median(scenario_times):>11.2f}")


if __name__ == "__main__":
    main()
