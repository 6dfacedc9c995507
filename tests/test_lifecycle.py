"""Job life-cycle corner cases: pause, cancel, reschedule, retries, overlap and max_concurrent
meeting each other mid-run. Each test is a regression test for a reviewed defect."""

from __future__ import annotations

import concurrent.futures as cf
import logging
import sys
import threading
from datetime import timedelta

import pytest

from duetime import (
    FakeClock,
    FixedBackoff,
    FixedDelay,
    FixedRate,
    JobState,
    JobSucceeded,
    Misfire,
    Overlap,
    Scheduler,
    current_run,
)
from duetime.testing import FAKE_START

from .conftest import WAIT, until


def test_pause_resume_does_not_rerun_an_occurrence_that_already_ran(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    s, clock = scheduler, fake_clock
    attempts: list[float] = []

    def flaky() -> None:
        attempts.append(clock.monotonic())
        raise RuntimeError("boom")

    job = s.schedule(flaky, 5, retry=FixedBackoff([10]))
    s.run_for(5)  # attempt 1 fails, the retry waits for t=15
    job.pause()
    job.resume()
    s.run_for(100)
    assert attempts == [5.0, 15.0]
    assert job.state is JobState.FAILED and job.failures == 2
    assert [f.job for f in s.failed()] == [job]


def test_a_one_shot_paused_while_running_ends_when_its_run_ends(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    s, clock = scheduler, fake_clock
    runs: list[float] = []

    def job_body() -> None:
        runs.append(clock.monotonic())
        job.pause()  # paused while its only run is going

    job = s.schedule(job_body, 5, id="j")
    s.run_for(10)
    assert runs == [5.0]
    assert job.state is JobState.COMPLETED and "j" not in s and len(s) == 0
    s.run_for(10)
    assert runs == [5.0]


def test_a_one_shot_that_fails_while_paused_is_dead_not_paused(scheduler: Scheduler) -> None:
    s = scheduler

    def fail() -> None:
        job.pause()
        raise ValueError("x")

    job = s.schedule(fail, 1, id="j")
    s.run_for(1)
    assert job.state is JobState.FAILED and "j" not in s
    assert s.retry_failed("j") is job  # no ConflictingIdError: the id is free


def test_pausing_a_running_fixed_delay_job_holds_its_next_run(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    s, clock = scheduler, fake_clock
    calls: list[float] = []

    def tick() -> None:
        calls.append(clock.monotonic())
        if len(calls) == 1:
            job.pause()

    job = s.schedule(tick, FixedDelay(10))
    s.run_for(100)
    assert calls == [10.0] and job.state is JobState.PAUSED
    job.resume()  # its next run (due at 20 s) is late: the misfire policy runs it once
    s.run_for(15)
    assert calls == [10.0, 100.0, 110.0]


def blocked_setup(max_concurrent: int = 1) -> tuple[FakeClock, Scheduler, threading.Event]:
    clock = FakeClock()
    s = Scheduler(clock=clock, max_concurrent=max_concurrent)
    gate = threading.Event()
    s.schedule(gate.wait, 5, args=(WAIT,), id="hog")
    return clock, s, gate


def test_a_run_blocked_by_max_concurrent_keeps_its_job_alive_and_cancellable() -> None:
    clock, s, gate = blocked_setup()
    calls: list[float] = []
    b = s.schedule(lambda: calls.append(clock.monotonic()), FixedDelay(6), id="b")
    with s:
        clock.advance(6)
        until(lambda: s.stats().blocked == 1)
        assert b.state is JobState.SCHEDULED and "b" in s and len(s) == 2
        assert s.cancel("b") is True
        gate.set()
        assert s.wait_idle(WAIT)
        clock.advance(60)
        assert s.wait_idle(WAIT)
    final: JobState = b.state
    assert calls == [] and final is JobState.CANCELLED


def test_reschedule_drops_a_blocked_occurrence() -> None:
    clock, s, gate = blocked_setup()
    ran: list[float] = []
    b = s.schedule(lambda: ran.append(clock.monotonic()), FixedRate(5), id="b")
    with s:
        clock.advance(5)
        until(lambda: s.stats().blocked == 1)
        s.reschedule(b, 100)
        assert s.stats().blocked == 0
        gate.set()
        assert s.wait_idle(WAIT)
        clock.advance(10)
        assert s.wait_idle(WAIT)
    assert ran == []


def test_a_run_held_by_queue_does_not_take_the_slot_of_a_run_blocked_before_it() -> None:
    # max_concurrent=1: A (Overlap.QUEUE) runs; B, due meanwhile, is blocked; A's next fire
    # falls due during its run and is held back. When A's run ends, B (waiting longer) starts
    # first: the held run taking the slot every time starved B for as long as A ran late.
    clock = FakeClock()
    s = Scheduler(clock=clock, max_concurrent=1)
    ran: list[tuple[str, float]] = []
    inside, gate = threading.Event(), threading.Event()

    def a() -> None:
        ran.append(("A", clock.monotonic()))
        if len(ran) == 1:
            inside.set()
            gate.wait(WAIT)

    s.schedule(a, FixedRate(10), overlap=Overlap.QUEUE, id="A")
    s.schedule(lambda: ran.append(("B", clock.monotonic())), 10, id="B")
    clock.advance(10)
    first = threading.Thread(target=s.run_pending)  # runs A at 10 s, which waits
    first.start()
    try:
        assert inside.wait(WAIT)
        assert s.run_pending() == 0  # B: blocked by max_concurrent
        clock.advance(10)
        assert s.run_pending() == 0  # A's fire at 20 s: held back by QUEUE
        assert s.stats().blocked == 1
    finally:
        gate.set()
        first.join(WAIT)
    assert not first.is_alive()
    s.run_pending()  # (B may have run in the first thread already: it was due at 10 s)
    assert ran == [("A", 10.0), ("B", 20.0), ("A", 20.0)]


def test_a_run_blocked_by_max_concurrent_starts_in_due_order_within_a_run_all_backlog() -> None:
    # max_concurrent=1: A's 08:01 run is slow, and the wall clock jumps to 08:11 meanwhile. B
    # (due 08:05) is blocked; A's backlog (08:02 .. 08:11) waits for the run. When it ends, B
    # takes its place in due order, not after the whole backlog.
    clock = FakeClock(FAKE_START)  # 08:00
    s = Scheduler(clock=clock, max_concurrent=1)
    ran: list[str] = []
    inside, gate = threading.Event(), threading.Event()

    def a() -> None:
        run = current_run()
        assert run is not None
        ran.append("A" + run.scheduled_time.strftime("%M"))
        if len(ran) == 1:
            inside.set()
            gate.wait(WAIT)

    s.schedule(a, "* * * * *", misfire=Misfire.RUN_ALL, id="A")
    s.schedule(lambda: ran.append("B"), FAKE_START + timedelta(minutes=5), id="B")
    clock.advance(60)
    first = threading.Thread(target=s.step)  # (one run: 08:01's, which waits)
    first.start()
    try:
        assert inside.wait(WAIT)
        clock.jump_wall(600)
        assert s.run_pending() == 0  # B blocked, A's 08:02 held for the run going on
        assert s.stats().blocked == 1
    finally:
        gate.set()
        first.join(WAIT)
    assert not first.is_alive()
    s.run_pending()
    assert ran == ["A01", "A02", "A03", "A04", "B"] + [f"A{m:02}" for m in range(5, 12)]


def test_an_abandoned_run_releases_its_max_concurrent_slot() -> None:
    pool = cf.ThreadPoolExecutor(1)
    gate = threading.Event()
    pool.submit(gate.wait, WAIT)  # the only worker is busy with something else
    clock = FakeClock()
    s = Scheduler(clock=clock, max_concurrent=1, executor=pool)
    ran: list[str] = []
    a = s.schedule(ran.append, 5, args=("a",))
    b = s.schedule(ran.append, 5, args=("b",))
    with s:
        clock.advance(5)
        until(lambda: s.stats().blocked == 1)  # a waits in the pool's queue, b is blocked
        a.cancel()  # a is abandoned when the worker gets to it
        gate.set()
        until(lambda: ran == ["b"])
        assert s.wait_idle(WAIT)
    assert b.state is JobState.COMPLETED and s.stats().running == 0
    pool.shutdown()


def test_blocked_runs_start_in_order_as_slots_free() -> None:
    clock, s, gate = blocked_setup(max_concurrent=2)
    ran: list[int] = []
    for i in range(5):
        s.schedule(ran.append, 5, args=(i,))
    with s:
        clock.advance(5)
        until(lambda: len(ran) == 5)  # one slot is held by "hog": the rest take turns
        gate.set()
        assert s.wait_idle(WAIT)
    assert ran == [0, 1, 2, 3, 4]


def test_base_exceptions_propagate_without_leaking_counters(scheduler: Scheduler) -> None:
    s = scheduler
    job = s.schedule(sys.exit, 1, args=(3,))
    with pytest.raises(SystemExit):
        s.run_for(1)
    assert s.stats().running == 0
    assert job.state is JobState.FAILED and len(s) == 0


def test_events_are_delivered_exactly_once_under_concurrency() -> None:
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        clock = FakeClock()
        s = Scheduler(clock=clock)
        count = 0
        lock = threading.Lock()

        def on(event: object) -> None:
            nonlocal count
            with lock:
                count += 1

        s.subscribe(on, JobSucceeded)
        for _ in range(2000):
            s.schedule(lambda: None, 1)
        with s:
            clock.advance(1)
            assert s.wait_idle(60)
        assert count == 2000 == s.stats().succeeded
    finally:
        sys.setswitchinterval(old)


def test_shutdown_from_inside_a_job(
    scheduler: Scheduler, fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    s, clock = scheduler, fake_clock
    stopped = threading.Event()

    def stopper() -> None:
        s.shutdown()
        stopped.set()

    s.schedule(stopper, 1)
    with caplog.at_level(logging.ERROR, logger="duetime"):
        s.start()
        clock.advance(1)
        assert stopped.wait(WAIT)
    assert not s.running and "cannot join" not in caplog.text


def test_retries_and_triggers_respect_overlap(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    s = Scheduler(clock=clock, overlap=Overlap.SKIP)
    live = peak = calls = 0
    lock = threading.Lock()
    gate = threading.Event()
    second_started = threading.Event()

    def body() -> None:
        nonlocal live, peak, calls
        with lock:
            live += 1
            peak = max(peak, live)
            calls += 1
            n = calls
        try:
            if n == 1:
                raise RuntimeError("first attempt fails")
            if n == 2:
                second_started.set()
                gate.wait(WAIT)
        finally:
            with lock:
                live -= 1

    with caplog.at_level(logging.CRITICAL, logger="duetime"), s:
        job = s.schedule(body, FixedRate(10), retry=FixedBackoff([10]))
        clock.advance(10)  # attempt 1 fails; its retry is due at 20 with the next occurrence
        until(lambda: calls == 1)
        clock.advance(10)
        assert second_started.wait(WAIT)
        until(lambda: s.stats().held == 1)
        s.trigger(job)  # an out-of-band run while one is going: it waits too
        gate.set()
        until(lambda: calls == 4)
        assert s.wait_idle(WAIT)
    assert peak == 1
