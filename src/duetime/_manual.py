"""Manual fires: ``trigger`` (run a job once now) and ``backfill`` (queue the fires a range held).

The scheduler composes one ``ManualFires`` and delegates both to it. A manual fire is a run of
its own, with a fire key of its own: in memory the instant's (or the next free microsecond
after the last trigger's), in a durable store one the store has not recorded yet, queued as a
run (``Replica.enqueue_trigger``, ``Replica.queue_fire``) so that a worker running the job
meanwhile cannot drop it by writing the job's row.

Lock rules: each public method takes the scheduler's lock itself."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Protocol

from duetime._durable import MissingTask
from duetime._engine import Cycle
from duetime._replica import Replica
from duetime._validate import (
    aware_datetime,
    datetime_to_ns,
    ns_to_datetime,
)
from duetime.clock import (
    NsClock,
)
from duetime.errors import (
    InvalidArgument,
    SchedulerShutdownError,
)
from duetime.events import (
    Event,
)
from duetime.job import (
    Job,
    JobState,
    Occ,
    fire_key_at,
)
from duetime.job import Side as _Side
from duetime.poisson import Poisson
from duetime.recurrence import MONOTONIC, WALL, At, Env, FixedRate
from duetime.runner import RunnerLike
from duetime.stores.postgres import PostgresStore
from duetime.stores.sqlite import SQLiteStore

__all__ = ["Host", "ManualFires"]

logger = logging.getLogger("duetime")

# The most fires one backfill() call enqueues.
_BACKFILL_LIMIT = 100_000


class Host(Protocol):
    """What this part uses of the scheduler that composes it."""

    _clock: NsClock
    _cycle: Cycle
    _env: Env
    _lock: threading.RLock
    _replica: Replica | None
    _runner: RunnerLike | None
    _shutdown: bool

    @staticmethod
    def _attach_side(side: _Side) -> None: ...

    def _emit(self, events: Sequence[Event]) -> None: ...

    def _execute(self, occ: Occ, contained: bool = False) -> None: ...

    def _lookup(self, job_or_id: Job | str) -> Job: ...

    def _observed(self) -> bool: ...

    def _queue_side(self, side: _Side, due_mono: int) -> None: ...

    def _drain_events(self) -> Sequence[Event]: ...


class ManualFires:
    """``trigger`` and ``backfill`` for the scheduler that composes it (see the module's
    docstring)."""

    def __init__(self, host: Host) -> None:
        self._s = host

    def trigger(self, job_or_id: Job | str) -> None:
        """``Scheduler.trigger`` (see there)."""
        with self._s._lock:
            if self._s._shutdown:
                raise SchedulerShutdownError("trigger")
            job = self._s._lookup(job_or_id)
            if self._s._replica is not None:
                self._s._replica.store.insert_pending()
            wall = self._s._clock.time_ns()
            mono = self._s._clock.monotonic_ns()
            key = (
                self.free_trigger_key(self._s._replica.store, job, wall)
                if self._s._replica is not None
                else self.next_trigger_key(job, wall)
            )
            side = _Side(job, wall, WALL, 1, key=key)
            if (
                self._s._runner is not None
                or job._state is JobState.PAUSED
                or (self._s._replica is not None and type(job.func) is MissingTask)
            ):
                # The runner (or resume, or a process that has the task) takes it from there.
                if self._s._replica is not None:
                    self._s._replica.enqueue_trigger(job, side, wall)
                else:
                    self._s._queue_side(side, mono)
                return
            # No runner: begin exactly this side now and run it in this thread.
            self._s._attach_side(side)
            self._s._observed()
            if self._s._replica is not None:
                occ = self._s._replica.trigger(side, wall, mono)
            else:
                occ = self._s._cycle.begin(side, MONOTONIC, mono, wall, mono)
            events = self._s._drain_events()
        if events:
            self._s._emit(events)
        if occ is not None:
            self._s._execute(occ)

    def trigger_key(self, job: Job, wall: int) -> str:
        """The fire key of a ``trigger()`` run made at ``wall`` (epoch nanoseconds)."""
        return f"{job.id}@trigger-{ns_to_datetime(wall, timezone.utc).isoformat()}"

    def next_trigger_key(self, job: Job, wall: int) -> str:
        """The fire key of a ``trigger()`` run made at ``wall`` in memory (lock held): the
        instant's, or, within a second before the last trigger's key (a fake clock that has not
        moved), the microsecond after it, as a durable store's ``_free_trigger_key`` gives. (Each
        trigger() asks for a run of its own, with a key of its own; stepped back further, the
        key is now's.)"""
        x = job._extras()
        us = wall // 1000  # (a key's precision)
        last = x.triggered
        if last is not None and last - 1_000_000 < us <= last:
            us = last + 1
        x.triggered = us
        return self.trigger_key(job, us * 1000)

    def free_trigger_key(self, store: SQLiteStore | PostgresStore, job: Job, wall: int) -> str:
        """The fire key of a ``trigger()`` run made at ``wall`` on a durable store (lock held):
        the instant's, or if a run of that key is recorded already (a second ``trigger()``
        within a microsecond, as on a fake clock that has not moved), the first later
        microsecond's that is free. The store records each key once, and each call asks for
        a run of its own (in memory, too, both run)."""
        step = 0
        while True:
            keys = [self.trigger_key(job, wall + (step + i) * 1000) for i in range(8)]
            taken = store.recorded_keys(keys)
            for key in keys:
                if key not in taken:
                    return key
            step += 8

    def backfill(self, job_or_id: Job | str, start: datetime, end: datetime) -> list[str]:
        """``Scheduler.backfill`` (see there)."""
        if self._s._replica is None:
            raise TypeError(
                "backfill() needs a durable store (SQLiteStore, PostgresStore): a MemoryStore "
                "keeps no record of which fires ran"
            )
        lo = datetime_to_ns(aware_datetime("start", start))
        hi = datetime_to_ns(aware_datetime("end", end))
        if lo > hi:
            raise InvalidArgument(f"start must not be after end, got {start!r} and {end!r}")
        with self._s._lock:
            job = self._s._lookup(job_or_id)
            trig = job.trigger
            hi = min(hi, self._s._clock.time_ns() + 1)  # (due by now, now included)
            begins = getattr(trig, "start", None)
            if isinstance(begins, datetime) and not isinstance(trig, At):
                # (A Cron's or FixedRate's start= bounds its fires: those before it were never
                # the recurrence's, and were queued and run.)
                lo = max(lo, datetime_to_ns(begins))
            fires: list[int] = []
            if isinstance(trig, At):
                t = datetime_to_ns(trig.when)
                fires = [t] if lo <= t < hi else []
            elif isinstance(trig, FixedRate):
                anchor = job._base
                if anchor is None:
                    raise InvalidArgument(
                        f"job {job.id!r} has no next fire to place the FixedRate grid from"
                    )
                step = trig._ns
                t = anchor + -(-(lo - anchor) // step) * step
                while t < hi and len(fires) <= _BACKFILL_LIMIT:
                    fires.append(t)
                    t += step
            elif trig.timebase == WALL and trig.recurring and not isinstance(trig, Poisson):
                nxt = trig.next(lo - 1, self._s._env)
                while nxt is not None and nxt < hi and len(fires) <= _BACKFILL_LIMIT:
                    fires.append(nxt)
                    nxt = trig.next(nxt, self._s._env)
            else:
                raise InvalidArgument(
                    f"job {job.id!r} has no fixed fire times to backfill: its trigger is "
                    f"{trig!r} (backfill works for At, FixedRate and Cron)"
                )
            if len(fires) > _BACKFILL_LIMIT:
                raise InvalidArgument(
                    f"start to end holds more than {_BACKFILL_LIMIT} fires of job {job.id!r}; "
                    f"backfill a shorter range at a time"
                )
            keyed = [(fire_key_at(job.id, t), t) for t in fires]
            new = set(self._s._replica.store.enqueue(job.id, keyed))
            now = self._s._clock.time_ns()
            for key, t in keyed:
                if key in new:
                    self._s._replica.queue_fire(job, key, t, now)
        return [key for key, _ in keyed if key in new]
