"""What counting a long text's tokens costs, by what it is made of (`emulator/responses/usage.py`).

A text over 65,536 characters is cut into pieces at line breaks a non-space character follows.
Each row counts a fresh 7,750,000-character text (a 15.5 MB body of JSON escapes for the line
breaks) with an empty cache, then again (the second count: its digest), and prints the medians
of three runs in seconds. Finding the cut stepped back over every line break a space followed,
in Python, and a text over 1 MiB was counted in full every time. Measured on a loaded 2-core
machine (load 7), first / again: before, line breaks 6.78 / 6.59 s, CRLF 4.64 / 4.77 s, line
break-space-letter 3.00 / 2.38 s, spaces, a letter or words 0.01-0.03 / 0.002 s; after, 0.17,
0.15 and 0.10 s / 0.004 s, and the others 0.02-0.03 / 0.004-0.009 s (the digest of the text).

    .venv/bin/python bench/long_text_count.py
"""

from __future__ import annotations

import statistics
import time

from ptc_emulator.emulator.responses import usage

N = 7_750_000
ROWS = {
    "line breaks": "\n",
    "CRLF": "\r\n",
    "line break, space, letter": "\n a",
    "spaces": " ",
    "one letter": "x",
    "words on lines": "word word\n",
}


def main() -> None:
    usage.encoding()
    for name, unit in ROWS.items():
        first, again = [], []
        for run in range(3):
            usage.clear_cache()
            text = (unit * (N // len(unit) + 1))[: N - 1] + str(run)
            start = time.perf_counter()
            usage.count(text)
            first.append(time.perf_counter() - start)
            start = time.perf_counter()
            usage.count(text)
            again.append(time.perf_counter() - start)
        print(f"{name:28} first {statistics.median(first):6.3f} s   again {statistics.median(again):6.3f} s")


if __name__ == "__main__":
    main()
