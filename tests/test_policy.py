"""The pure policy functions, on their own: no scheduler, no clock moving, no queue."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime import Cron, ExponentialBackoff, FakeClock, FixedBackoff, FixedDelay, FixedRate
from duetime.job import JobState, Misfire, Overlap
from duetime.policy import (
    Verdict,
    dead_letter,
    jittered,
    overlap,
    plan_misfire,
    resting_state,
    retry_delay,
)
from duetime.recurrence import SKIP_COUNT_LIMIT, Env
from duetime.testing import FAKE_START

S = 1_000_000_000
ENV = Env(FakeClock(start=FAKE_START), random.Random(0), FAKE_START.tzinfo)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("running", "policy", "recurring_regular", "has_held", "verdict"),
    [
        (0, Overlap.SKIP, True, False, Verdict.START),
        (1, Overlap.ALLOW, True, False, Verdict.START),
        (1, Overlap.SKIP, True, False, Verdict.SKIP),
        (1, Overlap.QUEUE, True, False, Verdict.HOLD),
        (1, Overlap.QUEUE, True, True, Verdict.COALESCE),
        # A one-shot's own run, a retry or a trigger() is never skipped: it waits.
        (1, Overlap.SKIP, False, False, Verdict.HOLD),
        (1, Overlap.QUEUE, False, True, Verdict.HOLD),
        (2, Overlap.ALLOW, False, False, Verdict.START),
    ],
)
def test_overlap(
    running: int, policy: Overlap, recurring_regular: bool, has_held: bool, verdict: Verdict
) -> None:
    assert (
        overlap(running, policy, recurring_regular=recurring_regular, has_held=has_held) is verdict
    )


@given(
    running=st.integers(0, 3),
    policy=st.sampled_from(Overlap),
    recurring_regular=st.booleans(),
    has_held=st.booleans(),
)
def test_overlap_never_starts_beside_a_run_unless_allowed(
    running: int, policy: Overlap, recurring_regular: bool, has_held: bool
) -> None:
    verdict = overlap(running, policy, recurring_regular=recurring_regular, has_held=has_held)
    if running and policy is not Overlap.ALLOW:
        assert verdict is not Verdict.START
        if not recurring_regular:
            assert verdict is Verdict.HOLD


def plan(
    trigger: Any, late: int, misfire: Misfire, catching_up: bool = False, grace: int = S
) -> Any:
    base = 100 * S
    return plan_misfire(
        trigger,
        base,
        late,
        base + late,
        grace=grace,
        policy=misfire,
        catching_up=catching_up,
        env=ENV,
    )


@pytest.mark.parametrize("misfire", list(Misfire))
def test_on_time_runs_and_queues_the_next(misfire: Misfire) -> None:
    p = plan(FixedRate(10), late=S, misfire=misfire)  # within the 1 s grace
    assert (p.run, p.next_base, p.missed, p.exact, p.catchup) == (True, 110 * S, 0, True, False)


def test_late_run_once_coalesces_the_missed_ones() -> None:
    p = plan(FixedRate(10), late=35 * S, misfire=Misfire.RUN_ONCE)
    # Due at 100, now 135: 110, 120, 130 were missed; this one runs, the next is 140.
    assert (p.run, p.next_base, p.missed, p.exact) == (True, 140 * S, 3, True)


def test_late_skip_drops_this_one_too() -> None:
    p = plan(FixedRate(10), late=35 * S, misfire=Misfire.SKIP)
    assert (p.run, p.next_base, p.missed) == (False, 140 * S, 4)


def test_late_run_all_catches_up_one_at_a_time() -> None:
    first = plan(FixedRate(10), late=35 * S, misfire=Misfire.RUN_ALL)
    assert (first.run, first.next_base, first.missed, first.catchup) == (True, 110 * S, 0, True)
    again = plan(FixedRate(10), late=25 * S, misfire=Misfire.RUN_ALL, catching_up=True)
    assert (again.run, again.next_base, again.catchup) == (True, 110 * S, True)
    caught_up = plan(FixedRate(10), late=0, misfire=Misfire.RUN_ALL, catching_up=True)
    assert caught_up.catchup is False


def test_run_all_coalesces_a_backlog_too_large_to_run() -> None:
    p = plan(FixedRate(1), late=(SKIP_COUNT_LIMIT + 10) * S, misfire=Misfire.RUN_ALL)
    assert p.run and not p.catchup and not p.exact and p.missed >= SKIP_COUNT_LIMIT


def test_fixed_delay_is_planned_when_it_finishes() -> None:
    assert plan(FixedDelay(10), late=35 * S, misfire=Misfire.RUN_ONCE).next_base is None
    skipped = plan(FixedDelay(10), late=35 * S, misfire=Misfire.SKIP)
    assert not skipped.run and skipped.missed == 1 and skipped.next_base is not None


def test_cron_misfire_counts_by_walking() -> None:
    cron = Cron("* * * * *", tz="UTC")
    base = int(FAKE_START.timestamp()) * S
    p = plan_misfire(
        cron,
        base,
        180 * S,
        base + 180 * S,
        grace=S,
        policy=Misfire.RUN_ONCE,
        catching_up=False,
        env=ENV,
    )
    assert (p.run, p.missed, p.next_base) == (True, 3, base + 240 * S)


@given(base=st.integers(0, 10**12), jitter=st.integers(0, 10**10), seed=st.integers(0, 100))
def test_jitter_is_within_bounds_and_from_the_base(base: int, jitter: int, seed: int) -> None:
    due = jittered(base, jitter, random.Random(seed))
    assert base <= due <= base + jitter
    assert jittered(base, 0, random.Random(seed)) == base


def test_retry_delay_follows_the_policy_and_contains_a_broken_one() -> None:
    from decimal import Decimal

    rng = random.Random(0)
    assert retry_delay(FixedBackoff([5, 30]), 1, ValueError(), rng, None) == (5, None, None)
    assert retry_delay(FixedBackoff([5, 30]), 3, ValueError(), rng, 30) == (None, None, None)
    assert retry_delay(ExponentialBackoff(retry_on=(KeyError,)), 1, ValueError(), rng, None) == (
        None,
        None,
        None,
    )

    class Returns:
        def __init__(self, value: object) -> None:
            self.value = value

        def delay(self, *args: object) -> Any:
            return self.value

    class Raises:
        def delay(self, *args: object) -> float | None:
            raise RuntimeError("boom")

    delay, why, raised = retry_delay(Raises(), 1, ValueError(), rng, None)
    assert (delay, why) == (None, "raised RuntimeError: boom") and isinstance(raised, RuntimeError)
    # (True and False too: a policy returning "attempt < 3" retried at 1 s and at once, for ever.)
    for bad in (-1.0, float("nan"), float("inf"), "5", True, False):
        assert retry_delay(Returns(bad), 1, ValueError(), rng, None) == (
            None,
            f"returned {bad!r} (not seconds from 0 to a thousand years)",
            None,
        )
    # A delay past a thousand years would fail where a datetime is made of it: refused too.
    assert retry_delay(Returns(1e12), 1, ValueError(), rng, None)[:2] == (
        None,
        "returned 1000000000000.0 (not seconds from 0 to a thousand years)",
    )
    # A timedelta is a delay, as FixedBackoff takes one.
    assert retry_delay(Returns(timedelta(seconds=90)), 1, ValueError(), rng, None) == (
        90,
        None,
        None,
    )
    # Any finite real number of seconds >= 0 is a delay (a bool is not one: see above).
    for good in (0, 2.5, Decimal("1.5")):
        assert retry_delay(Returns(good), 1, ValueError(), rng, None) == (good, None, None)


@pytest.mark.parametrize(
    ("live", "recurring", "pending", "running", "expected"),
    [
        (True, False, False, 0, True),
        (False, False, False, 0, False),  # cancelled
        (True, True, False, 0, False),  # a recurring job goes on
        (True, False, True, 0, False),  # something else is queued
        (True, False, False, 1, False),  # another run is going
    ],
)
def test_dead_letter(
    live: bool, recurring: bool, pending: bool, running: int, expected: bool
) -> None:
    assert dead_letter(live=live, recurring=recurring, pending=pending, running=running) is expected


@pytest.mark.parametrize(
    ("state", "running", "pending", "failed", "expected"),
    [
        (JobState.SCHEDULED, 1, False, False, JobState.RUNNING),
        (JobState.RUNNING, 0, True, False, JobState.SCHEDULED),
        (JobState.RUNNING, 1, True, False, None),
        (JobState.RUNNING, 0, False, False, JobState.COMPLETED),
        (JobState.RUNNING, 0, False, True, JobState.FAILED),
        (JobState.PAUSED, 1, True, False, None),  # stays paused while anything is left
        (JobState.PAUSED, 0, False, False, JobState.COMPLETED),
        (JobState.CANCELLED, 0, False, False, None),
    ],
)
def test_resting_state(
    state: JobState, running: int, pending: bool, failed: bool, expected: JobState | None
) -> None:
    assert resting_state(state, running=running, pending=pending, failed=failed) is expected
