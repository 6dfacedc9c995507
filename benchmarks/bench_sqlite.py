"""SQLiteStore figures, each beside a bare sqlite3 loop doing the same SQL on the same disk.

1. schedule(): N jobs one call (one transaction) each, and N in one ``Scheduler.batch()``; beside
   them, bare INSERTs of the same rows (one transaction each, and one executemany);
2. claim + run + complete of N no-op jobs due now, by 1 and 2 worker processes; beside it, bare
   processes that claim with a guarded ``UPDATE .. RETURNING`` and complete, one transaction
   each (the physical floor: duetime writes the same two transactions per run);
3. opening a file that holds 100 000 jobs: seconds, and the memory the open costs.

Run: python benchmarks/bench_sqlite.py [--quick] (nox -s bench). Real time and a real disk are
the point here; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from datetime import datetime, timezone
from pathlib import Path

from _common import parse, run_workers

from duetime import At, Scheduler, SQLiteStore


def noop() -> None:
    """The benchmark's job: does nothing, so the figures are the scheduler's own."""


def fresh(folder: Path, name: str) -> Path:
    path = folder / name
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


# -- 1. schedule ------------------------------------------------------------------------------------


def duetime_schedule(path: Path, n: int, batch: bool) -> float:
    s = Scheduler(store=SQLiteStore(path))
    s.register("noop", noop)
    when = At(datetime(2030, 1, 1, tzinfo=timezone.utc))
    t0 = time.perf_counter()
    if batch:
        with s.batch():
            for i in range(n):
                s.schedule("noop", when, id=f"j{i}")
    else:
        for i in range(n):
            s.schedule("noop", when, id=f"j{i}")
    elapsed = time.perf_counter() - t0
    s.shutdown()
    return n / elapsed


BARE_SCHEMA = (
    "CREATE TABLE jobs (id TEXT PRIMARY KEY, task TEXT, args TEXT, due INTEGER, state TEXT, "
    "worker TEXT, lease INTEGER)"
)


def bare_connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    return db


def bare_schedule(path: Path, n: int, batch: bool) -> float:
    db = bare_connect(path)
    db.execute(BARE_SCHEMA)
    db.execute("CREATE INDEX jobs_due ON jobs (state, due)")
    rows = [(f"j{i}", "noop", '{"args":[],"kwargs":{}}', i, "scheduled") for i in range(n)]
    sql = "INSERT INTO jobs (id, task, args, due, state) VALUES (?, ?, ?, ?, ?)"
    t0 = time.perf_counter()
    if batch:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(sql, rows)
        db.execute("COMMIT")
    else:
        for row in rows:
            db.execute("BEGIN IMMEDIATE")
            db.execute(sql, row)
            db.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    db.close()
    return n / elapsed


# -- 2. claim + run + complete --------------------------------------------------------------------

# (The no-op is the script's own: importing this module for it would cost each worker
# argparse and the benchmarks' helpers, ~25 ms of start-up the bare loops do not pay.)
WORKER = """
import sys, threading
from duetime import Scheduler
def noop():
    pass
s = Scheduler(store="sqlite:///" + sys.argv[1], executor="inline")
s.register("noop", noop)
s.start()
threading.Event().wait()
"""

BARE_WORKER = """
import os, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
me = str(os.getpid())
while True:
    db.execute("BEGIN IMMEDIATE")
    row = db.execute(
        "UPDATE jobs SET state = 'running', worker = ?, lease = ? WHERE id = ("
        "SELECT id FROM jobs WHERE state = 'scheduled' AND due <= ? ORDER BY due LIMIT 1) "
        "RETURNING id, task, args", (me, time.time_ns() + 30 * 10**9, time.time_ns())).fetchone()
    db.execute("COMMIT")
    if row is None:
        break
    db.execute("BEGIN IMMEDIATE")
    db.execute("UPDATE jobs SET state = 'done' WHERE id = ? AND worker = ?", (row[0], me))
    db.execute("COMMIT")
"""


def fill_due(path: Path, n: int) -> None:
    s = Scheduler(store=SQLiteStore(path))
    s.register("noop", noop)
    now = At(datetime.now(timezone.utc))
    with s.batch():
        for i in range(n):
            s.schedule("noop", now, id=f"j{i}")
    s.shutdown()


def count(path: Path, sql: str) -> int:
    db = sqlite3.connect(path, timeout=30)
    try:
        return int(db.execute(sql).fetchone()[0])
    finally:
        db.close()


def duetime_throughput(folder: Path, n: int, procs: int) -> float:
    path = fresh(folder, "run.db")
    fill_due(path, n)
    script = WORKER
    done = "SELECT count(*) FROM duetime_runs WHERE state = 'succeeded'"
    argv = [sys.executable, "-c", script, str(path)]
    return run_workers([argv] * procs, lambda: count(path, done), n)


def bare_throughput(folder: Path, n: int, procs: int) -> float:
    path = fresh(folder, "bare-run.db")
    db = bare_connect(path)
    db.execute(BARE_SCHEMA)
    db.execute("CREATE INDEX jobs_due ON jobs (state, due)")
    db.executemany(
        "INSERT INTO jobs (id, task, args, due, state) VALUES (?, 'noop', '[]', 0, 'scheduled')",
        [(f"j{i}",) for i in range(n)],
    )
    db.close()
    done = "SELECT count(*) FROM jobs WHERE state = 'done'"
    argv = [sys.executable, "-c", BARE_WORKER, str(path)]
    return run_workers([argv] * procs, lambda: count(path, done), n)


# -- 3. opening a large store ---------------------------------------------------------------------


def open_large(folder: Path, n: int) -> tuple[float, float, float]:
    """Seconds to open a file of ``n`` jobs, the memory it costs (MiB), and per job (bytes)."""
    path = fresh(folder, "large.db")
    s = Scheduler(store=SQLiteStore(path))
    s.register("noop", noop)
    when = At(datetime(2030, 1, 1, tzinfo=timezone.utc))
    with s.batch():
        for i in range(n):
            s.schedule("noop", when, id=f"j{i}")
    s.shutdown()
    tracemalloc.start()
    t0 = time.perf_counter()
    s = Scheduler(store=SQLiteStore(path))
    elapsed = time.perf_counter() - t0
    size, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(s) == n
    s.shutdown()
    return elapsed, size / 2**20, size / n


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    n_schedule = 1_000 if args.quick else 10_000
    n_run = 1_000 if args.quick else 20_000
    n_large = 10_000 if args.quick else 100_000
    repeat = 1 if args.quick else 3
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        folder = Path(tmp)
        print(f"SQLite store on {folder} (WAL, synchronous=NORMAL); medians of {repeat}")

        print(f"\n1. schedule() of {n_schedule} jobs (jobs/s)")
        for batch in (False, True):
            label = "one batch" if batch else "one transaction each"
            d = statistics.median(
                duetime_schedule(fresh(folder, "s.db"), n_schedule, batch) for _ in range(repeat)
            )
            b = statistics.median(
                bare_schedule(fresh(folder, "b.db"), n_schedule, batch) for _ in range(repeat)
            )
            print(
                f"  {label:22} duetime {d:10.0f}/s   bare sqlite3 {b:10.0f}/s   ratio {b / d:5.2f}x"
            )

        print(f"\n2. claim + run + complete of {n_run} no-op jobs (runs/s)")
        for procs in (1, 2):
            d = statistics.median(duetime_throughput(folder, n_run, procs) for _ in range(repeat))
            b = statistics.median(bare_throughput(folder, n_run, procs) for _ in range(repeat))
            print(
                f"  {procs} process{'es' if procs > 1 else '  '}            duetime {d:10.0f}/s   "
                f"bare sqlite3 {b:10.0f}/s   ratio {b / d:5.2f}x"
            )

        elapsed, mib, per_job = open_large(folder, n_large)
        print(
            f"\n3. opening a file of {n_large} jobs: {elapsed:.2f} s, {mib:.1f} MiB ({per_job:.0f} B/job)"
        )


if __name__ == "__main__":
    main()
