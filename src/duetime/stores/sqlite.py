"""``SQLiteStore``: jobs in a SQLite file, surviving restarts, shared by processes on one host.

The store is a ``MemoryStore`` (the Scheduler's timer queues and indexes stay in memory, as fast
as ever) that writes every change through to the file and asks the file before a run starts;
the rules (a row per job, a record per fire, leases, fenced outcomes) are ``SQLStore``'s, shared
with PostgreSQL (``duetime.stores._sql``). What is SQLite's own:

* The change counter ``rev`` is a row of ``duetime_meta`` bumped in each writing transaction
  (writers are serialized by the file's lock anyway). Other processes find what changed since
  they last looked with one indexed query, after ``PRAGMA data_version`` (free) says anything
  did.
* Every write is a ``BEGIN IMMEDIATE`` transaction: it takes the file's write lock first, so a
  claim's guarded ``UPDATE .. WHERE next_base = ?`` cannot race another process's.

WAL mode lets readers go on while one process writes; ``busy_timeout`` makes writers queue for the
lock rather than fail. Every failure of the file becomes a ``StoreError`` that names it and says
what to do; a transaction either commits whole or not at all.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from duetime._validate import NS_PER_SECOND, duration_ns, lower_scheme
from duetime.errors import InvalidArgument, StoreError
from duetime.stores._sql import READ_COLUMNS, SQLStore, read_row
from duetime.stores.base import ClaimAnswer, ClaimAsk, SettleAsk
from duetime.stores.records import ENDED_STATES, Changes, JobRow

__all__ = ["SCHEMA_VERSION", "SQLiteStore"]

#: The version of the tables this code reads and writes; a file with a newer one is refused.
SCHEMA_VERSION = 1

# Whether a file holds duetime's tables (a row if it does): the schema check on opening, and the
# command line's look before it opens a store.
_HAS_META = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'duetime_meta'"

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
CREATE TABLE IF NOT EXISTS duetime_workers (
    worker TEXT PRIMARY KEY,
    tasks TEXT NOT NULL,
    until INTEGER NOT NULL
);
"""


class SQLiteStore(SQLStore):
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

    A store belongs to one Scheduler; open one per Scheduler (several may name one file). Once
    its Scheduler has shut down, a new one may take it (a restart on the same object).
    """

    __slots__ = (
        "_db",
        "_group",
        "_group_rev",
        "_opened",
        "_seen",
        "_version",
        "busy_timeout",
        "path",
    )

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float | int = 5.0,
        poll_interval: float | int | timedelta = 0.5,
        retention: float | int | timedelta = timedelta(days=7),
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {path!r}")
        super().__init__("duetime_", retention)
        self.path = os.fspath(path)
        if not self.path:
            raise InvalidArgument("path must not be empty (use ':memory:' for no file)")
        if "\x00" in self.path:
            raise InvalidArgument(f"path must not contain a NUL character, got {self.path!r}")
        if os.path.isdir(self.path):
            raise InvalidArgument(f"path must name a file, got the directory {self.path!r}")
        self.busy_timeout = duration_ns("busy_timeout", busy_timeout) / NS_PER_SECOND
        self.poll_ns = duration_ns("poll_interval", poll_interval, allow_zero=False)
        self._db: sqlite3.Connection | None = None
        self._opened: str | None = None  # the path as opened (absolute: a chdir may follow)
        self._seen = 0  # the highest rev this process has read
        self._version = -1  # PRAGMA data_version when last looked
        # While a group of claims and outcomes is one transaction (_grouped): the ids of the
        # jobs it wrote, else None.
        self._group: set[str] | None = None
        self._group_rev = 0  # the change counter a group's writes share (0: no group)

    def __repr__(self) -> str:
        return f"<SQLiteStore {self.path!r} jobs={self.count()}>"

    @property
    def _where(self) -> str:
        return repr(self.path)

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        """A store for ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``
        (percent-escapes decoded; no query parameters)."""
        prefix = "sqlite:///"
        url = lower_scheme(url)
        if not url.startswith(prefix) or len(url) == len(prefix):
            raise InvalidArgument(
                f"store must look like 'sqlite:///jobs.db' (relative) or "
                f"'sqlite:////var/lib/app/jobs.db' (absolute), got {url!r}"
            )
        path, mark, _ = url[len(prefix) :].partition("?")
        if mark:
            raise InvalidArgument(
                f"store URL 'sqlite:///...' takes no query parameters, got {url!r} (pass "
                f"options to SQLiteStore(path, busy_timeout=..., poll_interval=...))"
            )
        # (Percent-escapes are decoded, as in any URL: 'my%20jobs.db' is 'my jobs.db'.)
        return cls(unquote(path))

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
        if self._group is not None:
            # One item of a group: a savepoint, so that an item that fails takes back its own
            # changes only, as its own transaction would have.
            try:
                db.execute("SAVEPOINT item")
                yield db
                db.execute("RELEASE item")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK TO item")
                    db.execute("RELEASE item")
                if isinstance(exc, sqlite3.Error):
                    raise self._fail(what, exc) from exc
                raise
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

    @contextlib.contextmanager
    def _grouped(self, what: str) -> Iterator[None]:
        """Make the claims and outcomes written inside one ``BEGIN IMMEDIATE`` transaction (each
        a savepoint): one commit for a runner's batch instead of one per run, as PostgreSQL's
        one statement. If the transaction cannot begin or commit, nothing of it is stored, and
        what this process noted of it (leases held, rows written) is taken back.

        Raises:
            StoreError: The transaction failed as a whole (locked, read-only, I/O).
        """
        db = self._db
        if db is None or self._batch or self._group is not None:
            yield  # (closed: each item says so; in a batch or group: part of it already)
            return
        held, known = set(self._held), set(self._known_queued)
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._fail(what, exc) from exc
        written: set[str] = set()
        try:
            # (Taken before any item's savepoint: an item rolled back leaves it standing.)
            self._group_rev = self._rev(db)
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        self._group = written
        try:
            yield
            db.execute("COMMIT")
        except BaseException as exc:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            self._held, self._known_queued = held, known
            for id in written:
                self._mine.pop(id, None)  # (read back at the next poll)
            if isinstance(exc, sqlite3.Error):
                raise self._fail(what, exc) from exc
            raise
        finally:
            self._group = None
            self._group_rev = 0

    def _wrote(self, rows: Sequence[JobRow], rev: int) -> None:
        super()._wrote(rows, rev)
        if self._group is not None:
            self._group.update(row.id for row in rows)

    def settle_and_claim(
        self, outcomes: Sequence[SettleAsk], asks: Sequence[ClaimAsk]
    ) -> tuple[list[bool | StoreError], list[ClaimAnswer]]:
        """``SQLStore.settle_and_claim`` in one transaction (``_grouped``); if that fails as a
        whole, every outcome and claim answers its error (the outcomes are owed, the claims
        tried again), as when each failed alone."""
        # (SQLStore's one by one: this class's own settle_many and claim_many come here.)
        if len(outcomes) + len(asks) < 2:
            return SQLStore.settle_many(self, outcomes), SQLStore.claim_many(self, asks)
        try:
            with self._grouped("writing outcomes and claiming"):
                return SQLStore.settle_many(self, outcomes), SQLStore.claim_many(self, asks)
        except StoreError as exc:
            return [exc] * len(outcomes), [exc] * len(asks)

    def settle_many(self, outcomes: Sequence[SettleAsk]) -> list[bool | StoreError]:
        """``SQLStore.settle_many`` in one transaction (see ``settle_and_claim``)."""
        return self.settle_and_claim(outcomes, ())[0]

    def claim_many(self, asks: Sequence[ClaimAsk]) -> list[ClaimAnswer]:
        """``SQLStore.claim_many`` in one transaction (see ``settle_and_claim``)."""
        return self.settle_and_claim((), asks)[1]

    def _rev(self, db: sqlite3.Connection) -> int:
        if self._group_rev:
            return self._group_rev  # (one change counter for a group's writes, as a batch's)
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
        self._opened = os.path.abspath(self.path) if self.path != ":memory:" else None
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

    def created(self) -> bool:
        """Whether the file holds duetime's tables, looked at without creating them or the
        file (the command line asks before it opens a store: opening creates them). A file
        that SQLite cannot read answers True: opening it then says what is wrong."""
        try:
            uri = Path(self.path).resolve().as_uri() + "?mode=ro"
            with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
                found = db.execute(_HAS_META).fetchone()
        except sqlite3.Error:
            return True
        return found is not None

    def _create(self) -> None:
        db = self._db
        assert db is not None
        try:
            found = db.execute(_HAS_META).fetchone()
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
        self.retire()
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()

    @property
    def is_open(self) -> bool:
        """Whether the connection is open."""
        return self._db is not None

    @property
    def renewable(self) -> bool:
        """Whether a new Scheduler may take this store once its own has shut down and closed
        it (``SQLStore.renew``): not for a subclass, which ``_fresh`` cannot rebuild."""
        return type(self) is SQLiteStore

    def _fresh(self) -> SQLiteStore:
        fresh = SQLiteStore(self.path)
        fresh.busy_timeout, fresh.poll_ns = self.busy_timeout, self.poll_ns
        fresh.retention_ns = self.retention_ns
        return fresh

    def _read_closed(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """``SQLStore._read_closed``: the file opened read-only for the read."""
        if self.path == ":memory:":
            raise StoreError(repr(self.path), "the store is closed", "its scheduler was shut down")
        try:
            with contextlib.closing(
                sqlite3.connect(
                    Path(self._opened or self.path).resolve().as_uri() + "?mode=ro",
                    uri=True,
                    timeout=self.busy_timeout,
                    isolation_level=None,
                )
            ) as db:
                return db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._fail(what, exc) from exc

    # -- reading jobs -----------------------------------------------------------------------------

    def load_rows(self) -> list[JobRow]:
        """Every live job's row (what opening a store loads)."""
        found = super().load_rows()
        top = self._read("loading jobs", "SELECT value FROM duetime_meta WHERE key = 'rev'")
        self._seen = top[0][0] if top else 0
        self._version = self._data_version()
        return found

    def _data_version(self) -> int:
        rows = self._read("polling", "PRAGMA data_version")
        version: int = rows[0][0]
        return version

    def changed_rows(self) -> Changes | None:
        """What other processes have written since this one last looked (the live jobs' rows,
        the ended jobs' ids and states), or None if the file has not changed (one cheap
        ``PRAGMA data_version``)."""
        version = self._data_version()
        if version == self._version:
            return None
        self._version = version
        rows = self._read(
            "polling",
            f"SELECT {READ_COLUMNS} FROM duetime_jobs WHERE rev > ? ORDER BY rev",
            (self._seen,),
        )
        changed = []
        ended = []
        for values in rows:
            row = read_row(values)
            if type(row.rev) is not int:
                # (Text sorts above every number in SQLite: read again at every poll, and
                # reported once.)
                self.quarantine.add("jobs", row.id, f"column rev holds {row.rev!r}")
                continue
            self._seen = max(self._seen, row.rev)
            if self._mine.get(row.id) != row.rev:
                if row.state in ENDED_STATES:
                    ended.append((row.id, row.state))
                else:
                    changed.append(row)
        return Changes(changed, ended)
