"""The core's figures: throughput, cancel cost and memory, beside its peers.

1. schedule + run N one-shot jobs, time driven by hand (virtual time), per event:
   duetime (Scheduler on a FakeClock, run_until), a bare heapq push/pop/call loop, the standard
   library's sched with a virtual clock, SimPy. (APScheduler cannot step time by hand.)
2. cancel with 1 000 000 pending (amortized, compaction included); stdlib sched at 20 000.
3. memory per pending one-shot job (tracemalloc): duetime vs APScheduler 3.x, sched, heapq.

Run: python benchmarks/bench_core.py  (or nox -s bench). All peers run in the same process and the
table prints ratios, because absolute numbers on a shared machine are noise.
"""

from __future__ import annotations

import heapq
import itertools
import random
import sched
import tracemalloc
from datetime import datetime, timedelta, timezone

from _common import median_times, parse, table

from duetime import EventQueue, FakeClock, Scheduler


def noop() -> None:
    pass


class VirtualTime:
    """The usual way to give the standard library's sched a virtual clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def throughput(n: int, repeat: int) -> None:
    rng = random.Random(1)
    delays = [rng.uniform(0, 86_400) for _ in range(n)]

    def duetime_run() -> None:
        s = Scheduler(clock=FakeClock())
        schedule = s.schedule
        for d in delays:
            schedule(noop, d)
        assert s.run_until(86_401.0) == n

    def heapq_run() -> None:
        h: list[tuple[float, int, object]] = []
        c = itertools.count()
        for d in delays:
            heapq.heappush(h, (d, next(c), noop))
        while h:
            heapq.heappop(h)[2]()  # type: ignore[operator]

    def sched_run() -> None:
        vt = VirtualTime()
        s = sched.scheduler(vt.time, vt.sleep)
        for d in delays:
            s.enterabs(d, 0, noop)
        s.run()

    def simpy_run() -> None:
        import simpy

        env = simpy.Environment()
        for d in delays:
            env.timeout(d).callbacks.append(lambda _event: noop())
        env.run()

    peers = {
        "duetime Scheduler.run_until": duetime_run,
        "bare heapq push/pop/call": heapq_run,
        "stdlib sched (virtual clock)": sched_run,
    }
    try:
        import simpy  # noqa: F401

        peers["SimPy Environment"] = simpy_run
    except ImportError:
        pass
    medians = median_times(peers, repeat)
    rows: list[tuple[str, float | None]] = [(name, t / n * 1e6) for name, t in medians.items()]
    if "SimPy Environment" not in medians:
        rows.append(("SimPy Environment", None))
    table(
        f"schedule + run {n:,} one-shot jobs, virtual time",
        "µs/event",
        rows,
        "stdlib sched (virtual clock)",
    )
    table("", "µs/event", rows, "bare heapq push/pop/call")


def cancel_cost(pending: int, sched_pending: int, repeat: int) -> None:
    rng = random.Random(2)

    def duetime_cancel() -> float:
        s = Scheduler(clock=FakeClock())
        jobs = [s.schedule(noop, rng.uniform(1, 1e6)) for _ in range(pending)]
        import time

        t0 = time.perf_counter()
        for j in jobs:
            s.cancel(j)
        return (time.perf_counter() - t0) / pending

    def queue_cancel() -> float:
        q: EventQueue[int] = EventQueue()
        for i in range(pending):
            q.push(i, rng.random())
        import time

        t0 = time.perf_counter()
        for i in range(pending):
            q.cancel(i)
        return (time.perf_counter() - t0) / pending

    def sched_cancel() -> float:
        s = sched.scheduler()
        evs = [s.enterabs(rng.uniform(1, 1e6), 0, noop) for _ in range(sched_pending)]
        import time

        t0 = time.perf_counter()
        for ev in evs:
            s.cancel(ev)
        return (time.perf_counter() - t0) / sched_pending

    import statistics

    rows: list[tuple[str, float | None]] = [
        (
            f"duetime Scheduler.cancel @{pending:,}",
            statistics.median(duetime_cancel() for _ in range(repeat)) * 1e6,
        ),
        (
            f"duetime EventQueue.cancel @{pending:,}",
            statistics.median(queue_cancel() for _ in range(repeat)) * 1e6,
        ),
        (
            f"stdlib sched.cancel @{sched_pending:,}",
            statistics.median(sched_cancel() for _ in range(repeat)) * 1e6,
        ),
    ]
    table(
        "cancel every pending job (amortized, compaction included)", "µs/cancel", rows, rows[0][0]
    )


def memory(n: int) -> None:
    """Marginal bytes per pending job: (M(2n) - M(n)) / n, so that fixed costs (imports, a
    scheduler's own objects, threads, dict size steps) cancel out of every peer alike."""
    start = datetime(2026, 1, 5, tzinfo=timezone.utc)

    def duetime_jobs(k: int) -> object:
        s = Scheduler(clock=FakeClock(start=start))
        for i in range(k):
            s.schedule(noop, float(i + 1))
        return s

    def duetime_datetime_jobs(k: int) -> object:
        s = Scheduler(clock=FakeClock(start=start))
        for i in range(k):
            s.schedule(noop, start + timedelta(seconds=i + 1))
        return s

    def apscheduler_jobs(k: int) -> object:
        from apscheduler.schedulers.background import BackgroundScheduler

        s = BackgroundScheduler(timezone="UTC")
        s.start(paused=True)
        run_at = datetime.now(timezone.utc) + timedelta(days=1)
        for i in range(k):
            s.add_job(noop, "date", run_date=run_at + timedelta(seconds=i))
        return s

    def sched_events(k: int) -> object:
        s = sched.scheduler()
        for i in range(k):
            s.enterabs(float(i + 1), 0, noop)
        return s

    def heapq_entries(k: int) -> object:
        h: list[tuple[float, int, object]] = []
        for i in range(k):
            heapq.heappush(h, (float(i + 1), i, noop))
        return h

    def marginal(build: object) -> float:
        sizes = []
        for k in (n, 2 * n):
            tracemalloc.start()
            keep = build(k)  # type: ignore[operator]
            size, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            if hasattr(keep, "shutdown"):
                keep.shutdown(wait=False)
            del keep
            sizes.append(size)
        return (sizes[1] - sizes[0]) / n

    rows: list[tuple[str, float | None]] = [
        ("duetime (delay in seconds)", marginal(duetime_jobs)),
        ("duetime (aware datetime)", marginal(duetime_datetime_jobs)),
    ]
    try:
        apscheduler_jobs(10).shutdown(wait=False)  # type: ignore[attr-defined]  # import, warm up
        rows.append(("APScheduler 3.x BackgroundScheduler", marginal(apscheduler_jobs)))
    except ImportError:
        rows.append(("APScheduler 3.x BackgroundScheduler", None))
    rows += [
        ("stdlib sched", marginal(sched_events)),
        ("bare heapq tuple", marginal(heapq_entries)),
    ]
    ref = "APScheduler 3.x BackgroundScheduler" if rows[2][1] else rows[0][0]
    table(
        f"memory per pending one-shot job (marginal, {n:,} -> {2 * n:,} jobs, tracemalloc)",
        "bytes/job",
        rows,
        ref,
    )


def main() -> None:
    args = parse(__doc__ or "", jobs=True)
    if args.jobs is not None:
        throughput(args.jobs, args.repeat)
    elif args.quick:
        throughput(20_000, 1)
        cancel_cost(20_000, 2_000, 1)
        memory(2_000)
    else:
        throughput(200_000, args.repeat)
        cancel_cost(1_000_000, 20_000, 3)
        memory(20_000)


if __name__ == "__main__":
    main()
