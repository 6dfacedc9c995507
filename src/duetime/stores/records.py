"""The values a durable store reads and writes: a job's row and a run's record.

A ``JobRow`` is a job as plain data (the Scheduler converts, see ``duetime._durable``); a
``RunRecord`` is one fire of a job as ``Scheduler.runs()`` reports it. All times in a row are
integer nanoseconds since the epoch, UTC (``duetime.stores.timebase`` says how in-memory times
become these).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

__all__ = [
    "DEFINITION",
    "ENDED_STATES",
    "LEASE_MOST_NS",
    "RUN_STATES",
    "Changes",
    "JobRow",
    "Quarantine",
    "RunRecord",
    "UnreadableRow",
]

logger = logging.getLogger("duetime")

#: The longest lease a process takes (``Scheduler(lease=)`` refuses more): a year, in
#: nanoseconds. A stored lease ending later than this from now was never taken by a process
#: (a forged or broken record), and counts as run out.
LEASE_MOST_NS = 366 * 86_400 * 1_000_000_000

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


@dataclass(frozen=True, slots=True)
class UnreadableRow:
    """A stored row this process cannot read, and so skips (``Scheduler.unreadable()``).

    A row is data that anyone who can write the database may have changed: one that is not
    what duetime writes (a wrong type, JSON that is not, a value nested too deeply) is
    quarantined instead of stopping the process. ``cancel`` removes an unreadable job.

    Attributes:
        table: The table it is in: ``"jobs"``, ``"runs"`` or ``"dead"`` (dead letters).
        id: The job's id, the run's fire key, or the dead letter's id.
        reason: What is wrong with it.
    """

    table: str
    id: str
    reason: str


class Quarantine:
    """The rows of one store that this process could not read: each reported once, with a
    WARNING naming the store, the table and the id, and kept for ``Scheduler.unreadable()``.
    Not locked: its owner (a store, under its Scheduler's lock) serializes the calls."""

    __slots__ = ("_raw", "_rows", "where")

    def __init__(self, where: str) -> None:
        self.where = where
        self._rows: dict[tuple[str, str], UnreadableRow] = {}
        # The ids as read, where they are not text (a NULL id, on SQLite): by the text shown.
        self._raw: dict[tuple[str, str], object] = {}

    def add(self, table: str, id: object, reason: str) -> None:
        """Record that row ``id`` of ``table`` cannot be read, for ``reason``; logged once (and
        again if the reason changes: someone wrote the row again)."""
        key = (table, id if isinstance(id, str) else repr(id))
        if (found := self._rows.get(key)) is not None and found.reason == reason:
            return
        self._rows[key] = UnreadableRow(table, key[1], reason)
        if not isinstance(id, str):
            self._raw[key] = id
        what = {"jobs": "job", "runs": "run", "dead": "dead letter"}.get(table, "row")
        logger.warning(
            "%s %r in the store cannot be loaded here, and is skipped (store %s, table %s): %s",
            what,
            key[1],
            self.where,
            table,
            reason,
        )

    def discard(self, table: str, id: str) -> None:
        """Row ``id`` of ``table`` was read, or removed: no longer quarantined."""
        self._rows.pop((table, id), None)
        self._raw.pop((table, id), None)

    def raw_id(self, table: str, id: str) -> object:
        """The id of row ``id`` as read from the store (not text: a NULL), else ``id``."""
        return self._raw.get((table, id), id)

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._rows

    def rows(self) -> list[UnreadableRow]:
        """The quarantined rows, by table and id."""
        return sorted(self._rows.values(), key=lambda r: (r.table, r.id))
