"""Misfires: late occurrences after stalls and wall-clock jumps, under each policy."""

from __future__ import annotations

import threading
import tracemalloc
from datetime import datetime, timedelta
from typing import Any

import pytest

from duetime import (
    Cron,
    FakeClock,
    FixedRate,
    JobMissed,
    JobSkipped,
    JobState,
    Misfire,
    Scheduler,
    current_run,
)
from duetime.testing import FAKE_START

from .conftest import WAIT, Recorder


def setup(policy: Misfire, **kw: object) -> tuple[FakeClock, Scheduler, list[datetime], Recorder]:
    clock = FakeClock(start=FAKE_START)
    s = Scheduler(clock=clock, misfire=policy, **kw)  # type: ignore[arg-type]
    rec = Recorder()
    s.subscribe(rec, JobMissed)
    ran: list[datetime] = []

    def job() -> None:
        run = current_run()
        assert run is not None
        ran.append(run.scheduled_time)

    s.schedule(job, FixedRate(10))
    return clock, s, ran, rec


def secs(times: list[datetime]) -> list[float]:
    return [(t - FAKE_START).total_seconds() for t in times]


def test_stalled_runner_run_once_coalesces() -> None:
    clock, s, ran, rec = setup(Misfire.RUN_ONCE)
    clock.advance(35)  # nobody ran the scheduler: occurrences at 10, 20, 30 are due
    assert s.run_pending() == 1
    assert secs(ran) == [10]
    (missed,) = rec.of(JobMissed)
    assert missed.missed == missed.count == 2 and missed.exact and missed.policy == "run_once"
    assert s.jobs()[0].next_run_time == FAKE_START + timedelta(seconds=40)


def test_stalled_runner_skip_drops_all_late_ones() -> None:
    clock, s, ran, rec = setup(Misfire.SKIP)
    clock.advance(35)
    assert s.run_pending() == 0
    assert ran == []
    assert rec.events[0].missed == 3  # type: ignore[attr-defined]
    s.run_for(10)
    assert secs(ran) == [40]


def test_stalled_runner_run_all_oldest_first() -> None:
    clock, s, ran, rec = setup(Misfire.RUN_ALL)
    clock.advance(35)
    assert s.run_pending() == 3
    assert secs(ran) == [10, 20, 30]
    assert rec.events == []


def test_within_grace_is_not_a_misfire() -> None:
    clock, s, _, rec = setup(Misfire.SKIP, grace=5)
    clock.advance(14)  # 4 s late: within grace
    assert s.run_pending() == 1
    assert rec.events == []


def test_per_job_policy_overrides_the_scheduler_default(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    s, clock = scheduler, fake_clock
    ran: list[str] = []
    s.schedule(ran.append, FixedRate(10), args=("all",), misfire=Misfire.RUN_ALL)
    s.schedule(ran.append, FixedRate(10), args=("skip",), misfire=Misfire.SKIP, grace=0)
    clock.advance(25)
    s.run_pending()
    assert ran == ["all", "all"]


def test_one_shot_jobs_run_late_rather_than_never() -> None:
    clock = FakeClock(start=FAKE_START)
    s = Scheduler(clock=clock, misfire=Misfire.SKIP, grace=0)
    ran: list[str] = []
    s.schedule(ran.append, 10, args=("late",))
    clock.advance(3600)
    assert s.run_pending() == 1 and ran == ["late"]


@pytest.mark.parametrize("policy", list(Misfire))
def test_year_long_wall_jump_under_a_minutely_cron_is_prompt_and_bounded(policy: Misfire) -> None:
    clock = FakeClock(start=FAKE_START)
    s = Scheduler(clock=clock, misfire=policy)
    rec = Recorder()
    s.subscribe(rec, JobMissed)
    ran: list[datetime] = []
    job = s.schedule(lambda: ran.append(clock.now()), Cron("* * * * *"))
    s.run_for(120)
    assert len(ran) == 2
    clock.jump_wall(timedelta(days=365))
    tracemalloc.start()
    try:
        count = s.run_pending()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # never a list of a year of minutes
    # One run under each policy: SKIP drops only the missed fires, and the one due at the very
    # instant the jump lands on is on time.
    assert count == 1
    if policy is Misfire.SKIP:
        assert ran[-1] == clock.now()
    (missed,) = rec.of(JobMissed)
    assert missed.missed >= 1000 and not missed.exact
    nrt = job.next_run_time
    assert nrt is not None and timedelta(0) < nrt - clock.now() <= timedelta(minutes=1)
    assert s.stats().live_entries == 1


def test_wall_jump_forward_and_back_with_cron(scheduler: Scheduler, fake_clock: FakeClock) -> None:
    s, clock = scheduler, fake_clock  # 08:00 UTC
    ran: list[datetime] = []
    s.schedule(lambda: ran.append(clock.now()), Cron("0 * * * *", tz="UTC"))
    s.run_for(timedelta(hours=1))  # 09:00 ran
    clock.jump_wall(-timedelta(hours=1))  # back to 08:00: 09:00 must not run a second time
    s.run_for(timedelta(hours=1, minutes=30))
    assert [t.hour for t in ran] == [9]
    s.run_for(timedelta(minutes=30))  # 10:00 wall time
    assert [t.hour for t in ran] == [9, 10]
    clock.jump_wall(timedelta(hours=3, minutes=30))  # 10:00 -> 13:30: 11, 12, 13 coalesce
    assert s.run_pending() == 1
    assert s.stats().missed == 2


def test_paused_recurring_job_resumes_with_misfire_policy() -> None:
    _, s, ran, rec = setup(Misfire.RUN_ONCE)
    job = s.jobs()[0]
    job.pause()
    s.run_for(100)
    job.resume()
    assert job.state is JobState.SCHEDULED
    s.run_pending()
    assert secs(ran) == [10]  # the occurrence held at pause, once
    assert rec.events[0].missed == 9  # type: ignore[attr-defined]


def test_a_catch_up_occurrence_that_waited_for_a_run_in_another_thread_runs_after_it() -> None:
    # No runner: the first catch-up run goes on in one thread while another thread's
    # run_pending() pops the next occurrence, which waits for it; when it ends, the backlog
    # goes on (it was left unqueued for good once).
    clock = FakeClock(FAKE_START)
    s = Scheduler(clock)
    inside, gate = threading.Event(), threading.Event()
    ran: list[float] = []

    def job() -> None:
        ran.append(clock.time())
        if len(ran) == 1:
            inside.set()
            gate.wait(WAIT)

    s.schedule(job, FixedRate(10), misfire=Misfire.RUN_ALL)
    clock.advance(45)  # four fires missed
    first = threading.Thread(target=s.run_pending)
    first.start()
    try:
        assert inside.wait(WAIT)
        assert s.run_pending() == 0  # the 20 s occurrence waits for the 10 s run
    finally:
        gate.set()
        first.join(WAIT)
    assert not first.is_alive()
    s.run_pending()
    start = FAKE_START.timestamp()
    assert [t - start for t in ran] == [45.0] * 4  # 10 s .. 40 s, all caught up now
    clock.advance(10)
    assert s.run_pending() == 1


def test_run_all_after_a_jump_during_a_run_catches_up_from_the_oldest_missed() -> None:
    # The 08:01 run is slow (in another thread); meanwhile the wall clock jumps ten minutes. The
    # oldest occurrence of the backlog (08:02) meets that run still going: under RUN_ALL it
    # waits for it, as the rest does, instead of being skipped as an overlap.
    clock = FakeClock(FAKE_START)  # 08:00
    s = Scheduler(clock)
    ran: list[str] = []
    skipped = Recorder()
    s.subscribe(skipped, JobSkipped)
    inside, gate = threading.Event(), threading.Event()

    def job() -> None:
        run = current_run()
        assert run is not None
        ran.append(run.scheduled_time.strftime("%H:%M"))
        if len(ran) == 1:
            inside.set()
            gate.wait(WAIT)

    s.schedule(job, "* * * * *", misfire=Misfire.RUN_ALL)
    clock.advance(60)
    first = threading.Thread(target=s.run_pending)
    first.start()
    try:
        assert inside.wait(WAIT)
        clock.jump_wall(600)  # 08:11: 08:02 .. 08:10 are missed, 08:11 is on time
        assert s.run_pending() == 0  # 08:02 waits for the 08:01 run
    finally:
        gate.set()
        first.join(WAIT)
    assert not first.is_alive()
    assert s.run_pending() == 10
    assert ran == [f"08:{m:02}" for m in range(1, 12)]
    assert skipped.events == []


def test_a_run_all_catch_up_ends_with_its_backlog_and_a_later_jump_is_bounded_again() -> None:
    # (A catch-up of one late fire left the job "catching up": a year-long jump an hour later
    # then ran all 525 600 missed fires, never measured against the bound.)
    clock = FakeClock(start=FAKE_START + timedelta(seconds=30))
    s = Scheduler(clock=clock)
    rec = Recorder()
    s.subscribe(rec, JobMissed)
    s.schedule(print, "* * * * *", misfire=Misfire.RUN_ALL)
    clock.advance(60)  # the 08:01 fire is 30 s late: a backlog of one
    assert s.run_pending() == 1
    clock.jump_wall(timedelta(days=365))
    assert s.run_pending() == 1
    (missed,) = rec.of(JobMissed)
    assert missed.missed >= 1000 and not missed.exact


@pytest.mark.parametrize(
    ("when", "grace", "advance", "ran_at", "dropped"),
    [
        # 08:01 is 90 s late (missed), 08:02 only 30 s (on time): it runs, at once
        ("* * * * *", 60, 150, [150.0], 1),
        # fires at 1..5 s; at 5.5 s only the one due at 5 is within the 1 s grace
        (FixedRate(1), 1, 5.5, [5.5], 4),
    ],
)
def test_skip_drops_only_the_missed_occurrences(
    when: Any, grace: float, advance: float, ran_at: list[float], dropped: int
) -> None:
    # (SKIP dropped every due occurrence once an older one had misfired, the one due 30 s ago
    # within a grace of 60 included; DESIGN: "drop the missed ones".)
    clock = FakeClock(start=FAKE_START)
    s = Scheduler(clock=clock, misfire=Misfire.SKIP, grace=grace)
    rec = Recorder()
    s.subscribe(rec, JobMissed)
    ran: list[float] = []
    s.schedule(lambda: ran.append(clock.monotonic()), when)
    clock.advance(advance)
    s.run_pending()
    assert ran == ran_at
    assert [e.missed for e in rec.of(JobMissed)] == [dropped]
