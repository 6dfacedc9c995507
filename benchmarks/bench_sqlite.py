"""SQLiteStore figures, each beside a bare sqlite3 loop doing the same SQL on the same disk.

Both sides run the same durability settings: WAL and ``synchronous=NORMAL`` (duetime's), set on
every connection, bare workers' included (``synchronous`` is per connection: a bare worker that
leaves it at the default FULL syncs every commit, which made an earlier figure unfair). Rounds
are interleaved (each round runs every side once, in a rotating order), medians of the rounds.

1. schedule(): N jobs one call (one transaction) each, and N in one ``Scheduler.batch()``; beside
   them, bare INSERTs of the same rows (one transaction each, and one executemany);
2. claim + run + complete of N no-op jobs, by 1 and 2 worker processes; beside it, bare
   processes that claim with a guarded ``UPDATE .. RETURNING`` and complete, batch 1 (two
   transactions per run) and batch 10 (ten claimed in one transaction, completed in one).
   From start (the jobs due now, the workers' start-up counted) and steady state (the jobs due
   a few seconds after the workers start: counted from the due time);
3. a worker process opening a file of N stored jobs due over the next year (10 000, 100 000,
   1 000 000): seconds until it can claim, and its resident memory (RSS) after start.

Run: python benchmarks/bench_sqlite.py [--quick] (nox -s bench). Real time and a real disk are
the point here; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from _common import parse, run_workers, worker_env

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
import os, sqlite3, sys, threading, time
batch = int(sys.argv[2])
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
db.execute("PRAGMA synchronous = NORMAL")  # (as duetime's connections: per connection)
me = str(os.getpid())
idle = threading.Event()
while True:
    db.execute("BEGIN IMMEDIATE")
    ids = [r[0] for r in db.execute(
        "UPDATE jobs SET state = 'running', worker = ?, lease = ? WHERE id IN ("
        "SELECT id FROM jobs WHERE state = 'scheduled' AND due <= ? ORDER BY due LIMIT ?) "
        "RETURNING id, task, args", (me, time.time_ns() + 30 * 10**9, time.time_ns(), batch))]
    db.execute("COMMIT")
    if not ids:
        idle.wait(0.005)  # (nothing due: poll again soon, as a worker waiting for work does)
        continue
    db.execute("BEGIN IMMEDIATE")
    db.executemany("UPDATE jobs SET state = 'done' WHERE id = ? AND worker = ?",
                   [(i, me) for i in ids])
    db.execute("COMMIT")
"""


def fill_due(path: Path, n: int, due: datetime) -> None:
    s = Scheduler(store=SQLiteStore(path))
    s.register("noop", noop)
    when = At(due)
    with s.batch():
        for i in range(n):
            s.schedule("noop", when, id=f"j{i}")
    s.shutdown()


def count(path: Path, sql: str) -> int:
    db = sqlite3.connect(path, timeout=30)
    try:
        return int(db.execute(sql).fetchone()[0])
    finally:
        db.close()


def _due(lead: float) -> int | None:
    """The instant (epoch ns) to count from: None for the workers' start (``lead`` 0), else
    ``lead`` seconds from now, when the jobs fall due (the workers have started by then, and
    wait: the steady state)."""
    return time.time_ns() + int(lead * 1e9) if lead else None


def duetime_throughput(folder: Path, n: int, procs: int, lead: float = 0.0) -> float:
    path = fresh(folder, "run.db")
    since = _due(lead)
    fill_due(path, n, datetime.fromtimestamp((since or time.time_ns()) / 1e9, timezone.utc))
    done = "SELECT count(*) FROM duetime_runs WHERE state = 'succeeded'"
    argv = [sys.executable, "-c", WORKER, str(path)]
    return run_workers([argv] * procs, lambda: count(path, done), n, since)


def bare_throughput(folder: Path, n: int, procs: int, batch: int, lead: float = 0.0) -> float:
    path = fresh(folder, "bare-run.db")
    since = _due(lead)
    db = bare_connect(path)
    db.execute(BARE_SCHEMA)
    db.execute("CREATE INDEX jobs_due ON jobs (state, due)")
    db.executemany(
        "INSERT INTO jobs (id, task, args, due, state) VALUES (?, 'noop', '[]', ?, 'scheduled')",
        [(f"j{i}", since or 0) for i in range(n)],
    )
    db.close()
    done = "SELECT count(*) FROM jobs WHERE state = 'done'"
    argv = [sys.executable, "-c", BARE_WORKER, str(path), str(batch)]
    return run_workers([argv] * procs, lambda: count(path, done), n, since)


def interleaved(measures: dict[str, Callable[[], float]], repeat: int) -> dict[str, float]:
    """The median of ``repeat`` rounds of each measure (runs/s), every round running each side
    once, in an order that rotates (a slow spell of the machine falls on every side alike)."""
    names = list(measures)
    found: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeat):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            found[name].append(measures[name]())
    return {name: statistics.median(rates) for name, rates in found.items()}


# -- 3. opening a large store ---------------------------------------------------------------------


OPENER = """
import resource, sys, time
t0 = time.perf_counter()
from duetime import Scheduler
s = Scheduler(store="sqlite:///" + sys.argv[1])
s.register("noop", lambda: None)
elapsed = time.perf_counter() - t0
with open("/proc/self/status") as f:
    rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
print(elapsed, rss / 1024)
s.shutdown()
"""


def fill_year(path: Path, n: int) -> None:
    """``n`` one-shot jobs due over the next year, written with the store's own batch."""
    s = Scheduler(store=SQLiteStore(path))
    s.register("noop", noop)
    start = time.time()
    year = 365 * 86_400
    with s.batch():
        for i in range(n):
            when = datetime.fromtimestamp(start + 60 + year * i / n, timezone.utc)
            s.schedule("noop", At(when), id=f"j{i}")
    s.shutdown()


def open_large(folder: Path, n: int, repeat: int) -> tuple[float, float]:
    """A worker process opening a file of ``n`` jobs: seconds from its start until it can
    claim (import and open included), and its RSS after (MiB); medians of ``repeat``."""
    path = fresh(folder, "large.db")
    fill_year(path, n)
    times, sizes = [], []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", OPENER, str(path)],
            capture_output=True,
            text=True,
            check=True,
            env=worker_env(),
        ).stdout.split()
        times.append(float(out[0]))
        sizes.append(float(out[1]))
    return statistics.median(times), statistics.median(sizes)


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    n_schedule = 1_000 if args.quick else 10_000
    n_run = 1_000 if args.quick else 20_000
    sizes = (1_000, 10_000) if args.quick else (10_000, 100_000, 1_000_000)
    repeat = 1 if args.quick else 3
    lead = 2.0 if args.quick else 4.0
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        folder = Path(tmp)
        print(
            f"SQLite store on {folder}; both sides WAL + synchronous=NORMAL on every connection; "
            f"rounds interleaved, medians of {repeat}"
        )

        print(f"\n1. schedule() of {n_schedule} jobs (jobs/s)")
        for batch in (False, True):
            label = "one batch" if batch else "one transaction each"
            rates = interleaved(
                {
                    "duetime": lambda b=batch: duetime_schedule(
                        fresh(folder, "s.db"), n_schedule, b
                    ),
                    "bare": lambda b=batch: bare_schedule(fresh(folder, "b.db"), n_schedule, b),
                },
                repeat,
            )
            d, b = rates["duetime"], rates["bare"]
            print(
                f"  {label:22} duetime {d:10.0f}/s   bare sqlite3 {b:10.0f}/s   "
                f"duetime / bare {d / b:5.2f}"
            )

        print(f"\n2. claim + run + complete of {n_run} no-op jobs (runs/s)")
        for title, start_lead in (("from start (start-up counted)", 0.0), ("steady state", lead)):
            print(f"  {title}:")
            for procs in (1, 2):
                rates = interleaved(
                    {
                        "duetime": lambda p=procs, w=start_lead: duetime_throughput(
                            folder, n_run, p, w
                        ),
                        "bare 1": lambda p=procs, w=start_lead: bare_throughput(
                            folder, n_run, p, 1, w
                        ),
                        "bare 10": lambda p=procs, w=start_lead: bare_throughput(
                            folder, n_run, p, 10, w
                        ),
                    },
                    repeat,
                )
                d, b1, b10 = rates["duetime"], rates["bare 1"], rates["bare 10"]
                print(
                    f"    {procs} process{'es' if procs > 1 else '  '}  duetime {d:8.0f}/s   "
                    f"bare batch 1 {b1:8.0f}/s   bare batch 10 {b10:8.0f}/s   "
                    f"duetime / batch 1 {d / b1:5.2f}   duetime / batch 10 {d / b10:5.2f}"
                )

        print(
            "\n3. a worker opening a file of N jobs due over the next year (goal: <= 1 s, <= 80 MB)"
        )
        for n in sizes:
            elapsed, mib = open_large(folder, n, repeat)
            print(f"  {n:>9} jobs: can claim after {elapsed:6.2f} s, RSS {mib:7.1f} MiB")


if __name__ == "__main__":
    main()
