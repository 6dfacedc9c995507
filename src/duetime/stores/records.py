"""The values a durable store reads and writes: a job's row and a run's record.

A ``JobRow`` is a job as plain data (the Scheduler converts, see ``duetime._durable``); a
``RunRecord`` is one fire of a job as ``Scheduler.runs()`` reports it. All times in a row are
integer nanoseconds since the epoch, UTC (``duetime.stores.timebase`` says how in-memory times
become these).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["DEFINITION", "ENDED_STATES", "RUN_STATES", "Changes", "JobRow", "RunRecord"]

#: A job in one of these states is no longer live (its row is kept for ``retention``).
ENDED_STATES = ("completed", "cancelled", "failed")

#: The fields of a row that ``schedule()`` gives a job; the others (after ``id``) are its
#: progress, which claims and outcomes write.
DEFINITION = ("name", "task", "args", "trigger", "retry", "options", "priority")

#: What a run record's ``state`` can be. ``queued``: enqueued by ``backfill`` and not started;
#: ``running``: claimed by a worker holding a lease; ``failed``: an attempt failed and a retry
#: is due; ``succeeded``, ``dead`` (the last attempt failed) and ``lost`` (its worker's lease ran
#: out and its job has ended since, so nobody runs it again) are final.
RUN_STATES = ("queued", "running", "failed", "succeeded", "dead", "lost")


@dataclass(slots=True)
class JobRow:
    """One job as a durable store keeps it.

    Attributes:
        id: The job's id.
        name: Its display name, or None for the function's.
        task: The task reference (a registered name or ``"module:qualname"``).
        args: The arguments as JSON (``duetime.stores.codec.dumps_args``).
        trigger: The recurrence as JSON (``encode_trigger``).
        retry: The retry policy as JSON, or None for the scheduler's default.
        options: The other options as JSON (misfire, grace, overlap, jitter, executor).
        priority: The job's priority.
        state: ``scheduled``, ``running``, ``paused``, or one of ``ENDED_STATES``.
        next_base: The next regular occurrence's un-jittered due time (UTC ns), or None.
        next_due: Its jittered due time (UTC ns), or None.
        sides: The pending side occurrences (retries, trigger() runs, held-back runs) as JSON,
            or None.
        catchup: Whether a ``Misfire.RUN_ALL`` catch-up is going on.
        attempt: The attempt of the current or last occurrence.
        runs: How many runs (attempts) have finished.
        failures: How many attempts have raised.
        last_error: The last failed attempt's error as ``"Type: message"``, or None.
        rev: The store's change counter when the row was last written (0: not yet).
    """

    id: str
    name: str | None
    task: str
    args: str
    trigger: str
    retry: str | None
    options: str
    priority: int
    state: str
    next_base: int | None
    next_due: int | None
    sides: str | None
    catchup: bool
    attempt: int
    runs: int
    failures: int
    last_error: str | None
    rev: int = 0


@dataclass(frozen=True, slots=True)
class Changes:
    """What other processes wrote to a durable store since a process last looked
    (``changed_rows``).

    Attributes:
        rows: The rows of the jobs that are live (their changes to apply).
        ended: The ``(id, state)`` of the jobs that ended (a state of ``ENDED_STATES``): all
            a reader needs of them is to drop its copy, so the store sends no more.
    """

    rows: list[JobRow]
    ended: list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One fire of a job, as a durable store recorded it (``Scheduler.runs()``).

    Attributes:
        key: The fire key, ``"<job id>@<due, UTC ISO 8601>"`` (see ``Run.key``).
        job_id: The job's id.
        due: When the fire was due (aware, UTC).
        started: When its latest attempt started (aware, UTC), or None if it has not.
        finished: When it finished (aware, UTC), or None while it is not final.
        state: One of ``RUN_STATES``.
        attempt: The latest attempt's number (1 for the first try).
        worker: The worker that ran (or runs) the latest attempt, or None.
        error: The latest failed attempt's error as ``"Type: message"``, or None.
    """

    key: str
    job_id: str
    due: datetime
    started: datetime | None
    finished: datetime | None
    state: str
    attempt: int
    worker: str | None
    error: str | None
