"""How long one scenario template holds the event loop from its worker thread, and what it builds.

A render runs in a worker thread, but a filter that works through a long text inside one C call
(a regular expression over it, a new object per item) keeps the interpreter lock for the whole
call, and the event loop with it. For each template this renders on a value of 900,000 characters
in a worker thread while the event loop ticks every half millisecond, and prints the median over
`--runs` of the longest gap between ticks, the render's peak memory (tracemalloc, a run of its
own) and how the render ended.

    .venv/bin/python bench/template_gap.py
    .venv/bin/python bench/template_gap.py --runs 5 "{{ m|title|length }}"
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import tracemalloc

from jinja2 import StrictUndefined

from ptc_emulator.emulator.model.scripted import templating

BUILD = "{% set s = input * (100000 // input|length) %}{% set m = s ~ s ~ s ~ s ~ s ~ s ~ s ~ s ~ s %}"
INPUTS = ("x y ", "\u00e9 \u0101\n", 'a<b>&"', "\n")
CASES = (
    *("{{ m|title|length }}", "{{ m|capitalize|length }}", "{{ m|wordcount }}", "{{ m|striptags|length }}"),
    *("{{ m|pprint|length }}", "{{ m|tojson|length }}", "{{ m|urlencode|length }}", "{{ ('%r' % m)|length }}"),
    *("{{ m|sort|length }}", "{{ m|unique|list|length }}", "{{ m|groupby('x')|length }}", "{{ m|list|length }}"),
    *("{{ m|batch(3)|list|length }}", "{{ m|slice(3)|list|length }}", "{{ m.split()|length }}"),
    *("{{ m|wordwrap(5)|length }}", "{{ m|urlize|length }}", "{{ m|indent(1)|length }}", "{{ m|e|length }}"),
)
_env = templating.BoundedEnvironment(undefined=StrictUndefined, autoescape=False)


def _ended(template: object, value: str) -> str:
    try:
        return f"{len(templating.render(template, {'input': value}))} chars"  # type: ignore[arg-type]
    except Exception as e:
        return f"refused: {str(e)[:60]}"


async def _gap(template: object, value: str) -> float:
    task = asyncio.ensure_future(asyncio.to_thread(_ended, template, value))
    longest, last = 0.0, time.perf_counter()
    while not task.done():
        await asyncio.sleep(0.0005)
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    await task
    return longest


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("cases", nargs="*", default=CASES)
    args = parser.parse_args()
    print(f"{'loop gap':>10} {'peak':>8}  {'input':8} {'template':36} ended")
    for case in args.cases:
        template = _env.from_string(BUILD + case)
        for value in INPUTS:
            gaps = [await _gap(template, value) for _ in range(args.runs)]
            tracemalloc.start()
            ended = _ended(template, value)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(f"{statistics.median(gaps) * 1000:7.1f} ms {peak / 2**20:5.1f} MB  {value!r:8} {case:36} {ended}")


if __name__ == "__main__":
    asyncio.run(main())
