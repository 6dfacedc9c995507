"""Runner figures: the runner thread on the real clock, beside APScheduler 3.x and sched.

1. lateness (start - due) of on-time jobs: duetime's runner (thread pool and inline) and
   APScheduler's BackgroundScheduler, the same jobs at the same spacing;
2. wake-up: a job inserted for now + 10 ms while the runner sleeps toward now + 1 h; the standard
   library's sched (which sleeps in time.sleep and cannot wake) beside it;
3. idle cost: CPU seconds used over 10 s with 1 000 jobs pending an hour out.

Run: python benchmarks/bench_runner.py (nox -s bench). Real time is the point here.
"""

from __future__ import annotations

import resource
import sched
import statistics
import threading
import time
from datetime import datetime, timedelta, timezone

from _common import parse

from duetime import Scheduler


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(name: str, lateness_ms: list[float]) -> None:
    print(
        f"  {name:38} p50 {statistics.median(lateness_ms):7.3f} ms   "
        f"p99 {pct(lateness_ms, 0.99):7.3f} ms   max {max(lateness_ms):7.3f} ms   n={len(lateness_ms)}"
    )


def duetime_lateness(n: int, spacing: float, executor: object) -> list[float]:
    out: list[float] = []
    done = threading.Event()
    lock = threading.Lock()

    def job(due_ns: int) -> None:
        late = (time.monotonic_ns() - due_ns) / 1e6
        with lock:
            out.append(late)
            if len(out) == n:
                done.set()

    with Scheduler(executor=executor) as s:
        base = time.monotonic_ns() + 50_000_000
        for i in range(n):
            due = base + int(i * spacing * 1e9)
            s.schedule(job, (due - time.monotonic_ns()) / 1e9, args=(due,))
        done.wait(n * spacing + 10)
    return out


def apscheduler_lateness(n: int, spacing: float) -> list[float] | None:
    try:
        from apscheduler.schedulers.background import BackgroundScheduler
    except ImportError:
        return None
    out: list[float] = []
    done = threading.Event()
    lock = threading.Lock()

    def job(due: float) -> None:
        late = (time.time() - due) * 1e3
        with lock:
            out.append(late)
            if len(out) == n:
                done.set()

    s = BackgroundScheduler(timezone="UTC", job_defaults={"misfire_grace_time": 60})
    s.start()
    base = time.time() + 0.05
    for i in range(n):
        due = base + i * spacing
        s.add_job(job, "date", run_date=datetime.fromtimestamp(due, timezone.utc), args=(due,))
    done.wait(n * spacing + 10)
    s.shutdown(wait=False)
    return out


def wakeup(trials: int) -> None:
    late: list[float] = []
    with Scheduler(executor="inline") as s:
        s.schedule(print, timedelta(hours=1))  # the runner sleeps toward this
        for _ in range(trials):
            ran = threading.Event()
            box: list[float] = []
            time.sleep(0.02)  # let the runner settle into its long sleep
            due = time.monotonic_ns() + 10_000_000

            def job(due: int = due, box: list[float] = box, ran: threading.Event = ran) -> None:
                box.append((time.monotonic_ns() - due) / 1e6)
                ran.set()

            s.schedule(job, (due - time.monotonic_ns()) / 1e9)
            ran.wait(5)
            late.extend(box)
    report("duetime: insert now+10ms, head at +1h", late)

    s2 = sched.scheduler()
    s2.enter(3600, 0, print)
    t = threading.Thread(target=s2.run, daemon=True)
    t.start()
    time.sleep(0.02)
    ran = threading.Event()
    s2.enter(0.01, 0, ran.set)
    woke = ran.wait(1.0)
    print(
        f"  {'stdlib sched: same insert':38} {'ran' if woke else 'did not run within 1 s (stuck in time.sleep until +1h)'}"
    )


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def idle_cost(seconds: float, pending: int) -> None:
    with Scheduler() as s:
        for i in range(pending):
            s.schedule(print, timedelta(hours=1, seconds=i))
        time.sleep(0.2)
        c0 = cpu_seconds()
        time.sleep(seconds)
        used = cpu_seconds() - c0
    print(f"  {'duetime, 1 000 monotonic jobs at +1 h':38} {used:.4f} CPU s over {seconds:.0f} s")
    with Scheduler() as s:
        for i in range(pending):
            s.schedule(print, datetime.now(timezone.utc) + timedelta(hours=1, seconds=i))
        time.sleep(0.2)
        c0 = cpu_seconds()
        time.sleep(seconds)
        used = cpu_seconds() - c0
    print(f"  {'duetime, 1 000 wall-clock jobs at +1 h':38} {used:.4f} CPU s over {seconds:.0f} s")
    try:
        from apscheduler.schedulers.background import BackgroundScheduler
    except ImportError:
        return
    aps = BackgroundScheduler(timezone="UTC")
    aps.start()
    for i in range(pending):
        aps.add_job(
            print, "date", run_date=datetime.now(timezone.utc) + timedelta(hours=1, seconds=i)
        )
    time.sleep(0.2)
    c0 = cpu_seconds()
    time.sleep(seconds)
    used = cpu_seconds() - c0
    aps.shutdown(wait=False)
    print(f"  {'APScheduler 3.x, 1 000 jobs at +1 h':38} {used:.4f} CPU s over {seconds:.0f} s")


def main() -> None:
    args = parse(__doc__ or "")
    n, spacing = (100, 0.005) if args.quick else (1000, 0.005)
    print(f"\nlateness of on-time jobs ({n} jobs, one every {spacing * 1e3:.0f} ms, SystemClock)")
    report("duetime, default thread pool", duetime_lateness(n, spacing, None))
    report("duetime, executor='inline'", duetime_lateness(n, spacing, "inline"))
    aps = apscheduler_lateness(n, spacing)
    if aps is not None:
        report("APScheduler 3.x BackgroundScheduler", aps)
    print("\nwake-up for an earlier insert")
    wakeup(20 if args.quick else 200)
    print("\nidle cost")
    idle_cost(1.0 if args.quick else 10.0, 1000)


if __name__ == "__main__":
    main()
