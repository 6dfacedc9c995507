"""``SQLStore``: what the SQLite and PostgreSQL stores share.

Both keep the same four tables and follow the same rules (docs/durability.md); only the dialect
differs. The SQL here is written once, with ``?`` placeholders and ``{p}`` before each table name
(``duetime_`` in a SQLite file, ``"schema".`` in PostgreSQL); each store turns a statement into
its own dialect once (``_q``) and supplies the connection, the transactions and the change
counter:

* **A row per job** (``jobs``), rewritten whole by each change and stamped with a store-wide
  change number ``rev``, so that other processes can tell what changed since they last looked.
* **A record per fire** (``runs``), keyed by its fire key: a run starts only if this process
  inserts that key (or takes it over from ``queued``, ``failed`` or an expired lease) in the
  same transaction that moves the job's row on, guarded by the due time it moves from. Two
  processes that pop the same fire: one wins, the other's claim changes nothing.
* **Leases.** A claimed run holds a lease that its worker renews while the run goes on; a run
  whose lease ran out is taken over by the next worker that looks, with its attempt raised. A
  completion is written only while the worker still holds the run (``WHERE worker = ? AND
  attempt = ?``): a stalled worker's late completion is refused.

The Scheduler calls these methods with its lock held; the connection is used by one thread at a
time through that lock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta, timezone
from typing import Any, TypeVar

from duetime._validate import NS_PER_SECOND, duration_ns, ns_to_datetime
from duetime.errors import ConflictingIdError, StoreError
from duetime.job import fire_key_at
from duetime.stores.base import SOLO_SKIP, ClaimAnswer, ClaimAsk, QueuedRun, SettleAsk
from duetime.stores.codec import load_json
from duetime.stores.memory import MemoryStore
from duetime.stores.records import (
    ENDED_STATES,
    LEASE_MOST_NS,
    JobRow,
    Quarantine,
    RunRecord,
)

__all__ = ["SQLStore"]

logger = logging.getLogger("duetime")

# Where a statement's template names the store's tables: {p}, or '{p} opening a string literal.
_PREFIX_MARK = re.compile(r"(')?\{p\}")

# The runs that wait to be taken in: the fires enqueued and the retries pending (a failed run
# keeps its retry's due time in lease_until).
QUEUED_WHERE = "(state = 'queued' OR (state = 'failed' AND lease_until IS NOT NULL))"
# A running run whose lease has run out, with two parameters: now, and now + LEASE_MOST_NS. A
# lease that ends beyond the longest a process takes, or holds no time (NULL; on SQLite, text:
# which compares above every number), was never taken by a live process: a forged or broken
# record would otherwise keep its job from running ever again.
LAPSED = "(lease_until IS NULL OR NOT (lease_until > ? AND lease_until <= ?))"
# Those runs, oldest first.
_QUEUED = (
    "SELECT key, job_id, due, attempt, lease_until FROM {p}runs WHERE "
    + QUEUED_WHERE
    + " ORDER BY due"
)


# Why a batch's new job could not go in. (Its rows go in together, at its end or before a
# claim in it: too late for replace=True to take the other job over, as it does alone.)
_TAKEN_IN_BATCH = (
    "another process added a job under it during this batch, so none of the batch's changes "
    "is stored: run the batch again (with replace=True, the job is then taken over)"
)


def running_elsewhere(job_id: str, now: str, started: str = "") -> str:
    """The condition that another worker's run of job ``job_id`` is going at ``now`` (its lease
    not run out), and with ``started``, that it started so (``"< due"``: before the fire being
    claimed came due, an overlap; ``">= due"``: after, the fire came first): SQL expressions;
    the worker's own name is the one parameter."""
    return (
        f"EXISTS (SELECT 1 FROM {{p}}runs o WHERE o.job_id = {job_id} "
        f"AND o.state = 'running' AND o.lease_until > {now} AND o.worker <> ?"
        + (f" AND o.started {started})" if started else ")")
    )


def _queued_id(row: Sequence[Any]) -> str:
    """How the queued runs taken in are known: a queued fire by its key, a pending retry by its
    key and attempt (the same key fails again, with a new retry, after it was taken in)."""
    return row[0] if row[4] is None else f"{row[0]}\x00{row[3]}"


_UTC = timezone.utc

# How long the record of a worker that never said goodbye (a crash) is kept (nanoseconds).
_WORKER_KEPT = 86_400 * 10**9

# A job's columns after id and rev, in job_values order.
JOB_SET = (
    "name",
    "task",
    "args",
    "trigger",
    "retry",
    "options",
    "priority",
    "state",
    "next_base",
    "next_due",
    "sides",
    "catchup",
    "attempt",
    "runs",
    "failures",
    "last_error",
    "updated",
)

# Every column a write sets, in job_values order.
JOB_COLUMNS = "id, rev, " + ", ".join(JOB_SET)

# The columns in JobRow's field order, for reading.
READ_COLUMNS = (
    "id, name, task, args, trigger, retry, options, priority, state, next_base, next_due, "
    "sides, catchup, attempt, runs, failures, last_error, rev"
)


# The end of an INSERT of a job's row that replaces the row of a job with the same id. A live
# job's counters stand (only outcomes add to them, COUNTED: an outcome that could not be
# written yet is counted in the copy this row comes from, and adds its run when it is); an ended
# job's row is replaced whole.
#
# "running" in the row written is the writer's view of a run going elsewhere, which may have
# ended since (the writer paused or rescheduled the job from a copy read before the outcome was
# written): over a row that no longer says so, it is written "scheduled", and an ended job's
# counters then stand too (that run ended it, and counted). Written as it was, the job stayed
# "running" for good, and a one-shot rescheduled so lost its run.
def _upsert_column(column: str) -> str:
    ended = f"{{p}}jobs.state IN ({', '.join(map(repr, ENDED_STATES))})"
    stale = "excluded.state = 'running' AND {p}jobs.state <> 'running'"
    if column in ("runs", "failures"):
        return (
            f"{column} = CASE WHEN {ended} AND excluded.state <> 'running' "
            f"THEN excluded.{column} ELSE {{p}}jobs.{column} END"
        )
    if column == "state":
        return f"state = CASE WHEN {stale} THEN 'scheduled' ELSE excluded.state END"
    return f"{column} = excluded.{column}"


UPSERT_CONFLICT = "ON CONFLICT (id) DO UPDATE SET " + ", ".join(
    _upsert_column(column) for column in ("rev", *JOB_SET)
)

_UPSERT_JOB = (
    f"INSERT INTO {{p}}jobs ({JOB_COLUMNS}) VALUES ({', '.join('?' * (len(JOB_SET) + 2))}) "
    + UPSERT_CONFLICT
)

# What a claim or an outcome writes of a job's row: its progress (the columns from ``state`` on),
# never what schedule() gave the job (name, task, arguments, recurrence, retry policy, options,
# priority), which only the calls that change it write. A claim or outcome from a process whose
# copy of the job is out of date then does not write that copy's arguments or recurrence back over
# another process's replace=True (and there is half as much to send).
PROGRESS = JOB_SET[JOB_SET.index("state") :]
assert PROGRESS[0] == "state"  # (progress_set below)
# Where the progress columns start in job_values().
PROGRESS_AT = 2 + JOB_SET.index("state")


# The progress columns that say when the job runs next (the rest count what ran).
_TIMING = ("next_base", "next_due", "sides", "catchup")

# The counters of what ran: only an outcome changes them, adding its own run (and failure) to
# what the row has. Written whole from a process's copy of the job, they lost the runs other
# processes had recorded since that copy was read (two workers sharing a job's fires counted
# about nine in ten). Claims and other progress writes leave them alone.
COUNTED = ("runs", "failures")
# The progress columns a claim writes.
CLAIM_SET = tuple(column for column in PROGRESS if column not in COUNTED)
# Where they are in job_values().
_CLAIM_AT = tuple(PROGRESS_AT + PROGRESS.index(column) for column in CLAIM_SET)


def claim_values(values: Sequence[Any]) -> tuple[Any, ...]:
    """The ``CLAIM_SET`` values of a row's ``job_values()``."""
    return tuple(values[i] for i in _CLAIM_AT)


def progress_set(target: str, source: str, counted: tuple[str, str] | None = None) -> str:
    """The SET list of an outcome's write of a job's progress, from relation ``source`` (with
    the job's ``trigger`` as the writing process knows it) into the row ``target``.

    Changes made elsewhere while the fire ran stand: pausing and resuming belong to pause() and
    resume() (an outcome that ends the job still ends it), and if the job's recurrence is no
    longer the one the writer knows (a reschedule() or replace=True), its next fire is the
    one that change computed: the outcome writes only what ran (counters, last error). So it is
    if another process has moved the job on past the next fire the writer knows (claimed a
    later fire, or skipped it): an outcome never takes a schedule back; the retries it adds are
    on its run's record too (SQLStore._retry_at), where the others take them from.

    ``counted``: the SQL of the runs and failures the write adds to the row's counters (an
    outcome's); None: the counters are left as they are (``COUNTED``)."""
    same = f"{target}.trigger = {source}.trigger"
    timed = f"{same} AND NOT COALESCE({target}.next_base > {source}.next_base, false)"
    columns = [
        # (Not same: "running" was the other process's view of this run, which is over.)
        f"state = CASE WHEN NOT {same} THEN (CASE WHEN {target}.state = 'running' "
        f"THEN 'scheduled' ELSE {target}.state END) "
        f"WHEN {source}.state NOT IN ('scheduled', 'running', 'paused') THEN {source}.state "
        f"WHEN {target}.state = 'paused' THEN 'paused' "
        f"WHEN {source}.state = 'paused' THEN {target}.state ELSE {source}.state END"
    ]
    for column in PROGRESS[1:]:
        if column in COUNTED:
            if counted is not None:
                added = counted[COUNTED.index(column)]
                columns.append(f"{column} = {target}.{column} + {added}")
        elif column in _TIMING:
            columns.append(
                f"{column} = CASE WHEN {timed} THEN {source}.{column} ELSE {target}.{column} END"
            )
        else:
            columns.append(f"{column} = {source}.{column}")
    return ", ".join(columns)


def still_live(target: str) -> str:
    """The condition on an outcome's write of row ``target``: the job has not ended (another
    process cancelled it, say, while its fire ran here; the run is recorded all the same)."""
    return f"{target}.state NOT IN ({', '.join(repr(state) for state in ENDED_STATES)})"


# A claim's guarded write: moves the row on only from the fire being claimed.
_ADVANCE_JOB = (
    "UPDATE {p}jobs SET rev = ?, "
    + ", ".join(f"{column} = ?" for column in CLAIM_SET)
    + " WHERE id = ? AND next_base = ? AND state IN ('scheduled', 'running')"
)

# An outcome's (or a side occurrence's claim's) write: the progress of a job whose row is there
# and live, the whole row of one whose row is not there. Answers the state and recurrence the
# row has, nothing if the job had ended.
_UPSERT_PROGRESS = (
    f"INSERT INTO {{p}}jobs ({JOB_COLUMNS}) VALUES ({', '.join('?' * (len(JOB_SET) + 2))}) "
    "ON CONFLICT (id) DO UPDATE SET rev = excluded.rev, "
    + progress_set("{p}jobs", "excluded")
    + " WHERE "
    + still_live("{p}jobs")
    + " RETURNING state, trigger, next_base, runs, failures"
)

# The same, only over a row whose next regular fire is still the guard (the last parameter).
_UPSERT_PROGRESS_GUARDED = _UPSERT_PROGRESS.replace(
    " RETURNING", " AND {p}jobs.next_base = ? RETURNING"
)

# An outcome's write: the same, adding its run and failure (two parameters after the row's).
_UPSERT_OUTCOME = _UPSERT_PROGRESS.replace(
    progress_set("{p}jobs", "excluded"), progress_set("{p}jobs", "excluded", ("?", "?"))
)

# A fire starts if its key is new, or was enqueued by backfill and not taken yet: the end of the
# INSERT of its run record.
CLAIM_KEY_CONFLICT = (
    "ON CONFLICT (key) DO UPDATE SET state = 'running', attempt = excluded.attempt, "
    "worker = excluded.worker, lease_until = excluded.lease_until, started = excluded.started "
    "WHERE {p}runs.state = 'queued' RETURNING key"
)

_CLAIM_KEY = (
    "INSERT INTO {p}runs (key, job_id, due, state, attempt, worker, lease_until, started) "
    "VALUES (?, ?, ?, 'running', ?, ?, ?, ?) " + CLAIM_KEY_CONFLICT
)

_CLAIM_RETRY = (
    "UPDATE {p}runs SET state = 'running', attempt = ?, worker = ?, lease_until = ?, "
    "started = ?, finished = NULL WHERE key = ? AND state = 'failed' AND attempt = ?"
)


_T = TypeVar("_T")


def caught(call: Callable[..., _T], *args: Any) -> _T | StoreError:
    """``call(*args)``'s answer, or the ``StoreError`` it raised: one answer of a batch whose
    items fail one by one."""
    try:
        return call(*args)
    except StoreError as exc:
        return exc


def job_values(row: JobRow, rev: int, now: int) -> tuple[Any, ...]:
    """A row's values in ``JOB_COLUMNS`` order: id, rev, then ``JOB_SET`` (``updated`` last)."""
    return (
        row.id,
        rev,
        row.name,
        row.task,
        row.args,
        row.trigger,
        row.retry,
        row.options,
        row.priority,
        row.state,
        row.next_base,
        row.next_due,
        row.sides,
        int(row.catchup),
        row.attempt,
        row.runs,
        row.failures,
        row.last_error,
        now,
    )


def id_lists(ids: Sequence[str], size: int = 500) -> Iterator[tuple[Sequence[str], str]]:
    """``ids`` in chunks a statement can take, each with its ``?, ?, ..`` placeholders."""
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        yield chunk, ",".join("?" * len(chunk))


def read_row(values: Sequence[Any]) -> JobRow:
    """A row read with ``READ_COLUMNS``."""
    row = JobRow(*values)
    row.catchup = bool(row.catchup)
    return row


def _dt(ns: int | None) -> Any:
    return None if ns is None else ns_to_datetime(ns, _UTC)


def _ns_ok(value: object) -> bool:
    """Whether ``value`` is a time as a store writes one (64-bit integer nanoseconds)."""
    return type(value) is int and -(2**63) <= value < 2**63


def _run_ok(key: object, job_id: object, due: object, attempt: object, worker: object) -> bool:
    """Whether a run record's common values are of the types duetime writes."""
    return (
        isinstance(key, str)
        and isinstance(job_id, str)
        and _ns_ok(due)
        and type(attempt) is int
        and (worker is None or isinstance(worker, str))
    )


def _values(*values: object) -> str:
    """Values read from a record, shortened, for a message."""
    text = repr(values)
    return text if len(text) <= 200 else f"{text[:197]}..."


class SQLStore(MemoryStore):
    """The durable side of a store on a SQL database (``SQLiteStore``, ``PostgresStore``).

    A subclass passes its table prefix to ``__init__`` and supplies ``_tx`` (one transaction,
    yielding a handle with ``execute`` and ``executemany``), ``_read``, ``_rev``, ``open``,
    ``close``, ``is_open`` and ``changed_rows``; it may override ``_dialect``, ``_busy`` and
    ``_changed``.
    """

    durable = True

    __slots__ = (
        "_announced",
        "_batch",
        "_held",
        "_known_queued",
        "_mine",
        "_pending",
        "_pending_now",
        "_prefix",
        "_quarantine",
        "_spoilt",
        "_sql",
        "_touched",
        "only",
        "poll_ns",
        "retention_ns",
        "worker",
    )

    # SQL for "the worker column equals this parameter, NULL included".
    _SAME_WORKER = "worker IS ?"

    # Whether text columns can hold NUL characters (PostgreSQL's cannot).
    keeps_nul = True
    # The longest job id the store can index, in bytes of UTF-8 (None: no limit).
    id_bytes_most: int | None = None

    def __init__(self, prefix: str, retention: float | int | timedelta) -> None:
        super().__init__()
        self.retention_ns = duration_ns("retention", retention, bounded=False)
        self.worker = ""
        self._announced = False  # whether this process is in the store's list of workers
        self._sql: dict[str, str] = {}
        self._prefix = prefix
        self._mine: dict[str, int] = {}  # job id -> the rev this process last wrote
        self._batch = 0  # depth of open batch() blocks
        self._pending: list[JobRow] = []  # new jobs' rows a batch writes at its end
        self._pending_now = 0
        self._touched: set[str] = set()  # the jobs a batch wrote (read back if it fails)
        self._spoilt = False  # a batch nested in the one going on raised
        self._known_queued: set[str] = set()  # queued run keys this process has taken in
        # Fire keys of the runs this process holds a lease on: only these are renewed. (A claim
        # whose commit was lost with the connection may have been recorded for this worker
        # without its knowing; renewing it would keep it from ever being taken over.)
        self._held: set[str] = set()
        self._quarantine: Quarantine | None = None
        #: The ids of the jobs a scheduler opened on this store loads, or None for every live
        #: job: a command that changes one job (the command line's, the dashboard's actions)
        #: need not read a million. Jobs changed by other processes later are read as ever.
        self.only: frozenset[str] | None = None

    @property
    def quarantine(self) -> Quarantine:
        """The rows of this store that this process could not read (``UnreadableRow``)."""
        if self._quarantine is None:
            self._quarantine = Quarantine(self._where)
        return self._quarantine

    @property
    def where(self) -> str:
        """How messages name this store (its file, or its server and schema)."""
        return self._where

    # -- what a dialect supplies ------------------------------------------------------------------

    def _dialect(self, sql: str) -> str:
        """``sql`` (with ``?`` placeholders) as this database's driver wants it."""
        return sql

    def statement(self, template: str) -> str:
        """A statement written as this module's are (for both dialects, ``{p}`` before table
        names, ``?`` placeholders), in this store's dialect and tables: for the readers that
        share the store's SQL (the dashboard's views). Cached."""
        return self._q(template)

    def created(self) -> bool:
        """Whether the database holds duetime's tables, looked at without creating them (the
        command line asks before it opens a store: opening creates them)."""
        raise NotImplementedError

    def _q(self, template: str) -> str:
        """A statement of this module, in this store's dialect and tables (cached)."""
        sql = self._sql.get(template)
        if sql is None:
            sql = self._sql[template] = self._render(template)
        return sql

    def _render(self, template: str) -> str:
        """``template`` in this store's dialect, ``{p}`` standing for its tables' prefix.

        The placeholders are converted before the prefix goes in, and the prefix is escaped
        for the driver (``_unplaceheld``): a schema name is any text, and a ``?`` or ``%`` in
        it is no placeholder."""
        sql = self._dialect(template)
        prefix = self._unplaceheld(self._prefix)
        # (Inside a string literal, nextval('{p}rev'), a quote in the name is doubled. One
        # pass: a name that itself holds "{p}" is not read again.)
        quoted = "'" + prefix.replace("'", "''")
        return _PREFIX_MARK.sub(lambda m: quoted if m.group(1) else prefix, sql)

    def _unplaceheld(self, text: str) -> str:
        """``text`` escaped so that the driver reads no placeholder in it (sqlite3 reads none
        inside a quoted name or literal)."""
        return text

    def _tx(self, what: str) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _read(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def _rev(self, db: Any) -> int:
        raise NotImplementedError

    def _changed(self, db: Any) -> None:
        """Called inside a transaction (``db``) that changed jobs or enqueued fires (a hook for
        waking other processes)."""

    # -- reading jobs -----------------------------------------------------------------------------

    def load_rows(self) -> list[JobRow]:
        """Every live job's row (what opening a store loads), or only those of ``only``."""
        if self.only is not None:
            rows = []
            for ids, marks in id_lists(sorted(self.only)):
                rows += self._read(
                    "loading jobs",
                    self._q(
                        # (A NULL id, which SQLite's text key allows, is in no list: read
                        # too, so that an unreadable row without an id can be cancelled.)
                        f"SELECT {READ_COLUMNS} FROM {{p}}jobs WHERE (id IN ({marks}) "
                        "OR id IS NULL) AND state NOT IN (?, ?, ?)"
                    ),
                    (*ids, *ENDED_STATES),
                )
            return [read_row(r) for r in rows]
        rows = self._read(
            "loading jobs",
            self._q(f"SELECT {READ_COLUMNS} FROM {{p}}jobs WHERE state NOT IN (?, ?, ?)"),
            ENDED_STATES,
        )
        return [read_row(r) for r in rows]

    def load_row(self, id: str) -> JobRow | None:
        """Job ``id``'s row as the store has it now, or None."""
        rows = self._read(
            "reading a job", self._q(f"SELECT {READ_COLUMNS} FROM {{p}}jobs WHERE id = ?"), (id,)
        )
        return read_row(rows[0]) if rows else None

    def cancel_unreadable(self, id: str, now: int) -> bool:
        """End job ``id``, whose row this process cannot read, as cancelled: only its state,
        change counter and time are written (nothing else of it can be trusted), and its
        queued runs are recorded lost. Whether it was live."""
        raw = self.quarantine.raw_id("jobs", id)
        with self._tx("cancelling an unreadable job") as db:
            rev = self._rev(db)
            # (A NULL id, which SQLite's text key allows, is matched as one; the row keeps it.)
            cur = db.execute(
                self._q(
                    "UPDATE {p}jobs SET state = 'cancelled', rev = ?, updated = ?, "
                    "next_base = NULL, next_due = NULL, sides = NULL "
                    f"WHERE {'id IS NULL' if raw is None else 'id = ?'} "
                    "AND state NOT IN (?, ?, ?)"
                ),
                (rev, now, *(() if raw is None else (raw,)), *ENDED_STATES),
            )
            done = bool(cur.rowcount == 1)
            if done:
                db.execute(
                    self._q(
                        "UPDATE {p}runs SET state = 'lost', finished = ? WHERE job_id = ? "
                        "AND state = 'queued'"
                    ),
                    (now, id),
                )
                self._changed(db)
        if done:
            self._mine[id] = rev
        self.quarantine.discard("jobs", id)
        return done

    def _wrote(self, rows: Sequence[JobRow], rev: int) -> None:
        for row in rows:
            row.rev = rev
            self._mine[row.id] = rev
        if self._batch:
            self._touched.update(row.id for row in rows)

    def touched(self) -> set[str]:
        """The ids of the jobs written in the batch going on (or the last one), so that a batch
        rolled back can read them back."""
        return set(self._touched)

    # -- writing jobs -----------------------------------------------------------------------------

    def write(self, rows: Sequence[JobRow], now: int, drop_retries: bool = False) -> set[str]:
        """Write whole rows (a new job, or any change), in one transaction; returns the ids of
        those the store did not take as sent (``_differ``: read them back). ``drop_retries``:
        the change dropped the jobs' pending retries on purpose (cancel, reschedule, replace):
        their failed runs' records stop keeping them (``_retry_at``), or a process would take
        them in again, and are final from now (``finished``: the purge deletes them in time).
        So are the fires queued for them (backfill, trigger), as the change drops them from
        memory: recorded lost (they stayed queued for good, and ran for the next job given the
        id). Lost, not deleted: a process that took one in before it saw the change then finds
        its key taken and does not run it."""
        written = rows
        if self._batch and self._pending:
            # A job added in this batch is inserted at its end: a change made to it meanwhile
            # changes the row to insert (written now, it made the insert find the id taken; a
            # cancel was undone by it). Its runs (a trigger queued in the batch) are changed
            # below like any job's.
            at = {row.id: i for i, row in enumerate(self._pending)}
            written = []
            for row in rows:
                i = at.get(row.id)
                if i is None:
                    written.append(row)
                else:
                    self._pending[i] = row
            if not written and not drop_retries:
                return set()
        with self._tx("saving jobs") as db:
            rev = self._rev(db)
            ended: set[str] = set()
            if not drop_retries:
                # A pause or resume of a job that ended elsewhere meanwhile (a one-shot whose
                # run finished) is moot, as in one process: not written, and read back. (A
                # reschedule or replace=True is written: it gives the job a schedule again.)
                ended = self._ended(db, written)
                written = [row for row in written if row.id not in ended]
            db.executemany(self._q(_UPSERT_JOB), [job_values(row, rev, now) for row in written])
            differ = self._differ(db, written) | ended
            if drop_retries:
                ids = [(now, row.id) for row in rows]
                db.executemany(
                    self._q(
                        "UPDATE {p}runs SET lease_until = NULL, finished = ? WHERE job_id = ? "
                        "AND state = 'failed' AND lease_until IS NOT NULL"
                    ),
                    ids,
                )
                db.executemany(
                    self._q(
                        "UPDATE {p}runs SET state = 'lost', finished = ? WHERE job_id = ? "
                        "AND state = 'queued'"
                    ),
                    ids,
                )
            self._changed(db)
        self._wrote([row for row in written if row.id not in differ], rev)
        return differ

    def _ended(self, db: Any, rows: Sequence[JobRow]) -> set[str]:
        """The ids of ``rows`` whose job has ended in the store (transaction ``db``)."""
        return set(self._ids_in(db, [row.id for row in rows], ended=True))

    def _ids_in(self, db: Any, ids: Sequence[str], ended: bool) -> list[str]:
        """Of ``ids``, those whose job's row has ended (``ended``) or is live, in ``db``."""
        found: list[str] = []
        for chunk, marks in id_lists(ids):
            found += [
                r[0]
                for r in db.execute(
                    self._render(
                        f"SELECT id FROM {{p}}jobs WHERE id IN ({marks}) "
                        f"AND state {'' if ended else 'NOT '}IN (?, ?, ?)"
                    ),
                    (*chunk, *ENDED_STATES),
                ).fetchall()
            ]
        return found

    def _differ(self, db: Any, rows: Sequence[JobRow]) -> set[str]:
        """The ids of ``rows`` (just written in transaction ``db``) whose stored state or
        counters are not what was sent (UPSERT_CONFLICT kept the store's): the writer reads
        those back, or its copy would keep what it sent."""
        sent = {row.id: (row.state, row.runs, row.failures) for row in rows}
        differ: set[str] = set()
        for chunk, marks in id_lists(list(sent)):
            found = db.execute(
                self._render(
                    f"SELECT id, state, runs, failures FROM {{p}}jobs WHERE id IN ({marks})"
                ),
                chunk,
            ).fetchall()
            differ.update(r[0] for r in found if tuple(r[1:]) != sent[r[0]])
        return differ

    def _write_progress(
        self,
        db: Any,
        row: JobRow,
        rev: int,
        now: int,
        guard: int | None = None,
        failed: bool | None = None,
    ) -> bool | None:
        """Write ``row``'s progress (``_UPSERT_PROGRESS``) in transaction ``db``; with a
        ``guard``, only if the row's next regular fire is still the guard; ``failed`` not None:
        an outcome's, adding its run (and failure) to the row's counters. Returns whether the
        row now says what this process sent (True), or was written merged with a change made
        elsewhere that stood (False: an ended job, a pause or resume, a new recurrence, a later
        fire, runs counted elsewhere; the change feed reads it back), or not written (None)."""
        values = job_values(row, rev, now)
        if failed is not None:
            written = db.execute(self._q(_UPSERT_OUTCOME), (*values, 1, int(failed))).fetchone()
        elif guard is None:
            written = db.execute(self._q(_UPSERT_PROGRESS), values).fetchone()
        else:
            written = db.execute(self._q(_UPSERT_PROGRESS_GUARDED), (*values, guard)).fetchone()
        if written is None:
            return None
        if failed is None:  # (the counters were not written: whatever they are stands)
            return tuple(written[:3]) == (row.state, row.trigger, row.next_base)
        return tuple(written) == (row.state, row.trigger, row.next_base, row.runs, row.failures)

    def write_progress(
        self, rows: Sequence[JobRow], now: int, guards: Sequence[int | None] | None = None
    ) -> list[bool]:
        """Write the progress of jobs the runner moved on without a run (a fire skipped), as
        outcomes write it (``_UPSERT_PROGRESS``), in one transaction. A row the store did not
        take as given is read back with the changes. ``guards``: a row with a guard is written
        only if its next regular fire is still the guard (this process moves it on, not
        another). Returns, for each row, whether it was written: for a row with a guard,
        whether this write moved the job on (as given or merged with a change made
        elsewhere); for one without, whether it was written as given."""
        self.insert_pending()
        answers = []
        kept = []
        with self._tx("saving jobs") as db:
            rev = self._rev(db)
            for i, row in enumerate(rows):
                guard = None if guards is None else guards[i]
                given = self._write_progress(db, row, rev, now, guard)
                answers.append(bool(given) if guard is None else given is not None)
                if given:
                    kept.append(row)
            self._changed(db)
        self._wrote(kept, rev)
        return answers

    def insert_new(self, rows: Sequence[JobRow], now: int) -> list[str]:
        """Insert rows of new jobs; returns the ids that are taken by live jobs already (then
        nothing is written).

        Inside a ``batch()`` the rows are kept and written, with one check of their ids, when
        the batch ends (a taken id then fails the whole batch)."""
        if self._batch:
            self._pending.extend(rows)
            self._pending_now = now
            return []
        return self._insert_now(rows, now)

    def _insert_now(self, rows: Sequence[JobRow], now: int) -> list[str]:
        with self._tx("saving jobs") as db:
            taken = self._ids_in(db, [row.id for row in rows], ended=False)
            if taken:
                return taken
            rev = self._rev(db)
            db.executemany(self._q(_UPSERT_JOB), [job_values(row, rev, now) for row in rows])
            self._changed(db)
        self._wrote(rows, rev)
        return []

    def insert_pending(self) -> None:
        """Inside a batch, insert the new jobs' rows kept for its end now: before a run of one
        of them is claimed or settled in it (``trigger()`` of a scheduler whose runner is not
        started runs the job at once), whose writes of the job's row would otherwise make the
        insert at the end find its id taken. A taken id raises ``ConflictingIdError`` here,
        and the rows stay kept, so the batch's end raises it too. (The Scheduler calls it
        before it changes anything in memory for such a run; the stores' own calls are the
        safety net.)"""
        if not (self._batch and self._pending):
            return
        taken = self._insert_now(self._pending, self._pending_now)
        if taken:
            raise ConflictingIdError(taken[0], _TAKEN_IN_BATCH)
        self._pending = []

    @property
    def batch_open(self) -> bool:
        """Whether a ``batch()`` block is open (its writes wait for its end)."""
        return self._batch > 0

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Make every change inside the block one transaction (committed at its end, rolled
        back if it raises)."""
        if self._batch:
            self._batch += 1
            try:
                yield
            except BaseException:
                # One transaction holds them both: the inner block's changes cannot be taken
                # back alone, so the outer batch stores nothing either.
                self._spoilt = True
                raise
            finally:
                self._batch -= 1
            return
        self._touched = set()
        self._spoilt = False
        with self._tx("a batch of changes"):
            self._batch = 1
            try:
                yield
                if self._spoilt:
                    raise StoreError(
                        self._where,
                        "a batch nested in this one raised, and its changes cannot be taken "
                        "back alone: none of this batch's changes is stored",
                        "let the inner batch's exception end the outer one, or do not nest",
                    )
                pending, self._pending = self._pending, []
                if pending:
                    taken = self._insert_now(pending, self._pending_now)
                    if taken:
                        raise ConflictingIdError(taken[0], _TAKEN_IN_BATCH)
            finally:
                self._batch = 0
                self._pending = []

    # -- runs -------------------------------------------------------------------------------------

    def _busy(self, db: Any, job_id: str) -> bool:
        """Lock job ``job_id``'s row for the claim, if the dialect locks rows; whether another
        transaction holds it. (SQLite's write lock covers the file: never busy.)"""
        return False

    def claim(
        self,
        key: str,
        job_id: str,
        due: int,
        attempt: int,
        now: int,
        lease_ns: int,
        row: JobRow | None,
        guard: int | None,
        solo: int = 0,
    ) -> str:
        """Try to start fire ``key`` (attempt ``attempt``) here, and write ``row``.

        ``guard``: the regular due time being claimed; the row is written only if the store's
        row is still due then. ``solo`` (``SOLO_SKIP``): the fire is skipped (the row moved on,
        no run recorded: "done") if another worker's run of the job is going (``Overlap.SKIP``);
        (``SOLO_WAIT``): the claim is "busy" then (a catch-up waits for the run before).

        Returns ``"won"``, ``"lost"`` (another process moved the job on or holds the run;
        nothing was written), ``"busy"`` (another process is changing the job right now;
        nothing was written: try again shortly) or ``"done"`` (the row moved on but the fire's
        key had run or is running already, or ``solo`` found another run going: skip it).
        """
        self.insert_pending()
        # Ordered so that whatever decides "lost" comes first and nothing needs undoing: the
        # guarded row update for a regular fire, the run's claim for a side occurrence.
        lost = False
        with self._tx("claiming a run") as db:
            if self._busy(db, job_id) or (
                solo
                and self._running_elsewhere(db, job_id, now, due if solo == SOLO_SKIP else None)
            ):
                # (Under SOLO_SKIP: a run that started when this fire was due already came
                # first and did not overlap it: the fire waits for it, as in one process.)
                return "busy"
            rev = self._rev(db)
            if row is not None and guard is not None:
                values = job_values(row, rev, now)
                cur = db.execute(self._q(_ADVANCE_JOB), (rev, *claim_values(values), row.id, guard))
                if cur.rowcount == 0:
                    return "lost"
            if attempt > 1:
                cur = db.execute(
                    self._q(_CLAIM_RETRY),
                    (attempt, self.worker, now + lease_ns, now, key, attempt - 1),
                )
                won = cur.rowcount == 1
            elif solo == SOLO_SKIP and self._running_elsewhere(db, job_id, now, due, True):
                won = False
            else:
                won = (
                    db.execute(
                        self._q(_CLAIM_KEY),
                        (key, job_id, due, attempt, self.worker, now + lease_ns, now),
                    ).fetchone()
                    is not None
                )
            if not won and guard is None:
                lost = True
            elif row is not None and guard is None and not self._write_progress(db, row, rev, now):
                row = None  # (not as this process has it: read back with the changes)
        # Taken now, or taken before (a backfilled fire another process ran): not queued any
        # more, so no longer worth remembering (queued_runs).
        self._known_queued.discard(key)
        if lost:
            return "lost"
        if row is not None:
            self._wrote((row,), rev)
        if won:
            self._held.add(key)
        return "won" if won else "done"

    def claim_many(self, asks: Sequence[ClaimAsk]) -> list[ClaimAnswer]:
        """Several claims at once (each ``claim``'s arguments, one job at most once): for each,
        in order, ``claim``'s answer and the job's row as the store has it if the dialect read
        it back (a claim not won; else None), or a ``StoreError`` where that claim failed.

        Here one claim after the other; a dialect may make them one statement."""
        return [caught(self._claim_answer, ask) for ask in asks]

    def _running_elsewhere(
        self, db: Any, job_id: str, now: int, due: int | None = None, before: bool = False
    ) -> bool:
        """Whether another worker's run of the job is going (its lease not run out); with
        ``due``, one that started before it (``before``) or at or after it (not ``before``)."""
        params: tuple[Any, ...] = (job_id, now, self.worker)
        if due is None:
            sql = running_elsewhere("?", "?")
        else:
            sql = running_elsewhere("?", "?", "< ?" if before else ">= ?")
            params += (due,)
        found = db.execute(self._q("SELECT " + sql), params).fetchone()
        return bool(found[0])

    def start_held(self, key: str, attempt: int, now: int, lease_ns: int) -> bool:
        """Before a run claimed a while ago starts: whether its record is still this
        process's at that attempt (its lease renewed, its start time recorded), or another
        worker took it over meanwhile (this process stalled past the lease between the claim
        and the start: it must not start here too)."""
        return self.start_taken(key, "", attempt, now, lease_ns, False) == "start"

    def start_taken(
        self, key: str, job_id: str, attempt: int, now: int, lease_ns: int, wait: bool
    ) -> str:
        """Before a run this process took over from a lost worker starts: ``"lost"`` if its
        record is no longer this process's at that attempt (this one stalled past the lease
        meanwhile, and another took it over in turn: it must not start here too), else
        ``"wait"`` if ``wait`` and another worker's run of the job is going (its lease not run
        out), else ``"start"``, with the run's lease renewed and its start time recorded."""
        with self._tx("starting a run taken over") as db:
            if wait and self._running_elsewhere(db, job_id, now):
                mine = db.execute(
                    self._q(
                        "SELECT 1 FROM {p}runs WHERE key = ? AND worker = ? AND attempt = ? "
                        "AND state = 'running'"
                    ),
                    (key, self.worker, attempt),
                ).fetchone()
                return "wait" if mine is not None else "lost"
            cur = db.execute(
                self._q(
                    "UPDATE {p}runs SET lease_until = ?, started = ? WHERE key = ? AND worker = ? "
                    "AND attempt = ? AND state = 'running'"
                ),
                (now + lease_ns, now, key, self.worker, attempt),
            )
            return "start" if cur.rowcount == 1 else "lost"

    def _claim_answer(self, ask: ClaimAsk) -> tuple[str, JobRow | None]:
        """``claim``'s answer as ``claim_many`` gives it (no row read back)."""
        return self.claim(*ask), None

    def take_over(
        self, key: str, old_worker: str | None, attempt: int, now: int, lease_ns: int
    ) -> bool:
        """Take an expired run from its worker, raising its attempt. Returns whether this
        process now holds it."""
        with self._tx("taking over a run") as db:
            cur = db.execute(
                self._q(
                    "UPDATE {p}runs SET worker = ?, attempt = ?, lease_until = ?, started = ? "
                    f"WHERE key = ? AND state = 'running' AND {self._SAME_WORKER} "
                    f"AND attempt = ? AND {LAPSED}"
                ),
                (
                    self.worker,
                    attempt + 1,
                    now + lease_ns,
                    now,
                    key,
                    old_worker,
                    attempt,
                    now,
                    now + LEASE_MOST_NS,
                ),
            )
            won = bool(cur.rowcount == 1)
        if won:
            self._held.add(key)
        return won

    def held_keys(self) -> list[str]:
        """The fire keys of the runs this process holds a lease on, sorted."""
        return sorted(self._held)

    def release(self, runs: Sequence[tuple[str, int]]) -> None:
        """Give back runs ``(key, attempt)`` this process holds and will not finish (work
        cancelled at shutdown): their leases end now, so the next look for lost runs, by any
        process, takes them over instead of waiting for the lease to run out. Fenced like an
        outcome: a run another process has taken meanwhile is left alone."""
        if not runs:
            return
        for key, _ in runs:
            self._held.discard(key)
        # (Lease 0, not now: a worker whose clock is behind this one's takes it over too.)
        with self._tx("giving back runs") as db:
            db.executemany(
                self._q(
                    "UPDATE {p}runs SET lease_until = 0 WHERE key = ? AND state = 'running' "
                    f"AND {self._SAME_WORKER} AND attempt = ?"
                ),
                [(key, self.worker, attempt) for key, attempt in runs],
            )

    def let_lapse(self, key: str) -> None:
        """Stop renewing the lease of run ``key``, which this process interrupted mid-run (a
        coroutine cancelled at shutdown): it is taken over when its lease runs out, as a
        crashed worker's run is, not when this process has finished stopping."""
        self._held.discard(key)

    def mark_lost(self, key: str, now: int) -> None:
        """Record that an expired run's job has ended, so nobody will run it again."""
        self._held.discard(key)
        with self._tx("recording a lost run") as db:
            db.execute(
                self._q(
                    "UPDATE {p}runs SET state = 'lost', finished = ?, lease_until = NULL "
                    "WHERE key = ? AND state = 'running'"
                ),
                (now, key),
            )

    def settle(
        self,
        key: str,
        attempt: int,
        state: str,
        error: str | None,
        now: int,
        row: JobRow | None,
    ) -> bool:
        """Record the outcome of attempt ``attempt`` of fire ``key`` (``succeeded``, ``failed``
        with a retry to come, or ``dead``) and write the job's row, if this process still holds
        the run. Returns False, writing nothing, if it does not (its lease ran out and another
        worker took it over)."""
        self.insert_pending()
        final = state != "failed"
        # (A failed run's lease_until is when its retry is due: see _retry_at.)
        retry = None if final else self._retry_at(row, key, attempt)
        with self._tx("recording a run's outcome") as db:
            cur = db.execute(
                self._q(
                    "UPDATE {p}runs SET state = ?, finished = ?, error = ?, lease_until = ? "
                    "WHERE key = ? AND worker = ? AND attempt = ? AND state = 'running'"
                ),
                (state, now if final else None, error, retry, key, self.worker, attempt),
            )
            recorded = cur.rowcount == 1
            if not recorded:
                # Written already? (A retry after a connection lost while committing.)
                found = db.execute(
                    self._q("SELECT state, worker, attempt FROM {p}runs WHERE key = ?"), (key,)
                ).fetchone()
                if found is None or tuple(found) != (state, self.worker, attempt):
                    if found is None or found[1] != self.worker:
                        # (Still this process's, at a later attempt it took over: renewed.)
                        self._held.discard(key)
                    return False
            if row is not None:
                rev = self._rev(db)
                # (Written already, the run was counted then.)
                failed = state != "succeeded" if recorded else None
                if not self._write_progress(db, row, rev, now, failed=failed):
                    row = None  # (not as this process has it: read back with the changes)
        self._held.discard(key)
        if row is not None:
            self._wrote((row,), rev)
        return True

    def settle_many(self, outcomes: Sequence[SettleAsk]) -> list[bool | StoreError]:
        """Several outcomes at once (each ``settle``'s arguments): their answers in order, a
        ``StoreError`` in place of an answer where writing that outcome failed.

        Here one outcome after the other; a dialect may make them one statement."""
        return [caught(self.settle, *outcome) for outcome in outcomes]

    def settle_and_claim(
        self, outcomes: Sequence[SettleAsk], asks: Sequence[ClaimAsk]
    ) -> tuple[list[bool | StoreError], list[ClaimAnswer]]:
        """``settle_many(outcomes)``, then ``claim_many(asks)``: both answers. A dialect may
        make them one transaction (one commit instead of two)."""
        return self.settle_many(outcomes), self.claim_many(asks)

    def heartbeat(self, now: int, lease_ns: int) -> None:
        """Renew the leases of every run this process holds."""
        held = list(self._held)
        if not held:
            return
        with self._tx("renewing leases") as db:
            for chunk, marks in id_lists(held):
                db.execute(
                    self._render(
                        f"UPDATE {{p}}runs SET lease_until = ? WHERE worker = ? "
                        f"AND state = 'running' AND key IN ({marks})"
                    ),
                    (now + lease_ns, self.worker, *chunk),
                )

    def expired(self, now: int) -> list[tuple[str, str, int, int, str | None]]:
        """Runs whose lease ran out: ``(key, job id, due, attempt, worker)``, oldest first. A
        lease beyond the longest a process takes, or unreadable, counts as run out (WARNING);
        a record that cannot be read is quarantined."""
        found = []
        most = now + LEASE_MOST_NS
        for key, job_id, due, attempt, worker, until in self._read(
            "looking for lost runs",
            self._q(
                "SELECT key, job_id, due, attempt, worker, lease_until FROM {p}runs "
                f"WHERE state = 'running' AND {LAPSED} ORDER BY due LIMIT 1000"
            ),
            (now, most),
        ):
            if not _run_ok(key, job_id, due, attempt, worker):
                self.quarantine.add(
                    "runs",
                    key,
                    "a running record of wrong values "
                    + _values(key, job_id, due, attempt, worker),
                )
                continue
            if type(until) is not int or until > most:
                logger.warning(
                    "run %s of job %r holds a lease until %r, beyond any a process takes (a "
                    "year) or not a time (store %s): counted as run out, and taken over",
                    key,
                    job_id,
                    until,
                    self._where,
                )
            found.append((key, job_id, due, attempt, worker))
        return found

    def next_lease_end(self, now: int) -> int | None:
        """``DurableStore.next_lease_end``."""
        found = self._read(
            "looking for leases",
            self._q(
                "SELECT min(lease_until) FROM {p}runs WHERE state = 'running' AND lease_until > ? "
                "AND lease_until <= ?"
            ),
            (now, now + LEASE_MOST_NS),
        )
        end: int | None = found[0][0]
        return end

    def queued_runs(self) -> list[QueuedRun]:
        """Fires enqueued (``backfill``, ``trigger``) and retries pending, not taken in by this
        process yet: ``(key, job id, due, attempt, retry due or None)``."""
        rows = self._read("reading queued runs", self._q(_QUEUED))
        return self._new_queued(rows)

    def forget_queued(self, keys: Iterable[str]) -> None:
        """Count ``keys`` as not taken in: the next ``queued_runs`` answers those still
        queued or pending again (the Scheduler dropped them from memory, reading their job's
        row)."""
        keys = set(keys)
        self._known_queued = {k for k in self._known_queued if k.partition("\x00")[0] not in keys}

    def _new_queued(self, rows: Sequence[Sequence[Any]]) -> list[QueuedRun]:
        """``queued_runs``'s answer from the queued runs read."""
        # Forget the keys no longer queued (taken by this process or another): the set stays
        # as small as the queue instead of growing with every fire ever backfilled.
        rows = [row for row in rows if self._queued_ok(row)]
        self._known_queued &= {_queued_id(row) for row in rows}
        found = [row for row in rows if _queued_id(row) not in self._known_queued]
        self._known_queued.update(_queued_id(row) for row in found)
        return [(k, j, d, a, r) for k, j, d, a, r in found]

    def _queued_ok(self, row: Sequence[Any]) -> bool:
        """Whether a queued run's record is of the types duetime writes (else quarantined)."""
        key, job_id, due, attempt, retry = row
        if _run_ok(key, job_id, due, attempt, None) and (retry is None or _ns_ok(retry)):
            return True
        self.quarantine.add("runs", key, f"a queued record of wrong values {_values(*row)}")
        return False

    def knows_queued(self, rows: Sequence[Sequence[Any]]) -> bool:
        """Whether this process has taken in every one of ``rows`` (``queued_runs``'s)."""
        known = self._known_queued
        return all(_queued_id(row) in known for row in rows)

    @staticmethod
    def _retry_at(row: JobRow | None, key: str, attempt: int) -> int | None:
        """When the retry of attempt ``attempt`` of fire ``key`` is due, from the pending sides
        ``row`` records (None if none is): kept on the failed run's record too, so that a
        process that writes the row from a stale copy cannot lose the retry for good."""
        if row is None or not row.sides:
            return None
        for rec in json.loads(row.sides):
            if rec["attempt"] != attempt + 1 or rec["due"] is None:
                continue
            found = rec["key"] or fire_key_at(row.id, rec["base"])
            if found == key:
                return int(rec["due"])
        return None

    def enqueue(self, job_id: str, fires: Sequence[tuple[str, int]]) -> list[str]:
        """Record fires ``(key, due)`` of a job as queued, skipping keys recorded already.
        Returns the keys recorded now."""
        with self._tx("enqueueing fires") as db:
            new = []
            for key, due in fires:
                cur = db.execute(
                    self._q(
                        "INSERT INTO {p}runs (key, job_id, due, state, attempt) "
                        "VALUES (?, ?, ?, 'queued', 1) ON CONFLICT (key) DO NOTHING"
                    ),
                    (key, job_id, due),
                )
                if cur.rowcount == 1:
                    new.append(key)
            if new:
                self._changed(db)
        self._known_queued.update(new)
        if self._batch and new:
            self._touched.add(job_id)
        return new

    def recorded_keys(self, keys: Sequence[str]) -> set[str]:
        """``DurableStore.recorded_keys``."""
        marks = ", ".join("?" * len(keys))
        rows = self._read(
            "reading runs", self._q(f"SELECT key FROM {{p}}runs WHERE key IN ({marks})"), keys
        )
        return {row[0] for row in rows}

    def _fresh(self) -> SQLStore:
        """A new, unopened store of the same place and settings (see ``renew``)."""
        raise NotImplementedError

    def renew(self) -> SQLStore:
        """Make this closed store as it was new, for another Scheduler to open: its first one
        shut down (a program that restarts its scheduler on the same store object). Returns a
        closed copy holding what the old scheduler had in memory, for it to keep answering
        from (its jobs must not become the new one's); the new one loads all from the store."""
        if self.is_open:
            raise RuntimeError("renew() needs a closed store")
        kept, fresh = self._fresh(), self._fresh()
        for cls in type(self).__mro__:
            for name in cls.__dict__.get("__slots__", ()):
                setattr(kept, name, getattr(self, name))
                setattr(self, name, getattr(fresh, name))
        return kept

    def _read_closed(self, what: str, sql: str, params: Sequence[Any]) -> list[Any]:
        """``_read`` while the store is closed (its scheduler shut down), on a connection
        opened for it and closed after, never the store's own (each store says how)."""
        raise NotImplementedError

    def runs(self, job_id: str | None, state: str | None, limit: int) -> list[RunRecord]:
        """Run records, newest due first. A closed store (its scheduler shut down) opens a
        connection for the read: what ran is worth reading after the end."""
        where = []
        params: list[Any] = []
        if job_id is not None:
            where.append("job_id = ?")
            params.append(job_id)
        if state is not None:
            where.append("state = ?")
            params.append(state)
        sql = (
            "SELECT key, job_id, due, started, finished, state, attempt, worker, error "
            "FROM {p}runs"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY due DESC, key DESC LIMIT ?"
        )
        params.append(limit)
        read = self._read if self.is_open else self._read_closed
        found = []
        for k, j, d, s, f, st, a, w, e in read("listing runs", self._q(sql), params):
            if not (
                _run_ok(k, j, d, a, w)
                and (s is None or _ns_ok(s))
                and (f is None or _ns_ok(f))
                and isinstance(st, str)
                and (e is None or isinstance(e, str))
            ):
                self.quarantine.add(
                    "runs", k, f"a record of wrong values {_values(k, j, d, s, f, st, a, w, e)}"
                )
                continue
            found.append(RunRecord(k, j, _dt(d), _dt(s), _dt(f), st, a, w, e))
        return found

    def purge(self, now: int) -> int:
        """Delete finished runs and ended jobs' rows older than ``retention``. Returns how many
        rows went."""
        # (A retention longer than the stored times reach, timedelta.max say, keeps all.)
        cutoff = max(now - self.retention_ns, -(2**63))
        with self._tx("deleting old runs") as db:
            gone: int = db.execute(
                self._q(
                    "DELETE FROM {p}runs WHERE finished < ? "
                    "AND state IN ('succeeded', 'dead', 'lost', 'failed')"
                ),
                (cutoff,),
            ).rowcount
            gone += db.execute(
                self._q("DELETE FROM {p}jobs WHERE updated < ? AND state IN (?, ?, ?)"),
                (cutoff, *ENDED_STATES),
            ).rowcount
        return gone

    # -- workers ----------------------------------------------------------------------------------

    def announce(self, tasks: str, until: int) -> None:
        """Record that this process runs ``tasks`` (JSON: ``{"names": [...], "prefixes":
        [...]}``) until ``until`` (real epoch nanoseconds), unless it says so again: what the
        command line reads to tell the jobs no process can run. Best effort: a failure is
        logged, never raised (the jobs do not depend on it)."""
        try:
            with self._tx("recording this worker") as db:
                db.execute(
                    self._q(
                        "INSERT INTO {p}workers (worker, tasks, until) VALUES (?, ?, ?) "
                        "ON CONFLICT (worker) DO UPDATE SET tasks = excluded.tasks, "
                        "until = excluded.until"
                    ),
                    (self.worker, tasks, until),
                )
                db.execute(
                    self._q("DELETE FROM {p}workers WHERE until < ?"), (until - _WORKER_KEPT,)
                )
            self._announced = True
        except StoreError as exc:
            logger.debug("%s", exc)

    def retire(self) -> None:
        """Remove this process from the workers (``close`` does, first); best effort, as
        ``announce``."""
        if not self._announced or not self.is_open:
            return
        self._announced = False
        try:
            with self._tx("removing this worker") as db:
                db.execute(self._q("DELETE FROM {p}workers WHERE worker = ?"), (self.worker,))
        except StoreError as exc:
            logger.debug("%s", exc)

    def live_tasks(self, now: int) -> tuple[set[str], set[str]]:
        """The task names and module prefixes the processes that announced themselves until
        after ``now`` (real epoch nanoseconds) run."""
        names: set[str] = set()
        prefixes: set[str] = set()
        rows = self._read(
            "reading the workers", self._q("SELECT tasks FROM {p}workers WHERE until > ?"), (now,)
        )
        for (text,) in rows:
            # (A record is data: one of another shape names no task, and is passed over.)
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                found = load_json(text, "tasks")
                names.update(str(n) for n in found.get("names", ()))
                prefixes.update(str(p) for p in found.get("prefixes", ()))
        return names, prefixes

    # -- dead letters -----------------------------------------------------------------------------

    def save_dead(
        self, id: str, job: str, error: str, traceback: str, attempts: int, due: int, now: int
    ) -> None:
        """Keep a dead letter in the store (``job`` is the job's row as JSON)."""
        with self._tx("saving a dead letter") as db:
            db.execute(
                self._q(
                    "INSERT INTO {p}dead (id, job, error, traceback, attempts, due, failed_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                    "job = excluded.job, error = excluded.error, "
                    "traceback = excluded.traceback, attempts = excluded.attempts, "
                    "due = excluded.due, failed_at = excluded.failed_at"
                ),
                (id, job, error, traceback, attempts, due, now),
            )

    def load_dead(self) -> list[tuple[str, str, str, str, int, int, int]]:
        """Every dead letter: ``(id, job JSON, error, traceback, attempts, due, failed_at)``;
        one of wrong types is quarantined."""
        found = []
        for r in self._read(
            "loading dead letters",
            self._q(
                "SELECT id, job, error, traceback, attempts, due, failed_at FROM {p}dead "
                "ORDER BY failed_at"
            ),
        ):
            id, job, error, tb, attempts, due, failed_at = r
            if (
                isinstance(id, str)
                and all(isinstance(v, str) for v in (job, error, tb))
                and type(attempts) is int
                and _ns_ok(due)
                and _ns_ok(failed_at)
            ):
                found.append((id, job, error, tb, attempts, due, failed_at))
            else:
                self.quarantine.add(
                    "dead",
                    id,
                    f"a dead letter of wrong values {_values(id, attempts, due, failed_at)}",
                )
        return found

    def take_dead(self, id: str) -> Any | None:
        """Remove and return a dead letter (from the store, then memory), or None. A store
        that is closed or fails raises ``StoreError`` and keeps the letter, in memory too (one
        not opened yet keeps letters in memory only)."""
        if self.worker:  # (opened: a closed one refuses)
            self.delete_dead(id)
        return super().take_dead(id)

    def delete_dead(self, id: str) -> bool:
        """Remove a dead letter from the store only; whether it was there."""
        with self._tx("removing a dead letter") as db:
            gone: int = db.execute(self._q("DELETE FROM {p}dead WHERE id = ?"), (id,)).rowcount
        return gone > 0

    def reopen_key(self, key: str) -> None:
        """Forget the finished run recorded under fire key ``key``, so that the key can run
        again: ``retry_failed`` at the very instant the job died (a fake clock that has not
        moved) gives the new fire the dead one's key, and the store records each key once."""
        with self._tx("reopening a fire key") as db:
            db.execute(
                self._q("DELETE FROM {p}runs WHERE key = ? AND state IN (?, ?, ?, ?)"),
                (key, "succeeded", "failed", "dead", "lost"),
            )

    @property
    def is_open(self) -> bool:
        """Whether the connection is open."""
        raise NotImplementedError

    @property
    def _where(self) -> str:
        """How errors name the store (``StoreError``'s first argument)."""
        raise NotImplementedError

    def retry_in_ns(self) -> int:
        """How long a claim the store failed waits before it is tried again (nanoseconds): 5
        seconds here (a locked file stays locked a while, and each try waits for the lock)."""
        return 5 * NS_PER_SECOND
