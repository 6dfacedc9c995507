"""PostgresStore: what is PostgreSQL's own, and many real worker processes on one database.

The durable-store suite (tests/test_sqlite.py, ``open_scheduler``), the conformance suite
(tests/test_stores.py) and every test written against the ``scheduler`` fixture run on
PostgreSQL too. This file adds the schema, the connection's faults, the wake-up by
LISTEN/NOTIFY, and real processes: several workers sharing 1 000 jobs, schedulers declaring the
same schedule, kill -9, SIGSTOP, ``pg_terminate_backend``, a restart herd and clocks that
disagree. Each test has a schema of its own in the session's throwaway database (conftest.py);
real-process tests wait for a condition with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import itertools
import logging
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from duetime import (
    Cron,
    FakeClock,
    InvalidArgument,
    PostgresStore,
    Scheduler,
    StoreError,
    current_run,
)

from . import workers
from .conftest import until

UTC = timezone.utc
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)

StoreMaker = Callable[..., PostgresStore]


@pytest.fixture
def url(pg_database: str, pg_schema: str) -> str:
    """The test's store as a URL (its own schema)."""
    return f"{pg_database}?schema={pg_schema}"


@pytest.fixture
def admin(pg_database: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection of the test's own to the test database, to look and to sabotage."""
    with psycopg.connect(pg_database, autocommit=True) as conn:
        yield conn


def _count(admin: psycopg.Connection[Any], schema: str, state: str) -> int:
    found = admin.execute(
        sql.SQL("SELECT count(*) FROM {}.runs WHERE state = %s").format(sql.Identifier(schema)),
        (state,),
    ).fetchone()
    assert found is not None
    return int(found[0])


# -- the schema --------------------------------------------------------------------------------------


def test_the_schema_is_created_on_first_use_under_any_name(
    pg_database: str, admin: psycopg.Connection[Any]
) -> None:
    odd = 'Odd "name"; DROP TABLE x'
    s = Scheduler(FakeClock(T0), store=PostgresStore(pg_database, schema=odd))
    s.register("print", print)
    s.schedule("print", 60, id="one")
    s.shutdown()
    tables = admin.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
        "ORDER BY table_name",
        (odd,),
    ).fetchall()
    assert [t for (t,) in tables] == ["dead", "jobs", "meta", "runs"]
    t = Scheduler(FakeClock(T0), store=f"{pg_database}?schema={odd}")
    assert [j.id for j in t.jobs()] == ["one"]
    t.shutdown()


def test_a_newer_schema_is_refused(pg_store: StoreMaker, pg_schema: str, admin: Any) -> None:
    Scheduler(FakeClock(T0), store=pg_store()).shutdown()
    admin.execute(
        sql.SQL("UPDATE {}.meta SET value = 99 WHERE key = 'schema'").format(
            sql.Identifier(pg_schema)
        )
    )
    with pytest.raises(StoreError, match=r"schema version is 99, newer than this duetime"):
        Scheduler(FakeClock(T0), store=pg_store())


def test_bad_arguments_and_unreachable_servers(pg_database: str) -> None:
    with pytest.raises(TypeError, match="dsn must be a str, got 5"):
        PostgresStore(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="schema must be a PostgreSQL name"):
        PostgresStore(pg_database, schema="")
    with pytest.raises(InvalidArgument, match="poll_interval must be positive"):
        PostgresStore(pg_database, poll_interval=0)
    with pytest.raises(InvalidArgument, match="store must look like 'postgresql://"):
        PostgresStore.from_url("mysql://x/y")
    store = PostgresStore.from_url("postgresql://app:s3cret@127.0.0.1:1/app?schema=jobs")
    assert store.schema == "jobs" and "s3cret" not in repr(store)
    with pytest.raises(
        StoreError, match=r"connecting failed.*check that PostgreSQL is running"
    ) as e:
        Scheduler(store=store)
    assert "s3cret" not in str(e.value)
    missing = pg_database.rsplit("/", 1)[0] + "/no_such_database_here"
    with pytest.raises(StoreError, match=r"create the database first"):
        Scheduler(store=missing)


def test_import_duetime_does_not_import_psycopg() -> None:
    code = "import sys, duetime; print('psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- claims, connections, notifications ------------------------------------------------------------


def test_a_claim_does_not_wait_for_a_job_another_transaction_holds(
    pg_store: StoreMaker, pg_schema: str, pg_database: str
) -> None:
    clock = FakeClock(T0)
    s = Scheduler(clock, store=pg_store())
    calls: list[str] = []
    s.register("rec", lambda: calls.append("ran"))
    s.schedule("rec", 10, id="held")
    with psycopg.connect(pg_database) as other:  # (a transaction, open until the block ends)
        other.execute(
            sql.SQL("SELECT 1 FROM {}.jobs WHERE id = 'held' FOR UPDATE").format(
                sql.Identifier(pg_schema)
            )
        )
        clock.advance(10)
        started = time.monotonic()
        assert s.run_pending() == 0  # busy: answered at once, tried again a moment later
        assert time.monotonic() - started < 2.0
        other.rollback()
    clock.advance(1)
    assert s.run_pending() == 1 and calls == ["ran"]
    s.shutdown()


def test_a_terminated_connection_is_reopened(
    pg_store: StoreMaker, admin: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(T0)
    s = Scheduler(clock, store=pg_store())
    ran: list[str] = []
    s.register("rec", lambda: ran.append(current_run().key))  # type: ignore[union-attr]
    s.schedule("rec", 10, id="a")
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name LIKE 'duetime%%' AND datname = current_database()"
    )
    caplog.set_level(logging.WARNING, "duetime")
    s.schedule("rec", 20, id="b")  # finds the connection dead, reconnects, goes on
    clock.advance(20)
    assert s.run_pending() == 2
    assert sorted(k.split("@")[0] for k in ran) == ["a", "b"]
    assert "lost the connection to PostgreSQL" in caplog.text
    s.shutdown()


def test_a_notification_wakes_a_sleeping_worker_at_once(pg_store: StoreMaker) -> None:
    # Real time: a worker asleep with an hour-long poll interval starts a job another process
    # scheduled long before the poll would have found it.
    started = threading.Event()
    worker = Scheduler(store=pg_store(poll_interval=3600), lease=3600)
    worker.register("go", started.set)
    worker.start()
    producer = Scheduler(store=pg_store())
    producer.register("go", started.set)
    try:
        producer.schedule("go", 0, id="now")
        assert started.wait(10.0)
    finally:
        producer.shutdown()
        worker.shutdown()


def test_two_schedulers_declaring_the_same_cron_run_each_fire_once_across_a_failover(
    pg_store: StoreMaker,
) -> None:
    clock = FakeClock(T0)
    keys: list[str] = []

    def make() -> Scheduler:
        s = Scheduler(clock, store=pg_store())
        s.register("rec", lambda: keys.append(current_run().key))  # type: ignore[union-attr]
        s.schedule("rec", Cron("*/5 * * * *"), id="report", replace=True)  # every copy declares it
        return s

    a, b = make(), make()
    for _ in range(60):
        clock.advance(30)
        a.run_pending()
        b.run_pending()
    a.shutdown()  # a fails over to c, which declares the schedule again
    c = make()
    for _ in range(60):
        clock.advance(30)
        b.run_pending()
        c.run_pending()
    b.shutdown()
    c.shutdown()
    expected = [
        f"report@{(T0 + timedelta(minutes=5 * i)).isoformat()}" for i in range(1, 13)
    ]  # one hour: 12 fires
    assert sorted(keys) == expected


# -- real processes ---------------------------------------------------------------------------------


def test_four_workers_share_1000_jobs_each_run_once(
    url: str, tmp_path: Path, admin: Any, pg_schema: str
) -> None:
    effects = tmp_path / "effects.txt"
    keys = workers.fill(url, 1000)
    # 2 ms of work per fire: one process alone would need 2 s, so all of them take part.
    procs = [workers.spawn(url, effects, "--work", "0.002") for _ in range(4)]
    try:
        until(
            lambda: _count(admin, pg_schema, "succeeded") == 1000, 60, "1000 fires", workers.EVERY
        )
    finally:
        workers.stop(procs)
    started = workers.lines(effects)
    assert sorted(k for k, _ in started) == sorted(keys)  # each fire once, none lost
    assert len({pid for _, pid in started}) >= 3  # the work was shared


def test_schedulers_declaring_the_same_fixed_rate_run_each_fire_once(
    url: str, tmp_path: Path, admin: Any, pg_schema: str
) -> None:
    effects = tmp_path / "effects.txt"
    anchor = str(int(time.time()))
    procs = [workers.spawn(url, effects, "--declare", anchor) for _ in range(2)]
    try:
        until(lambda: len(workers.lines(effects)) >= 25, 30, "25 ticks", workers.EVERY)
    finally:
        workers.stop(procs)
    keys = [k for k, _ in workers.lines(effects)]
    assert len(keys) == len(set(keys))  # no fire twice
    due = sorted(datetime.fromisoformat(k.split("@")[1]) for k in keys)
    steps = {round((b - a).total_seconds(), 3) for a, b in itertools.pairwise(due)}
    assert steps == {0.2}  # consecutive points of the one grid: none lost, one schedule


def test_workers_killed_at_random_lose_no_fire(
    url: str, tmp_path: Path, admin: Any, pg_schema: str
) -> None:
    effects = tmp_path / "effects.txt"
    keys = workers.fill(url, 300)
    rng = random.Random(11)
    procs = [workers.spawn(url, effects, "--work", "0.03") for _ in range(3)]
    kills = 0
    try:
        deadline = time.monotonic() + 60
        next_kill = time.monotonic() + rng.uniform(0.3, 0.8)
        while _count(admin, pg_schema, "succeeded") < 300 and time.monotonic() < deadline:
            if time.monotonic() >= next_kill:
                i = rng.randrange(3)
                procs[i].send_signal(signal.SIGKILL)
                procs[i].wait(timeout=10)
                kills += 1
                procs[i] = workers.spawn(url, effects, "--work", "0.03")
                next_kill = time.monotonic() + rng.uniform(0.3, 0.8)
            time.sleep(0.05)
    finally:
        workers.stop(procs)
    assert _count(admin, pg_schema, "succeeded") == 300, f"not all done after {kills} kills"
    ran = [k for k, _ in workers.lines(effects)]
    assert set(ran) == set(keys)  # no fire lost
    assert len(ran) - len(keys) <= kills  # repeats: at most one per kill
    assert kills >= 3


def test_a_stopped_worker_loses_its_run_and_its_late_outcome_is_refused(
    url: str, tmp_path: Path, admin: Any, pg_schema: str
) -> None:
    effects = tmp_path / "effects.txt"
    done = Path(f"{effects}.done")
    (key,) = workers.fill(url, 1)
    zombie = workers.spawn(url, effects, "--work", "1.0")
    procs = [zombie]
    try:
        until(lambda: len(workers.lines(effects)) == 1, 20, "the first start", workers.EVERY)
        zombie.send_signal(signal.SIGSTOP)  # mid-run: it stops renewing its lease (2 s)
        other = workers.spawn(url, effects, "--work", "1.0")
        procs.append(other)
        until(
            lambda: _count(admin, pg_schema, "succeeded") == 1,
            30,
            "the other worker",
            workers.EVERY,
        )
        zombie.send_signal(signal.SIGCONT)
        until(lambda: len(workers.lines(done)) == 2, 20, "both ends", workers.EVERY)
    finally:
        workers.stop(procs)
    starts = workers.lines(effects)
    assert [k for k, _ in starts] == [key, key]  # started twice: at-least-once start
    assert [pid for _, pid in starts] == [str(zombie.pid), str(other.pid)]
    rows = admin.execute(
        sql.SQL("SELECT state, attempt, worker FROM {}.runs").format(sql.Identifier(pg_schema))
    ).fetchall()
    # Recorded once, as the other worker's attempt 2: the zombie's late outcome was refused.
    assert [(state, attempt, worker.split(":")[1]) for state, attempt, worker in rows] == [
        ("succeeded", 2, str(other.pid))
    ]


def test_terminated_connections_lose_and_double_nothing(
    url: str, tmp_path: Path, admin: Any, pg_schema: str
) -> None:
    effects = tmp_path / "effects.txt"
    keys = workers.fill(url, 200)
    procs = [workers.spawn(url, effects, "--work", "0.02") for _ in range(2)]
    terminated = 0
    try:
        deadline = time.monotonic() + 60
        next_cut = time.monotonic() + 0.5
        while _count(admin, pg_schema, "succeeded") < 200 and time.monotonic() < deadline:
            if time.monotonic() >= next_cut:
                # Every connection of the workers, the listening ones too, mid-run.
                found = admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE application_name LIKE 'duetime%%' AND datname = current_database()"
                ).fetchone()
                terminated += found[0] if found else 0
                next_cut = time.monotonic() + 0.4
            time.sleep(0.02)
    finally:
        workers.stop(procs)
    assert _count(admin, pg_schema, "succeeded") == 200
    ran = [k for k, _ in workers.lines(effects)]
    assert sorted(ran) == sorted(keys)  # nothing lost, nothing doubled
    assert terminated >= 4


def test_a_restart_herd_of_ten_workers(
    url: str, tmp_path: Path, admin: Any, pg_schema: str
) -> None:
    # Ten workers start at once on a schema nobody has created yet, then the jobs arrive.
    effects = tmp_path / "effects.txt"
    procs = [workers.spawn(url, effects) for _ in range(10)]
    try:
        until(
            lambda: (
                admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE "
                    "'duetime%%' AND datname = current_database()"
                ).fetchone()[0]
                >= 20  # each: its connection and its listening one
            ),
            60,
            "ten workers to start",
            workers.EVERY,
        )
        keys = workers.fill(url, 300)
        until(lambda: _count(admin, pg_schema, "succeeded") == 300, 60, "300 fires", workers.EVERY)
    finally:
        workers.stop(procs)
    assert sorted(k for k, _ in workers.lines(effects)) == sorted(keys)
    assert all(p.returncode == -signal.SIGKILL for p in procs)  # none died on its own


def test_workers_whose_clocks_differ_by_a_second_run_each_fire_once(
    url: str, tmp_path: Path, admin: Any, pg_schema: str
) -> None:
    effects = tmp_path / "effects.txt"
    keys = workers.fill(url, 200)
    anchor = str(int(time.time()))
    procs = [
        workers.spawn(url, effects, "--work", "0.005", "--offset", "0.5", "--declare", anchor),
        workers.spawn(url, effects, "--work", "0.005", "--offset", "-0.5", "--declare", anchor),
    ]
    try:
        until(lambda: _count(admin, pg_schema, "succeeded") >= 230, 60, "the fires", workers.EVERY)
    finally:
        workers.stop(procs)
    ran = [k for k, _ in workers.lines(effects)]
    assert len(ran) == len(set(ran))  # no fire twice, whoever's clock was ahead
    assert set(keys) <= set(ran)
    assert len({pid for _, pid in workers.lines(effects)}) == 2
