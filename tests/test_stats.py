"""Scheduler.stats(): counters and the bounded lateness histogram."""

from __future__ import annotations

import math
import random
from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from duetime import FakeClock, FixedBackoff, Scheduler
from duetime.stats import RELATIVE_ERROR, StatsRecorder


def exact_percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1] / 1e9


@given(
    st.lists(st.integers(0, 10**12), min_size=1, max_size=500), st.sampled_from([0.5, 0.95, 0.99])
)
@settings(max_examples=200, deadline=None)
def test_percentiles_match_a_sorted_list_within_the_stated_error(
    lateness: list[int], q: float
) -> None:
    rec = StatsRecorder()
    for ns in lateness:
        if ns > 0:
            rec.record_late(ns)
    got = rec.percentile(q, len(lateness))
    want = exact_percentile(lateness, q)
    assert abs(got - want) <= want * RELATIVE_ERROR + 1e-9


def test_histogram_memory_does_not_grow_with_runs() -> None:
    rec = StatsRecorder()
    rng = random.Random(0)
    for _ in range(200_000):
        rec.record_late(int(rng.lognormvariate(15, 3)) + 1)
    assert len(rec.buckets) < 64 * 2**7


def test_stats_counts_outcomes_and_queue_sizes() -> None:
    clock = FakeClock()
    s = Scheduler(clock=clock)

    def boom() -> None:
        raise ValueError

    s.schedule(print, 0)
    s.schedule(boom, 0, retry=FixedBackoff([1]))
    for _ in range(300):
        s.schedule(print, 100).cancel()
    clock.advance(2)
    s.run_pending()  # both 2 s late; boom fails and queues its retry 1 s after the failure
    clock.advance(1)
    s.run_pending()  # the retry, on time, fails for good
    st = s.stats()
    assert st.succeeded == 1 and st.failed == 2 and st.retried == 1 and st.dead == 1
    assert st.started == 3 and st.running == 0 and st.jobs == 0
    assert st.live_entries == 0 and st.compactions >= 1
    assert st.lateness.count == 3 and st.lateness.max == 2.0
    assert abs(st.lateness.p50 - 2.0) <= 2.0 * RELATIVE_ERROR


def test_lateness_of_wall_clock_and_monotonic_one_shots() -> None:
    # Both kinds take run_until's fast path; lateness must be measured in one timebase.
    clock = FakeClock(start=datetime(2026, 1, 5, 8, 0, tzinfo=timezone.utc))
    s = Scheduler(clock=clock)
    s.schedule(print, datetime(2026, 1, 5, 8, 0, 3, tzinfo=timezone.utc))  # wall clock
    s.schedule(print, 4)  # monotonic
    s.schedule(print, 60)  # run on time by run_until below
    clock.advance(7)
    assert s.run_for(0) == 2  # both late
    assert s.run_for(60) == 1
    st = s.stats()
    assert st.lateness.count == 3 and st.lateness.max == 4.0  # 4 s (wall) and 3 s late
    assert st.succeeded == 3
