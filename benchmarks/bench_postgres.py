"""PostgresStore figures, each beside a bare psycopg loop on the same server, in the same run.

1. claim + run + complete of N no-op jobs due now, by 1, 2 and 4 worker processes; beside it,
   bare processes that claim with ``FOR UPDATE SKIP LOCKED`` and complete, one job per
   transaction (batch 1) and ten (batch 10); below each row, the CPU seconds per 1 000 runs
   of duetime's and of the batch-10 loop's median run: its worker processes', and the rest of
   the machine's (the server's). Timed from the first worker's start: start-up (imports,
   a duetime worker's loading of the jobs) counts. 1b: the same with the jobs due a few
   seconds after the workers start, timed from that instant: the steady state;
2. latency from ``schedule()`` of a job due now in this process to its start in a worker
   process that sleeps (LISTEN/NOTIFY): p50 and p99;
3. idle: 4 workers holding 1 000 jobs an hour out, for 10 s: CPU seconds each, and the
   transactions per second the server sees from all of them.

Run: python benchmarks/bench_postgres.py [--quick] [--repeat N] (nox -s bench; medians of at most
3). Needs a PostgreSQL server:
DUETIME_BENCH_PG_DSN, default postgresql://postgres@127.0.0.1:5432/postgres (a database
duetime_bench is created and dropped). The figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import _common
import psycopg
from _common import parse, process_seconds, run_workers

from duetime import At, Scheduler

SERVER = os.environ.get("DUETIME_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
NAME = "duetime_bench"
DSN = urlunsplit(urlsplit(SERVER)._replace(path=f"/{NAME}"))


def noop() -> None:
    """The benchmark's job: does nothing, so the figures are the scheduler's own."""


def fresh_database() -> None:
    with psycopg.connect(SERVER, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {NAME}")


def drop_database() -> None:
    with psycopg.connect(SERVER, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")


def scalar(conn: psycopg.Connection[Any], query: str) -> int:
    found = conn.execute(query).fetchone()
    return int(found[0]) if found else 0


def watched(
    argvs: list[list[str]], waiting: str, done: str, n: int, due_ns: int | None = None
) -> float:
    """``run_workers``, counting finished runs with ``done`` on one connection (a connection
    per look would start a server process 50 times a second beside the workers), once
    ``waiting`` (a cheap indexed look) finds no job left to claim.

    (Counting every 20 ms from the start cost the server as much as a worker does: a count
    of 20 000 rows, each written two or three times, took up to 25 ms of a core here, on a
    machine of two.)"""
    with psycopg.connect(DSN, autocommit=True) as conn:

        def finished() -> int:
            return 0 if scalar(conn, waiting) else scalar(conn, done)

        return run_workers(argvs, finished, n, due_ns)


# -- 1. claim + run + complete ----------------------------------------------------------------------

# (The no-op is the script's own: importing this module for it would cost each worker
# argparse and the benchmarks' helpers, ~25 ms of start-up the bare loops do not pay.)
WORKER = """
import sys, threading
from duetime import Scheduler
def noop():
    pass
s = Scheduler(store=sys.argv[1], executor="inline")
s.register("noop", noop)
s.start()
threading.Event().wait()
"""

BARE_WORKER = """
import os, sys, time, psycopg
batch = int(sys.argv[2])
me = str(os.getpid())
with psycopg.connect(sys.argv[1], autocommit=True) as db:
    time.sleep(max(0, int(sys.argv[3]) - time.time_ns()) / 1e9)  # (the jobs' due time)
    while True:
        with db.transaction():
            ids = [r[0] for r in db.execute(
                "UPDATE bare SET state = 'running', worker = %s, lease = %s WHERE id IN ("
                "SELECT id FROM bare WHERE state = 'scheduled' AND due <= %s ORDER BY due "
                "LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING id",
                (me, time.time_ns() + 30 * 10**9, time.time_ns(), batch))]
        if not ids:
            break
        db.execute("UPDATE bare SET state = 'done' WHERE id = ANY(%s) AND worker = %s", (ids, me))
"""


def duetime_throughput(n: int, procs: int, lead: float = 0.0) -> float:
    """Runs per second of ``procs`` duetime workers on ``n`` jobs due in ``lead`` seconds:
    from the first start if the lead is 0 (start-up included), else from the due time."""
    fresh_database()
    s = Scheduler(store=DSN)
    s.register("noop", noop)
    # (With a lead, the due time leaves room for writing the jobs, ~0.03 ms each, and the
    # workers start ``lead`` seconds before it.)
    due = datetime.now(timezone.utc) + timedelta(seconds=lead + n / 4000 + 1 if lead else 0)
    with s.batch():
        for i in range(n):
            s.schedule("noop", At(due), id=f"j{i}")
    s.shutdown()
    if lead:
        time.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds() - lead))
    waiting = (
        "SELECT count(*) FROM (SELECT 1 FROM duetime.runs WHERE state = 'running' "
        "ORDER BY lease_until LIMIT 1) t"
    )
    done = "SELECT count(*) FROM duetime.runs WHERE state = 'succeeded'"
    argvs = [[sys.executable, "-c", WORKER, DSN]] * procs
    due_ns = int(due.timestamp() * 10**9) if lead else None
    return watched(argvs, waiting, done, n, due_ns)


def bare_throughput(n: int, procs: int, batch: int, lead: float = 0.0) -> float:
    """``duetime_throughput`` for the bare loop, ``batch`` jobs a transaction."""
    fresh_database()
    due_ns = time.time_ns() + int(lead * 10**9)
    with psycopg.connect(DSN, autocommit=True) as db:
        db.execute(
            "CREATE TABLE bare (id text PRIMARY KEY, task text, args text, due bigint, "
            "state text, worker text, lease bigint)"
        )
        db.execute("CREATE INDEX bare_due ON bare (due) WHERE state = 'scheduled'")
        db.execute(
            "INSERT INTO bare (id, task, args, due, state) "
            "SELECT 'j' || g, 'noop', '[]', %s, 'scheduled' FROM generate_series(1, %s) g",
            (due_ns if lead else 0, n),
        )
    waiting = (
        "SELECT count(*) FROM (SELECT 1 FROM bare WHERE state = 'scheduled' ORDER BY due LIMIT 1) t"
    )
    done = "SELECT count(*) FROM bare WHERE state = 'done'"
    argv = [sys.executable, "-c", BARE_WORKER, DSN, str(batch), str(due_ns)]
    return watched([argv] * procs, waiting, done, n, due_ns if lead else None)


# -- 2. latency -------------------------------------------------------------------------------------

LATENCY_WORKER = """
import os, sys, threading, time
sys.path.insert(0, {here!r})
from duetime import Scheduler
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
def mark(sent):
    os.write(fd, f"{{time.time_ns() - sent}}\\n".encode())
s = Scheduler(store=sys.argv[1])
s.register("mark", mark)
s.start()
print("ready", flush=True)
threading.Event().wait()
"""


def latency(samples: int) -> tuple[float, float]:
    """p50 and p99 milliseconds from schedule() here to the job's start in another process."""
    fresh_database()
    Scheduler(store=DSN).shutdown()  # (creates the schema before the worker starts)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "latency.txt"
        script = LATENCY_WORKER.format(here=str(Path(__file__).parent))
        worker = subprocess.Popen(
            [sys.executable, "-c", script, DSN, str(out)], stdout=subprocess.PIPE
        )
        try:
            assert worker.stdout is not None
            worker.stdout.readline()  # ready
            s = Scheduler(store=DSN)
            s.register("mark", noop)
            for i in range(samples):
                s.schedule("mark", 0, args=[time.time_ns()], id=f"l{i}")
                deadline = time.monotonic() + 10
                while (not out.exists() or len(out.read_text().split()) <= i) and (
                    time.monotonic() < deadline
                ):
                    time.sleep(0.0005)
                time.sleep(0.002)  # the worker settles its run before the next one comes
            s.shutdown()
        finally:
            worker.kill()
            worker.wait()
        values = sorted(int(v) / 1e6 for v in out.read_text().split())
    if len(values) < samples:
        raise RuntimeError(f"only {len(values)} of {samples} jobs started")
    return statistics.median(values), values[min(len(values) - 1, int(len(values) * 0.99))]


# -- 3. idle ----------------------------------------------------------------------------------------


def idle(seconds: float) -> tuple[list[float], float]:
    """CPU seconds each of 4 idle workers used over ``seconds``, and transactions per second."""
    fresh_database()
    s = Scheduler(store=DSN)
    s.register("noop", noop)
    later = At(datetime.now(timezone.utc) + timedelta(hours=1))
    with s.batch():
        for i in range(1000):
            s.schedule("noop", later, id=f"i{i}")
    s.shutdown()
    script = WORKER
    workers = [
        subprocess.Popen([sys.executable, "-c", script, DSN], stdout=subprocess.DEVNULL)
        for _ in range(4)
    ]
    xacts = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
    try:
        time.sleep(3.0)  # (started and loaded)
        with psycopg.connect(DSN, autocommit=True) as conn:
            before_cpu = [process_seconds(w.pid) for w in workers]
            conn.execute("SELECT pg_stat_clear_snapshot()")
            found = conn.execute(xacts).fetchone()
            before_tx = int(found[0]) if found else 0
            time.sleep(seconds)
            after_cpu = [process_seconds(w.pid) for w in workers]
            conn.execute("SELECT pg_stat_clear_snapshot()")
            found = conn.execute(xacts).fetchone()
            after_tx = int(found[0]) if found else 0
    finally:
        for w in workers:
            w.kill()
            w.wait()
    # (The two statistics reads of this connection are themselves two transactions.)
    per_second = (after_tx - before_tx - 2) / seconds
    return [a - b for a, b in zip(after_cpu, before_cpu, strict=True)], per_second


def median_run(
    measure: Callable[[], float], repeat: int
) -> tuple[float, tuple[float, float] | None]:
    """The median of ``repeat`` runs of ``measure()`` (runs/s), with the CPU seconds that run
    used (``_common.last_cpu``)."""
    runs = []
    for _ in range(repeat):
        rate = measure()
        runs.append((rate, _common.last_cpu))
    runs.sort(key=lambda run: run[0])
    return runs[(len(runs) - 1) // 2]


def per_thousand(name: str, cpu: tuple[float, float] | None, n: int) -> str:
    if cpu is None:
        return f"{name} n/a"
    workers, rest = (1000 * c / n for c in cpu)
    return f"{name} {workers:.3f} + {rest:.3f} s"


def throughput_row(n: int, procs: int, repeat: int, lead: float) -> None:
    d, d_cpu = median_run(partial(duetime_throughput, n, procs, lead), repeat)
    b1, _ = median_run(partial(bare_throughput, n, procs, 1, lead), repeat)
    b10, b10_cpu = median_run(partial(bare_throughput, n, procs, 10, lead), repeat)
    print(
        f"  {procs} process{'es' if procs > 1 else '  '}  duetime {d:8.0f}/s   "
        f"bare batch 1 {b1:8.0f}/s   bare batch 10 {b10:8.0f}/s   "
        f"duetime / batch 10 {d / b10:5.2f}"
    )
    print(
        "      CPU per 1 000 runs, workers + rest of the machine (server): "
        + per_thousand("duetime", d_cpu, n)
        + per_thousand(", bare batch 10", b10_cpu, n)
    )


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    n = 2_000 if args.quick else 20_000
    repeat = 1 if args.quick else min(args.repeat, 3)
    samples = 20 if args.quick else 300
    idle_s = 2.0 if args.quick else 10.0
    print(f"PostgreSQL store on {urlsplit(SERVER).netloc}; medians of {repeat}")
    try:
        print(f"\n1. claim + run + complete of {n} no-op jobs (runs/s), start-up included")
        for procs in (1, 2, 4):
            throughput_row(n, procs, repeat, 0.0)
        lead = 2.0 if args.quick else 3.0
        print(
            f"\n1b. the same, steady state: the jobs due {lead:g} s after the workers start, "
            "timed from then"
        )
        for procs in (1, 2, 4):
            throughput_row(n, procs, repeat, lead)
        p50, p99 = latency(samples)
        print(
            f"\n2. schedule() here -> start in another process, {samples} jobs: "
            f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
        )
        cpu, tps = idle(idle_s)
        print(
            f"\n3. idle, 4 workers x 1000 jobs an hour out, {idle_s:g} s: CPU "
            + ", ".join(f"{c:.2f}" for c in cpu)
            + f" s; {tps:.1f} transactions/s in total"
        )
    finally:
        drop_database()


if __name__ == "__main__":
    main()
