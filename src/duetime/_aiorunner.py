"""The asyncio runner: the scheduler's runner as a task on the running loop, not a thread.

Coroutine jobs run as tasks on the loop, plain functions in their executor (by default the loop's
default executor; ``"inline"``: on the loop). It sleeps on an ``asyncio.Event`` that is set,
through ``loop.call_soon_threadsafe``, when an insert from any thread becomes the new head, when a
run finishes, or (with a ``FakeClock``) when fake time moves.
It runs the same life cycle as manual stepping and the thread runner, through the engine's
interface (``duetime._engine.Engine``); ``duetime.aio`` builds ``AsyncScheduler`` on it.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import inspect
import logging
from typing import TYPE_CHECKING, Any

from duetime._awaiting import call_to_completion
from duetime._engine import Engine
from duetime._validate import NS_PER_SECOND
from duetime.clock import FakeClock, WallAxis
from duetime.events import SchedulerStarted, SchedulerStopped
from duetime.job import Occ, _current, revoked
from duetime.runner import HeadWatcher, finish_from_process

logger = logging.getLogger("duetime")

if TYPE_CHECKING:
    import asyncio

__all__ = ["AsyncRunner", "is_coroutine_function"]


def is_coroutine_function(func: Any) -> bool:
    """Whether calling ``func`` makes a coroutine, as far as can be told without calling it:
    an ``async def`` function, a method or ``functools.partial`` of one, or an object whose
    ``__call__`` is one. (A plain function that happens to return a coroutine is run in the
    executor, which runs the coroutine in a loop of its own: say ``async def`` to share the
    application's loop.)"""
    return inspect.iscoroutinefunction(func) or (
        not inspect.isroutine(func) and inspect.iscoroutinefunction(type(func).__call__)
    )


def _retrieve(fut: asyncio.Future[Any]) -> None:
    """Mark a done future's exception as read (its outcome is recorded elsewhere)."""
    if not fut.cancelled():
        fut.exception()


class AsyncRunner(HeadWatcher):
    """Runs a Scheduler (its ``Engine``) on the current asyncio loop (``Scheduler.run_async``)."""

    def __init__(self, engine: Engine) -> None:
        # (asyncio is imported where it is used: ``import duetime`` would otherwise import it
        # in every program, a quarter of duetime's own import time, for the few that use it.)
        import asyncio

        super().__init__(engine)
        self._loop = asyncio.get_running_loop()
        self._wakeup = asyncio.Event()
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Future[Any]] = set()
        # The process pools' own futures behind their asyncio wrappers (_run_in_process).
        self._pooled: dict[asyncio.Future[Any], cf.Future[Any]] = {}
        # Plain functions in thread pools (_run_in_executor): whether each started, and an
        # event set when it has finished and its outcome is recorded.
        self._plain: dict[asyncio.Future[Any], tuple[dict[str, bool], asyncio.Event]] = {}
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
        import asyncio

        s = self._s
        clock = s.clock
        # A FakeClock wakes the loop when it moves: no real-time timeout. (A durable store's
        # scheduler reads it through a WallAxis view.)
        base = clock.inner if isinstance(clock, WallAxis) else clock
        fake = isinstance(base, FakeClock)
        remove = base.on_move(self._wake) if isinstance(base, FakeClock) else None
        s.emit([SchedulerStarted(s.now())])
        try:
            while not self._stop:
                with s.lock:
                    wall = clock.time_ns()
                    mono = clock.monotonic_ns()
                    if s.poll:
                        self._poll(mono)
                    item = s.pop_due(wall, mono)
                    occ = None
                    timeout: float | None = None
                    if item is not None:
                        occ = s.begin(*item, wall, mono)
                    else:
                        timeout_ns = self._plan_sleep(wall, mono)
                        if timeout_ns is not None and not fake:
                            timeout = timeout_ns / NS_PER_SECOND
                        self._sleeping = True
                        self._wakeup.clear()
                    events = s.drain_events()
                if events:
                    s.emit(events)
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
            plain = [self._plain[task] for task in tasks if task in self._plain]
            if self._cancel:
                for task in tasks:
                    pooled = self._pooled.get(task)
                    # A process pool's job is cancelled only if it has not started; cancelling
                    # its asyncio wrapper would drop the outcome of one that runs on.
                    (task if pooled is None else pooled).cancel()
            # With a durable store, the loop above renewed the leases of the runs going on
            # here; waiting for them, this does (another process took a run longer than the
            # lease over, and ran it a second time, during a clean shutdown).
            renewing = asyncio.ensure_future(self._renew()) if s.poll and tasks else None
            try:
                if tasks:
                    await asyncio.gather(*tasks, return_exceptions=True)
                for started, finished in plain:
                    # A thread cannot be cancelled: a plain function that started runs to its
                    # end, and its outcome is recorded before the scheduler closes its store (a
                    # durable store's run was otherwise left running, to be run again after its
                    # lease).
                    if started["started"]:
                        await finished.wait()
            finally:
                if renewing is not None:
                    renewing.cancel()
            s.emit([SchedulerStopped(s.now())])

    async def _renew(self) -> None:
        """Renew this process's leases at every poll interval (real seconds), until cancelled."""
        import asyncio

        s = self._s
        while True:
            await asyncio.sleep(s.poll / NS_PER_SECOND)
            with s.lock:
                s.renew()

    def _dispatch(self, occ: Occ) -> None:
        """Start one occurrence: a coroutine as a task on the loop; a plain function in its
        executor, as the thread runner would (the job's named one, else the scheduler's
        ``executor=``), where ``None`` is the loop's default executor and ``"inline"`` runs it
        here, on the loop."""
        job = occ.job
        fut: asyncio.Future[Any]
        if is_coroutine_function(job.func):
            fut = self._loop.create_task(self._run_coroutine(occ))
        else:
            s = self._s
            name = job._opts.executor
            executor: Any = s.executors[name] if name is not None else s.executor
            if executor == "inline":
                s.execute_here(occ)
                self._changed.set()
                return
            try:
                if isinstance(executor, cf.ProcessPoolExecutor):
                    fut = self._run_in_process(occ, executor)
                else:
                    fut = self._run_in_executor(occ, executor)
            except Exception as exc:  # a rejecting executor (shut down, saturated, ...)
                logger.error("executor %r rejected job %r: %s", executor, job.id, exc)
                s.finish(occ, None, exc)
                self._changed.set()
                return
        self._tasks.add(fut)
        fut.add_done_callback(self._task_done)

    def _run_in_process(self, occ: Occ, executor: cf.Executor) -> asyncio.Future[Any]:
        """Run a plain function in a process pool: another process cannot run the scheduler's
        bookkeeping, so the bare function goes, and its outcome is recorded here."""
        import asyncio

        s = self._s
        job = occ.job
        if s.may_start is not None and not s.may_start(occ):
            done: asyncio.Future[Any] = self._loop.create_future()
            done.set_result(None)
            return done
        s.emit_started(occ)
        pooled = executor.submit(call_to_completion, job.func, job.args, job.kwargs or {})
        # The outcome is recorded from the pool's own future (in the pool's thread, as the
        # thread runner does): the asyncio wrapper, which the loop completes later, may be
        # cancelled with the runner while the job runs on.
        pooled.add_done_callback(lambda pooled: finish_from_process(s, occ, pooled))
        fut = asyncio.wrap_future(pooled, loop=self._loop)
        self._pooled[fut] = pooled
        fut.add_done_callback(self._pooled.pop)
        # (Its exception, the job's failure, is recorded from the pool's future: the wrapper
        # is read too, or asyncio logs "Future exception was never retrieved" when it goes.)
        fut.add_done_callback(_retrieve)
        return fut

    def _run_in_executor(self, occ: Occ, executor: cf.Executor | None) -> asyncio.Future[Any]:
        """Run a plain function in ``executor`` (None: the loop's default executor).

        If the future is cancelled (``aclose(cancel_running=True)``) before a worker starts the
        job, nothing will record its outcome, so the run is abandoned here. Whether it started
        is settled under the scheduler's lock, so exactly one side does the bookkeeping.
        """
        import asyncio

        s = self._s
        state = {"started": False, "abandoned": False}
        finished = asyncio.Event()
        loop = self._loop

        def run() -> None:
            with s.lock:
                if state["abandoned"]:
                    return
                state["started"] = True
            try:
                s.execute(occ)
            finally:
                with contextlib.suppress(RuntimeError):  # (a closed loop waits for nothing)
                    loop.call_soon_threadsafe(finished.set)

        def done(fut: asyncio.Future[Any]) -> None:
            if not fut.cancelled():
                return
            with s.lock:
                if state["started"]:
                    return
                state["abandoned"] = True
            s.abandon(occ, give_back=True)

        fut = self._loop.run_in_executor(executor, run)
        fut.add_done_callback(done)
        self._plain[fut] = (state, finished)
        fut.add_done_callback(self._forget_plain)
        return fut

    def _forget_plain(self, fut: asyncio.Future[Any]) -> None:
        self._plain.pop(fut, None)

    def _task_done(self, fut: asyncio.Future[Any]) -> None:
        self._tasks.discard(fut)
        self._changed.set()  # idle() may be waiting for exactly this

    async def _run_coroutine(self, occ: Occ) -> None:
        import asyncio

        s = self._s
        job = occ.job
        if revoked(occ):
            s.abandon(occ, lost=True)
            return
        if s.may_start is not None and not s.may_start(occ):
            return
        s.emit_started(occ)
        token = _current.set(occ)
        try:
            kwargs = job.kwargs or {}
            result = await job.func(*job.args, **kwargs)
        except asyncio.CancelledError as exc:
            if self._interrupted():
                s.abandon(occ, interrupted=True)
                raise
            # The job's own: it awaited something that was cancelled. That is its failure, as
            # on the thread Scheduler (await_result), recorded and told like any other.
            error = RuntimeError(f"the job's coroutine was cancelled ({exc!r})")
            error.__cause__ = exc
            s.finish(occ, None, error)
        except Exception as exc:
            s.finish(occ, None, exc)
        except BaseException:
            # KeyboardInterrupt, SystemExit: not the job's outcome (as in Scheduler._call).
            s.abandon(occ, failed=True)
            raise
        else:
            s.finish(occ, result, None)
        finally:
            _current.reset(token)

    def _interrupted(self) -> bool:
        """Whether the running job task was cancelled from outside (this runner at shutdown,
        the loop closing, the application), rather than raising ``CancelledError`` itself.
        Python 3.11 counts the cancellations asked of a task; 3.10 cannot tell, and takes every
        ``CancelledError`` for an interruption (as before 3.11's count existed)."""
        import asyncio

        task = asyncio.current_task()
        cancelling = getattr(task, "cancelling", None)
        if cancelling is None:  # pragma: no cover - Python 3.10 (or no task at all)
            return True
        return bool(cancelling())

    async def idle(self) -> None:
        """Wait until nothing is due and nothing is running."""
        s = self._s
        while True:
            with s.lock:
                if s.idle() and not self._tasks:
                    return
                self._changed.clear()
            await self._changed.wait()
