from __future__ import annotations

import functools
import logging
import random
import re
import sys
import threading
import typing
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from duetime import (
    After,
    At,
    ConflictingIdError,
    Cron,
    FakeClock,
    FixedBackoff,
    FixedDelay,
    FixedRate,
    InvalidArgument,
    Job,
    JobAdded,
    JobCancelled,
    JobFailed,
    JobLookupError,
    JobRescheduled,
    JobStarted,
    JobState,
    JobSucceeded,
    Misfire,
    Overlap,
    Run,
    ScheduleOptions,
    Scheduler,
    SchedulerShutdownError,
    SystemClock,
    current_run,
)
from duetime.testing import FAKE_START

from .conftest import WAIT, Recorder

T0 = FAKE_START


def at(**kw: float) -> datetime:
    return T0 + timedelta(**kw)


def test_when_forms(scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]) -> None:
    scheduler.schedule(calls.append, at(minutes=5), args=("datetime",))
    scheduler.schedule(calls.append, 60, args=("int",))
    scheduler.schedule(calls.append, 90.5, args=("float",))
    scheduler.schedule(calls.append, timedelta(minutes=2), args=("timedelta",))
    scheduler.schedule(calls.append, At(at(minutes=3)), args=("At",))
    scheduler.schedule(calls.append, After(30), args=("After",))
    scheduler.schedule(calls.append, "4 8 * * *", args=("cron",))
    scheduler.run_for(timedelta(minutes=10))
    assert calls == ["After", "int", "float", "timedelta", "At", "cron", "datetime"]


def test_shorthand_types(scheduler: Scheduler) -> None:
    assert isinstance(scheduler.schedule(print, 5).trigger, After)
    assert isinstance(scheduler.schedule(print, 5.0).trigger, After)
    assert scheduler.schedule(print, 5.0).trigger == After(5.0)
    assert isinstance(scheduler.schedule(print, timedelta(seconds=1)).trigger, After)
    assert isinstance(scheduler.schedule(print, at(hours=1)).trigger, At)


#: A valid value for each keyword of schedule(): ScheduleOptions must name exactly these.
OPTION_VALUES: dict[str, Any] = {
    "args": (1,),
    "kwargs": {"sep": "-"},
    "id": "opt",
    "name": "named",
    "priority": 3,
    "retry": FixedBackoff([1]),
    "misfire": Misfire.SKIP,
    "grace": 2,
    "overlap": Overlap.QUEUE,
    "jitter": 1,
    "limiter": None,
    "executor": None,
    "replace": True,
    "paused": True,
}


def test_schedule_options_are_the_keywords_schedule_takes(scheduler: Scheduler) -> None:
    # ScheduleOptions is what type checkers see; schedule() must take each of its keywords
    # and nothing else.
    assert set(OPTION_VALUES) == ScheduleOptions.__optional_keys__
    assert not ScheduleOptions.__required_keys__
    for keyword, value in OPTION_VALUES.items():
        job = scheduler.schedule(print, 5, **{keyword: value})
        assert job in scheduler, keyword
    job = scheduler.schedule(print, 5, **OPTION_VALUES)
    assert job.id == "opt" and job.name == "named" and job.state is JobState.PAUSED
    with pytest.raises(TypeError, match="unexpected keyword argument 'priorty'"):
        scheduler.schedule(print, 5, priorty=1)  # type: ignore[call-arg]


def test_replace_without_an_id_says_it_replaces_nothing(
    scheduler: Scheduler, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler.schedule(print, 5, replace=True)
    scheduler.schedule(print, 5, replace=True)
    assert len(scheduler) == 2
    assert caplog.text.count("replace=True without id= replaces nothing") == 2


def test_schedule_annotations_resolve_at_runtime() -> None:
    # Tools that read annotations at runtime (typeguard, sphinx-autodoc-typehints) resolve them.
    if sys.version_info < (3, 11):
        pytest.importorskip("typing_extensions")
    hints = typing.get_type_hints(Scheduler.schedule)
    assert hints["return"] is Job and "options" in hints


@pytest.mark.parametrize("options", [{}, {"name": "n"}])
def test_listeners_never_run_with_the_lock_held(
    scheduler: Scheduler, options: dict[str, Any]
) -> None:
    # A keyword-less schedule() falls back to the general path when someone listens; the
    # listener must still run after the lock is released, as on every other path.
    # If the lock were held, another thread could not list the jobs until the listener ended.
    listed: list[bool] = []

    def listener(event: object) -> None:
        other = threading.Thread(target=scheduler.jobs)
        other.start()
        other.join(WAIT)
        listed.append(not other.is_alive())

    scheduler.subscribe(listener)
    scheduler.schedule(print, 5, **options)
    assert listed == [True]


def test_job_handles_come_only_from_schedule() -> None:
    with pytest.raises(TypeError, match=r"made by Scheduler.schedule\(\)"):
        Job()


@pytest.mark.parametrize("when", [5, 2.5])
def test_a_plain_delay_and_one_with_default_options_make_the_same_job(
    scheduler: Scheduler, when: float
) -> None:
    def view(job: Job) -> tuple[Any, ...]:
        return (
            job.func, job.args, job.kwargs, job.priority, job.state, job.trigger, job.name,
            job.next_run_time, job.attempt, job.runs, job.failures, job.last_error,
        )  # fmt: skip

    plain = scheduler.schedule(print, when)  # the inlined path
    general = scheduler.schedule(print, when, args=(), kwargs={}, priority=0, paused=False)
    assert view(plain) == view(general)
    assert scheduler.jobs() == [plain, general] and len(scheduler) == 2
    assert scheduler.run_for(when) == 2
    assert view(plain) == view(general) and plain.state is JobState.COMPLETED


def test_a_listener_subscribed_by_a_running_job_hears_its_outcome(
    scheduler: Scheduler,
) -> None:
    # The stepping loop settles a plain success without events only while nobody listens;
    # it decides when it settles, after the job returned.
    heard = Recorder()

    def subscribes() -> str:
        scheduler.subscribe(heard)
        return "done"

    job = scheduler.schedule(subscribes, 1)
    scheduler.schedule(print, 2)
    assert scheduler.run_for(2) == 2
    succeeded = heard.of(JobSucceeded)
    assert [e.job_id for e in succeeded] == [job.id, succeeded[1].job_id]
    assert succeeded[0].result == "done"
    assert job.state is JobState.COMPLETED and job not in scheduler


def test_default_ids_are_short_unique_and_listed(scheduler: Scheduler) -> None:
    ids = {scheduler.schedule(print, 1).id for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) < 20 for i in ids)
    assert all(i in scheduler for i in ids)
    other = Scheduler(clock=FakeClock())
    assert not ids & {other.schedule(print, 1).id for _ in range(100)}


def test_explicit_id_conflict_and_replace(
    scheduler: Scheduler, calls: list[Any], events: Recorder
) -> None:
    job = scheduler.schedule(calls.append, 10, args=("old",), id="x")
    with pytest.raises(ConflictingIdError, match="'x' is already scheduled"):
        scheduler.schedule(calls.append, 5, id="x")
    replaced = scheduler.schedule(calls.append, 20, args=("new",), id="x", replace=True)
    assert replaced is job
    assert len(scheduler) == 1
    scheduler.run_for(60)
    assert calls == ["new"]
    assert [type(e) for e in events.events] == [JobAdded, JobRescheduled, JobStarted, JobSucceeded]


def test_priority_then_fifo_at_the_same_instant(scheduler: Scheduler, calls: list[Any]) -> None:
    when = at(minutes=1)
    scheduler.schedule(calls.append, when, args=("b",), priority=5)
    scheduler.schedule(calls.append, when, args=("c",), priority=5)
    scheduler.schedule(calls.append, when, args=("a",), priority=-1)
    scheduler.schedule(calls.append, 60, args=("mono",), priority=5)  # same instant, other queue
    scheduler.run_for(60)
    assert calls == ["a", "b", "c", "mono"]


def test_cancel(scheduler: Scheduler, calls: list[Any], events: Recorder) -> None:
    a = scheduler.schedule(calls.append, 10, args=("a",), id="a")
    scheduler.schedule(calls.append, 10, args=("b",), id="b")
    c = scheduler.schedule(calls.append, 10, args=("c",))
    assert scheduler.cancel("a") is True
    assert scheduler.cancel(a) is False
    assert c.cancel() is True
    assert scheduler.cancel("nope") is False
    assert a.state is JobState.CANCELLED and a not in scheduler and "a" not in scheduler
    scheduler.run_for(20)
    assert calls == ["b"]
    assert [e.job_id for e in events.of(JobCancelled)] == ["a", c.id]


def test_reschedule_same_id_old_occurrence_never_fires(
    scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]
) -> None:
    job = scheduler.schedule(lambda: calls.append(fake_clock.now()), 10, id="r")
    assert scheduler.reschedule("r", at(seconds=30)) is job
    job.reschedule(5)
    assert job.id == "r" and job.next_run_time == at(seconds=5)
    scheduler.run_for(60)
    assert calls == [at(seconds=5)]
    with pytest.raises(JobLookupError, match="no job with id 'r'"):
        scheduler.reschedule("r", 1)


def test_pause_and_resume(scheduler: Scheduler, calls: list[Any], events: Recorder) -> None:
    job = scheduler.schedule(calls.append, 10, args=("x",))
    job.pause()
    job.pause()  # no-op
    assert job.state is JobState.PAUSED and job.next_run_time is None
    scheduler.run_for(20)
    assert calls == []
    job.resume()
    job.resume()  # no-op
    state: JobState = job.state
    assert state is JobState.SCHEDULED
    scheduler.run_pending()  # its time (10 s) has passed: it runs late rather than never
    assert calls == ["x"]
    held = scheduler.schedule(calls.append, 5, args=("y",), paused=True)
    scheduler.run_for(10)
    assert calls == ["x"] and held.state is JobState.PAUSED
    assert len(events.of(JobAdded)) == 2


def test_get_jobs_len_contains_next_run_time(scheduler: Scheduler) -> None:
    assert scheduler.next_run_time() is None and scheduler.jobs() == []
    late = scheduler.schedule(print, 300, id="late")
    early = scheduler.schedule(print, at(minutes=1), id="early")
    paused = scheduler.schedule(print, 10, id="paused", paused=True)
    assert scheduler.get("late") is late and scheduler.get("zzz") is None
    assert scheduler.jobs() == [early, late, paused]
    assert len(scheduler) == 3 and "early" in scheduler and 42 not in scheduler
    assert scheduler.next_run_time() == at(minutes=1)
    assert late.next_run_time == at(minutes=5)
    assert list(scheduler) == [early, late, paused]


def test_next_run_time_is_in_the_scheduler_zone(fake_clock: FakeClock) -> None:
    s = Scheduler(clock=fake_clock, tz="Europe/Berlin")
    job = s.schedule(print, 60)
    nrt = job.next_run_time
    assert nrt is not None and nrt.utcoffset() == timedelta(hours=1)
    assert nrt == at(minutes=1)


def test_stepping_by_next_run_time_reaches_a_job_due_between_microseconds(
    scheduler: Scheduler,
) -> None:
    # A datetime cannot show the 500 ns: a truncated next_run_time handed back to run_until
    # stopped short of the job, and a hand-stepping loop never got past it.
    ran: list[int] = []
    job = scheduler.schedule(ran.append, 0.0000015, args=(1,))
    scheduler.schedule(ran.append, 2.0000000005, args=(2,))
    nrt = job.next_run_time
    assert nrt is not None and nrt == scheduler.next_run_time()
    assert nrt == at(microseconds=2)
    for _ in range(3):
        step = scheduler.next_run_time()
        if step is None:
            break
        scheduler.run_until(step)
    assert ran == [1, 2] and scheduler.next_run_time() is None


def test_current_run(scheduler: Scheduler, fake_clock: FakeClock) -> None:
    seen: list[Run | None] = []
    job = scheduler.schedule(lambda: seen.append(current_run()), at(minutes=1))
    assert current_run() is None
    scheduler.run_for(120)
    run = seen[0]
    assert run is not None
    assert run.job is job and run.attempt == 1
    assert run.scheduled_time == at(minutes=1)
    assert "attempt=1" in repr(run)


def test_a_running_anonymous_job_is_live_on_the_stepping_fast_path(scheduler: Scheduler) -> None:
    # run_until runs plain one-shot delays without indexing them; while one runs it must still
    # look like any running job: listed, counted, found, RUNNING, with its current run.
    seen: list[Any] = []

    def probe() -> None:
        run = current_run()
        assert run is not None
        seen.append(
            (
                run.job in scheduler.jobs(),
                len(scheduler),
                run.job in scheduler,
                run.job.state,
                run.job.attempt,
            )
        )

    job = scheduler.schedule(probe, 30)
    other = scheduler.schedule(print, 60)
    assert job.attempt == 0
    scheduler.run_until(scheduler.clock.time() + 30)
    assert seen == [(True, 2, True, JobState.RUNNING, 1)]
    assert job.state is JobState.COMPLETED and job.runs == 1 and job.attempt == 1
    assert job not in scheduler and scheduler.jobs() == [other] and len(scheduler) == 1


@pytest.mark.parametrize("action", ["cancel", "read id", "read trigger", "reschedule", "pause"])
def test_fast_path_job_changing_itself_while_running(scheduler: Scheduler, action: str) -> None:
    def body() -> None:
        run = current_run()
        assert run is not None
        if action == "cancel":
            run.job.cancel()
        elif action == "read id":
            assert run.job.id in scheduler
        elif action == "read trigger":
            assert run.job.trigger == After(1)  # builds the After: no longer a shorthand
        elif action == "reschedule":
            run.job.reschedule(5)
        else:
            run.job.pause()

    job = scheduler.schedule(body, 1)
    assert scheduler.run_for(2) == 1
    expected = {
        "cancel": JobState.CANCELLED,
        "read id": JobState.COMPLETED,
        "read trigger": JobState.COMPLETED,
        "reschedule": JobState.SCHEDULED,
        "pause": JobState.COMPLETED,  # a paused one-shot with nothing left ends
    }[action]
    assert job.state is expected
    live = expected is JobState.SCHEDULED
    assert (job in scheduler) is live and len(scheduler) == int(live)
    assert scheduler.jobs() == ([job] if live else [])


def test_a_job_stepping_time_itself_stays_listed(scheduler: Scheduler) -> None:
    seen: list[tuple[bool, int]] = []

    def outer() -> None:
        run = current_run()
        assert run is not None
        scheduler.schedule(print, 0)
        scheduler.run_for(0)  # a nested stepping loop runs the inner job
        seen.append((run.job in scheduler.jobs(), len(scheduler)))

    scheduler.schedule(outer, 1)
    assert scheduler.run_for(1) == 1
    assert seen == [(True, 1)]
    assert len(scheduler) == 0 and scheduler.jobs() == []


def test_run_until_sets_clock_to_each_due_time(scheduler: Scheduler, fake_clock: FakeClock) -> None:
    seen: list[tuple[str, datetime]] = []
    for minutes in (3, 1, 2):
        scheduler.schedule(lambda m=minutes: seen.append((f"m{m}", fake_clock.now())), minutes * 60)
    n = scheduler.run_until(at(minutes=2))  # inclusive
    assert n == 2
    assert seen == [("m1", at(minutes=1)), ("m2", at(minutes=2))]
    assert fake_clock.now() == at(minutes=2)
    assert scheduler.run_until(at(minutes=1)) == 0  # the clock never moves back
    assert fake_clock.now() == at(minutes=2)


def test_run_until_honours_jobs_scheduled_by_jobs(
    scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]
) -> None:
    def chain(n: int) -> None:
        calls.append((n, fake_clock.now()))
        if n < 5:
            scheduler.schedule(chain, 10, args=(n + 1,))

    scheduler.schedule(chain, 10, args=(1,))
    assert scheduler.run_until(at(seconds=40)) == 4
    assert calls == [(i, at(seconds=10 * i)) for i in range(1, 5)]
    assert len(scheduler) == 1  # the fifth is due at 50 s, outside the range


def test_run_until_accepts_epoch_seconds_and_validates() -> None:
    clock = FakeClock(start=100.0)
    s = Scheduler(clock=clock)
    s.schedule(print, 5)
    assert s.run_until(200.0) == 1
    assert clock.time() == 200.0
    with pytest.raises(InvalidArgument, match="when must be a finite"):
        s.run_until(float("nan"))
    with pytest.raises(InvalidArgument, match="timezone-aware"):
        s.run_until(datetime(2030, 1, 1))
    with pytest.raises(TypeError, match="when must be"):
        s.run_until("tomorrow")  # type: ignore[arg-type]
    assert clock.time() == 200.0


def test_run_until_an_epoch_float_reaches_a_job_due_at_that_instant(
    scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]
) -> None:
    # A float of today's epoch seconds holds no nanoseconds, and datetime.timestamp() can land
    # a step away from its microsecond: read to the microsecond, it reaches the job due then.
    start = fake_clock.now()
    dues = [
        start + timedelta(seconds=1 + k, microseconds=(k * 7919) % 1_000_000) for k in range(50)
    ]
    for k, due in enumerate(dues):
        scheduler.schedule(calls.append, At(due), args=(k,))
    for k, due in enumerate(dues):
        assert scheduler.run_until(due.timestamp()) == 1, due
        assert calls[-1] == k and fake_clock.now() == due
    # A small float (a simulation's clock from 0) keeps its nanoseconds.
    clock = FakeClock(start=0.25)
    assert clock.time_ns() == 250_000_000
    s = Scheduler(clock=clock)
    s.schedule(print, 1e-9)
    assert s.run_until(0.250000001) == 1 and clock.time_ns() == 250_000_001


def test_jobs_lists_jobs_due_together_in_the_order_they_run(
    scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]
) -> None:
    # (Ties came in the store's index order: jobs with an id first.)
    due = fake_clock.now() + timedelta(seconds=10)
    scheduler.schedule(calls.append, 10, args=("anon-first",))
    scheduler.schedule(calls.append, 10, args=("named-second",), id="named")
    scheduler.schedule(calls.append, At(due), args=("wall-third",))
    scheduler.schedule(calls.append, 10, args=("anon-fourth",))
    scheduler.schedule(calls.append, 10, args=("urgent",), priority=-1)
    listed = [job.args[0] for job in scheduler.jobs()]
    scheduler.run_for(10)
    assert listed == calls == ["urgent", "anon-first", "named-second", "wall-third", "anon-fourth"]


def test_run_until_tells_listeners_of_an_outcome_before_the_clock_moves_on(
    scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]
) -> None:
    # (The outcome was emitted after the clock had jumped to the next due time: work a
    # listener scheduled within the range was left behind, or ran late.)
    start = fake_clock.now()
    seen: list[tuple[str, timedelta]] = []

    def listener(event: Any) -> None:
        if type(event).__name__ == "JobSucceeded" and event.job_id == "first":
            seen.append((event.job_id, fake_clock.now() - start))
            scheduler.schedule(calls.append, 5, args=("followup",), id="followup")

    scheduler.subscribe(listener)
    scheduler.schedule(calls.append, 5, args=("first",), id="first")
    scheduler.schedule(calls.append, 3600, args=("later",), id="later")
    times: list[timedelta] = []

    def started(event: Any) -> None:
        if type(event).__name__ == "JobStarted" and event.job_id == "followup":
            times.append(fake_clock.now() - start)

    scheduler.subscribe(started)
    assert scheduler.run_for(100) == 2
    assert seen == [("first", timedelta(seconds=5))]
    assert calls == ["first", "followup"] and times == [timedelta(seconds=10)]


def test_run_for(scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]) -> None:
    scheduler.schedule(calls.append, FixedRate(seconds=10), args=("tick",))
    assert scheduler.run_for(timedelta(seconds=35)) == 3
    assert fake_clock.now() == at(seconds=35)
    with pytest.raises(InvalidArgument, match="seconds must not be negative"):
        scheduler.run_for(-1)


def test_step(scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]) -> None:
    assert scheduler.step() is None
    a = scheduler.schedule(calls.append, 30, args=("a",))
    scheduler.schedule(calls.append, 10, args=("b",))
    run = scheduler.step()
    assert run is not None and run.job.args == ("b",)
    assert fake_clock.now() == at(seconds=10)
    run = scheduler.step()
    assert run is not None and run.job is a and run.scheduled_time == at(seconds=30)
    assert calls == ["b", "a"] and scheduler.step() is None


def test_step_runs_overdue_work_without_moving_the_clock(
    scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]
) -> None:
    scheduler.schedule(calls.append, 10, args=("x",))
    fake_clock.advance(100)
    assert scheduler.step() is not None
    assert fake_clock.now() == at(seconds=100)


def test_run_pending_runs_what_is_due_in_order(
    scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]
) -> None:
    scheduler.schedule(calls.append, 20, args=("b",))
    scheduler.schedule(calls.append, 10, args=("a",))
    scheduler.schedule(calls.append, 30, args=("c",))
    fake_clock.advance(25)
    assert scheduler.run_pending() == 2
    assert calls == ["a", "b"]
    assert scheduler.run_pending() == 0


def test_system_clock_refuses_stepping() -> None:
    s = Scheduler(clock=SystemClock())
    for method, args in [("step", ()), ("run_until", (0.0,)), ("run_for", (1,))]:
        with pytest.raises(TypeError, match=rf"{method}\(\) needs a steppable clock.*SystemClock"):
            getattr(s, method)(*args)
    s.schedule(print, 3600)
    assert s.run_pending() == 0  # works with any clock


@pytest.mark.memory_only(
    "with a durable store every delay is on the wall clock (docs/durability.md)"
)
def test_wall_and_monotonic_timebases_under_wall_jumps(
    scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]
) -> None:
    scheduler.schedule(calls.append, at(hours=1), args=("wall",))
    scheduler.schedule(calls.append, 3600, args=("mono",))
    fake_clock.jump_wall(7200)  # NTP step forward: the 09:00 wall job is now overdue
    assert scheduler.run_pending() == 1
    assert calls == ["wall"]
    fake_clock.jump_wall(-7200)
    scheduler.schedule(calls.append, at(minutes=30), args=("wall2",))
    fake_clock.jump_wall(-1800)  # step back: wall2 is 1 h away, mono still 1 h of elapsed time
    scheduler.run_for(3599)
    assert calls == ["wall"]
    scheduler.run_for(1)
    assert calls == ["wall", "mono", "wall2"]


def test_failures_are_recorded_and_do_not_stop_the_loop(
    scheduler: Scheduler, calls: list[Any], events: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    def boom() -> None:
        raise RuntimeError("kaput")

    bad = scheduler.schedule(boom, 1)
    scheduler.schedule(calls.append, 2, args=("after",))
    with caplog.at_level(logging.ERROR, logger="duetime"):
        assert scheduler.run_for(5) == 2
    assert calls == ["after"]
    assert bad.failures == 1 and bad.runs == 1
    assert isinstance(bad.last_error, RuntimeError)
    assert bad.state is JobState.FAILED
    failed = events.of(JobFailed)
    assert len(failed) == 1 and str(failed[0].error) == "kaput" and failed[0].retry_at is None
    assert "kaput" in caplog.text


def test_listener_filtering_unsubscribe_and_errors(
    scheduler: Scheduler, caplog: pytest.LogCaptureFixture
) -> None:
    added: list[Any] = []
    everything: list[Any] = []
    unsubscribe = scheduler.subscribe(added.append, JobAdded)
    scheduler.subscribe(everything.append)

    def broken(event: object) -> None:
        raise ValueError("listener bug")

    scheduler.subscribe(broken)
    with caplog.at_level(logging.ERROR, logger="duetime"):
        job = scheduler.schedule(print, 1)
        scheduler.cancel(job)
    assert [type(e) for e in added] == [JobAdded]
    assert [type(e) for e in everything] == [JobAdded, JobCancelled]
    assert "listener bug" in caplog.text
    unsubscribe()
    scheduler.schedule(print, 1)
    assert len(added) == 1
    with pytest.raises(TypeError, match="listener must be callable"):
        scheduler.subscribe(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="event_types must be Event subclasses"):
        scheduler.subscribe(print, int)  # type: ignore[arg-type]


def test_event_contents(scheduler: Scheduler, events: Recorder) -> None:
    job = scheduler.schedule(lambda: 42, at(minutes=1), id="e")
    scheduler.run_for(60)
    added, started, succeeded = events.events
    assert isinstance(added, JobAdded) and added.next_run_time == at(minutes=1)
    assert isinstance(started, JobStarted) and started.scheduled_time == at(minutes=1)
    assert started.time == at(minutes=1) and started.attempt == 1
    assert isinstance(succeeded, JobSucceeded) and succeeded.result == 42
    assert succeeded.job_id == job.id == "e"
    assert succeeded.time == succeeded.started_at == at(minutes=1)


@pytest.mark.memory_only(
    "a durable store names every job as it saves it, so the next id is not known"
)
def test_a_generated_id_never_takes_an_id_a_job_was_given(scheduler: Scheduler) -> None:
    first = scheduler.schedule(print, 5)
    prefix, n = first.id.rsplit("-", 1)
    given = scheduler.schedule(print, 5, id=f"{prefix}-{int(n, 16) + 1:x}")  # the next one
    anonymous = scheduler.schedule(print, 5)
    assert anonymous.id not in (first.id, given.id)
    assert scheduler.get(given.id) is given and scheduler.get(anonymous.id) is anonymous
    assert len(scheduler) == 3


def test_each_trigger_at_one_instant_has_a_key_of_its_own(scheduler: Scheduler) -> None:
    # The clock does not move: the second trigger() takes the next microsecond's key, in
    # memory as on a durable store (a job using the key to stay idempotent runs both).
    keys: list[str] = []

    def record() -> None:
        run = current_run()
        assert run is not None
        keys.append(run.key)

    scheduler.schedule(record, FixedRate(3600), id="t")
    scheduler.trigger("t")
    scheduler.trigger("t")
    clock: Any = scheduler.clock
    base = "t@trigger-" + clock.now().astimezone(timezone.utc).isoformat()
    assert keys == [base, base.replace("+00:00", ".000001+00:00")]
    # The wall clock stepped back an hour: the key is now's, not after the last one's.
    clock.jump_wall(-3600)
    scheduler.trigger("t")
    assert keys[2] == "t@trigger-" + clock.now().astimezone(timezone.utc).isoformat()


def test_every_state_change_goes_to_logging_at_debug_as_to_listeners(
    scheduler: Scheduler, caplog: pytest.LogCaptureFixture
) -> None:
    # DESIGN: every state change emits a typed event to subscribed listeners and to logging.
    # With the logger at DEBUG, and nobody listening, the same events are logged, one line each.
    def changes() -> None:
        job = scheduler.schedule(lambda: 42, at(minutes=1), id="e")
        job.pause()
        job.resume()
        job.reschedule(at(minutes=2))
        scheduler.run_for(120)
        scheduler.schedule(lambda: None, at(minutes=5), id="gone").cancel()

    with caplog.at_level(logging.DEBUG, logger="duetime"):
        changes()
    logged = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.DEBUG and r.getMessage().startswith("Job")
    ]
    names = [line.split()[0] for line in logged]
    expected = [
        "JobAdded",
        "JobPaused",
        "JobResumed",
        "JobRescheduled",
        "JobStarted",
        "JobSucceeded",
        "JobAdded",
        "JobCancelled",
    ]
    assert names == expected
    succeeded = logged[names.index("JobSucceeded")]
    assert succeeded.startswith(f"JobSucceeded job_id='e' time={at(minutes=2).isoformat()} ")
    assert succeeded.endswith(" attempt=1 result=42")


def test_fixed_rate_is_exact_and_does_not_drift(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    times: list[int] = []
    scheduler.schedule(lambda: times.append(fake_clock.monotonic_ns()), FixedRate(seconds=0.1))
    scheduler.run_for(100)
    assert len(times) == 1000
    assert times == [k * 100_000_000 for k in range(1, 1001)]


def test_fixed_rate_start_anchor(scheduler: Scheduler, calls: list[Any]) -> None:
    job = scheduler.schedule(calls.append, FixedRate(60, start=at(seconds=-150)))
    assert job.next_run_time == at(seconds=30)  # first grid point not in the past
    job2 = scheduler.schedule(calls.append, FixedRate(60, start=at(seconds=10)))
    assert job2.next_run_time == at(seconds=10)


def test_fixed_delay_measures_from_the_end_of_each_run(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    starts: list[float] = []

    def slow() -> None:
        starts.append(fake_clock.monotonic())
        fake_clock.advance(5)  # the job takes 5 s

    scheduler.schedule(slow, FixedDelay(10, initial_delay=1))
    scheduler.run_for(40)
    assert starts == [1.0, 16.0, 31.0]


def test_decorator_form(scheduler: Scheduler, calls: list[Any]) -> None:
    @scheduler.scheduled(FixedRate(30), name="tick")
    def tick() -> None:
        calls.append("tick")

    assert tick.__name__ == "tick"
    scheduler.run_for(60)
    assert calls == ["tick", "tick"]
    assert scheduler.jobs()[0].name == "tick"


def test_decorator_takes_when_as_a_keyword(scheduler: Scheduler, calls: list[Any]) -> None:
    # (It said "missing 1 required positional argument: 'when'" though when was passed.)
    @scheduler.scheduled(when=FixedRate(30))
    def tick() -> None:
        calls.append("tick")

    scheduler.run_for(30)
    assert calls == ["tick"]
    with pytest.raises(TypeError, match=r"scheduled\(\) needs when: @s.scheduled\(when\)"):
        scheduler.scheduled(name="x")


def test_trigger_runs_out_of_band(scheduler: Scheduler, calls: list[Any]) -> None:
    job = scheduler.schedule(calls.append, 60, args=("x",))
    scheduler.trigger(job)
    assert calls == ["x"]
    assert job.next_run_time == at(minutes=1)  # the schedule is untouched
    scheduler.run_for(60)
    assert calls == ["x", "x"] and job.runs == 2


def test_job_names_and_repr(scheduler: Scheduler) -> None:
    def send_email() -> None: ...

    job = scheduler.schedule(send_email, 1)
    assert job.name.endswith("send_email")
    assert "send_email" in repr(job) and "scheduled" in repr(job)
    assert scheduler.schedule(print, 1, name="hello").name == "hello"
    assert "Scheduler jobs=2" in repr(scheduler)


def test_kwargs_are_passed(scheduler: Scheduler, calls: list[Any]) -> None:
    scheduler.schedule(lambda **kw: calls.append(kw), 1, kwargs={"a": 1})
    scheduler.schedule(lambda *a: calls.append(a), 1, args=[1, 2])
    scheduler.run_for(1)
    assert calls == [{"a": 1}, (1, 2)]


class SchedulerModel(RuleBasedStateMachine):
    """The Scheduler against a reference model: a dict of id -> (due, priority, seq, paused)."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.s = Scheduler(clock=self.clock, rng=random.Random(0))
        self.model: dict[str, tuple[int, int, int]] = {}
        self.paused: dict[str, tuple[int, int, int]] = {}
        self.seq = 0
        self.ran: list[str] = []
        self.expected: list[str] = []
        self.next_id = 0
        # Every job's handle. Anonymous ones ("a<n>") are reached through it, named ones
        # ("j<n>") through their id, as users do.
        self.handles: dict[str, Job] = {}

    def _now(self) -> int:
        return self.clock.monotonic_ns()

    def _ref(self, jid: str) -> Job | str:
        return self.handles[jid] if jid.startswith("a") else jid

    # The extremes exercise the packed queue entries' priority field.
    @rule(delay=st.integers(0, 20), priority=st.sampled_from([-(2**31), -1, 0, 1, 2**31 - 1]))
    def schedule(self, delay: int, priority: int) -> None:
        jid = f"j{self.next_id}"
        self.next_id += 1
        job = self.s.schedule(self.ran.append, delay, args=(jid,), id=jid, priority=priority)
        self.handles[jid] = job
        self.model[jid] = (self._now() + delay * 10**9, priority, self.seq)
        self.seq += 1

    @rule(delay=st.integers(0, 20))
    def schedule_plain(self, delay: int) -> None:
        # No keywords at all: the path schedule() queues inline.
        jid = f"a{self.next_id}"
        self.next_id += 1
        self.handles[jid] = self.s.schedule(functools.partial(self.ran.append, jid), delay)
        self.model[jid] = (self._now() + delay * 10**9, 0, self.seq)
        self.seq += 1

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        ids = sorted(self.model) + sorted(self.paused) + ["missing"]
        jid = data.draw(st.sampled_from(ids))
        assert self.s.cancel(jid if jid == "missing" else self._ref(jid)) == (jid != "missing")
        self.model.pop(jid, None)
        self.paused.pop(jid, None)

    @staticmethod
    def _pick(data: st.DataObject, pool: dict[str, Any]) -> str:
        return data.draw(st.sampled_from(sorted(pool)))

    @precondition(lambda self: self.model)
    @rule(data=st.data(), delay=st.integers(0, 20))
    def reschedule(self, data: st.DataObject, delay: int) -> None:
        jid = self._pick(data, self.model)
        self.s.reschedule(self._ref(jid), delay)
        _, priority, _ = self.model[jid]
        self.model[jid] = (self._now() + delay * 10**9, priority, self.seq)
        self.seq += 1

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def pause(self, data: st.DataObject) -> None:
        jid = self._pick(data, self.model)
        self.s.pause(self._ref(jid))
        self.paused[jid] = self.model.pop(jid)

    @precondition(lambda self: self.paused)
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        jid = self._pick(data, self.paused)
        self.s.resume(self._ref(jid))
        due, priority, _ = self.paused.pop(jid)
        self.model[jid] = (due, priority, self.seq)  # re-queued: behind its peers
        self.seq += 1

    @rule()
    def step(self) -> None:
        if not self.model:
            assert self.s.step() is None
            return
        jid = min(self.model, key=lambda k: self.model[k])
        due = self.model.pop(jid)[0]
        self.expected.append(jid)
        before = self._now()
        run = self.s.step()
        assert run is not None and run.job is self.handles[jid]
        assert self._now() == max(due, before)  # the clock jumps to the due time, never back

    @rule(seconds=st.integers(0, 15))
    def run_for(self, seconds: int) -> None:
        limit = self._now() + seconds * 10**9
        due_now = sorted((v, k) for k, v in self.model.items() if v[0] <= limit)
        for _, jid in due_now:
            del self.model[jid]
            self.expected.append(jid)
        assert self.s.run_for(seconds) == len(due_now)

    @invariant()
    def agrees(self) -> None:
        assert self.ran == self.expected
        assert len(self.s) == len(self.model) + len(self.paused)
        for jid in self.paused:
            job = self.handles[jid]
            assert job in self.s and job.state is JobState.PAUSED
            if jid.startswith("j"):
                assert self.s.get(jid) is job


SchedulerModel.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
TestSchedulerModel = SchedulerModel.TestCase


def noop() -> None:
    pass


class AnonymousIndexMachine(RuleBasedStateMachine):
    """Anonymous jobs are indexed lazily (counted while queued, indexed once loose, re-keyed
    when their id is first read): len(), jobs(), `in` and lookups must agree at every step."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.s = Scheduler(clock=self.clock)
        self.handles: list[Any] = []

    def _pick(self, data: st.DataObject) -> Any:
        return data.draw(st.sampled_from(self.handles)) if self.handles else None

    @rule(delay=st.integers(0, 5), paused=st.booleans(), rate=st.booleans())
    def schedule(self, delay: int, paused: bool, rate: bool) -> None:
        when: Any = FixedRate(delay + 1) if rate else delay
        # paused= only when paused: a call without keywords takes schedule()'s inline path.
        options: dict[str, Any] = {"paused": True} if paused else {}
        self.handles.append(self.s.schedule(noop, when, **options))

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        job = self._pick(data)
        if job is not None:
            job.cancel()

    @rule(data=st.data())
    def pause_or_resume(self, data: st.DataObject) -> None:
        job = self._pick(data)
        if job is not None and job in self.s:
            if job.state is JobState.PAUSED:
                job.resume()
            else:
                job.pause()

    @rule(data=st.data())
    def read_id(self, data: st.DataObject) -> None:
        job = self._pick(data)
        if job is not None:
            assert (self.s.get(job.id) is job) == (job in self.s)

    @rule(data=st.data(), delay=st.integers(0, 5))
    def reschedule(self, data: st.DataObject, delay: int) -> None:
        job = self._pick(data)
        if job is not None and job in self.s:
            job.reschedule(delay)

    @rule(seconds=st.integers(0, 4))
    def run_for(self, seconds: int) -> None:
        self.s.run_for(seconds)

    @invariant()
    def index_agrees(self) -> None:
        listed = self.s.jobs()
        assert len(listed) == len(set(map(id, listed))) == len(self.s)
        live = [j for j in self.handles if j.state not in _ENDED_STATES]
        assert {id(j) for j in live} == {id(j) for j in listed}
        assert all(j in self.s for j in live)
        assert not any(j in self.s for j in self.handles if j.state in _ENDED_STATES)


_ENDED_STATES = {JobState.COMPLETED, JobState.CANCELLED, JobState.FAILED}
AnonymousIndexMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=30, deadline=None
)
TestAnonymousIndex = AnonymousIndexMachine.TestCase


# -- the first hour: calls a new user writes (issue: no silent no-ops) -------------------------


def test_when_may_be_given_as_a_keyword(scheduler: Scheduler, calls: list[Any]) -> None:
    job = scheduler.schedule(calls.append, when=timedelta(seconds=5), args=("kw",))
    assert job.next_run_time == FAKE_START + timedelta(seconds=5)
    scheduler.run_for(5)
    assert calls == ["kw"]


def test_coroutine_functions_really_run_on_the_thread_scheduler(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    import asyncio

    ran: list[tuple[str, float, str]] = []

    async def fetch(name: str) -> str:
        await asyncio.sleep(0)
        run = current_run()
        assert run is not None
        ran.append((name, fake_clock.monotonic(), run.job.id))
        return name

    async def broken() -> None:
        await asyncio.sleep(0)
        raise ValueError("inside the coroutine")

    ok = scheduler.schedule(fetch, 1, args=("a",), id="fetch")
    plain = scheduler.schedule(fetch, 2.0, args=("b",))  # the keyword-less inline path
    bad = scheduler.schedule(broken, 3, id="broken")
    assert scheduler.run_for(10) == 3
    assert ran == [("a", 1.0, "fetch"), ("b", 2.0, plain.id)]
    assert ok.state is JobState.COMPLETED and plain.state is JobState.COMPLETED
    # Its body ran and raised: a failure, not a success.
    assert bad.state is JobState.FAILED and isinstance(bad.last_error, ValueError)
    assert scheduler.stats().succeeded == 2 and scheduler.stats().failed == 1


def test_coroutine_jobs_run_when_stepped_from_inside_an_event_loop(
    scheduler: Scheduler,
) -> None:
    import asyncio

    ran: list[int] = []

    async def job() -> None:
        await asyncio.sleep(0)
        ran.append(1)

    async def main() -> None:
        scheduler.schedule(job, 1)
        scheduler.run_for(1)  # a loop already runs in this thread

    asyncio.run(main())
    assert ran == [1]


def test_a_one_shot_in_the_past_runs_at_once_and_says_so(
    scheduler: Scheduler, calls: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="duetime"):
        job = scheduler.schedule(calls.append, FAKE_START - timedelta(hours=1), args=("late",))
        scheduler.schedule(calls.append, At(FAKE_START - timedelta(seconds=1.5)), args=("at",))
        scheduler.schedule(calls.append, FAKE_START + timedelta(hours=1), args=("future",))
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(messages) == 2
    assert "3600.000 seconds in the past: the job runs at once" in messages[0]
    assert "1.500 seconds in the past" in messages[1]
    assert job.next_run_time == FAKE_START - timedelta(hours=1)
    assert scheduler.run_pending() == 2 and calls == ["late", "at"]


def test_a_recurrence_with_no_fire_to_come_ends_at_once_and_says_so(
    scheduler: Scheduler, calls: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    closed = Cron("0 9 * * *", end=FAKE_START - timedelta(days=1))
    with caplog.at_level(logging.WARNING, logger="duetime"):
        job = scheduler.schedule(calls.append, closed, args=("never",))
        scheduler.schedule(calls.append, Cron("0 9 * * *"), args=("daily",))
    assert [r.getMessage() for r in caplog.records] == [
        f"when {closed!r} has no fire to come (its end has passed, or nothing in its window "
        "matches): the job is completed at once without running"
    ]
    assert job.state is JobState.COMPLETED and job.next_run_time is None
    assert scheduler.run_pending() == 0 and calls == []


def test_step_until_never_runs_past_the_horizon(
    scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]
) -> None:
    for t in (10, 20, 30):
        scheduler.schedule(calls.append, t, args=(t,))
    end = FAKE_START + timedelta(seconds=25)
    steps = []
    while (run := scheduler.step(until=end)) is not None:
        steps.append(run.scheduled_time)
    assert calls == [10, 20]
    assert steps == [FAKE_START + timedelta(seconds=10), FAKE_START + timedelta(seconds=20)]
    assert fake_clock.now() == end  # moved to the horizon, as run_until ends at its target
    assert len(scheduler) == 1
    # A horizon exactly at a due time includes it; epoch seconds work too.
    assert scheduler.step(until=end.timestamp() + 5) is not None and calls == [10, 20, 30]
    assert scheduler.step(until=end) is None  # nothing queued; the clock never moves back
    assert fake_clock.now() == end + timedelta(seconds=5)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("add_job", "use s.schedule(func, when, args=..., id=...)"),
        ("get_jobs", "use s.jobs()"),
        ("remove_job", "use s.cancel(id)"),
        ("pause_job", "use s.pause(id)"),
        ("add_listener", "use s.subscribe(listener, *event_types)"),
    ],
)
def test_apscheduler_method_names_say_what_to_write(
    scheduler: Scheduler, name: str, hint: str
) -> None:
    with pytest.raises(
        AttributeError,
        match=rf"Scheduler has no {name}\(\) \(APScheduler 3's name\): {re.escape(hint)}",
    ):
        getattr(scheduler, name)
    assert not hasattr(scheduler, name)
    with pytest.raises(AttributeError, match="'Scheduler' object has no attribute 'no_such'"):
        getattr(scheduler, "no_" + "such")


# -- one overlap rule on every path (the one-shot overlap bug) ----------------------------------


class Concurrency:
    """Counts runs of a job and the most that were ever going at once."""

    def __init__(self) -> None:
        self.calls = 0
        self.now = 0
        self.most = 0

    def enter(self) -> None:
        self.calls += 1
        self.now += 1
        self.most = max(self.most, self.now)

    def leave(self) -> None:
        self.now -= 1


@pytest.mark.parametrize(
    "options",
    [
        {},  # the fast begin of run_until / run_pending
        {"retry": FixedBackoff([1])},  # the general begin
        {"name": "named"},
    ],
    ids=["fast path", "general path", "named"],
)
def test_a_one_shot_due_while_its_triggered_run_goes_on_waits_for_it(
    scheduler: Scheduler, fake_clock: FakeClock, options: dict[str, Any]
) -> None:
    seen = Concurrency()

    def body() -> None:
        seen.enter()
        try:
            if seen.calls == 1:
                scheduler.run_for(10)  # the job's own due time comes while this run goes on
        finally:
            seen.leave()

    job = scheduler.schedule(body, 10, **options)
    scheduler.trigger(job)
    assert seen.most == 1 and seen.calls == 1  # held back, not started beside the first run
    assert job.state is JobState.SCHEDULED
    assert scheduler.run_pending() == 1  # released when the triggered run ended: runs late
    assert seen.calls == 2 and seen.most == 1
    final: JobState = job.state
    assert final is JobState.COMPLETED


@pytest.mark.memory_only(
    "a durable store runs a fire key once: rescheduled to the same instant, it is not run again (tests/test_sqlite.py)"
)
def test_a_running_one_shot_rescheduled_to_now_does_not_run_twice_at_once(
    scheduler: Scheduler,
) -> None:
    seen = Concurrency()

    def body() -> None:
        seen.enter()
        try:
            if seen.calls == 1:
                scheduler.reschedule(job, 0)
                scheduler.run_pending()
        finally:
            seen.leave()

    job = scheduler.schedule(body, 0)
    scheduler.run_pending()
    assert seen.most == 1
    scheduler.run_pending()
    assert seen.calls == 2 and seen.most == 1 and job.state is JobState.COMPLETED


def test_overlap_allow_lets_a_one_shot_run_beside_its_trigger(scheduler: Scheduler) -> None:
    seen = Concurrency()

    def body() -> None:
        seen.enter()
        try:
            if seen.calls == 1:
                scheduler.run_for(10)
        finally:
            seen.leave()

    job = scheduler.schedule(body, 10, overlap=Overlap.ALLOW)
    scheduler.trigger(job)
    assert seen.calls == 2 and seen.most == 2


class LifecycleModel(RuleBasedStateMachine):
    """Every path of the life cycle against one model: failures, retries, ``trigger()``,
    pause/resume, reschedule and cancel, with and without a listener (which moves the
    scheduler off its fast paths). The model is a list of queued occurrences ordered by
    ``(due, priority, seq)``, as the design states it, and per-job counters."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.s = Scheduler(clock=self.clock, rng=random.Random(0))
        self.seq = 0
        self.queued: list[tuple[int, int, int, str, int]] = []  # due, priority, seq, jid, attempt
        self.parked: dict[str, list[tuple[int, int]]] = {}  # paused: (due, attempt), in order
        self.jobs: dict[str, dict[str, Any]] = {}
        self.handles: dict[str, Job] = {}
        self.calls: dict[str, int] = {}
        self.ran: list[tuple[str, int]] = []
        self.expected: list[tuple[str, int]] = []
        self.dead_letters: set[str] = set()
        self.events: list[str] | None = None  # None until a listener subscribes
        self.expected_events: list[str] = []
        self.t = 0  # the model's time (monotonic ns); the scheduler's clock must agree

    # -- helpers ----------------------------------------------------------------------------

    def _now(self) -> int:
        return self.t

    def _event(self, name: str) -> None:
        if self.events is not None:
            self.expected_events.append(name)

    def _push(self, jid: str, due: int, attempt: int) -> None:
        self.queued.append((due, self.jobs[jid]["priority"], self.seq, jid, attempt))
        self.seq += 1

    def _pending(self, jid: str) -> bool:
        return any(e[3] == jid for e in self.queued) or bool(self.parked.get(jid))

    def _live(self) -> list[str]:
        return sorted(j for j, m in self.jobs.items() if m["state"] in ("scheduled", "paused"))

    def _body(self, jid: str) -> None:
        self.calls[jid] = self.calls.get(jid, 0) + 1
        self.ran.append((jid, self.clock.monotonic_ns()))  # what the job sees
        if self.calls[jid] <= self.jobs[jid]["fails"]:
            raise ConnectionError(jid)

    def _run(self, jid: str, attempt: int) -> None:
        """What the model expects one occurrence of ``jid`` to do, at the clock's now."""
        m = self.jobs[jid]
        self.expected.append((jid, self._now()))
        m["calls"] += 1
        m["runs"] += 1
        self._event("JobStarted")
        if m["calls"] <= m["fails"]:
            m["failures"] += 1
            self._event("JobFailed")
            if m["retry"] is not None and attempt == 1:  # FixedBackoff([r]): one retry
                self._push(jid, self._now() + m["retry"] * 10**9, attempt + 1)
            else:
                self._event("JobDead")
                if not self._pending(jid):
                    m["state"] = "failed"
                    self.dead_letters.add(jid)
        else:
            self._event("JobSucceeded")
            if not self._pending(jid):
                m["state"] = "completed"

    def _pop(self, limit: int | None) -> bool:
        if not self.queued:
            return False
        head = min(self.queued)
        if limit is not None and head[0] > limit:
            return False
        self.queued.remove(head)
        self.t = max(self.t, head[0])
        self._run(head[3], head[4])
        return True

    # -- rules ------------------------------------------------------------------------------

    @rule()
    def subscribe(self) -> None:
        if self.events is None:
            self.events = []
            events = self.events
            self.s.subscribe(lambda event: events.append(type(event).__name__))

    @rule(
        delay=st.integers(0, 10),
        priority=st.integers(-1, 1),
        fails=st.integers(0, 2),
        retry=st.sampled_from([None, 0, 3]),
    )
    def schedule(self, delay: int, priority: int, fails: int, retry: int | None) -> None:
        jid = f"j{len(self.jobs)}"
        self.jobs[jid] = {
            "priority": priority,
            "fails": fails,
            "retry": retry,
            "state": "scheduled",
            "runs": 0,
            "failures": 0,
            "calls": 0,
        }
        self.handles[jid] = self.s.schedule(
            self._body,
            delay,
            args=(jid,),
            id=jid,
            priority=priority,
            retry=None if retry is None else FixedBackoff([retry]),
        )
        self._event("JobAdded")
        self._push(jid, self._now() + delay * 10**9, 1)

    @precondition(lambda self: self._live())
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        jid = data.draw(st.sampled_from(self._live()))
        assert self.s.cancel(jid) is True
        self._event("JobCancelled")
        self.queued = [e for e in self.queued if e[3] != jid]
        self.parked.pop(jid, None)
        self.jobs[jid]["state"] = "cancelled"

    @precondition(lambda self: self._live())
    @rule(data=st.data(), delay=st.integers(0, 10))
    def reschedule(self, data: st.DataObject, delay: int) -> None:
        jid = data.draw(st.sampled_from(self._live()))
        self.s.reschedule(jid, delay)
        self._event("JobRescheduled")
        self.queued = [e for e in self.queued if e[3] != jid]  # retries are dropped too
        due = self._now() + delay * 10**9
        if self.jobs[jid]["state"] == "paused":
            self.parked[jid] = [(due, 1)]
        else:
            self._push(jid, due, 1)

    @precondition(lambda self: self._live())
    @rule(data=st.data())
    def pause(self, data: st.DataObject) -> None:
        jid = data.draw(st.sampled_from(self._live()))
        self.s.pause(jid)
        m = self.jobs[jid]
        if m["state"] == "paused":
            return
        self._event("JobPaused")
        m["state"] = "paused"
        mine = [e for e in self.queued if e[3] == jid]
        self.queued = [e for e in self.queued if e[3] != jid]
        self.parked[jid] = [(e[0], e[4]) for e in sorted(mine, key=lambda e: e[2])]

    @precondition(lambda self: self._live())
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        jid = data.draw(st.sampled_from(self._live()))
        self.s.resume(jid)
        m = self.jobs[jid]
        if m["state"] != "paused":
            return
        self._event("JobResumed")
        m["state"] = "scheduled"
        for due, attempt in self.parked.pop(jid, []):
            self._push(jid, due, attempt)

    @precondition(lambda self: self._live())
    @rule(data=st.data())
    def trigger(self, data: st.DataObject) -> None:
        jid = data.draw(st.sampled_from(self._live()))
        self.s.trigger(jid)
        if self.jobs[jid]["state"] == "paused":
            self.parked[jid].append((self._now(), 1))  # runs when resumed
        else:
            self._run(jid, 1)  # no runner: at once, in this thread

    @rule(seconds=st.integers(0, 12))
    def run_for(self, seconds: int) -> None:
        limit = self._now() + seconds * 10**9
        ran = 0
        while self._pop(limit):
            ran += 1
        self.t = limit
        assert self.s.run_for(seconds) == ran
        assert self.clock.monotonic_ns() == limit

    @rule()
    def step(self) -> None:
        before = len(self.expected)
        expected_run = self._pop(None)
        run = self.s.step()
        assert (run is not None) == expected_run
        if run is not None:
            assert run.job is self.handles[self.expected[before][0]]
        assert self.clock.monotonic_ns() == self.t

    @invariant()
    def agrees(self) -> None:
        assert self.ran == self.expected
        live = self._live()
        assert len(self.s) == len(live)
        assert sorted(j.id for j in self.s.jobs()) == live
        for jid, m in self.jobs.items():
            job = self.handles[jid]
            assert job.state.value == m["state"], jid
            assert (job.runs, job.failures) == (m["runs"], m["failures"]), jid
        assert {f.job.id for f in self.s.failed()} == self.dead_letters
        if self.events is not None:
            assert self.events == self.expected_events


LifecycleModel.TestCase.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
TestLifecycleModel = LifecycleModel.TestCase


# -- tasks: functions by name --------------------------------------------------------------------


def test_registered_tasks_are_scheduled_by_name(scheduler: Scheduler, calls: list[Any]) -> None:
    @scheduler.task("greet")
    def greet(who: str) -> None:
        calls.append(f"hello {who}")

    scheduler.register("shout", calls.append)
    assert scheduler.tasks() == {"greet": greet, "shout": calls.append}
    job = scheduler.schedule("greet", 5, args=("ada",), id="g")
    scheduler.schedule("shout", 6, args=("HEY",))
    assert job.func is greet
    scheduler.run_for(10)
    assert calls == ["hello ada", "HEY"]
    scheduler.register("greet", greet)  # the same function again: fine


def test_a_task_name_means_one_function(scheduler: Scheduler) -> None:
    scheduler.register("job", print)
    with pytest.raises(InvalidArgument, match="name 'job' is already the task"):
        scheduler.register("job", repr)
    with pytest.raises(InvalidArgument, match="name must not be empty"):
        scheduler.register("", print)
    with pytest.raises(TypeError, match="func must be callable, got 3"):
        scheduler.register("x", 3)  # type: ignore[arg-type]
    assert scheduler.tasks() == {"job": print} and len(scheduler) == 0


def test_an_unregistered_task_name_is_refused_unless_a_store_keeps_it_for_workers(
    scheduler: Scheduler, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler.register("job", print)
    if not getattr(scheduler.store, "durable", False):
        with pytest.raises(
            InvalidArgument, match=r"func 'jb' is not a registered task \(registered: job\)"
        ):
            scheduler.schedule("jb", 1)
        assert len(scheduler) == 0
        return
    # A process that only schedules names tasks its workers register: stored, and left to
    # them (pending here, with a warning once due), until this process registers it too.
    ran: list[int] = []
    job = scheduler.schedule("jb", 1, args=[7], id="j")
    assert job.name == "jb" and scheduler.tasks() == {"job": print}
    clock = scheduler.clock
    assert isinstance(clock, FakeClock)
    clock.advance(1)
    with caplog.at_level(logging.WARNING, "duetime"):
        assert scheduler.run_pending() == 0
    assert "task 'jb' is not registered in this process; it stays pending" in caplog.text
    assert [j.id for j in scheduler.jobs()] == ["j"]
    scheduler.register("jb", ran.append)
    assert scheduler.run_pending() == 1 and ran == [7]


def test_a_coroutine_job_that_is_cancelled_inside_fails_like_any_job(scheduler: Scheduler) -> None:
    import asyncio

    async def awaits_a_cancelled_task() -> None:
        task = asyncio.get_running_loop().create_task(asyncio.sleep(10))
        task.cancel()
        await task

    job = scheduler.schedule(awaits_a_cancelled_task, 1)
    after = scheduler.schedule(print, 2, args=("still runs",))
    assert scheduler.run_for(5) == 2  # neither run_for nor the next job is disturbed
    assert job.state is JobState.FAILED and job.failures == 1
    assert isinstance(job.last_error, RuntimeError) and "was cancelled" in str(job.last_error)
    assert [f.job for f in scheduler.failed()] == [job]
    assert after.state is JobState.COMPLETED


def test_an_async_generator_job_fails_instead_of_counting_a_success(scheduler: Scheduler) -> None:
    ran: list[int] = []

    async def agen() -> Any:
        ran.append(1)
        yield 1

    job = scheduler.schedule(agen, 1)
    scheduler.run_for(1)
    assert ran == [] and job.state is JobState.FAILED
    assert isinstance(job.last_error, TypeError) and "async generator" in str(job.last_error)
    assert scheduler.stats().succeeded == 0


def test_a_generator_job_fails_instead_of_counting_a_success(scheduler: Scheduler) -> None:
    # Calling a generator function only makes the generator: its body never runs.
    ran: list[int] = []

    def gen() -> Any:
        ran.append(1)
        yield 1

    def returns_one() -> Any:  # not a generator function: what it returns is its result
        return (x for x in ran)

    plain = scheduler.schedule(gen, 1)  # the keyword-less path
    named = scheduler.schedule(gen, 1, id="named")
    bound = scheduler.schedule(functools.partial(gen), 1)
    fine = scheduler.schedule(returns_one, 1)
    scheduler.run_for(1)
    assert ran == []
    for job in (plain, named, bound):
        assert job.state is JobState.FAILED
        assert isinstance(job.last_error, TypeError)
        assert "generator function" in str(job.last_error)
    assert fine.state is JobState.COMPLETED and fine.last_error is None
    assert scheduler.stats().succeeded == 1 and scheduler.stats().failed == 3


def test_an_async_listener_is_refused_and_a_coroutine_returned_is_closed_and_logged(
    scheduler: Scheduler, caplog: pytest.LogCaptureFixture
) -> None:
    import functools
    import warnings

    async def listener(event: Any) -> None:
        pass

    for bad in (listener, functools.partial(listener)):
        with pytest.raises(TypeError, match="listener must be a plain function"):
            scheduler.subscribe(bad)
    assert scheduler._listeners == []  # nothing subscribed
    # A lambda around it cannot be seen beforehand: what it returns is closed and logged.
    scheduler.subscribe(lambda e: listener(e))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited"
        scheduler.schedule(print, 1, args=("",))
    assert "returned a coroutine on JobAdded, which is never awaited" in caplog.text


def test_after_shutdown_nothing_more_runs_by_any_door(
    scheduler: Scheduler, fake_clock: FakeClock, calls: list[Any]
) -> None:
    # "No further occurrence starts": not through the manual drivers, not through trigger().
    scheduler.schedule(calls.append, 10, args=("once",), id="once")
    scheduler.schedule(calls.append, FixedRate(5), args=("tick",), id="tick")
    fake_clock.advance(10)
    scheduler.shutdown()
    before = fake_clock.time_ns()
    doors: list[tuple[str, Callable[[], object]]] = [
        ("trigger", lambda: scheduler.trigger("once")),
        ("run_pending", scheduler.run_pending),
        ("step", scheduler.step),
        ("run_until", lambda: scheduler.run_until(T0 + timedelta(hours=1))),
        ("run_for", lambda: scheduler.run_for(60)),
        # (They made a job look due, with a next run time, that would never run.)
        ("reschedule", lambda: scheduler.reschedule("tick", 5)),
        ("reschedule", lambda: scheduler.get("tick").reschedule(5)),  # type: ignore[union-attr]
        ("resume", lambda: scheduler.resume("tick")),
    ]
    for name, door in doors:
        with pytest.raises(SchedulerShutdownError, match=f"cannot {name}: the scheduler has been"):
            door()
    assert calls == []
    assert fake_clock.time_ns() == before
