"""What `bench/floor.py` prints after its run: the medians beside the floor's, the shares, and
the goals of issue 31 beside each figure.

The shares, per measure: the emulator's own (the emulator minus the floor + V8 pool: what the
emulator does beyond the least a server on this sandbox must spend) and the sandbox's (the floor
+ V8 pool minus the floor: the pipe to a worker and V8).
"""

from __future__ import annotations

import os

from chains import ends

OWN_GOALS_MS = {"create": 0.6, "resume": 0.5}
"""The emulator's own share, at most (ms), for create and resume."""
OWN_CHAIN_GOAL = 0.15
"""The emulator's own share of the chain, at most, as a fraction of the floor + V8 pool's."""
SANDBOX_RESUME_GOAL_MS = 0.8
"""The sandbox's share of a live resume, at most (ms)."""
RESUMES_GOAL = 700
"""Resumes/s with 8 clients, at least."""
SOCKET_GOAL = 0.60
"""The chain over one WebSocket, at most, as a fraction of the same chain over HTTP store:false."""


def report(
    medians: dict[str, float],
    seen: dict[str, float],
    cpu: dict[str, float],
    sent: dict[str, int],
    load: dict[str, float],
    elapsed: float,
) -> bool:
    """Print the table; whether every goal was met."""
    rows = [
        ("create to suspend (2-call Promise.all)", "create"),
        ("resume to complete (a live resume)", "resume"),
        ("100-call store:false chain (101 requests)", "chain"),
    ]
    print()
    header = (
        f"{'measure':44} {'emulator':>11} {'floor':>11} {'floor + V8 pool':>20}   {'own share':>10} {'sandbox':>10}"
    )
    print(header)
    print("-" * len(header))
    met = True
    for label, key in rows:
        mine, base, least = medians[key], medians["f" + key], medians["s" + key]
        own, box = mine - least, least - base
        print(
            f"{label:44} {mine:8.2f} ms {base:8.2f} ms {least:8.2f} ms {least / base:6.2f}x"
            f"   {own:7.2f} ms {box:7.2f} ms"
        )
    print(f"{'resumes/s, 8 concurrent clients':44} {seen['resumes']:8.0f} /s {'':>11} {seen['least']:8.0f} /s")
    print(f"{'requests/s, the same run':44} {seen['requests']:8.0f} /s")
    http, by_id, socket = medians["chain"], medians["idchain"], medians["wschain"]
    print(f"{'100-call chain, HTTP previous_response_id':44} {by_id:8.2f} ms   = {by_id / http:.2f} of store:false")
    print(f"{'100-call chain, one WebSocket (store:false)':44} {socket:8.2f} ms   = {socket / http:.2f} of store:false")
    print("-" * len(header))
    print("goals (issue 31):")
    checks = []
    for key in ("create", "resume"):
        own = medians[key] - medians["s" + key]
        checks.append((f"own share, {key}", f"{own:.2f} ms", f"<= {OWN_GOALS_MS[key]} ms", own <= OWN_GOALS_MS[key]))
    own_chain = (medians["chain"] - medians["schain"]) / medians["schain"]
    checks.append(
        (
            "own share, chain",
            f"{own_chain:.0%} of floor + pool",
            f"<= {OWN_CHAIN_GOAL:.0%}",
            own_chain <= OWN_CHAIN_GOAL,
        )
    )
    box = medians["sresume"] - medians["fresume"]
    checks.append(
        (
            "sandbox share, live resume",
            f"{box:.2f} ms",
            f"<= {SANDBOX_RESUME_GOAL_MS} ms",
            box <= SANDBOX_RESUME_GOAL_MS,
        )
    )
    checks.append(
        ("resumes/s, 8 clients", f"{seen['resumes']:.0f}", f">= {RESUMES_GOAL}", seen["resumes"] >= RESUMES_GOAL)
    )
    ratio = socket / http
    checks.append(("WebSocket chain / HTTP store:false", f"{ratio:.2f}", f"<= {SOCKET_GOAL:.2f}", ratio <= SOCKET_GOAL))
    for label, value, goal, ok in checks:
        met &= ok
        print(f"  {label:36} {value:>22} {goal:>10}   {'met' if ok else 'NOT met'}")
    print("-" * len(header))
    for label, prefix, n in (
        ("create and resume", "", sent["emulator"]),
        ("the chain", "chain ", sent["chain"]),
    ):
        n = max(1, n)
        server_ms, workers_ms = cpu[prefix + "server"] * 1000 / n, cpu[prefix + "workers"] * 1000 / n
        floor_ms, sandboxed_ms = cpu[prefix + "floor"] * 1000 / n, cpu[prefix + "sandboxed"] * 1000 / n
        print(
            f"CPU per request, {label} ({n}): server {server_ms:.2f} ms + V8 workers {workers_ms:.2f} ms;"
            f" floor {floor_ms:.2f} ms (server/floor {server_ms / max(floor_ms, 1e-9):.2f}x);"
            f" floor + V8 pool {sandboxed_ms:.2f} ms"
        )
    n = max(1, round(seen["requests"] * elapsed))
    client_ms, server_ms, workers_ms = (load[k] * 1000 / n for k in ("client", "server", "workers"))
    busy = sum(load.values()) / elapsed / (os.cpu_count() or 1) * 100
    print(
        f"CPU per request, 8 clients ({n}): client {client_ms:.2f} ms + server {server_ms:.2f} ms"
        f" + V8 workers {workers_ms:.2f} ms; the cores {busy:.0f}% busy"
    )
    with open("/proc/loadavg", encoding="ascii") as f:
        print(f"load average at the end: {' '.join(f.read().split()[:3])}")
    print("goals met" if met else "goals not all met")
    return met


def report_long(steps: dict[str, list[float]]) -> None:
    """A step of the 400-call chain near its start and near its end (medians of 10 steps each):
    whether a step's cost grows with the conversation."""
    print("a step of a 400-call chain, early (steps 2-11) and late (the 10 before the last), medians:")
    for label, key in (
        ("one WebSocket (previous_response_id)", "socket"),
        ("HTTP store:false (the whole input)", "replayed"),
        ("the floor, sent the same bodies", "floor"),
    ):
        early, late = ends(steps[key])
        print(f"  {label:<40} {early:6.2f} ms -> {late:6.2f} ms  ({late - early:+.2f} ms)")
