"""Counters and a bounded-memory lateness histogram for ``Scheduler.stats()``.

Lateness (start time minus due time) is kept in a log-linear histogram: values below
``2**SUB_BITS`` nanoseconds are exact, larger ones fall in buckets ``2**(SUB_BITS - 1)`` to a power
of two, so a bucket is at most 1/64 of its lower bound wide and a reported percentile (the bucket's
midpoint) is within ``RELATIVE_ERROR`` of the true value. The number of buckets is bounded by the
width of a 64-bit value, whatever the number of runs: a scheduler that runs for a year uses the
same few kilobytes as one that ran for a second.
"""

from __future__ import annotations

from dataclasses import dataclass

from duetime._validate import NS_PER_SECOND

__all__ = ["RELATIVE_ERROR", "Lateness", "Stats"]

SUB_BITS = 7
#: Largest relative error of a reported percentile (half a bucket's width over its lower bound).
RELATIVE_ERROR = 1 / 2**SUB_BITS


@dataclass(frozen=True, slots=True)
class Lateness:
    """Start-lateness percentiles, in seconds (start time minus due time).

    Attributes:
        count: Occurrences measured.
        p50: Median lateness in seconds.
        p95: 95th percentile in seconds.
        p99: 99th percentile in seconds.
        max: Largest lateness seen, in seconds (exact).
    """

    count: int
    p50: float
    p95: float
    p99: float
    max: float


@dataclass(frozen=True, slots=True)
class Stats:
    """A snapshot of a scheduler's counters.

    Attributes:
        jobs: Live jobs.
        running: Occurrences begun and not finished: running, or handed to an executor and
            waiting in its queue (or, with a durable store, claimed for the runner's batch).
        live_entries: Live queue entries (regular and side occurrences).
        stale_entries: Dead entries still in the heaps, awaiting discard or compaction.
        compactions: Heap rebuilds so far.
        started: Occurrence attempts started.
        succeeded: Attempts that returned normally.
        failed: Attempts that raised.
        retried: Retries queued.
        dead: Occurrences that failed their last allowed attempt.
        missed: Occurrences coalesced or skipped by the misfire policy.
        skipped: Occurrences skipped because the previous run was still going.
        deferred: Starts deferred by a rate limiter.
        held: Occurrences waiting for a run of the same job to end (``Overlap.QUEUE``, or a
            retry or ``trigger()`` of a job that is running).
        blocked: Occurrences waiting for a ``max_concurrent`` slot.
        lateness: Start-lateness percentiles.
    """

    jobs: int
    running: int
    live_entries: int
    stale_entries: int
    compactions: int
    started: int
    succeeded: int
    failed: int
    retried: int
    dead: int
    missed: int
    skipped: int
    deferred: int
    held: int
    blocked: int
    lateness: Lateness


class StatsRecorder:
    """The mutable side of ``Stats``; updated under the scheduler's lock."""

    __slots__ = (
        "buckets",
        "dead",
        "deferred",
        "failed",
        "max_late",
        "missed",
        "retried",
        "skipped",
        "succeeded",
    )

    def __init__(self) -> None:
        self.succeeded = 0
        self.failed = 0
        self.retried = 0
        self.dead = 0
        self.missed = 0
        self.skipped = 0
        self.deferred = 0
        # Only late starts touch the histogram; on-time ones (all of them under run_until) are
        # counted as the difference between starts and histogram entries, so they cost nothing.
        self.max_late = 0
        self.buckets: dict[int, int] = {}

    def record_late(self, ns: int) -> None:
        """Record one start that was ``ns`` > 0 nanoseconds late."""
        self.max_late = max(self.max_late, ns)
        if ns >= 1 << SUB_BITS:
            shift = ns.bit_length() - SUB_BITS
            ns = (ns >> shift) << shift
        buckets = self.buckets
        buckets[ns] = buckets.get(ns, 0) + 1

    def percentile(self, q: float, started: int) -> float:
        """The ``q``-quantile (0 < q <= 1) of lateness over ``started`` starts, in seconds."""
        late = sum(self.buckets.values())
        total = max(started, late)
        if total == 0:
            return 0.0
        rank = max(1, -(-int(q * total * 1_000_000) // 1_000_000))  # ceil without float fuzz
        seen = total - late
        if rank <= seen:
            return 0.0
        for low in sorted(self.buckets):
            seen += self.buckets[low]
            if seen >= rank:
                width = 1 if low < 1 << SUB_BITS else 1 << (low.bit_length() - SUB_BITS)
                mid = low + (width - 1) / 2
                return min(mid, self.max_late) / NS_PER_SECOND
        return self.max_late / NS_PER_SECOND

    def snapshot(
        self,
        *,
        live: int,
        stale: int,
        compactions: int,
        jobs: int,
        running: int,
        held: int,
        blocked: int,
    ) -> Stats:
        """Freeze the counters into a ``Stats``."""
        started = self.succeeded + self.failed + running
        return Stats(
            jobs=jobs,
            running=running,
            live_entries=live,
            stale_entries=stale,
            compactions=compactions,
            started=started,
            succeeded=self.succeeded,
            failed=self.failed,
            retried=self.retried,
            dead=self.dead,
            missed=self.missed,
            skipped=self.skipped,
            deferred=self.deferred,
            held=held,
            blocked=blocked,
            lateness=Lateness(
                count=started,
                p50=self.percentile(0.50, started),
                p95=self.percentile(0.95, started),
                p99=self.percentile(0.99, started),
                max=self.max_late / NS_PER_SECOND,
            ),
        )
