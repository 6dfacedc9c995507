"""asyncio integration: the runner as a task on the loop instead of a thread.

``AsyncScheduler`` is a ``Scheduler`` whose runner is a coroutine: coroutine jobs run as tasks on
the running loop, plain functions in the loop's default executor. It sleeps on an
``asyncio.Event`` that is set, through ``loop.call_soon_threadsafe``, when an insert from any thread
becomes the new head, when a run finishes, or (with a ``FakeClock``) when fake time moves. So async
code can be tested without real sleeping, exactly like threaded code::

    async with AsyncScheduler(clock=clock) as s:
        s.schedule(fetch, 10)
        clock.advance(10)
        await s.idle()

The job life cycle is the Scheduler's own (``_pop_due``, ``_begin``, ``_finish_locked``): only the
waiting and the dispatching differ from the threaded runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from typing import Any

from duetime._validate import NS_PER_SECOND
from duetime.clock import FakeClock
from duetime.errors import SchedulerShutdownError
from duetime.events import SchedulerStarted, SchedulerStopped
from duetime.job import JobState, _current
from duetime.runner import HeadWatcher
from duetime.scheduler import Scheduler, _Occ

__all__ = ["AsyncRunner", "AsyncScheduler"]


class AsyncRunner(HeadWatcher):
    """Runs a Scheduler on the current asyncio loop (created by ``Scheduler.run_async``)."""

    def __init__(self, scheduler: Scheduler) -> None:
        super().__init__(scheduler)
        self._loop = asyncio.get_running_loop()
        self._wakeup = asyncio.Event()
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Future[Any]] = set()
        self._cancel = False

    # -- called from any thread, under the scheduler's lock --------------------------------------

    def _wake(self) -> None:
        # The loop task and idle() callers both look again.
        with contextlib.suppress(RuntimeError):  # a closed loop has nothing left to wake
            self._loop.call_soon_threadsafe(self._set_both)

    def _set_both(self) -> None:
        self._wakeup.set()
        self._changed.set()

    def stop(self, *, wait: bool, cancel_running: bool) -> None:
        """Ask the loop task to stop (it finishes in ``run``)."""
        self._stop = True
        self._cancel = cancel_running
        self._wake()

    def wait_idle(self, timeout: float | None) -> bool:
        """Not available from inside the loop: use ``await AsyncScheduler.idle()``."""
        raise RuntimeError("use 'await scheduler.idle()' with an asyncio runner")

    # -- the loop task ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Pop, dispatch and sleep until stopped."""
        s = self._s
        clock = s._clock
        # A FakeClock wakes the loop when it moves: no real-time timeout.
        fake = isinstance(clock, FakeClock)
        remove = clock.on_move(self._wake) if isinstance(clock, FakeClock) else None
        s._emit([SchedulerStarted(s._now_dt())])
        try:
            while not self._stop:
                with s._lock:
                    wall = clock.time_ns()
                    mono = clock.monotonic_ns()
                    item = s._pop_due(wall, mono)
                    occ = None
                    timeout: float | None = None
                    if item is not None:
                        occ = s._begin(*item, wall, mono)
                    else:
                        timeout_ns = self._plan_sleep(wall, mono)
                        if timeout_ns is not None and not fake:
                            timeout = timeout_ns / NS_PER_SECOND
                        self._sleeping = True
                        self._wakeup.clear()
                    events = s._take_events()
                if events:
                    s._emit(events)
                if item is not None:
                    if occ is not None:
                        self._dispatch(occ)
                    await asyncio.sleep(0)  # let started tasks and other callbacks run
                    continue
                self._changed.set()
                try:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wakeup.wait(), timeout)
                finally:
                    self._sleeping = False
        finally:
            if remove is not None:
                remove()
            tasks = list(self._tasks)
            if self._cancel:
                for task in tasks:
                    task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            s._emit([SchedulerStopped(s._now_dt())])

    def _dispatch(self, occ: _Occ) -> None:
        job = occ[0]
        fut: asyncio.Future[Any]
        if inspect.iscoroutinefunction(job.func):
            fut = self._loop.create_task(self._run_coroutine(occ))
        else:
            fut = self._run_in_executor(occ)
        self._tasks.add(fut)
        fut.add_done_callback(self._task_done)

    def _run_in_executor(self, occ: _Occ) -> asyncio.Future[Any]:
        """Run a plain function in the loop's default executor.

        If the future is cancelled (``aclose(cancel_running=True)``) before a worker starts the
        job, nothing will record its outcome, so the run is abandoned here. Whether it started
        is settled under the scheduler's lock, so exactly one side does the bookkeeping.
        """
        s = self._s
        state = {"started": False, "abandoned": False}

        def run() -> None:
            with s._lock:
                if state["abandoned"]:
                    return
                state["started"] = True
            s._execute(occ)

        def done(fut: asyncio.Future[Any]) -> None:
            if not fut.cancelled():
                return
            with s._lock:
                if state["started"]:
                    return
                state["abandoned"] = True
            s._abandon(occ)

        fut = self._loop.run_in_executor(None, run)
        fut.add_done_callback(done)
        return fut

    def _task_done(self, fut: asyncio.Future[Any]) -> None:
        self._tasks.discard(fut)
        self._changed.set()  # idle() may be waiting for exactly this

    async def _run_coroutine(self, occ: _Occ) -> None:
        s = self._s
        job = occ[0]
        if job._state is JobState.CANCELLED:
            s._abandon(occ)
            return
        s._emit_started(occ)
        token = _current.set(occ)
        try:
            kwargs = job.kwargs or {}
            result = await job.func(*job.args, **kwargs)
        except asyncio.CancelledError:
            s._abandon(occ)
            raise
        except Exception as exc:
            s._finish_outcome(occ, None, exc)
        except BaseException:
            # KeyboardInterrupt, SystemExit: not the job's outcome (as in Scheduler._call).
            s._abandon(occ, failed=True)
            raise
        else:
            s._finish_outcome(occ, result, None)
        finally:
            _current.reset(token)

    async def idle(self) -> None:
        """Wait until nothing is due and nothing is running."""
        s = self._s
        while True:
            with s._lock:
                if s._idle_locked() and not self._tasks:
                    return
                self._changed.clear()
            await self._changed.wait()


class AsyncScheduler(Scheduler):
    """A Scheduler whose runner is a task on the running asyncio loop.

    Use it as ``async with AsyncScheduler(...) as s:`` (for example in a web framework's lifespan
    handler), or call ``await s.run_async()`` yourself. ``schedule``, ``cancel`` and the other
    management methods are safe to call from any thread.

    Args:
        *args: As for ``Scheduler``.
        **kwargs: As for ``Scheduler``.
    """

    _task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Future[None]:  # type: ignore[override]
        """Start the runner as a task on the running loop: ``await s.start()``.

        The task starts at once; the returned future is done when the runner has installed
        itself, so awaiting it is optional.

        Raises:
            RuntimeError: No asyncio loop is running in this thread. (A thread runner would
                never await coroutine jobs, so an AsyncScheduler refuses to start without one.)
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "AsyncScheduler runs on a running asyncio loop: use 'async with "
                "AsyncScheduler(...) as s:' or 'await s.start()' inside a coroutine, or use "
                "Scheduler for a thread runner"
            ) from None
        if self._shutdown:
            raise SchedulerShutdownError("start")
        if self._runner is not None:
            raise RuntimeError("the scheduler is already running; start() was called twice")
        self._task = loop.create_task(self.run_async())
        started: asyncio.Future[None] = loop.create_future()
        # Callbacks run in order: the task's first step (which installs the runner) first.
        loop.call_soon(started.set_result, None)
        return started

    def __enter__(self) -> AsyncScheduler:
        raise TypeError(
            "AsyncScheduler is an async context manager: use 'async with AsyncScheduler(...) "
            "as s:' inside a coroutine (or Scheduler with a plain 'with')"
        )

    async def __aenter__(self) -> AsyncScheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self, cancel_running: bool = False) -> None:
        """Stop the runner task and wait for running jobs (cancelling them if asked)."""
        self.shutdown(wait=False, cancel_running=cancel_running)
        if self._task is not None:
            await self._task

    async def idle(self) -> None:
        """Wait until nothing is due and nothing is running (for tests)."""
        runner = self._runner
        if not isinstance(runner, AsyncRunner):
            raise RuntimeError("the asyncio runner is not running")
        await runner.idle()
