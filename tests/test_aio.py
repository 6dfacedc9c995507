"""The asyncio runner under a FakeClock: async code tested without real sleeping."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import dataclasses
import functools
import gc
import logging
import sys
import threading
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from duetime import (
    AsyncScheduler,
    FakeClock,
    FixedRate,
    JobStarted,
    JobState,
    JobSucceeded,
    Scheduler,
    SchedulerShutdownError,
    SQLiteStore,
    current_run,
)
from duetime.testing import FAKE_START

from .conftest import WAIT, fresh_python


def test_coroutine_jobs_run_as_tasks_when_fake_time_moves() -> None:
    clock = FakeClock(start=FAKE_START)
    seen: list[tuple[str, float]] = []

    async def fetch(name: str) -> str:
        run = current_run()
        assert run is not None
        await asyncio.sleep(0)
        seen.append((name, clock.monotonic()))
        return name

    async def main() -> None:
        async with AsyncScheduler(clock=clock) as s:
            s.schedule(fetch, 10, args=("a",))
            s.schedule(fetch, 5, args=("b",))
            await s.idle()
            assert seen == []
            clock.advance(5)
            await s.idle()
            assert seen == [("b", 5.0)]
            clock.advance(5)
            await s.idle()
        assert seen == [("b", 5.0), ("a", 10.0)]

    asyncio.run(main())


def test_plain_functions_run_in_the_default_executor() -> None:
    clock = FakeClock()
    threads: list[str] = []

    async def main() -> None:
        async with AsyncScheduler(clock=clock) as s:
            s.schedule(lambda: threads.append(threading.current_thread().name), 0)
            await s.idle()

    asyncio.run(main())
    assert len(threads) == 1 and threads[0] != threading.main_thread().name


def test_plain_functions_run_in_their_executor_inline_named_or_process_pool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    threads: dict[str, str] = {}
    results: list[Any] = []

    def where(label: str) -> None:
        threads[label] = threading.current_thread().name

    async def main() -> None:
        loop_thread = threading.current_thread().name
        with (
            cf.ThreadPoolExecutor(1, thread_name_prefix="reports") as reports,
            cf.ProcessPoolExecutor(1) as pool,
        ):
            async with AsyncScheduler(
                clock=clock, executor="inline", executors={"reports": reports, "cpu": pool}
            ) as s:
                s.subscribe(lambda e: results.append(e.result), JobSucceeded)  # type: ignore[attr-defined]
                s.schedule(where, 0, args=("inline",))
                s.schedule(where, 0, args=("reports",), executor="reports")
                s.schedule(_square, 0, args=(7,), executor="cpu")
                s.schedule(_boom, 0, executor="cpu", id="boom")
                for _ in range(1000):  # (a process pool's result comes in real time: 10 s)
                    await s.idle()
                    if len(results) == 3 and s.failed():
                        break
                    await asyncio.sleep(0.01)
        assert threads["inline"] == loop_thread
        assert threads["reports"].startswith("reports")
        assert sorted(results, key=repr) == [49, None, None]
        assert [repr(f.error) for f in s.failed()] == ["ValueError('no')"]

    caplog.set_level(logging.ERROR, "asyncio")
    asyncio.run(main())
    gc.collect()
    # (The failure is the job's, recorded by duetime: its asyncio wrapper, which nobody awaits,
    # logged "Future exception was never retrieved" when collected, with the job's traceback.)
    assert [r.getMessage() for r in caplog.records if r.name == "asyncio"] == []


def _square(x: int) -> int:
    return x * x


def _wait_for_go(folder: str) -> str:
    """A process pool's job that says it started, then waits (at most 10 s) to be let go."""
    import pathlib
    import time

    (pathlib.Path(folder) / "started").touch()
    deadline = time.monotonic() + 10
    while not (pathlib.Path(folder) / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    return "done"


def test_closing_with_cancel_running_keeps_the_outcome_of_a_process_pool_job_that_started(
    tmp_path: Path,
) -> None:
    # cancel_running cancels work that has not started; a job the pool is running goes on,
    # and its outcome is recorded (cancelling its asyncio wrapper used to drop it).
    results: list[Any] = []

    async def main() -> None:
        with cf.ProcessPoolExecutor(1) as pool:
            pool.submit(int).result()  # (the pool's process is up)
            s = AsyncScheduler(clock=FakeClock(), executor=pool)
            s.subscribe(lambda e: results.append(e.result), JobSucceeded)  # type: ignore[attr-defined]
            async with s:
                job = s.schedule(_wait_for_go, 0, args=(str(tmp_path),))
                for _ in range(1000):  # (the pool starts it in real time: at most 10 s)
                    if (tmp_path / "started").exists():
                        break
                    await asyncio.sleep(0.01)
                s.shutdown(wait=False, cancel_running=True)
                (tmp_path / "go").touch()
            for _ in range(1000):
                if results:
                    break
                await asyncio.sleep(0.01)
            assert results == ["done"] and job.state is JobState.COMPLETED

    asyncio.run(main())


def _collect_the_main_task() -> None:
    """Collect, now, the main task a SystemExit left asyncio.run with: asyncio logs "Task
    exception was never retrieved" with its traceback when it goes, and a collection that
    fell inside a later import's ast.parse (3.11 formats tracebacks with ast.parse) raised
    CPython's "AST constructor recursion depth mismatch" there."""
    gc.collect()


def _boom() -> None:
    raise ValueError("no")


def test_schedule_from_another_thread_wakes_the_loop() -> None:
    clock = FakeClock()
    ran = asyncio.Event()

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def job() -> None:
            ran.set()

        async with AsyncScheduler(clock=clock) as s:
            s.schedule(job, 3600)
            await s.idle()
            t = threading.Thread(target=s.schedule, args=(job, 0))
            t.start()
            await loop.run_in_executor(None, t.join, 5)
            await asyncio.wait_for(ran.wait(), 5)

    asyncio.run(main())
    assert ran.is_set()


def test_failures_recurring_jobs_and_cancel() -> None:
    clock = FakeClock()
    ticks: list[float] = []

    async def boom() -> None:
        raise ValueError("async bug")

    async def tick() -> None:
        ticks.append(clock.monotonic())

    async def main() -> None:
        async with AsyncScheduler(clock=clock) as s:
            bad = s.schedule(boom, 1)
            rate = s.schedule(tick, FixedRate(10))
            for _ in range(3):
                clock.advance(10)
                await s.idle()
            rate.cancel()
            clock.advance(10)
            await s.idle()
            assert bad.state is JobState.FAILED and isinstance(bad.last_error, ValueError)

    asyncio.run(main())
    assert ticks == [10.0, 20.0, 30.0]


def test_run_async_directly_and_shutdown() -> None:
    clock = FakeClock()
    s = Scheduler(clock=clock)
    done: list[Any] = []

    async def job() -> None:
        done.append(1)
        s.shutdown()

    async def main() -> None:
        s.schedule(job, 0)
        await asyncio.wait_for(s.run_async(), 5)

    asyncio.run(main())
    assert done == [1]
    assert not s.running


def test_idle_needs_the_async_runner() -> None:
    async def main() -> None:
        with pytest.raises(RuntimeError, match="not running"):
            await AsyncScheduler(clock=FakeClock()).idle()

    asyncio.run(main())


def test_cancel_running_tasks_on_close() -> None:
    clock = FakeClock()
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def forever() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    jobs = []

    async def main() -> None:
        s = AsyncScheduler(clock=clock)
        await s.__aenter__()
        jobs.append(s.schedule(forever, 0))
        await asyncio.wait_for(started.wait(), 5)
        await asyncio.wait_for(s.aclose(cancel_running=True), 5)

    asyncio.run(main())
    assert cancelled == [True]
    # (It ended COMPLETED: a job cut off mid-run by shutdown did not complete.)
    assert jobs[0].state is JobState.SCHEDULED and jobs[0].runs == 0


def test_cancelling_plain_jobs_queued_in_the_executor_keeps_the_books() -> None:
    # One worker, busy: a second plain job waits in the executor's queue when the scheduler is
    # closed with cancel_running=True. Nothing may stay counted as running.
    import concurrent.futures as cf

    clock = FakeClock()
    release = threading.Event()
    started = threading.Event()
    waiter = cf.ThreadPoolExecutor(1)  # for waiting on threading events without the busy pool
    ran: list[str] = []

    def hog() -> None:
        started.set()
        release.wait(10)

    async def main() -> Scheduler:
        loop = asyncio.get_running_loop()
        pool = cf.ThreadPoolExecutor(1)
        loop.set_default_executor(pool)
        s = AsyncScheduler(clock=clock)
        await s.__aenter__()
        s.schedule(hog, 0)
        assert await loop.run_in_executor(waiter, started.wait, 10)
        queued = s.schedule(ran.append, 0, args=("queued",))
        while queued.state is not JobState.RUNNING:  # popped and handed to the executor
            await asyncio.sleep(0)
        close = asyncio.ensure_future(s.aclose(cancel_running=True))

        # Release the hog only once the close has dealt with the queued job, so that it is
        # still waiting in the executor when the close finds it.
        def still_queued() -> bool:
            return queued.state is JobState.RUNNING

        for _ in range(100_000):
            if not still_queued():
                break
            await asyncio.sleep(0)
        release.set()
        await asyncio.wait_for(close, 10)
        pool.shutdown()
        return s

    s = asyncio.run(main())
    waiter.shutdown()
    assert s.stats().running == 0
    assert ran == []  # cancelled while it waited in the executor
    # Not run, so not completed: it stays scheduled at its due time.
    (left,) = s.jobs()
    assert left.state is JobState.SCHEDULED and left.args == ("queued",)


@pytest.mark.skipif(
    sys.version_info < (3, 11), reason="Python 3.10's tasks cannot tell who cancelled them"
)
def test_a_coroutine_job_that_is_cancelled_inside_fails_and_is_told() -> None:
    # Its own CancelledError (it awaited a task that was cancelled) is the job's failure, as on
    # the thread Scheduler: not a shutdown's interruption, which leaves the job as it was.
    from duetime import ExponentialBackoff, JobFailed

    clock = FakeClock()
    told: list[str] = []
    box: dict[str, Any] = {}

    async def awaits_a_cancelled_task() -> None:
        task = asyncio.get_running_loop().create_task(asyncio.sleep(10))
        task.cancel()
        await task

    async def main() -> None:
        async with AsyncScheduler(clock=clock) as s:
            s.subscribe(lambda e: told.append(typing.cast(JobFailed, e).job_id), JobFailed)
            box["one"] = s.schedule(awaits_a_cancelled_task, 0, id="one")
            box["again"] = s.schedule(
                awaits_a_cancelled_task,
                FixedRate(10),
                id="again",
                retry=ExponentialBackoff(max_attempts=2, base=1, jitter=None),
            )
            await s.idle()
            clock.advance(10)
            await s.idle()
            clock.advance(1)  # the retry
            await s.idle()
            box["stats"] = s.stats()

    asyncio.run(main())
    one, again = box["one"], box["again"]
    assert one.state is JobState.FAILED and one.failures == 1
    assert isinstance(one.last_error, RuntimeError) and "was cancelled" in str(one.last_error)
    assert isinstance(one.last_error.__cause__, asyncio.CancelledError)
    assert again.failures == 2 and again.attempt == 2  # the retry policy applied
    assert told == ["one", "again", "again"]
    assert box["stats"].failed == 3 and box["stats"].succeeded == 0


def test_a_generator_job_fails_on_the_asyncio_runner_too() -> None:
    clock = FakeClock()
    ran: list[int] = []
    box: dict[str, Any] = {}

    def gen() -> Any:
        ran.append(1)
        yield 1

    async def main() -> None:
        async with AsyncScheduler(clock=clock) as s:
            box["job"] = s.schedule(gen, 0)
            await s.idle()

    asyncio.run(main())
    assert ran == [] and box["job"].state is JobState.FAILED
    assert isinstance(box["job"].last_error, TypeError)
    assert "generator function" in str(box["job"].last_error)


def test_an_async_listener_is_refused_by_the_async_scheduler() -> None:
    async def listener(event: Any) -> None:
        pass

    async def main() -> None:
        async with AsyncScheduler(clock=FakeClock()) as s:
            with pytest.raises(TypeError, match="listener must be a plain function"):
                s.subscribe(listener)

    asyncio.run(main())


def test_a_coroutine_raising_system_exit_does_not_leak_running_counters() -> None:
    # As on the thread runner: a BaseException is not the job's outcome; the run is abandoned
    # (its bookkeeping undone) and the exception propagates.
    clock = FakeClock()
    box: dict[str, Any] = {}

    async def leave() -> None:
        raise SystemExit(3)

    async def main() -> None:
        s = AsyncScheduler(clock=clock)
        box["s"] = s
        async with s:
            box["job"] = s.schedule(leave, 0)
            await s.idle()

    with pytest.raises(SystemExit):
        asyncio.run(main())
    _collect_the_main_task()
    s, job = box["s"], box["job"]
    assert s.stats().running == 0
    assert job.state is JobState.FAILED


@pytest.mark.parametrize("kind", ["coroutine", "plain in a process pool"])
def test_a_listener_s_base_exception_on_the_loop_leaves_no_run_half_begun(
    kind: str,
) -> None:
    # The loop runs in the main thread, where a listener's SystemExit (or KeyboardInterrupt)
    # reaches the caller; the run it was about to start stayed RUNNING for good (running 1).
    clock = FakeClock()
    box: dict[str, Any] = {}

    async def work() -> None:
        pass

    def interrupting(event: object) -> None:
        raise SystemExit(3)

    async def main() -> None:
        with cf.ProcessPoolExecutor(1) as pool:
            s = AsyncScheduler(clock=clock, executors={"procs": pool})
            box["s"] = s
            s.subscribe(interrupting, JobStarted)
            async with s:
                if kind == "coroutine":
                    box["job"] = s.schedule(work, FixedRate(10))
                else:
                    box["job"] = s.schedule(print, FixedRate(10), executor="procs")
                clock.advance(10)
                await s.idle()

    with pytest.raises(SystemExit):
        asyncio.run(main())
    _collect_the_main_task()
    s, job = box["s"], box["job"]
    assert s.stats().running == 0 and job.state is JobState.SCHEDULED


async def _poll_while_closing(one: AsyncScheduler, clock: FakeClock) -> None:
    """Once ``one``'s loop has stopped (it no longer watches the clock), move ``clock`` 0.25 s,
    a poll's worth, and wait for the closing scheduler to make that poll."""
    for _ in range(100_000):
        if not clock._callbacks:
            break
        await asyncio.sleep(0)
    assert not clock._callbacks, "the loop did not stop"
    replica: Any = one._replica
    polled = replica.next_poll
    clock.advance(0.25)
    for _ in range(int(WAIT / 0.001)):
        if replica.next_poll != polled:
            break
        await asyncio.sleep(0.001)
    assert replica.next_poll != polled, "the lease was not renewed"


def test_runs_going_on_at_aclose_keep_their_leases_while_it_waits(tmp_path: Path) -> None:
    # As the thread runner's: waiting for its runs, the stopping loop renewed no lease, and
    # another worker took a run longer than the lease over and ran it a second time.
    clocks = [FakeClock(start=FAKE_START), FakeClock(start=FAKE_START)]
    db = tmp_path / "j.db"
    other = Scheduler(clocks[1], store=SQLiteStore(db), lease=0.3)
    ran_there: list[int] = []
    other.register("slow", lambda: ran_there.append(1))

    async def main() -> None:
        one = AsyncScheduler(clocks[0], store=SQLiteStore(db), lease=0.3)
        started, release = asyncio.Event(), asyncio.Event()

        async def slow() -> None:
            started.set()
            await release.wait()

        one.register("slow", slow)
        one.schedule("slow", 10, id="s")
        await one.start()
        clocks[0].advance(10)  # claimed, its lease until 10.3 s
        await asyncio.wait_for(started.wait(), WAIT)
        closing = asyncio.ensure_future(one.aclose())
        await _poll_while_closing(one, clocks[0])  # (renews its lease until 10.55 s)
        clocks[1].advance(10.4)
        assert other.run_pending() == 0  # not taken over: its lease holds
        release.set()
        await asyncio.wait_for(closing, WAIT)

    try:
        asyncio.run(main())
        assert ran_there == []
        assert [(r.state, r.attempt) for r in other.runs()] == [("succeeded", 1)]
    finally:
        other.shutdown()


def test_a_coroutine_cancelled_at_aclose_is_not_renewed_while_aclose_waits(
    tmp_path: Path,
) -> None:
    # aclose(cancel_running=True) renewed every lease this process held while it waited for
    # a plain job in a thread, the cancelled coroutine's too: its takeover waited for the
    # close instead of its lease (as after a crash).
    clocks = [FakeClock(start=FAKE_START), FakeClock(start=FAKE_START)]
    db = tmp_path / "j.db"
    other = Scheduler(clocks[1], store=SQLiteStore(db), lease=0.3)
    ran_there: list[str] = []
    for name in ("coro", "plain"):
        other.register(name, functools.partial(ran_there.append, name))
    gate = threading.Event()

    async def main() -> None:
        one = AsyncScheduler(clocks[0], store=SQLiteStore(db), lease=0.3)
        started = asyncio.Event()

        async def coro() -> None:
            started.set()
            await asyncio.Event().wait()

        one.register("coro", coro)
        one.register("plain", lambda: gate.wait(WAIT))
        one.schedule("coro", 10, id="c")
        one.schedule("plain", 10, id="p")
        await one.start()
        clocks[0].advance(10)  # both claimed, their leases until 10.3 s
        await asyncio.wait_for(started.wait(), WAIT)
        closing = asyncio.ensure_future(one.aclose(cancel_running=True))
        await _poll_while_closing(one, clocks[0])  # (renews the plain run's lease)
        clocks[1].advance(10.4)
        assert other.run_pending() == 1  # the coroutine's run, its lease out: taken over
        gate.set()
        await asyncio.wait_for(closing, WAIT)

    try:
        asyncio.run(main())
        assert ran_there == ["coro"]
        assert sorted((r.job_id, r.state, r.attempt) for r in other.runs()) == [
            ("c", "succeeded", 2),
            ("p", "succeeded", 1),
        ]
    finally:
        gate.set()
        other.shutdown()


def test_start_outside_a_loop_is_refused_with_the_way_to_do_it() -> None:
    s = AsyncScheduler(clock=FakeClock())
    with pytest.raises(
        RuntimeError,
        match=r"use 'async with AsyncScheduler\(\.\.\.\) as s:' or 'await s.start\(\)'",
    ):
        s.start()
    with (
        pytest.raises(
            TypeError, match="AsyncScheduler is an async context manager: use 'async with"
        ),
        s,
    ):
        pass
    assert not s.running and len(s) == 0


def test_await_start_runs_coroutine_jobs_on_the_loop() -> None:
    clock = FakeClock(start=FAKE_START)
    seen: list[float] = []

    async def job() -> None:
        seen.append(clock.monotonic())

    async def main() -> None:
        s = AsyncScheduler(clock=clock)
        await s.start()
        assert s.running
        with pytest.raises(RuntimeError, match="already running"):
            s.start()
        s.schedule(job, 5)
        clock.advance(5)
        await s.idle()
        await s.aclose()
        assert not s.running

    asyncio.run(main())
    assert seen == [5.0]


def test_a_second_start_in_the_same_tick_is_refused() -> None:
    async def main() -> None:
        s = AsyncScheduler(clock=FakeClock())
        first = s.start()
        with pytest.raises(RuntimeError, match=r"already running; start\(\) was called twice"):
            s.start()
        await first
        await s.aclose()
        assert not s.running
        with pytest.raises(SchedulerShutdownError, match="start"):
            s.start()

    asyncio.run(main())


def test_async_callables_run_on_the_applications_loop() -> None:
    import functools

    app: list[asyncio.AbstractEventLoop] = []
    loops: list[bool] = []

    class Fetcher:
        async def __call__(self, tag: str) -> None:
            loops.append(asyncio.get_running_loop() is app[0])

    async def fetch(tag: str) -> None:
        loops.append(asyncio.get_running_loop() is app[0])

    async def main() -> None:
        app.append(asyncio.get_running_loop())
        async with AsyncScheduler(clock=FakeClock()) as s:
            s.schedule(Fetcher(), 0, args=("object",))
            s.schedule(functools.partial(fetch, "partial"), 0)
            await s.idle()

    asyncio.run(main())
    assert loops == [True, True]


@pytest.fixture(params=["sqlite", "postgres"])
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Any]:
    """Make stores on one durable database (a SQLite file, or this test's PostgreSQL schema)."""
    if request.param == "sqlite":
        return lambda: SQLiteStore(tmp_path / "jobs.db")
    pg_store: Callable[[], Any] = request.getfixturevalue("pg_store")
    return pg_store


def test_the_asyncio_runner_on_a_durable_store_claims_records_and_survives_a_restart(
    durable: Callable[[], Any],
) -> None:
    clock = FakeClock(start=FAKE_START)
    keys: list[str] = []

    async def fetch(name: str) -> str:
        run = current_run()
        assert run is not None
        await asyncio.sleep(0)
        keys.append(run.key)
        return name

    def tidy() -> None:
        run = current_run()
        assert run is not None
        keys.append(run.key)

    stores = [durable(), durable()]

    async def first() -> None:
        async with AsyncScheduler(clock=clock, store=stores[0]) as s:
            s.register("fetch", fetch)
            s.register("tidy", tidy)
            s.schedule("fetch", FixedRate(10), args=("a",), id="every-10")
            s.schedule("tidy", 5, id="once")
            clock.advance(10)
            await s.idle()

    async def second() -> list[tuple[str, str]]:
        async with AsyncScheduler(clock=clock, store=stores[1]) as s:
            s.register("fetch", fetch)
            s.register("tidy", tidy)
            assert [j.id for j in s.jobs()] == ["every-10"]
            clock.advance(10)
            await s.idle()
            return sorted((r.job_id, r.state) for r in s.runs())

    asyncio.run(first())
    assert sorted(k.split("@")[0] for k in keys) == ["every-10", "once"]
    runs = asyncio.run(second())
    assert runs == [("every-10", "succeeded"), ("every-10", "succeeded"), ("once", "succeeded")]
    assert len(set(keys)) == len(keys) == 3
    # Leaving ``async with`` closed each store (PostgreSQL's listening thread and connections).
    assert [store.is_open for store in stores] == [False, False]


def test_import_duetime_does_not_import_asyncio() -> None:
    # A program on the thread runner (every worker process, the command line) does not pay for
    # importing asyncio; AsyncScheduler imports it when it is used.
    code = (
        "import sys, duetime\n"
        "print('asyncio' in sys.modules)\n"
        "import asyncio\n"
        "async def main():\n"
        "    async with duetime.AsyncScheduler() as s:\n"
        "        s.schedule(lambda: print('ran'), 0)\n"
        "        await s.idle()\n"
        "asyncio.run(main())\n"
    )
    assert fresh_python(code) == ["False", "ran"]


def test_async_scheduler_annotations_resolve_without_asyncio_imported_by_duetime() -> None:
    hints = typing.get_type_hints(AsyncScheduler)
    assert "_task" in hints
    for name in ("start", "aclose", "idle", "__aenter__", "__aexit__"):
        assert "return" in typing.get_type_hints(getattr(AsyncScheduler, name)), name


def test_closing_with_cancel_running_records_a_plain_job_that_started(tmp_path: Path) -> None:
    # A plain function running in a thread cannot be cancelled: the close waits for it, so its
    # outcome is written before the store closes (it was refused, "the store is closed", and
    # the run stayed running, to be run again after its lease by the next worker).
    clock = FakeClock(start=FAKE_START)
    gate = threading.Event()
    started = threading.Event()
    waiter = cf.ThreadPoolExecutor(1)

    def slow() -> None:
        started.set()
        gate.wait(10)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        s = AsyncScheduler(clock=clock, store=SQLiteStore(tmp_path / "j.db"))
        s.register("slow", slow)
        await s.start()
        s.schedule("slow", 0, id="s")
        assert await loop.run_in_executor(waiter, started.wait, 10)
        close = asyncio.ensure_future(s.aclose(cancel_running=True))
        for _ in range(1000):
            await asyncio.sleep(0)
        assert not close.done()  # (waiting for the job)
        gate.set()
        await asyncio.wait_for(close, 10)

    asyncio.run(main())
    waiter.shutdown()
    s = Scheduler(clock, store=SQLiteStore(tmp_path / "j.db"))
    assert [(r.state, r.attempt) for r in s.runs("s")] == [("succeeded", 1)]
    s.shutdown()


def test_a_coroutine_run_another_worker_took_over_before_it_started_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The asyncio runner asks, as the thread runner's execute does, before a coroutine starts
    # (here the store's answer is made "taken over": the claim check itself is tested with the
    # thread runner in test_sqlite.py).
    clock = FakeClock(start=FAKE_START)
    ran: list[str] = []
    asked: list[str] = []

    async def job() -> None:
        ran.append("ran")

    async def main() -> Scheduler:
        s = AsyncScheduler(clock=clock, store=SQLiteStore(tmp_path / "j.db"))

        def lost(occ: Any) -> bool:
            asked.append(occ[6])
            s._abandon(occ)
            return False

        monkeypatch.setattr(s, "_engine", dataclasses.replace(s._engine, may_start=lost))
        s.register("job", job)
        await s.start()
        s.schedule("job", 0, id="c")
        await s.idle()
        await s.aclose()
        return s

    s = asyncio.run(main())
    assert ran == [] and asked == ["c@2026-01-05T08:00:00+00:00"]
    assert s.stats().running == 0


def test_an_inline_plain_job_s_system_exit_goes_on_to_the_loop() -> None:
    # On the loop's own thread a plain function is treated as a coroutine job is: asyncio has
    # its way with SystemExit (the thread runner makes it the job's failure instead).
    clock = FakeClock()

    def quits() -> None:
        raise SystemExit(3)

    async def main() -> None:
        async with AsyncScheduler(clock=clock, executor="inline") as s:
            s.schedule(quits, 0)
            await asyncio.wait_for(asyncio.Event().wait(), 10)  # (only a bug waits)

    with pytest.raises(SystemExit):
        asyncio.run(main())
    _collect_the_main_task()
