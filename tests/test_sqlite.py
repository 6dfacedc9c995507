"""SQLiteStore: jobs survive restarts, each fire runs once, and the file's faults are reported.

The tests written against ``open_scheduler`` run on PostgreSQL too (a schema of their own in the
session's throwaway database): they are the durable-store suite both SQL stores must pass. Those
that look inside the file are marked ``sqlite_only``; PostgreSQL's own are in test_postgres.py.

Time is a FakeClock everywhere except the real-process tests at the end, which wait for a
condition with a deadline (never a fixed sleep). A "restart" is a second Scheduler opening the
same file, the first one shut down (or, for a crash, simply abandoned mid-run).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from duetime import (
    After,
    At,
    ConflictingIdError,
    Cron,
    ExponentialBackoff,
    FakeClock,
    FixedBackoff,
    FixedDelay,
    FixedRate,
    InvalidArgument,
    Job,
    JobLookupError,
    JobLost,
    JobMissed,
    JobSkipped,
    JobStarted,
    JobState,
    JobSucceeded,
    Misfire,
    NoRetry,
    Overlap,
    Poisson,
    Scheduler,
    SchedulerShutdownError,
    SQLiteStore,
    StoreError,
    SystemClock,
    TokenBucket,
    Window,
    current_run,
)
from duetime._durable import MissingTask
from duetime.stores import codec
from duetime.stores.sqlite import SCHEMA_VERSION

from . import workers
from .conftest import WAIT, until

UTC = timezone.utc
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)

Opener = Callable[..., Scheduler]


class Calls:
    """What jobs were called with, and with which fire keys."""

    def __init__(self) -> None:
        self.args: list[Any] = []
        self.keys: list[str] = []

    def record(self, *args: Any, **kwargs: Any) -> None:
        run = current_run()
        assert run is not None
        self.args.append((args, kwargs) if kwargs else args)
        self.keys.append(run.key)

    def fail(self) -> None:
        self.record()
        raise RuntimeError("boom")


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "jobs.db"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture(params=["sqlite", "postgres"])
def open_scheduler(
    db: Path, clock: FakeClock, calls: Calls, request: pytest.FixtureRequest
) -> Iterator[Opener]:
    """Open a Scheduler on ``db`` (a restart, each time), or on one PostgreSQL schema, its tasks
    registered; every one is shut down at the end (which closes its connection)."""
    opened: list[Scheduler] = []
    new_store: Callable[[], Any] = (
        (lambda: SQLiteStore(db))
        if request.param == "sqlite"
        else request.getfixturevalue("pg_store")
    )

    def make(clock: FakeClock = clock, **options: Any) -> Scheduler:
        options.setdefault("store", new_store())
        s = Scheduler(clock, **options)
        s.register("record", calls.record)
        s.register("fail", calls.fail)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.shutdown()


# -- what is stored, and what comes back --------------------------------------------------------


WHENS: list[Any] = [
    At(T0 + timedelta(hours=1)),
    After(90),
    After(minutes=2),
    FixedRate(300),
    FixedRate(minutes=5, start=T0 + timedelta(minutes=1)),
    FixedDelay(60, initial_delay=5),
    Cron("30 9 * * mon-fri", tz="Europe/Berlin"),
    # (A zone object comes back as its name: the trigger still equals the one scheduled.)
    Cron("30 9 * * mon-fri", tz=ZoneInfo("Europe/Berlin")),
    Cron("0 0 L * *"),
    Poisson(per_day=300, window=Window("09:00", "17:00", days="mon-fri", tz="Europe/Berlin")),
    Poisson(per_day=30, window=Window("09:00", "17:00", tz=ZoneInfo("America/New_York"))),
]


@pytest.mark.parametrize("when", WHENS, ids=repr)
def test_every_trigger_survives_a_restart(open_scheduler: Opener, when: Any) -> None:
    s = open_scheduler(rng=random.Random(1))
    job = s.schedule("record", when, id="j")
    due = job.next_run_time
    s.shutdown()
    again = open_scheduler().get("j")
    assert again is not None
    assert again.trigger == when
    assert again.next_run_time == due
    assert again.state is JobState.SCHEDULED


def test_every_option_and_argument_survives_a_restart(open_scheduler: Opener) -> None:
    s = open_scheduler(executors={"reports": "inline"})
    args = [datetime(2026, 1, 2, 3, 4, tzinfo=UTC), Decimal("9.99"), UUID(int=7), date(2026, 1, 2)]
    kwargs = {"nested": {"when": [1, "two", None]}, "flag": True}
    retry = ExponentialBackoff(base=2, factor=3, cap=60, max_attempts=4, retry_on=(OSError,))
    s.schedule(
        "record",
        FixedRate(60),
        args=args,
        kwargs=kwargs,
        id="full",
        name="the full job",
        priority=-5,
        retry=retry,
        misfire=Misfire.RUN_ALL,
        grace=timedelta(seconds=7),
        overlap=Overlap.QUEUE,
        jitter=3,
        executor="reports",
        paused=True,
    )
    s.shutdown()
    job = open_scheduler(executors={"reports": "inline"}).get("full")
    assert job is not None
    assert job.args == tuple(args) and job.kwargs == kwargs
    assert (job.name, job.priority, job.state) == ("the full job", -5, JobState.PAUSED)
    opts = job._opts
    assert opts.retry == retry
    assert (opts.misfire, opts.grace_ns, opts.overlap) == (
        Misfire.RUN_ALL,
        7 * 10**9,
        Overlap.QUEUE,
    )
    assert (opts.jitter_ns, opts.executor) == (3 * 10**9, "reports")


def test_a_fixed_backoff_policy_survives_a_restart(open_scheduler: Opener) -> None:
    s = open_scheduler()
    s.schedule("record", 10, id="r", retry=FixedBackoff([1, 5, 30]))
    s.shutdown()
    job = open_scheduler().get("r")
    assert job is not None and job._opts.retry == FixedBackoff([1, 5, 30])


def test_jobs_get_and_len_see_stored_jobs_at_once(open_scheduler: Opener) -> None:
    s = open_scheduler()
    for i in range(5):
        s.schedule("record", 60 + i, id=f"j{i}")
    s.shutdown()
    t = open_scheduler()
    assert len(t) == 5
    assert [j.id for j in t.jobs()] == [f"j{i}" for i in range(5)]
    assert t.get("j3") is not None and "j4" in t


def test_a_restarted_scheduler_runs_the_jobs_at_their_times(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    s = open_scheduler()
    s.schedule("record", 30, args=["later"], id="a")
    s.schedule("record", FixedRate(60), args=["tick"], id="t")
    s.shutdown()
    t = open_scheduler()
    assert t.run_for(130) == 3
    assert calls.args == [("later",), ("tick",), ("tick",)]
    assert calls.keys == [
        "a@2026-03-02T08:00:30+00:00",
        "t@2026-03-02T08:01:00+00:00",
        "t@2026-03-02T08:02:00+00:00",
    ]
    assert "a" not in t and t.get("t") is not None


def test_fire_keys_are_recorded_once_with_their_outcome(
    open_scheduler: Opener, calls: Calls
) -> None:
    s = open_scheduler()
    s.schedule("record", FixedRate(60), id="t")
    s.schedule("fail", 30, id="f")
    s.run_for(150)
    runs = s.runs()
    assert [(r.key, r.state, r.attempt) for r in runs] == [
        ("t@2026-03-02T08:02:00+00:00", "succeeded", 1),
        ("t@2026-03-02T08:01:00+00:00", "succeeded", 1),
        ("f@2026-03-02T08:00:30+00:00", "dead", 1),
    ]
    assert runs[2].error == "RuntimeError: boom"
    assert runs[0].worker and runs[0].due == T0 + timedelta(minutes=2)
    assert [r.key for r in s.runs("t", limit=1)] == ["t@2026-03-02T08:02:00+00:00"]
    assert [r.key for r in s.runs(state="dead")] == ["f@2026-03-02T08:00:30+00:00"]


def test_runs_rejects_bad_arguments(open_scheduler: Opener) -> None:
    s = open_scheduler()
    with pytest.raises(InvalidArgument, match="state must be one of queued, running"):
        s.runs(state="done")
    with pytest.raises(InvalidArgument, match="limit must be at least 1, got 0"):
        s.runs(limit=0)
    with pytest.raises(TypeError, match="job_or_id must be a Job, a job id"):
        s.runs(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="runs\\(\\) needs a durable store"):
        Scheduler(FakeClock()).runs()


# -- misfire across a restart ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("misfire", "expected"),
    [
        (Misfire.RUN_ONCE, ["08:01"]),
        (Misfire.SKIP, []),
        (Misfire.RUN_ALL, ["08:01", "08:02", "08:03", "08:04", "08:05"]),
    ],
)
def test_what_fell_due_while_down_follows_the_misfire_policy(
    open_scheduler: Opener, clock: FakeClock, calls: Calls, misfire: Misfire, expected: list[str]
) -> None:
    s = open_scheduler()
    s.schedule("record", Cron("* * * * *"), id="c", misfire=misfire)
    s.shutdown()
    later = FakeClock(T0 + timedelta(minutes=5, seconds=30))  # down for five fires
    t = open_scheduler(clock=later)
    t.run_pending()
    assert [k.split("T")[1][:5] for k in calls.keys] == expected
    t.run_for(60)  # and then on schedule again
    assert calls.keys[-1] == "c@2026-03-02T08:06:00+00:00"


def test_a_one_shot_due_while_down_runs_at_the_restart(
    open_scheduler: Opener, calls: Calls
) -> None:
    s = open_scheduler()
    s.schedule("record", At(T0 + timedelta(minutes=1)), id="once")
    s.shutdown()
    t = open_scheduler(clock=FakeClock(T0 + timedelta(days=2)))
    assert t.run_pending() == 1
    assert calls.keys == ["once@2026-03-02T08:01:00+00:00"]


def test_an_after_delay_is_kept_as_the_instant_it_names(
    open_scheduler: Opener, calls: Calls
) -> None:
    s = open_scheduler()
    s.schedule("record", After(600), id="a")
    s.shutdown()
    t = open_scheduler(clock=FakeClock(T0 + timedelta(minutes=4)))
    job = t.get("a")
    assert job is not None and job.next_run_time == T0 + timedelta(minutes=10)
    assert t.run_for(5 * 60) == 0
    assert t.run_for(60) == 1


# -- crashes, leases and fencing -------------------------------------------------------------------


def test_a_run_lost_in_a_crash_runs_again_after_its_lease(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    crashed = open_scheduler(lease=30)

    def die() -> None:
        raise SystemExit("killed mid-run")  # not the job's outcome: the run stays claimed

    crashed.register("die", die)
    crashed.schedule("die", 10, id="x")
    with pytest.raises(SystemExit):
        crashed.run_for(10)
    assert [(r.state, r.attempt) for r in crashed.runs()] == [("running", 1)]

    # The restarted process has the task working again.
    t = open_scheduler(lease=30)
    t.register("die", calls.record)
    lost: list[Any] = []
    t.subscribe(lost.append, JobLost)
    assert t.run_for(10) == 0  # the lease has not run out yet
    assert t.run_for(21) == 1  # 10 + 30 s after the claim: it has
    assert calls.keys == ["x@2026-03-02T08:00:10+00:00"]
    assert [(e.key, e.attempt) for e in lost] == [("x@2026-03-02T08:00:10+00:00", 2)]
    assert [(r.state, r.attempt) for r in t.runs()] == [("succeeded", 2)]
    assert "x" not in t


def _crashed_run(open_scheduler: Opener, **options: Any) -> None:
    """A FixedRate(10) job "x" (with ``options``) whose 08:00:10 run's process died mid-run
    (the run stays claimed, attempt 1, its lease 30 s: until 08:00:40)."""
    crashed = open_scheduler(lease=30)

    def die() -> None:
        raise SystemExit("killed mid-run")  # not the job's outcome: the run stays claimed

    crashed.register("tick", die)
    crashed.schedule("tick", FixedRate(10), id="x", **options)
    with pytest.raises(SystemExit):
        crashed.run_for(10)


LOST_KEY = "x@2026-03-02T08:00:10+00:00"


def test_a_run_taken_over_survives_a_read_of_its_job_before_it_starts(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    _crashed_run(open_scheduler)
    taker = open_scheduler(lease=30)
    admin = open_scheduler()
    runs: list[tuple[str, int]] = []

    def tick() -> None:
        run = current_run()
        assert run is not None
        runs.append((run.key, run.attempt))
        if len(runs) == 1:
            # Another process changes the job's row, and the taker reads it back while the
            # run it took over waits its turn: that read used to drop the run from memory,
            # and nobody ran it (its lease renewed by the taker's heartbeat).
            admin.pause("x")
            admin.resume("x")
            taker.jobs()

    taker.register("tick", tick)
    clock.advance(31)  # the lease has run out
    assert taker.run_pending() == 2
    assert (LOST_KEY, 2) in runs
    assert [(r.state, r.attempt) for r in taker.runs("x") if r.key == LOST_KEY] == [
        ("succeeded", 2)
    ]


def _stepped_after_a_crash(
    open_scheduler: Opener, clock: FakeClock, **options: Any
) -> tuple[list[tuple[str, int, datetime]], list[JobLost]]:
    """``_crashed_run``, then another process stepped to 08:01:10 with ``run_until``: the
    runs it started (key, attempt, time) and its JobLost events."""
    _crashed_run(open_scheduler, **options)
    taker = open_scheduler(lease=30)
    started: list[tuple[str, int, datetime]] = []
    lost: list[Any] = []

    def tick() -> None:
        run = current_run()
        assert run is not None
        started.append((run.key, run.attempt, clock.now()))

    taker.register("tick", tick)
    taker.subscribe(lost.append, JobLost)
    taker.run_until(T0 + timedelta(seconds=70))
    return started, lost


def test_stepping_takes_a_lost_run_over_when_its_lease_runs_out(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # run_until looks at the store when a lease of a run going elsewhere runs out, as a
    # runner's poll would: it took the lost run over only at its target, after every later
    # fire (a simulated year recovered it a year late).
    started, lost = _stepped_after_a_crash(open_scheduler, clock)
    end = T0 + timedelta(seconds=40)  # the lease's end
    assert [(e.key, e.attempt, e.time) for e in lost] == [(LOST_KEY, 2, end)]
    assert started[0] == (LOST_KEY, 2, end)
    # (Overlap.SKIP: the fires at 20 s and 30 s met the run going, as far as anyone knew.)
    assert [(k[-14:-6], a) for k, a, _ in started[1:]] == [(f"08:00:{s}", 1) for s in (40, 50)] + [
        (f"08:01:{s}", 1) for s in ("00", 10)
    ]


def test_step_takes_a_lost_run_over_when_its_lease_runs_out(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # step() jumps to the next due occurrence: a lost run falls due where its lease ends (it
    # jumped past that end to the next regular fire, and a lost one-shot was never run).
    _crashed_run(open_scheduler)
    taker = open_scheduler(lease=30)
    taker.register("tick", lambda: None)
    run = taker.step()
    assert run is not None and (run.key, run.attempt) == (LOST_KEY, 2)
    assert clock.now() == T0 + timedelta(seconds=40)
    run = taker.step(until=T0 + timedelta(seconds=45))
    assert run is not None and (run.key[-14:-6], run.attempt) == ("08:00:40", 1)


def test_stepping_past_a_lease_end_in_a_job_goes_on(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # A job that moves the clock itself (faking work) carried it past the end of the lease
    # run_until was to stop at: the step back to that end raised (advance by a negative).
    _crashed_run(open_scheduler)
    taker = open_scheduler(lease=30)
    once: list[str] = []

    def tick() -> None:
        run = current_run()
        assert run is not None
        once.append(run.key)
        if len(once) == 1:
            clock.advance(30)  # from 08:00:15 past the lease's end, 08:00:40

    taker.register("tick", tick)
    taker.schedule("tick", At(T0 + timedelta(seconds=15)), id="slow")
    assert taker.run_until(T0 + timedelta(seconds=70)) >= 3
    assert clock.now() == T0 + timedelta(seconds=70)
    assert LOST_KEY in once


def test_stepping_runs_a_lost_run_before_the_fires_that_waited_for_it(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # Overlap.QUEUE with Misfire.RUN_ALL: the fires due while the lost run's lease lasted wait
    # for it, then run after it, oldest first; none is skipped or coalesced.
    started, _ = _stepped_after_a_crash(
        open_scheduler, clock, overlap=Overlap.QUEUE, misfire=Misfire.RUN_ALL
    )
    assert [(k[-14:-6], a) for k, a, _ in started] == [("08:00:10", 2)] + [
        (f"08:00:{s}", 1) for s in (20, 30, 40, 50)
    ] + [(f"08:01:{s}", 1) for s in ("00", 10)]


def test_a_run_taken_over_waits_for_a_run_of_its_job_going_elsewhere(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    _crashed_run(open_scheduler)
    taker = open_scheduler(lease=30)
    other = open_scheduler(lease=30)
    runs: list[tuple[str, int]] = []
    during: list[int] = []

    def tick() -> None:
        run = current_run()
        assert run is not None
        runs.append((run.key, run.attempt))
        if len(runs) == 1:
            during.append(taker.run_pending())  # takes the lost run over, and waits

    taker.register("tick", tick)
    other.register("tick", tick)
    clock.advance(31)  # the lost run's lease has run out
    other.trigger("x")  # (a run of the job going in other: it runs here, at once)
    assert during == [0] and [k for k, _ in runs] == ["x@trigger-2026-03-02T08:00:41+00:00"]
    clock.advance(0.25)
    assert taker.run_pending() == 2  # the lost run, and the regular fire that waited too
    assert (LOST_KEY, 2) in runs


def test_a_task_registered_after_start_takes_over_its_lost_runs_at_once(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    crashed = open_scheduler(lease=30)

    def die() -> None:
        raise SystemExit("killed mid-run")

    crashed.register("die", die)
    crashed.schedule("die", 10, id="x")
    with pytest.raises(SystemExit):
        crashed.run_for(10)
    # Started past the lease with the task not registered yet: its first look for lost runs
    # passes this one over. Registering the task looks again at once (the clock stands still).
    t = open_scheduler(clock=FakeClock(T0 + timedelta(minutes=5)), lease=30)
    t.start()
    until(lambda: t.stats().running == 0)
    t.register("die", calls.record)
    until(lambda: calls.keys == ["x@2026-03-02T08:00:10+00:00"])
    assert t.wait_idle(WAIT)
    assert [(r.state, r.attempt) for r in t.runs("x")] == [("succeeded", 2)]


def test_giving_back_a_run_is_fenced_by_worker_and_attempt(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    crashed = open_scheduler(lease=30)

    def die() -> None:
        raise SystemExit("interrupted mid-run")  # not given back: it stays claimed

    crashed.register("die", die)
    crashed.schedule("die", 10, id="x")
    with pytest.raises(SystemExit):
        crashed.run_for(10)
    store: Any = crashed.store
    key = "x@2026-03-02T08:00:10+00:00"
    t = open_scheduler(lease=30)
    t.register("die", calls.record)
    store.release([(key, 2)])  # not the attempt it holds: nothing changes
    assert t.run_for(1) == 0  # its lease has not run out, and it was not given back
    store.release([(key, 1)])
    assert t.run_for(1) == 1  # given back: taken over at once
    assert [(r.state, r.attempt) for r in t.runs()] == [("succeeded", 2)]
    store.release([(key, 1)])  # too late: another worker's record is left alone
    assert [(r.state, r.attempt, r.worker) for r in t.runs()] == [
        ("succeeded", 2, t.store.worker)  # type: ignore[attr-defined]
    ]
    assert calls.keys == [key]


@pytest.mark.parametrize("wait", [False, True])
def test_a_shutdown_during_a_batch_starts_nothing_more_and_its_rest_is_taken_over(
    open_scheduler: Opener, clock: FakeClock, calls: Calls, wait: bool
) -> None:
    # Five fires claimed in one batch; the first one's job shuts its scheduler down. Nothing
    # more starts; the other four are given back, and run once, elsewhere, at its first look
    # for lost runs (not after their lease). With wait=True, which a job cannot do for itself,
    # the store must stay open until the job's outcome is written and the rest given back.
    s = open_scheduler(lease=30, executor="inline")

    def stop() -> None:
        calls.record()
        s.shutdown(wait=wait)

    s.register("stop", stop)
    s.schedule("stop", 10, id="a0", priority=-1)  # first in the batch
    for i in range(1, 5):
        s.schedule("record", 10, id=f"a{i}")
    s.start()
    clock.advance(10)
    t = open_scheduler(lease=30)
    # (The stopping runner writes a0's outcome on its way out.)
    until(lambda: ("a0", "succeeded") in {(r.job_id, r.state) for r in t.runs()}, what="a0")
    assert calls.keys == ["a0@2026-03-02T08:00:10+00:00"]
    held = [r for r in t.runs() if r.state == "running"]
    assert len(held) == 4 and {r.worker for r in held} == {s.store.worker}  # type: ignore[attr-defined]
    # Their leases (30 s) have not run out: given back. (The runner gives them back just after
    # it writes a0's outcome; a new scheduler looks for lost runs at once.)
    until(lambda: open_scheduler(lease=30).run_for(0) == 4, what="the rest, given back")
    assert sorted(calls.keys) == [f"a{i}@2026-03-02T08:00:10+00:00" for i in range(5)]
    assert sorted((r.job_id, r.state, r.attempt) for r in t.runs()) == [("a0", "succeeded", 1)] + [
        (f"a{i}", "succeeded", 2) for i in range(1, 5)
    ]


def test_a_worker_claims_no_more_than_its_threads_can_soon_run(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # Two threads: two runs going and two waiting; the other six due fires are left in the
    # store for other processes until a thread is free.
    release = threading.Event()
    started: list[str] = []

    def hold(name: str) -> None:
        started.append(name)
        release.wait(WAIT)

    s = open_scheduler(executor=ThreadPoolExecutor(2))
    s.register("hold", hold)
    for i in range(10):
        s.schedule("hold", 10, args=[f"j{i}"], id=f"j{i}")
    s.start()
    try:
        clock.advance(10)
        until(lambda: len(started) == 2, what="two runs going")
        claimed = [r for r in s.runs() if r.state == "running"]
        assert len(claimed) == 4
        release.set()
        until(lambda: len(started) == 10, what="all ten run")
        assert s.wait_idle(WAIT)
        assert sorted(r.state for r in s.runs()) == ["succeeded"] * 10
    finally:
        release.set()
        s.shutdown()
    assert sorted(started) == [f"j{i}" for i in range(10)]


def test_work_cancelled_at_shutdown_is_taken_over_not_lost(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    # One thread: b0 runs, b1 waits in the pool, b2 is not claimed (two claims per thread).
    # shutdown(cancel_running=True) cancels b1 before it starts: a deploy's restart, not a
    # decision that b1 must never run. b1 is given back: a later process runs it at once (not
    # after its lease), and b2.
    release = threading.Event()

    def hold() -> None:
        calls.record()
        release.wait(WAIT)

    s = open_scheduler(lease=30, executor=ThreadPoolExecutor(1))
    s.register("hold", hold)
    for i in range(3):
        s.schedule("hold", 10, id=f"b{i}", priority=i)
    s.start()
    clock.advance(10)
    until(lambda: len(calls.keys) == 1, what="b0 to start")
    s.shutdown(wait=False, cancel_running=True)
    release.set()
    t = open_scheduler(lease=30)
    t.register("hold", calls.record)
    until(lambda: ("b0", "succeeded") in {(r.job_id, r.state) for r in t.runs()}, what="b0")
    assert t.run_for(1) == 2  # b2, never claimed, and b1, given back before its lease ran out
    assert t.run_for(30) == 0
    assert sorted(calls.keys) == [f"b{i}@2026-03-02T08:00:10+00:00" for i in range(3)]
    assert sorted((r.job_id, r.state) for r in t.runs()) == [
        (f"b{i}", "succeeded") for i in range(3)
    ]


def test_runs_going_on_at_shutdown_keep_their_leases_while_it_waits_for_them(
    open_scheduler: Opener, calls: Calls
) -> None:
    # shutdown(wait=True) joined the runner thread, which renews the leases, and then waited
    # for the runs: another worker took a long run over mid-shutdown and ran it a second time.
    clocks = [FakeClock(T0), FakeClock(T0)]
    one = open_scheduler(clock=clocks[0], lease=0.3)
    two = open_scheduler(clock=clocks[1], lease=0.3)
    started, release = threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        release.wait(WAIT)

    one.register("slow", slow)
    two.register("slow", calls.record)
    one.schedule("slow", 10, id="s")
    one.start()
    clocks[0].advance(10)  # claimed, its lease until 10.3 s
    until(started.is_set, what="the run to start")
    stopping = threading.Thread(target=one.shutdown, kwargs={"wait": True})
    stopping.start()
    runner: Any = one._runner
    until(lambda: not runner._thread.is_alive(), what="the runner thread to end")
    replica: Any = one._replica
    polled = replica.next_poll
    clocks[0].advance(0.25)  # a poll is due: the waiting shutdown renews, until 10.55 s
    until(lambda: replica.next_poll != polled, what="the lease renewed")
    clocks[1].advance(10.4)
    assert two.run_pending() == 0  # not taken over: its lease holds
    release.set()
    stopping.join(WAIT)
    assert not stopping.is_alive()
    assert calls.keys == []
    assert [(r.state, r.attempt) for r in two.runs()] == [("succeeded", 1)]


@pytest.mark.parametrize("ending", ["succeeds", "fails, to be retried", "fails for good"])
def test_a_completion_after_the_lease_was_taken_over_is_refused_and_not_counted(
    open_scheduler: Opener, calls: Calls, caplog: pytest.LogCaptureFixture, ending: str
) -> None:
    # The zombie's success, failure, retry or dead letter is not recorded: nor is it counted
    # in its stats() (it said succeeded=1, or failed=1 and retried=1, for a run done elsewhere).
    slow = open_scheduler(lease=30)
    other_clock = FakeClock(T0)
    other = open_scheduler(clock=other_clock, lease=30)

    def stall() -> None:
        # While this worker "stalls", the other one's clock passes the lease and takes over.
        other_clock.advance(50)
        other.run_pending()
        calls.record()
        if ending != "succeeds":
            raise RuntimeError("late")

    slow.register("stall", stall)
    other.register("stall", calls.record)
    retry = FixedBackoff([5]) if ending == "fails, to be retried" else None
    slow.schedule("stall", 10, id="z", retry=retry)
    with caplog.at_level(logging.WARNING, logger="duetime"):
        slow.run_for(10)
    assert "no longer holds it" in caplog.text
    assert [(r.state, r.attempt, r.worker) for r in other.runs()] == [
        ("succeeded", 2, other.store.worker)  # type: ignore[attr-defined]
    ]
    assert len(calls.keys) == 2  # the zombie ran, but only the other worker's outcome counts
    stats = slow.stats()
    assert (stats.succeeded, stats.failed, stats.retried, stats.dead) == (0, 0, 0, 0)
    assert slow.failed() == []
    assert other.stats().succeeded == 1


def test_a_run_claimed_is_not_started_by_a_worker_that_lost_it_before_it_started(
    open_scheduler: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    # "one" claims two fires together and stalls in the first run past the lease: "two" takes
    # the second over and runs it. "one" then started it too (claimed, so it went ahead).
    clocks = [FakeClock(T0), FakeClock(T0)]
    one = open_scheduler(clock=clocks[0], lease=30, executor="inline")
    two = open_scheduler(clock=clocks[1], lease=30)
    ran: list[tuple[str, int]] = []

    def record() -> None:
        run = current_run()
        assert run is not None
        ran.append((run.job.id, run.attempt))

    def stall() -> None:
        record()
        clocks[1].advance(50)
        assert two.run_pending() == 1  # (takes "b" over and runs it; "a" is not its task)
        clocks[0].advance(40)

    one.register("stall", stall)
    for s in (one, two):
        s.register("job", record)
    one.schedule("stall", 10, id="a")
    one.schedule("job", 10, id="b")
    two.get("a")
    caplog.set_level(logging.WARNING, logger="duetime")
    one.start()  # (its runner claims the fires due together, then runs them one by one)
    assert one.wait_idle(WAIT)
    clocks[0].advance(10)
    until(lambda: "before it started here" in caplog.text, what="b not started by one")
    assert one.wait_idle(WAIT)
    assert ran == [("a", 1), ("b", 2)]
    assert [(r.state, r.attempt) for r in two.runs("b")] == [("succeeded", 2)]


def test_a_run_taken_over_is_not_started_by_a_worker_that_lost_it_before_it_started(
    open_scheduler: Opener, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "one" takes the run over from "zero" but stalls before starting it; "two" takes it over
    # from "one" in turn and runs it. "one", waking, started it too (attempt 2 beside 3).
    clocks = [FakeClock(T0) for _ in range(3)]
    zero, one, two = (open_scheduler(clock=c, lease=30) for c in clocks)
    attempts: list[int] = []

    def job() -> None:
        run = current_run()
        assert run is not None
        attempts.append(run.attempt)
        if run.attempt == 1:
            clocks[1].advance(50)
            with one._lock:
                replica: Any = one._replica
                replica.sync_locked()  # (takes the run over: queued here, not started)
            clocks[2].advance(100)
            assert two.run_pending() == 1  # (takes it over from "one" and runs it)
            with caplog.at_level(logging.WARNING, logger="duetime"), monkeypatch.context() as m:
                m.setattr(one._replica, "sync_locked", lambda full=True: None)  # (reads no changes)
                assert one.run_pending() == 0
            assert "was taken over again before it started" in caplog.text

    for s in (zero, one, two):
        s.register("job", job)
    zero.schedule("job", 10, id="j")
    two.get("j")
    one.get("j")
    clocks[0].advance(10)
    zero.run_pending()
    assert attempts == [1, 3]
    assert [(r.state, r.attempt) for r in two.runs("j")] == [("succeeded", 3)]


# -- several schedulers on one file -----------------------------------------------------------------


def test_a_stale_copy_claims_and_settles_without_undoing_a_replace(
    open_scheduler: Opener, clock: FakeClock, calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a has not read b's replace=True (the same schedule, new arguments) when it claims the
    # fire: the claim's guard holds (the next fire is the same), so a runs it with what it
    # knows, but its claim and its outcome write the job's progress, never its old arguments.
    a = open_scheduler()
    b = open_scheduler()
    monkeypatch.setattr(a._replica, "sync_locked", lambda full=True: None)  # (a reads no changes)
    a.schedule("record", FixedRate(60), args=("old",), id="tick")
    b.schedule("record", FixedRate(60), args=("new",), id="tick", replace=True)
    clock.advance(60)
    assert a.run_pending() == 1
    assert calls.args == [("old",)]
    row = b.store.load_row("tick")  # type: ignore[attr-defined]
    assert row is not None and '"new"' in row.args and row.runs == 1
    clock.advance(60)
    assert b.run_pending() == 1  # (b reads a's progress first: the second fire is b's)
    assert calls.args == [("old",), ("new",)]


@pytest.mark.parametrize("change", ["cancel", "pause"])
def test_a_cancel_or_pause_made_while_a_fire_runs_elsewhere_stands(
    open_scheduler: Opener, clock: FakeClock, calls: Calls, change: str
) -> None:
    # b cancels (or pauses) the job while a runs its fire; a writes the fire's outcome after
    # that, not knowing: the outcome records the run and the job's progress, but it neither
    # brings a cancelled job back nor resumes a paused one.
    a = open_scheduler()
    b = open_scheduler()
    a.register("change", lambda: getattr(b, change)("tick"))
    a.schedule("change", FixedRate(60), id="tick")
    clock.advance(60)
    assert a.run_pending() == 1
    row = b.store.load_row("tick")  # type: ignore[attr-defined]
    assert row is not None
    assert row.state == ("cancelled" if change == "cancel" else "paused")
    assert row.runs == (0 if change == "cancel" else 1)  # (a cancelled job's row is left alone)
    assert [r.state for r in b.runs("tick")] == ["succeeded"]
    clock.advance(600)
    assert a.run_pending() + b.run_pending() == 0
    assert (a.get("tick") is None) is (change == "cancel")
    if change == "pause":
        assert a.get("tick").state is JobState.PAUSED  # type: ignore[union-attr]
        b.resume("tick")
        clock.advance(60)
        assert a.run_pending() + b.run_pending() == 1


def test_a_job_keeps_the_task_name_it_was_scheduled_by(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    # One function registered under two names: a job scheduled by the second name is stored
    # under it, and runs only where that name is registered.
    a = open_scheduler()
    a.register("alias", calls.record)
    a.schedule("alias", 60, id="by-alias")
    a.schedule("record", 60, id="by-name")
    a.reschedule("by-alias", 90)  # (a change writes the whole row: the name stays)
    rows = [a.store.load_row(i) for i in ("by-alias", "by-name")]  # type: ignore[attr-defined]
    assert [r.task for r in rows] == ["alias", "record"]
    a.shutdown()
    b = open_scheduler()  # "record" only
    clock.advance(90)
    assert b.run_pending() == 1
    assert calls.keys == [k for k in calls.keys if k.startswith("by-name@")] != []
    b.register("alias", calls.record)
    assert b.run_pending() == 1
    assert len(calls.keys) == 2
    assert b.store.load_row("by-alias").task == "alias"  # type: ignore[attr-defined]


def test_an_anchored_fixed_rate_on_the_real_clock_is_on_its_grid(open_scheduler: Opener) -> None:
    # Every process must compute the same instants (the same fire keys): whole seconds here.
    s = open_scheduler(SystemClock())
    for i in range(20):
        s.schedule("record", FixedRate(1, start=T0), id=f"grid-{i}")
    rows = [s.store.load_row(f"grid-{i}") for i in range(20)]  # type: ignore[attr-defined]
    assert [r.next_base % 10**9 for r in rows] == [0] * 20
    assert {s.get(f"grid-{i}").next_run_time.microsecond for i in range(20)} == {0}  # type: ignore[union-attr]


def test_a_run_all_backlog_after_downtime_runs_every_fire_on_the_runner(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    # All due at once when the runner starts, the missed fires run one at a time, oldest
    # first: the first one's run lasting does not make the overlap policy drop the others.
    release = threading.Event()

    def slow() -> None:
        calls.record()
        if len(calls.keys) == 1:
            release.wait(WAIT)

    s = open_scheduler()
    s.register("slow", slow)
    s.schedule("slow", FixedRate(10), id="rate", misfire=Misfire.RUN_ALL)
    s.shutdown()
    clock.advance(65)  # down while six fires fell due
    s = open_scheduler()
    s.register("slow", slow)
    s.start()
    try:
        until(lambda: len(calls.keys) == 1)
        release.set()
        until(lambda: len(calls.keys) == 6)
        assert s.wait_idle(WAIT)
    finally:
        release.set()
    due = [T0 + timedelta(seconds=10 * k) for k in range(1, 7)]
    assert calls.keys == [f"rate@{d.isoformat()}" for d in due]
    assert [r.state for r in s.runs("rate")] == ["succeeded"] * 6


def test_declaring_the_same_schedule_again_at_start_up_keeps_what_fell_due(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    # Every start declares the schedule with replace=True (docs/many-workers.md): the same
    # parameters leave the stored job as it stands, its RUN_ALL backlog after downtime and a
    # pause made meanwhile included; different ones replace it.
    def declare(s: Scheduler, **changes: Any) -> Job:
        options: dict[str, Any] = {"args": ("x",), "misfire": Misfire.RUN_ALL} | changes
        return s.schedule("record", FixedRate(10, start=T0), id="rate", replace=True, **options)

    s = open_scheduler()
    declare(s)
    s.run_until(T0 + timedelta(seconds=20))
    s.shutdown()
    clock.advance(40)  # down while 30 s .. 60 s fell due
    s = open_scheduler()
    job = declare(s)
    assert job.next_run_time == T0 + timedelta(seconds=30)  # not the next fire from now
    s.run_until(T0 + timedelta(seconds=60))
    due = [T0 + timedelta(seconds=10 * k) for k in range(7)]  # 0 s .. 60 s: none lost
    assert calls.keys == [f"rate@{d.isoformat()}" for d in due]
    s.pause("rate")
    assert declare(s).state is JobState.PAUSED
    job = declare(s, args=("y",))  # a change: replaced (and so resumed)
    assert job.state is JobState.SCHEDULED and job.args == ("y",)
    assert job.next_run_time == T0 + timedelta(seconds=60)  # (from now: re-timed)


def test_a_function_declared_again_at_start_up_runs_here(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # Stored as "posix:getcwd", which a process does not import on the store's word: declared
    # again (unchanged) at start-up, the job is left as it stands but runs here.
    def declare(s: Scheduler) -> Job:
        return s.schedule(os.getcwd, FixedRate(10, start=T0), id="cwd", replace=True)

    s = open_scheduler()
    declare(s)
    assert s.run_until(T0 + timedelta(seconds=10)) == 2
    s.shutdown()
    s = open_scheduler()
    assert declare(s).next_run_time == T0 + timedelta(seconds=20)
    assert s.run_until(T0 + timedelta(seconds=30)) == 2


def test_a_resume_made_while_a_fire_runs_elsewhere_stands(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    # While a runs the fire, b pauses the job, a reads the pause, b resumes: a's outcome, sent
    # as "paused", leaves the job resumed, and a reads that back.
    a = open_scheduler()
    b = open_scheduler()

    def flip() -> None:
        calls.record()
        b.pause("tick")
        assert a.get("tick").state is JobState.PAUSED  # type: ignore[union-attr]
        b.resume("tick")

    a.register("flip", flip)
    b.register("flip", flip)
    a.schedule("flip", FixedRate(60), id="tick")
    clock.advance(60)
    assert a.run_pending() == 1
    row = b.store.load_row("tick")  # type: ignore[attr-defined]
    assert row is not None and row.state == "scheduled" and row.runs == 1
    clock.advance(60)
    assert a.run_pending() + b.run_pending() == 1  # (and flip pauses and resumes it again)
    assert a.get("tick").state is JobState.SCHEDULED  # type: ignore[union-attr]


@pytest.mark.parametrize("change", ["cancel", "replace"])
def test_a_fire_skipped_by_a_stale_copy_does_not_undo_a_change_made_elsewhere(
    open_scheduler: Opener,
    clock: FakeClock,
    calls: Calls,
    change: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a runs the 10 s fire in a thread; b cancels or replaces the job meanwhile; a, not having
    # read that, skips the 20 s fire (Overlap.SKIP: its run still goes on) and writes the job's
    # progress: not over the cancel, and not its old arguments.
    a = open_scheduler()
    b = open_scheduler()
    inside, gate = threading.Event(), threading.Event()

    def hold(tag: str) -> None:
        calls.record(tag)
        inside.set()
        gate.wait(WAIT)

    for s in (a, b):
        s.register("hold", hold)
    a.schedule("hold", FixedRate(10), args=("old",), id="tick")
    clock.advance(10)
    running = threading.Thread(target=a.run_pending)
    running.start()
    try:
        assert inside.wait(WAIT)
        if change == "cancel":
            assert b.cancel("tick")
        else:
            b.schedule("hold", FixedRate(10), args=("new",), id="tick", replace=True)
        monkeypatch.setattr(a._replica, "sync_locked", lambda full=True: None)  # (a reads nothing)
        clock.advance(10)
        assert a.run_pending() == 0  # the 20 s fire, skipped
    finally:
        gate.set()
        running.join(WAIT)
    assert not running.is_alive()
    row = b.store.load_row("tick")  # type: ignore[attr-defined]
    assert row is not None
    if change == "cancel":
        assert row.state == "cancelled"
    else:
        assert '"new"' in row.args and row.state == "scheduled"


class _OwnRecurrence:
    """A recurrence of a user's own (a durable store cannot hold it), with or without a first
    time."""

    timebase = 0
    after_finish = False
    recurring = True

    def __init__(self, first: int | None) -> None:
        self._first = first

    def first(self, env: Any) -> int | None:
        return self._first

    def next(self, due: int, env: Any) -> int | None:
        return None

    def skip(self, due: int, until: int, env: Any) -> tuple[int | None, int]:
        return None, 0


@pytest.mark.parametrize("first", [None, 2 * 10**18], ids=["no first time", "a first time"])
def test_a_reschedule_the_store_cannot_hold_changes_nothing(
    open_scheduler: Opener, first: int | None
) -> None:
    # With no first time, the job was ended in memory (gone from get(), its id refused to a
    # new schedule) while the store kept it scheduled.
    s = open_scheduler()
    job = s.schedule("record", FixedRate(60), id="x")
    before = (job.state, job.next_run_time, len(s))
    with pytest.raises(InvalidArgument, match=r"when cannot be stored: .* is a _OwnRecurrence"):
        s.reschedule("x", _OwnRecurrence(first))
    assert s.get("x") is job
    assert (job.state, job.next_run_time, len(s)) == before
    assert s.run_for(60) == 1


def test_times_a_durable_store_cannot_hold_are_refused_and_change_nothing(
    open_scheduler: Opener,
) -> None:
    # A durable store keeps times as 64-bit nanoseconds (1677-09-21 to 2262-04-11); memory
    # takes the years 1 to 9999. SQLite raised a raw OverflowError, and a reschedule so
    # refused had already changed the job in memory (PostgreSQL: a StoreError).
    s = open_scheduler()
    job = s.schedule("record", At(T0 + timedelta(hours=1)), id="x")
    before = (job.trigger, job.next_run_time, len(s))
    far = datetime(9999, 12, 31, tzinfo=UTC)
    message = r"when is outside what a durable store holds .*: job 'x' would fall due at 9999-12-31"
    with pytest.raises(InvalidArgument, match=message):
        s.reschedule("x", At(far))
    assert (job.trigger, job.next_run_time, len(s)) == before
    with pytest.raises(InvalidArgument, match="when is outside what a durable store holds"):
        s.schedule("record", At(datetime(2300, 1, 1, tzinfo=UTC)), id="y")
    with pytest.raises(InvalidArgument, match="when is outside what a durable store holds"):
        s.schedule("record", FixedDelay(timedelta(days=365 * 300)), id="z")
    assert [j.id for j in s.jobs()] == ["x"]
    reopened = open_scheduler()
    assert [(j.id, j.next_run_time) for j in reopened.jobs()] == [("x", before[1])]
    assert s.run_for(3600) == 1


def test_a_recurrence_ends_where_its_next_fire_is_past_what_the_store_holds(
    open_scheduler: Opener, calls: Calls, caplog: pytest.LogCaptureFixture
) -> None:
    # The fire in 2225 was claimed with its next one, in 2425, which no store row can hold:
    # the claim failed again and again (PostgreSQL: run_until never returned; SQLite: an
    # OverflowError, the job left RUNNING). The recurrence ends there instead, and says so.
    s = open_scheduler()
    s.schedule("record", FixedRate(timedelta(days=365 * 200)), id="far")
    with caplog.at_level(logging.WARNING, logger="duetime"):
        assert s.run_until(datetime(2227, 1, 1, tzinfo=UTC)) == 1
    assert s.get("far") is None
    assert "its next fire (2425-" in caplog.text
    assert "the recurrence ends here" in caplog.text
    first = T0 + timedelta(days=365 * 200)
    assert calls.keys == [f"far@{first.isoformat()}"]


def test_a_stored_task_found_but_not_nameable_is_skipped_at_open(
    open_scheduler: Opener,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # import_tasks= allows "module:f", but f is a functools.partial, not a callable defined
    # there: it does not resolve, so its job loads as one whose task this process does not
    # run (pending, never run here), and Scheduler() opens.
    package = tmp_path / "dt_unnamed"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tasks.py").write_text(
        "import functools\nf = functools.partial(print, 'x')\n\n\ndef g():\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    s = open_scheduler()
    s.schedule("dt_unnamed.tasks:f", 3600, id="partial-job")
    s.schedule("dt_unnamed.tasks:g", 3600, id="plain-job")
    with caplog.at_level(logging.WARNING, logger="duetime"):
        other = open_scheduler(import_tasks=["dt_unnamed"])
    found = {j.id: j for j in other.jobs()}
    assert sorted(found) == ["partial-job", "plain-job"]
    assert isinstance(found["partial-job"].func, MissingTask)
    assert not isinstance(found["plain-job"].func, MissingTask)


def test_a_retry_past_what_the_store_holds_is_not_made(
    open_scheduler: Opener, calls: Calls, caplog: pytest.LogCaptureFixture
) -> None:
    # A retry 250 years out: its row could not be written, the outcome write failed with it
    # (and took the other outcomes of its batch along), and the job could no longer be
    # cancelled. The attempt is the last one instead, with a WARNING saying why.
    s = open_scheduler()
    s.schedule("fail", 1, id="b", retry=FixedBackoff([timedelta(days=365 * 250)]))
    with caplog.at_level(logging.WARNING, logger="duetime"):
        s.run_for(2)
    assert "not retried" in caplog.text
    assert s.get("b") is None
    assert [(f.job.id, f.attempts) for f in s.failed()] == [("b", 1)]
    assert [r.state for r in s.runs("b")] == ["dead"]


def test_a_job_added_again_under_an_id_while_the_old_one_ran_is_not_ended_by_that_run(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # The worker learns of a cancel while the job's run goes on; another process then adds a
    # new job under the id. The run's outcome was written from the worker's copy, cancelled,
    # and ended the new job for good (a probe: 3 of 150 cancel-and-add cycles on PostgreSQL).
    worker = open_scheduler()
    admin = open_scheduler()
    ran: list[str] = []

    def tick() -> None:
        run = current_run()
        assert run is not None
        ran.append(run.key)
        if len(ran) == 1:
            assert admin.cancel("r")
            assert worker.get("r") is None  # (a look at the store: the cancel is read)
            admin.schedule("tick", every, id="r")  # (the same recurrence, as the probe's)

    every = FixedRate(10, start=T0 + timedelta(seconds=10))
    worker.register("tick", tick)
    admin.register("tick", tick)
    worker.schedule("tick", every, id="r")
    clock.advance(10)
    assert worker.run_pending() == 1
    fresh = open_scheduler()
    job = fresh.get("r")
    assert job is not None and job.state is JobState.SCHEDULED
    assert [r.state for r in fresh.runs("r")] == ["succeeded"]


class _SettlesLate(SQLiteStore):
    """A SQLiteStore whose first write of outcomes fails (the connection lost): they are owed,
    and written at the next poll."""

    failed = False

    def settle_many(self, outcomes: Any) -> Any:
        if not self.failed:
            self.failed = True
            return [StoreError("jobs.db", "a test's fault") for _ in outcomes]
        return super().settle_many(outcomes)


def test_an_owed_outcome_of_a_cancelled_job_does_not_end_the_job_added_under_its_id(
    db: Path, clock: FakeClock
) -> None:
    # As above, with the outcome owed and written at the next poll (a review: that write took
    # the cancelled copy's row again).
    worker = Scheduler(clock, store=_SettlesLate(db))
    admin = Scheduler(clock, store=SQLiteStore(db))
    every = FixedRate(10, start=T0 + timedelta(seconds=10))
    ran: list[str] = []

    def tick() -> None:
        ran.append("tick")
        if len(ran) == 1:
            assert admin.cancel("r")
            assert worker.get("r") is None
            admin.schedule("tick", every, id="r")

    try:
        for s in (worker, admin):
            s.register("tick", tick)
        worker.schedule("tick", every, id="r")
        clock.advance(10)
        assert worker.run_pending() == 1
        clock.advance(1)
        assert worker.run_pending() == 0  # (its look at the store writes what is owed)
        job = admin.get("r")
        assert job is not None and job.state is JobState.SCHEDULED
        assert [r.state for r in admin.runs("r")] == ["succeeded"]
    finally:
        worker.shutdown()
        admin.shutdown()


def test_a_reschedule_made_while_a_fire_runs_elsewhere_stands(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    # b reschedules a one-shot while a runs it: a's outcome ("completed") records the run but
    # leaves the new time b gave the job.
    a = open_scheduler()
    b = open_scheduler()
    later = T0 + timedelta(minutes=5)

    def move() -> None:
        calls.record()
        b.reschedule("once", At(later))

    a.register("move", move)
    b.register("move", move)
    a.schedule("move", At(T0 + timedelta(seconds=10)), id="once")
    clock.advance(10)
    assert a.run_pending() == 1
    row = b.store.load_row("once")  # type: ignore[attr-defined]
    assert row is not None and row.state == "scheduled" and row.runs == 1
    assert a.get("once").next_run_time == later  # type: ignore[union-attr]
    clock.advance(300)
    assert a.run_pending() + b.run_pending() == 1
    assert len(calls.keys) == 2


def test_a_recurring_job_rescheduled_while_its_fire_runs_elsewhere_is_read_back(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    # b gives the job a new period while a runs its fire: after a's outcome, a knows the new
    # recurrence and its next fire (not only at its next claim).
    a = open_scheduler()
    b = open_scheduler()

    def move() -> None:
        calls.record()
        b.reschedule("tick", FixedRate(30))

    for s in (a, b):
        s.register("move", move)
    a.schedule("move", FixedRate(60), id="tick")
    clock.advance(60)
    assert a.run_pending() == 1
    job = a.get("tick")
    assert job is not None and job.trigger == FixedRate(30)
    assert job.next_run_time == T0 + timedelta(seconds=90)
    row = b.store.load_row("tick")  # type: ignore[attr-defined]
    assert row is not None and row.state == "scheduled" and row.runs == 1


def test_a_recurring_job_keeps_every_retry_pending_at_once(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    # Each minute's fire fails once and is retried 90 s later: a fire fails while the retry of
    # the one before is still pending. Every retry runs, as in memory (the second failure was
    # recorded as dead once, and its retry never ran).
    def flaky() -> None:
        run = current_run()
        assert run is not None
        calls.record()
        if run.attempt == 1:
            raise RuntimeError("first attempt fails")

    s = open_scheduler()
    s.register("flaky", flaky)
    s.schedule("flaky", FixedRate(60), id="r", retry=FixedBackoff([90]))
    s.run_until(T0 + timedelta(seconds=400))
    retried = sorted(k for k in set(calls.keys) if calls.keys.count(k) == 2)
    assert retried == [f"r@{(T0 + timedelta(minutes=m)).isoformat()}" for m in range(1, 6)]
    assert "dead" not in {r.state for r in s.runs("r")}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"args": 5}, "args must be a tuple or list, got 5"),
        ({"kwargs": [1]}, r"kwargs must be a dict or None, got \[1\]"),
        ({"retry": FixedBackoff}, "retry must be a RetryPolicy, got <class"),
    ],
)
def test_bad_arguments_are_named_before_anything_is_stored(
    open_scheduler: Opener, options: dict[str, Any], message: str
) -> None:
    s = open_scheduler()
    with pytest.raises(TypeError, match=message):
        s.schedule("record", 10, id="bad", **options)
    assert s.get("bad") is None
    assert s.store.load_row("bad") is None  # type: ignore[attr-defined]


def test_two_schedulers_on_one_file_run_each_fire_once(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    a = open_scheduler()
    b = open_scheduler()
    a.schedule("record", FixedRate(60), id="tick")  # both declare the same schedule
    b.schedule("record", FixedRate(60), id="tick", replace=True)
    for i in range(20):
        a.schedule("record", 30 + i, id=f"one-{i}")
    ran = 0
    for _ in range(600):  # the two take turns, a second at a time
        clock.advance(1)
        ran += a.run_pending() + b.run_pending()
    assert ran == 30
    assert sorted(calls.keys) == sorted(set(calls.keys))
    assert len([k for k in calls.keys if k.startswith("tick@")]) == 10


def test_changes_in_one_process_reach_the_other(open_scheduler: Opener, calls: Calls) -> None:
    a = open_scheduler()
    b = open_scheduler()
    a.schedule("record", FixedRate(60), id="t")
    assert b.get("t") is not None  # added elsewhere: seen at the next look
    b.pause("t")
    assert a.get("t").state is JobState.PAUSED  # type: ignore[union-attr]
    assert a.run_for(300) == 0
    a.resume("t")
    b.cancel("t")
    assert "t" not in a and a.run_for(300) == 0
    assert calls.keys == []


def test_an_id_live_in_another_process_conflicts(open_scheduler: Opener) -> None:
    a = open_scheduler()
    b = open_scheduler()
    a.schedule("record", 60, id="same")
    with pytest.raises(ConflictingIdError, match="'same' is already scheduled"):
        b.schedule("record", 60, id="same")


# -- backfill ---------------------------------------------------------------------------------------


def test_backfill_enqueues_each_missing_fire_once(open_scheduler: Opener, calls: Calls) -> None:
    s = open_scheduler()
    s.schedule("record", Cron("0 * * * *"), id="hourly", misfire=Misfire.SKIP)
    start, end = T0 - timedelta(hours=3), T0
    keys = s.backfill("hourly", start, end)
    assert keys == [
        "hourly@2026-03-02T05:00:00+00:00",
        "hourly@2026-03-02T06:00:00+00:00",
        "hourly@2026-03-02T07:00:00+00:00",
    ]
    assert s.backfill("hourly", start, end) == []  # idempotent
    assert s.run_pending() == 3  # backfilled fires run whatever the misfire policy
    assert calls.keys == keys
    assert s.backfill("hourly", start - timedelta(hours=1), end) == [
        "hourly@2026-03-02T04:00:00+00:00"
    ]


def test_a_process_schedules_a_task_only_its_workers_register(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # A web app names the task; the worker that registered it runs it, the app does not.
    app = open_scheduler()
    worker = open_scheduler()
    sent: list[str] = []
    worker.register("send_report", sent.append)
    app.schedule("send_report", 60, args=["weekly"], id="report")
    app.schedule("send_report", Cron("* * * * *"), args=["minutely"], id="tick")
    clock.advance(60)
    assert app.run_pending() == 0  # (pending here: a warning, not a run)
    assert worker.run_pending() == 2
    assert sorted(sent) == ["minutely", "weekly"]
    assert [(r.job_id, r.state) for r in app.runs("report")] == [("report", "succeeded")]
    with pytest.raises(ConflictingIdError):
        app.schedule("send_report", 60, id="tick")


@pytest.mark.parametrize("change", ["cancel", "reschedule", "replace"])
def test_fires_queued_for_a_job_are_dropped_with_its_schedule(
    open_scheduler: Opener, calls: Calls, change: str
) -> None:
    # As in memory, cancel(), reschedule() and replace=True drop the fires queued for the job
    # (a backfill, a trigger): recorded lost, they are not run by any process, nor for the
    # next job given the id (they stayed queued, and ran with the new job's arguments).
    admin = open_scheduler()
    admin.schedule("record", Cron("0 * * * *"), args=["old"], id="hourly", paused=True)
    keys = admin.backfill("hourly", T0 - timedelta(hours=2), T0)
    admin.trigger("hourly")  # (paused: queued in the runs table, for resume)
    queued = [r.key for r in admin.runs("hourly") if r.state == "queued"]
    assert len(keys) == 2 and len(queued) == 3
    if change == "cancel":
        assert admin.cancel("hourly")
        admin.schedule("record", Cron("0 0 1 1 *"), args=["new"], id="hourly")
    elif change == "reschedule":
        admin.reschedule("hourly", Cron("0 0 1 1 *"))
        admin.resume("hourly")
    else:
        admin.schedule("record", Cron("0 0 1 1 *"), args=["new"], id="hourly", replace=True)
    worker = open_scheduler()
    assert worker.run_pending() == 0 and admin.run_pending() == 0
    assert calls.keys == []
    states = {r.key: r.state for r in admin.runs("hourly")}
    assert states == dict.fromkeys(queued, "lost")


def test_runs_can_be_read_after_shutdown(open_scheduler: Opener, calls: Calls) -> None:
    # (It raised StoreError "the store is closed", while jobs(), get() and failed() answered.)
    with open_scheduler() as s:
        s.schedule("record", 5, id="a")
        s.schedule("fail", 5, id="b")
        s.run_for(5)
    assert sorted((r.job_id, r.state) for r in s.runs()) == [("a", "succeeded"), ("b", "dead")]
    assert [r.job_id for r in s.runs("b")] == ["b"]
    assert not s.store.is_open  # type: ignore[attr-defined]  # (it reopened only to read)
    with pytest.raises(SchedulerShutdownError):
        s.schedule("record", 5)


def test_a_store_object_serves_a_new_scheduler_once_its_own_shut_down(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    # (A restart on the same object was refused: "store must not be in use".)
    first = open_scheduler()
    store = first.store
    first.schedule("record", FixedRate(10), id="tick")
    first.run_for(10)
    with pytest.raises(InvalidArgument, match="store must not be in use"):
        Scheduler(clock, store=store)  # (its scheduler is still going)
    first.shutdown()
    again = open_scheduler(store=store)
    assert again.store is store and store.owner is again
    assert [j.id for j in again.jobs()] == ["tick"]
    assert again.run_for(10) == 1
    assert calls.keys == ["tick@2026-03-02T08:00:10+00:00", "tick@2026-03-02T08:00:20+00:00"]
    assert [r.state for r in again.runs()] == ["succeeded", "succeeded"]
    # The old scheduler keeps what it held, apart: the new one's jobs are not its.
    with pytest.raises(SchedulerShutdownError):
        first.schedule("record", 5)
    (old,) = first.jobs()
    assert old.id == "tick" and old is not again.get("tick") and first.store is not store
    # The old one's runs() reads on a connection of its own, never the store's.
    assert [r.state for r in first.runs()] == ["succeeded", "succeeded"]
    assert store.is_open  # type: ignore[attr-defined]
    assert again.schedule("record", 5) is not None


def test_a_store_left_open_by_a_shutdown_without_wait_says_why_it_is_refused(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    gate = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        first = open_scheduler(executor=pool)
        first.register("wait", lambda: gate.wait(WAIT))
        store = first.store
        first.schedule("wait", 10, id="w")
        first.start()
        clock.advance(10)
        until(lambda: first.stats().running == 1, what="the run started")
        first.shutdown(wait=False)  # (it leaves the store open for the run going on)
        try:
            with pytest.raises(
                InvalidArgument, match=r"shut it down with wait=True, or open a new store"
            ):
                Scheduler(clock, store=store)
        finally:
            gate.set()
        until(lambda: not store.is_open, what="the store closed after the run")  # type: ignore[attr-defined]
    second = Scheduler(clock, store=store)  # (closed now: taken as new)
    second.shutdown()


def test_an_id_taken_during_a_batch_is_not_told_to_pass_replace(open_scheduler: Opener) -> None:
    # (It said "pass replace=True to reschedule it" to a call that had.)
    a, b = open_scheduler(), open_scheduler()
    b.schedule("record", 3600, id="x")  # (a has not read it)
    with (
        pytest.raises(ConflictingIdError, match=r"'x' is already scheduled; another process added"),
        a.batch(),
    ):
        a.schedule("record", 60, id="x", replace=True)
    a.schedule("record", 60, id="x", replace=True)  # (alone, it takes b's job over)
    assert a.get("x") is not None and len(a) == 1


def test_backfill_keeps_to_the_recurrence_s_start(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    # Fires before a Cron's or a FixedRate's start= were queued and run (04:00 to 06:00 here).
    s = open_scheduler()
    clock.advance(3 * 3600)  # 11:00
    begins = T0 - timedelta(hours=1)  # 07:00
    s.schedule("record", Cron("0 * * * *", start=begins), id="c", misfire=Misfire.SKIP)
    s.schedule("record", FixedRate(hours=1, start=begins), id="f", misfire=Misfire.SKIP)
    for id in ("c", "f"):
        keys = s.backfill(id, T0 - timedelta(hours=4), T0 + timedelta(hours=1))
        assert keys == [f"{id}@2026-03-02T07:00:00+00:00", f"{id}@2026-03-02T08:00:00+00:00"]
    assert s.run_pending() == 5  # and the FixedRate's grid point now, 11:00
    assert sorted(calls.keys) == sorted(
        [f"{id}@2026-03-02T0{h}:00:00+00:00" for id in "cf" for h in (7, 8)]
        + ["f@2026-03-02T11:00:00+00:00"]
    )


def test_backfill_leaves_fires_still_to_come_to_their_time(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    s = open_scheduler()
    s.schedule("record", Cron("0 * * * *"), id="hourly")
    clock.advance(30 * 60)  # 08:30
    keys = s.backfill("hourly", T0 - timedelta(hours=1), T0 + timedelta(hours=3))
    assert keys == ["hourly@2026-03-02T07:00:00+00:00", "hourly@2026-03-02T08:00:00+00:00"]
    assert s.run_pending() == 2  # not 09:00 and 10:00 ahead of their time
    assert s.backfill("hourly", T0 + timedelta(hours=1), T0 + timedelta(hours=3)) == []
    clock.advance(30 * 60)
    assert s.run_pending() == 1 and calls.keys[-1] == "hourly@2026-03-02T09:00:00+00:00"


def test_backfilled_fires_survive_a_restart_and_are_not_run_twice(
    open_scheduler: Opener, calls: Calls
) -> None:
    s = open_scheduler()
    s.schedule("record", FixedRate(600), id="r")
    assert len(s.backfill("r", T0 - timedelta(hours=1), T0)) == 6
    s.shutdown()
    t = open_scheduler()
    u = open_scheduler()
    assert t.run_pending() + u.run_pending() == 6
    assert len(set(calls.keys)) == 6


def test_fires_of_separate_backfills_run_oldest_first(open_scheduler: Opener, calls: Calls) -> None:
    s = open_scheduler()
    s.schedule("record", "0 * * * *", id="h")
    later = s.backfill("h", T0 - timedelta(hours=3), T0)
    s.shutdown()
    t = open_scheduler()  # (the first backfill's fires are read back at the restart)
    earlier = t.backfill("h", T0 - timedelta(hours=6), T0 - timedelta(hours=3))
    assert t.run_pending() == 6
    assert calls.keys == sorted(earlier + later)
    # (Late by design, hours: not counted in the lateness figure.)
    assert t.stats().lateness.max == 0


def test_fires_backfilled_in_another_process_run_in_the_one_that_learns_of_them(
    open_scheduler: Opener, calls: Calls, clock: FakeClock
) -> None:
    a = open_scheduler()
    b = open_scheduler()
    a.schedule("record", FixedRate(600), id="r", misfire=Misfire.SKIP)
    assert b.run_pending() == 0 and b.get("r") is not None  # b knows the job, nothing due
    keys = a.backfill("r", T0 - timedelta(hours=1), T0)
    assert len(keys) == 6
    # At its next poll b reads the queued fires (a backfill writes no job row, only runs; on
    # PostgreSQL the poll's one query reads them); a, which queued them itself, finds them taken.
    clock.advance(6)
    assert b.run_pending() == 6
    assert a.run_pending() == 0
    assert sorted(calls.keys) == sorted(keys)
    # Another backfill of the same hour adds nothing; a new hour is learned of again.
    assert a.backfill("r", T0 - timedelta(hours=1), T0) == []
    assert len(a.backfill("r", T0 - timedelta(hours=2), T0 - timedelta(hours=1))) == 6
    clock.advance(6)
    assert b.run_pending() == 6 and len(calls.keys) == 12


def test_queued_fires_outlast_a_pause_and_resume_made_elsewhere(
    open_scheduler: Opener, calls: Calls, clock: FakeClock
) -> None:
    worker = open_scheduler()
    admin = open_scheduler()
    admin.schedule("record", FixedRate(600), id="r", misfire=Misfire.SKIP)
    keys = admin.backfill("r", T0 - timedelta(hours=1), T0)
    admin.trigger("r")  # (admin is not started: it runs this one itself)
    assert len(keys) == 6 and len(calls.keys) == 1
    worker.schedule("record", 3600, id="other")  # (a change of its own, then)
    worker.jobs()  # takes the queued fires in
    admin.pause("r")
    admin.resume("r")
    # Reading the paused and resumed row, the worker used to drop the queued fires it held
    # (they are not in the row), and never took them in again: stuck "queued" for good.
    assert worker.run_pending() == 6
    assert sorted(calls.keys[1:]) == sorted(keys)
    assert admin.runs("r", state="queued") == []


def test_changes_made_in_a_process_that_runs_no_jobs_reach_the_one_that_does(
    open_scheduler: Opener, calls: Calls, clock: FakeClock
) -> None:
    admin = open_scheduler()  # (not started, never stepped: a web app, an admin script)
    worker = open_scheduler()
    admin.schedule("record", FixedRate(3600), id="r")
    admin.schedule("record", 600, id="once")
    assert worker.run_pending() == 0 and {j.id for j in worker.jobs()} == {"r", "once"}
    admin.trigger("r")  # (no runner here: it runs at once, in this thread, recorded)
    assert calls.keys[-1].startswith("r@trigger-")
    clock.advance(6)  # (the worker's next poll: a FakeClock makes no notification wait)
    assert worker.run_pending() == 0  # not again
    admin.pause("once")
    clock.advance(600)
    assert worker.run_pending() == 0
    admin.resume("once")
    clock.advance(6)
    assert worker.run_pending() == 1 and calls.keys[-1].startswith("once@")
    admin.reschedule("r", 60)
    clock.advance(54)
    assert worker.run_pending() == 0
    clock.advance(6)
    assert worker.run_pending() == 1
    admin.cancel("r")
    clock.advance(7200)
    assert worker.run_pending() == 0 and worker.jobs() == []
    assert len(calls.keys) == len(set(calls.keys)) == 3


def test_a_long_running_scheduler_forgets_the_backfilled_fires_it_ran(
    open_scheduler: Opener, calls: Calls
) -> None:
    s = open_scheduler()
    s.schedule("record", FixedRate(600), id="r", misfire=Misfire.SKIP)
    for hour in range(1, 6):
        start = T0 - timedelta(hours=hour)
        assert len(s.backfill("r", start, start + timedelta(hours=1))) == 6
        assert s.run_pending() == 6
    assert len(calls.keys) == 30
    # What the store remembers of queued fires is bounded by the queue, not by the history:
    # only the last backfill's keys may still be remembered (the next read forgets them).
    assert len(s._store._known_queued) <= 6  # type: ignore[attr-defined]


def test_backfill_refuses_what_it_cannot_do(open_scheduler: Opener) -> None:
    s = open_scheduler()
    s.schedule("record", FixedDelay(60), id="d")
    with pytest.raises(InvalidArgument, match="no fixed fire times to backfill"):
        s.backfill("d", T0 - timedelta(hours=1), T0)
    with pytest.raises(InvalidArgument, match="start must not be after end"):
        s.backfill("d", T0, T0 - timedelta(hours=1))
    with pytest.raises(TypeError, match="backfill\\(\\) needs a durable store"):
        Scheduler(FakeClock()).backfill("x", T0, T0)


# -- what cannot be stored --------------------------------------------------------------------------


def test_a_store_that_failed_to_open_can_be_opened_by_the_next_scheduler(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "sub" / "jobs.db")
    with pytest.raises(StoreError, match="does not exist"):
        Scheduler(FakeClock(T0), store=store)
    (tmp_path / "sub").mkdir()
    s = Scheduler(FakeClock(T0), store=store)
    s.register("print", print)
    s.schedule("print", 10, id="x")
    assert [j.id for j in s.jobs()] == ["x"]
    s.shutdown()


@pytest.mark.sqlite_only
def test_unstorable_functions_and_arguments_are_refused_with_nothing_stored(
    open_scheduler: Opener, db: Path
) -> None:
    s = open_scheduler()
    with pytest.raises(InvalidArgument, match="cannot be stored: a durable job names its function"):
        s.schedule(lambda: None, 10, id="lam")
    with pytest.raises(InvalidArgument, match=r"args\[0\]"):
        s.schedule("record", 10, args=[object()], id="obj")
    with pytest.raises(InvalidArgument, match="limiter cannot be stored"):
        s.schedule("record", 10, id="lim", limiter=TokenBucket(1, 1))
    with pytest.raises(InvalidArgument, match=r"^id cannot be stored: it is not UTF-8.*'\\ud800'"):
        s.schedule("record", 10, id="\ud800")
    with pytest.raises(InvalidArgument, match=r"^name cannot be stored: it is not UTF-8"):
        s.schedule("record", 10, id="sur", name="a\udfffb")
    with pytest.raises(TypeError, match=r"^id must be a str or None, got 5"):
        s.schedule("record", 10, id=5)  # type: ignore[arg-type]
    assert len(s) == 0
    with contextlib.closing(sqlite3.connect(db)) as con:
        assert con.execute("SELECT count(*) FROM duetime_jobs").fetchone() == (0,)


def test_a_task_this_process_has_not_registered_stays_pending(
    db: Path, clock: FakeClock, calls: Calls, caplog: pytest.LogCaptureFixture
) -> None:
    s = Scheduler(clock, store=SQLiteStore(db))
    s.register("later", calls.record)
    s.schedule("later", 10, id="p")
    s.shutdown()
    t = Scheduler(clock, store=SQLiteStore(db))
    try:
        with caplog.at_level(logging.WARNING, logger="duetime"):
            assert t.run_for(60) == 0
        assert "task 'later' is not registered in this process" in caplog.text
        assert "p" in t
        t.register("later", calls.record)
        assert t.run_pending() == 1 and calls.keys == ["p@2026-03-02T08:00:10+00:00"]
    finally:
        t.shutdown()


def test_a_job_on_an_executor_this_process_lacks_is_left_to_a_process_that_has_it(
    db: Path, clock: FakeClock, calls: Calls, caplog: pytest.LogCaptureFixture
) -> None:
    # Its runner died of a KeyError at dispatch (and went on a second later), with the fire
    # claimed and never run here: stuck as running until the lease ran out.
    with ThreadPoolExecutor(1) as reports:
        s = Scheduler(clock, store=SQLiteStore(db), executors={"reports": reports})
        s.register("report", calls.record)
        s.schedule("report", 10, id="r", executor="reports")
        s.schedule("report", 10, id="plain")
        s.shutdown()
        lacking = Scheduler(clock, store=SQLiteStore(db))
        lacking.register("report", calls.record)
        try:
            with caplog.at_level(logging.WARNING, logger="duetime"):
                lacking.start()
                clock.advance(10)
                until(lambda: len(calls.keys) == 1, what="the plain job")
                assert lacking.wait_idle(WAIT)
            assert "its executor 'reports' is not one of this process's executors" in caplog.text
            assert "runner failed" not in caplog.text
            assert calls.keys == ["plain@2026-03-02T08:00:10+00:00"]
            assert lacking.run_pending() == 0
            assert [r.job_id for r in lacking.runs()] == ["plain"]  # "r" was never claimed
        finally:
            lacking.shutdown()
        having = Scheduler(clock, store=SQLiteStore(db), executors={"reports": reports})
        having.register("report", calls.record)
        try:
            having.start()
            until(lambda: len(calls.keys) == 2, what="the job on its executor")
            assert calls.keys[1] == "r@2026-03-02T08:00:10+00:00"
        finally:
            having.shutdown()


def test_a_process_lacking_a_job_s_executor_takes_none_of_its_runs_over(
    db: Path, calls: Calls
) -> None:
    # It took a lost run over, never started it (the runner leaves such jobs alone) and held
    # its lease for ever: here it would also have refused the stalled owner's outcome.
    clocks = [FakeClock(T0), FakeClock(T0)]
    lacking = Scheduler(clocks[1], store=SQLiteStore(db), lease=30)
    lacking.register("report", calls.record)

    def stall() -> None:
        replica: Any = lacking._replica
        polled = replica.next_poll
        clocks[1].advance(50)  # past the lease, on the clock of the process lacking it
        until(lambda: replica.next_poll != polled, what="a poll of the process lacking it")
        calls.record()

    with ThreadPoolExecutor(1) as reports:
        having = Scheduler(
            clocks[0], store=SQLiteStore(db), lease=30, executors={"reports": reports}
        )
        try:
            having.register("report", stall)
            having.schedule("report", 10, id="r", executor="reports")
            lacking.start()
            assert having.run_for(10) == 1
            assert [(r.state, r.attempt) for r in having.runs()] == [("succeeded", 1)]
            assert lacking.wait_idle(WAIT) and len(calls.keys) == 1
        finally:
            having.shutdown()
            lacking.shutdown()


def test_without_a_runner_a_job_runs_here_whatever_its_executor(db: Path, calls: Calls) -> None:
    # trigger() (and time stepped by hand) run in the calling thread, where no executor is
    # missing: a web process's trigger() of a job on a worker's executor was lost.
    clock = FakeClock(T0)
    with ThreadPoolExecutor(1) as reports:
        worker = Scheduler(clock, store=SQLiteStore(db), executors={"reports": reports})
        worker.register("report", calls.record)
        worker.schedule("report", 3600, id="r", executor="reports")
        worker.shutdown()
    web = Scheduler(clock, store=SQLiteStore(db))
    web.register("report", calls.record)
    try:
        web.trigger("r")
        assert len(calls.keys) == 1 and calls.keys[0].startswith("r@trigger")
        assert web.run_for(3600) == 1
    finally:
        web.shutdown()


def test_an_outcome_still_unwritable_at_shutdown_is_tried_once_and_said_so(
    db: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    # The store is locked by another program through the run and the shutdown: the outcome is
    # owed, tried once more as the store closes, and the log says the run will run again (it
    # said "trying again at the next poll", and the close tried twice).
    s = Scheduler(clock, store=SQLiteStore(db, busy_timeout=0.05))
    other = sqlite3.connect(db, isolation_level=None)
    s.register("lock", lambda: other.execute("BEGIN IMMEDIATE"))
    s.schedule("lock", 10, id="a")
    caplog.set_level(logging.ERROR, "duetime")
    clock.advance(10)
    try:
        assert s.run_pending() == 1
        assert "could not record the outcome of run a@" in caplog.text
        caplog.clear()
        s.shutdown()
        (said,) = [r.getMessage() for r in caplog.records]
        assert said.startswith(
            "could not record the outcome of run a@2026-03-02T08:00:10+00:00 (closing the "
            "store: run again once the lease runs out, by another worker or after a restart)"
        )
    finally:
        other.execute("ROLLBACK")
        other.close()
    again = Scheduler(clock, store=SQLiteStore(db))
    try:
        assert [(r.state, r.attempt) for r in again.runs()] == [("running", 1)]
    finally:
        again.shutdown()


def test_a_change_made_elsewhere_while_an_outcome_was_owed_is_read_back_at_shutdown(
    db: Path, clock: FakeClock
) -> None:
    # The outcome written as the store closed left the job in memory as this process had it:
    # a pause made elsewhere meanwhile was in the store, and not in the last word get() gives.
    a = Scheduler(clock, store=SQLiteStore(db, busy_timeout=0.05))
    other = sqlite3.connect(db, isolation_level=None)
    a.register("lock", lambda: other.execute("BEGIN IMMEDIATE"))
    a.schedule("lock", FixedRate(60), id="a")
    clock.advance(60)
    try:
        assert a.run_pending() == 1  # its outcome owed: the file is locked
        other.execute("ROLLBACK")
        b = Scheduler(clock, store=SQLiteStore(db))
        b.register("lock", print)
        b.pause("a")
        b.shutdown()
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError):
            a.schedule(print, 5, id="z")  # (reads the pause, cannot write the outcome first)
        other.execute("ROLLBACK")
        a.shutdown()
        job = a.get("a")
        assert job is not None and job.state is JobState.PAUSED
    finally:
        other.close()
    again = Scheduler(clock, store=SQLiteStore(db))
    try:
        job = again.get("a")
        assert job is not None and job.state is JobState.PAUSED
        assert [(r.state, r.attempt) for r in again.runs()] == [("succeeded", 1)]
    finally:
        again.shutdown()


def test_a_batch_that_raises_takes_no_other_runs_outcome_with_it(
    db: Path, clock: FakeClock, calls: Calls
) -> None:
    # The runner keeps a quick run's outcome a few milliseconds, to write it with others; a
    # batch opened meanwhile (here by a listener of that very success) wrote it in its own
    # transaction, and its rollback took it: the run stayed "running" and ran again after
    # its lease.
    s = Scheduler(clock, store=SQLiteStore(db), executor="inline", lease=30)
    s.register("record", calls.record)
    failed: list[str] = []

    def on_success(event: JobSucceeded) -> None:
        if event.job_id == "x":
            with contextlib.suppress(ValueError), s.batch():
                s.pause("z")
                failed.append(event.job_id)
                raise ValueError("give up")

    s.subscribe(on_success, JobSucceeded)  # type: ignore[arg-type]
    s.schedule("record", 3600, id="z")
    s.schedule("record", 10, id="x")
    try:
        s.start()
        clock.advance(10)
        assert s.wait_idle(WAIT) and failed == ["x"]
        assert [(r.state, r.attempt) for r in s.runs("x")] == [("succeeded", 1)]
        z = s.get("z")
        assert z is not None and z.state is JobState.SCHEDULED  # (the pause was rolled back)
        clock.advance(60)  # past the lease: nothing to take over
        assert s.wait_idle(WAIT)
        assert calls.keys == ["x@2026-03-02T08:00:10+00:00"]
    finally:
        s.shutdown()


def test_shutdown_from_a_start_listener_on_the_runner_thread_keeps_the_outcome(
    db: Path, clock: FakeClock, calls: Calls
) -> None:
    # With executor="inline" a JobStarted listener runs in the runner thread, which was not
    # known as running the job: shutdown() closed the store under it, the outcome could not
    # be written, and the run ran a second time after its lease.
    s = Scheduler(clock, store=SQLiteStore(db), executor="inline", lease=30)
    s.register("record", calls.record)
    s.subscribe(lambda event: s.shutdown(), JobStarted)
    s.schedule("record", 10, id="a")
    s.start()
    clock.advance(10)
    until(lambda: not s.store.is_open, what="the store closed after the run")  # type: ignore[attr-defined]
    assert len(calls.keys) == 1
    again = Scheduler(clock, store=SQLiteStore(db))
    try:
        assert [(r.state, r.attempt) for r in again.runs()] == [("succeeded", 1)]
    finally:
        again.shutdown()


@pytest.mark.parametrize("executor", ["inline", "pool"])
def test_shutdown_from_a_success_listener_closes_the_store(
    db: Path, clock: FakeClock, calls: Calls, executor: str
) -> None:
    # The run had ended when its JobSucceeded listener shut the scheduler down: no later
    # finish came to close the store, which stayed open for good.
    s = Scheduler(clock, store=SQLiteStore(db), executor="inline" if executor == "inline" else None)
    s.register("record", calls.record)
    s.subscribe(lambda event: s.shutdown(), JobSucceeded)
    s.schedule("record", 10, id="a")
    s.start()
    clock.advance(10)
    until(lambda: not s.store.is_open, what="the store closed")  # type: ignore[attr-defined]
    assert [(r.state, r.attempt) for r in s.runs()] == [("succeeded", 1)]


def test_shutdown_inside_a_batch_is_refused(open_scheduler: Opener) -> None:
    # With a runner it waited for the runner, which waited for the lock the batch holds (a
    # deadlock); without one it closed the store under the batch's open transaction.
    # (Tested without a runner, where the old failure is an error, not a hang.)
    s = open_scheduler()
    with s.batch():
        s.schedule("record", 60, id="a")
        with pytest.raises(RuntimeError, match=r"shutdown\(\) inside a batch\(\) block"):
            s.shutdown()
    assert s.get("a") is not None
    assert [j.id for j in open_scheduler().jobs()] == ["a"]  # (stored: the batch went through)


def test_shutdown_without_waiting_closes_the_store_after_the_last_run(
    db: Path, clock: FakeClock, calls: Calls
) -> None:
    # It never closed it: a process that made and shut down schedulers kept two connections
    # and a thread (PostgreSQL), or the file (SQLite), for each.
    gate = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        s = Scheduler(clock, store=SQLiteStore(db), executor=pool)
        s.register("wait", lambda: gate.wait(WAIT))
        s.schedule("wait", 10, id="a")
        s.start()
        clock.advance(10)
        until(lambda: s.stats().running == 1, what="the run started")
        s.shutdown(wait=False)
        assert s.store.is_open  # type: ignore[attr-defined]  # (its run records its outcome)
        gate.set()
        until(lambda: not s.store.is_open, what="the store closed after the run")  # type: ignore[attr-defined]
    assert [(r.state, r.attempt) for r in s.runs()] == [("succeeded", 1)]
    idle = Scheduler(clock, store=SQLiteStore(db))
    idle.start()
    idle.shutdown(wait=False)
    assert not idle.store.is_open  # type: ignore[attr-defined]  # (nothing was running)


def test_wait_idle_from_a_runs_listener_answers_at_once(
    db: Path, clock: FakeClock, calls: Calls
) -> None:
    # In the runner thread (executor="inline") it waited for its own run: for ever, the
    # runner with it.
    s = Scheduler(clock, store=SQLiteStore(db), executor="inline")
    s.register("record", calls.record)
    said: list[tuple[bool, float]] = []

    def listener(event: JobStarted) -> None:
        began = time.monotonic()
        said.append((s.wait_idle(WAIT), time.monotonic() - began))

    s.subscribe(listener, JobStarted)  # type: ignore[arg-type]
    s.schedule("record", 10, id="a")
    try:
        s.start()
        clock.advance(10)
        until(lambda: len(calls.keys) == 1, what="the run, after its listener")
        ((answer, waited),) = said
        assert answer is False and waited < WAIT / 2  # (at once, not after the timeout)
    finally:
        s.shutdown()


def test_a_web_process_schedules_a_job_for_an_executor_only_the_workers_have(
    db: Path, calls: Calls, caplog: pytest.LogCaptureFixture
) -> None:
    # It was refused ("not one of the scheduler's executors"), though a task name the web
    # process has not registered is accepted for the workers that have it.
    clock = FakeClock(T0)
    web = Scheduler(clock, store=SQLiteStore(db))
    try:
        with caplog.at_level(logging.WARNING, logger="duetime"):
            web.schedule("report", 10, id="r", executor="reports")
            web.schedule("report", 20, id="r2", executor="reports")
        assert caplog.text.count("executor 'reports' is not one of this scheduler's") == 1
        with pytest.raises(InvalidArgument, match="executor '' is not one"):
            web.schedule("report", 10, executor="")
        assert sorted(j.id for j in web.jobs()) == ["r", "r2"]
    finally:
        web.shutdown()
    with ThreadPoolExecutor(1) as reports:
        worker = Scheduler(clock, store=SQLiteStore(db), executors={"reports": reports})
        worker.register("report", calls.record)
        try:
            worker.start()
            clock.advance(20)
            until(lambda: len(calls.keys) == 2, what="both jobs on the worker's executor")
        finally:
            worker.shutdown()
    memory = Scheduler(clock)
    with pytest.raises(InvalidArgument, match="executor 'reports' is not one"):
        memory.schedule(print, 10, executor="reports")  # (in memory nobody else could run it)


def test_registering_a_task_after_loading_queues_each_job_once(
    db: Path, clock: FakeClock, calls: Calls
) -> None:
    # The usual start-up order: open the store (its jobs load, their task not yet known), then
    # register. Jobs loaded and never popped are queued already; queueing them again would
    # leave a stale entry per job (a worker holding many jobs paid for them twice).
    s = Scheduler(clock, store=SQLiteStore(db))
    s.register("later", calls.record)
    for i in range(5):
        s.schedule("later", 10 + i, id=f"p{i}")
    s.shutdown()
    t = Scheduler(clock, store=SQLiteStore(db))
    try:
        t.register("later", calls.record)
        stats = t.stats()
        assert (stats.live_entries, stats.stale_entries) == (5, 0)
        assert t.run_for(20) == 5
        assert sorted(calls.keys) == sorted(
            f"p{i}@2026-03-02T08:00:{10 + i}+00:00" for i in range(5)
        )
    finally:
        t.shutdown()


def test_a_stored_module_path_is_not_imported_unless_allowed(db: Path, clock: FakeClock) -> None:
    con = sqlite3.connect(db)
    s = Scheduler(clock, store=SQLiteStore(db))
    s.schedule(os.getcwd, 10, id="cwd")  # importable: stored as "posix:getcwd"
    s.shutdown()
    t = Scheduler(clock, store=SQLiteStore(db))
    u = Scheduler(clock, store=SQLiteStore(db), import_tasks=["posix"])
    try:
        assert t.run_for(10) == 0  # not registered here, not allowed: pending
        assert u.run_pending() == 1
    finally:
        t.shutdown()
        u.shutdown()
        con.close()


# -- dead letters -----------------------------------------------------------------------------------


def test_dead_letters_persist_and_can_be_retried_after_a_restart(
    open_scheduler: Opener, calls: Calls
) -> None:
    s = open_scheduler()
    s.schedule("fail", 5, id="bad", retry=FixedBackoff([1]))
    s.run_for(10)
    assert [f.job.id for f in s.failed()] == ["bad"]
    s.shutdown()
    t = open_scheduler()
    (dead,) = t.failed()
    assert (dead.job.id, dead.attempts, str(dead.error)) == ("bad", 2, "RuntimeError: boom")
    assert "RuntimeError: boom" in dead.traceback
    job = t.retry_failed("bad")
    assert job.state is JobState.SCHEDULED and not t.failed()
    t.shutdown()
    u = open_scheduler()
    assert not u.failed() and "bad" in u


def test_retry_failed_at_the_instant_of_the_death_runs_the_job_again(
    open_scheduler: Opener, calls: Calls
) -> None:
    # The clock does not move: the new fire is due when the dead one was, so it has its key.
    s = open_scheduler()
    s.schedule("fail", After(0), id="bad", retry=None)
    assert s.run_pending() == 1 and [f.job.id for f in s.failed()] == ["bad"]
    s.retry_failed("bad")
    assert s.run_pending() == 1
    key = f"bad@{T0.isoformat()}"
    assert calls.keys == [key, key]
    (dead,) = s.failed()
    assert dead.attempts == 1
    ((rec_key, state, attempt),) = [(r.key, r.state, r.attempt) for r in s.runs("bad")]
    assert (rec_key, state, attempt) == (key, "dead", 1)


def test_discard_failed_after_shutdown_is_refused_and_the_letter_kept(
    open_scheduler: Opener,
) -> None:
    s = open_scheduler()
    s.schedule("fail", After(0), id="bad", retry=None)
    s.run_pending()
    s.shutdown()
    with pytest.raises(StoreError, match="the store is closed"):
        s.discard_failed("bad")
    assert [f.job.id for f in s.failed()] == ["bad"]
    assert [f.job.id for f in open_scheduler().failed()] == ["bad"]


def test_triggers_at_one_instant_each_run_under_a_key_of_their_own(
    open_scheduler: Opener, calls: Calls
) -> None:
    # The clock does not move: the second trigger() takes the next microsecond's key.
    s = open_scheduler()
    s.schedule("record", FixedRate(3600), id="t")
    s.trigger("t")
    s.trigger("t")  # (no runner: each runs at once, here)
    s.pause("t")
    s.trigger("t")
    s.trigger("t")  # (paused: each is queued, and runs after the resume)
    s.resume("t")
    assert s.run_pending() == 2
    base = "t@trigger-2026-03-02T08:00:00"
    assert calls.keys == [
        f"{base}+00:00",
        f"{base}.000001+00:00",
        f"{base}.000002+00:00",
        f"{base}.000003+00:00",
    ]
    assert s.get("t").runs == 4  # type: ignore[union-attr]


def _store_keeping(
    kind: str, retention: timedelta, db: Path, request: pytest.FixtureRequest
) -> Any:
    """A store of ``kind`` that keeps finished runs for ``retention``."""
    if kind == "sqlite":
        return SQLiteStore(db, retention=retention)
    return request.getfixturevalue("pg_store")(retention=retention)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("retention", [timedelta(days=7), timedelta.max])
def test_finished_runs_are_kept_for_the_retention(
    kind: str,
    retention: timedelta,
    db: Path,
    clock: FakeClock,
    calls: Calls,
    request: pytest.FixtureRequest,
) -> None:
    s = Scheduler(clock, store=_store_keeping(kind, retention, db, request))
    try:
        s.register("record", calls.record)
        s.schedule("record", 5, id="j")
        s.schedule("record", 8 * 86_400, id="later")
        s.run_for(10)
        assert [r.key for r in s.runs(limit=2**63)] == ["j@2026-03-02T08:00:05+00:00"]
        s.run_for(8 * 86_400 + 3600)  # (old records go at a poll, hourly)
        kept = [r.job_id for r in s.runs()]
        # timedelta.max is longer than stored times reach: everything is kept.
        assert kept == (["later"] if retention == timedelta(days=7) else ["later", "j"])
    finally:
        s.shutdown()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_failed_run_whose_retry_was_dropped_is_purged_in_time(
    kind: str, db: Path, clock: FakeClock, calls: Calls, request: pytest.FixtureRequest
) -> None:
    retention = timedelta(days=1)
    s = Scheduler(clock, store=_store_keeping(kind, retention, db, request))
    try:
        s.register("fail", calls.fail)
        s.schedule("fail", 5, id="dropped", retry=FixedBackoff([3600]))
        s.schedule("fail", 5, id="pending", retry=FixedBackoff([3 * 86_400]))
        s.run_for(10)  # both fail; their retries are due in an hour and in three days
        s.cancel("dropped")
        (dropped,) = s.runs("dropped")
        # No retry to come: the record is final (it used to stay "failed", unfinished, for good,
        # and the purge never took it).
        assert dropped.state == "failed" and dropped.finished is not None
        s.run_for(2 * 86_400)  # (old records go at a poll, hourly)
        # The pending retry's failed run is not final: kept, however old.
        assert [(r.job_id, r.finished) for r in s.runs()] == [("pending", None)]
    finally:
        s.shutdown()


def test_a_trigger_made_elsewhere_while_the_job_runs_is_kept(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    worker = open_scheduler()
    admin = open_scheduler()  # (has not registered "tock": its trigger is for the workers)
    ran: list[str] = []

    def tock() -> None:
        run = current_run()
        assert run is not None
        ran.append(run.key)
        if len(ran) == 1:
            admin.trigger("t")  # while the worker runs the job, knowing of no trigger

    worker.register("tock", tock)
    worker.schedule("tock", FixedRate(60), id="t")
    clock.advance(60)
    assert worker.run_pending() == 1
    # The worker's outcome, written from what it knew, used to drop the fire.
    assert worker.run_pending() == 1
    assert ran == ["t@2026-03-02T08:01:00+00:00", "t@trigger-2026-03-02T08:01:00+00:00"]
    assert [r.state for r in admin.runs("t")] == ["succeeded", "succeeded"]


@pytest.mark.parametrize("change", ["reschedule", "pause"])
def test_a_change_made_elsewhere_as_a_run_ends_does_not_undo_the_run(
    db: Path, clock: FakeClock, change: str
) -> None:
    # The run ends while its outcome waits in the runner's outbox (written with the next
    # claims), and the worker's next poll reads a change "admin" made while it ran, from a copy
    # that says "running" and counts no run. Applied over the outcome, it undid the run in the
    # worker's memory, and the outcome written from that copy left the job "running" for good.
    worker = Scheduler(clock, store=SQLiteStore(db, poll_interval=0.001), executor="inline")
    admin = Scheduler(clock, store=SQLiteStore(db))
    later = At(T0 + timedelta(hours=2))
    ran = threading.Event()

    def body() -> None:
        if change == "reschedule":
            admin.reschedule("x", later)
        else:
            admin.pause("x")
        clock.advance(0.005)  # past the worker's next poll, within the outbox's wait
        ran.set()

    worker.register("body", body)
    try:
        worker.schedule("body", FixedRate(60), id="x")
        worker.start()
        clock.advance(60)
        assert ran.wait(WAIT)
        want = JobState.SCHEDULED if change == "reschedule" else JobState.PAUSED
        job = worker.get("x")
        assert job is not None
        until(lambda: job.runs == 1, what="the run counted", explain=lambda: repr(job))
        worker.wait_idle(WAIT)
        assert (job.state, job.runs) == (want, 1)
        fresh = Scheduler(clock, store=SQLiteStore(db))
        stored = fresh.get("x")
        fresh.shutdown()
        assert stored is not None and (stored.state, stored.runs) == (want, 1)
        if change == "reschedule":
            assert stored.trigger == later and job.trigger == later
    finally:
        worker.shutdown()
        admin.shutdown()


def test_a_job_cancelled_here_and_added_again_elsewhere_as_its_run_ends_is_loaded(
    db: Path, clock: FakeClock
) -> None:
    # The same window as above, for a job no longer in this process's memory: the row written
    # elsewhere is the job to load, not a change to hold back for an outcome.
    worker = Scheduler(clock, store=SQLiteStore(db, poll_interval=0.001), executor="inline")
    admin = Scheduler(clock, store=SQLiteStore(db))
    ran = threading.Event()

    def body() -> None:
        worker.cancel("x")  # removed here while its run goes
        admin.schedule("other", FixedRate(3600), id="x", replace=True)
        clock.advance(0.005)  # past the worker's next poll, within the outbox's wait
        ran.set()

    for s in (worker, admin):
        s.register("body", body)
        s.register("other", print)
    try:
        worker.schedule("body", FixedRate(60), id="x")
        worker.start()
        clock.advance(60)
        assert ran.wait(WAIT)
        until(lambda: worker.get("x") is not None, what="the job added elsewhere loaded")
        job = worker.get("x")
        assert job is not None and job.trigger == FixedRate(3600)
        assert job.state is JobState.SCHEDULED
    finally:
        worker.shutdown()
        admin.shutdown()


def test_a_change_written_from_a_copy_that_saw_the_run_going_does_not_undo_it(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # Another process pauses or reschedules a job from a copy read while a fire ran here (it
    # says "running", counts no run), just after the run's outcome was written: the window
    # between that process's last poll and its write. (Store level: the window is too narrow
    # to aim at through two Schedulers, each of which polls before a change.)
    import dataclasses

    s = open_scheduler()
    store: Any = s._store
    later = json.dumps(codec.encode_trigger(At(T0 + timedelta(hours=2))))
    s.schedule("record", FixedRate(60), id="rate")
    s.schedule("record", At(T0 + timedelta(seconds=60)), id="once")
    stale = {
        id: dataclasses.replace(store.load_row(id), state="running", runs=0)
        for id in ("rate", "once")
    }
    clock.advance(60)
    assert s.run_pending() == 2  # both outcomes written: 'rate' scheduled, 'once' completed
    now = clock.time_ns()
    # A reschedule: the job is scheduled at the new time, its run counted (it stayed "running"
    # for good, and the one-shot lost its run).
    for id in ("rate", "once"):
        row = dataclasses.replace(stale[id], trigger=later, next_base=now + 3600 * 10**9)
        row = dataclasses.replace(row, next_due=row.next_base)
        assert store.write([row], now, drop_retries=True) == {id}  # (not as sent: read back)
        stored = store.load_row(id)
        assert (stored.state, stored.runs, stored.trigger) == ("scheduled", 1, later)
    # A pause of a one-shot that ended meanwhile is moot (it used to come back paused, its run
    # uncounted), as in one process: a one-shot paused while it runs ends with its run.
    s.schedule("record", At(T0 + timedelta(seconds=120)), id="twice")
    paused = dataclasses.replace(store.load_row("twice"), state="paused", runs=0)
    clock.advance(60)
    assert s.run_pending() == 1
    assert store.write([paused], clock.time_ns()) == {"twice"}
    stored = store.load_row("twice")
    assert (stored.state, stored.runs) == ("completed", 1)


def test_a_change_made_here_while_an_outcome_waits_keeps_the_run(
    db: Path, clock: FakeClock
) -> None:
    # "first" ran; its outcome waits in the runner's outbox (written with the next claims)
    # while "second", in the same batch, pauses it. The pause is written after the outcome, and
    # the run stays counted: written before it, the store's copy had no run, and reading that
    # back undid the run in memory.
    s = Scheduler(clock, store=SQLiteStore(db), executor="inline")
    done = threading.Event()

    def first() -> None:
        pass

    def second() -> None:
        s.pause("first")
        done.set()

    s.register("first", first)
    s.register("second", second)
    try:
        s.schedule("first", FixedRate(60), id="first")
        s.schedule("second", FixedRate(60), id="second")
        s.start()
        clock.advance(60)
        assert done.wait(WAIT)
        assert s.wait_idle(WAIT)
        job = s.get("first")
        assert job is not None and (job.state, job.runs) == (JobState.PAUSED, 1)
        fresh = Scheduler(clock, store=SQLiteStore(db))
        stored = fresh.get("first")
        fresh.shutdown()
        assert stored is not None and (stored.state, stored.runs) == (JobState.PAUSED, 1)
    finally:
        s.shutdown()


def test_a_retry_written_out_of_the_row_by_a_stale_process_still_runs(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    one = open_scheduler()
    two = open_scheduler()
    attempts: list[tuple[str, int]] = []

    def flaky() -> None:
        run = current_run()
        assert run is not None
        attempts.append((run.key, run.attempt))
        if len(attempts) == 1:
            # While "one" runs the 08:01 fire, "two" runs the 08:02 one; both fail. "one"
            # then writes the job's row as it knew it, without the 08:02 fire's retry.
            assert two.run_pending() == 1
        if run.attempt == 1:
            raise RuntimeError("first attempts fail")

    one.register("flaky", flaky)
    two.register("flaky", flaky)
    one.schedule(
        "flaky",
        FixedRate(60),
        id="f",
        misfire=Misfire.RUN_ALL,
        overlap=Overlap.ALLOW,  # (two runs at once, in two processes: see the next test)
        retry=FixedBackoff([30]),
    )
    two.get("f")  # (two knows the job)
    clock.advance(120)
    assert one.run_pending() == 1
    clock.advance(30)
    assert one.run_pending() + two.run_pending() == 2
    first, second = "f@2026-03-02T08:01:00+00:00", "f@2026-03-02T08:02:00+00:00"
    assert sorted(attempts) == [(first, 1), (first, 2), (second, 1), (second, 2)]
    assert {(r.key, r.state, r.attempt) for r in one.runs("f")} == {
        (first, "succeeded", 2),
        (second, "succeeded", 2),
    }


def _two(open_scheduler: Opener, task: str, func: Callable[[], Any]) -> tuple[Scheduler, Scheduler]:
    """Two processes ("one", "two") on one store, ``func`` registered in both as ``task``."""
    one = open_scheduler()
    two = open_scheduler()
    one.register(task, func)
    two.register(task, func)
    return one, two


@pytest.mark.parametrize("fails", [False, True])
def test_runs_and_failures_count_every_process_s_runs(
    open_scheduler: Opener, clock: FakeClock, fails: bool
) -> None:
    # "one" runs the 08:01 fire; meanwhile "two" runs the 08:02 one and records it. "one"'s
    # copy of the job still counts no run: its outcome adds its own run to what the row has
    # (written whole from the copy, the row counted one run instead of two).
    keys: list[str] = []

    def job() -> None:
        run = current_run()
        assert run is not None
        keys.append(run.key)
        if len(keys) == 1:
            assert two.run_pending() == 1
        if fails:
            raise RuntimeError("counted")

    one, two = _two(open_scheduler, "job", job)
    one.schedule("job", FixedRate(60), id="f", misfire=Misfire.RUN_ALL, overlap=Overlap.ALLOW)
    two.get("f")  # (two knows the job)
    clock.advance(120)
    assert one.run_pending() == 1
    assert sorted(keys) == ["f@2026-03-02T08:01:00+00:00", "f@2026-03-02T08:02:00+00:00"]
    expected = (2, 2 if fails else 0)
    fresh = open_scheduler().get("f")
    assert fresh is not None and (fresh.runs, fresh.failures) == expected
    one.run_pending()  # (reads the row back: its copy counts both too)
    mine = one.get("f")
    assert mine is not None and (mine.runs, mine.failures) == expected


def test_a_retry_queued_elsewhere_survives_a_stale_worker_losing_the_attempt_before_it(
    open_scheduler: Opener, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "one" runs attempt 1 and fails. "two" runs attempt 2, fails and queues attempt 3. "one",
    # not having read that, tries attempt 2 and loses it; reading the row back, it dropped
    # attempt 3 as a copy of the fire it lost, and wrote the job completed over it: the retry
    # never ran, and no dead letter came (two workers, a one-shot job, retries).
    attempts: list[int] = []

    def fail() -> None:
        run = current_run()
        assert run is not None
        attempts.append(run.attempt)
        raise RuntimeError("always")

    one, two = _two(open_scheduler, "flaky", fail)
    one.schedule("flaky", 1, id="j", retry=FixedBackoff([1, 1]))
    two.get("j")  # (two knows the job)
    clock.advance(1)
    assert one.run_pending() == 1
    clock.advance(1)
    assert two.run_pending() == 1
    with monkeypatch.context() as m:
        m.setattr(one._replica, "sync_locked", lambda full=True: None)  # (one reads no changes)
        assert one.run_pending() == 0
    clock.advance(1)
    assert one.run_pending() + two.run_pending() == 1
    assert attempts == [1, 2, 3]
    assert [(r.state, r.attempt) for r in one.runs("j")] == [("dead", 3)]
    assert [f.job.id for f in one.failed()] == ["j"]


def test_retry_failed_of_a_job_that_died_in_another_process(
    open_scheduler: Opener, clock: FakeClock, calls: Calls
) -> None:
    # The app scheduled the job, a worker ran it to its death; the app's copy is live until
    # it reads the change: retry_failed() said ConflictingIdError for the job's own id.
    app = open_scheduler()
    worker = open_scheduler()
    app.schedule("fail", 10, id="d")
    clock.advance(10)
    assert worker.run_pending() == 1
    assert [f.job.id for f in app.failed()] == ["d"]
    job = app.retry_failed("d")
    assert job.id == "d" and app.failed() == []
    assert worker.run_pending() == 1 and len(calls.keys) == 2


Pair = tuple[Scheduler, Scheduler, list[str], list[int]]


def _pair(open_scheduler: Opener, first: Callable[[], Any] = lambda: None) -> Pair:
    """Two processes ("one", "two") on one store, and a task "slow" registered in both that
    records its runs' fire keys; during its first run it calls ``first``, then
    ``two.run_pending()`` (how many that ran: ``during``). Leases outlast the runs."""
    one = open_scheduler(lease=300)
    two = open_scheduler(lease=300)
    ran: list[str] = []
    during: list[int] = []

    def slow() -> None:
        run = current_run()
        assert run is not None
        ran.append(run.key)
        if len(ran) == 1:
            first()
            during.append(two.run_pending())

    one.register("slow", slow)
    two.register("slow", slow)
    return one, two, ran, during


@pytest.mark.parametrize("overlap", [Overlap.SKIP, Overlap.QUEUE, Overlap.ALLOW])
def test_skip_and_queue_hold_across_processes(
    open_scheduler: Opener, clock: FakeClock, overlap: Overlap
) -> None:
    # (The next fire falls due while the first run goes on.)
    one, two, ran, during = _pair(open_scheduler, lambda: clock.advance(60))
    skipped: list[tuple[str, datetime, str]] = []
    for name, s in (("one", one), ("two", two)):

        def note(event: Any, name: str = name) -> None:
            skipped.append((name, event.scheduled_time, event.reason))

        s.subscribe(note, JobSkipped)
    one.schedule("slow", FixedRate(60), id="s", overlap=overlap)
    two.get("s")
    clock.advance(60)
    assert one.run_pending() == 1
    clock.advance(60)
    assert one.run_pending() + two.run_pending() == 1
    fires = [f"s@2026-03-02T08:0{m}:00+00:00" for m in (1, 2, 3)]
    if overlap is Overlap.SKIP:
        # The 08:02 fire met the 08:01 run going in the other process: skipped, as in one,
        # and reported so there (the store skipped it silently).
        assert during == [0] and sorted(ran) == [fires[0], fires[2]]
        assert skipped == [("two", T0 + timedelta(minutes=2), "previous run still going")]
    elif overlap is Overlap.QUEUE:
        # It waited for that run to end instead (tried again a quarter of a second later, as
        # a busy claim is), and ran once it had; the 08:03 fire, due meanwhile, coalesced
        # into it, as in one process.
        assert during == [0] and sorted(ran) == fires[:2]
        assert two.get("s").next_run_time == T0 + timedelta(minutes=4)  # type: ignore[union-attr]
    else:
        assert during == [1] and sorted(ran) == fires
    assert sorted(r.key for r in one.runs("s")) == sorted(ran)


def test_a_trigger_held_back_in_one_process_waits_in_the_others_too(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # The trigger is held back in one until its run ends, and written to the job's row, where
    # two finds it: two used to run it at once, beside one's run.
    one, two, ran, during = _pair(open_scheduler, lambda: one.trigger("s"))
    one.schedule("slow", FixedRate(60), id="s")
    two.get("s")
    clock.advance(60)
    assert one.run_pending() == 2 and during == [0]
    assert ran == ["s@2026-03-02T08:01:00+00:00", "s@trigger-2026-03-02T08:01:00+00:00"]
    assert two.run_pending() == 0


@pytest.mark.parametrize("misfire", [Misfire.SKIP, Misfire.RUN_ONCE])
def test_a_misfire_after_downtime_is_reported_by_one_process(
    open_scheduler: Opener, clock: FakeClock, misfire: Misfire
) -> None:
    open_scheduler().schedule("record", FixedRate(60), id="t", misfire=misfire)
    clock.advance(10 * 60 + 30)  # down: the 08:01 to 08:10 fires are missed
    missed: list[tuple[str, int]] = []
    ran: list[int] = []
    for name in ("one", "two"):

        def note(event: Any, name: str = name) -> None:
            missed.append((name, event.missed))

        s = open_scheduler()
        s.subscribe(note, JobMissed)
        ran.append(s.run_pending())
    # RUN_ONCE runs the last one (08:10) and reports the nine before it; SKIP runs none.
    count = 10 if misfire is Misfire.SKIP else 9
    assert missed == [("one", count)]
    assert ran == ([0, 0] if misfire is Misfire.SKIP else [1, 0])


def test_a_misfire_the_store_skipped_is_reported_by_the_process_that_moved_the_job_on(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    one = open_scheduler()
    two = open_scheduler()
    missed: list[tuple[str, int]] = []
    for name, s in (("one", one), ("two", two)):

        def note(event: Any, name: str = name) -> None:
            missed.append((name, event.missed))

        s.subscribe(note, JobMissed)
    ran: list[str] = []

    def rec() -> None:
        ran.append("run")
        if len(ran) == 1:
            # While one's trigger() run goes, 08:00:05 to 08:00:20 come due; two's claim of
            # the last moves the job on and is skipped by the store (a run going elsewhere
            # started before it came due): two reports the three it coalesced.
            clock.advance(20.5)
            assert two.run_pending() == 0

    one.register("rec", rec)
    two.register("rec", rec)
    one.schedule("rec", FixedRate(5), id="t")
    two.get("t")
    one.trigger("t")
    assert missed == [("two", 3)] and two.stats().missed == 3
    assert two.get("t").next_run_time == T0 + timedelta(seconds=25)  # type: ignore[union-attr]


def test_a_job_a_skipped_misfire_ends_is_stored_ended_and_its_misfire_reported(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    s = open_scheduler()
    missed: list[int] = []
    s.subscribe(lambda e: missed.append(e.missed), JobMissed)  # type: ignore[attr-defined]
    job = s.schedule(
        "record", Cron("* * * * *", end=T0 + timedelta(minutes=3)), id="c", misfire=Misfire.SKIP
    )
    s.start()  # (the runner's batch path)
    clock.advance(600)
    until(lambda: job.state is JobState.COMPLETED, what="the job ended")
    assert s.wait_idle(WAIT)
    s.shutdown()
    assert missed == [3]
    assert [j.id for j in open_scheduler().jobs()] == []  # (stored ended, not scheduled)


def test_a_pause_made_elsewhere_during_a_skipped_misfire_write_is_read_back(
    open_scheduler: Opener, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = open_scheduler()
    two = open_scheduler()
    one.schedule("record", FixedRate(60), id="t", misfire=Misfire.SKIP)
    two.get("t")
    clock.advance(10 * 60 + 30)
    store: Any = one.store
    write = type(store).write_progress
    paused: list[bool] = []

    def pause_first(self: Any, *args: Any) -> Any:
        if self is store and not paused:
            paused.append(True)
            two.pause("t")  # (another process, just before this one's write)
        return write(self, *args)

    monkeypatch.setattr(type(store), "write_progress", pause_first)
    assert one.run_pending() == 0 and paused
    one.run_pending()
    assert one.get("t").state is JobState.PAUSED  # type: ignore[union-attr]


def test_occurrences_due_together_all_run_across_processes(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # As within one process: the 08:00:02 fire was due already when one's run of 08:00:01
    # started, so two's claim of it waits for that run rather than skipping it.
    one, two, ran, during = _pair(open_scheduler)
    one.schedule("slow", FixedRate(1), id="t")
    two.get("t")
    clock.advance(2)
    assert one.run_pending() + two.run_pending() == 2
    assert during == [0]
    assert ran == ["t@2026-03-02T08:00:01+00:00", "t@2026-03-02T08:00:02+00:00"]


def test_a_run_all_backlog_two_processes_catch_up_runs_every_fire_once(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    one = open_scheduler()
    two = open_scheduler()
    ran: list[str] = []
    during: list[int] = []

    def tick() -> None:
        run = current_run()
        assert run is not None
        ran.append(run.key)
        if len(ran) == 1:
            # While "one" runs the 08:01 fire, "two" meets the 08:02 one: under the default
            # Overlap.SKIP it used to be skipped there (a run of the job was going elsewhere),
            # and the backlog lost it. A catch-up waits for the run before it instead.
            during.append(two.run_pending())

    one.register("tick", tick)
    two.register("tick", tick)
    one.schedule("tick", FixedRate(60), id="t", misfire=Misfire.RUN_ALL)
    two.get("t")  # (two knows the job)
    clock.advance(5 * 60)  # down: the 08:01 to 08:05 fires are due
    for _ in range(4):
        one.run_pending()
        two.run_pending()
        clock.advance(1)
    assert during == [0]
    fires = [f"t@2026-03-02T08:0{m}:00+00:00" for m in range(1, 6)]
    assert sorted(ran) == fires
    assert sorted(r.key for r in one.runs("t") if r.state == "succeeded") == fires


@pytest.mark.parametrize("change", ["reschedule", "replace", "cancel and schedule"])
def test_retries_dropped_on_purpose_stay_dropped(
    open_scheduler: Opener, clock: FakeClock, calls: Calls, change: str
) -> None:
    worker = open_scheduler()
    admin = open_scheduler()
    worker.schedule("fail", FixedRate(600), id="f", retry=FixedBackoff([300]))
    clock.advance(600)
    assert worker.run_pending() == 1  # fails; its retry is due at 08:15
    admin.get("f")
    if change == "reschedule":
        admin.reschedule("f", FixedRate(3600))
    elif change == "replace":
        admin.schedule("fail", FixedRate(3600), id="f", replace=True)
    else:
        admin.cancel("f")
        admin.schedule("fail", FixedRate(3600), id="f")
    # The failed run's record keeps its retry's time (for a process that lost it to a stale
    # write): a change that drops the retry must drop it there too, or it came back.
    clock.advance(400)
    assert worker.run_pending() == 0 and admin.run_pending() == 0
    assert len(calls.keys) == 1
    assert [(r.state, r.attempt) for r in admin.runs("f")] == [("failed", 1)]


def test_retry_failed_refuses_a_letter_another_process_took(
    open_scheduler: Opener, calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = open_scheduler()
    b = open_scheduler()
    a.schedule("fail", 5, id="d", retry=NoRetry())
    a.run_for(10)
    assert [f.job.id for f in b.failed()] == ["d"]  # b has seen the letter in the store
    a.discard_failed("d")
    # b retries in the moment after it last looked (its look is skipped here): the store no
    # longer has the letter, so b must not run the job again from its own copy.
    monkeypatch.setattr(b._replica, "sync_dead", lambda: None)
    with pytest.raises(JobLookupError):
        b.retry_failed("d")
    assert b.get("d") is None and open_scheduler().get("d") is None
    assert calls.keys == ["d@2026-03-02T08:00:05+00:00"]


def test_a_dead_letter_retried_after_a_restart_runs(open_scheduler: Opener, calls: Calls) -> None:
    s = open_scheduler()
    s.schedule("fail", 5, id="bad", retry=NoRetry())
    s.run_for(10)
    s.shutdown()
    # Letters load with the store, before the tasks are registered: the retry must find the
    # task registered since (it used to stay pending, "not registered in this process").
    t = open_scheduler()
    t.retry_failed("bad")
    assert t.run_pending() == 1
    assert len(calls.keys) == 2 and calls.keys[1] != calls.keys[0]


def test_a_retried_dead_letter_reads_back_at_attempt_zero(open_scheduler: Opener) -> None:
    # It ran once (runs 1) and starts again from nothing: after a restart it is at attempt 0
    # still, as in memory, not at the 1 a job that has run is taken to be at.
    s = open_scheduler()
    s.schedule("fail", 5, id="bad", retry=NoRetry())
    s.run_for(10)
    s.retry_failed("bad")
    before = s.get("bad")
    assert before is not None and (before.attempt, before.runs) == (0, 1)
    s.shutdown()
    after = open_scheduler().get("bad")
    assert after is not None and (after.attempt, after.runs) == (0, 1)


def test_retry_failed_refuses_an_id_another_process_has_taken(
    open_scheduler: Opener, calls: Calls
) -> None:
    a = open_scheduler()
    a.schedule("fail", 5, id="d", retry=NoRetry())
    a.run_for(10)
    b = open_scheduler()
    taken = b.schedule("record", 3600, id="d")  # (the id is free: its job ended)
    # (It said "pass replace=True", which retry_failed() has not.)
    with pytest.raises(
        ConflictingIdError,
        match=r"'d' is already scheduled; a live job has that id now: cancel it first, or drop "
        r"the dead letter \(discard_failed\)",
    ):
        a.retry_failed("d")
    assert [f.job.id for f in a.failed()] == ["d"]
    seen = a.get("d")  # (b's job, read from the store)
    assert seen is not None and seen.next_run_time == taken.next_run_time
    fresh = open_scheduler()
    kept = fresh.get("d")
    assert kept is not None and kept.next_run_time == taken.next_run_time
    assert [f.job.id for f in fresh.failed()] == ["d"]


@pytest.mark.parametrize("change", ["pause", "resume", "reschedule", "replace"])
def test_a_change_the_store_refuses_changes_nothing_in_memory(
    open_scheduler: Opener, calls: Calls, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    s = open_scheduler()
    s.schedule("record", FixedRate(60), id="j", paused=change == "resume")
    before = (s.get("j").state, s.get("j").next_run_time, s.get("j").trigger)  # type: ignore[union-attr]

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise StoreError("the store", "saving jobs failed (a test's refusal)")

    act: Callable[[], Any] = {
        "pause": lambda: s.pause("j"),
        "resume": lambda: s.resume("j"),
        "reschedule": lambda: s.reschedule("j", FixedRate(3600)),
        "replace": lambda: s.schedule("record", FixedRate(3600), id="j", replace=True),
    }[change]
    with monkeypatch.context() as m:
        # The server is gone: the job cannot be read back from it either.
        m.setattr(type(s._store), "write", refuse)
        m.setattr(type(s._store), "load_row", refuse)
        with pytest.raises(StoreError, match="a test's refusal"):
            act()
        # (Looked at while the store is still away: a later poll would read the job back.)
        job = s.get("j")
        assert job is not None and (job.state, job.next_run_time, job.trigger) == before
    fresh = open_scheduler().get("j")  # (and the store has it as before)
    assert fresh is not None and (fresh.state, fresh.trigger) == (before[0], before[2])
    if change != "resume":
        s.run_for(61)  # still runs as before: not paused, not moved
        assert len(calls.keys) == 1


@pytest.mark.parametrize("taken", ["retry_failed", "discard_failed"])
def test_a_letter_taken_elsewhere_leaves_the_process_it_died_in(
    open_scheduler: Opener, calls: Calls, taken: str
) -> None:
    a = open_scheduler()
    a.schedule("fail", 5, id="d", retry=NoRetry())
    a.run_for(10)  # dies here; a has not looked at its dead letters since
    b = open_scheduler()
    getattr(b, taken)("d")
    # It used to stay in a's list: only letters a had read from the store could leave it.
    assert a.failed() == [] and b.failed() == []


def test_a_retry_the_store_refuses_keeps_the_letter(
    open_scheduler: Opener, calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = open_scheduler()
    s.schedule("fail", 5, id="d", retry=NoRetry())
    s.run_for(10)

    def refuse(*args: Any) -> None:
        raise StoreError("the store", "saving jobs failed (a test's refusal)")

    with monkeypatch.context() as m:
        m.setattr(type(s._store), "_insert_now", refuse)
        with pytest.raises(StoreError, match="a test's refusal"):
            s.retry_failed("d")
    (letter,) = s.failed()
    assert letter.job.id == "d" and letter.job.state is JobState.FAILED and "d" not in s
    assert [f.job.id for f in open_scheduler().failed()] == ["d"]  # (in the store too)
    s.retry_failed("d")
    assert s.run_pending() == 1 and len(calls.keys) == 2


def test_dead_letters_are_shared_by_the_processes_open_on_a_store(
    open_scheduler: Opener, calls: Calls
) -> None:
    admin = open_scheduler()  # (opened first, never runs anything: a web app's admin page)
    worker = open_scheduler()
    worker.schedule("fail", 5, id="bad", retry=NoRetry())
    worker.schedule("fail", 5, id="worse", retry=NoRetry())
    worker.run_for(10)
    assert [f.job.id for f in worker.failed()] == ["bad", "worse"]
    # The other process sees what died after it opened the store, and can act on it.
    dead = {f.job.id: f for f in admin.failed()}
    assert set(dead) == {"bad", "worse"} and str(dead["bad"].error) == "RuntimeError: boom"
    assert admin.discard_failed("worse") is True
    assert [f.job.id for f in worker.failed()] == ["bad"]
    assert worker.discard_failed("worse") is False
    job = admin.retry_failed("bad")
    assert job.state is JobState.SCHEDULED
    assert worker.failed() == [] and admin.failed() == []
    with pytest.raises(JobLookupError):
        worker.retry_failed("bad")


def test_a_dead_letter_the_store_has_not_recorded_stays_listed(
    open_scheduler: Opener, calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = open_scheduler()
    other = open_scheduler()

    def refuse(*args: Any) -> None:
        raise StoreError("the store", "recording a dead letter failed (a test's refusal)")

    monkeypatch.setattr(type(s._store), "save_dead", refuse)
    s.schedule("fail", 5, id="bad", retry=NoRetry())
    s.run_for(10)
    # Not in the store: the process that holds it still lists it (the store's list is not
    # the whole truth for letters this process has not written), the other cannot see it.
    assert [f.job.id for f in s.failed()] == ["bad"]
    assert [f.job.id for f in s.failed()] == ["bad"]
    assert other.failed() == []


def test_a_job_that_dies_again_after_a_retry_elsewhere_keeps_its_unwritten_letter(
    open_scheduler: Opener, calls: Calls, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = open_scheduler()
    admin = open_scheduler()
    worker.schedule("fail", 5, id="bad", retry=NoRetry())
    worker.run_for(10)
    assert [f.job.id for f in worker.failed()] == ["bad"]  # (written, and seen written)
    admin.retry_failed("bad")
    clock.advance(6)  # (the worker's next poll finds the job again)

    def refuse(*args: Any) -> None:
        raise StoreError("the store", "recording a dead letter failed (a test's refusal)")

    monkeypatch.setattr(type(worker._store), "save_dead", refuse)
    assert worker.run_pending() == 1  # dies again; its new letter is not written
    (letter,) = worker.failed()
    assert letter.job.id == "bad" and letter.failed_at > T0 + timedelta(seconds=10)


def test_a_failed_attempt_retries_across_a_restart(open_scheduler: Opener, calls: Calls) -> None:
    s = open_scheduler()
    s.schedule("fail", 5, id="r", retry=FixedBackoff([60]))
    s.run_for(10)
    assert [(r.state, r.attempt) for r in s.runs()] == [("failed", 1)]
    s.shutdown()
    t = open_scheduler()
    assert t.run_for(30) == 0
    assert t.run_for(30) == 1  # the retry, at its time
    assert [(r.state, r.attempt) for r in t.runs()] == [("dead", 2)]
    assert calls.keys == ["r@2026-03-02T08:00:05+00:00"] * 2


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_any_exception_a_job_raises_is_recorded_and_the_runner_goes_on(
    open_scheduler: Opener, clock: FakeClock
) -> None:
    # A NUL (PostgreSQL's text refuses it), a lone surrogate (UTF-8 refuses it), a __str__
    # that raises: each is still the run's outcome, and the runner's batch is not lost.
    errors = {
        "nul": ValueError("a\x00b"),
        "surrogate": ValueError("a\udcffb"),
        "unprintable": _Unprintable(),
    }

    def boom(which: str) -> None:
        raise errors[which]

    s = open_scheduler(executor="inline")
    s.register("boom", boom)
    for which in errors:
        s.schedule("boom", 10, args=[which], id=which)
    s.schedule("record", 10, id="fine")
    s.start()
    clock.advance(10)
    until(lambda: len(s.runs()) == 4 and all(r.finished for r in s.runs()), what="4 outcomes")
    assert s.wait_idle(WAIT)
    got = {r.job_id: (r.state, r.error) for r in s.runs()}
    assert got == {
        "nul": ("dead", "ValueError: a\\x00b"),
        "surrogate": ("dead", "ValueError: a\\udcffb"),
        "unprintable": ("dead", "_Unprintable: <message not printable>"),
        "fine": ("succeeded", None),
    }


class _FailingOnce(SQLiteStore):
    """A SQLiteStore whose first batch of claims fails with a bug, not a StoreError."""

    failed = False

    def settle_and_claim(self, *args: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise RuntimeError("a bug")
        return super().settle_and_claim(*args)


def test_the_runner_survives_a_failure_of_its_own_and_runs_what_it_had_taken(
    db: Path, clock: FakeClock, calls: Calls, caplog: pytest.LogCaptureFixture
) -> None:
    # Not a store refusal (a StoreError, which the claims' answers carry) but a bug: the
    # runner says so, pauses, and tries the same fires again.
    s = Scheduler(clock, store=_FailingOnce(db), executor="inline")
    s.register("record", calls.record)
    s.schedule("record", 10, id="a")
    s.schedule("record", 10, id="b")
    s.start()
    try:
        clock.advance(10)
        until(lambda: "the runner failed" in caplog.text, what="the failure logged")
        assert calls.keys == []
        clock.advance(1)  # the pause
        until(lambda: len(calls.keys) == 2, what="both fires run")
        assert s.wait_idle(WAIT)
        assert sorted(r.state for r in s.runs()) == ["succeeded", "succeeded"]
    finally:
        s.shutdown()
    assert sorted(calls.keys) == ["a@2026-03-02T08:00:10+00:00", "b@2026-03-02T08:00:10+00:00"]
    assert "RuntimeError: a bug" in caplog.text


# -- batches ------------------------------------------------------------------------------------------


@pytest.mark.sqlite_only
def test_a_batch_is_one_transaction(open_scheduler: Opener, db: Path) -> None:
    s = open_scheduler()
    with s.batch():
        for i in range(100):
            s.schedule("record", 60, id=f"b{i}")
    assert len(open_scheduler()) == 100

    def half_a_batch() -> None:
        with s.batch():
            s.schedule("record", 60, id="half")
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        half_a_batch()
    assert "half" not in s
    assert "half" not in open_scheduler()


@pytest.mark.parametrize("change", ["pause", "reschedule", "replace", "cancel"])
def test_a_job_added_in_a_batch_can_be_changed_in_it(open_scheduler: Opener, change: str) -> None:
    # Its row is inserted when the batch ends: the change wrote its row at once, and the insert
    # then found the id taken (the batch failed), or, after a cancel, stored the job live.
    s = open_scheduler()
    with s.batch():
        s.schedule("record", 60, id="n")
        if change == "pause":
            s.pause("n")
        elif change == "reschedule":
            s.reschedule("n", 600)
        elif change == "replace":
            s.schedule("record", 600, id="n", replace=True)
        else:
            s.pause("n")
            s.trigger("n")  # (paused: queued for resume, in the runs)
            assert s.cancel("n")
    stored = open_scheduler().get("n")
    mine = s.get("n")
    if change == "cancel":
        assert stored is None and mine is None
        assert [r.state for r in s.runs("n")] == ["lost"]
        return
    assert stored is not None and mine is not None
    assert (stored.state, stored.next_run_time) == (mine.state, mine.next_run_time)
    assert stored.state is (JobState.PAUSED if change == "pause" else JobState.SCHEDULED)
    if change != "pause":
        assert stored.next_run_time == T0 + timedelta(seconds=600)


def test_a_job_added_in_a_batch_can_be_triggered_in_it(
    open_scheduler: Opener, calls: Calls
) -> None:
    # The runner is not started: the trigger runs the job at once, its claim and outcome
    # writing the job's row before the batch's insert of it at the end, which then found its
    # id taken (the batch failed after the run had happened).
    s = open_scheduler()
    with s.batch():
        s.schedule("record", 3600, id="n")
        s.trigger("n")
        assert calls.keys == [f"n@trigger-{T0.isoformat()}"]
    for scheduler in (s, open_scheduler()):
        assert [(j.id, j.state, j.runs) for j in scheduler.jobs()] == [("n", JobState.SCHEDULED, 1)]
        assert [r.state for r in scheduler.runs("n")] == ["succeeded"]


@pytest.mark.parametrize("drive", ["trigger", "run_pending"])
def test_a_run_in_a_batch_whose_new_id_is_taken_runs_nothing_and_loses_nothing(
    open_scheduler: Opener, clock: FakeClock, calls: Calls, drive: str
) -> None:
    # The batch's new rows go in before the run is claimed, and the taken id raises there:
    # memory was already changed for the claim (the job counted as running, its entry
    # popped), so the job never ran again in this process.
    s = open_scheduler()
    s.schedule("record", 10, id="a")
    open_scheduler().schedule("record", 3600, id="n")  # (elsewhere: this process has not read it)
    clock.advance(10)

    def changes() -> None:
        with s.batch():
            s.schedule("record", 3600, id="n")
            with pytest.raises(ConflictingIdError, match="'n' is already scheduled"):
                s.trigger("a") if drive == "trigger" else s.run_pending()

    with pytest.raises(
        ConflictingIdError,
        match=r"'n' is already scheduled; another process added a job under it during this "
        r"batch, so none of the batch's changes is stored: run the batch again",
    ):
        changes()
    assert calls.keys == []
    assert [r.key for r in open_scheduler().runs()] == []
    assert s.run_pending() == 1
    assert calls.keys == ["a@2026-03-02T08:00:10+00:00"]
    assert s.wait_idle(WAIT)


def test_a_failed_batch_nested_in_one_fails_that_one_too(open_scheduler: Opener) -> None:
    # One transaction holds both: the inner changes cannot be taken back alone (its new job
    # was dropped from memory and stored all the same by the outer batch).
    s = open_scheduler()
    s.schedule("record", 60, id="a")

    def inner() -> None:
        with s.batch():
            s.schedule("record", 60, id="new")
            raise RuntimeError("inner")

    def outer() -> None:
        with s.batch():
            s.pause("a")
            with contextlib.suppress(RuntimeError):
                inner()

    with pytest.raises(StoreError, match="a batch nested in this one raised"):
        outer()
    fresh = open_scheduler()
    for scheduler in (s, fresh):
        assert [(j.id, j.state) for j in scheduler.jobs()] == [("a", JobState.SCHEDULED)]


def test_a_trigger_queued_in_a_failed_batch_is_dropped_from_memory(
    open_scheduler: Opener, calls: Calls
) -> None:
    s = open_scheduler()
    s.schedule("record", 3600, id="t", paused=True)

    def changes() -> None:
        with s.batch():
            s.trigger("t")  # (paused: queued for resume)
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        changes()
    s.resume("t")
    assert s.run_pending() == 0 and calls.keys == []
    assert s.runs("t") == []


def test_a_batch_that_raises_leaves_memory_as_the_store(open_scheduler: Opener) -> None:
    # The store rolled back every change of the block; memory kept all but the new jobs (a
    # pause that was never stored, a cancelled job gone from memory only).
    s = open_scheduler()
    s.schedule("record", 60, id="p")
    s.schedule("record", 60, id="c")
    s.schedule("record", 60, id="r")

    def changes() -> None:
        with s.batch():
            s.pause("p")
            s.cancel("c")
            s.reschedule("r", 600)
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        changes()
    fresh = open_scheduler()
    for scheduler in (s, fresh):
        jobs = {j.id: j for j in scheduler.jobs()}
        assert sorted(jobs) == ["c", "p", "r"]
        assert jobs["p"].state is JobState.SCHEDULED
        assert jobs["r"].next_run_time == T0 + timedelta(seconds=60)


# -- faults -----------------------------------------------------------------------------------------


def test_a_newer_schema_is_refused(db: Path) -> None:
    Scheduler(FakeClock(), store=SQLiteStore(db)).shutdown()
    with contextlib.closing(sqlite3.connect(db)) as con:
        con.execute("UPDATE duetime_meta SET value = ? WHERE key = 'schema'", (SCHEMA_VERSION + 1,))
        con.commit()
    with pytest.raises(StoreError, match=r"newer than this duetime understands.*upgrade duetime"):
        Scheduler(FakeClock(), store=SQLiteStore(db))


@pytest.mark.parametrize("args", ["[1, 2]", "not json"], ids=["wrong shape", "not JSON"])
def test_a_row_that_cannot_be_read_is_skipped_with_a_warning(
    db: Path, args: str, caplog: pytest.LogCaptureFixture
) -> None:
    s = Scheduler(FakeClock(T0), store=SQLiteStore(db))
    s.register("print", print)
    for id in ("bad", "good"):
        s.schedule("print", 3600, id=id)
    s.shutdown()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE duetime_jobs SET args = ? WHERE id = 'bad'", (args,))
        conn.commit()
    t = Scheduler(FakeClock(T0), store=SQLiteStore(db))
    t.register("print", print)
    try:
        assert [job.id for job in t.jobs()] == ["good"]
        # Its id stays taken; replace=True cannot read the job to replace it, and says so.
        with pytest.raises(ConflictingIdError, match=r"cannot load .* so it cannot replace it"):
            t.schedule("print", 10, id="bad", replace=True)
        assert [job.id for job in t.jobs()] == ["good"]
    finally:
        t.shutdown()
    assert "job 'bad' in the store cannot be loaded here" in caplog.text


def test_a_corrupt_file_is_refused_with_advice(db: Path) -> None:
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"jobs\.db.*corrupt or not a SQLite database"):
        Scheduler(FakeClock(), store=SQLiteStore(db))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files")
def test_a_read_only_file_is_refused_with_advice(db: Path) -> None:
    Scheduler(FakeClock(), store=SQLiteStore(db)).shutdown()
    db.chmod(0o444)
    try:
        s = Scheduler(FakeClock(), store=SQLiteStore(db))
        s.register("record", print)
        with pytest.raises(StoreError, match="read-only"):
            s.schedule("record", 10, id="x")
        s.shutdown()
    finally:
        db.chmod(0o644)


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        Scheduler(FakeClock(), store=SQLiteStore(tmp_path / "no" / "jobs.db"))


@contextlib.contextmanager
def locked(db: Path) -> Iterator[None]:
    """Another connection holds the file's write lock for the block."""
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.sqlite_only
def test_a_locked_file_fails_the_change_and_leaves_nothing_half_done(
    open_scheduler: Opener, db: Path
) -> None:
    s = open_scheduler(store=SQLiteStore(db, busy_timeout=0.05))
    s.schedule("record", FixedRate(60), id="t")
    with locked(db):
        with pytest.raises(StoreError, match=r"locked.*busy_timeout=0\.05"):
            s.schedule("record", 10, id="new")
        assert "new" not in s
        with pytest.raises(StoreError, match="locked"):
            s.pause("t")
        assert s.get("t").state is JobState.SCHEDULED  # type: ignore[union-attr]
    s.pause("t")
    assert s.get("t").state is JobState.PAUSED  # type: ignore[union-attr]


@pytest.mark.sqlite_only
def test_a_cancel_or_trigger_the_locked_file_refuses_changes_nothing(
    open_scheduler: Opener, db: Path, clock: FakeClock, calls: Calls
) -> None:
    s = open_scheduler(store=SQLiteStore(db, busy_timeout=0.05))
    job = s.schedule("record", FixedRate(60), id="t")
    with locked(db):
        with pytest.raises(StoreError, match="locked"):
            s.cancel("t")
        with pytest.raises(StoreError, match="locked"):
            job.cancel()
        assert s.get("t") is job and job.state is JobState.SCHEDULED
        # Not dropped in silence (the claim used to be logged as retried, then forgotten).
        with pytest.raises(StoreError, match="locked"):
            s.trigger("t")
    assert s.run_for(60) == 1 and calls.keys == ["t@2026-03-02T08:01:00+00:00"]
    s.trigger("t")
    assert calls.keys[1] == "t@trigger-2026-03-02T08:01:00+00:00"
    assert s.cancel("t") and "t" not in s


@pytest.mark.sqlite_only
def test_a_trigger_the_locked_file_refuses_leaves_the_schedule_alone(
    open_scheduler: Opener, db: Path, clock: FakeClock, calls: Calls
) -> None:
    s = open_scheduler(store=SQLiteStore(db, busy_timeout=0.05))
    job = s.schedule("record", FixedRate(10), id="t")
    clock.advance(9)
    with locked(db), pytest.raises(StoreError, match="locked"):
        s.trigger("t")
    # (The failed claim used to hold the job's next fire back, as the runner's claims are.)
    assert job.next_run_time == T0 + timedelta(seconds=10)
    assert s.run_for(1) == 1 and calls.keys == ["t@2026-03-02T08:00:10+00:00"]


@pytest.mark.sqlite_only
def test_a_running_scheduler_survives_a_locked_file(
    open_scheduler: Opener, db: Path, clock: FakeClock, calls: Calls
) -> None:
    s = open_scheduler(store=SQLiteStore(db, busy_timeout=0.05))
    s.schedule("record", FixedRate(60), id="t")
    with locked(db):
        assert s.run_for(60) == 0  # the claim failed: logged, nothing run, nothing lost
    assert s.run_for(60) >= 1
    assert calls.keys[-1] == "t@2026-03-02T08:02:00+00:00"


def test_outcomes_the_file_refused_are_logged_once_and_written_at_the_next_poll(
    db: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    # Three runs claimed together; the first takes the file's write lock (another process
    # would), so the three outcomes written together fail: one line for the lot, then the
    # poll after the lock is gone writes them.
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    s = Scheduler(clock, store=SQLiteStore(db, busy_timeout=0.05), executor="inline")
    s.register("lock", lambda: holder.execute("BEGIN IMMEDIATE"))
    s.register("noop", lambda: None)
    s.schedule("lock", 10, id="a")
    s.schedule("noop", 10, id="b")
    s.schedule("noop", 10, id="c")
    caplog.set_level(logging.ERROR, "duetime")
    s.start()
    try:
        clock.advance(10)
        until(lambda: "could not record" in caplog.text, what="the failed write")
        holder.execute("ROLLBACK")
        clock.advance(1)  # a poll
        until(lambda: len(s.runs(state="succeeded")) == 3, what="the outcomes written")
    finally:
        s.shutdown()
        holder.close()
    lines = [r.getMessage() for r in caplog.records if "could not record" in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].startswith("could not record the outcome of 3 runs (")
    assert "trying again at the next poll" in lines[0]


def test_bad_store_arguments(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"path must be a str or os\.PathLike, got 42"):
        SQLiteStore(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="poll_interval must be"):
        SQLiteStore(tmp_path / "x.db", poll_interval=0)
    with pytest.raises(InvalidArgument, match="path must name a file, got the directory"):
        SQLiteStore(tmp_path)
    with pytest.raises(InvalidArgument, match="lease must not be negative, got -1"):
        Scheduler(store=SQLiteStore(tmp_path / "x.db"), lease=-1)
    for bad in ("myapp", 5, None):
        with pytest.raises(TypeError, match="import_tasks must be a list of module prefixes"):
            Scheduler(import_tasks=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=r"import_tasks must name module prefixes.*\[''\]"):
        Scheduler(import_tasks=[""])


# -- real processes -----------------------------------------------------------------------------------


def _succeeded(db: Path) -> int:
    con = sqlite3.connect(db, timeout=5)
    try:
        return int(
            con.execute("SELECT count(*) FROM duetime_runs WHERE state = 'succeeded'").fetchone()[0]
        )
    finally:
        con.close()


def test_three_processes_run_each_of_300_fires_exactly_once(tmp_path: Path) -> None:
    db, effects = tmp_path / "jobs.db", tmp_path / "effects.txt"
    keys = workers.fill(f"sqlite:///{db}", 300)
    # 5 ms of work per fire: one process alone would need 1.5 s, so all three take part.
    procs = [workers.spawn(str(db), effects, "--work", "0.005") for _ in range(3)]
    try:
        workers.until(procs, lambda: _succeeded(db) == 300, 40, "300 fires")
    finally:
        workers.stop(procs)
    started = workers.lines(effects)
    assert sorted(k for k, _ in started) == sorted(keys)  # each fire once, none lost
    assert _succeeded(db) == 300
    assert len({pid for _, pid in started}) >= 2  # the work was shared


def test_a_stopped_worker_loses_its_run_and_its_late_outcome_is_refused(tmp_path: Path) -> None:
    db, effects = tmp_path / "jobs.db", tmp_path / "effects.txt"
    done = Path(f"{effects}.done")
    (key,) = workers.fill(f"sqlite:///{db}", 1)
    zombie = workers.spawn(str(db), effects, "--work", "1.0")  # each run works for 1 s
    procs = [zombie]
    try:
        workers.until(procs, lambda: len(workers.lines(effects)) == 1, 20, "the first start")
        zombie.send_signal(signal.SIGSTOP)  # mid-run: it stops renewing its lease (2 s)
        other = workers.spawn(str(db), effects, "--work", "1.0")
        procs.append(other)
        workers.until(procs, lambda: _succeeded(db) == 1, 30, "the other worker to run it")
        zombie.send_signal(signal.SIGCONT)
        workers.until(procs, lambda: len(workers.lines(done)) == 2, 20, "both ends")
    finally:
        workers.stop(procs)
    starts = workers.lines(effects)
    assert [k for k, _ in starts] == [key, key]  # started twice: at-least-once start
    assert starts[0][1] == str(zombie.pid) and starts[1][1] == str(other.pid)
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT state, attempt, worker FROM duetime_runs").fetchall()
    finally:
        con.close()
    # Recorded once, as the other worker's attempt 2: the zombie's late outcome was refused.
    assert [(state, attempt, worker.split(":")[1]) for state, attempt, worker in rows] == [
        ("succeeded", 2, str(other.pid))
    ]


def test_workers_killed_at_random_lose_no_fire(tmp_path: Path) -> None:
    db, effects = tmp_path / "jobs.db", tmp_path / "effects.txt"
    keys = workers.fill(f"sqlite:///{db}", 300)
    rng = random.Random(7)
    procs = [workers.spawn(str(db), effects, "--work", "0.05") for _ in range(3)]
    kills = 0
    try:
        deadline = time.monotonic() + 50
        next_kill = time.monotonic() + rng.uniform(0.2, 0.8)
        while _succeeded(db) < 300 and time.monotonic() < deadline:
            if time.monotonic() >= next_kill:
                i = rng.randrange(3)
                procs[i].send_signal(signal.SIGKILL)
                procs[i].wait(timeout=10)
                kills += 1
                procs[i] = workers.spawn(str(db), effects, "--work", "0.05")
                next_kill = time.monotonic() + rng.uniform(0.2, 0.8)
            time.sleep(0.05)
    finally:
        workers.stop(procs)
    assert _succeeded(db) == 300, f"not all work done after {kills} kills"
    ran = [k for k, _ in workers.lines(effects)]
    assert set(ran) == set(keys)  # no fire lost
    assert len(ran) - len(keys) <= kills  # repeats: at most one per kill
    assert kills >= 3


def test_each_kind_of_file_failure_gets_its_own_advice(db: Path) -> None:
    # (Real read-only and locked files are tested above; root, which CI may be, writes
    # read-only files, so the read-only wording is checked on the error SQLite raises.)
    store = SQLiteStore(db, busy_timeout=2)
    cases = {
        "attempt to write a readonly database": "the file or its directory is read-only",
        "database is locked": "longer than busy_timeout=2 seconds",
        "file is not a database": "corrupt or not a SQLite database",
        "unable to open database file": "check that the directory exists",
    }
    for message, advice in cases.items():
        err = store._fail("saving jobs", sqlite3.OperationalError(message))
        assert isinstance(err, StoreError)
        assert str(err).startswith(f"store {str(db)!r}: saving jobs failed ({message}); ")
        assert advice in str(err)


# -- a state machine: random changes and restarts against a model ------------------------------------


class RestartModel(RuleBasedStateMachine):
    """Schedule, cancel, reschedule, pause, resume, run and restart at random; after every step
    the scheduler's jobs and next run times equal a plain model's, restarts included."""

    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.TemporaryDirectory()
        self.path = Path(self.folder.name) / "jobs.db"
        self.clock = FakeClock(T0)
        self.ran: list[str] = []
        self.s = self._open()
        self.now = 0  # seconds since T0
        # id -> [next due (seconds since T0), period (None: one-shot), paused]
        self.model: dict[str, list[Any]] = {}
        self.counter = 0

    def _open(self) -> Scheduler:
        s = Scheduler(self.clock, store=SQLiteStore(self.path))
        s.register("record", self.ran.append)
        return s

    @rule(target=ids, delay=st.integers(1, 500), period=st.sampled_from([None, 30, 60, 600]))
    def schedule(self, delay: int, period: int | None) -> str:
        self.counter += 1
        id = f"j{self.counter}"
        when = At(T0 + timedelta(seconds=self.now + delay)) if period is None else FixedRate(period)
        self.s.schedule("record", when, args=[id], id=id)
        self.model[id] = [self.now + (delay if period is None else period), period, False]
        return id

    @rule(id=ids)
    def cancel(self, id: str) -> None:
        assert self.s.cancel(id) == (id in self.model)
        self.model.pop(id, None)

    @rule(id=ids, delay=st.integers(1, 500))
    def reschedule(self, id: str, delay: int) -> None:
        if id not in self.model:
            return
        self.s.reschedule(id, At(T0 + timedelta(seconds=self.now + delay)))
        self.model[id][:2] = [self.now + delay, None]

    @rule(id=ids)
    def pause(self, id: str) -> None:
        if id in self.model:
            self.s.pause(id)
            self.model[id][2] = True

    @rule(id=ids)
    def resume(self, id: str) -> None:
        if id in self.model:
            self.s.resume(id)
            self.model[id][2] = False

    @rule(seconds=st.integers(1, 400))
    def run(self, seconds: int) -> None:
        self.s.run_for(seconds)
        self.now += seconds
        for id, entry in list(self.model.items()):
            due, period, paused = entry
            if paused or due > self.now:
                continue
            if period is None:
                del self.model[id]
            else:
                entry[0] = due + ((self.now - due) // period + 1) * period

    @rule()
    def restart(self) -> None:
        self.s.shutdown()
        self.s = self._open()

    @invariant()
    def jobs_match_the_model(self) -> None:
        seen = {j.id: (j.next_run_time, j.state is JobState.PAUSED) for j in self.s.jobs()}
        expected = {
            id: (None if paused else T0 + timedelta(seconds=due), paused)
            for id, (due, _, paused) in self.model.items()
        }
        assert seen == expected

    def teardown(self) -> None:
        self.s.shutdown()
        self.folder.cleanup()


TestRestartModel = RestartModel.TestCase
TestRestartModel.settings = settings(max_examples=25, stateful_step_count=25, deadline=None)


def test_a_fire_whose_key_ran_is_not_run_again_and_does_not_spin(
    open_scheduler: Opener, calls: Calls
) -> None:
    s = open_scheduler()

    def body() -> None:
        calls.record()
        if len(calls.keys) == 1:
            s.reschedule("again", 0)  # due at the same instant: the same fire key

    s.register("body", body)
    job = s.schedule("body", 0, id="again")
    assert s.run_pending() == 1
    assert s.run_pending() == 0  # the held-back second start has a key that ran: skipped
    assert calls.keys == ["again@2026-03-02T08:00:00+00:00"]
    assert job.state is JobState.COMPLETED and "again" not in s


@pytest.mark.sqlite_only
def test_a_batch_of_claims_is_one_transaction_and_fails_whole(db: Path) -> None:
    # The runner's batch of claims and outcomes is one BEGIN IMMEDIATE (each item a
    # savepoint): one commit per batch. If the transaction cannot be had, every item answers
    # its error and nothing this process noted of the batch stands.
    maker = Scheduler(FakeClock(T0), store=SQLiteStore(db))
    maker.register("rec", print)
    for i in range(4):
        maker.schedule("rec", 10 + i, id=f"j{i}")
    maker.shutdown()
    store = SQLiteStore(db, busy_timeout=0.05)
    store.open("worker-a")
    try:
        rows = {row.id: row for row in store.load_rows()}
        now = time.time_ns()

        def ask(job: str) -> Any:
            row = rows[job]
            return (f"{job}@key", job, row.next_base, 1, now, 30 * 10**9, row, row.next_base, 0)

        with contextlib.closing(sqlite3.connect(db)) as other:
            other.execute("BEGIN IMMEDIATE")  # (another process holds the write lock)
            answers = store.claim_many([ask("j0"), ask("j1")])
            other.rollback()
        assert all(isinstance(a, StoreError) and "locked" in str(a) for a in answers)
        assert store.held_keys() == []
        statements: list[str] = []
        store._db.set_trace_callback(statements.append)  # type: ignore[union-attr]
        assert store.claim_many([ask("j0"), ask("j1"), ask("j2")]) == [("won", None)] * 3
        store._db.set_trace_callback(None)  # type: ignore[union-attr]
        assert [s for s in statements if s in ("BEGIN IMMEDIATE", "COMMIT")] == [
            "BEGIN IMMEDIATE",
            "COMMIT",
        ]
        assert store.held_keys() == ["j0@key", "j1@key", "j2@key"]
        with contextlib.closing(sqlite3.connect(db)) as reader:
            running = reader.execute(
                "SELECT count(*) FROM duetime_runs WHERE state = 'running'"
            ).fetchone()[0]
        assert running == 3
        # One item that fails (a guard the row has moved from) takes back only itself.
        moved = (*ask("j3")[:7], (rows["j3"].next_base or 0) - 1, 0)
        answers = store.claim_many([moved, ask("j0")])
        assert [a[0] for a in answers] == ["lost", "done"]  # type: ignore[index]
    finally:
        store.close()
