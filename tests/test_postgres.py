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
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

from duetime import (
    ConflictingIdError,
    Cron,
    FakeClock,
    FixedRate,
    InvalidArgument,
    JobState,
    JobSucceeded,
    Misfire,
    PostgresStore,
    Scheduler,
    StoreError,
    current_run,
)
from duetime import _replica as replica_module
from duetime.__main__ import main as cli_main
from duetime.stores import postgres

from . import workers
from .conftest import WAIT, fresh_python, until

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


def _recording(s: Scheduler) -> list[str]:
    """Register task "rec" on ``s``; the list it returns gets each run's fire key."""
    ran: list[str] = []
    s.register("rec", lambda: ran.append(current_run().key))  # type: ignore[union-attr]
    return ran


def _terminate_workers(admin: psycopg.Connection[Any]) -> None:
    """Cut every duetime connection to the test database (``pg_terminate_backend``)."""
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name LIKE 'duetime%%' AND datname = current_database()"
    )


# -- the schema --------------------------------------------------------------------------------------


def test_the_schema_is_created_on_first_use_under_any_name(
    pg_database: str, admin: psycopg.Connection[Any]
) -> None:
    odd = """Odd "name"; it's DROP TABLE x"""
    clock = FakeClock(T0)
    s = Scheduler(clock, store=PostgresStore(pg_database, schema=odd))
    s.register("print", print)
    s.schedule("print", 60, id="one")
    s.schedule("print", FixedRate(60), id="every")
    assert s.run_for(60) == 2  # (claims and outcomes too: a quote in a string literal)
    s.shutdown()
    tables = admin.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
        "ORDER BY table_name",
        (odd,),
    ).fetchall()
    assert [t for (t,) in tables] == ["dead", "jobs", "meta", "runs", "workers"]
    t = Scheduler(clock, store=f"{pg_database}?schema={odd}")
    assert [j.id for j in t.jobs()] == ["every"]
    t.shutdown()


@pytest.mark.parametrize("odd", ["a?b", "%s", "50%off", "%%", "%(x)s", "x{p}y", "'{p}"])
def test_a_schema_name_with_placeholder_or_template_characters_is_just_a_name(
    pg_database: str, admin: psycopg.Connection[Any], odd: str
) -> None:
    # (Placeholders were converted after the name went into the statements, and psycopg read
    # a % in it as one: "a?b" was created and then failed to load, "%%" meant "%" in some
    # statements and "%%" in others.)
    clock = FakeClock(T0)
    s = Scheduler(clock, store=PostgresStore(pg_database, schema=odd))
    s.register("print", print)
    s.schedule("print", 60, id="one")
    s.schedule("print", FixedRate(60), id="every")
    assert s.run_for(60) == 2
    assert [r.state for r in s.runs("one")] == ["succeeded"]
    s.shutdown()
    t = Scheduler(clock, store=PostgresStore(pg_database, schema=odd))
    assert [j.id for j in t.jobs()] == ["every"]
    t.shutdown()
    schemas = {
        name
        for (name,) in admin.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname IN (%s, '%%', '?')", (odd,)
        ).fetchall()
    }
    assert schemas == {odd}
    admin.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(odd)))


def test_the_longest_schema_name_schedules_and_wakes_a_worker(pg_database: str) -> None:
    # 63 bytes: "duetime:" and the name would pass the 63 bytes a NOTIFY channel may have.
    longest = "s" * 56 + secrets.token_hex(3) + "x"
    assert len(longest) == 63
    started = threading.Event()
    worker = Scheduler(store=PostgresStore(pg_database, schema=longest, poll_interval=3600))
    worker.register("go", started.set)
    worker.start()
    producer = Scheduler(store=PostgresStore(pg_database, schema=longest))
    producer.register("go", started.set)
    try:
        producer.schedule("go", 0, id="now")
        assert started.wait(10.0)  # (woken by the notification: the poll is an hour away)
    finally:
        producer.shutdown()
        worker.shutdown()


def test_text_postgresql_cannot_store_is_refused_as_bad_input(pg_store: StoreMaker) -> None:
    s = Scheduler(FakeClock(T0), store=pg_store())
    s.register("print", print)
    with pytest.raises(InvalidArgument, match=r"^id must not contain NUL.*'a\\x00b'"):
        s.schedule("print", 60, id="a\x00b")
    with pytest.raises(InvalidArgument, match=r"^name must not contain NUL.*'x\\x00y'"):
        s.schedule("print", 60, id="n", name="x\x00y")
    assert len(s) == 0 and s.jobs() == []
    s.shutdown()


def test_a_newer_schema_is_refused(pg_store: StoreMaker, pg_schema: str, admin: Any) -> None:
    Scheduler(FakeClock(T0), store=pg_store()).shutdown()
    admin.execute(
        sql.SQL("UPDATE {}.meta SET value = 99 WHERE key = 'schema'").format(
            sql.Identifier(pg_schema)
        )
    )
    with pytest.raises(StoreError, match=r"schema version is 99, newer than this duetime"):
        Scheduler(FakeClock(T0), store=pg_store())


def test_a_worker_that_waited_while_another_created_the_schema_leaves_it_alone(
    pg_store: StoreMaker, pg_database: str, pg_schema: str, admin: psycopg.Connection[Any]
) -> None:
    # A restart herd: one worker creates the schema while the others wait for it. A waiter that
    # ran the script again would take CREATE INDEX's and CREATE TRIGGER's table locks beside
    # workers already using the tables, and deadlock with them (CI saw it). Running the script
    # again drops and re-creates the trigger, so the trigger's oid tells.
    clock = FakeClock(T0)
    opened: list[Scheduler] = []
    waiter = threading.Thread(target=lambda: opened.append(Scheduler(clock, store=pg_store())))
    schema = sql.Identifier(pg_schema)
    # The first worker, played by hand; admin watches (pg_stat_activity holds still inside a
    # transaction, so not from the one holding the lock).
    with psycopg.connect(pg_database) as first:
        first.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"duetime:{pg_schema}",))
        waiter.start()
        until(
            lambda: (
                admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' "
                    "AND application_name LIKE 'duetime%%' AND datname = current_database()"
                ).fetchone()
                == (1,)
            ),
            what="the second worker to wait for the first",
        )
        first.execute(postgres._SCHEMA.replace("{s}", schema.as_string(first)))
        first.execute(
            sql.SQL("INSERT INTO {}.meta VALUES ('schema', %s)").format(schema),
            (postgres.SCHEMA_VERSION,),
        )
    # (Leaving the block committed and closed the first's connection: the lock is free.)
    trigger = "SELECT oid FROM pg_trigger WHERE tgname = 'stamp_xid' AND tgrelid = %s::regclass"
    jobs = (sql.Identifier(pg_schema, "jobs").as_string(admin),)
    created = admin.execute(trigger, jobs).fetchone()
    waiter.join(timeout=30)
    assert not waiter.is_alive()
    assert admin.execute(trigger, jobs).fetchone() == created
    (s,) = opened
    assert s.jobs() == []
    s.shutdown()


def test_a_first_use_waits_for_a_stuck_creator_a_bounded_time(
    pg_store: StoreMaker, pg_schema: str, admin: psycopg.Connection[Any], monkeypatch: Any
) -> None:
    # A worker stopped (SIGSTOP, a debugger) while it created the schema holds the creation
    # lock: the others fail with a StoreError instead of hanging.
    monkeypatch.setattr(postgres, "_CREATE_WAIT", 1)
    lock = (f"duetime:{pg_schema}",)
    admin.execute("SELECT pg_advisory_lock(hashtext(%s))", lock)
    try:
        with pytest.raises(StoreError, match=r"creating the tables failed \(.*lock timeout"):
            Scheduler(FakeClock(T0), store=pg_store())
    finally:
        admin.execute("SELECT pg_advisory_unlock(hashtext(%s))", lock)
    Scheduler(FakeClock(T0), store=pg_store()).shutdown()


def test_bad_arguments_and_unreachable_servers(pg_database: str) -> None:
    with pytest.raises(TypeError, match="dsn must be a str, got 5"):
        PostgresStore(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="schema must be a PostgreSQL name"):
        PostgresStore(pg_database, schema="")
    with pytest.raises(InvalidArgument, match=r"schema must not start with 'pg_'.*got 'pg_jobs'"):
        PostgresStore(pg_database, schema="pg_jobs")
    with pytest.raises(InvalidArgument, match="schema must not start with 'pg_'"):
        Scheduler(store=f"{pg_database}?schema=pg_temp")
    with pytest.raises(InvalidArgument, match="poll_interval must be positive"):
        PostgresStore(pg_database, poll_interval=0)
    with pytest.raises(InvalidArgument, match="connect_timeout must be positive"):
        PostgresStore(pg_database, connect_timeout=0)
    with pytest.raises(InvalidArgument, match=r"dsn must be a libpq connection string.*'this is"):
        PostgresStore("this is not a dsn")
    # (libpq reads a port only as it connects: refused here, not reported as a server down.)
    for bad_port in ("postgresql://app@db:abc/app", "host=db port=5x dbname=app"):
        with pytest.raises(InvalidArgument, match=r"dsn must be .*port must be a number"):
            PostgresStore(bad_port)
    for fine in ("host=a,b port=5432,5433 dbname=app", "host=db port=' +5432 ' dbname=app"):
        PostgresStore(fine)  # (several hosts; blanks and a sign, as libpq's strtol reads them)
    with pytest.raises(InvalidArgument, match="port must be a number"):
        PostgresStore("host=db port=\u0665\u0664 dbname=app")  # (digits, but not to libpq)
    for url in (
        "postgresql://app:s3cret@[::1/app",
        "postgresql://app:s3cret@db/app?x=1",
        "postgresql://app:s3cr%zzet@db/app",  # (libpq quotes the bad token)
        "mysql://app:s3cret@db/app",
    ):
        with pytest.raises(InvalidArgument, match=r"(store|dsn) must .*app:\*\*\*@") as bad:
            Scheduler(store=url)
        assert "s3cr" not in str(bad.value)
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
    # (Neither is a server down: the port out of range was reported as one, the unknown role
    # and libpq's refusal of a setting told to check that PostgreSQL runs.)
    for out_of_range in ("postgresql://app@db:99999/app", "host=db port=5432,0 dbname=app"):
        with pytest.raises(InvalidArgument, match=r"port must be from 1 to 65535"):
            PostgresStore(out_of_range)
    parts = urlsplit(pg_database)
    if parts.username and not parts.password:
        nobody = pg_database.replace(f"{parts.username}@", "duetime_no_such_role@", 1)
        with pytest.raises(StoreError, match=r"role .* does not exist.*check the user and pass"):
            Scheduler(store=nobody)
    with pytest.raises(StoreError, match=r"invalid sslmode value.*check the settings in the DSN"):
        Scheduler(store=f"{pg_database}?sslmode=bogus")


def test_a_store_urls_scheme_is_read_in_any_case(pg_database: str, pg_schema: str) -> None:
    # (A URL's scheme is case-insensitive; Scheduler(store=) and the CLI refused
    # "POSTGRESQL://", and libpq would have refused it too.)
    shouted = pg_database.replace("postgresql:", "PostgreSQL:", 1)
    assert shouted != pg_database
    s = Scheduler(FakeClock(T0), store=f"{shouted}?schema={pg_schema}")
    s.schedule("print", 60, id="loud")
    s.shutdown()
    assert cli_main(["jobs", "--store", f"{shouted}?schema={pg_schema}"]) == 0
    t = Scheduler(FakeClock(T0), store=PostgresStore.from_url(f"{shouted}?schema={pg_schema}"))
    assert [j.id for j in t.jobs()] == ["loud"]
    t.shutdown()


def test_store_urls_reach_libpq_as_written(pg_database: str, pg_schema: str) -> None:
    # from_url rebuilt the URL: 'postgresql:///db?host=...' lost a slash (refused) and a space
    # written %20 in options= came out '+', which libpq reads as a plus (the server refused
    # the option). The constructor refused the schema= parameter the store URLs take.
    parts = urlsplit(pg_database)
    local = (
        f"postgresql:///{parts.path.lstrip('/')}?host={parts.hostname}&port={parts.port or 5432}"
        f"&user={parts.username}&options=-c%20statement_timeout%3D12345&schema={pg_schema}"
    )
    store = PostgresStore.from_url(local)
    assert store.schema == pg_schema
    assert store.dsn == local.replace(f"&schema={pg_schema}", "")
    s = Scheduler(FakeClock(T0), store=local)
    s.register("noop", lambda: None)
    s.schedule("noop", 60, id="a")
    s.shutdown()
    with psycopg.connect(store.dsn) as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == ("12345ms",)
    # (Empty pieces are dropped, as parse_qsl did: libpq refuses '?&&port=5'.)
    assert PostgresStore.from_url(f"{pg_database}?&&connect_timeout=3&schema=x").dsn == (
        f"{pg_database}?connect_timeout=3"
    )
    direct = PostgresStore(f"{pg_database}?schema={pg_schema}")
    assert (direct.schema, direct.dsn) == (pg_schema, pg_database)
    t = Scheduler(FakeClock(T0), store=direct)
    assert [j.id for j in t.jobs()] == ["a"]
    t.shutdown()
    assert PostgresStore(f"{pg_database}?schema=x", schema="x").schema == "x"
    with pytest.raises(InvalidArgument, match=r"schema must be one name.*'x'.*'y'"):
        PostgresStore(f"{pg_database}?schema=x", schema="y")
    for make in (PostgresStore, PostgresStore.from_url):
        with pytest.raises(InvalidArgument, match=r"gives schema= 2 times, got \['x', 'y'\]"):
            make(f"{pg_database}?schema=x&schema=y")


def test_connections_find_a_silent_peer_dead_unless_the_dsn_says_otherwise(
    pg_database: str, pg_schema: str
) -> None:
    # With the operating system's defaults, a partition (no reset) left every call waiting for
    # many minutes: keepalives start after two hours idle, unacknowledged data is retried long.
    for query, idle in (("", "10"), ("&keepalives_idle=60", "60")):
        s = Scheduler(FakeClock(T0), store=f"{pg_database}?schema={pg_schema}{query}")
        try:
            store: Any = s.store
            params = store._conn.info.get_parameters()
            assert (params["keepalives"], params["keepalives_idle"]) == ("1", idle)
            assert (params["keepalives_interval"], params["keepalives_count"]) == ("5", "3")
            assert params["tcp_user_timeout"] == "30000"
        finally:
            s.shutdown()


def test_a_dsn_naming_a_service_keeps_the_service_file_s_tcp_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (Keywords given to connect win over a service file: ours overrode the user's.)
    assert postgres._tcp_defaults("service=app") == {}
    monkeypatch.setenv("PGSERVICE", "app")
    assert postgres._tcp_defaults("dbname=app") == {}
    monkeypatch.delenv("PGSERVICE")
    assert postgres._tcp_defaults("dbname=app keepalives_idle=60")["tcp_user_timeout"] == 30_000


def test_a_schema_holding_another_programs_tables_is_named_so(
    pg_database: str, pg_schema: str, admin: psycopg.Connection[Any]
) -> None:
    # (It said only: column "xid" does not exist.)
    admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(pg_schema)))
    admin.execute(sql.SQL("CREATE TABLE {}.jobs (id int)").format(sql.Identifier(pg_schema)))
    with pytest.raises(
        StoreError, match=r"tables of the same names that are not duetime's \(jobs\).*schema="
    ):
        Scheduler(FakeClock(T0), store=PostgresStore(pg_database, schema=pg_schema))
    assert admin.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (pg_schema,)
    ).fetchone() == (1,)


def test_import_duetime_does_not_import_psycopg() -> None:
    assert fresh_python("import sys, duetime; print('psycopg' in sys.modules)") == ["False"]


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


def test_a_batch_of_claims_answers_each_as_a_single_claim_would(
    pg_store: StoreMaker, pg_database: str, pg_schema: str
) -> None:
    # Two stores on one schema stand for two workers; the asks are built from the stored rows
    # (guard = the row's due time), as the Scheduler builds them.
    maker = Scheduler(FakeClock(T0), store=pg_store())
    maker.register("rec", print)
    for i in range(6):
        maker.schedule("rec", 10 + i, id=f"j{i}")
    a, b = pg_store(), pg_store()
    a.open("worker-a")
    b.open("worker-b")
    try:
        rows = {row.id: row for row in a.load_rows()}
        now = time.time_ns()

        def ask(job: str, key: str, guard: int | None = None) -> Any:
            row = rows[job]
            base = row.next_base if guard is None else guard
            return (key, job, row.next_base, 1, now, 30 * 10**9, row, base, False)

        assert a.claim_many([ask(f"j{i}", f"k{i}") for i in range(3)]) == [("won", None)] * 3
        # The same keys again (the rows still match the guards): ran already, "done"; a new
        # key: won; a guard the row has moved from: lost, with the row read back; another
        # transaction holds j5's row: busy, at once.
        with psycopg.connect(pg_database) as other:
            other.execute(
                sql.SQL("SELECT 1 FROM {}.jobs WHERE id = 'j5' FOR UPDATE").format(
                    sql.Identifier(pg_schema)
                )
            )
            started = time.monotonic()
            answers = b.claim_many(
                [ask("j0", "k0"), ask("j1", "k1-new"), ask("j3", "k3", guard=1), ask("j5", "k5")]
            )
            assert time.monotonic() - started < 2.0
            other.rollback()
        assert not any(isinstance(answer, StoreError) for answer in answers)
        assert [answer[0] for answer in answers] == ["done", "won", "lost", "busy"]  # type: ignore[index]
        lost_row = answers[2][1]  # type: ignore[index]
        assert lost_row is not None and lost_row.id == "j3"
        assert lost_row.next_base == rows["j3"].next_base
        # Busy comes back with the row as last committed (what the claimer puts back).
        busy_row = answers[3][1]  # type: ignore[index]
        assert busy_row is not None and busy_row.id == "j5"
        assert (busy_row.rev, busy_row.next_base) == (rows["j5"].rev, rows["j5"].next_base)
        # Outcomes, fenced by worker and attempt: b cannot settle a's runs.
        settle = [("k0", 1, "succeeded", None, now, rows["j0"])]
        assert b.settle_many([*settle, ("k2", 1, "succeeded", None, now, rows["j2"])]) == [
            False,
            False,
        ]
        outcomes = [
            ("k0", 1, "succeeded", None, now, rows["j0"]),
            ("k2", 1, "dead", "ValueError: x", now, rows["j2"]),
            ("k1", 2, "succeeded", None, now, rows["j1"]),  # not this attempt
        ]
        assert a.settle_many(outcomes) == [True, True, False]
        assert a.settle_many(outcomes[:2]) == [True, True]  # written already: the same answer
        states = {run.key: (run.state, run.worker) for run in a.runs(None, None, 10)}
        assert states == {
            "k0": ("succeeded", "worker-a"),
            "k1": ("running", "worker-a"),
            "k2": ("dead", "worker-a"),
            "k1-new": ("running", "worker-b"),
        }
    finally:
        a.close()
        b.close()
        maker.shutdown()


class _CountingStore(PostgresStore):
    """A PostgresStore that records the size of each batch of claims and of outcomes (all of
    them pass through ``settle_and_claim``), and how many carried both."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.claims: list[int] = []
        self.outcomes: list[int] = []
        self.alone: list[int] = []  # outcomes written without claims
        self.both = 0

    def settle_many(self, asks: Any) -> Any:
        self.alone.append(len(asks))
        return super().settle_many(asks)

    def settle_and_claim(self, outcomes: Any, asks: Any) -> Any:
        if asks:
            self.claims.append(len(asks))
        if outcomes:
            self.outcomes.append(len(outcomes))
        self.both += bool(asks and outcomes)
        return super().settle_and_claim(outcomes, asks)


def test_the_runner_claims_due_fires_and_writes_their_outcomes_in_batches(
    pg_database: str, pg_schema: str
) -> None:
    clock = FakeClock(T0)
    store = _CountingStore(pg_database, schema=pg_schema)
    s = Scheduler(clock, store=store, executor="inline")
    ran = _recording(s)
    for i in range(40):
        s.schedule("rec", 10, id=f"j{i:02}")
    # A fixed-rate job eleven fires behind when the clock jumps, each to be run: its fires are
    # claimed one after the other, never two in one batch.
    s.schedule("rec", FixedRate(1, start=T0), id="rate", misfire=Misfire.RUN_ALL)
    s.start()
    try:
        clock.advance(10)
        until(lambda: len(ran) >= 51, 20, what="51 runs")
        assert s.wait_idle(10)
        # Idle means written: every run's outcome is in the store.
        runs = s.runs(limit=100)
        assert len(runs) == len(ran) == len(set(ran)) == 51
        assert all(run.state == "succeeded" for run in runs)
    finally:
        s.shutdown()
    # Batches: 16 fires at first, larger once a full one ran quickly (see the next test).
    assert 16 <= max(store.claims) <= 32
    assert sum(store.claims) == 51
    assert len(store.claims) < 51 / 4
    assert sum(store.outcomes) == 51 and len(store.outcomes) < 51 / 4
    assert store.both >= 2  # outcomes written in the transaction of the next claims
    rate = sorted(key for key in ran if key.startswith("rate@"))
    assert len(rate) == 11  # T0 .. T0+10 s, each once


def test_outcomes_wait_in_the_outbox_at_most_ten_ms_from_its_last_write(
    pg_database: str, pg_schema: str
) -> None:
    # Four runs claimed together, each 6 ms long: the second finishes 12 ms after the claim
    # and writes the two outcomes waiting; the fourth, 12 ms after that write, the next two.
    # (Counted from the claim instead, the third and the fourth would each be written alone.)
    clock = FakeClock(T0)
    store = _CountingStore(pg_database, schema=pg_schema)
    s = Scheduler(clock, store=store, executor="inline")
    s.register("six_ms", lambda: clock.advance(0.006))
    for i in range(4):
        s.schedule("six_ms", 10, id=f"j{i}")
    s.start()
    try:
        clock.advance(10)
        until(lambda: sum(store.alone) == 4, what="four outcomes written")
        assert s.wait_idle(WAIT)
    finally:
        s.shutdown()
    assert store.claims == [4]
    assert store.alone == [2, 2]


def test_the_runners_batches_grow_while_quick_jobs_keep_them_full_and_not_for_slow_ones(
    pg_database: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The batch size follows how long a full batch took to run, in real time; here "real" time
    # is the test's: a quick job takes none of it, a slow one 10 ms.
    real = [0.0]
    monkeypatch.setattr(replica_module, "real_monotonic", lambda: real[0])
    clock = FakeClock(T0)
    store = _CountingStore(pg_database, schema=pg_schema)
    s = Scheduler(clock, store=store, executor="inline")
    ran: list[str] = []

    def slow() -> None:
        real[0] += 0.01
        ran.append("slow")

    s.register("quick", lambda: ran.append("quick"))
    s.register("slow", slow)
    with s.batch():
        for i in range(600):
            s.schedule("quick", 10, id=f"q{i:03}")
        for i in range(100):
            s.schedule("slow", 20, id=f"s{i:03}")
    s.start()
    try:
        clock.advance(10)
        until(lambda: len(ran) == 600, what="600 quick runs")
        assert s.wait_idle(WAIT)
        # Doubling while full batches run quickly, up to 256; the rest of the burst.
        assert store.claims == [16, 32, 64, 128, 256, 104]
        del store.claims[:]
        clock.advance(10)
        until(lambda: len(ran) == 700, what="100 slow runs")
        assert s.wait_idle(WAIT)
    finally:
        s.shutdown()
    # A new burst starts at 16 again; 16 slow runs take 160 ms: no growth.
    assert store.claims == [16] * 6 + [4]


def test_a_batch_that_mostly_lost_reads_the_other_workers_changes_instead_of_claiming(
    pg_database: str, pg_schema: str
) -> None:
    # b loads 40 jobs and sleeps (an hour-long poll); a runs them all meanwhile. b wakes to 40
    # fires due that another worker took: its first batch loses, and then it reads a's changes
    # at once rather than losing a claim for each of the other 24.
    clock_b = FakeClock(T0)
    b_store = _CountingStore(pg_database, schema=pg_schema, poll_interval=3600)
    b = Scheduler(clock_b, store=b_store, executor="inline", lease=3600)
    ran: list[str] = []
    b.register("rec", lambda: ran.append("b"))
    for i in range(40):
        b.schedule("rec", 10, id=f"j{i:02}")
    b.start()
    try:
        b.wait_idle(10)  # (b has looked at the store and sleeps)
        clock_a = FakeClock(T0)
        a = Scheduler(clock_a, store=PostgresStore(pg_database, schema=pg_schema))
        a.register("rec", lambda: ran.append("a"))
        clock_a.advance(10)
        assert a.run_pending() == 40
        a.shutdown()
        clock_b.advance(10)
        until(lambda: bool(b_store.claims), 10, what="b's first claims")
        assert b.wait_idle(10)
        assert not any(job.next_run_time for job in b.jobs())
    finally:
        b.shutdown()
    assert ran == ["a"] * 40
    assert b_store.claims == [16]


def test_an_id_longer_than_postgresql_can_index_is_refused(pg_store: StoreMaker) -> None:
    # A B-tree entry holds at most 2 704 bytes: a longer id failed in the store as a
    # StoreError ("index row size ... exceeds btree version 4 maximum") not naming id.
    s = Scheduler(FakeClock(T0), store=pg_store())
    try:
        s.register("rec", print)
        s.schedule("rec", 10, id="é" * 1024)  # 2 048 bytes: the most
        with pytest.raises(InvalidArgument, match=r"id must be at most 2048 bytes .*got 2050"):
            s.schedule("rec", 10, id="é" * 1025)
        assert [len(j.id) for j in s.jobs()] == [1024]
    finally:
        s.shutdown()


def test_a_poll_reads_of_an_ended_job_only_what_ends_it_here(pg_store: StoreMaker) -> None:
    # Every worker learns of every run another one finished: the rows of ended jobs come back
    # without their arguments (which may be large), and still end the job in memory.
    clock = FakeClock(T0)
    a = Scheduler(clock, store=pg_store())
    b = Scheduler(clock, store=pg_store())
    ran: list[str] = []
    for s in (a, b):
        s.register("rec", ran.append)
    reader = pg_store()
    reader.open("reader")
    try:
        big = "x" * 10_000
        a.schedule("rec", 10, args=[big], id="done")
        a.schedule("rec", 3600, args=[big], id="live")
        assert {job.id for job in b.jobs()} == {"done", "live"}
        reader.load_rows()
        clock.advance(10)
        assert a.run_pending() == 1
        a.reschedule("live", 7200)
        changes = reader.changed_rows()
        assert [job.id for job in b.jobs()] == ["live"]
    finally:
        reader.close()
        a.shutdown()
        b.shutdown()
    assert ran == [big]
    assert changes is not None
    assert changes.ended == [("done", "completed")]
    assert [row.id for row in changes.rows] == ["live"]
    assert big in changes.rows[0].args


def test_a_fire_skipped_in_a_batch_is_written_after_the_outcome_before_it(
    pg_store: StoreMaker,
) -> None:
    # A run's outcome waits in the outbox; before the runner looks again the clock jumps, so
    # the job's next fire is skipped (misfire SKIP) in the batch that writes that outcome. The
    # row the store keeps must be the one after the skip, not the older one of the outcome.
    clock = FakeClock(T0)
    s = Scheduler(clock, store=pg_store(), executor="inline", misfire=Misfire.SKIP, grace=1)
    s.register("tick", lambda: None)
    job = s.schedule("tick", FixedRate(10, start=T0 + timedelta(seconds=10)), id="tick")
    jumps = [15]
    # (The jump, once, after the first run's outcome went to the outbox: to T0 + 25 s.)
    s.subscribe(lambda event: clock.advance(jumps.pop()) if jumps else None, JobSucceeded)
    s.start()
    try:
        clock.advance(10)
        until(lambda: not jumps and job.next_run_time is not None, 10, what="the jump")
        until(lambda: job.next_run_time == T0 + timedelta(seconds=30), 10, what="the skip")
        assert s.wait_idle(10)
        clock.advance(5)  # T0 + 30 s
        until(lambda: len(s.runs(job)) >= 2, 10, what="the fire at 30 s")
        assert s.wait_idle(10)
        keys = sorted(run.key.split("@")[1] for run in s.runs(job))
    finally:
        s.shutdown()
    assert keys == [
        (T0 + timedelta(seconds=10)).isoformat(),
        (T0 + timedelta(seconds=30)).isoformat(),
    ]
    reader = pg_store()
    reader.open("reader")
    try:
        row = reader.load_row("tick")
    finally:
        reader.close()
    assert row is not None
    assert row.next_base == job._base  # the store says what this process believes


class _Blind(PostgresStore):
    """A PostgresStore whose polls see nothing: another process's insert lands between this
    one's look and its own insert (the start-up race of copies declaring the same job)."""

    def changed_rows(self) -> Any:
        return None


def test_replace_takes_over_a_job_another_process_added_meanwhile(
    pg_store: StoreMaker, pg_database: str, pg_schema: str
) -> None:
    clock = FakeClock(T0)
    a = Scheduler(clock, store=pg_store())
    b = Scheduler(clock, store=_Blind(pg_database, schema=pg_schema))
    for s in (a, b):
        s.register("rec", print)
    try:
        a.schedule("rec", FixedRate(60), id="tick", replace=True)
        with pytest.raises(ConflictingIdError, match="tick"):
            b.schedule("rec", FixedRate(30), id="tick")  # (no replace: refused, as before)
        assert b.get("tick") is None
        job = b.schedule("rec", FixedRate(30), id="tick", replace=True)
        assert job is b.get("tick") and job.trigger == FixedRate(30)
        row = b.store.load_row("tick")  # type: ignore[attr-defined]
        assert row is not None and '["seconds",30]' in row.trigger
    finally:
        a.shutdown()
        b.shutdown()


def test_a_terminated_connection_is_reopened(
    pg_store: StoreMaker, admin: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(T0)
    s = Scheduler(clock, store=pg_store())
    ran = _recording(s)
    s.schedule("rec", 10, id="a")
    _terminate_workers(admin)
    caplog.set_level(logging.WARNING, "duetime")
    s.schedule("rec", 20, id="b")  # finds the connection dead, reconnects, goes on
    clock.advance(20)
    assert s.run_pending() == 2
    assert sorted(k.split("@")[0] for k in ran) == ["a", "b"]
    assert "lost the connection to PostgreSQL" in caplog.text
    s.shutdown()


def test_an_outcome_a_cut_connection_kept_is_written_at_shutdown(
    pg_store: StoreMaker,
    pg_schema: str,
    admin: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Owed outcomes were written only at the next poll: a shutdown before it closed the store
    # with the run still "running", and another worker ran the fire again after the lease.
    clock = FakeClock(T0)
    s = Scheduler(clock, store=pg_store())
    s.register("cut", lambda: _terminate_workers(admin))
    s.schedule("cut", 10, id="a")
    caplog.set_level(logging.WARNING, "duetime")
    clock.advance(10)
    assert s.run_pending() == 1
    assert "could not record the outcome of run a@" in caplog.text
    assert _count(admin, pg_schema, "running") == 1
    s.shutdown()
    assert (_count(admin, pg_schema, "running"), _count(admin, pg_schema, "succeeded")) == (0, 1)
    again = Scheduler(FakeClock(T0 + timedelta(hours=1)), store=pg_store())
    again.register("cut", print)
    assert again.run_pending() == 0 and again.get("a") is None
    again.shutdown()


def test_reads_on_a_connection_cut_while_idle_are_sent_again_without_an_error(
    pg_store: StoreMaker, admin: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    s = Scheduler(FakeClock(T0), store=pg_store())
    _recording(s)
    s.schedule("rec", 10, id="a")
    caplog.set_level(logging.WARNING, "duetime")
    _terminate_workers(admin)
    assert [r.key for r in s.runs()] == []  # (raised StoreError)
    _terminate_workers(admin)
    s.pause("a")  # (its poll first logged "polling failed" at ERROR)
    assert s.get("a") is not None and s.get("a").state is JobState.PAUSED  # type: ignore[union-attr]
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"]
    assert caplog.text.count("lost the connection to PostgreSQL") == 2
    s.shutdown()


def test_a_connection_cut_in_a_batch_fails_the_batch_and_memory_follows_the_store(
    pg_store: StoreMaker, admin: psycopg.Connection[Any]
) -> None:
    # The batch's transaction went with the connection. Its rest was committed statement by
    # statement on a new one (the part before the cut lost, no error), and a write that met
    # the cut raised the driver's error, leaving memory ahead of the store.
    clock = FakeClock(T0)
    s = Scheduler(clock, store=pg_store())
    _recording(s)
    s.schedule("rec", 60, id="p")
    s.schedule("rec", 60, id="c")

    def changes() -> None:
        with s.batch():
            s.pause("p")
            _terminate_workers(admin)
            s.schedule("rec", 600, id="c", replace=True)

    with pytest.raises(StoreError, match="failed"):
        changes()
    fresh = Scheduler(clock, store=pg_store())
    for scheduler in (s, fresh):
        jobs = {j.id: (j.state, j.next_run_time) for j in scheduler.jobs()}
        assert jobs == {
            "p": (JobState.SCHEDULED, T0 + timedelta(seconds=60)),
            "c": (JobState.SCHEDULED, T0 + timedelta(seconds=60)),
        }
    fresh.shutdown()
    s.shutdown()


class _Outage(PostgresStore):
    """A PostgresStore whose server cannot be reached while ``down`` (connections refused)."""

    down = False

    def _connect(self) -> Any:
        if self.down:
            raise psycopg.OperationalError("connection refused (a test's outage)")
        return super()._connect()


def test_a_fire_due_while_the_server_is_down_runs_once_it_is_back(
    pg_database: str, pg_schema: str, admin: psycopg.Connection[Any]
) -> None:
    # The claim fails, and so does reading the job back: the job is read again once the
    # server answers, and its fire runs (not skipped for the next one, not lost).
    clock = FakeClock(T0)
    store = _Outage(pg_database, schema=pg_schema)
    s = Scheduler(clock, store=store)
    ran = _recording(s)
    s.schedule("rec", 10, id="once")
    s.schedule("rec", FixedRate(10, start=T0 + timedelta(seconds=10)), id="rate")
    store.down = True
    _terminate_workers(admin)
    clock.advance(10)
    assert s.run_pending() == 0
    store.down = False
    # (Reconnecting waits out a backoff of real milliseconds.)
    until(lambda: s.run_pending() >= 0 and len(ran) == 2, what="both fires run")
    s.shutdown()
    assert sorted(ran) == ["once@2026-03-02T08:00:10+00:00", "rate@2026-03-02T08:00:10+00:00"]


def test_an_outage_logs_one_error_per_kind_not_one_per_try(
    pg_database: str, pg_schema: str, admin: psycopg.Connection[Any], caplog: Any
) -> None:
    # Each due fire's claim is tried again every quarter second while the server is down: a
    # 4 s outage with 50 fires due logged 140 lines per worker (each failed claim, and the
    # read back after it, at ERROR).
    caplog.set_level(logging.DEBUG, logger="duetime")
    clock = FakeClock(T0)
    store = _Outage(pg_database, schema=pg_schema)
    s = Scheduler(clock, store=store)
    ran = _recording(s)
    s.schedule("rec", 10, id="a")
    s.schedule("rec", 10, id="b")
    store.down = True
    _terminate_workers(admin)
    for _ in range(4):
        clock.advance(10)
        s.run_pending()

    def logged(level: int, text: str) -> int:
        return sum(r.levelno == level and text in r.getMessage() for r in caplog.records)

    assert logged(logging.ERROR, "could not claim") == 1
    assert logged(logging.DEBUG, "could not claim") == 1  # (the other job's, in the same try)
    assert logged(logging.ERROR, "could not read job") == 0
    assert logged(logging.ERROR, "polling failed") == 1
    assert logged(logging.DEBUG, "polling failed") >= 3
    store.down = False
    until(lambda: s.run_pending() >= 0 and len(ran) == 2, what="both fires run")
    s.shutdown()
    assert logged(logging.WARNING, "claims go through again, after 2 failures") == 1
    assert logged(logging.WARNING, "polls go through again, after") == 1


def _asleep_before(
    clock: FakeClock, store: PostgresStore, n: int, caplog: Any
) -> tuple[Scheduler, list[str]]:
    """A started scheduler (jobs run inline) on ``store``, asleep until its ``n`` one-shot
    jobs fall due 10 fake seconds on, errors logged to ``caplog``; and the list of fire keys
    they record."""
    s = Scheduler(clock, store=store, executor="inline")
    ran = _recording(s)
    for i in range(n):
        s.schedule("rec", 10, id=f"j{i}")
    caplog.set_level(logging.ERROR, "duetime")
    s.start()
    assert s.wait_idle(WAIT)
    return s, ran


def test_a_batch_of_claims_the_server_refused_is_one_log_line_and_runs_later(
    pg_database: str, pg_schema: str, admin: psycopg.Connection[Any], caplog: Any
) -> None:
    clock = FakeClock(T0)
    store = _Outage(pg_database, schema=pg_schema)
    s, ran = _asleep_before(clock, store, 5, caplog)
    try:
        store.down = True
        _terminate_workers(admin)
        clock.advance(10)
        until(lambda: "could not claim 5 runs" in caplog.text, what="the failed batch")
        assert "could not claim a run of job" not in caplog.text
        assert "could not read job" not in caplog.text
        store.down = False

        # (Fake seconds for the pause before the claims are tried again.)
        def ran_all() -> bool:
            clock.advance(1)
            return len(ran) == 5

        until(ran_all, what="the 5 runs", every=0.05)
        assert s.wait_idle(WAIT)
    finally:
        s.shutdown()
    assert sorted(ran) == [f"j{i}@2026-03-02T08:00:10+00:00" for i in range(5)]


class _CutAtClaim(PostgresStore):
    """A PostgresStore whose connection is cut (``pg_terminate_backend``) as its next claim
    is sent, once ``cut`` holds the admin connection that cuts it."""

    cut: psycopg.Connection[Any] | None = None

    def _claim_cut(self) -> None:
        admin, self.cut = self.cut, None
        if admin is not None and self._conn is not None:
            admin.execute("SELECT pg_terminate_backend(%s)", (self._conn.info.backend_pid,))

    def claim_many(self, asks: Any) -> Any:
        self._claim_cut()
        return super().claim_many(asks)

    def settle_and_claim(self, outcomes: Any, asks: Any) -> Any:
        self._claim_cut()
        return super().settle_and_claim(outcomes, asks)


def test_fires_whose_claim_a_cut_connection_failed_are_tried_again_soon(
    pg_database: str, pg_schema: str, admin: psycopg.Connection[Any], caplog: Any
) -> None:
    # A terminated backend (a server restart, a failover) is reopened at the next use: the
    # fires whose claim it failed wait a quarter of a second, not 5 (FixedRate(0.5) lost ten
    # fires to the misfire policy for each cut).
    clock = FakeClock(T0)
    store = _CutAtClaim(pg_database, schema=pg_schema)
    s, ran = _asleep_before(clock, store, 3, caplog)
    try:
        store.cut = admin
        clock.advance(10)
        until(lambda: "could not claim" in caplog.text, what="the failed claims")
        assert "trying again in 0.25 s" in caplog.text
        clock.advance(0.3)
        until(lambda: len(ran) == 3, what="the 3 runs, 0.3 fake seconds later")
    finally:
        s.shutdown()
    assert sorted(ran) == [f"j{i}@2026-03-02T08:00:10+00:00" for i in range(3)]


class _ChangesFail(PostgresStore):
    """A PostgresStore whose read of other processes' changes fails while ``failing``; it
    counts its lease renewals."""

    failing = False
    renewals = 0

    def changed_rows(self) -> Any:
        if self.failing:
            raise StoreError(self._where, "reading changes failed (a test's fault)")
        return super().changed_rows()

    def heartbeat(self, now: int, lease_ns: int) -> None:
        super().heartbeat(now, lease_ns)
        self.renewals += 1


def test_leases_are_renewed_while_reading_changes_fails(
    pg_database: str, pg_schema: str, caplog: Any
) -> None:
    # A poll whose read of the changes failed (a connection cut just then) skipped the lease
    # renewal too: cut at every poll, a run going here lost its lease and ran twice.
    clock = FakeClock(T0)
    store = _ChangesFail(pg_database, schema=pg_schema)
    s = Scheduler(clock, store=store, lease=3)
    gate = threading.Event()
    s.register("hold", lambda: gate.wait(WAIT))
    s.schedule("hold", 0, id="long")
    caplog.set_level(logging.ERROR, "duetime")
    s.start()
    try:
        until(lambda: s.stats().running == 1, what="the run started")
        store.failing = True
        before = store.renewals

        def renewed() -> bool:
            clock.advance(1.1)  # (past the poll interval: a third of the lease)
            return store.renewals >= before + 2

        until(renewed, what="two lease renewals", every=0.05)
        assert "reading changes failed" in caplog.text
        row = store._read("t", store._q("SELECT lease_until FROM {p}runs"))
        assert row[0][0] > clock.time_ns()  # (still ours)
    finally:
        store.failing = False
        gate.set()
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
        workers.until(
            procs, lambda: _count(admin, pg_schema, "succeeded") == 1000, 60, "1000 fires"
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
        workers.until(procs, lambda: len(workers.lines(effects)) >= 25, 30, "25 ticks")
    finally:
        workers.stop(procs)
    assert all(p.returncode == -signal.SIGKILL for p in procs)  # both declared and ran on
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
        workers.until(procs, lambda: len(workers.lines(effects)) == 1, 20, "the first start")
        zombie.send_signal(signal.SIGSTOP)  # mid-run: it stops renewing its lease (2 s)
        other = workers.spawn(url, effects, "--work", "1.0")
        procs.append(other)
        workers.until(
            procs, lambda: _count(admin, pg_schema, "succeeded") == 1, 30, "the other worker"
        )
        zombie.send_signal(signal.SIGCONT)
        workers.until(procs, lambda: len(workers.lines(done)) == 2, 20, "both ends")
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
        workers.until(
            procs,
            lambda: (
                admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE "
                    "'duetime%%' AND datname = current_database()"
                ).fetchone()[0]
                >= 20  # each: its connection and its listening one
            ),
            60,
            "ten workers to start",
        )
        keys = workers.fill(url, 300)
        workers.until(procs, lambda: _count(admin, pg_schema, "succeeded") == 300, 60, "300 fires")
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
    # (Work of 20 ms a job: the 200 take one worker 4 s, longer than the other takes to start,
    # so that both get a share whatever their start-up times.)
    procs = [
        workers.spawn(url, effects, "--work", "0.02", "--offset", "0.5", "--declare", anchor),
        workers.spawn(url, effects, "--work", "0.02", "--offset", "-0.5", "--declare", anchor),
    ]
    try:
        workers.until(procs, lambda: _count(admin, pg_schema, "succeeded") >= 230, 60, "the fires")
    finally:
        workers.stop(procs)
    assert all(p.returncode == -signal.SIGKILL for p in procs)  # both declared and ran on
    ran = [k for k, _ in workers.lines(effects)]
    assert len(ran) == len(set(ran))  # no fire twice, whoever's clock was ahead
    assert set(keys) <= set(ran)
    assert len({pid for _, pid in workers.lines(effects)}) == 2


def test_a_queued_trigger_whose_claim_finds_the_row_busy_runs_later(
    pg_database: str, pg_schema: str
) -> None:
    clock = FakeClock(T0)
    worker = Scheduler(clock, store=PostgresStore(pg_database, schema=pg_schema))
    admin = Scheduler(clock, store=PostgresStore(pg_database, schema=pg_schema))
    try:
        ran = _recording(worker)
        worker.schedule("rec", FixedRate(3600), id="j")
        admin.trigger("j")  # (no "rec" here: queued for the workers)
        with psycopg.connect(pg_database) as other:
            other.execute(
                sql.SQL("SELECT 1 FROM {}.jobs WHERE id = 'j' FOR UPDATE").format(
                    sql.Identifier(pg_schema)
                )
            )
            assert worker.run_pending() == 0  # busy: another transaction holds the row
            other.rollback()
        # It used to stay "queued" until some process opened the store afresh.
        clock.advance(1)
        assert worker.run_pending() == 1
        assert ran == ["j@trigger-2026-03-02T08:00:00+00:00"]
    finally:
        worker.shutdown()
        admin.shutdown()
