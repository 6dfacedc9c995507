"""The service: a runner started on the scheduler (``start``), stopped (``shutdown``), waited for
(``wait_idle``).

The scheduler composes one ``Service`` and delegates these to it. A runner gets the scheduler's
``Engine``, never the scheduler; one runner at a time (``claim_runner``). With a durable store,
shutdown writes the outcomes still waiting and closes the store once the runs going on have
ended (``Replica.close_store_locked``, ``Replica.close_if_idle_locked``).

Lock rules: each method takes the scheduler's lock itself, except ``idle_locked`` (held)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol, TypeVar

from duetime._aiorunner import AsyncRunner
from duetime._engine import Engine
from duetime._replica import Replica
from duetime._validate import (
    NS_PER_SECOND,
    duration_ns,
)
from duetime.clock import (
    NsClock,
    real_monotonic,
)
from duetime.errors import (
    SchedulerShutdownError,
)
from duetime.job import (
    JobHost,
    _current,
)
from duetime.runner import Runner, RunnerLike, serving
from duetime.stores.memory import MemoryStore

__all__ = ["Host", "Service"]

logger = logging.getLogger("duetime")

R = TypeVar("R", bound=RunnerLike)


# How often (real seconds) wait_idle() without a runner looks whether the runs still going
# have ended.
_IDLE_SLICE = 0.005


class Host(JobHost, Protocol):
    """What this part uses of the scheduler that composes it."""

    _clock: NsClock
    _cond: threading.Condition
    _engine: Engine
    _lock: threading.RLock
    _replica: Replica | None
    _runner: RunnerLike | None
    _running_total: int
    _shutdown: bool
    _store: MemoryStore


class Service:
    """The runner wiring of the scheduler that composes it (see the module's docstring)."""

    def __init__(self, host: Host) -> None:
        self._s = host

    def start(self) -> None:
        """``Scheduler.start`` (see there)."""
        name = f"duetime-runner-{id(self._s):x}"
        self.claim_runner("start", lambda engine: Runner(engine, name)).start()

    def claim_runner(self, method: str, make: Callable[[Engine], R]) -> R:
        """Make the scheduler's one runner from its engine, for ``start`` or ``run_async``."""
        with self._s._lock:
            if self._s._shutdown:
                raise SchedulerShutdownError(method)
            if self._s._runner is not None:
                raise RuntimeError(f"the scheduler is already running; {method}() was called twice")
            runner = self._s._runner = make(self._s._engine)
            listen = getattr(self._s._store, "listen", None)
            if listen is not None and self._s._replica is not None:
                # Other processes' changes wake this one at once (PostgreSQL's LISTEN/NOTIFY).
                listen(self._s._replica.refresh)
        return runner

    def shutdown(self, wait: bool = True, cancel_running: bool = False) -> None:
        """``Scheduler.shutdown`` (see there)."""
        with self._s._lock:
            if self._s._replica is not None and self._s._replica.store.batch_open:
                # (Only the thread holding the batch gets here while it is open. Its runner
                # would wait for the lock this thread holds, and the store would close under
                # the open transaction.)
                raise RuntimeError("shutdown() inside a batch() block: end the block first")
            already = self._s._shutdown
            self._s._shutdown = True
            runner = self._s._runner
            self._s._cond.notify_all()
        try:
            if runner is not None and not already:
                try:
                    runner.stop(wait=wait, cancel_running=cancel_running)
                finally:
                    with self._s._lock:
                        self._s._runner = None
        finally:
            occ = _current.get()
            inside = (occ is not None and occ.job._sched is self._s) or serving() is self._s._engine
            if (
                self._s._replica is not None
                and not inside
                and (runner is None or (wait and not isinstance(runner, AsyncRunner)))
            ):
                # The end of the scheduler's life: its connection goes too. (Without wait, runs
                # still going will record their outcomes: the lease covers them instead. So
                # when a job of this scheduler shuts it down, which cannot wait for itself: its
                # own outcome, and the giving back of the rest of its batch, come after this.
                # An asyncio runner cannot be waited for from here: it closes the store itself
                # once its tasks are done, in _serve.)
                with self._s._lock:
                    self._s._replica.close_store_locked()
            elif self._s._replica is not None and not isinstance(runner, AsyncRunner):
                # Runs still going record their outcomes; the store closes after the last
                # (it stayed open for good: two connections and a thread, for PostgreSQL).
                with self._s._lock:
                    # (From inside a job, or a JobStarted listener, its run is still counted;
                    # from a run's JobSucceeded or JobFailed listener it has ended: no later
                    # finish would come to close the store.)
                    self._s._replica.close_when_idle = True
                    self._s._replica.close_if_idle_locked()

    def wait_idle(self, timeout: float | timedelta | None = None) -> bool:
        """``Scheduler.wait_idle`` (see there)."""
        seconds = None if timeout is None else duration_ns("timeout", timeout) / NS_PER_SECOND
        occ = _current.get()
        if (occ is not None and occ.job._sched is self._s) or serving() is self._s._engine:
            # From inside one of its runs, or a run's listener: that run is going, so it is not
            # idle, and waiting for it to end would wait for itself (for ever, without a
            # timeout).
            return False
        runner = self._s._runner
        if runner is not None:
            return runner.wait_idle(seconds)
        deadline = None if seconds is None else real_monotonic() + seconds
        with self._s._cond:
            # (Polled in short slices: a run ending with no runner wakes nobody, and a notify
            # there would cost every run stepped by hand.)
            while self._s._running_total:
                left = _IDLE_SLICE if deadline is None else deadline - real_monotonic()
                if left <= 0:
                    break
                self._s._cond.wait(min(left, _IDLE_SLICE))
            return self.idle_locked()

    def idle_locked(self) -> bool:
        """Whether nothing is due now and nothing is running (lock held). The runners add
        their own in-flight work to this."""
        if self._s._replica is not None and self._s._replica.outcomes.outbox:
            return False  # outcomes to write (the runner writes them before it sleeps)
        mono = self._s._clock.monotonic_ns()
        head = self._s._store.head(self._s._clock.time_ns(), mono)
        return self._s._running_total == 0 and (head is None or head[2] > mono)
