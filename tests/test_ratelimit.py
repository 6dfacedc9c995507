"""TokenBucket: deferral to the exact instant a token exists, under a FakeClock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from duetime import FakeClock, InvalidArgument, JobDeferred, Scheduler, TokenBucket, current_run
from duetime.testing import FAKE_START

from .conftest import Recorder


@pytest.mark.memory_only("a TokenBucket lives in one process; a durable store refuses limiter=")
def test_n_jobs_due_at_once_start_exactly_a_tenth_apart_after_the_burst(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    s, clock = scheduler, fake_clock
    rec = Recorder()
    s.subscribe(rec, JobDeferred)
    bucket = TokenBucket(10, per=1.0, burst=5)
    starts: list[int] = []
    for _ in range(25):
        s.schedule(lambda: starts.append(clock.monotonic_ns()), 1, limiter=bucket)
    assert s.run_for(10) == 25
    second = 10**9
    assert starts[:5] == [second] * 5  # the burst
    assert starts[5:] == [second + k * 100_000_000 for k in range(1, 21)]  # exactly 0.1 s apart
    assert len(rec.events) == 20  # deferred once each, never polled, never dropped
    assert s.stats().deferred == 20


@pytest.mark.memory_only("a TokenBucket lives in one process; a durable store refuses limiter=")
def test_shared_bucket_across_jobs_and_scheduled_time_kept(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    s, clock = scheduler, fake_clock
    bucket = TokenBucket(1, per=timedelta(minutes=1))
    seen: list[tuple[str, timedelta, timedelta]] = []

    def job(name: str) -> None:
        run = current_run()
        assert run is not None
        seen.append((name, run.scheduled_time - FAKE_START, clock.now() - FAKE_START))

    s.schedule(job, 0, args=("a",), limiter=bucket)
    s.schedule(job, 0, args=("b",), limiter=bucket)
    s.run_for(timedelta(minutes=5))
    assert seen == [
        ("a", timedelta(0), timedelta(0)),
        ("b", timedelta(0), timedelta(minutes=1)),
    ]


def test_bucket_refills() -> None:
    b = TokenBucket(2, per=1.0, burst=2)
    now = 0
    assert [b.reserve(now) for _ in range(3)] == [0, 0, 500_000_000]
    later = 10 * 10**9
    assert b.reserve(later) == later  # refilled meanwhile
    assert b.interval == 0.5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0,), "rate must be a positive finite number"),
        ((float("nan"),), "rate must be a positive finite"),
        ((1, 0), "per must be positive"),
        ((1, 1.0, 0), "burst must be at least 1"),
    ],
)
def test_bad_buckets(args: tuple[float, ...], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        TokenBucket(*args)  # type: ignore[arg-type]


def test_bucket_type_errors() -> None:
    with pytest.raises(TypeError, match="rate must be a number"):
        TokenBucket("10")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="burst must be an int"):
        TokenBucket(10, burst=2.5)  # type: ignore[arg-type]
    assert "rate=10" in repr(TokenBucket(10))
