"""``StoreView``: paged, read-only looks at a durable store's tables, for the dashboard.

A ``Scheduler`` loads every job of its store into memory, which is right for running them and
wrong for showing them: a dashboard over a million jobs must answer a page of fifty in
milliseconds. A view reads the tables with small queries on their indexes instead, on a
connection of its own (a SQLite file opened read-only, or a PostgreSQL connection in
autocommit), and never writes, but for ``prepare``, which adds the one index the jobs list
filtered by state needs.

Pages are keyset-paged: ``jobs(after=id)`` answers the jobs whose id sorts after ``id``, so
the hundredth page costs what the first does (an ``OFFSET`` would read every row before it).

The SQL is written once for both dialects, as the stores' own is (``duetime.stores._sql``):
``?`` placeholders and ``{p}`` before each table name, turned into the store's dialect by the
store object itself. Every time read is integer nanoseconds since the epoch, UTC.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from duetime.errors import InvalidArgument, StoreError
from duetime.stores._url import store_from_url
from duetime.stores.codec import load_json
from duetime.stores.postgres import PostgresStore, missing_database, psycopg_module
from duetime.stores.sqlite import SQLiteStore

__all__ = [
    "DeadView",
    "JobView",
    "RunView",
    "StoreView",
    "WorkerView",
    "open_store",
]

logger = logging.getLogger("duetime")

#: The job states a filter may name (live ones, then ended ones).
JOB_STATES = ("scheduled", "running", "paused", "completed", "cancelled", "failed")

_JOB_COLUMNS = "id, name, task, trigger, state, next_due, attempt, runs, failures, last_error"
_RUN_COLUMNS = "key, job_id, due, state, attempt, worker, lease_until, started, finished, error"

# -- named queries (one text for both dialects) ---------------------------------------------------

_JOBS_PAGE = f"SELECT {_JOB_COLUMNS} FROM {{p}}jobs WHERE id > ? ORDER BY id LIMIT ?"
_JOBS_PAGE_IN_STATE = (
    f"SELECT {_JOB_COLUMNS} FROM {{p}}jobs WHERE state = ? AND id > ? ORDER BY id LIMIT ?"
)
_JOB = f"SELECT {_JOB_COLUMNS} FROM {{p}}jobs WHERE id = ?"
_JOBS_BY_STATE = "SELECT state, count(*) FROM {p}jobs GROUP BY state"
# The latest run of each job of a page: one indexed look per job (runs (job_id, due)).
_LAST_RUNS = (
    f"SELECT {_RUN_COLUMNS} FROM {{p}}runs r WHERE r.job_id IN ({{marks}}) AND r.due = "
    "(SELECT max(o.due) FROM {p}runs o WHERE o.job_id = r.job_id)"
)
_RUNS_PAGE = f"SELECT {_RUN_COLUMNS} FROM {{p}}runs{{where}} ORDER BY due DESC, key DESC LIMIT ?"
_RUNS_BY_STATE = "SELECT state, count(*) FROM {p}runs GROUP BY state"
# Finished runs per hour (hours since the epoch) and outcome, since a time.
_RUNS_PER_HOUR = (
    "SELECT finished / 3600000000000, state, count(*) FROM {p}runs "
    "WHERE finished >= ? AND finished IS NOT NULL GROUP BY finished / 3600000000000, state"
)
_DEAD = (
    "SELECT id, job, error, traceback, attempts, due, failed_at FROM {p}dead "
    "ORDER BY failed_at DESC, id LIMIT ?"
)
_DEAD_ONE = "SELECT id, job, error, traceback, attempts, due, failed_at FROM {p}dead WHERE id = ?"
_DEAD_COUNT = "SELECT count(*) FROM {p}dead"
_WORKERS = "SELECT worker, tasks, until FROM {p}workers ORDER BY worker LIMIT ?"
_LIVE_WORKERS = "SELECT count(*) FROM {p}workers WHERE until > ?"
_LEASES = (
    "SELECT worker, count(*) FROM {p}runs WHERE state = 'running' AND lease_until > ? "
    "GROUP BY worker"
)
# The index the jobs list filtered by state reads (state, then id for the keyset).
_STATE_INDEX_SQLITE = "CREATE INDEX IF NOT EXISTS duetime_jobs_state_id ON duetime_jobs (state, id)"
_STATE_INDEX_PG = "CREATE INDEX IF NOT EXISTS jobs_state_id ON {p}jobs (state, id)"


def _histogram_sql(expr: str, buckets: int) -> str:
    """A query counting the finished runs whose ``expr`` (ns) is at most each of ``buckets``
    bounds (parameters), then their count and the sum of ``expr``."""
    cases = ", ".join(f"sum(CASE WHEN {expr} <= ? THEN 1 ELSE 0 END)" for _ in range(buckets))
    return (
        f"SELECT {cases}, count(*), sum({expr}) FROM {{p}}runs "
        "WHERE finished IS NOT NULL AND started IS NOT NULL"
    )


@dataclass(frozen=True, slots=True)
class JobView:
    """A job's row as the dashboard shows it.

    Attributes:
        id: The job's id.
        name: Its display name, or None.
        task: Its task reference.
        trigger: Its recurrence as stored (JSON, ``codec.encode_trigger``).
        state: ``scheduled``, ``running``, ``paused``, ``completed``, ``cancelled`` or
            ``failed``.
        next_due: Its next due time (UTC epoch nanoseconds), or None.
        attempt: The attempt of its current or last occurrence.
        runs: How many attempts finished.
        failures: How many attempts raised.
        last_error: The last failed attempt's error, or None.
    """

    id: str
    name: str | None
    task: str
    trigger: str
    state: str
    next_due: int | None
    attempt: int
    runs: int
    failures: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class RunView:
    """A run record (one fire of a job); times in UTC epoch nanoseconds.

    Attributes:
        key: The fire key.
        job_id: The job's id.
        due: When it was due.
        state: One of ``records.RUN_STATES``.
        attempt: The latest attempt's number.
        worker: The worker of the latest attempt, or None.
        lease_until: When its lease ends (running), or its retry's due time (failed), or None.
        started: When the latest attempt started, or None.
        finished: When it finished, or None.
        error: The latest failed attempt's error, or None.
    """

    key: str
    job_id: str
    due: int
    state: str
    attempt: int
    worker: str | None
    lease_until: int | None
    started: int | None
    finished: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class DeadView:
    """A dead letter: a job whose last allowed attempt failed.

    Attributes:
        id: The job's id.
        name: Its display name, or None.
        task: Its task reference ("" if the letter's copy of the job cannot be read).
        error: The last attempt's error.
        traceback: Its traceback.
        attempts: How many attempts were made.
        due: When the failed fire was due (UTC epoch nanoseconds).
        failed_at: When the last attempt failed (UTC epoch nanoseconds).
    """

    id: str
    name: str | None
    task: str
    error: str
    traceback: str
    attempts: int
    due: int
    failed_at: int


@dataclass(frozen=True, slots=True)
class WorkerView:
    """A process that announced itself on the store (a Scheduler that registered tasks).

    Attributes:
        worker: Its worker id, ``"host:pid:random"``.
        host: The host part of the id.
        tasks: The task names it registered.
        until: Until when its last heartbeat counts (UTC epoch nanoseconds); it said so
            again before then while it lives.
        leases: Runs it holds a live lease on.
        heartbeat: When it last said it lives (UTC epoch nanoseconds), or None if its record
            does not say (written by an earlier duetime).
    """

    worker: str
    host: str
    tasks: tuple[str, ...]
    until: int
    leases: int
    heartbeat: int | None = None


@dataclass(frozen=True, slots=True)
class Histogram:
    """Counts of finished runs at most each bound, their count and sum.

    Attributes:
        bounds: The upper bounds (nanoseconds).
        counts: Runs at most each bound (cumulative).
        count: Runs measured.
        total: The sum of the values (nanoseconds).
    """

    bounds: tuple[int, ...]
    counts: tuple[int, ...]
    count: int
    total: int


# A row is data someone may have written by hand (SQLite keeps any type in any column): each
# value is shown as what it should be, or as nothing, never as an error page.


def _text(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _opt_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _ns(value: Any) -> int | None:
    """A time as stored (64-bit integer nanoseconds), else None."""
    return value if type(value) is int and -(2**63) <= value < 2**63 else None


def _count(value: Any) -> int:
    return value if type(value) is int else 0


def _job_view(row: Sequence[Any]) -> JobView:
    id, name, task, trigger, state, next_due, attempt, runs, failures, last_error = row
    return JobView(
        _text(id),
        _opt_text(name),
        _text(task),
        _text(trigger),
        _text(state),
        _ns(next_due),
        _count(attempt),
        _count(runs),
        _count(failures),
        _opt_text(last_error),
    )


def _run_view(row: Sequence[Any]) -> RunView:
    key, job_id, due, state, attempt, worker, lease_until, started, finished, error = row
    return RunView(
        _text(key),
        _text(job_id),
        _ns(due) or 0,
        _text(state),
        _count(attempt),
        _opt_text(worker),
        _ns(lease_until),
        _ns(started),
        _ns(finished),
        _opt_text(error),
    )


def check_existing(store: SQLiteStore | PostgresStore, label: str = "store") -> None:
    """Make sure ``store`` exists and holds duetime's tables, before anything opens it: opening
    one that does not would create it empty, and a mistyped name would then read as a store
    with no jobs. ``label`` names it in the messages (``--store`` for the command line).

    Raises:
        InvalidArgument: It does not (a missing file or database, another program's file, a
            schema no scheduler has used).
        StoreError: It cannot be read.
    """
    if isinstance(store, SQLiteStore):
        if store.path == ":memory:" or not Path(store.path).exists():
            raise InvalidArgument(f"{label} names {store.path!r}, which does not exist")
        if not store.created():
            raise InvalidArgument(
                f"{label} names {store.path!r}, which is not a duetime store (no scheduler "
                "has used it: another program's database, or a mistyped name)"
            )
        return
    try:
        created = store.created()
    except StoreError as exc:
        # A database that does not exist is the server's missing file: a bad store too.
        if missing_database(exc.__cause__):
            raise InvalidArgument(f"{label}: {exc}") from exc
        raise
    if not created:
        raise InvalidArgument(
            f"{label}: the database has no duetime schema {store.schema!r} (no scheduler has "
            "used it yet; choose another with ?schema=name)"
        )


def open_store(store: str | SQLiteStore | PostgresStore) -> SQLiteStore | PostgresStore:
    """A new, unopened store object for the place ``store`` names (a URL, or a store object
    whose place is taken; the object itself is left alone, as its Scheduler may use it).

    Raises:
        InvalidArgument: ``store`` is not a ``sqlite:`` or ``postgresql:`` URL or store.
    """
    if isinstance(store, SQLiteStore):
        return SQLiteStore(store.path)
    if isinstance(store, PostgresStore):
        return PostgresStore(store.dsn, schema=store.schema)
    if not isinstance(store, str):
        raise InvalidArgument(
            f"store must be a store URL, a SQLiteStore or a PostgresStore, got {store!r}"
        )
    return store_from_url(store)


class StoreView:
    """Read-only, paged queries over a durable store's tables, on a connection of its own.

    Args:
        store: A store URL (``sqlite:///jobs.db``, ``postgresql://...``) or a ``SQLiteStore``
            or ``PostgresStore`` object (only its place is used).

    Thread-safe: calls share one connection, one at a time. ``close()`` ends it; a later call
    opens a new one (so does a call after the connection failed).
    """

    def __init__(self, store: str | SQLiteStore | PostgresStore) -> None:
        self.store = open_store(store)
        self._lock = threading.Lock()
        self._conn: Any = None

    def __repr__(self) -> str:
        return f"<StoreView {self.where}>"

    @property
    def where(self) -> str:
        """The store, as errors name it (a PostgreSQL password left out)."""
        return self.store.where

    @property
    def is_postgres(self) -> bool:
        """Whether the store is PostgreSQL (else a SQLite file)."""
        return isinstance(self.store, PostgresStore)

    # -- connection -------------------------------------------------------------------------------

    def check(self) -> None:
        """Make sure the store exists and holds duetime's tables (``check_existing``)."""
        check_existing(self.store)

    def _connect(self) -> Any:
        store = self.store
        if isinstance(store, SQLiteStore):
            uri = Path(store.path).resolve().as_uri() + "?mode=ro"
            db = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout = {int(store.busy_timeout * 1000)}")
            return db
        psycopg = psycopg_module()
        return psycopg.connect(
            store.dsn, autocommit=True, connect_timeout=max(1, round(store.connect_timeout))
        )

    def _errors(self) -> tuple[type[BaseException], ...]:
        if isinstance(self.store, SQLiteStore):
            return (sqlite3.Error,)
        return (psycopg_module().Error,)

    def _read(self, what: str, template: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one query (``template`` in the shared dialect)."""
        sql = self.store.statement(template)
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = self._connect()
                return list(self._conn.execute(sql, params).fetchall())
            except self._errors() as exc:
                self._drop()
                raise StoreError(self.where, f"{what} failed ({exc})", "") from exc

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        with self._lock:
            self._drop()

    def prepare(self) -> bool:
        """Add the index the jobs list filtered by state reads, if it is missing (one
        ``CREATE INDEX IF NOT EXISTS``: on a large table, once, a while). Returns whether it
        is there; a store that refuses (read-only) is logged and left as it is."""
        store = self.store
        try:
            if isinstance(store, SQLiteStore):
                with contextlib.closing(
                    sqlite3.connect(store.path, timeout=store.busy_timeout, isolation_level=None)
                ) as db:
                    db.execute(_STATE_INDEX_SQLITE)
                return True
            with psycopg_module().connect(
                store.dsn, autocommit=True, connect_timeout=max(1, round(store.connect_timeout))
            ) as conn:
                conn.execute(store.statement(_STATE_INDEX_PG))
            return True
        except Exception as exc:  # (a read-only file or role: the list works, slower)
            logger.warning("could not add the jobs (state, id) index to %s: %s", self.where, exc)
            return False

    # -- jobs -------------------------------------------------------------------------------------

    def jobs(self, state: str | None = None, after: str = "", limit: int = 50) -> list[JobView]:
        """Up to ``limit`` jobs in id order whose id sorts after ``after`` (a keyset page:
        pass the last id of a page for the next), only those in ``state`` if given."""
        if state is None:
            rows = self._read("listing jobs", _JOBS_PAGE, (after, limit))
        else:
            rows = self._read("listing jobs", _JOBS_PAGE_IN_STATE, (state, after, limit))
        return [_job_view(row) for row in rows]

    def job(self, id: str) -> JobView | None:
        """One job, or None."""
        rows = self._read("reading a job", _JOB, (id,))
        return _job_view(rows[0]) if rows else None

    def job_counts(self) -> dict[str, int]:
        """How many jobs are in each state (a count over the whole table)."""
        return {state: int(n) for state, n in self._read("counting jobs", _JOBS_BY_STATE)}

    def last_runs(self, ids: Sequence[str]) -> dict[str, RunView]:
        """The latest run (by due time) of each of ``ids`` that has one."""
        if not ids:
            return {}
        template = _LAST_RUNS.replace("{marks}", ", ".join("?" * len(ids)))
        found: dict[str, RunView] = {}
        for row in self._read("reading the last runs", template, list(ids)):
            run = _run_view(row)
            old = found.get(run.job_id)
            if old is None or run.key > old.key:
                found[run.job_id] = run
        return found

    # -- runs -------------------------------------------------------------------------------------

    def runs(
        self,
        job_id: str | None = None,
        state: str | None = None,
        before: tuple[int, str] | None = None,
        limit: int = 50,
    ) -> list[RunView]:
        """Up to ``limit`` run records, newest due first; ``before``: only those after this
        ``(due, key)`` in that order (the last of a page, for the next)."""
        where: list[str] = []
        params: list[Any] = []
        if job_id is not None:
            where.append("job_id = ?")
            params.append(job_id)
        if state is not None:
            where.append("state = ?")
            params.append(state)
        if before is not None:
            where.append("(due < ? OR (due = ? AND key < ?))")
            params += [before[0], before[0], before[1]]
        template = _RUNS_PAGE.replace("{where}", " WHERE " + " AND ".join(where) if where else "")
        params.append(limit)
        return [_run_view(row) for row in self._read("listing runs", template, params)]

    def run_counts(self) -> dict[str, int]:
        """How many run records are in each state (those kept: see the store's retention)."""
        return {state: int(n) for state, n in self._read("counting runs", _RUNS_BY_STATE)}

    def runs_per_hour(self, since: int) -> dict[tuple[int, str], int]:
        """Runs finished since ``since`` (UTC ns), by ``(hour since the epoch, state)``."""
        rows = self._read("counting runs per hour", _RUNS_PER_HOUR, (since,))
        return {(int(hour), state): int(n) for hour, state, n in rows}

    def histogram(self, what: str, bounds: Sequence[int]) -> Histogram:
        """The finished runs' ``"duration"`` (finished - started) or ``"lateness"`` (started -
        due) against ``bounds`` (nanoseconds, ascending)."""
        expr = {"duration": "finished - started", "lateness": "started - due"}[what]
        row = self._read(f"measuring run {what}", _histogram_sql(expr, len(bounds)), bounds)[0]
        counts = tuple(int(n or 0) for n in row[: len(bounds)])
        return Histogram(tuple(bounds), counts, int(row[-2] or 0), int(row[-1] or 0))

    # -- dead letters and workers -----------------------------------------------------------------

    def dead(self, limit: int = 500) -> list[DeadView]:
        """Dead letters, the latest failure first."""
        return [self._dead(row) for row in self._read("listing dead letters", _DEAD, (limit,))]

    def dead_one(self, id: str) -> DeadView | None:
        """One dead letter, or None."""
        rows = self._read("reading a dead letter", _DEAD_ONE, (id,))
        return self._dead(rows[0]) if rows else None

    @staticmethod
    def _dead(row: Sequence[Any]) -> DeadView:
        id, job, error, tb, attempts, due, failed_at = row
        try:
            record = load_json(job, "job")
            name, task = record.get("name"), str(record.get("task", ""))
        except (ValueError, AttributeError):
            name, task = None, ""
        return DeadView(
            _text(id),
            _opt_text(name),
            task,
            _text(error),
            _text(tb),
            _count(attempts),
            _ns(due) or 0,
            _ns(failed_at) or 0,
        )

    def dead_count(self) -> int:
        """How many dead letters there are."""
        return int(self._read("counting dead letters", _DEAD_COUNT)[0][0])

    def workers(self, now: int, limit: int = 500) -> list[WorkerView]:
        """The processes that announced themselves (live or lapsed less than a day ago), with
        the live leases (at ``now``, UTC ns) each holds."""
        leases = {w: int(n) for w, n in self._read("counting leases", _LEASES, (now,))}
        found = []
        for worker, tasks, until in self._read("listing workers", _WORKERS, (limit,)):
            try:
                record = load_json(tasks, "tasks")
                names = tuple(str(n) for n in record.get("names", ()))
                said = _ns(record.get("at"))
            except (ValueError, AttributeError, TypeError):
                names, said = (), None
            host = worker.rsplit(":", 2)[0] if worker.count(":") >= 2 else worker
            found.append(
                WorkerView(
                    worker, host, names, _ns(until) or 0, leases.get(worker, 0), heartbeat=said
                )
            )
        return found

    def live_workers(self, now: int) -> int:
        """How many processes' announcements last past ``now`` (UTC ns)."""
        return int(self._read("counting workers", _LIVE_WORKERS, (now,))[0][0])
