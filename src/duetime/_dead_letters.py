"""Dead letters: the list of one-shot jobs whose last attempt failed, and taking them back.

The scheduler composes one ``DeadLetters`` and delegates ``failed``, ``retry_failed`` and
``discard_failed`` to it. The letters themselves live in the store (``MemoryStore.dead``);
with a durable store the replica brings them up to the store's first (``sync_dead``).

Lock rules: each public method takes the scheduler's lock; ``sort_dead`` and ``revive`` are
called with it held."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from duetime._dead import FailedJob
from duetime._replica import Replica
from duetime.clock import (
    NsClock,
)
from duetime.errors import (
    ConflictingIdError,
    JobLookupError,
    SchedulerShutdownError,
)
from duetime.events import (
    Event,
    JobAdded,
)
from duetime.job import (
    Job,
    JobState,
)
from duetime.recurrence import After
from duetime.stores.memory import MemoryStore

__all__ = ["DeadLetters", "Host"]

logger = logging.getLogger("duetime")

# Why retry_failed() cannot queue a dead letter whose id a live job has taken (it has no
# replace=True to point at).
_LIVE_AGAIN = (
    "a live job has that id now: cancel it first, or drop the dead letter (discard_failed)"
)


def _dead_id(id: object, host: object) -> str:
    """The id ``retry_failed``/``discard_failed`` were given: an id, or a Job or FailedJob of
    ``host``'s (a handle from another scheduler names no letter here, as ``cancel`` says)."""
    if isinstance(id, str):
        return id
    if isinstance(id, FailedJob):
        id = id.job
    if isinstance(id, Job):
        if id._sched is not host or id._id is None:  # (_id: reading .id would name it)
            raise JobLookupError(id._id if id._id is not None else id, "failed job")
        return id._id
    raise TypeError(f"id must be a str, a Job or a FailedJob, got {id!r}")


class Host(Protocol):
    """What this part uses of the scheduler that composes it."""

    _clock: NsClock
    _lock: threading.RLock
    _replica: Replica | None
    _shutdown: bool
    _store: MemoryStore

    def _emit(self, events: Sequence[Event]) -> None: ...

    def _job_next_run_time(self, job: Job) -> datetime | None: ...

    def _now_dt(self) -> datetime: ...

    def _observed(self) -> bool: ...

    def _queue_regular(self, job: Job, base: int) -> None: ...


class DeadLetters:
    """The dead-letter list of the scheduler that composes it (see the module's docstring)."""

    def __init__(self, host: Host) -> None:
        self._s = host

    def failed(self) -> list[FailedJob]:
        """``Scheduler.failed`` (see there)."""
        with self._s._lock:
            if self._s._replica is not None:
                self._s._replica.sync_dead()
            return self._s._store.dead_letters()

    def sort_dead(self) -> None:
        """Keep the dead letters ordered by when they failed (lock held)."""
        dead: dict[str, FailedJob] = self._s._store.dead
        ordered = sorted(dead.items(), key=lambda item: item[1].failed_at)
        dead.clear()
        dead.update(ordered)

    def retry_failed(self, id: str | Job | FailedJob) -> Job:
        """``Scheduler.retry_failed`` (see there)."""
        id = _dead_id(id, self._s)
        with self._s._lock:
            if self._s._replica is not None and not self._s._shutdown:
                # The job died in another process: this one's copy is live until it reads
                # the change (it said ConflictingIdError for the job's own id).
                self._s._replica.sync_locked(full=False)
            if self._s._replica is not None:
                self._s._replica.sync_dead()
            entry = self._s._store.dead_letter(id)
            if entry is None:
                raise JobLookupError(id, "failed job")
            if self._s._store.get(id) is not None:
                raise ConflictingIdError(id, _LIVE_AGAIN)
            if self._s._shutdown:
                raise SchedulerShutdownError("retry a failed job")
            job: Job = entry.job
            if self._s._replica is not None:
                self._s._replica.retry_failed(id, entry)
            else:
                self._s._store.take_dead(id)
                self.revive(job, id)
            event = (
                JobAdded(id, self._s._now_dt(), self._s._job_next_run_time(job))
                if self._s._observed()
                else None
            )
        if event is not None:
            self._s._emit([event])
        return job

    def revive(self, job: Job, id: str) -> None:
        """Queue a dead letter's job again, as a new one-shot run now (lock held)."""
        job._trigger = After(0)
        job._state = JobState.SCHEDULED
        job._extras().attempt = 0
        self._s._store.add(job, id)
        self._s._queue_regular(job, self._s._clock.monotonic_ns())

    def discard_failed(self, id: str | Job | FailedJob) -> bool:
        """``Scheduler.discard_failed`` (see there)."""
        id = _dead_id(id, self._s)
        with self._s._lock:
            if self._s._replica is not None:
                self._s._replica.sync_dead()
            return self._s._store.take_dead(id) is not None
