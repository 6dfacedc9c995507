"""A/B timing of the in-memory scheduler's hot paths between two source trees.

Usage: ``python tools/ab_core.py OLD_SRC NEW_SRC [ROUNDS]``. Each round runs both trees in
fresh processes, interleaved, and the medians are compared: one-shot jobs scheduled and run
by hand (the core benchmark's case), a recurring job run by hand, schedule + cancel, and a
job that fails and retries.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

CASE = r"""
import random, time
from duetime import FakeClock, Scheduler
from duetime import FixedRate
from duetime.retry import FixedBackoff

def noop(): pass
def bad(): raise ValueError

def one_shots():
    rng = random.Random(1)
    delays = [rng.uniform(0, 86_400) for _ in range(200_000)]
    s = Scheduler(clock=FakeClock())
    t = time.perf_counter()
    for d in delays:
        s.schedule(noop, d)
    s.run_until(86_401)
    return time.perf_counter() - t

def recurring():
    s = Scheduler(clock=FakeClock())
    s.schedule(noop, FixedRate(1.0))
    t = time.perf_counter()
    s.run_for(100_000)
    return time.perf_counter() - t

def cancels():
    s = Scheduler(clock=FakeClock())
    t = time.perf_counter()
    for i in range(100_000):
        s.cancel(s.schedule(noop, 10.0 + i))
    return time.perf_counter() - t

def retries():
    s = Scheduler(clock=FakeClock())
    t = time.perf_counter()
    for i in range(20_000):
        s.schedule(bad, float(i), retry=FixedBackoff([1.0]))
    s.run_until(30_000)
    return time.perf_counter() - t

import logging; logging.disable(logging.CRITICAL)
print(one_shots(), recurring(), cancels(), retries())
"""
NAMES = ["one-shots", "recurring", "cancels", "retries"]


def run(src: str) -> list[float]:
    out = subprocess.run(
        [sys.executable, "-c", CASE],
        env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [float(x) for x in out.split()]


def main() -> None:
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    a: list[list[float]] = []
    b: list[list[float]] = []
    for _ in range(rounds):
        a.append(run(old))
        b.append(run(new))
    for i, name in enumerate(NAMES):
        ma = statistics.median(r[i] for r in a)
        mb = statistics.median(r[i] for r in b)
        print(f"{name:10s} old {ma:.3f}s  new {mb:.3f}s  new/old {mb / ma:.3f}")


if __name__ == "__main__":
    main()
