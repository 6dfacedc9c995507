"""Shared helpers: medians over repeats, and a plain-text table with ratios to a reference."""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence


def parse(description: str, *, jobs: bool = False) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes, one repeat (CI smoke run)")
    p.add_argument("--repeat", type=int, default=5, help="repeats per measurement (median)")
    if jobs:
        p.add_argument("--jobs", type=int, help="run only the throughput benchmark, at this size")
    args = p.parse_args()
    if args.quick:
        args.repeat = 1
    return args


def median_times(fns: Mapping[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median wall seconds of each ``fn()``, the peers interleaved round by round.

    Each round runs every peer once, starting with a different one each time, so a slow
    spell of a shared machine (another tenant, a frequency change) falls on all peers alike
    instead of on whichever happened to be measured then.
    """
    names = list(fns)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeat):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            gc.collect()
            t0 = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def table(title: str, unit: str, rows: Sequence[tuple[str, float | None]], ref: str) -> None:
    """Print rows of (name, value) with the ratio of each value to the row named ``ref``."""
    base = dict(rows)[ref]
    print(f"\n{title}")
    print(f"  {'':34} {unit:>14} {'ratio to ' + ref:>22}")
    for name, value in rows:
        if value is None:
            print(f"  {name:34} {'n/a':>14}")
            continue
        ratio = f"{value / base:.2f}x" if base else "-"
        print(f"  {name:34} {value:14.3f} {ratio:>22}")


_WORKER_ENV: dict[str, str] | None = None


def worker_env() -> dict[str, str]:
    """The environment of the benchmarks' worker processes: Python's compiled bytecode kept
    (in a directory of its own, filled once before the first worker starts).

    A deployed program imports its packages from bytecode compiled at install. Machines that
    set ``PYTHONDONTWRITEBYTECODE`` (as this project's do) would instead make every worker of
    an editable install compile duetime from source (about 0.15 s), a start-up cost the bare
    loops (psycopg, compiled by pip at install) do not pay.
    """
    global _WORKER_ENV
    if _WORKER_ENV is None:
        cache = tempfile.mkdtemp(prefix="duetime-bench-pyc-")
        atexit.register(shutil.rmtree, cache, True)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        # Everything a worker imports (with the cache set, even the standard library's modules
        # are compiled again into it): duetime, the drivers, the benchmark modules themselves.
        here = os.path.dirname(os.path.abspath(__file__))
        warm = (
            f"import sys\nsys.path.insert(0, {here!r})\nimport duetime, sqlite3, threading\n"
            "for name in ('psycopg', 'bench_postgres', 'bench_sqlite'):\n"
            "    try:\n        __import__(name)\n    except ImportError:\n        pass\n"
        )
        subprocess.run([sys.executable, "-c", warm], env=env, check=True)
        _WORKER_ENV = env
    return _WORKER_ENV


def run_workers(argvs: Sequence[Sequence[str]], finished: Callable[[], int], n: int) -> float:
    """Start one process per argv, wait until ``finished()`` reaches ``n``, kill them; runs per
    second from the first start (the store benchmarks' throughput), start-up included."""
    env = worker_env()
    t0 = time.perf_counter()
    workers = [subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, env=env) for argv in argvs]
    try:
        deadline = time.monotonic() + 600
        while finished() < n and time.monotonic() < deadline:
            time.sleep(0.02)
        elapsed = time.perf_counter() - t0
    finally:
        for w in workers:
            w.kill()
            w.wait()
    done = finished()
    if done < n:
        raise RuntimeError(f"only {done} of {n} runs finished")
    return n / elapsed
