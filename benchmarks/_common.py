"""Shared helpers: medians over repeats, and a plain-text table with ratios to a reference."""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import resource
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


#: CPU seconds the last ``run_workers`` call used: (its worker processes, the rest of the
#: machine: the database server and this process's counting), or None where the machine's
#: total cannot be read (``/proc/stat``: Linux).
last_cpu: tuple[float, float] | None = None


def _busy_seconds() -> float | None:
    """CPU seconds the whole machine has been busy since boot, or None where unknown."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    # (user nice system idle iowait irq softirq steal: the guest columns after them are
    # counted in user and nice already.)
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _children_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_seconds(pid: int) -> float:
    """CPU seconds process ``pid`` has used so far, all its threads (Linux's ``/proc``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_workers(
    argvs: Sequence[Sequence[str]],
    finished: Callable[[], int],
    n: int,
    due_ns: int | None = None,
) -> float:
    """Start one process per argv, wait until ``finished()`` reaches ``n``, kill them; runs per
    second from the first start (the store benchmarks' throughput), start-up included, or
    from ``due_ns`` (the jobs' due time, ``time.time_ns()``) if given: the steady state, the
    workers started and waiting. The CPU time it took goes to ``last_cpu``.

    (Two cores run both the workers and the server here: where duetime's figure trails the
    bare loop's, the CPU seconds say whether the machine ran out of them, and on which side.)"""
    global last_cpu
    env = worker_env()
    busy0, children0 = _busy_seconds(), _children_seconds()
    t0 = time.perf_counter()
    workers = [subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, env=env) for argv in argvs]
    try:
        if due_ns is not None:
            time.sleep(max(0, due_ns - time.time_ns()) / 1e9)
            busy0 = _busy_seconds()
            # (Per process, not RUSAGE_CHILDREN: that counts a child only once it has ended,
            # start-up and all.)
            started = sum(process_seconds(w.pid) for w in workers)
        deadline = time.monotonic() + 600
        while finished() < n and time.monotonic() < deadline:
            time.sleep(0.02)
        if due_ns is None:
            elapsed = time.perf_counter() - t0
        else:
            elapsed = (time.time_ns() - due_ns) / 1e9
            workers_cpu = sum(process_seconds(w.pid) for w in workers) - started
        busy1 = _busy_seconds()
    finally:
        for w in workers:
            w.kill()
            w.wait()
    if due_ns is None:
        workers_cpu = _children_seconds() - children0
    last_cpu = (
        None if busy0 is None or busy1 is None else (workers_cpu, busy1 - busy0 - workers_cpu)
    )
    done = finished()
    if done < n:
        raise RuntimeError(f"only {done} of {n} runs finished")
    return n / elapsed
