"""Retry policies, dead letters and retry_failed."""

from __future__ import annotations

import logging
import random
from datetime import timedelta
from typing import Any

import pytest

from duetime import (
    ConflictingIdError,
    Cron,
    ExponentialBackoff,
    FakeClock,
    FixedBackoff,
    FixedRate,
    InvalidArgument,
    JobDead,
    JobFailed,
    JobLookupError,
    JobState,
    NoRetry,
    Scheduler,
    current_run,
)
from duetime.testing import FAKE_START

from .conftest import Recorder


def delays(policy: Any, n: int, seed: int = 0, error: BaseException | None = None) -> list[Any]:
    rng = random.Random(seed)
    out: list[Any] = []
    prev = None
    for attempt in range(1, n + 1):
        d = policy.delay(attempt, error or RuntimeError("x"), rng, prev)
        out.append(d)
        prev = d
    return out


def test_no_retry() -> None:
    assert delays(NoRetry(), 3) == [None, None, None]


def test_fixed_backoff_sequence() -> None:
    assert delays(FixedBackoff([5, 30, timedelta(minutes=5)]), 4) == [5.0, 30.0, 300.0, None]


def test_exponential_without_jitter_is_capped() -> None:
    policy = ExponentialBackoff(base=1, factor=2, cap=10, max_attempts=7, jitter=None)
    assert delays(policy, 7) == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, None]
    assert ExponentialBackoff(base=1, factor=10, cap=5).raw_delay(10_000) == 5.0  # no overflow


@pytest.mark.parametrize("seed", range(20))
def test_jitter_bounds(seed: int) -> None:
    full = ExponentialBackoff(base=1, factor=2, cap=60, max_attempts=10, jitter="full")
    equal = ExponentialBackoff(base=1, factor=2, cap=60, max_attempts=10, jitter="equal")
    deco = ExponentialBackoff(base=2, factor=2, cap=60, max_attempts=10, jitter="decorrelated")
    for attempt, d in enumerate(delays(full, 9, seed), start=1):
        assert 0 <= d <= min(60, 2 ** (attempt - 1))
    for attempt, d in enumerate(delays(equal, 9, seed), start=1):
        raw = min(60, 2 ** (attempt - 1))
        assert raw / 2 <= d <= raw
    assert all(2 <= d <= 60 for d in delays(deco, 9, seed))


def test_jitter_is_reproducible_and_varies() -> None:
    policy = ExponentialBackoff(jitter="full", max_attempts=20)
    assert delays(policy, 10, seed=1) == delays(policy, 10, seed=1)
    assert delays(policy, 10, seed=1) != delays(policy, 10, seed=2)


def test_retry_on_filters() -> None:
    policy = ExponentialBackoff(retry_on=(TimeoutError,), jitter=None)
    assert delays(policy, 1, error=TimeoutError()) == [1.0]
    assert delays(policy, 1, error=ValueError()) == [None]
    assert (
        FixedBackoff([1], retry_on=OSError).delay(1, ConnectionError(), random.Random(), None) == 1
    )


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lambda: ExponentialBackoff(base=0), "base must be a positive finite number"),
        (lambda: ExponentialBackoff(factor=0.5), "factor must be at least 1"),
        (lambda: ExponentialBackoff(base=10, cap=5), "cap must be at least base"),
        (lambda: ExponentialBackoff(max_attempts=0), "max_attempts must be at least 1"),
        (lambda: ExponentialBackoff(jitter="random"), "jitter must be 'full'"),  # type: ignore[arg-type]
        (lambda: ExponentialBackoff(cap=float("inf")), "cap must be a positive finite"),
        (lambda: FixedBackoff([1, -1]), r"delays\[1\] must not be negative"),
    ],
)
def test_bad_policies(factory: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        factory()


def test_policy_type_errors() -> None:
    with pytest.raises(TypeError, match="retry_on must contain only exception classes"):
        ExponentialBackoff(retry_on=(int,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="delays must be a sequence"):
        FixedBackoff(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_attempts must be an int"):
        ExponentialBackoff(max_attempts=2.5)  # type: ignore[arg-type]


class Flaky:
    """Fails the first ``failures`` calls, then succeeds; records attempts and times."""

    def __init__(self, clock: FakeClock, failures: int) -> None:
        self.clock = clock
        self.failures = failures
        self.calls: list[tuple[int, float]] = []

    def __call__(self) -> str:
        run = current_run()
        assert run is not None
        self.calls.append((run.attempt, self.clock.monotonic()))
        if len(self.calls) <= self.failures:
            raise ConnectionError(f"attempt {run.attempt} failed")
        return "ok"


def test_retries_then_success(
    scheduler: Scheduler, fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    s, clock = scheduler, fake_clock
    rec = Recorder()
    s.subscribe(rec, JobFailed)
    flaky = Flaky(clock, failures=2)
    job = s.schedule(flaky, 1, retry=FixedBackoff([5, 30]))
    with caplog.at_level(logging.WARNING, logger="duetime"):
        s.run_for(100)
    assert flaky.calls == [(1, 1.0), (2, 6.0), (3, 36.0)]
    assert job.state is JobState.COMPLETED and job.attempt == 3 and job.failures == 2
    assert [e.retry_at for e in rec.of(JobFailed)] == [
        FAKE_START + timedelta(seconds=6),
        FAKE_START + timedelta(seconds=36),
    ]
    # One WARNING line per retried attempt, no traceback: the run recovered.
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage().rsplit("; ", 1)[1] for r in warnings] == [
        "retrying in 5.000 s",
        "retrying in 30.000 s",
    ]
    assert all(r.exc_info is None for r in warnings) and "Traceback" not in caplog.text
    assert s.failed() == []


def test_exhausted_dead_retry_failed_succeeds(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(start=FAKE_START)
    s = Scheduler(clock=clock, retry=FixedBackoff([5]))  # scheduler-wide default
    rec = Recorder()
    s.subscribe(rec, JobDead)
    flaky = Flaky(clock, failures=2)
    job = s.schedule(flaky, 1, id="webhook")
    with caplog.at_level(logging.ERROR, logger="duetime"):
        s.run_for(60)
    assert job.state is JobState.FAILED and "webhook" not in s
    (dead,) = s.failed()
    assert dead.job is job and dead.attempts == 2
    assert isinstance(dead.error, ConnectionError) and "attempt 2 failed" in dead.traceback
    assert dead.scheduled_time == FAKE_START + timedelta(seconds=1)
    assert dead.failed_at == FAKE_START + timedelta(seconds=6)
    assert [e.attempts for e in rec.of(JobDead)] == [2]
    # The last failure, the one that goes to the dead letters, is logged with its traceback.
    (error,) = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "is dead after 2 attempt(s)" in error.getMessage() and error.exc_info is not None

    again = s.retry_failed("webhook")
    assert again is job and s.failed() == [] and "webhook" in s
    s.run_pending()
    state: JobState = job.state
    assert state is JobState.COMPLETED and flaky.calls[-1][0] == 1
    with pytest.raises(JobLookupError, match="webhook"):
        s.retry_failed("webhook")


def test_discard_failed() -> None:
    clock = FakeClock()
    s = Scheduler(clock=clock)
    s.schedule(Flaky(clock, 1), 0, id="x")
    s.run_pending()
    assert s.discard_failed("x") is True
    assert s.discard_failed("x") is False
    assert s.failed() == []


def test_dead_letters_are_handled_by_job_or_letter_as_by_id(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    # (As cancel() and pause() take a Job or an id: a Job raised TypeError.)
    s = scheduler
    job = s.schedule(Flaky(fake_clock, 5), 0, id="x")
    s.schedule(Flaky(fake_clock, 5), 0, id="y")
    s.run_pending()
    assert s.retry_failed(job) is not None and s.get("x") is not None
    (letter,) = s.failed()
    assert letter.job.id == "y" and s.discard_failed(letter) is True and s.failed() == []
    with pytest.raises(TypeError, match="id must be a str, a Job or a FailedJob, got 5"):
        s.discard_failed(5)  # type: ignore[arg-type]
    # A handle from another scheduler names no letter here, though its id is the same.
    s.schedule(Flaky(fake_clock, 5), 0, id="z")
    s.run_pending()
    other = Scheduler(FakeClock()).schedule(print, 0, id="z")
    with pytest.raises(JobLookupError, match="no failed job with id 'z'"):
        s.discard_failed(other)
    assert "z" in [f.job.id for f in s.failed()]
    # Its id taken by a live job meanwhile: what to do, not "pass replace=True" (it has none).
    s.schedule(print, 60, id="z")
    with pytest.raises(
        ConflictingIdError, match=r"'z' is already scheduled; a live job has that id now: cancel"
    ):
        s.retry_failed("z")
    assert "z" in [f.job.id for f in s.failed()]


@pytest.mark.memory_only(
    "with a durable store every delay is on the wall clock (docs/durability.md)"
)
def test_retries_wait_in_monotonic_time(scheduler: Scheduler, fake_clock: FakeClock) -> None:
    s, clock = scheduler, fake_clock
    flaky = Flaky(clock, failures=1)
    s.schedule(flaky, 1, retry=FixedBackoff([60]))
    s.run_for(1)
    clock.jump_wall(timedelta(hours=5))  # a wall-clock step must not make the retry early
    s.run_pending()
    assert len(flaky.calls) == 1
    s.run_for(60)
    assert [a for a, _ in flaky.calls] == [1, 2]


def test_recurring_job_goes_on_after_a_dead_occurrence(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    s, clock = scheduler, fake_clock
    rec = Recorder()
    s.subscribe(rec, JobDead)
    calls: list[tuple[float, int]] = []

    def sometimes() -> None:
        run = current_run()
        assert run is not None
        calls.append((clock.monotonic(), run.attempt))
        if clock.monotonic() < 15:
            raise RuntimeError("early failures")

    job = s.schedule(sometimes, FixedRate(10), retry=FixedBackoff([2]))
    s.run_for(25)
    assert calls == [(10.0, 1), (12.0, 2), (20.0, 1)]
    assert job.state is JobState.SCHEDULED and len(rec.events) == 1
    assert s.failed() == []


def test_retry_of_a_cron_job_does_not_disturb_its_schedule() -> None:
    clock = FakeClock(start=FAKE_START)
    s = Scheduler(clock=clock, tz="UTC")
    flaky = Flaky(clock, failures=1)
    s.schedule(flaky, Cron("*/5 * * * *"), retry=FixedBackoff([30]))
    s.run_for(timedelta(minutes=10))
    assert [(a, t) for a, t in flaky.calls] == [(1, 300.0), (2, 330.0), (1, 600.0)]


def test_retry_policy_that_raises_is_logged_and_gives_up(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def delay(
            self, attempt: int, error: BaseException, rng: random.Random, previous: float | None
        ) -> float | None:
            raise ZeroDivisionError("policy bug")

    clock = FakeClock()
    s = Scheduler(clock=clock)
    job = s.schedule(Flaky(clock, 5), 0, retry=Broken())
    with caplog.at_level(logging.ERROR, logger="duetime"):
        s.run_pending()
    assert job.state is JobState.FAILED and "policy bug" in caplog.text
