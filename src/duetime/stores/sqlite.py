"""``SQLiteStore``: jobs in a SQLite file, surviving restarts, shared by processes on one host.

The store is a ``MemoryStore`` (the Scheduler's timer queues and indexes stay in memory, as fast
as ever) that writes every change through to the file and asks the file before a run starts:

* **A row per job** (``duetime_jobs``), rewritten whole by each change, stamped with a store-wide
  change counter ``rev``. Other processes find what changed since they last looked with one
  indexed query, after ``PRAGMA data_version`` (free) says anything did.
* **A record per fire** (``duetime_runs``), keyed by its fire key: a run starts only if this
  process inserts that key (or takes it over from ``queued``, ``failed`` or an expired lease) in
  the same ``BEGIN IMMEDIATE`` transaction that moves the job's row on, guarded by the due time it
  moves from (``UPDATE .. WHERE next_base = ?``). Two processes that pop the same fire: one wins,
  the other's claim changes nothing and it re-reads the row.
* **Leases.** A claimed run holds a lease (``lease`` seconds of the scheduler's clock) that its
  worker renews while the run goes on; a run whose lease ran out is taken over by the next
  worker that looks, with its attempt raised. A completion is written only while the worker
  still holds the run (``WHERE worker = ? AND attempt = ?``): a stalled worker's late
  completion is refused.

WAL mode lets readers go on while one process writes; ``busy_timeout`` makes writers queue for the
lock rather than fail. Every failure of the file becomes a ``StoreError`` that names it and says
what to do; a transaction either commits whole or not at all.

The Scheduler calls these methods with its lock held; the connection is used by one thread at a
time through that lock.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

from duetime._validate import NS_PER_SECOND, duration_ns, ns_to_datetime
from duetime.errors import ConflictingIdError, InvalidArgument, StoreError
from duetime.stores.memory import MemoryStore
from duetime.stores.records import ENDED_STATES, JobRow, RunRecord

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

#: The version of the tables this code reads and writes; a file with a newer one is refused.
SCHEMA_VERSION = 1

_UTC = timezone.utc

_SCHEMA = """
CREATE TABLE IF NOT EXISTS duetime_meta (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS duetime_jobs (
    id TEXT PRIMARY KEY,
    rev INTEGER NOT NULL,
    name TEXT,
    task TEXT NOT NULL,
    args TEXT NOT NULL,
    trigger TEXT NOT NULL,
    retry TEXT,
    options TEXT NOT NULL,
    priority INTEGER NOT NULL,
    state TEXT NOT NULL,
    next_base INTEGER,
    next_due INTEGER,
    sides TEXT,
    catchup INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    runs INTEGER NOT NULL,
    failures INTEGER NOT NULL,
    last_error TEXT,
    updated INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS duetime_jobs_rev ON duetime_jobs (rev);
CREATE TABLE IF NOT EXISTS duetime_runs (
    key TEXT PRIMARY KEY,
    job_id TEXT NOT NULL,
    due INTEGER NOT NULL,
    state TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    worker TEXT,
    lease_until INTEGER,
    started INTEGER,
    finished INTEGER,
    error TEXT
);
CREATE INDEX IF NOT EXISTS duetime_runs_state ON duetime_runs (state, lease_until);
CREATE INDEX IF NOT EXISTS duetime_runs_job ON duetime_runs (job_id, due);
CREATE INDEX IF NOT EXISTS duetime_runs_finished ON duetime_runs (finished);
CREATE TABLE IF NOT EXISTS duetime_dead (
    id TEXT PRIMARY KEY,
    job TEXT NOT NULL,
    error TEXT NOT NULL,
    traceback TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    due INTEGER NOT NULL,
    failed_at INTEGER NOT NULL
);
"""

_JOB_COLUMNS = (
    "id, rev, name, task, args, trigger, retry, options, priority, state, next_base, next_due, "
    "sides, catchup, attempt, runs, failures, last_error"
)

# The columns in JobRow's field order, for reading.
_READ_COLUMNS = (
    "id, name, task, args, trigger, retry, options, priority, state, next_base, next_due, "
    "sides, catchup, attempt, runs, failures, last_error, rev"
)

_UPSERT_JOB = (
    f"INSERT INTO duetime_jobs ({_JOB_COLUMNS}, updated) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET rev = excluded.rev, name = excluded.name, "
    "task = excluded.task, args = excluded.args, trigger = excluded.trigger, "
    "retry = excluded.retry, options = excluded.options, priority = excluded.priority, "
    "state = excluded.state, next_base = excluded.next_base, next_due = excluded.next_due, "
    "sides = excluded.sides, catchup = excluded.catchup, attempt = excluded.attempt, "
    "runs = excluded.runs, failures = excluded.failures, last_error = excluded.last_error, "
    "updated = excluded.updated"
)

# The guarded form: moves the row on only from the fire being claimed.
_ADVANCE_JOB = (
    "UPDATE duetime_jobs SET rev = ?, name = ?, task = ?, args = ?, trigger = ?, retry = ?, "
    "options = ?, priority = ?, state = ?, next_base = ?, next_due = ?, sides = ?, catchup = ?, "
    "attempt = ?, runs = ?, failures = ?, last_error = ?, updated = ? "
    "WHERE id = ? AND next_base = ? AND state IN ('scheduled', 'running')"
)

# A fire starts if its key is new, or was enqueued by backfill and not taken yet.
_CLAIM_KEY = (
    "INSERT INTO duetime_runs (key, job_id, due, state, attempt, worker, lease_until, started) "
    "VALUES (?, ?, ?, 'running', ?, ?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET state = 'running', attempt = excluded.attempt, "
    "worker = excluded.worker, lease_until = excluded.lease_until, started = excluded.started "
    "WHERE duetime_runs.state = 'queued' RETURNING key"
)

_CLAIM_RETRY = (
    "UPDATE duetime_runs SET state = 'running', attempt = ?, worker = ?, lease_until = ?, "
    "started = ?, finished = NULL WHERE key = ? AND state = 'failed' AND attempt = ?"
)


def _job_values(row: JobRow, rev: int, now: int) -> tuple[Any, ...]:
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


def _row(values: Sequence[Any]) -> JobRow:
    """A row read with ``_READ_COLUMNS``."""
    row = JobRow(*values)
    row.catchup = bool(row.catchup)
    return row


def _dt(ns: int | None) -> Any:
    return None if ns is None else ns_to_datetime(ns, _UTC)


class SQLiteStore(MemoryStore):
    """Jobs in a SQLite file: they survive restarts, and processes on one host can share it.

    Args:
        path: The database file (created with its tables if missing), or ``":memory:"`` for a
            private in-memory database (for tests; nothing survives).
        busy_timeout: Seconds a change waits for another process's write lock before it fails
            with ``StoreError``. Default 5 seconds.
        poll_interval: Seconds between looks at the file for other processes' changes, expired
            leases and heartbeats, while the runner thread runs. Default 0.5 seconds.
        retention: How long finished runs, and rows of ended jobs, are kept (seconds or a
            timedelta). Default 7 days.

    A store belongs to one Scheduler; open one per Scheduler (several may name one file).
    """

    durable = True

    __slots__ = (
        "_batch",
        "_db",
        "_known_queued",
        "_mine",
        "_pending",
        "_pending_now",
        "_seen",
        "_version",
        "busy_timeout",
        "path",
        "poll_ns",
        "retention_ns",
        "worker",
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float | int = 5.0,
        poll_interval: float | int | timedelta = 0.5,
        retention: float | int | timedelta = timedelta(days=7),
    ) -> None:
        super().__init__()
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {path!r}")
        self.path = os.fspath(path)
        if not self.path:
            raise InvalidArgument("path must not be empty (use ':memory:' for no file)")
        self.busy_timeout = duration_ns("busy_timeout", busy_timeout) / NS_PER_SECOND
        self.poll_ns = duration_ns("poll_interval", poll_interval, allow_zero=False)
        self.retention_ns = duration_ns("retention", retention)
        self._db: sqlite3.Connection | None = None
        self.worker = ""
        self._seen = 0  # the highest rev this process has read
        self._version = -1  # PRAGMA data_version when last looked
        self._mine: dict[str, int] = {}  # job id -> the rev this process last wrote
        self._batch = 0  # depth of open batch() blocks
        self._pending: list[JobRow] = []  # new jobs' rows a batch writes at its end
        self._pending_now = 0
        self._known_queued: set[str] = set()  # queued run keys this process has taken in

    def __repr__(self) -> str:
        return f"<SQLiteStore {self.path!r} jobs={self.count()}>"

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        """A store for ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``."""
        prefix = "sqlite:///"
        if not url.startswith(prefix) or len(url) == len(prefix):
            raise InvalidArgument(
                f"store must look like 'sqlite:///jobs.db' (relative) or "
                f"'sqlite:////var/lib/app/jobs.db' (absolute), got {url!r}"
            )
        return cls(url[len(prefix) :])

    # -- errors -----------------------------------------------------------------------------------

    def _fail(self, what: str, exc: sqlite3.Error) -> StoreError:
        text = str(exc)
        low = text.lower()
        if "locked" in low or "busy" in low:
            advice = (
                f"another process held the file's write lock for longer than busy_timeout="
                f"{self.busy_timeout:g} seconds; raise busy_timeout or find that process"
            )
        elif "readonly" in low or "read-only" in low:
            advice = (
                "the file or its directory is read-only; duetime must write the file and its "
                "-wal and -shm files beside it"
            )
        elif "not a database" in low or "malformed" in low or "corrupt" in low:
            advice = (
                "the file is corrupt or not a SQLite database; move it aside and restore it "
                "from a backup (or start with an empty file)"
            )
        elif "unable to open" in low:
            advice = "check that the directory exists and is writable"
        else:
            advice = ""
        return StoreError(repr(self.path), f"{what} failed ({text})", advice)

    @contextlib.contextmanager
    def _tx(self, what: str) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction (or the open batch's), all or nothing."""
        db = self._db
        if db is None:
            raise StoreError(repr(self.path), "the store is closed", "its scheduler was shut down")
        if self._batch:
            yield db
            return
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._fail(what, exc) from exc
        try:
            yield db
            db.execute("COMMIT")
        except BaseException as exc:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise self._fail(what, exc) from exc
            raise

    def _rev(self, db: sqlite3.Connection) -> int:
        cur = db.execute(
            "UPDATE duetime_meta SET value = value + 1 WHERE key = 'rev' RETURNING value"
        )
        rev: int = cur.fetchone()[0]
        return rev

    def _read(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        db = self._db
        if db is None:
            raise StoreError(repr(self.path), "the store is closed", "its scheduler was shut down")
        try:
            return db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._fail(what, exc) from exc

    # -- opening ----------------------------------------------------------------------------------

    def open(self, worker: str) -> None:
        """Open the file, create or check its tables. Called once, by the Scheduler."""
        self.worker = worker
        if self.path != ":memory:":
            parent = Path(self.path).parent
            if not parent.is_dir():
                raise StoreError(
                    repr(self.path),
                    f"the directory {str(parent)!r} does not exist",
                    "create it first",
                )
        try:
            db = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise self._fail("opening", exc) from exc
        self._db = db
        try:
            try:
                db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
                mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                db.execute("PRAGMA synchronous = NORMAL")
            except sqlite3.Error as exc:
                raise self._fail("opening", exc) from exc
            if self.path != ":memory:" and str(mode).lower() != "wal":
                raise StoreError(
                    repr(self.path),
                    f"could not switch the file to WAL mode (it is in {mode!r} mode)",
                    "make sure no other program holds it open in another mode",
                )
            self._create()
        except BaseException:
            self.close()
            raise

    def _create(self) -> None:
        db = self._db
        assert db is not None
        try:
            found = db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'duetime_meta'"
            ).fetchone()
            if found is not None:
                row = db.execute("SELECT value FROM duetime_meta WHERE key = 'schema'").fetchone()
                version = None if row is None else row[0]
                if version != SCHEMA_VERSION:
                    if isinstance(version, int) and version > SCHEMA_VERSION:
                        raise StoreError(
                            repr(self.path),
                            f"its schema version is {version}, newer than this duetime "
                            f"understands ({SCHEMA_VERSION})",
                            "upgrade duetime in this program (a file is never downgraded)",
                        )
                    raise StoreError(
                        repr(self.path),
                        f"its schema version is {version!r}, which this duetime cannot read",
                        "move the file aside or open it with the duetime that wrote it",
                    )
                return
            db.execute("BEGIN IMMEDIATE")
            try:
                # (executescript would commit first: one statement at a time keeps it atomic.)
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(
                    "INSERT OR IGNORE INTO duetime_meta (key, value) VALUES ('schema', ?), "
                    "('rev', 0)",
                    (SCHEMA_VERSION,),
                )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise self._fail("creating the tables", exc) from exc

    def close(self) -> None:
        """Close the connection (the Scheduler's shutdown does)."""
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()

    @property
    def is_open(self) -> bool:
        """Whether the connection is open."""
        return self._db is not None

    # -- reading jobs -----------------------------------------------------------------------------

    def load_rows(self) -> list[JobRow]:
        """Every live job's row (what opening a store loads)."""
        rows = self._read(
            "loading jobs",
            f"SELECT {_READ_COLUMNS} FROM duetime_jobs WHERE state NOT IN (?, ?, ?)",
            ENDED_STATES,
        )
        found = [_row(r) for r in rows]
        top = self._read("loading jobs", "SELECT value FROM duetime_meta WHERE key = 'rev'")
        self._seen = top[0][0] if top else 0
        self._version = self._data_version()
        return found

    def load_row(self, id: str) -> JobRow | None:
        """Job ``id``'s row as the file has it now, or None."""
        rows = self._read(
            "reading a job", f"SELECT {_READ_COLUMNS} FROM duetime_jobs WHERE id = ?", (id,)
        )
        return _row(rows[0]) if rows else None

    def _data_version(self) -> int:
        rows = self._read("polling", "PRAGMA data_version")
        version: int = rows[0][0]
        return version

    def changed_rows(self) -> list[JobRow] | None:
        """Rows other processes have written since this one last looked, or None if the file
        has not changed (one cheap ``PRAGMA data_version``)."""
        version = self._data_version()
        if version == self._version:
            return None
        self._version = version
        rows = self._read(
            "polling",
            f"SELECT {_READ_COLUMNS} FROM duetime_jobs WHERE rev > ? ORDER BY rev",
            (self._seen,),
        )
        changed = []
        for values in rows:
            row = _row(values)
            self._seen = max(self._seen, row.rev)
            if self._mine.get(row.id) != row.rev:
                changed.append(row)
        return changed

    # -- writing jobs -----------------------------------------------------------------------------

    def write(self, rows: Sequence[JobRow], now: int) -> None:
        """Write whole rows (a new job, or any change), in one transaction."""
        with self._tx("saving jobs") as db:
            rev = self._rev(db)
            db.executemany(_UPSERT_JOB, [_job_values(row, rev, now) for row in rows])
        for row in rows:
            row.rev = rev
            self._mine[row.id] = rev

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
            ids = [row.id for row in rows]
            taken: list[str] = []
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                taken += [
                    r[0]
                    for r in db.execute(
                        f"SELECT id FROM duetime_jobs WHERE id IN ({marks}) "
                        f"AND state NOT IN (?, ?, ?)",
                        (*chunk, *ENDED_STATES),
                    )
                ]
            if taken:
                return taken
            rev = self._rev(db)
            db.executemany(_UPSERT_JOB, [_job_values(row, rev, now) for row in rows])
        for row in rows:
            row.rev = rev
            self._mine[row.id] = rev
        return []

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Make every change inside the block one transaction (committed at its end, rolled
        back if it raises)."""
        if self._batch:
            self._batch += 1
            try:
                yield
            finally:
                self._batch -= 1
            return
        with self._tx("a batch of changes"):
            self._batch = 1
            try:
                yield
                pending, self._pending = self._pending, []
                if pending:
                    taken = self._insert_now(pending, self._pending_now)
                    if taken:
                        raise ConflictingIdError(taken[0])
            finally:
                self._batch = 0
                self._pending = []

    # -- runs -------------------------------------------------------------------------------------

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
    ) -> str:
        """Try to start fire ``key`` (attempt ``attempt``) here, and write ``row``.

        ``guard``: the regular due time being claimed; the row is written only if the file's
        row is still due then. Returns ``"won"``, ``"lost"`` (another process moved the job on
        or holds the run; nothing was written) or ``"done"`` (the row moved on but the fire's
        key had run or is running already: skip it).
        """
        # Ordered so that whatever decides "lost" comes first and nothing needs undoing: the
        # guarded row update for a regular fire, the run's claim for a side occurrence.
        with self._tx("claiming a run") as db:
            rev = self._rev(db)
            if row is not None and guard is not None:
                values = _job_values(row, rev, now)
                cur = db.execute(_ADVANCE_JOB, (*values[1:], row.id, guard))
                if cur.rowcount == 0:
                    return "lost"
            if attempt > 1:
                cur = db.execute(
                    _CLAIM_RETRY, (attempt, self.worker, now + lease_ns, now, key, attempt - 1)
                )
                won = cur.rowcount == 1
            else:
                won = (
                    db.execute(
                        _CLAIM_KEY, (key, job_id, due, attempt, self.worker, now + lease_ns, now)
                    ).fetchone()
                    is not None
                )
            if not won and guard is None:
                return "lost"
            if row is not None and guard is None:
                db.execute(_UPSERT_JOB, _job_values(row, rev, now))
        if row is not None:
            row.rev = rev
            self._mine[row.id] = rev
        return "won" if won else "done"

    def take_over(
        self, key: str, old_worker: str | None, attempt: int, now: int, lease_ns: int
    ) -> bool:
        """Take an expired run from its worker, raising its attempt. Returns whether this
        process now holds it."""
        with self._tx("taking over a run") as db:
            cur = db.execute(
                "UPDATE duetime_runs SET worker = ?, attempt = ?, lease_until = ?, started = ? "
                "WHERE key = ? AND state = 'running' AND worker IS ? AND attempt = ? "
                "AND lease_until < ?",
                (self.worker, attempt + 1, now + lease_ns, now, key, old_worker, attempt, now),
            )
            return cur.rowcount == 1

    def mark_lost(self, key: str, now: int) -> None:
        """Record that an expired run's job has ended, so nobody will run it again."""
        with self._tx("recording a lost run") as db:
            db.execute(
                "UPDATE duetime_runs SET state = 'lost', finished = ?, lease_until = NULL "
                "WHERE key = ? AND state = 'running'",
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
        final = state != "failed"
        with self._tx("recording a run's outcome") as db:
            cur = db.execute(
                "UPDATE duetime_runs SET state = ?, finished = ?, error = ?, lease_until = NULL "
                "WHERE key = ? AND worker = ? AND attempt = ? AND state = 'running'",
                (state, now if final else None, error, key, self.worker, attempt),
            )
            if cur.rowcount == 0:
                return False
            if row is not None:
                rev = self._rev(db)
                db.execute(_UPSERT_JOB, _job_values(row, rev, now))
        if row is not None:
            row.rev = rev
            self._mine[row.id] = rev
        return True

    def heartbeat(self, now: int, lease_ns: int) -> None:
        """Renew the leases of every run this process holds."""
        with self._tx("renewing leases") as db:
            db.execute(
                "UPDATE duetime_runs SET lease_until = ? WHERE worker = ? AND state = 'running'",
                (now + lease_ns, self.worker),
            )

    def expired(self, now: int) -> list[tuple[str, str, int, int, str | None]]:
        """Runs whose lease ran out: ``(key, job id, due, attempt, worker)``, oldest first."""
        return [
            tuple(r)
            for r in self._read(
                "looking for lost runs",
                "SELECT key, job_id, due, attempt, worker FROM duetime_runs "
                "WHERE state = 'running' AND lease_until < ? ORDER BY due LIMIT 1000",
                (now,),
            )
        ]

    def queued_runs(self) -> list[tuple[str, str, int]]:
        """Fires enqueued by ``backfill`` not taken in by this process yet: ``(key, job id,
        due)``."""
        rows = self._read(
            "reading queued runs",
            "SELECT key, job_id, due FROM duetime_runs WHERE state = 'queued' ORDER BY due",
        )
        found = [(k, j, d) for k, j, d in rows if k not in self._known_queued]
        self._known_queued.update(k for k, _, _ in found)
        return found

    def enqueue(self, job_id: str, fires: Sequence[tuple[str, int]]) -> list[str]:
        """Record fires ``(key, due)`` of a job as queued, skipping keys recorded already.
        Returns the keys recorded now."""
        with self._tx("enqueueing fires") as db:
            new = []
            for key, due in fires:
                cur = db.execute(
                    "INSERT OR IGNORE INTO duetime_runs (key, job_id, due, state, attempt) "
                    "VALUES (?, ?, ?, 'queued', 1)",
                    (key, job_id, due),
                )
                if cur.rowcount == 1:
                    new.append(key)
        self._known_queued.update(new)
        return new

    def runs(self, job_id: str | None, state: str | None, limit: int) -> list[RunRecord]:
        """Run records, newest due first."""
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
            "FROM duetime_runs"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY due DESC, key DESC LIMIT ?"
        )
        params.append(limit)
        return [
            RunRecord(k, j, _dt(d), _dt(s), _dt(f), st, a, w, e)
            for k, j, d, s, f, st, a, w, e in self._read("listing runs", sql, params)
        ]

    def purge(self, now: int) -> int:
        """Delete finished runs and ended jobs' rows older than ``retention``. Returns how many
        rows went."""
        cutoff = now - self.retention_ns
        with self._tx("deleting old runs") as db:
            gone = db.execute(
                "DELETE FROM duetime_runs WHERE finished < ? "
                "AND state IN ('succeeded', 'dead', 'lost')",
                (cutoff,),
            ).rowcount
            gone += db.execute(
                "DELETE FROM duetime_jobs WHERE updated < ? AND state IN (?, ?, ?)",
                (cutoff, *ENDED_STATES),
            ).rowcount
        return gone

    # -- dead letters -----------------------------------------------------------------------------

    def save_dead(
        self, id: str, job: str, error: str, traceback: str, attempts: int, due: int, now: int
    ) -> None:
        """Keep a dead letter in the file (``job`` is the job's row as JSON)."""
        with self._tx("saving a dead letter") as db:
            db.execute(
                "INSERT OR REPLACE INTO duetime_dead (id, job, error, traceback, attempts, due, "
                "failed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (id, job, error, traceback, attempts, due, now),
            )

    def load_dead(self) -> list[tuple[str, str, str, str, int, int, int]]:
        """Every dead letter: ``(id, job JSON, error, traceback, attempts, due, failed_at)``."""
        return [
            tuple(r)
            for r in self._read(
                "loading dead letters",
                "SELECT id, job, error, traceback, attempts, due, failed_at FROM duetime_dead "
                "ORDER BY failed_at",
            )
        ]

    def take_dead(self, id: str) -> Any | None:
        """Remove and return a dead letter (from memory and the file), or None."""
        found = super().take_dead(id)
        if self._db is not None:
            with self._tx("removing a dead letter") as db:
                db.execute("DELETE FROM duetime_dead WHERE id = ?", (id,))
        return found
