"""The runner thread, driven by a FakeClock: no test sleeps for real."""

from __future__ import annotations

import concurrent.futures as cf
import logging
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from duetime import (
    At,
    Event,
    FakeClock,
    FixedRate,
    JobSkipped,
    JobStarted,
    JobState,
    JobSucceeded,
    Misfire,
    Overlap,
    Scheduler,
    SchedulerShutdownError,
    SchedulerStarted,
    SchedulerStopped,
    current_run,
)
from duetime.testing import FAKE_START

from .conftest import WAIT, Recorder, until

T = TypeVar("T")


class CountingClock(FakeClock):
    """A FakeClock that counts how often a runner returns from a sleep, and keeps the condition
    the runner sleeps on (the Clock protocol hands it over) so tests can count notifications."""

    def __init__(self) -> None:
        super().__init__(start=FAKE_START)
        self.wakeups = 0
        self.sleeping = 0
        self.condition: threading.Condition | None = None

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        self.condition = condition
        self.sleeping += 1
        try:
            super().wait(condition, timeout)
        finally:
            self.sleeping -= 1
        self.wakeups += 1


@pytest.fixture
def clock() -> CountingClock:
    return CountingClock()


@pytest.fixture
def running(clock: CountingClock) -> Iterator[Scheduler]:
    s = Scheduler(clock=clock, rng=random.Random(0))
    s.start()
    try:
        yield s
    finally:
        s.shutdown(wait=True)


def test_runs_due_work_when_fake_time_moves(running: Scheduler, clock: FakeClock) -> None:
    ran = threading.Event()
    running.schedule(ran.set, 10)
    assert running.wait_idle(WAIT)
    assert not ran.is_set()
    clock.advance(10)
    assert ran.wait(WAIT)
    assert running.wait_idle(WAIT)


@pytest.mark.parametrize(
    ("when", "advance", "misfire", "expected"),
    [
        # 08:00:01 (late by the grace, one second) and 08:00:02 (on time)
        (FixedRate(1), 2, Misfire.RUN_ONCE, [1.0, 2.0]),
        (FixedRate(0.5), 1, Misfire.RUN_ONCE, [0.5, 1.0]),
        # a catch-up, whose last fire is on time
        ("* * * * * *", 10, Misfire.RUN_ALL, [float(i) for i in range(1, 11)]),
    ],
)
def test_occurrences_due_together_all_run_under_the_thread_runner(
    running: Scheduler,
    clock: FakeClock,
    when: Any,
    advance: float,
    misfire: Misfire,
    expected: list[float],
) -> None:
    # The runner hands the first to its pool and meets the next at once, the first still
    # going: that run did not overlap the next (it came first), so the next waits for it
    # rather than being skipped under Overlap.SKIP, as run_pending() runs them both.
    rec = Recorder()
    running.subscribe(rec, JobSkipped)
    ran: list[float] = []
    lock = threading.Lock()

    def job() -> None:
        run = current_run()
        assert run is not None
        with lock:
            ran.append((run.scheduled_time - FAKE_START).total_seconds())

    running.schedule(job, when, misfire=misfire)
    clock.advance(advance)
    until(lambda: len(ran) >= len(expected), what="every due occurrence run")
    assert running.wait_idle(WAIT)
    assert sorted(ran) == expected and rec.events == []


def test_a_rescheduled_job_forgets_the_old_recurrence_s_waiting_occurrence(
    running: Scheduler, clock: FakeClock
) -> None:
    # FixedRate(1) after advance(2): the run of 08:00:01 starts with 08:00:02 due already, so
    # that one waits for it. Rescheduled meanwhile, the new recurrence's first fire (08:00:07)
    # comes due while that run goes on: it met the run (started before it came due) and is
    # skipped under Overlap.SKIP, as it is when nothing was waiting.
    rec = Recorder()
    running.subscribe(rec, JobSkipped)
    gate = threading.Event()
    ran: list[float] = []

    def job() -> None:
        run = current_run()
        assert run is not None
        ran.append((run.scheduled_time - FAKE_START).total_seconds())
        gate.wait(WAIT)

    running.schedule(job, FixedRate(1), id="j")
    clock.advance(2)
    until(lambda: ran == [1.0], what="the first run started")
    running.reschedule("j", FixedRate(5))
    clock.advance(5)
    until(lambda: len(rec.events) == 1, what="the new fire skipped")
    gate.set()
    assert running.wait_idle(WAIT)
    assert ran == [1.0]
    assert [e.scheduled_time - FAKE_START for e in rec.of(JobSkipped)] == [timedelta(seconds=7)]


def test_an_earlier_insert_wakes_the_sleeping_runner(running: Scheduler) -> None:
    running.schedule(print, timedelta(hours=1))
    assert running.wait_idle(WAIT)
    ran = threading.Event()
    running.schedule(ran.set, 0)  # due now: only a notify can wake the runner
    assert ran.wait(WAIT)


def test_a_later_insert_does_not_wake_the_runner(running: Scheduler, clock: CountingClock) -> None:
    running.schedule(print, 10)
    assert running.wait_idle(WAIT)
    until(lambda: clock.sleeping == 1)  # the runner sleeps toward +10 s
    condition = clock.condition  # what the runner sleeps on, handed over by Clock.wait
    assert condition is not None
    notified: list[str] = []
    for name in ("notify", "notify_all"):
        original = getattr(condition, name)

        def counted(*args: Any, _name: str = name, _original: Any = original) -> None:
            notified.append(_name)
            _original(*args)

        setattr(condition, name, counted)
    before = clock.wakeups
    for i in range(50):
        running.schedule(print, 20 + i)
    # Counted where a wake-up is made: it would show even if the runner's wait had not
    # returned yet.
    assert notified == []
    assert clock.wakeups == before and clock.sleeping == 1
    running.schedule(print, 5)  # an earlier one is the new head: that wakes it
    assert notified != []
    until(lambda: clock.wakeups > before)


def test_cancel_of_the_head(running: Scheduler, clock: FakeClock) -> None:
    calls: list[str] = []
    a = running.schedule(calls.append, 10, args=("a",))
    running.schedule(calls.append, 20, args=("b",))
    assert running.wait_idle(WAIT)
    a.cancel()
    clock.advance(10)
    assert running.wait_idle(WAIT)
    assert calls == []
    clock.advance(10)
    until(lambda: calls == ["b"])


def test_reschedule_earlier_wakes_the_runner(running: Scheduler) -> None:
    ran = threading.Event()
    job = running.schedule(ran.set, timedelta(hours=1))
    assert running.wait_idle(WAIT)
    job.reschedule(0)
    assert ran.wait(WAIT)


def test_wall_jumps_move_only_wall_jobs(running: Scheduler, clock: FakeClock) -> None:
    calls: list[str] = []
    running.schedule(calls.append, FAKE_START + timedelta(hours=1), args=("wall",))
    running.schedule(calls.append, timedelta(hours=1), args=("mono",))
    assert running.wait_idle(WAIT)
    clock.jump_wall(timedelta(hours=2))
    until(lambda: calls == ["wall"])
    assert running.wait_idle(WAIT)
    clock.jump_wall(-timedelta(hours=2))
    running.schedule(calls.append, FAKE_START + timedelta(minutes=30), args=("wall2",))
    clock.jump_wall(-timedelta(minutes=30))  # wall2 is now an hour of wall time away
    clock.advance(timedelta(minutes=59))
    assert running.wait_idle(WAIT)
    assert calls == ["wall"]
    clock.advance(timedelta(minutes=1))
    until(lambda: sorted(calls) == ["mono", "wall", "wall2"])


def test_many_threads_schedule_cancel_reschedule_while_running(clock: FakeClock) -> None:
    # 8 threads x 5 000 operations while the runner executes. Near jobs (due within a few fake
    # seconds) run concurrently as a ticker moves the clock; cancels and reschedules target far
    # jobs (due in 1000+ s), so whether a job was cancelled never races with it starting. At the
    # end the clock passes everything: each job not cancelled ran exactly once, none that was.
    s = Scheduler(clock=clock, executor=cf.ThreadPoolExecutor(4))
    s.start()
    runs: Counter[str] = Counter()
    lock = threading.Lock()
    cancelled: list[set[str]] = [set() for _ in range(8)]
    scheduled: list[list[str]] = [[] for _ in range(8)]

    def job(jid: str) -> None:
        with lock:
            runs[jid] += 1

    def worker(n: int) -> None:
        rng = random.Random(n)
        far: list[str] = []
        for i in range(5000):
            op = rng.random()
            jid = f"t{n}-{i}"
            if op < 0.4:
                s.schedule(job, rng.randint(0, 3), args=(jid,), id=jid)
                scheduled[n].append(jid)
            elif op < 0.7 or not far:
                s.schedule(job, 1000 + rng.randint(0, 100), args=(jid,), id=jid)
                scheduled[n].append(jid)
                far.append(jid)
            elif op < 0.85:
                victim = far.pop(rng.randrange(len(far)))
                assert s.cancel(victim)
                cancelled[n].add(victim)
            else:
                s.reschedule(rng.choice(far), 1000 + rng.randint(0, 100))

    def ticker(stop: threading.Event) -> None:
        # Keeps the runner waking while the workers mutate, but never reaches the jobs' due
        # times (1000 s and later): however slow the workers, no job can start meanwhile.
        for _ in range(500):
            if stop.is_set():
                return
            clock.advance(1)
            stop.wait(0.0005)

    stop = threading.Event()
    tick = threading.Thread(target=ticker, args=(stop,), daemon=True)
    tick.start()
    try:
        threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            assert not t.is_alive()
    finally:
        stop.set()
        tick.join(WAIT)
    clock.advance(2000)
    assert s.wait_idle(120)
    s.shutdown(wait=True)
    everything = [j for ids in scheduled for j in ids]
    gone = set().union(*cancelled)
    assert len(everything) > 25_000 and len(gone) > 3_000
    assert [j for j in gone if runs[j]] == []
    assert [j for j in everything if j not in gone and runs[j] != 1] == []
    assert len(s) == 0


def test_cancel_counts_until_the_function_starts(clock: FakeClock) -> None:
    # One worker, busy: the second job is popped and waits in the executor's queue; cancelling
    # it then still stops it from running.
    release = threading.Event()
    busy = threading.Event()
    calls: list[str] = []
    with Scheduler(clock=clock, executor=cf.ThreadPoolExecutor(1)) as s:

        def hog() -> None:
            busy.set()
            release.wait(WAIT)

        s.schedule(hog, 0)
        assert busy.wait(WAIT)
        queued = s.schedule(calls.append, 0, args=("queued",))
        until(lambda: queued.state is JobState.RUNNING)  # popped, waiting for the worker
        assert queued.cancel()
        release.set()
        assert s.wait_idle(WAIT)
    assert calls == []


class _QuickFirstWait(FakeClock):
    FIRST_WAIT = 0.01


def test_a_runner_on_a_clock_that_sleeps_through_a_fake_clock_misses_no_move() -> None:
    # A clock of the design's three methods that passes its sleeps to a FakeClock: the runner
    # cannot register its condition with the FakeClock ahead of its first read. The clock moves
    # between that read and the first sleep (forced here; a race in a real test): the first
    # sleep ends early, the runner reads the time again and runs the job.
    fake = _QuickFirstWait(start=FAKE_START)
    first, moved = threading.Event(), threading.Event()

    class Passing:
        def time(self) -> float:
            return fake.time()

        def monotonic(self) -> float:
            return fake.monotonic()

        def wait(self, condition: threading.Condition, timeout: float | None) -> None:
            if not first.is_set():
                first.set()
                moved.wait(WAIT)
            fake.wait(condition, timeout)

    s = Scheduler(clock=Passing())
    ran: list[float] = []
    s.schedule(lambda: ran.append(fake.monotonic()), 10)
    s.start()
    try:
        assert first.wait(WAIT)
        fake.advance(10)
        moved.set()
        until(lambda: bool(ran), what="the job the move made due")
    finally:
        s.shutdown()
    assert ran == [10.0]


def test_shutdown_waits_for_running_jobs(clock: FakeClock) -> None:
    s = Scheduler(clock=clock)
    s.start()
    release = threading.Event()
    started = threading.Event()
    finished = threading.Event()

    def slow() -> None:
        started.set()
        release.wait(WAIT)
        finished.set()

    s.schedule(slow, 0)
    assert started.wait(WAIT)
    (runner_thread,) = [t for t in threading.enumerate() if t.name == f"duetime-runner-{id(s):x}"]
    stopper = threading.Thread(target=s.shutdown, kwargs={"wait": True})
    stopper.start()
    # Once the runner thread has stopped, shutdown can only be waiting for `slow`.
    until(lambda: not runner_thread.is_alive())
    assert stopper.is_alive()
    release.set()
    stopper.join(WAIT)
    assert not stopper.is_alive() and finished.is_set()


@pytest.mark.parametrize("own_pool", [False, True], ids=["default pool", "user's pool"])
def test_a_listener_on_a_pool_thread_may_shut_the_scheduler_down(
    clock: FakeClock, own_pool: bool
) -> None:
    # The outcome's listeners run on the pool thread that ran the job: shutdown() there cannot
    # wait for the pool (its own thread: "cannot join current thread", or, with the user's
    # pool, waiting for its own future for ever). It stops the runner without waiting, as
    # from inside a job.
    pool = cf.ThreadPoolExecutor(2) if own_pool else None
    s = Scheduler(clock=clock, executor=pool) if pool else Scheduler(clock=clock)
    answers: list[str] = []

    def stop(event: Event) -> None:
        try:
            s.shutdown()
        except Exception as exc:  # (the failure this test is about)
            answers.append(repr(exc))
        else:
            answers.append("stopped")

    s.subscribe(stop, JobSucceeded)
    s.start()
    try:
        s.schedule(lambda: None, 1)
        clock.advance(1)
        until(lambda: bool(answers), what="the listener's shutdown() to return")
        assert answers == ["stopped"]
        assert not s.running
    finally:
        if pool is not None:
            pool.shutdown(wait=True)


def test_shutdown_without_waiting(clock: FakeClock) -> None:
    s = Scheduler(clock=clock)
    s.start()
    release = threading.Event()
    started = threading.Event()

    def slow() -> None:
        started.set()
        release.wait(WAIT)

    s.schedule(slow, 0)
    assert started.wait(WAIT)
    s.shutdown(wait=False)
    assert not s.running
    release.set()
    with pytest.raises(SchedulerShutdownError, match="cannot schedule"):
        s.schedule(print, 1)
    with pytest.raises(SchedulerShutdownError, match="cannot start"):
        s.start()


def test_start_twice_and_events(clock: FakeClock) -> None:
    s = Scheduler(clock=clock)
    rec = Recorder()
    s.subscribe(rec, SchedulerStarted, SchedulerStopped)
    with s:
        with pytest.raises(RuntimeError, match="already running; start\\(\\) was called twice"):
            s.start()
        assert s.running
    assert [type(e) for e in rec.events] == [SchedulerStarted, SchedulerStopped]
    assert rec.events[0].time == FAKE_START  # type: ignore[attr-defined]


def test_failures_listener_errors_and_rejections_never_kill_the_runner(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    class Rejecting(cf.Executor):
        def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> cf.Future[T]:
            raise RuntimeError("queue full")

    s = Scheduler(clock=clock, executor=Rejecting(), executors={"pool": cf.ThreadPoolExecutor(2)})

    def broken_listener(event: object) -> None:
        raise ValueError("listener bug")

    s.subscribe(broken_listener)
    done = threading.Event()

    def boom() -> None:
        raise KeyError("job bug")

    with caplog.at_level(logging.ERROR, logger="duetime"), s:
        rejected = s.schedule(print, 0)
        failing = s.schedule(boom, 0, executor="pool")
        s.schedule(done.set, 1, executor="pool")
        clock.advance(1)
        assert done.wait(WAIT)
        assert s.wait_idle(WAIT)
    assert isinstance(rejected.last_error, RuntimeError) and rejected.state is JobState.FAILED
    assert isinstance(failing.last_error, KeyError)
    assert (
        "queue full" in caplog.text and "listener bug" in caplog.text and "job bug" in caplog.text
    )


class _Quit(BaseException):
    """A BaseException of a job's own (not an Exception)."""


@pytest.mark.parametrize("executor", ["inline", None])
@pytest.mark.parametrize("raised", [SystemExit(3), _Quit("bye")], ids=["SystemExit", "custom"])
def test_a_job_s_base_exception_is_its_failure_under_the_runner(
    clock: FakeClock, executor: str | None, raised: BaseException
) -> None:
    # (It killed the inline runner thread, later jobs never ran and s.running stayed True; in a
    # pool it sat in a future nobody read: the job FAILED with no event, log or dead letter.)
    heard: list[str] = []
    done = threading.Event()

    def quits() -> None:
        raise raised

    with Scheduler(clock=clock, executor=executor) as s:
        s.subscribe(lambda e: heard.append(type(e).__name__))
        job = s.schedule(quits, 0, id="quits")
        s.schedule(done.set, 1)
        assert s.wait_idle(WAIT)
        clock.advance(1)
        assert done.wait(WAIT), "the runner did not survive"
        assert s.wait_idle(WAIT)
        assert job.state is JobState.FAILED
        assert isinstance(job.last_error, RuntimeError) and job.last_error.__cause__ is raised
        assert [f.job.id for f in s.failed()] == ["quits"]
        assert "JobFailed" in heard and "JobDead" in heard
        assert s.stats().failed == 1


@pytest.mark.parametrize("executor", ["inline", None])
@pytest.mark.parametrize("on", ["JobStarted", "JobSucceeded"])
def test_a_listener_s_base_exception_is_logged_and_never_stops_the_runner(
    clock: FakeClock, caplog: pytest.LogCaptureFixture, executor: str | None, on: str
) -> None:
    # A listener raising KeyboardInterrupt on JobStarted left the job RUNNING for good with a
    # pool (wait_idle never true again), and killed the inline runner's thread.
    def interrupting(event: Event) -> None:
        if type(event).__name__ == on:
            raise KeyboardInterrupt

    done = threading.Event()
    with (
        caplog.at_level(logging.ERROR, logger="duetime"),
        Scheduler(clock=clock, executor=executor) as s,
    ):
        s.subscribe(interrupting)
        first = s.schedule(lambda: None, 1)
        s.schedule(done.set, 2)
        clock.advance(1)
        assert s.wait_idle(WAIT), "the run was left half-begun"
        clock.advance(1)
        assert done.wait(WAIT), "the runner did not survive"
        assert s.wait_idle(WAIT)
        assert first.state is JobState.COMPLETED
        assert s.stats().running == 0 and s.stats().succeeded == 2
    assert f"raised on {on}" in caplog.text and "KeyboardInterrupt" in caplog.text


def test_a_listener_s_keyboard_interrupt_stops_a_run_stepped_by_hand(clock: FakeClock) -> None:
    # In the main thread it reaches the caller (Ctrl-C stops a simulation), as a job's does,
    # with the run undone: not left RUNNING.
    s = Scheduler(clock=clock)

    def interrupting(event: Event) -> None:
        raise KeyboardInterrupt

    unsubscribe = s.subscribe(interrupting, JobStarted)
    rate = s.schedule(lambda: None, FixedRate(10), id="r")
    with pytest.raises(KeyboardInterrupt):
        s.run_for(10)
    assert s.stats().running == 0 and rate.state is JobState.SCHEDULED
    unsubscribe()
    assert s.run_for(10) == 1  # (its next, at 20 s: the one at 10 s was abandoned)


def test_wait_idle_after_shutdown_without_wait_waits_for_the_runs_still_going(
    clock: FakeClock,
) -> None:
    # It answered False at once: with no runner it only looked.
    release = threading.Event()
    s = Scheduler(clock=clock)
    s.schedule(lambda: release.wait(WAIT), 0)
    s.start()
    until(lambda: s.stats().running == 1, what="the run to start")
    s.shutdown(wait=False)
    assert s.wait_idle(0) is False

    def release_once_waited_for() -> None:
        # (The run ends only once wait_idle waits on the scheduler's condition: it has to wait.)
        until(lambda: bool(s._cond._waiters), what="wait_idle to wait")  # type: ignore[attr-defined]
        release.set()

    releaser = threading.Thread(target=release_once_waited_for)
    releaser.start()
    assert s.wait_idle(timedelta(seconds=WAIT)) is True
    releaser.join(WAIT)
    assert s.stats().succeeded == 1
    # Nothing running, something due: nobody will run it, and it says so at once.
    s2 = Scheduler(clock=clock)
    s2.schedule(print, 0)
    assert s2.wait_idle(WAIT) is False
    # From inside a run stepped by hand, its own run is no reason to wait (it waited for ever).
    answers: list[bool] = []
    s2.schedule(lambda: answers.append(s2.wait_idle(WAIT)), 1)
    began = time.monotonic()
    assert s2.run_for(1) == 2 and answers == [False]  # (at once: its own run is going)
    assert time.monotonic() - began < WAIT / 2


@pytest.mark.parametrize("executor", ["inline", None])
def test_wait_idle_from_inside_a_run_of_a_started_scheduler_answers_at_once(
    clock: FakeClock, executor: str | None
) -> None:
    # (It waited for its own run to end: the whole timeout, or for ever without one.)
    answers: list[bool] = []
    with Scheduler(clock=clock, executor=executor) as s:
        s.schedule(lambda: answers.append(s.wait_idle(WAIT)), 0)
        began = time.monotonic()
        assert s.wait_idle(WAIT)
        assert answers == [False] and time.monotonic() - began < WAIT / 2


def test_inline_executor_runs_in_the_runner_thread(clock: FakeClock) -> None:
    names: list[str] = []
    with Scheduler(clock=clock, executor="inline") as s:
        s.schedule(lambda: names.append(threading.current_thread().name), 0)
        assert s.wait_idle(WAIT)
    assert names and names[0].startswith("duetime-runner")


def test_current_run_in_worker_threads(running: Scheduler) -> None:
    seen: list[Any] = []
    job = running.schedule(lambda: seen.append(current_run()), 0)
    assert running.wait_idle(WAIT)
    assert seen[0] is not None and seen[0].job is job


def _square(x: int) -> int:
    return x * x


async def _async_square(x: int) -> int:
    return x * x


# (A coroutine function submitted bare could not be pickled back: the job failed with "cannot
# pickle 'coroutine' object" and a "never awaited" warning.)
@pytest.mark.parametrize("func", [_square, _async_square])
def test_process_pool_runs_picklable_functions(
    clock: FakeClock, func: Callable[[int], Any]
) -> None:
    from duetime import JobSucceeded

    rec = Recorder()
    with cf.ProcessPoolExecutor(1) as pool, Scheduler(clock=clock, executor=pool) as s:
        s.subscribe(rec, JobSucceeded)
        job = s.schedule(func, 0, args=(7,))
        until(lambda: job.state is JobState.COMPLETED)
    assert [e.result for e in rec.events] == [49]  # type: ignore[attr-defined]


_PROCESS_POOL_LISTENER_STOPS = """
import concurrent.futures as cf, multiprocessing, threading
from duetime import FakeClock, JobSucceeded, Scheduler

def wait_for(event):
    event.wait(30)

def square(x):
    return x * x

if __name__ == "__main__":
    clock = FakeClock()
    with multiprocessing.Manager() as manager, cf.ProcessPoolExecutor(2) as pool:
        release = manager.Event()
        s = Scheduler(clock=clock, executor=pool)
        stopped = threading.Event()

        def stop(event):
            if event.result == 49:
                s.shutdown()
                stopped.set()

        s.subscribe(stop, JobSucceeded)
        s.schedule(wait_for, 1, args=(release,))
        s.schedule(square, 1, args=(7,))
        s.start()
        clock.advance(1)
        print("stopped" if stopped.wait(10) else "stuck", s.running, flush=True)
        release.set()
"""


def test_a_listener_of_a_process_pool_outcome_may_shut_the_scheduler_down(
    tmp_path: Path,
) -> None:
    # A process pool's outcomes are recorded in its management thread, which also completes its
    # futures: a listener's shutdown() there, waiting for the slow job still running, waited
    # for that thread, itself. (In a process of its own: that deadlock cannot be undone.)
    script = tmp_path / "stops.py"
    script.write_text(_PROCESS_POOL_LISTENER_STOPS)
    done = subprocess.run(
        [sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["stopped", "False"], done.stderr


def first_run_waits() -> tuple[threading.Event, list[float], Callable[[], None]]:
    """A job that records the scheduled times of its runs (seconds after the start), the first
    of which lasts until the event is set."""
    release = threading.Event()
    started: list[float] = []

    def job() -> None:
        run = current_run()
        assert run is not None
        started.append((run.scheduled_time - FAKE_START).total_seconds())
        if len(started) == 1:
            release.wait(WAIT)

    return release, started, job


def overlapping(policy: Overlap, clock: FakeClock) -> tuple[list[float], Recorder]:
    """A 10 s fixed-rate job whose first run lasts until two more periods have come due.

    Returns the scheduled times (seconds after the start) of the runs that started, and the
    JobSkipped events.
    """
    release, started, job = first_run_waits()
    rec = Recorder()

    with Scheduler(clock=clock, overlap=policy) as s:
        s.subscribe(rec, JobSkipped)
        s.schedule(job, FixedRate(10))
        clock.advance(10)
        until(lambda: len(started) == 1)
        for k in (1, 2):
            clock.advance(10)
            if policy is Overlap.ALLOW:
                until(lambda k=k: len(started) == 1 + k)  # type: ignore[misc]
            elif policy is Overlap.SKIP:
                until(lambda k=k: len(rec.events) == k)  # type: ignore[misc]
            else:
                until(lambda k=k: s.stats().held == 1 and len(rec.events) == k - 1)  # type: ignore[misc]
        release.set()
        until(lambda: s.stats().running == 0 and s.stats().held == 0)
        assert s.wait_idle(WAIT)
    return started, rec


def test_overlap_skip(clock: FakeClock) -> None:
    started, rec = overlapping(Overlap.SKIP, clock)
    assert started == [10]
    assert [e.scheduled_time - FAKE_START for e in rec.events] == [  # type: ignore[attr-defined]
        timedelta(seconds=20),
        timedelta(seconds=30),
    ]


def test_overlap_queue(clock: FakeClock) -> None:
    started, rec = overlapping(Overlap.QUEUE, clock)
    assert started == [10, 20]  # the run due at 20 s starts when the first ends; 30 s coalesced
    assert len(rec.events) == 1


def test_overlap_allow(clock: FakeClock) -> None:
    started, rec = overlapping(Overlap.ALLOW, clock)
    assert started == [10, 20, 30]
    assert rec.events == []


def test_overlap_queue_does_not_coalesce_a_fire_into_a_held_trigger_run(clock: FakeClock) -> None:
    # A trigger() run held back behind the running one is a fire of its own (its own key): the
    # regular fire due next is held too, and runs; coalesced into the trigger run, it was lost.
    # The one after it coalesces into the held regular fire, as ever.
    release, started, job = first_run_waits()
    rec = Recorder()
    with Scheduler(clock=clock, overlap=Overlap.QUEUE) as s:
        s.subscribe(rec, JobSkipped)
        s.schedule(job, FixedRate(10), id="q")
        clock.advance(10)
        until(lambda: len(started) == 1)
        s.trigger("q")
        until(lambda: s.stats().held == 1)
        clock.advance(10)
        until(lambda: s.stats().held == 2)
        clock.advance(10)
        until(lambda: len(rec.events) == 1)
        release.set()
        until(lambda: s.stats().running == 0 and s.stats().held == 0)
        assert s.wait_idle(WAIT)
    assert started == [10, 10, 20]  # the first run, the trigger() run (made at 10 s), 20 s
    assert [e.scheduled_time - FAKE_START for e in rec.events] == [  # type: ignore[attr-defined]
        timedelta(seconds=30)
    ]


def test_a_held_run_goes_before_a_backlog_due_after_it(clock: FakeClock) -> None:
    # Overlap.QUEUE holds the fire due at 20 s behind the first run; the clock then jumps, and
    # Misfire.RUN_ALL's backlog (30 s .. 60 s) waits for that run too. When it ends, the held
    # fire goes first, at the time it was due: queued "now", it came after every fire of the
    # backlog (due before now), and was held again behind each of them.
    release, started, job = first_run_waits()
    with Scheduler(clock=clock, overlap=Overlap.QUEUE) as s:
        s.schedule(job, FixedRate(10), misfire=Misfire.RUN_ALL)
        clock.advance(10)
        until(lambda: len(started) == 1)
        clock.advance(10)
        until(lambda: s.stats().held == 1)
        clock.advance(45)
        release.set()
        until(lambda: len(started) == 6)
        assert s.wait_idle(WAIT)
    assert started == [10, 20, 30, 40, 50, 60]


@pytest.mark.parametrize("policy", [Overlap.SKIP, Overlap.QUEUE])
def test_a_run_all_backlog_runs_every_fire_one_at_a_time_on_the_runner(
    clock: FakeClock, policy: Overlap
) -> None:
    # Fires missed while the scheduler was not running: RUN_ALL runs each of them, oldest
    # first, one at a time, although they are all due at once and a pool would start the next
    # before the first ends (where the overlap policy would drop it).
    release, started, job = first_run_waits()
    rec = Recorder()

    s = Scheduler(clock=clock, overlap=policy)
    s.subscribe(rec, JobSkipped)
    s.schedule(job, FixedRate(10), misfire=Misfire.RUN_ALL)
    clock.advance(65)  # six fires missed: 10 s .. 60 s
    s.start()
    try:
        until(lambda: len(started) == 1)
        assert s.stats().running == 1  # the others wait for it
        release.set()
        until(lambda: len(started) == 6)
        assert s.wait_idle(WAIT)
    finally:
        release.set()
        s.shutdown()
    assert started == [10, 20, 30, 40, 50, 60]
    assert rec.events == []


def test_max_concurrent_bounds_running_jobs(clock: FakeClock) -> None:
    release = threading.Event()
    active = 0
    peak = 0
    lock = threading.Lock()
    done = Counter[str]()

    def job(i: int) -> None:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        release.wait(WAIT)
        with lock:
            active -= 1
            done["n"] += 1

    with Scheduler(clock=clock, max_concurrent=2) as s:
        for i in range(6):
            s.schedule(job, 0, args=(i,))
        until(lambda: active == 2)
        release.set()
        until(lambda: done["n"] == 6)
        assert s.wait_idle(WAIT)
    assert peak == 2


def test_a_one_shot_due_while_its_triggered_run_goes_on_waits_on_the_runner_too(
    running: Scheduler, clock: FakeClock
) -> None:
    lock = threading.Lock()
    seen = {"calls": 0, "now": 0, "most": 0}
    started = threading.Event()
    release = threading.Event()

    def body() -> None:
        with lock:
            seen["calls"] += 1
            seen["now"] += 1
            seen["most"] = max(seen["most"], seen["now"])
        started.set()
        release.wait(WAIT)
        with lock:
            seen["now"] -= 1

    job = running.schedule(body, 10)
    running.trigger(job)
    assert started.wait(WAIT)
    clock.advance(10)  # its own due time comes while the triggered run blocks
    until(lambda: running.stats().started == 1 and running.stats().held == 1)
    assert seen["calls"] == 1
    release.set()
    assert running.wait_idle(WAIT)
    assert seen == {"calls": 2, "now": 0, "most": 1}
    assert job.state is JobState.COMPLETED


def _one_worker(
    clock: FakeClock, store: str, tmp_path: Any
) -> tuple[Scheduler, threading.Event, list[float]]:
    """A scheduler (not started) on a pool of one thread, in memory or on SQLite, with a task
    ``ran_at`` that records the monotonic time of each run; and the gate of ``_block``."""
    url = None if store == "memory" else f"sqlite:///{tmp_path / 'jobs.db'}"
    s = Scheduler(clock=clock, executor=cf.ThreadPoolExecutor(1), store=url)
    ran: list[float] = []
    s.register("ran_at", lambda: ran.append(clock.monotonic()))
    return s, threading.Event(), ran


def _block(s: Scheduler, gate: threading.Event) -> None:
    """Occupy the one worker of the started ``s``'s pool until ``gate`` is set."""
    busy = threading.Event()

    def block() -> None:
        busy.set()
        gate.wait(WAIT)

    s.register("block", block)
    s.schedule("block", 0)
    assert busy.wait(WAIT)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_reschedule_counts_until_the_function_starts(
    clock: FakeClock, store: str, tmp_path: Any
) -> None:
    # (An occurrence waiting in an executor's queue ran at its old time, then again at the new
    # one: DESIGN's "the old occurrence can never fire", as cancel() already held.)
    s, gate, ran = _one_worker(clock, store, tmp_path)
    with s:
        _block(s, gate)
        s.schedule("ran_at", 1, id="target")
        clock.advance(1)
        until(lambda: s.get("target") is not None and s.get("target").state is JobState.RUNNING)  # type: ignore[union-attr]
        s.reschedule("target", 100)
        gate.set()
        assert s.wait_idle(WAIT)
        assert ran == []
        clock.advance(100)
        until(lambda: len(ran) == 1)
        assert s.wait_idle(WAIT)
    assert ran == [101.0]


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_one_shot_that_shutdown_stopped_before_it_ran_is_not_completed(
    clock: FakeClock, store: str, tmp_path: Any
) -> None:
    # (It ended COMPLETED with runs 0 and no outcome event: "completed" says its body ran.)
    s, gate, ran = _one_worker(clock, store, tmp_path)
    s.start()
    try:
        _block(s, gate)
        job = s.schedule("ran_at", 1, id="queued")
        due = job.next_run_time
        clock.advance(1)
        until(lambda: job.state is JobState.RUNNING)
        s.shutdown(wait=False, cancel_running=True)
        until(lambda: job.state is not JobState.RUNNING)
    finally:
        gate.set()
        s.shutdown(wait=True)
    assert ran == [] and job.runs == 0
    assert job.state is JobState.SCHEDULED and job.next_run_time == due


def test_a_reschedule_to_the_same_instant_runs_the_new_schedule_s_fire(
    clock: FakeClock, tmp_path: Any
) -> None:
    # The revoked occurrence's fire key is the new first fire's: it must stay free to run.
    gate = threading.Event()
    seen: list[int] = []
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    with Scheduler(clock=clock, executor=cf.ThreadPoolExecutor(1), store=url) as s:
        s.register("seen", seen.append)
        _block(s, gate)
        due = clock.now() + timedelta(seconds=1)
        s.schedule("seen", At(due), args=(1,), id="x")
        clock.advance(1)
        until(lambda: s.get("x") is not None and s.get("x").state is JobState.RUNNING)  # type: ignore[union-attr]
        s.schedule("seen", At(due), args=(2,), id="x", replace=True)
        gate.set()
        until(lambda: seen != [])
        assert s.wait_idle(WAIT)
    assert seen == [2]
