"""The JobStore conformance suite: what every store must do, checked on each store.

Each store joins by adding its factory to ``STORES``: ``SQLiteStore`` runs it on a private
in-memory database, ``PostgresStore`` unopened (their durable behaviour has its own suite,
tests/test_sqlite.py, run on both, and tests/test_postgres.py).
The suite speaks the protocol (duetime.stores.base) and uses jobs and keys as the Scheduler
makes them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime import FakeClock, InvalidArgument, JobState, Scheduler
from duetime.__main__ import main as cli_main
from duetime.job import Job, new_job
from duetime.recurrence import MONOTONIC, WALL
from duetime.stores import JobStore, MemoryStore
from duetime.stores.base import DurableStore
from duetime.stores.postgres import PostgresStore
from duetime.stores.sqlite import SQLiteStore
from duetime.stores.timebase import from_utc, to_utc


def sqlite_store() -> SQLiteStore:
    return SQLiteStore(":memory:")


def postgres_store() -> PostgresStore:
    # (The fixture below puts it on the test database.)
    return PostgresStore("postgresql://nowhere.invalid/none")


STORES: list[Callable[[], Any]] = [MemoryStore, sqlite_store, postgres_store]
S = 1_000_000_000


@pytest.fixture(params=STORES, ids=lambda f: f.__name__)
def store(request: pytest.FixtureRequest) -> Any:
    if request.param is postgres_store:
        made = request.getfixturevalue("pg_store")()
    else:
        made = request.param()
    assert isinstance(made, JobStore)
    return made


class Host:
    """What a Job needs of its scheduler, for jobs made outside one."""

    def _name_job(self, job: Job) -> str:
        raise AssertionError("the suite names its jobs")

    def _job_next_run_time(self, job: Job) -> datetime | None:
        return None

    def _to_datetime(self, ns: int, timebase: int) -> datetime:
        raise AssertionError("not used")

    def cancel(self, job_or_id: Job | str) -> bool:
        raise AssertionError("not used")

    def reschedule(self, job_or_id: Job | str, when: Any) -> Job:
        raise AssertionError("not used")

    def pause(self, job_or_id: Job | str) -> None:
        raise AssertionError("not used")

    def resume(self, job_or_id: Job | str) -> None:
        raise AssertionError("not used")


def job(id: str | None = None) -> Job:
    made = new_job(Host(), print, 0)
    made._id = id
    return made


class Side:
    """A side occurrence as the store sees it: a key with a queue slot and its job."""

    def __init__(self, of: Job) -> None:
        self.job = of
        self._qkey: int | None = None


def test_named_and_anonymous_jobs_are_live(store: Any) -> None:
    a, b = job("a"), job()
    store.add(a, "a")
    store.add(b, None)
    store.push(MONOTONIC, b, 5 * S, 0)  # an anonymous job is found through its queued entry
    assert store.get("a") is a and store.get("b") is None
    assert store.contains(a) and store.contains(b)
    assert store.count() == 2 and set(store.jobs()) == {a, b}


def test_occurrences_come_out_in_due_priority_insertion_order(store: Any) -> None:
    jobs = [job(f"j{i}") for i in range(5)]
    for j in jobs:
        store.add(j, j._id)
    store.push(MONOTONIC, jobs[0], 10 * S, 0)
    store.push(MONOTONIC, jobs[1], 5 * S, 0)
    store.push(MONOTONIC, jobs[2], 10 * S, -1)  # same due, lower priority first
    store.push(MONOTONIC, jobs[3], 10 * S, 0)  # same due and priority: after jobs[0]
    # A wall-clock entry at wall 1 000 005 s is mono 5 s + ... on this clock reading:
    wall, mono = 1_000_000 * S, 0
    store.push(WALL, jobs[4], wall + 7 * S, 0)
    order = []
    while (head := store.head(wall, mono)) is not None:
        timebase, entry, due = head
        order.append((store.take(timebase, entry), due))
    assert order == [
        (jobs[1], 5 * S),
        (jobs[4], 7 * S),
        (jobs[2], 10 * S),
        (jobs[0], 10 * S),
        (jobs[3], 10 * S),
    ]
    assert store.head(wall, mono) is None and not store.wall_queued()


def test_a_push_replaces_and_unqueue_removes(store: Any) -> None:
    a, b = job("a"), job("b")
    store.add(a, "a")
    store.add(b, "b")
    store.push(MONOTONIC, a, 5 * S, 0)
    store.push(MONOTONIC, a, 8 * S, 0)  # rescheduled: the 5 s entry can never come out
    store.push(MONOTONIC, b, 6 * S, 0)
    assert store.unqueue(MONOTONIC, b) is True and store.unqueue(MONOTONIC, b) is False
    head = store.head(0, 0)
    assert head is not None and head[2] == 8 * S and store.take(head[0], head[1]) is a
    assert store.head(0, 0) is None
    assert list(store.queued()) == []


def test_anonymous_jobs_stay_findable_until_they_end(store: Any) -> None:
    a = job()
    store.add(a, None)
    store.push(MONOTONIC, a, 0, 0)
    head = store.head(0, 0)
    assert head is not None and store.take(head[0], head[1]) is a
    store.loosen(a)  # taken, not ended: still live
    assert store.contains(a) and store.count() == 1 and store.jobs() == [a]
    store.name(a, "given")
    a._id = "given"
    assert store.get("given") is a and store.count() == 1
    a._state = JobState.COMPLETED
    store.forget(a)
    assert not store.contains(a) and store.count() == 0 and store.get("given") is None


def test_waiting_starts_are_first_in_first_out(store: Any) -> None:
    owner = job("o")
    sides = [Side(owner) for _ in range(3)]
    for side in sides:
        store.block(side)
    store.unblock(sides[1])
    assert store.blocked_count() == 2
    assert store.next_blocked() is sides[0]
    assert store.next_blocked() is sides[2]
    assert store.next_blocked() is None


def test_dead_letters_are_kept_in_order_until_taken(store: Any) -> None:
    store.put_dead("a", "record a")
    store.put_dead("b", "record b")
    assert store.dead_letters() == ["record a", "record b"]
    assert store.dead_letter("b") == "record b" and store.dead_letter("c") is None
    assert store.take_dead("a") == "record a" and store.take_dead("a") is None
    assert store.dead_letters() == ["record b"]


def test_queue_stats_count_live_and_stale_entries(store: Any) -> None:
    jobs = [job(f"j{i}") for i in range(3)]
    for j in jobs:
        store.add(j, j._id)
        store.push(MONOTONIC, j, S, 0)
    store.unqueue(MONOTONIC, jobs[0])
    live, stale, compactions = store.queue_stats()
    assert (live, stale) == (2, 1) and compactions >= 0


# -- a Scheduler on each store --------------------------------------------------------------------


def test_a_scheduler_runs_on_a_given_store(store: Any) -> None:
    clock = FakeClock()
    s = Scheduler(clock=clock, store=store)
    ran: list[str] = []
    s.register("append", ran.append)  # (a durable store keeps a task's name, not a function)
    s.schedule("append", 5, args=("a",), id="a")
    s.schedule("append", 3, args=("b",))
    assert store.count() == 2 and store.get("a") is s.get("a")
    assert s.run_for(10) == 2 and ran == ["b", "a"]
    assert store.count() == 0
    s.shutdown()  # (closes a durable store's connection)


def test_a_scheduler_that_failed_to_build_leaves_its_store_free(store: Any) -> None:
    with pytest.raises(TypeError, match="executor must be"):
        Scheduler(clock=FakeClock(), store=store, executor="threads")
    s = Scheduler(clock=FakeClock(), store=store)  # (it was "in use" by the failed one)
    s.register("print", print)
    s.schedule("print", 5, id="x")
    assert store.count() == 1
    s.shutdown()


def test_a_store_belongs_to_one_scheduler(store: Any) -> None:
    first = Scheduler(clock=FakeClock(), store=store)
    with pytest.raises(InvalidArgument, match="store must not be in use: a store belongs to one"):
        Scheduler(store=store)  # even before the first has any job
    first.register("print", print)
    first.schedule("print", 5, id="x")
    with pytest.raises(InvalidArgument, match="store must not be in use"):
        Scheduler(store=store)
    assert store.count() == 1
    first.shutdown()


@pytest.mark.parametrize("make", [sqlite_store, postgres_store])
def test_the_sql_stores_are_durable_stores(make: Callable[[], Any]) -> None:
    store = make()
    assert isinstance(store, DurableStore) and store.durable
    assert not isinstance(MemoryStore(), DurableStore)


def test_only_stores_are_stores() -> None:
    with pytest.raises(
        TypeError,
        match="store must be a MemoryStore, a SQLiteStore, a PostgresStore or a store URL",
    ):
        Scheduler(store=42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=r"store must look like 'postgresql://"):
        PostgresStore.from_url("mysql://app@db/app")
    with pytest.raises(InvalidArgument, match=r"store must look like 'sqlite:///jobs\.db'"):
        Scheduler(store="sqlite://jobs.db")
    with pytest.raises(InvalidArgument, match="store must be a store object or a URL"):
        Scheduler(store="jobs.db")
    with pytest.raises(
        InvalidArgument, match=r"takes no query parameters, got 'sqlite:///x\.db\?mode"
    ):
        Scheduler(store="sqlite:///x.db?mode=ro")  # (made a file named 'x.db?mode=ro')
    assert SQLiteStore.from_url("sqlite:///my%20jobs.db").path == "my jobs.db"


def test_a_store_urls_scheme_is_read_in_any_case(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    s = Scheduler(store=f"SQLite:///{path}")  # (a URL's scheme is case-insensitive: was refused)
    assert isinstance(s.store, SQLiteStore) and Path(s.store.path) == path
    s.schedule("print", 60, id="loud")
    s.shutdown()
    assert cli_main(["jobs", "--store", f"SQLITE:///{path}"]) == 0
    assert SQLiteStore.from_url(f"SQLITE:///{path}").path == str(path)


# -- the translation of timing state at the store boundary ---------------------------------------


@given(
    due=st.integers(-(10**18), 10**18),
    wall=st.integers(0, 10**19),
    mono=st.integers(0, 10**15),
    timebase=st.sampled_from([WALL, MONOTONIC]),
)
def test_due_times_round_trip_through_utc_exactly(
    due: int, wall: int, mono: int, timebase: int
) -> None:
    assert from_utc(to_utc(due, timebase, wall, mono), timebase, wall, mono) == due


def test_a_monotonic_due_time_is_stored_as_the_instant_it_names() -> None:
    clock = FakeClock(start=1_800_000_000)
    clock.advance(100)
    wall, mono = clock.time_ns(), clock.monotonic_ns()
    # Due 30 s from now on the monotonic axis: stored as now + 30 s in UTC.
    assert to_utc(mono + 30 * S, MONOTONIC, wall, mono) == wall + 30 * S
    # After a "restart", the monotonic origin differs; the same instant is 30 s away again
    # if no time passed, and late if the wall clock went on meanwhile.
    restarted = (wall + 45 * S, 7 * S)
    assert from_utc(wall + 30 * S, MONOTONIC, *restarted) == 7 * S - 15 * S
    assert to_utc(123, WALL, wall, mono) == 123
    with pytest.raises(ValueError, match="timebase must be WALL or MONOTONIC"):
        to_utc(1, 2, wall, mono)
