"""The runner thread: sleeps until the next due time, wakes for an earlier insert, dispatches.

It is the only component of duetime with a thread of its own. It runs the same life cycle as
manual stepping, through the engine's interface (``duetime._engine.Engine``: ``pop_due``,
``begin``, ``execute``/``finish``); what it adds is *waiting* and *dispatching*:

* It sleeps through ``clock.wait(condition, timeout)`` until the earliest due time of either
  queue. A ``FakeClock`` wakes it when fake time moves, so threaded tests take no real time.
* An insert notifies it only if the new entry is earlier than the head it is sleeping toward
  (``note_push``); other changes leave it asleep. A cancelled head costs one early wake-up.
* While wall-clock entries exist it sleeps at most ``wall_check_interval`` at a time, so that a
  wall-clock jump (NTP step, suspend) is noticed; with none, it sleeps until notified: an idle
  scheduler uses no CPU.
* It pops under the lock and never holds the lock while a job or a listener runs. Executors get
  the occurrence; their rejections and the jobs' exceptions are recorded, never raised here.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from duetime._awaiting import call_to_completion
from duetime._engine import Engine
from duetime._validate import NS_PER_SECOND
from duetime.clock import real_monotonic
from duetime.events import SchedulerStarted, SchedulerStopped
from duetime.job import Occ, _current
from duetime.recurrence import MONOTONIC

__all__ = ["DEFAULT_WORKERS", "HeadWatcher", "Runner", "RunnerLike", "finish_from_process"]

logger = logging.getLogger("duetime")

#: Threads in the default executor.
DEFAULT_WORKERS = 8

# How long the durable runner pauses after an unexpected failure of its own (nanoseconds).
_RECOVER = NS_PER_SECOND


class RunnerLike(Protocol):
    """What the Scheduler asks of whatever runs it (the thread here, or asyncio's runner)."""

    #: Whether the runner writes finished runs' outcomes to a durable store itself, together,
    #: before it next claims (``Engine.flush``); if not, each is written as it finishes.
    flushes: bool

    def note_push(self, timebase: int, due: int) -> None:
        """Called under the lock before a push; wake up if the entry becomes the new head."""
        ...

    def notify(self) -> None:
        """Called under the lock when a run finished or was abandoned."""
        ...

    def poll_now(self) -> None:
        """Called under the lock: look at the durable store at the next turn, and wake up."""
        ...

    def stop(self, *, wait: bool, cancel_running: bool) -> None:
        """Stop running; with ``wait``, let dispatched jobs finish."""
        ...

    def wait_idle(self, timeout: float | None) -> bool:
        """Block (real time) until nothing is due and nothing is running."""
        ...


def finish_from_process(engine: Engine, occ: Occ, fut: Any) -> None:
    """Record the outcome of a job a process pool ran, from its done future (a
    ``concurrent.futures`` or an ``asyncio`` one): another process cannot run the scheduler's
    bookkeeping. A future cancelled before it started gives the run back."""
    if fut.cancelled():
        engine.abandon(occ, give_back=True)
        return
    error = fut.exception()
    if error is not None and not isinstance(error, Exception):
        error = RuntimeError(f"job raised {error!r} in a worker process")
    engine.finish(occ, None if error else fut.result(), error)


# The engine whose thread runner's pool thread this is, while it runs an occurrence there (the
# job, then its outcome's listeners), or whose process pool's outcome this thread records (the
# pool's management thread); None elsewhere.
_worker = threading.local()


def serving() -> Engine | None:
    """The engine whose runner's pool thread the caller is in, running an occurrence (its
    job or its listeners), or None."""
    engine: Engine | None = getattr(_worker, "engine", None)
    return engine


class HeadWatcher:
    """Wake-up bookkeeping shared by the thread and the asyncio runner.

    The runner records the head it sleeps toward (``_wake_at``, monotonic ns; None when it
    sleeps with nothing queued) and whether it sleeps at all (``_sleeping``: while it is awake
    it re-reads the queues before sleeping, so an insert then needs no wake-up).
    """

    def __init__(self, engine: Engine) -> None:
        self._s = engine
        self._stop = False
        # Monotonic ns of the head the runner sleeps toward; None while it sleeps with nothing
        # queued. _sleeping is False while it is awake (it re-reads the queues before sleeping,
        # so inserts made then need no notify).
        self._wake_at: int | None = None
        self._sleeping = False
        self._next_poll = 0  # monotonic ns of the next durable-store sync
        self.flushes = False

    def note_push(self, timebase: int, due: int) -> None:
        """Called under the lock before an entry is pushed: wake the runner only if the entry
        will be earlier than the head it sleeps toward."""
        if not self._sleeping:
            return
        if timebase != MONOTONIC:
            clock = self._s.clock
            due = due - clock.time_ns() + clock.monotonic_ns()
        if self._wake_at is None or due < self._wake_at:
            self._wake_at = due
            self._wake()

    def notify(self) -> None:
        """Called under the lock when a run finished or was abandoned: look again."""
        self._wake()

    def _wake(self) -> None:
        raise NotImplementedError

    def _plan_sleep(self, wall: int, mono: int) -> int | None:
        """How long to sleep, in nanoseconds (None: until woken), when nothing is due.

        Called with the lock held; records the head slept toward for ``note_push``. While
        wall-clock entries exist the sleep is capped, so that a wall-clock jump is noticed.
        """
        s = self._s
        head = s.head(wall, mono)
        self._wake_at = None if head is None else head[2]
        timeout = None if head is None else head[2] - mono
        if s.wall_queued() and (timeout is None or timeout > s.wall_check):
            timeout = s.wall_check
        if s.poll and (timeout is None or timeout > s.poll):
            # A durable store: other processes' changes are seen by polling (bounded).
            timeout = s.poll
        return timeout

    def poll_now(self) -> None:
        """Look at the durable store at the next turn of the loop, and wake up (lock held)."""
        self._next_poll = 0
        self.notify()

    def _poll(self, mono: int) -> None:
        """With a durable store, sync with it when a poll interval has passed (lock held)."""
        if mono >= self._next_poll:
            self._next_poll = mono + self._s.poll
            self._s.sync()


class Runner(HeadWatcher):
    """Owns the runner thread and the executors of one started Scheduler (its ``Engine``)."""

    def __init__(self, engine: Engine, name: str) -> None:
        super().__init__(engine)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._owned: list[cf.Executor] = []
        self._futures: set[cf.Future[Any]] = set()
        spec = engine.executor
        inline = spec == "inline"
        if spec is None:
            spec = cf.ThreadPoolExecutor(DEFAULT_WORKERS, thread_name_prefix="duetime-worker")
            self._owned.append(spec)
        # (The Scheduler checked both specs when it was built.)
        self._default: cf.Executor | None = None if inline else spec
        self._named: dict[str, Any] = dict(engine.executors)
        self._cap = self._in_flight_cap()

    def _in_flight_cap(self) -> int | None:
        """How many runs handed to executors this runner may have claimed from a durable store
        and not finished: twice the executors' workers (one run going on and one waiting for
        each), so that a worker process does not hoard due fires that other processes, idle,
        could run. None: no cap (jobs run inline, or an executor does not say its size)."""
        pools = [ex for ex in (self._default, *self._named.values()) if ex not in (None, "inline")]
        sizes = [getattr(ex, "_max_workers", None) for ex in pools]
        if not pools or not all(isinstance(n, int) for n in sizes):
            return None
        return 2 * sum(sizes)  # type: ignore[arg-type]

    # -- life -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread and announce it."""
        for ex in self._owned:
            _prestart(ex)
        self._thread.start()
        s = self._s
        s.emit([SchedulerStarted(s.now())])

    def stop(self, *, wait: bool, cancel_running: bool) -> None:
        """Stop the thread; with ``wait``, also wait for dispatched jobs to finish.

        Called from inside a job (a job that shuts its scheduler down), it cannot wait for the
        jobs, its own run among them: it stops the runner and lets running jobs finish.
        """
        s = self._s
        if _current.get() is not None or serving() is s:
            wait = False
        with s.cond:
            self._stop = True
            s.cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        # With a durable store, the runner thread renewed the leases of the runs going on here;
        # it is gone, so the wait for them renews them instead: a run longer than the lease
        # was otherwise taken over by another process and ran twice, during a clean shutdown.
        renew = s.begin_due is not None
        for ex in self._owned:
            ex.shutdown(wait=wait and not renew, cancel_futures=cancel_running)
        with s.lock:
            pending = list(self._futures)
        if cancel_running:
            for fut in pending:
                fut.cancel()
        if wait:
            if renew:
                while cf.wait(pending, timeout=s.poll / NS_PER_SECOND).not_done:
                    with s.lock:
                        s.renew()
                for ex in self._owned:
                    ex.shutdown(wait=True)
            else:
                cf.wait(pending)
        s.emit([SchedulerStopped(s.now())])

    # -- waking -----------------------------------------------------------------------------------

    def _wake(self) -> None:
        # The runner thread and wait_idle() callers all wait on the scheduler's condition.
        self._s.cond.notify_all()

    # -- the loop ---------------------------------------------------------------------------------

    def _loop(self) -> None:
        s = self._s
        cond = s.cond
        with cond:
            # A clock that wakes sleepers when it moves (FakeClock) is told of the condition
            # before the first read of the time: a move between that read and the first sleep
            # would otherwise go unnoticed until something else woke the runner.
            watch = getattr(s.clock, "watch", None)
            if watch is not None:
                watch(cond)
            if s.begin_due is None:
                self._run()
                return
            # A durable store: outcomes wait for this thread, which writes them together.
            self.flushes = True
            try:
                while not self._stop:
                    try:
                        self._run_durable()
                    except Exception:
                        # A store answering what it never should, or a bug: say so, and go
                        # on after a pause, rather than stop running jobs for good.
                        logger.exception(
                            "the runner failed; it goes on in %.0f s", _RECOVER / NS_PER_SECOND
                        )
                        s.clock.wait(cond, _RECOVER / NS_PER_SECOND)
            finally:
                self.flushes = False
                s.flush()

    def _run(self) -> None:
        s = self._s
        clock = s.clock
        cond = s.cond
        while not self._stop:
            wall = clock.time_ns()
            mono = clock.monotonic_ns()
            item = s.pop_due(wall, mono)
            if item is not None:
                occ = s.begin(*item, wall, mono)
                events = s.drain_events()
                cond.release()
                try:
                    if events:
                        s.emit(events)
                    if occ is not None:
                        self._dispatch(occ)
                finally:
                    cond.acquire()
                continue
            self._sleep(wall, mono)

    def _run_durable(self) -> None:
        # As _run, a batch at a time: each turn writes the outcomes of the runs that finished
        # and claims what is due, together (one transaction on PostgreSQL).
        s = self._s
        clock = s.clock
        cond = s.cond
        begin_due = s.begin_due
        assert begin_due is not None
        cap = self._cap
        while not self._stop:
            wall = clock.time_ns()
            mono = clock.monotonic_ns()
            self._poll(mono)
            room = None if cap is None else cap - len(self._futures)
            if room is not None and room <= 0:
                # The executors are full: claim nothing more (other processes may take what
                # falls due) until a run finishes, which wakes this thread.
                s.flush()
                self._sleeping = True
                try:
                    clock.wait(cond, s.poll / NS_PER_SECOND)
                finally:
                    self._sleeping = False
                continue
            occs = begin_due(wall, mono, room)  # (writes the waiting outcomes with its claims)
            if occs is not None:
                events = s.drain_events()
                cond.release()
                try:
                    if events:
                        s.emit(events)
                    for i, occ in enumerate(occs):
                        if self._stopping():
                            # shutdown() came during the batch: nothing more starts. The rest
                            # are given back to the store, for whoever looks for lost runs
                            # next (another process, or this one restarted).
                            s.abandon_all(occs[i:], give_back=True)
                            break
                        if i and clock.monotonic_ns() >= self._next_poll:
                            # Inline runs take their time: renew the leases of the rest.
                            with cond:
                                self._poll(clock.monotonic_ns())
                        self._dispatch(occ)
                finally:
                    cond.acquire()
                continue
            s.flush()  # nothing due: write the waiting outcomes alone
            self._sleep(wall, mono)

    def _stopping(self) -> bool:
        """Whether stop() was called (read afresh: it comes from another thread)."""
        return self._stop

    def _sleep(self, wall: int, mono: int) -> None:
        """Sleep until the head is due, or until woken (lock held)."""
        s = self._s
        clock = s.clock
        cond = s.cond
        timeout_ns = self._plan_sleep(wall, mono)
        cond.notify_all()  # wake wait_idle() callers: nothing is due right now
        self._sleeping = True
        try:
            clock.wait(cond, None if timeout_ns is None else timeout_ns / NS_PER_SECOND)
        finally:
            self._sleeping = False

    def _dispatch(self, occ: Occ) -> None:
        """Hand one occurrence to its executor (lock not held)."""
        s = self._s
        job = occ.job
        name = job._opts.executor
        executor: Any = self._named[name] if name is not None else self._default
        if executor is None or executor == "inline":
            # (This thread runs the job and its listeners meanwhile: one that shuts the
            # scheduler down or waits for it to be idle must not wait for its own run.)
            self._serving(s.execute, occ)
            return
        try:
            if isinstance(executor, cf.ProcessPoolExecutor):
                # Another process cannot run our bookkeeping: submit the bare function and
                # record the outcome when its future completes.
                if s.may_start is not None and not s.may_start(occ):
                    return
                self._serving(s.emit_started, occ)
                # (A coroutine function's coroutine is run there: it cannot cross back.)
                fut = executor.submit(call_to_completion, job.func, job.args, job.kwargs or {})
                fut.add_done_callback(self._done_callback(occ, process=True))
            else:
                fut = executor.submit(self._work, occ)
                fut.add_done_callback(self._done_callback(occ, process=False))
        except Exception as exc:  # a rejecting executor (shut down, saturated, ...)
            logger.error("executor %r rejected job %r: %s", executor, job.id, exc)
            s.finish(occ, None, exc)
            return
        with s.lock:
            if not fut.done():
                self._futures.add(fut)

    def _work(self, occ: Occ) -> None:
        """``execute`` in a pool's thread, which is known meanwhile as this runner's worker: a
        listener that shuts the scheduler down from there (its job's outcome told it to) must
        not wait for the pool, its own thread among it."""
        self._serving(self._s.execute, occ)

    def _serving(self, call: Callable[..., None], *args: Any) -> None:
        """``call(*args)``, with this thread known meanwhile as serving this runner's engine
        (``serving()``)."""
        _worker.engine = self._s
        try:
            call(*args)
        finally:
            _worker.engine = None

    def _done_callback(self, occ: Occ, *, process: bool) -> Callable[[cf.Future[Any]], None]:
        if process:
            return lambda fut: self._process_done(occ, fut)
        return lambda fut: self._thread_done(occ, fut)

    def _retire(self, fut: cf.Future[Any]) -> None:
        with self._s.lock:
            self._futures.discard(fut)
            # wait_idle() may have seen this future in flight after the job's own notify.
            self._s.cond.notify_all()

    def _thread_done(self, occ: Occ, fut: cf.Future[Any]) -> None:
        self._retire(fut)
        if fut.cancelled():
            self._s.abandon(occ, give_back=True)

    def _process_done(self, occ: Occ, fut: cf.Future[Any]) -> None:
        # (In the process pool's management thread, which completes the pool's futures: a
        # listener of this outcome that shuts the scheduler down must not wait for them.)
        self._retire(fut)
        self._serving(finish_from_process, self._s, occ, fut)

    def wait_idle(self, timeout: float | None) -> bool:
        """Block (real time) until nothing is due and nothing is running."""
        s = self._s
        deadline = None if timeout is None else real_monotonic() + timeout
        with s.cond:
            while True:
                if s.idle() and not self._futures:
                    return True
                if self._stop:
                    return s.running() == 0
                remaining = None if deadline is None else deadline - real_monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                s.cond.wait(remaining)


def _prestart(executor: cf.Executor) -> None:
    """Start the pool's worker threads now rather than on the first submits.

    ThreadPoolExecutor spawns a thread inside ``submit`` until it has ``max_workers``; the first
    jobs of a schedule would pay that (milliseconds) as lateness. A barrier makes every worker
    exist before the runner starts.
    """
    workers = getattr(executor, "_max_workers", DEFAULT_WORKERS)
    barrier = threading.Barrier(workers + 1)
    for _ in range(workers):
        executor.submit(barrier.wait, 5.0)
    try:
        barrier.wait(5.0)
    except threading.BrokenBarrierError:  # pragma: no cover - a starved machine; not fatal
        logger.debug("thread pool warm-up timed out")
