"""``PostgresStore``: jobs in PostgreSQL, shared by many worker processes on many hosts.

The rules are ``SQLStore``'s (``duetime.stores._sql``), shared with SQLite: a row per job
rewritten whole by each change, a record per fire keyed by its fire key, claims that move the
job's row on from the due time they pop (so two processes that pop the same fire cannot both
run it), leases renewed by heartbeat, completions fenced by worker and attempt. What is
PostgreSQL's own:

* **Claims never wait for each other.** A claim first locks its job's row with ``FOR UPDATE SKIP
  LOCKED``: if another worker is claiming or changing that job at this moment, the claim
  answers "busy" at once (the Scheduler tries that fire again a moment later, by which time the
  other worker's change has arrived) instead of queueing behind it. Workers that pop the same
  fire therefore cost each other one round trip, never a lock wait, and no claim can deadlock.
* **Changes are found by transaction id, not by counter.** Writers take their ``rev`` from a
  sequence (no store-wide lock), so revs commit out of order and "rev > the last one seen" would
  miss a slow transaction. Each row carries the id of the transaction that wrote it (``xid``, set
  by a trigger); a poll reads the rows written by transactions at or after the oldest one that
  was still running at the previous poll (``pg_snapshot_xmin``), which cannot miss a commit;
  rows read twice are recognized by their rev.
* **Wake-ups by ``LISTEN/NOTIFY``.** A transaction that adds, changes, pauses, resumes,
  triggers or enqueues jobs notifies the channel ``duetime:<schema>``; every started Scheduler
  on the store listens on a connection of its own and reads the changes at once. A poll every
  ``poll_interval`` covers a lost notification (a dropped listening connection). Claims and
  outcomes do not notify: the other workers learn of them when they try the same fire (the
  claim's guard) or at their next poll, and a busy store stays free of notification traffic.
* **Connections come back.** A connection lost to a server restart or ``pg_terminate_backend``
  is reopened, with backoff, at the next use; the failed operation raises ``StoreError`` (the
  Scheduler logs it and tries again later). A claim whose commit was lost with the connection
  is never run here, and its run record is not renewed, so its lease runs out and some worker
  runs it: nothing is lost, nothing runs twice because of it.

psycopg 3 is imported when a store is opened, never by ``import duetime``
(``pip install "duetime[postgres]"``).
"""

from __future__ import annotations

import contextlib
import logging
import random
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from duetime._validate import NS_PER_SECOND, duration_ns
from duetime.clock import real_monotonic
from duetime.errors import InvalidArgument, StoreError
from duetime.stores._sql import (
    CLAIM_KEY_CONFLICT,
    READ_COLUMNS,
    SET_COLUMNS,
    SQLStore,
    job_values,
    read_row,
)
from duetime.stores.records import JobRow

if TYPE_CHECKING:
    import psycopg

__all__ = ["SCHEMA_VERSION", "PostgresStore"]

logger = logging.getLogger("duetime")

#: The version of the tables this code reads and writes; a schema with a newer one is refused.
SCHEMA_VERSION = 1

_INSTALL = 'install the PostgreSQL extra: pip install "duetime[postgres]"'

# {s} is the quoted schema name. Times are integer nanoseconds since the epoch, UTC (bigint).
_SCHEMA = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.meta (
    key text PRIMARY KEY,
    value bigint NOT NULL
);
CREATE SEQUENCE IF NOT EXISTS {s}.rev;
CREATE TABLE IF NOT EXISTS {s}.jobs (
    id text PRIMARY KEY,
    rev bigint NOT NULL,
    name text,
    task text NOT NULL,
    args text NOT NULL,
    trigger text NOT NULL,
    retry text,
    options text NOT NULL,
    priority integer NOT NULL,
    state text NOT NULL,
    next_base bigint,
    next_due bigint,
    sides text,
    catchup integer NOT NULL,
    attempt integer NOT NULL,
    runs integer NOT NULL,
    failures integer NOT NULL,
    last_error text,
    updated bigint NOT NULL,
    xid xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX IF NOT EXISTS jobs_xid ON {s}.jobs (xid);
CREATE INDEX IF NOT EXISTS jobs_state ON {s}.jobs (state);
CREATE OR REPLACE FUNCTION {s}.stamp_xid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.xid := pg_current_xact_id();
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS stamp_xid ON {s}.jobs;
CREATE TRIGGER stamp_xid BEFORE INSERT OR UPDATE ON {s}.jobs
    FOR EACH ROW EXECUTE FUNCTION {s}.stamp_xid();
CREATE TABLE IF NOT EXISTS {s}.runs (
    key text PRIMARY KEY,
    job_id text NOT NULL,
    due bigint NOT NULL,
    state text NOT NULL,
    attempt integer NOT NULL,
    worker text,
    lease_until bigint,
    started bigint,
    finished bigint,
    error text
);
CREATE INDEX IF NOT EXISTS runs_state ON {s}.runs (state, lease_until);
CREATE INDEX IF NOT EXISTS runs_job ON {s}.runs (job_id, due);
CREATE INDEX IF NOT EXISTS runs_finished ON {s}.runs (finished);
CREATE TABLE IF NOT EXISTS {s}.dead (
    id text PRIMARY KEY,
    job text NOT NULL,
    error text NOT NULL,
    traceback text NOT NULL,
    attempts integer NOT NULL,
    due bigint NOT NULL,
    failed_at bigint NOT NULL
)
"""

# A regular fire's claim in one statement (one round trip, its own transaction): lock the job's
# row unless another transaction holds it, move it on if it is still due at the guard, and
# record the fire key unless it ran already. Answers (locked, exists, rev, key): not locked but
# existing is "busy"; no rev is "lost"; a rev without a key is "done".
_CLAIM = (
    "WITH locked AS (SELECT id, next_base, state FROM {p}jobs WHERE id = ? "
    "FOR UPDATE SKIP LOCKED), "
    "upd AS (UPDATE {p}jobs j SET rev = nextval('{p}rev'), "
    + SET_COLUMNS
    + " FROM locked l WHERE j.id = l.id AND l.next_base = ? "
    "AND l.state IN ('scheduled', 'running') RETURNING j.rev), "
    "run AS (INSERT INTO {p}runs (key, job_id, due, state, attempt, worker, lease_until, started) "
    "SELECT ?::text, ?::text, ?::bigint, 'running', ?::integer, ?::text, ?::bigint, ?::bigint "
    "WHERE EXISTS (SELECT 1 FROM upd) " + CLAIM_KEY_CONFLICT + ") "
    "SELECT (SELECT count(*) FROM locked), (SELECT count(*) FROM {p}jobs WHERE id = ?), "
    "(SELECT rev FROM upd), (SELECT key FROM run)"
)

# An outcome and the job's row in one statement, fenced by worker and attempt. Answers
# (recorded, rev).
_SETTLE = (
    "WITH r AS (UPDATE {p}runs SET state = ?, finished = ?, error = ?, lease_until = NULL "
    "WHERE key = ? AND worker = ? AND attempt = ? AND state = 'running' RETURNING 1), "
    "j AS (UPDATE {p}jobs SET rev = nextval('{p}rev'), "
    + SET_COLUMNS
    + " WHERE id = ? AND EXISTS (SELECT 1 FROM r) RETURNING rev) "
    "SELECT (SELECT count(*) FROM r), (SELECT rev FROM j)"
)

# The poll: the oldest transaction still running now (the next poll's lower bound), and the rows
# written by transactions from the previous bound on (NULLs if none).
_CHANGES = (
    "SELECT x.low::text, "
    + ", ".join("j." + column for column in READ_COLUMNS.split(", "))
    + " FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS low) x "
    "LEFT JOIN {p}jobs j ON j.xid >= ?::xid8"
)

# Backoff between attempts to reopen a lost connection (seconds).
_RECONNECT_FIRST = 0.05
_RECONNECT_MAX = 5.0


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the extra is installed wherever tests run
        raise StoreError("PostgreSQL", "psycopg (version 3) is not installed", _INSTALL) from exc
    return psycopg


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _redact(dsn: str) -> str:
    """The DSN for messages: without its password."""
    dsn = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", dsn)


class _Handle:
    """A connection as ``SQLStore`` uses it: ``execute`` and ``executemany`` that answer a
    cursor (psycopg has ``executemany`` on cursors only)."""

    __slots__ = ("conn",)

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, params: Sequence[Sequence[Any]]) -> Any:
        cur = self.conn.cursor()
        cur.executemany(sql, params)
        return cur


class PostgresStore(SQLStore):
    """Jobs in PostgreSQL: many processes on many hosts share them, each fire runs once.

    Args:
        dsn: A libpq connection string or URL (``"postgresql://app@db:5432/app"``,
            ``"host=db dbname=app user=app"``). Credentials may also come from the usual
            ``PG*`` environment variables and ``~/.pgpass``.
        schema: The PostgreSQL schema that holds duetime's tables (created, with them, on
            first use). Default ``"duetime"``. Any name: it is always quoted.
        poll_interval: Seconds between looks for changes a lost notification did not announce,
            for expired leases and for heartbeats. Default 5 seconds (notifications make
            changes arrive at once; see docs/many-workers.md).
        retention: How long finished runs, and rows of ended jobs, are kept (seconds or a
            timedelta). Default 7 days.
        connect_timeout: Seconds to wait for the server when connecting. Default 5 seconds.

    A store belongs to one Scheduler; open one per Scheduler (any number may share a
    database and schema). Needs ``pip install "duetime[postgres]"`` (psycopg 3).
    """

    __slots__ = (
        "_backoff",
        "_channel",
        "_closed",
        "_conn",
        "_down_until",
        "_listener",
        "_low",
        "_on_change",
        "_stop",
        "connect_timeout",
        "dsn",
        "schema",
    )

    _SAME_WORKER = "worker IS NOT DISTINCT FROM ?"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "duetime",
        poll_interval: float | int | timedelta = 5.0,
        retention: float | int | timedelta = timedelta(days=7),
        connect_timeout: float | int = 5.0,
    ) -> None:
        if not isinstance(dsn, str):
            raise TypeError(f"dsn must be a str, got {dsn!r}")
        if not isinstance(schema, str):
            raise TypeError(f"schema must be a str, got {schema!r}")
        if not schema or "\x00" in schema or len(schema.encode()) > 63:
            raise InvalidArgument(
                f"schema must be a PostgreSQL name of 1 to 63 bytes without NUL, got {schema!r}"
            )
        super().__init__(_quote(schema) + ".", retention)
        self.dsn = dsn
        self.schema = schema
        self.poll_ns = duration_ns("poll_interval", poll_interval, allow_zero=False)
        self.connect_timeout = duration_ns("connect_timeout", connect_timeout) / NS_PER_SECOND
        self._channel = f"duetime:{schema}"
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = True
        self._down_until = 0.0  # real monotonic time before which no reconnect is tried
        self._backoff = _RECONNECT_FIRST
        self._low = "0"  # the oldest transaction id whose writes may not have been read yet
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()
        self._on_change: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return f"<PostgresStore {_redact(self.dsn)!r} schema={self.schema!r} jobs={self.count()}>"

    @classmethod
    def from_url(cls, url: str) -> PostgresStore:
        """A store for ``postgresql://user@host:port/dbname`` (``postgres://`` too); a query
        parameter ``schema=name`` chooses the schema, the others go to libpq."""
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres"):
            raise InvalidArgument(
                f"store must look like 'postgresql://user@host:5432/dbname', got {url!r}"
            )
        query = parse_qsl(parts.query, keep_blank_values=True)
        schema = "duetime"
        kept = []
        for key, value in query:
            if key == "schema":
                schema = value
            else:
                kept.append((key, value))
        dsn = urlunsplit(parts._replace(query=urlencode(kept)))
        return cls(dsn, schema=schema)

    # -- connections and errors -------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return f"{_redact(self.dsn)!r} (schema {self.schema!r})"

    def _fail(self, what: str, exc: Exception) -> StoreError:
        state = getattr(getattr(exc, "diag", None), "sqlstate", None) or ""
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        low = text.lower()
        if state == "3D000" or ("database" in low and "does not exist" in low):
            advice = "create the database first (createdb NAME), or name another one"
        elif state in ("28P01", "28000") or "authentication failed" in low:
            advice = "check the user and password in the DSN (or ~/.pgpass)"
        elif state == "42501":
            advice = (
                "the user may not create or use the schema; grant it (GRANT CREATE ON DATABASE, "
                "GRANT USAGE ON SCHEMA) or choose another schema="
            )
        elif state.startswith("08") or not state:
            advice = (
                "check that PostgreSQL is running and reachable at that address; a running "
                "scheduler reconnects by itself"
            )
        else:
            advice = ""
        return StoreError(self._where, f"{what} failed ({text})", advice)

    def _connect(self) -> psycopg.Connection[Any]:
        psycopg = _psycopg()
        return psycopg.connect(  # type: ignore[no-any-return]
            self.dsn,
            autocommit=True,
            connect_timeout=max(1, round(self.connect_timeout)),
            application_name=f"duetime {self.worker}"[:63],
        )

    def _handle(self, what: str) -> _Handle:
        """The open connection, reopened if it was lost (at most once per backoff period)."""
        if self._closed:
            raise StoreError(self._where, "the store is closed", "its scheduler was shut down")
        conn = self._conn
        if conn is not None and not conn.closed:
            return _Handle(conn)
        now = real_monotonic()
        if now < self._down_until:
            raise StoreError(
                self._where,
                f"{what} failed (the connection was lost; reconnecting in "
                f"{self._down_until - now:.1f} s)",
                "check that PostgreSQL is running",
            )
        try:
            self._conn = conn = self._connect()
        except Exception as exc:
            self._down_until = now + self._backoff
            self._backoff = min(self._backoff * 2, _RECONNECT_MAX)
            raise self._fail(what, exc) from exc
        self._backoff = _RECONNECT_FIRST
        logger.info("reconnected to PostgreSQL %s", _redact(self.dsn))
        return _Handle(conn)

    def _lost(self, exc: Exception) -> None:
        """After an error: if the connection broke, drop it (the next use reopens it)."""
        conn = self._conn
        if conn is not None and (conn.closed or conn.broken):
            logger.warning("lost the connection to PostgreSQL %s: %s", _redact(self.dsn), exc)
            with contextlib.suppress(Exception):
                conn.close()
            self._conn = None

    def _dialect(self, sql: str) -> str:
        return sql.replace("?", "%s")

    @contextlib.contextmanager
    def _tx(self, what: str) -> Iterator[_Handle]:
        """One transaction (or the open batch's), all or nothing."""
        db = self._handle(what)
        if self._batch:
            yield db
            return
        psycopg = _psycopg()
        try:
            with db.conn.transaction():
                yield db
        except psycopg.Error as exc:
            self._lost(exc)
            raise self._fail(what, exc) from exc

    def _read(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        db = self._handle(what)
        psycopg = _psycopg()
        try:
            rows: list[Any] = db.execute(sql, params).fetchall()
        except psycopg.Error as exc:
            self._lost(exc)
            raise self._fail(what, exc) from exc
        return rows

    def _rev(self, db: Any) -> int:
        rev: int = db.execute(self._q("SELECT nextval('{p}rev')")).fetchone()[0]
        return rev

    def _changed(self, db: Any) -> None:
        db.execute("SELECT pg_notify(%s, %s)", (self._channel, self.worker))

    def _busy(self, db: Any, job_id: str) -> bool:
        # (A missing row is not busy: the claim then finds nothing to move on, "lost".)
        return bool(
            db.execute(
                self._q(
                    "SELECT NOT EXISTS (SELECT 1 FROM {p}jobs WHERE id = ? "
                    "FOR UPDATE SKIP LOCKED) AND EXISTS (SELECT 1 FROM {p}jobs WHERE id = ?)"
                ),
                (job_id, job_id),
            ).fetchone()[0]
        )

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
        """``SQLStore.claim``; a regular fire's first attempt (the common case) takes one
        round trip."""
        if attempt > 1 or row is None or guard is None:
            return super().claim(key, job_id, due, attempt, now, lease_ns, row, guard)
        values = job_values(row, 0, now)[2:]
        run = (key, job_id, due, attempt, self.worker, now + lease_ns, now)
        ((locked, exists, rev, won),) = self._read(
            "claiming a run", self._q(_CLAIM), (job_id, *values, guard, *run, job_id)
        )
        if rev is None:
            return "busy" if exists and not locked else "lost"
        self._wrote((row,), rev)
        if won is None:
            return "done"
        self._held.add(key)
        return "won"

    def settle(
        self,
        key: str,
        attempt: int,
        state: str,
        error: str | None,
        now: int,
        row: JobRow | None,
    ) -> bool:
        """``SQLStore.settle`` in one round trip."""
        if row is None:
            return super().settle(key, attempt, state, error, now, row)
        finished = now if state != "failed" else None
        ((recorded, rev),) = self._read(
            "recording a run's outcome",
            self._q(_SETTLE),
            (
                state,
                finished,
                error,
                key,
                self.worker,
                attempt,
                *job_values(row, 0, now)[2:],
                row.id,
            ),
        )
        if not recorded:
            # Written already (a retry after a lost commit)? The general path checks.
            return super().settle(key, attempt, state, error, now, row)
        self._held.discard(key)
        if rev is not None:
            self._wrote((row,), rev)
        return True

    # -- opening ----------------------------------------------------------------------------------

    def open(self, worker: str) -> None:
        """Connect, create or check the schema and its tables. Called once, by the Scheduler."""
        self.worker = worker
        psycopg = _psycopg()
        self._closed = False
        try:
            self._conn = self._connect()
        except psycopg.Error as exc:
            self._closed = True
            raise self._fail("connecting", exc) from exc
        try:
            self._create()
        except BaseException:
            self.close()
            raise

    def _create(self) -> None:
        psycopg = _psycopg()
        conn = self._conn
        assert conn is not None
        s = _quote(self.schema)
        try:
            version = self._version(conn)
            if version is None:
                with conn.transaction():
                    # Serialize first uses (a restart herd): DDL racing DDL fails otherwise.
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self._channel,))
                    if self._version(conn) is None:
                        # (No parameters: psycopg sends the script as one simple query.)
                        conn.execute(_SCHEMA.replace("{s}", s).encode())
                        conn.execute(
                            f"INSERT INTO {s}.meta (key, value) VALUES ('schema', %s) "
                            "ON CONFLICT (key) DO NOTHING",
                            (SCHEMA_VERSION,),
                        )
                version = self._version(conn)
        except psycopg.Error as exc:
            raise self._fail("creating the tables", exc) from exc
        if version != SCHEMA_VERSION:
            if isinstance(version, int) and version > SCHEMA_VERSION:
                raise StoreError(
                    self._where,
                    f"its schema version is {version}, newer than this duetime understands "
                    f"({SCHEMA_VERSION})",
                    "upgrade duetime in this program (a schema is never downgraded)",
                )
            raise StoreError(
                self._where,
                f"its schema version is {version!r}, which this duetime cannot read",
                "choose another schema= or drop this one",
            )

    def _version(self, conn: psycopg.Connection[Any]) -> int | None:
        s = _quote(self.schema)
        found = conn.execute("SELECT to_regclass(%s)", (f"{s}.meta",)).fetchone()
        if found is None or found[0] is None:
            return None
        row = conn.execute(f"SELECT value FROM {s}.meta WHERE key = 'schema'").fetchone()
        return None if row is None else int(row[0])

    def close(self) -> None:
        """Stop listening and close the connections (the Scheduler's shutdown does)."""
        self._closed = True
        self._stop.set()
        listener, self._listener = self._listener, None
        if listener is not None and listener is not threading.current_thread():
            listener.join(5.0)
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    @property
    def is_open(self) -> bool:
        """Whether the store is open (its connection may be down and about to be reopened)."""
        return not self._closed

    # -- changes ----------------------------------------------------------------------------------

    def load_rows(self) -> list[JobRow]:
        """Every live job's row (what opening a store loads)."""
        low = self._read("loading jobs", "SELECT pg_snapshot_xmin(pg_current_snapshot())::text")
        found = super().load_rows()
        self._low = low[0][0]
        for row in found:
            self._mine[row.id] = row.rev
        # Jobs due at the same instant with the same priority have no order between processes;
        # each worker takes them in an order of its own, so that workers mostly claim
        # different jobs instead of all racing for the same one (and skipping it, "busy").
        random.shuffle(found)
        return found

    def changed_rows(self) -> list[JobRow] | None:
        """Rows other processes have written since this one last looked, or None if none (one
        indexed query)."""
        rows = self._read("polling", self._q(_CHANGES), (self._low,))
        self._low = rows[0][0]  # (the left join answers at least the one row of x)
        changed = []
        mine = self._mine
        for values in rows:
            if values[1] is None:
                continue
            row = read_row(values[1:])
            if mine.get(row.id) != row.rev:
                mine[row.id] = row.rev
                changed.append(row)
        random.shuffle(changed)  # (as in load_rows)
        return changed or None

    # -- listening --------------------------------------------------------------------------------

    def listen(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change`` (in a thread of the store's) whenever another process notifies a
        change, and after the listening connection had to be reopened (notifications may have
        been missed). The Scheduler calls it when its runner starts."""
        if self._listener is not None or self._closed:
            return
        self._on_change = on_change
        self._stop.clear()
        self._listener = threading.Thread(
            target=self._listen, name=f"duetime-listen-{self.schema}", daemon=True
        )
        self._listener.start()

    def _listen(self) -> None:
        driver = _psycopg()
        backoff = _RECONNECT_FIRST
        conn: psycopg.Connection[Any] | None = None
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = self._connect()
                    conn.execute(f"LISTEN {_quote(self._channel)}")
                    backoff = _RECONNECT_FIRST
                    self._fire()  # notifications may have been missed while it was down
                woken = False
                for note in conn.notifies(timeout=0.5, stop_after=1):
                    woken = note.payload != self.worker
                if woken:
                    # Gather the notifications that came meanwhile into the one look.
                    for _ in conn.notifies(timeout=0.0):
                        pass
                    self._fire()
            except driver.Error as exc:
                if self._stop.is_set():
                    break
                logger.warning("lost the listening connection to PostgreSQL: %s", exc)
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
                conn = None
                self._stop.wait(backoff)
                backoff = min(backoff * 2, _RECONNECT_MAX)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _fire(self) -> None:
        callback = self._on_change
        if callback is None:
            return
        try:
            callback()
        except Exception:  # pragma: no cover - the Scheduler's refresh logs its own failures
            logger.exception("reading changes after a notification failed")
