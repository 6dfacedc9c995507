"""Every public entry point, fed each class of bad input the API promises to reject.

Each case asserts the error type, a message that names the parameter (and usually the value), and
that the scheduler is exactly as it was: same jobs, same queue sizes, same stats, same clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

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
    JobLookupError,
    Poisson,
    Scheduler,
    TokenBucket,
    Window,
)
from duetime.testing import FAKE_START

from .conftest import snapshot

NAIVE = datetime(2026, 1, 5, 9, 0)
NAN = float("nan")
INF = float("inf")


def populated() -> Scheduler:
    s = Scheduler(clock=FakeClock(start=FAKE_START), tz="Europe/Berlin", rng=random.Random(1))
    s.schedule(print, 60, id="one-shot")
    s.schedule(print, FixedRate(30), id="rate")
    s.schedule(print, "0 9 * * *", id="cron")
    s.schedule(print, 10, id="paused", paused=True)
    s.schedule(print, 10_000, id="doomed").cancel()  # a stale entry deep in the heap
    return s


Case = tuple[str, Callable[[Scheduler], Any], type[Exception], str]

SCHEDULER_CASES: list[Case] = [
    # schedule(): when
    ("naive datetime", lambda s: s.schedule(print, NAIVE), InvalidArgument, "when must be timezone-aware"),
    ("NaN delay", lambda s: s.schedule(print, NAN), InvalidArgument, "when must be a finite number"),
    ("inf delay", lambda s: s.schedule(print, INF), InvalidArgument, "when must be a finite number"),
    ("negative delay", lambda s: s.schedule(print, -1), InvalidArgument, "when must not be negative, got -1"),
    ("negative float", lambda s: s.schedule(print, -0.5), InvalidArgument, "when must not be negative"),
    ("negative timedelta", lambda s: s.schedule(print, timedelta(seconds=-1)), InvalidArgument, "when must not be negative"),
    ("bool when", lambda s: s.schedule(print, True), TypeError, "when must be a Recurrence"),
    ("object when", lambda s: s.schedule(print, object()), TypeError, "when must be a Recurrence"),
    ("bad cron string", lambda s: s.schedule(print, "tomorrow"), InvalidArgument, "'tomorrow'"),
    ("duplicate id, Poisson", lambda s: s.schedule(print, Poisson(rate=1 / 60), id="rate"), ConflictingIdError, "'rate' is already scheduled"),
    ("bad priority, Poisson", lambda s: s.schedule(print, Poisson(rate=1 / 60), priority=1.5), TypeError, "priority must be an int"),  # type: ignore[arg-type]
    ("unknown executor, Poisson", lambda s: s.schedule(print, Poisson(rate=1 / 60), executor="gpu"), InvalidArgument, "executor 'gpu' is not one"),
    ("reschedule unknown, Poisson", lambda s: s.reschedule("nope", Poisson(rate=1 / 60)), JobLookupError, "'nope'"),
    ("delay past a thousand years", lambda s: s.schedule(print, 10**12), InvalidArgument, r"when must be at most a thousand years \(31536000000 seconds\), got 1000000000000"),
    ("float delay past a thousand years", lambda s: s.schedule(print, 1e12), InvalidArgument, "when must be at most a thousand years"),
    ("timedelta past a thousand years", lambda s: s.schedule(print, timedelta(days=999_999_999)), InvalidArgument, "when must be at most a thousand years"),
    ("reschedule past a thousand years", lambda s: s.reschedule("rate", 10**12), InvalidArgument, "when must be at most a thousand years"),
    # schedule(): other parameters
    ("unregistered task name", lambda s: s.schedule("print", 1), InvalidArgument, r"func 'print' is not a registered task \(registered: none yet\); register it with @s.task\('print'\)"),
    ("non-callable", lambda s: s.schedule(42, 1), TypeError, "func must be callable or a registered task name, got 42"),  # type: ignore[arg-type]
    ("args type", lambda s: s.schedule(print, 1, args="ab"), TypeError, "args must be a tuple or list"),  # type: ignore[arg-type]
    ("kwargs type", lambda s: s.schedule(print, 1, kwargs=[1]), TypeError, "kwargs must be a dict"),  # type: ignore[arg-type]
    ("id type", lambda s: s.schedule(print, 1, id=5), TypeError, "id must be a str"),  # type: ignore[arg-type]
    ("empty id", lambda s: s.schedule(print, 1, id=""), InvalidArgument, "id must not be empty"),
    ("duplicate id", lambda s: s.schedule(print, 1, id="rate"), ConflictingIdError, "'rate' is already scheduled"),
    ("duplicate paused id", lambda s: s.schedule(print, 1, id="paused"), ConflictingIdError, "'paused'"),
    ("name type", lambda s: s.schedule(print, 1, name=3), TypeError, "name must be a str"),  # type: ignore[arg-type]
    ("priority type", lambda s: s.schedule(print, 1, priority=1.5), TypeError, "priority must be an int, got 1.5"),  # type: ignore[arg-type]
    ("priority too big", lambda s: s.schedule(print, 1, priority=2**31), InvalidArgument, r"priority must be between -2147483648 and 2147483647, got 2147483648"),
    ("priority too small", lambda s: s.schedule(print, 1, id="p", priority=-(2**31) - 1), InvalidArgument, "priority must be between"),
    ("retry type", lambda s: s.schedule(print, 1, retry=3), TypeError, "retry must be a RetryPolicy"),  # type: ignore[arg-type]
    ("kwargs keys", lambda s: s.schedule(print, 1, kwargs={1: 2}), TypeError, r"kwargs keys must be str, got \{1: 2\}"),  # type: ignore[dict-item]
    ("replace not bool", lambda s: s.schedule(print, 1, id="x", replace="yes"), TypeError, "replace must be a bool, got 'yes'"),  # type: ignore[arg-type]
    ("paused not bool", lambda s: s.schedule(print, 1, paused=1), TypeError, "paused must be a bool, got 1"),  # type: ignore[arg-type]
    ("retry class", lambda s: s.schedule(print, 1, retry=FixedBackoff), TypeError, "retry must be a RetryPolicy, got <class"),  # type: ignore[arg-type]
    ("misfire type", lambda s: s.schedule(print, 1, misfire="skip"), TypeError, "misfire must be a Misfire"),  # type: ignore[arg-type]
    ("overlap type", lambda s: s.schedule(print, 1, overlap="skip"), TypeError, "overlap must be an Overlap"),  # type: ignore[arg-type]
    ("negative grace", lambda s: s.schedule(print, 1, grace=-1), InvalidArgument, "grace must not be negative"),
    ("NaN jitter", lambda s: s.schedule(print, 1, jitter=NAN), InvalidArgument, "jitter must be a finite"),
    ("limiter type", lambda s: s.schedule(print, 1, limiter=10), TypeError, "limiter must be a TokenBucket"),  # type: ignore[arg-type]
    ("unknown executor", lambda s: s.schedule(print, 1, executor="gpu"), InvalidArgument, "executor 'gpu' is not one"),
    ("unknown keyword", lambda s: s.schedule(print, 1, args=(), priorty=1), TypeError, r"Scheduler.schedule\(\) got an unexpected keyword argument 'priorty'"),  # type: ignore[call-arg]
    ("APScheduler trigger keyword", lambda s: s.schedule(print, FixedRate(60), minutes=5), TypeError, r"unexpected keyword argument 'minutes'; minutes belongs to the trigger, which is when: FixedRate\(minutes=\.\.\.\)"),  # type: ignore[call-arg]
    ("APScheduler replace_existing", lambda s: s.schedule(print, 1, replace_existing=True), TypeError, "APScheduler's replace_existing is replace=True here"),  # type: ignore[call-arg]
    ("APScheduler misfire_grace_time", lambda s: s.schedule(print, 1, misfire_grace_time=30), TypeError, "misfire_grace_time is grace=seconds here"),  # type: ignore[call-arg]
    ("APScheduler trigger name", lambda s: s.schedule(print, "interval"), InvalidArgument, r"when 'interval' is APScheduler's name for a trigger; pass the trigger itself: FixedRate\(minutes=5\)"),
    ("non-callable, no options", lambda s: s.schedule(None, 1.5), TypeError, "func must be callable or a registered task name, got None"),  # type: ignore[arg-type]
    ("job args positionally", lambda s: s.schedule(print, 5, "x"), TypeError, r"takes the job's arguments as args=\(\.\.\.\), not positionally: write schedule\(func, when, args=\('x',\)\)"),
    ("when missing", lambda s: s.schedule(print), TypeError, r"schedule\(\) needs when"),
    ("when a class", lambda s: s.schedule(print, FixedRate), TypeError, r"when must be a Recurrence, not the class FixedRate: write FixedRate\(\.\.\.\)"),
    ("@s.scheduled of a class", lambda s: s.scheduled(Cron)(print), TypeError, r"when must be a Recurrence, not the class Cron"),
    ("reschedule to a class", lambda s: s.reschedule("rate", FixedRate), TypeError, r"when must be a Recurrence, not the class FixedRate"),
    ("wait_idle NaN", lambda s: s.wait_idle(NAN), InvalidArgument, "timeout must be a finite number of seconds, got nan"),
    ("wait_idle negative", lambda s: s.wait_idle(-1), InvalidArgument, "timeout must not be negative, got -1"),
    ("wait_idle type", lambda s: s.wait_idle("1"), TypeError, "timeout must be a number of seconds or a timedelta, got '1'"),  # type: ignore[arg-type]
    ("tz given to schedule", lambda s: s.schedule(print, "0 9 * * *", tz="Europe/Berlin"), TypeError, r"tz belongs to the trigger, which is when: Cron\(\.\.\., tz=\.\.\.\)"),  # type: ignore[call-arg]
    ("@s.scheduled without parentheses", lambda s: s.scheduled(print), TypeError, r"scheduled\(\) needs when: @s.scheduled\(when\).*got the function <built-in function print> as when"),
    ("@s.task without parentheses", lambda s: s.task(print), TypeError, r"task\(\) takes the task's name, then decorates: write @s.task\('print'\)"),  # type: ignore[arg-type]
    ("task name type", lambda s: s.task(5), TypeError, "name must be a str, got 5"),  # type: ignore[arg-type]
    ("when keyword, bad value", lambda s: s.schedule(print, when=-1), InvalidArgument, "when must not be negative"),
    ("step until naive", lambda s: s.step(until=NAIVE), InvalidArgument, "until must be timezone-aware"),
    ("step until type", lambda s: s.step(until="soon"), TypeError, "until must be an aware datetime or epoch seconds"),  # type: ignore[arg-type]
    # management
    ("cancel type", lambda s: s.cancel(42), TypeError, "job_or_id must be a Job or a job id"),  # type: ignore[arg-type]
    ("reschedule unknown", lambda s: s.reschedule("nope", 5), JobLookupError, "no job with id 'nope'"),
    ("reschedule naive", lambda s: s.reschedule("rate", NAIVE), InvalidArgument, "when must be timezone-aware"),
    ("reschedule NaN", lambda s: s.reschedule("rate", NAN), InvalidArgument, "when must be a finite"),
    ("reschedule zero rate", lambda s: s.reschedule("rate", FixedRate(0)), InvalidArgument, "interval must be positive, got 0"),
    ("pause unknown", lambda s: s.pause("nope"), JobLookupError, "'nope'"),
    ("resume unknown", lambda s: s.resume("nope"), JobLookupError, "'nope'"),
    ("trigger unknown", lambda s: s.trigger("nope"), JobLookupError, "'nope'"),
    ("get type", lambda s: s.get(5), TypeError, "id must be a str, got 5"),  # type: ignore[arg-type]
    ("retry_failed unknown", lambda s: s.retry_failed("nope"), JobLookupError, "no failed job with id 'nope'"),
    ("discard_failed type", lambda s: s.discard_failed(1), TypeError, "id must be a str"),  # type: ignore[arg-type]
    ("subscribe non-callable", lambda s: s.subscribe(None), TypeError, "listener must be callable"),  # type: ignore[arg-type]
    # driving time
    ("run_until naive", lambda s: s.run_until(NAIVE), InvalidArgument, "when must be timezone-aware"),
    ("run_until NaN", lambda s: s.run_until(NAN), InvalidArgument, "when must be a finite epoch time"),
    ("run_for negative", lambda s: s.run_for(-5), InvalidArgument, "seconds must not be negative, got -5"),
    ("run_for inf", lambda s: s.run_for(INF), InvalidArgument, "seconds must be a finite"),
    ("advance negative", lambda s: s.clock.advance(-1), InvalidArgument, "seconds must not be negative"),  # type: ignore[attr-defined]
    ("advance huge", lambda s: s.clock.advance(1e300), InvalidArgument, "seconds must be at most a thousand years"),  # type: ignore[attr-defined]
    ("advance_ns float", lambda s: s.clock.advance_ns(1.5), TypeError, r"ns must be an int \(nanoseconds\), got 1.5"),  # type: ignore[attr-defined]
    ("run_until past the year 9999", lambda s: s.run_until(1e15), InvalidArgument, "when must be an epoch time between the years 1 and 9999"),
    ("set backwards", lambda s: s.clock.set(FAKE_START - timedelta(days=1)), InvalidArgument, "when must not be earlier"),  # type: ignore[attr-defined]
]  # fmt: skip


@pytest.mark.parametrize(
    ("label", "call", "error", "message"), SCHEDULER_CASES, ids=[c[0] for c in SCHEDULER_CASES]
)
def test_scheduler_entry_points_reject_bad_input_and_change_nothing(
    label: str, call: Callable[[Scheduler], Any], error: type[Exception], message: str
) -> None:
    s = populated()
    before = snapshot(s)
    with pytest.raises(error, match=message):
        call(s)
    assert snapshot(s) == before


CONSTRUCTOR_CASES: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
    ("At naive", lambda: At(NAIVE), InvalidArgument, "when must be timezone-aware"),
    ("At type", lambda: At("2026-01-01"), TypeError, "when must be a timezone-aware datetime"),  # type: ignore[arg-type]
    ("After negative", lambda: After(-1), InvalidArgument, "delay must not be negative, got -1"),
    ("After NaN", lambda: After(NAN), InvalidArgument, "delay must be a finite"),
    ("After past a thousand years", lambda: After(1e15), InvalidArgument, "delay must be at most a thousand years"),
    ("FixedRate past a thousand years", lambda: FixedRate(days=10**6), InvalidArgument, "at most a thousand years"),
    ("FixedBackoff delay past a thousand years", lambda: FixedBackoff([1e12]), InvalidArgument, r"delays\[0\] must be at most a thousand years"),
    ("FixedRate zero", lambda: FixedRate(0), InvalidArgument, "interval must be positive, got 0"),
    ("FixedRate inf", lambda: FixedRate(INF), InvalidArgument, "interval must be a finite"),
    ("FixedRate naive start", lambda: FixedRate(1, start=NAIVE), InvalidArgument, "start must be timezone-aware"),
    ("FixedDelay zero", lambda: FixedDelay(timedelta(0)), InvalidArgument, "interval must be positive"),
    ("FixedDelay negative initial", lambda: FixedDelay(5, initial_delay=-1), InvalidArgument, "initial_delay must not be negative"),
    ("Cron invalid", lambda: Cron("99 * * * *"), InvalidArgument, "'99 \\* \\* \\* \\*'"),
    ("Cron zone", lambda: Cron("* * * * *", tz="Atlantis/Capital"), InvalidArgument, "tz is not a known time zone: 'Atlantis/Capital'"),
    ("Window empty", lambda: Window("10:00", "10:00"), InvalidArgument, "window is empty"),
    ("Window no days", lambda: Window("10:00", "11:00", days=()), InvalidArgument, "days must not be empty"),
    ("Poisson zero", lambda: Poisson(per_day=0), InvalidArgument, "per_day must be a positive"),
    ("Poisson NaN", lambda: Poisson(rate=NAN), InvalidArgument, "rate must be a positive finite"),
    ("TokenBucket zero", lambda: TokenBucket(0), InvalidArgument, "rate must be a positive"),
    ("TokenBucket per", lambda: TokenBucket(1, per=-1), InvalidArgument, "per must not be negative"),
    ("Backoff negative", lambda: FixedBackoff([-1]), InvalidArgument, r"delays\[0\] must not be negative"),
    ("Exponential NaN", lambda: ExponentialBackoff(base=NAN), InvalidArgument, "base must be a positive finite"),
    ("FakeClock naive", lambda: FakeClock(start=NAIVE), InvalidArgument, "start must be timezone-aware"),
    ("FakeClock NaN", lambda: FakeClock(start=NAN), InvalidArgument, "start must be a finite"),
    ("FakeClock past the year 9999", lambda: FakeClock(start=1e300), InvalidArgument, "start must be an epoch time between the years 1 and 9999"),
    ("Scheduler tz", lambda: Scheduler(tz="Mars/Base"), InvalidArgument, "tz is not a known time zone: 'Mars/Base'"),
    ("Scheduler tz longer than a file name", lambda: Scheduler(tz="x" * 300), InvalidArgument, "tz is not a known time zone: 'xxx"),
    ("Cron tz longer than a file name", lambda: Cron("0 9 * * *", tz="Europe/" + "x" * 300), InvalidArgument, "tz is not a known time zone: 'Europe/xxx"),
    ("Scheduler clock", lambda: Scheduler(clock=object()), TypeError, "clock must implement the Clock protocol"),  # type: ignore[arg-type]
    ("Scheduler clock class", lambda: Scheduler(clock=FakeClock), TypeError, r"clock must be a clock, not a class: write clock=FakeClock\(\)"),  # type: ignore[arg-type]
    ("Scheduler rng", lambda: Scheduler(rng=1), TypeError, "rng must be a random.Random"),  # type: ignore[arg-type]
    ("Scheduler grace", lambda: Scheduler(grace=NAN), InvalidArgument, "grace must be a finite"),
    ("Scheduler max_concurrent", lambda: Scheduler(max_concurrent=0), InvalidArgument, "max_concurrent must be at least 1, got 0"),
    ("Scheduler wall_check", lambda: Scheduler(wall_check_interval=0), InvalidArgument, "wall_check_interval must be positive"),
    ("Scheduler lease zero", lambda: Scheduler(lease=0), InvalidArgument, "lease must be positive, got 0"),
    ("Scheduler lease years", lambda: Scheduler(lease=10**9), InvalidArgument, r"lease must be at most a year \(seconds\), got 1000000000"),
    ("Scheduler lease ages", lambda: Scheduler(lease=10**12), InvalidArgument, r"lease must be at most a year \(seconds\), got 1000000000000"),
    ("Poisson mean past a thousand years", lambda: Poisson(mean_interval=1e12), InvalidArgument, "mean_interval gives a mean gap of more than a thousand years"),
    ("ExponentialBackoff cap past a thousand years", lambda: ExponentialBackoff(base=1e12, cap=1e13), InvalidArgument, "cap must be at most a thousand years"),
    # APScheduler 3's constructor keywords, named with duetime's spelling
    ("APScheduler Scheduler timezone", lambda: Scheduler(timezone="UTC"), TypeError, r"Scheduler\(\) got an unexpected keyword argument 'timezone' \(APScheduler's\): use tz="),  # type: ignore[call-arg]
    ("APScheduler Scheduler jobstores", lambda: Scheduler(jobstores={}), TypeError, "'jobstores' .*use store="),  # type: ignore[call-arg]
    ("APScheduler job_defaults", lambda: Scheduler(job_defaults={}), TypeError, "'job_defaults' .*give misfire=, grace= and overlap= to Scheduler"),  # type: ignore[call-arg]
    ("APScheduler Cron timezone", lambda: Cron("0 9 * * *", timezone="UTC"), TypeError, r"Cron\(\) got an unexpected keyword argument 'timezone' \(APScheduler's\): use tz="),  # type: ignore[call-arg]
    ("APScheduler Cron start_date", lambda: Cron(hour=9, start_date=None), TypeError, "'start_date' .*use start="),  # type: ignore[call-arg]
    ("APScheduler Cron week", lambda: Cron(week=2), TypeError, "Cron has no week field"),  # type: ignore[call-arg]
    ("APScheduler interval end_date", lambda: FixedRate(minutes=5, end_date=None), TypeError, r"FixedRate\(\) got .*'end_date' .*intervals have no end bound"),  # type: ignore[call-arg]
    ("APScheduler interval jitter", lambda: FixedDelay(5, jitter=1), TypeError, r"FixedDelay\(\) got .*jitter is a job option: schedule\(\.\.\., jitter=seconds\)"),  # type: ignore[call-arg]
    ("unknown constructor keyword", lambda: FixedRate(5, bogus=1), TypeError, r"unexpected keyword argument 'bogus'$"),  # type: ignore[call-arg]
    ("Scheduler misfire", lambda: Scheduler(misfire="skip"), TypeError, "misfire must be a Misfire"),  # type: ignore[arg-type]
    ("Scheduler tz typo", lambda: Scheduler(tz="Europe/Berln"), InvalidArgument, r"'Europe/Berln'; did you mean Europe/Berlin\?$"),
    ("Cron tz city", lambda: Cron("* * * * *", tz="Berlin"), InvalidArgument, r"did you mean Europe/Berlin\?"),
    ("Scheduler executor", lambda: Scheduler(executor="bogus"), TypeError, "executor must be 'inline', None or a concurrent.futures.Executor, got 'bogus'"),
    ("Scheduler executors value", lambda: Scheduler(executors={"io": 4}), TypeError, r"executors\['io'\] must be 'inline' or a concurrent.futures.Executor, got 4"),
    ("func as a keyword", lambda: Scheduler().schedule(func=print, when=5), TypeError, r"schedule\(\) takes the function first, positionally: .* \(got func=<built-in function print> as a keyword\)$"),  # type: ignore[call-arg]
    ("no func at all", lambda: Scheduler().schedule(when=5), TypeError, r"takes the function first, positionally: .* \(got no function\)$"),
    ("APScheduler executors default", lambda: Scheduler(executors={"default": "inline"}), InvalidArgument, r"executors\['default'\] does not set the default executor here .*write Scheduler\(executor='inline'\)"),
    ("Scheduler executors type", lambda: Scheduler(executors=["io"]), TypeError, "executors must be a dict"),  # type: ignore[arg-type]
    ("FixedRate both forms", lambda: FixedRate(5, minutes=1), TypeError, "either positionally or as keywords"),
    ("FixedRate no interval", lambda: FixedRate(), TypeError, r"FixedRate\(\) needs an interval"),
    ("FixedRate zero keywords", lambda: FixedRate(minutes=0, seconds=0), InvalidArgument, "the interval must be positive, got minutes=0, seconds=0"),
    ("FixedRate negative keyword", lambda: FixedRate(hours=-1), InvalidArgument, "hours must not be negative, got -1"),
    ("FixedDelay keyword type", lambda: FixedDelay(minutes="5"), TypeError, "minutes must be a number, got '5'"),  # type: ignore[arg-type]
]  # fmt: skip


@pytest.mark.parametrize(
    ("label", "call", "error", "message"), CONSTRUCTOR_CASES, ids=[c[0] for c in CONSTRUCTOR_CASES]
)
def test_constructors_reject_bad_input(
    label: str, call: Callable[[], Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        call()


def test_invalid_argument_is_a_value_error() -> None:
    s = populated()
    with pytest.raises(ValueError, match="when must not be negative"):
        s.schedule(print, -1)


def test_the_stale_entry_of_the_fixture_is_counted() -> None:
    # populated() leaves one cancelled entry in the heap, so the snapshot's queue sizes include
    # a stale count that a half-done operation would visibly change.
    assert populated().stats().stale_entries == 1


AWARE = FAKE_START + timedelta(days=1)


@pytest.mark.parametrize(
    ("keyword", "spelled", "call"),
    [
        *(
            (k, f"FixedRate({k}=...)", lambda k=k: FixedRate(**{k: 1}))  # type: ignore[arg-type]
            for k in ("weeks", "days", "hours", "minutes", "seconds")
        ),
        *(
            (k, f"Cron({k}=...)", lambda k=k, v=v: Cron(**{k: v}))
            for k, v in (
                ("month", 3),
                ("day", 1),
                ("day_of_week", "mon"),
                ("hour", 9),
                ("minute", 5),
                ("second", 0),
            )
        ),
        ("run_date", "At(datetime)", lambda: At(AWARE)),
        ("start_date", "Cron(..., start=datetime)", lambda: Cron("0 9 * * *", start=AWARE)),
        ("end_date", "Cron(..., end=datetime)", lambda: Cron("0 9 * * *", end=AWARE)),
        ("timezone", "Cron(..., tz=...)", lambda: Cron("0 9 * * *", tz="Europe/Berlin")),
        ("year", "Cron(..., start=..., end=...)", lambda: Cron("0 9 * * *", start=AWARE)),
    ],
)
def test_an_apscheduler_trigger_keyword_is_told_a_spelling_that_works(
    keyword: str, spelled: str, call: Callable[[], Any]
) -> None:
    s = Scheduler(FakeClock())
    with pytest.raises(TypeError, match=rf"{keyword} belongs to the trigger") as caught:
        s.schedule(print, FixedRate(60), **{keyword: 1})  # type: ignore[arg-type]
    assert spelled in str(caught.value)
    call()  # (what the hint says to write is accepted)
    assert s.jobs() == []


def test_a_delay_too_long_is_refused_before_a_listener_hears_of_it() -> None:
    # (It used to be added, then fail making the JobAdded event's datetime: half-changed.)
    s = populated()
    heard: list[object] = []
    s.subscribe(heard.append)
    before = snapshot(s)
    with pytest.raises(InvalidArgument, match="when must be at most a thousand years"):
        s.schedule(print, timedelta(days=999_999_999), id="far")
    assert snapshot(s) == before and heard == [] and "far" not in s
