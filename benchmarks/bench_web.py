"""The dashboard over a large store: how long its jobs page and ``/api/jobs`` take to answer.

The store's tables are filled by a bulk SQL insert (1 000 000 jobs, one run record for every
tenth; a SQLite file, and PostgreSQL if a server answers), then each request is sent through
the ASGI application in-process (Starlette's test client: no network), its one-second cache
emptied before each so that every answer reads the store. Requests: the first page, a page in
the middle (keyset: ``?after=<id>``), the jobs in a rare state (``paused``: one in a thousand),
and the same through ``/api/jobs``. The contract: each answers in at most 200 ms (the median of
the repeats); the script exits with status 1 if one does not. One action (Pause) is timed too,
without a limit: it opens a Scheduler on the store that loads the one job acted on.

Run: python benchmarks/bench_web.py [--quick] [--repeat N] (nox -s bench). --quick: 10 000
jobs, one repeat. PostgreSQL: DUETIME_BENCH_PG_DSN, default
postgresql://postgres@127.0.0.1:5432/postgres (a database duetime_bench_web is created and
dropped); without a server that part is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from _common import median_times, parse
from starlette.testclient import TestClient

from duetime import Scheduler, SQLiteStore
from duetime.web import create_app

SERVER = os.environ.get("DUETIME_BENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
NAME = "duetime_bench_web"
DSN = urlunsplit(urlsplit(SERVER)._replace(path=f"/{NAME}"))
LIMIT_S = 0.200  # the contract: each answer within 200 ms (median)
HOUR_NS = 3600 * 10**9

_CRON = json.dumps(
    {"type": "cron", "expr": "0 9 * * *", "tz": "Europe/Berlin", "start": None, "end": None},
    separators=(",", ":"),
)
_RATE = json.dumps(
    {"type": "fixed_rate", "interval": [["minutes", 5]], "start": None}, separators=(",", ":")
)


def job_rows(n: int, now: int) -> Iterator[tuple[Any, ...]]:
    """``n`` job rows in the tables' column order (id, rev, name, task, ..., updated)."""
    for i in range(n):
        state = "paused" if i % 1000 == 7 else "scheduled"
        trigger = _CRON if i % 3 == 0 else _RATE
        due = now + (i % 86_400) * 10**9
        yield (
            f"job-{i:07d}",  # id
            i + 1,  # rev
            f"report {i}",  # name
            "reports:send",  # task
            '{"args":[],"kwargs":{}}',  # args
            trigger,
            None,  # retry
            "{}",  # options
            0,  # priority
            state,
            due,  # next_base
            due,  # next_due
            None,  # sides
            0,  # catchup
            1,  # attempt
            i % 7,  # runs
            0,  # failures
            None,  # last_error
            now,  # updated
        )


def run_rows(n: int, now: int) -> Iterator[tuple[Any, ...]]:
    """A finished run record for every tenth of ``n`` jobs, in the last day."""
    for i in range(0, n, 10):
        due = now - (i % 86_400) * 10**9
        state = "dead" if i % 70 == 0 else "succeeded"
        error = "ValueError: no" if state == "dead" else None
        yield (f"job-{i:07d}@{due}", f"job-{i:07d}", due, state, 1, "bench:1:x", None, due + 10**6,
               due + 2 * 10**6, error)  # fmt: skip


JOB_INSERT = (
    "INSERT INTO {t}jobs (id, rev, name, task, args, trigger, retry, options, priority, state, "
    "next_base, next_due, sides, catchup, attempt, runs, failures, last_error, updated) "
    "VALUES ({marks})"
)
RUN_INSERT = (
    "INSERT INTO {t}runs (key, job_id, due, state, attempt, worker, lease_until, started, "
    "finished, error) VALUES ({marks})"
)


def fill_sqlite(path: Path, n: int) -> None:
    Scheduler(store=SQLiteStore(path)).shutdown()  # (creates the tables)
    now = time.time_ns()
    with sqlite3.connect(path) as db:
        db.executemany(JOB_INSERT.format(t="duetime_", marks=", ".join("?" * 19)), job_rows(n, now))
        db.executemany(RUN_INSERT.format(t="duetime_", marks=", ".join("?" * 10)), run_rows(n, now))
        db.execute("UPDATE duetime_meta SET value = ? WHERE key = 'rev'", (n,))


def fill_postgres(n: int) -> None:
    Scheduler(store=DSN).shutdown()  # (creates the schema)
    now = time.time_ns()
    with psycopg.connect(DSN, autocommit=True) as conn:
        with conn.cursor().copy(
            "COPY duetime.jobs (id, rev, name, task, args, trigger, retry, options, priority, "
            "state, next_base, next_due, sides, catchup, attempt, runs, failures, last_error, "
            "updated) FROM STDIN"
        ) as copy:
            for row in job_rows(n, now):
                copy.write_row(row)
        with conn.cursor().copy(
            "COPY duetime.runs (key, job_id, due, state, attempt, worker, lease_until, started, "
            "finished, error) FROM STDIN"
        ) as copy:
            for row in run_rows(n, now):
                copy.write_row(row)
        conn.execute("SELECT setval('duetime.rev', %s)", (n,))
        conn.execute("ANALYZE")


def measure(store: Any, n: int, repeat: int, label: str) -> bool:
    """Time the requests on ``store``; print them; whether each met the contract."""
    app = create_app(store)
    board = app.state.dashboard
    middle = f"job-{n // 2:07d}"
    requests = {
        "/jobs (first page)": "/jobs",
        "/jobs?after=<middle>": f"/jobs?after={middle}",
        "/jobs?state=paused": "/jobs?state=paused",
        "/api/jobs": "/api/jobs",
        "/api/jobs?after=<middle>": f"/api/jobs?after={middle}",
        "/api/jobs?state=paused": "/api/jobs?state=paused",
    }
    ok = True
    with TestClient(app) as client:  # (start-up adds the (state, id) index, once)

        def get(path: str) -> None:
            board._cache.clear()
            response = client.get(path)
            if response.status_code != 200 or len(response.content) < 1000:
                raise SystemExit(f"{path}: {response.status_code} {response.text[:200]}")

        for path in requests.values():
            get(path)  # (warm: the file's pages in the OS cache, the connection open)
        fns = {name: (lambda p=path: get(p)) for name, path in requests.items()}
        times = median_times(fns, repeat)
        # An action opens a Scheduler on the store (loading that job alone): timed once.
        headers = {"X-CSRF-Token": client.cookies["duetime_csrf"]}
        t0 = time.perf_counter()
        action = client.post(f"/api/jobs/{middle}/pause", headers=headers)
        action_s = time.perf_counter() - t0
        if action.status_code != 200:
            raise SystemExit(f"pause: {action.status_code} {action.text[:200]}")
    print(f"\n{label}: {n:,} jobs; median of {repeat} (limit {LIMIT_S * 1000:.0f} ms)")
    for name, seconds in times.items():
        verdict = "ok" if seconds <= LIMIT_S else "TOO SLOW"
        ok = ok and seconds <= LIMIT_S
        print(f"  {name:30} {seconds * 1000:8.1f} ms  {verdict}")
    print(f"  {'POST pause (one action)':30} {action_s * 1000:8.1f} ms  (no limit: one job loaded)")
    return ok


def main() -> int:
    args = parse(__doc__ or "")
    n = 10_000 if args.quick else 1_000_000
    repeat = args.repeat if args.quick else max(3, args.repeat)
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "jobs.db"
        t0 = time.perf_counter()
        fill_sqlite(path, n)
        print(f"SQLite: {n:,} jobs inserted in {time.perf_counter() - t0:.1f} s")
        ok = measure(f"sqlite:///{path}", n, repeat, "SQLite") and ok
    try:
        admin = psycopg.connect(SERVER, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        print(f"\nPostgreSQL: skipped, no server at {SERVER} ({str(exc).strip()})")
        return 0 if ok else 1
    with admin:
        admin.execute(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {NAME}")
        try:
            t0 = time.perf_counter()
            fill_postgres(n)
            print(f"\nPostgreSQL: {n:,} jobs inserted in {time.perf_counter() - t0:.1f} s")
            ok = measure(DSN, n, repeat, "PostgreSQL") and ok
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {NAME} WITH (FORCE)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
