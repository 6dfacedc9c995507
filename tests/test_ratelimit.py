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


@pytest.mark.memory_only("a TokenBucket lives in one process; a durable store refuses limiter=")
def test_a_job_paused_past_its_reserved_instant_takes_a_new_token_on_resume(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    s, clock = scheduler, fake_clock
    t0 = clock.monotonic_ns()
    bucket = TokenBucket(1, burst=1)
    starts: list[tuple[str, int]] = []

    def start(name: str) -> None:
        starts.append((name, (clock.monotonic_ns() - t0) // 10**9))

    for name in ("a", "b"):
        s.schedule(start, 1, args=[name], id=name, limiter=bucket)
    s.run_for(1)  # a starts at 1 s; b is deferred to its token at 2 s
    s.pause("b")
    s.run_for(9)
    s.schedule(start, 0, args=["c"], id="c", limiter=bucket)
    s.resume("b")  # b's token (2 s) went unused: it takes the one at 10 s, c the one at 11 s
    s.run_for(5)
    assert starts == [("a", 1), ("b", 10), ("c", 11)]


@pytest.mark.memory_only("a TokenBucket lives in one process; a durable store refuses limiter=")
def test_a_job_resumed_before_its_reserved_instant_keeps_its_token(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    s, clock = scheduler, fake_clock
    t0 = clock.monotonic_ns()
    bucket = TokenBucket(1, burst=1)
    starts: list[int] = []
    for name in ("x", "y"):
        s.schedule(lambda: starts.append(clock.monotonic_ns() - t0), 1, id=name, limiter=bucket)
    s.run_for(1)  # x starts at 1 s; y is deferred to its token at 2 s
    s.pause("y")
    s.resume("y")
    s.run_for(5)
    assert starts == [10**9, 2 * 10**9]  # (not 3 s: no second token taken)


def test_tokens_do_not_drift_at_a_rate_that_is_no_whole_number_of_nanoseconds() -> None:
    # 3 a second: a token every 333 333 333.3 ns; each one at the first whole nanosecond at or
    # after its exact instant, so that the 3 001st is due at 1 000 s, not 1 000 ns earlier.
    b = TokenBucket(3, per=1.0, burst=1)
    starts = [b.reserve(0) for _ in range(3001)]
    assert starts[:5] == [0, 333_333_334, 666_666_667, 1_000_000_000, 1_333_333_334]
    assert starts[3000] == 1000 * 10**9
    assert b.interval == pytest.approx(1 / 3)


def test_reserve_takes_integer_nanoseconds_and_takes_no_token_otherwise() -> None:
    b = TokenBucket(1, burst=1)
    with pytest.raises(TypeError, match="now_ns must be an int"):
        b.reserve(float("nan"))  # type: ignore[arg-type]
    assert b.reserve(0) == 0  # (the bucket was still full)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0,), "rate must be a positive finite number"),
        ((float("nan"),), "rate must be a positive finite"),
        ((1, 0), "per must be positive"),
        ((1, 1.0, 0), "burst must be at least 1"),
        ((1e-300,), "rate must give a token at least every thousand years"),
        ((1e-15,), r"got rate=1e-15 per 1.0"),
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
