"""Typed events: every change in a job's life, delivered to subscribed listeners.

Events are frozen dataclasses built only when someone listens: with no subscriber, and the
``duetime`` logger not logging DEBUG, the scheduler does not even construct them (a scheduler
running 200 000 jobs with no listeners pays a check per state change). At DEBUG every event is also
logged, one line each (DESIGN: every state change goes to listeners and to ``logging``). Times are
aware datetimes in the scheduler's zone.
"""

from __future__ import annotations

import logging
import reprlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from types import CoroutineType

__all__ = [
    "Event",
    "JobAdded",
    "JobCancelled",
    "JobDead",
    "JobDeferred",
    "JobEvent",
    "JobFailed",
    "JobLost",
    "JobMissed",
    "JobPaused",
    "JobRescheduled",
    "JobResumed",
    "JobSkipped",
    "JobStarted",
    "JobSucceeded",
    "Listener",
    "SchedulerStarted",
    "SchedulerStopped",
]

logger = logging.getLogger("duetime")


@dataclass(frozen=True, slots=True)
class Event:
    """Base class of all events."""


@dataclass(frozen=True, slots=True)
class SchedulerStarted(Event):
    """The runner thread (or asyncio runner) started.

    Attributes:
        time: Wall-clock time of the start.
    """

    time: datetime


@dataclass(frozen=True, slots=True)
class SchedulerStopped(Event):
    """The scheduler shut down.

    Attributes:
        time: Wall-clock time of the stop.
    """

    time: datetime


@dataclass(frozen=True, slots=True)
class JobEvent(Event):
    """Base class of events about one job.

    Attributes:
        job_id: The job's id.
        time: When the event happened (the clock's wall time, in the scheduler's zone): for
            ``JobStarted`` the start, for ``JobSucceeded``/``JobFailed`` the end of the run.
    """

    job_id: str
    time: datetime


@dataclass(frozen=True, slots=True)
class JobAdded(JobEvent):
    """A job was scheduled.

    Attributes:
        next_run_time: When it is first due (None if paused or if the recurrence is empty).
    """

    next_run_time: datetime | None


@dataclass(frozen=True, slots=True)
class JobRescheduled(JobEvent):
    """A job got a new ``when``; its old next occurrence will never fire.

    Attributes:
        previous_run_time: When it was due before.
        next_run_time: When it is due now.
    """

    previous_run_time: datetime | None
    next_run_time: datetime | None


@dataclass(frozen=True, slots=True)
class JobCancelled(JobEvent):
    """A job was cancelled.

    Attributes:
        scheduled_time: The next run it had, or None.
    """

    scheduled_time: datetime | None


@dataclass(frozen=True, slots=True)
class JobPaused(JobEvent):
    """A job was paused.

    Attributes:
        scheduled_time: The next run it had (kept for ``resume``), or None.
    """

    scheduled_time: datetime | None


@dataclass(frozen=True, slots=True)
class JobResumed(JobEvent):
    """A paused job was queued again.

    Attributes:
        next_run_time: When it is now due.
    """

    next_run_time: datetime | None


@dataclass(frozen=True, slots=True)
class JobStarted(JobEvent):
    """An occurrence started (at ``time``).

    Attributes:
        scheduled_time: When it was due.
        attempt: 1 for the first try, 2 for the first retry, ...
    """

    scheduled_time: datetime
    attempt: int


@dataclass(frozen=True, slots=True)
class JobSucceeded(JobEvent):
    """An occurrence returned normally (at ``time``).

    Attributes:
        scheduled_time: When it was due.
        started_at: When it started.
        attempt: The attempt that succeeded.
        result: What the job returned.
    """

    scheduled_time: datetime
    started_at: datetime
    attempt: int
    result: object


@dataclass(frozen=True, slots=True)
class JobFailed(JobEvent):
    """An attempt raised (at ``time``).

    Attributes:
        scheduled_time: When the occurrence was due.
        started_at: When the attempt started.
        attempt: The attempt that failed.
        error: The exception.
        retry_at: When the next attempt is due, or None if there will be none.
    """

    scheduled_time: datetime
    started_at: datetime
    attempt: int
    error: BaseException
    retry_at: datetime | None


@dataclass(frozen=True, slots=True)
class JobDead(JobEvent):
    """An occurrence failed its last allowed attempt: no more retries.

    Attributes:
        scheduled_time: When the occurrence was due.
        attempts: How many attempts were made.
        error: The last exception.
    """

    scheduled_time: datetime
    attempts: int
    error: BaseException


@dataclass(frozen=True, slots=True)
class JobMissed(JobEvent):
    """Occurrences of a recurring job were late beyond its grace and were coalesced or skipped.

    Attributes:
        scheduled_time: The due time of the oldest occurrence of the backlog (under
            ``Misfire.RUN_ONCE``, the one that runs, carrying this due time, for them all).
        missed: How many occurrences did not run on their own (a lower bound when ``exact`` is
            False: counting a year of minutes one by one is not worth the time).
        exact: Whether ``missed`` is exact.
        policy: The ``Misfire`` policy applied, as its value string.
    """

    scheduled_time: datetime
    missed: int
    exact: bool
    policy: str

    @property
    def count(self) -> int:
        """``missed``, by the name the issue that asked for this event gave it ("the count")."""
        return self.missed


@dataclass(frozen=True, slots=True)
class JobSkipped(JobEvent):
    """An occurrence did not start because the previous run was still going.

    Attributes:
        scheduled_time: When the skipped occurrence was due.
        reason: Why it was skipped.
    """

    scheduled_time: datetime
    reason: str


@dataclass(frozen=True, slots=True)
class JobDeferred(JobEvent):
    """A due occurrence found no token in its rate limiter and waits for one.

    Attributes:
        scheduled_time: When it was due.
        until: When a token will exist and it will run.
    """

    scheduled_time: datetime
    until: datetime


@dataclass(frozen=True, slots=True)
class JobLost(JobEvent):
    """A run's worker stopped renewing its lease (it died, stalled or lost the store), and this
    process takes the run over: it runs again with its attempt raised (durable stores).

    Attributes:
        scheduled_time: When the lost occurrence was due.
        attempt: The attempt this process is about to make (the lost one's plus one).
        key: The occurrence's fire key.
        worker: The worker that lost it.
    """

    scheduled_time: datetime
    attempt: int
    key: str
    worker: str | None


Listener = Callable[[Event], object]


def log_event(event: Event) -> None:
    """Log ``event`` at DEBUG, one line: its type, then its fields (times in ISO 8601, other
    values' reprs cut short: a job's result may be large)."""
    parts = []
    for field in fields(event):
        value = getattr(event, field.name)
        text = value.isoformat() if isinstance(value, datetime) else reprlib.repr(value)
        parts.append(f"{field.name}={text}")
    logger.debug("%s %s", type(event).__name__, " ".join(parts))


def dispatch(listeners: list[tuple[Listener, tuple[type[Event], ...]]], event: Event) -> None:
    """Deliver ``event`` to each listener subscribed to its type; a listener that raises is
    logged and the others still run. A listener that hands back a coroutine (a lambda around an
    ``async def``, which ``subscribe`` cannot see) did nothing: the coroutine is closed and that
    is logged as an error, never left to pass in silence."""
    for listener, types in listeners:
        if not types or isinstance(event, types):
            try:
                result = listener(event)
            except Exception:
                logger.exception("listener %r raised on %s", listener, type(event).__name__)
                continue
            except BaseException:
                # (KeyboardInterrupt, SystemExit.) In the main thread, a caller stepping time by
                # hand is told, as of a job's: Ctrl-C stops a simulation. Anywhere else (the
                # runner's threads, a pool's) nobody is there to be told, and raising on would
                # leave a run half-begun for good: logged like any listener's error.
                if threading.current_thread() is threading.main_thread():
                    raise
                logger.exception("listener %r raised on %s", listener, type(event).__name__)
                continue
            if result is not None and type(result) is CoroutineType:
                result.close()
                logger.error(
                    "listener %r returned a coroutine on %s, which is never awaited: listeners "
                    "are plain functions (from one, hand the coroutine to your event loop)",
                    listener,
                    type(event).__name__,
                )
