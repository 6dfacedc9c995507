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
* **Batches.** The thread runner claims the fires due at once together (``claim_many``: one
  statement, rows passed as one JSON array) and writes finished runs' outcomes together, in the
  transaction of its next claims (``settle_and_claim``: two statements pipelined, one round trip,
  one commit). A claim locks only rows still due at its guard, so fires other workers took cost
  no lock, and their rows come back in the answer.
* **Changes are found by transaction id, not by counter.** Writers take their ``rev`` from a
  sequence (no store-wide lock), so revs commit out of order and "rev > the last one seen" would
  miss a slow transaction. Each row carries the id of the transaction that wrote it (``xid``: a
  default, a trigger for updates that do not set it, and set by the claims' and the outcomes'
  statements themselves, for which the trigger would cost 2 us a row); a poll reads the rows
  written by transactions at or after the oldest one that was still running at the previous
  poll (``pg_snapshot_xmin``), which cannot miss a commit; rows read twice are recognized by
  their rev.
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
import hashlib
import json
import logging
import os
import random
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from operator import attrgetter
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus, urlsplit

from duetime._validate import NS_PER_SECOND, duration_ns, lower_scheme
from duetime.clock import real_monotonic
from duetime.errors import InvalidArgument, StoreError
from duetime.stores._sql import (
    CLAIM_KEY_CONFLICT,
    CLAIM_SET,
    JOB_COLUMNS,
    JOB_SET,
    PROGRESS,
    PROGRESS_AT,
    QUEUED_WHERE,
    READ_COLUMNS,
    UPSERT_CONFLICT,
    SQLStore,
    caught,
    job_values,
    progress_set,
    read_row,
    running_elsewhere,
    still_live,
)
from duetime.stores.base import SOLO_SKIP, SOLO_WAIT, ClaimAnswer, ClaimAsk, QueuedRun, SettleAsk
from duetime.stores.records import ENDED_STATES, Changes, JobRow

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
    key text COLLATE "C" PRIMARY KEY,
    value bigint NOT NULL
);
CREATE SEQUENCE IF NOT EXISTS {s}.rev;
CREATE TABLE IF NOT EXISTS {s}.jobs (
    id text COLLATE "C" PRIMARY KEY,
    rev bigint NOT NULL,
    name text,
    task text COLLATE "C" NOT NULL,
    args text NOT NULL,
    trigger text NOT NULL,
    retry text,
    options text NOT NULL,
    priority integer NOT NULL,
    state text COLLATE "C" NOT NULL,
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
CREATE OR REPLACE FUNCTION {s}.stamp_xid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.xid := pg_current_xact_id();
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS stamp_xid ON {s}.jobs;
CREATE TRIGGER stamp_xid BEFORE UPDATE ON {s}.jobs
    FOR EACH ROW WHEN (NEW.xid = OLD.xid) EXECUTE FUNCTION {s}.stamp_xid();
CREATE TABLE IF NOT EXISTS {s}.runs (
    key text COLLATE "C" PRIMARY KEY,
    job_id text COLLATE "C" NOT NULL,
    due bigint NOT NULL,
    state text COLLATE "C" NOT NULL,
    attempt integer NOT NULL,
    worker text COLLATE "C",
    lease_until bigint,
    started bigint,
    finished bigint,
    error text
);
CREATE INDEX IF NOT EXISTS runs_active ON {s}.runs (state, lease_until)
    WHERE state IN ('queued', 'running', 'failed', 'dead', 'lost');
CREATE INDEX IF NOT EXISTS runs_job ON {s}.runs (job_id, due);
CREATE TABLE IF NOT EXISTS {s}.dead (
    id text COLLATE "C" PRIMARY KEY,
    job text NOT NULL,
    error text NOT NULL,
    traceback text NOT NULL,
    attempts integer NOT NULL,
    due bigint NOT NULL,
    failed_at bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.workers (
    worker text COLLATE "C" PRIMARY KEY,
    tasks text NOT NULL,
    until bigint NOT NULL
)
"""

# The types of a job's columns after id and rev (JOB_SET), for rows passed as JSON.
_JOB_TYPES = dict(
    zip(
        JOB_SET,
        ("text",) * 6
        + ("integer", "text", "bigint", "bigint", "text")
        + ("integer",) * 4
        + ("text", "bigint"),
        strict=True,
    )
)


def _rows(fields: Sequence[tuple[str, str]]) -> str:
    """A relation with one row per element of a JSON array parameter of arrays, columns
    ``fields`` (name, type): how one statement takes many rows. (One JSON text made by
    ``json.dumps`` costs a fraction of what adapting an array per column does.)"""
    columns = ", ".join(f"(e->>{i})::{kind} AS {name}" for i, (name, kind) in enumerate(fields))
    return f"SELECT {columns} FROM jsonb_array_elements(?::jsonb) e"


# A job's id and progress columns (PROGRESS), for rows passed as JSON.
_PROGRESS_ROW = (("id", "text"), *((c, _JOB_TYPES[c]) for c in PROGRESS))
# An outcome's row: the same, with the job's recurrence as the writer knows it (progress_set).
_OUTCOME_ROW = (("id", "text"), ("trigger", "text"), *_PROGRESS_ROW[1:])


def _set_from(alias: str) -> str:
    """A claim's progress columns as an UPDATE's SET list, taken from relation ``alias``."""
    return ", ".join(f"{column} = {alias}.{column}" for column in CLAIM_SET)


# A job's row (READ_COLUMNS) of NULLs, typed: the columns of an answer row that carries none.
_READ_TYPES = {**_JOB_TYPES, "id": "text", "rev": "bigint"}
_NULL_ROW = ", ".join(f"NULL::{_READ_TYPES[c]}" for c in READ_COLUMNS.split(", "))

# Regular first-attempt claims (distinct jobs) in one statement, one round trip. Only rows
# still due at their guards are locked (SKIP LOCKED never waits): a fire another worker has taken
# costs no lock, which is a write. Each job is looked up by its key (LATERAL): a join the planner
# chooses could scan every live job for each batch. Answers tagged rows, each CTE read once (a
# join of two CTEs is a nested loop the size of the batch squared): 'u' (job id, rev) for each
# row moved on; 'r' (run key) for each run recorded; 'e' for each job not moved on: (job id,
# still due, and its row as the statement saw it: the row that beat the claim, read back without
# another round trip). Not moved on and still due is "busy": another transaction holds the row.
_CLAIM_MANY = (
    "WITH v AS ("
    + _rows(
        (
            ("guard", "bigint"),
            ("r_key", "text"),
            ("r_due", "bigint"),
            ("r_attempt", "integer"),
            ("r_lease", "bigint"),
            ("r_started", "bigint"),
            ("solo", "integer"),
            *_PROGRESS_ROW,
        ),
    )
    + "), "
    "locked AS (SELECT l.id FROM v CROSS JOIN LATERAL (SELECT id FROM {p}jobs "
    "WHERE id = v.id AND next_base = v.guard AND state IN ('scheduled', 'running') "
    "/*wait*/ FOR UPDATE SKIP LOCKED) l), "
    "upd AS (UPDATE {p}jobs j SET rev = nextval('{p}rev'), xid = pg_current_xact_id(), "
    + _set_from("v")
    + " FROM v WHERE j.id = ANY(ARRAY(SELECT id FROM locked)) AND v.id = j.id "
    "RETURNING j.id, j.rev), "
    "run AS (INSERT INTO {p}runs (key, job_id, due, state, attempt, worker, lease_until, started) "
    "SELECT v.r_key, v.id, v.r_due, 'running', v.r_attempt, ?::text, v.r_lease, v.r_started "
    "FROM v JOIN upd ON upd.id = v.id /*solo*/ " + CLAIM_KEY_CONFLICT + ") "
    "SELECT 'u', id, rev, NULL::boolean, " + _NULL_ROW + " FROM upd "
    "UNION ALL SELECT 'r', key, NULL, NULL, " + _NULL_ROW + " FROM run "
    "UNION ALL SELECT 'e', v.id, NULL, "
    "e.next_base = v.guard AND e.state IN ('scheduled', 'running'), "
    + ", ".join(f"e.{column}" for column in READ_COLUMNS.split(", "))
    + " FROM v LEFT JOIN LATERAL (SELECT * FROM {p}jobs WHERE id = v.id OFFSET 0) e ON true "
    "WHERE v.id NOT IN (SELECT id FROM upd)"
)

# Another worker's run of job v.id is going (its lease not run out); one that started before
# the fire being claimed came due (an overlap); one that started when it was due already.
_RUNNING_ELSEWHERE = running_elsewhere("v.id", "v.r_started")
_OVERLAPPING = running_elsewhere("v.id", "v.r_started", "< v.r_due")
_CAME_AFTER = running_elsewhere("v.id", "v.r_started", ">= v.r_due")

# The same, for a batch with a claim made "solo" while another worker's run of the job is
# going: a recurring job's regular fire under Overlap.SKIP (SOLO_SKIP) is not recorded if that
# run started before the fire came due (an overlap: skipped, "done"), and waits like the others
# if the fire was due already when it started; the others (SOLO_WAIT: a catch-up, QUEUE, a
# side) do not lock the row ("busy": tried again after the run before them). (A statement of
# its own: the conditions cost the common batches, one-shot jobs' fires, a sixth of their
# throughput even where never true.)
_CLAIM_MANY_SOLO = _CLAIM_MANY.replace(
    "/*wait*/",
    f"AND NOT ((v.solo = {SOLO_WAIT} AND {_RUNNING_ELSEWHERE}) "
    f"OR (v.solo = {SOLO_SKIP} AND {_CAME_AFTER})) ",
).replace(
    "/*solo*/",
    f"WHERE CASE WHEN v.solo = {SOLO_SKIP} THEN NOT {_OVERLAPPING} ELSE true END",
)

# Outcomes in one statement, fenced by worker and attempt; each job's progress (given once) is
# written if any of its runs was and the job has not ended (progress_set). The runs are found by
# key: their state test is written so that the planner cannot answer it from runs_active, which
# it chose on a young table's estimates, reading for each batch the entry of every run going and
# of every one finished since the last vacuum (a fifth of the statement at 10 000 runs). The
# rows are locked in id order first, so two workers writing outcomes of the same jobs cannot
# deadlock. Answers (the keys recorded, the ids and revs of the rows written as given: one that
# kept a change made elsewhere, a pause or a new recurrence, is not, and is read back with the
# changes).
_SETTLE_MANY = (
    "WITH v AS ("
    + _rows(
        (
            ("key", "text"),
            ("attempt", "integer"),
            ("state", "text"),
            ("finished", "bigint"),
            ("error", "text"),
            ("retry", "bigint"),
        ),
    )
    + "), "
    "r AS (UPDATE {p}runs u SET state = v.state, finished = v.finished, error = v.error, "
    "lease_until = v.retry FROM v WHERE u.key = ANY(ARRAY(SELECT key FROM v)) AND u.key = v.key "
    "AND u.worker = ? AND u.attempt = v.attempt "
    "AND (u.state = 'running') IS TRUE RETURNING u.key, u.job_id, u.state), "
    "w AS (" + _rows(_OUTCOME_ROW) + "), "
    "lk AS (SELECT k.id, n.runs, n.failures FROM (SELECT job_id, count(*) AS runs, "
    "count(*) FILTER (WHERE state <> 'succeeded') AS failures FROM r GROUP BY job_id) n "
    "JOIN {p}jobs k ON k.id = n.job_id ORDER BY k.id FOR UPDATE OF k), "
    "j AS (UPDATE {p}jobs j SET rev = nextval('{p}rev'), xid = pg_current_xact_id(), "
    + progress_set("j", "w", ("lk.runs", "lk.failures"))
    + " FROM w, lk WHERE j.id = w.id AND lk.id = w.id AND "
    + still_live("j")
    + " RETURNING j.id, j.rev, j.state = w.state AND j.trigger = w.trigger "
    "AND j.next_base IS NOT DISTINCT FROM w.next_base "
    "AND j.runs = w.runs AND j.failures = w.failures AS same) "
    "SELECT (SELECT array_agg(key) FROM r), (SELECT array_agg(id) FROM j WHERE same), "
    "(SELECT array_agg(rev) FROM j WHERE same)"
)

# A new job in one statement (one round trip, its own transaction): insert its row unless a
# live job has the id (an ended job's row is replaced), and notify. Answers (rev or NULL if the
# id is taken, notified).
_INSERT_ONE = (
    f"WITH ins AS (INSERT INTO {{p}}jobs ({JOB_COLUMNS}) "
    f"VALUES (?, nextval('{{p}}rev'), {', '.join('?' * len(JOB_SET))}) "
    + UPSERT_CONFLICT
    + " WHERE {p}jobs.state IN (?, ?, ?) RETURNING rev), "
    "n AS (SELECT pg_notify(?, ?) FROM ins) "
    "SELECT (SELECT rev FROM ins), (SELECT count(*) FROM n)"
)

# A job's row says it ended.
_ENDED = f"state IN ({', '.join(repr(state) for state in ENDED_STATES)})"

# The poll: the oldest transaction still running now (the next poll's lower bound), the runs
# backfill enqueued (a JSON array, NULL if none; the Scheduler asks for them whenever rows
# changed, and a second query would be a second round trip between a job scheduled in another
# process and its start), and what transactions from the previous bound on wrote: of the jobs
# that ended, three arrays (ids, states, revs) in that first row; then the row of each live job.
# A poll learns of every run another worker finished, and the reader only drops the job: a
# worker that read each finished one-shot's row in full read most of the table's bytes again
# (15 000 such rows each, of 20 000 jobs shared by four), and one row each, even of NULLs, cost
# it and the server three times what the arrays do. (One statement, one snapshot: both scans
# see the same commits as the bound.)
_CHANGES = (
    "SELECT x.low::text, q.queued, e.ids, e.states, e.revs, "
    + _NULL_ROW
    + " FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS low) x "
    "CROSS JOIN (SELECT json_agg(json_build_array(key, job_id, due, attempt, lease_until) "
    "ORDER BY due)::text AS queued FROM {p}runs WHERE " + QUEUED_WHERE + ") q "
    "CROSS JOIN (SELECT array_agg(id) AS ids, array_agg(state) AS states, array_agg(rev) AS revs "
    "FROM {p}jobs WHERE xid >= ?::xid8 AND " + _ENDED + ") e "
    "UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, " + READ_COLUMNS + " FROM {p}jobs "
    "WHERE xid >= ?::xid8 AND NOT " + _ENDED
)

# How long a first use waits for another process creating the schema (seconds).
_CREATE_WAIT = 60

# Backoff between attempts to reopen a lost connection (seconds).
_RECONNECT_FIRST = 0.05
_RECONNECT_MAX = 5.0


def psycopg_module() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the extra is installed wherever tests run
        raise StoreError("PostgreSQL", "psycopg (version 3) is not installed", _INSTALL) from exc
    return psycopg


# A port as libpq reads one (strtol: blanks and a sign allowed), or none (its default).
_PORT = re.compile(r"\s*(?:[+-]?[0-9]+\s*)?", re.ASCII)


def _check_dsn(dsn: str) -> None:
    """Refuse a DSN libpq cannot parse, at construction rather than at the first connection
    (where it would read as an unreachable server). Without psycopg, opening the store says
    to install it."""
    try:
        from psycopg import conninfo
    except ImportError:  # pragma: no cover - the extra is installed wherever tests run
        return
    try:
        if "\x00" in dsn:
            raise ValueError("it contains a NUL character")
        params = conninfo.conninfo_to_dict(dsn)
        # (libpq parses the port only when it connects: "abc" would read as a server down.)
        port = str(params.get("port") or "")
        if not all(_PORT.fullmatch(part) for part in port.split(",")):
            raise ValueError(f"port must be a number, got {port!r}")
        if not all(0 < int(part) < 65536 for part in port.split(",") if part.strip()):
            raise ValueError(f"port must be from 1 to 65535, got {port!r}")
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidArgument(
            f"dsn must be a libpq connection string ('host=db dbname=app user=app') or a URL "
            f"('postgresql://app@db:5432/app'), got {redact_dsn(dsn)!r}: {_redact_in(reason, dsn)}"
        ) from None


# libpq's TCP settings unless the DSN gives its own: a connection whose peer went silent (a
# partition, a server host that died without a reset) is found dead in about half a minute,
# and the call using it raises StoreError, instead of waiting on the operating system's
# defaults (keepalives after two hours idle; unacknowledged data retried for many minutes).
_TCP_DEFAULTS = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,  # milliseconds
}


def _tcp_defaults(dsn: str) -> dict[str, int]:
    """The ``_TCP_DEFAULTS`` that ``dsn`` does not set itself; none for a DSN that names a
    libpq service (``service=``, ``PGSERVICE``), whose file may set them: keywords given
    here would win over it."""
    from psycopg import conninfo

    given = conninfo.conninfo_to_dict(dsn)
    if "service" in given or os.environ.get("PGSERVICE"):
        return {}
    return {key: value for key, value in _TCP_DEFAULTS.items() if key not in given}


def _split_schema(url: str) -> tuple[str, str | None]:
    """A ``postgresql://`` URL without its ``schema=`` query parameter, and that parameter's
    value (None if it has none). The rest is left as written, for
    libpq to read: rebuilding the URL would turn ``postgresql:///app`` (local socket) into
    ``postgresql:/app`` and a space written ``%20`` into ``+``, which libpq reads as a plus."""
    base, mark, rest = url.partition("?")
    if not mark:
        return url, None
    query, hash, fragment = rest.partition("#")
    schemas = []
    kept = []
    for piece in query.split("&"):
        if not piece:
            continue  # (as parse_qsl drops them: libpq refuses an empty one)
        key, _, value = piece.partition("=")
        if unquote_plus(key) == "schema":
            schemas.append(unquote_plus(value))
        else:
            kept.append(piece)
    if len(schemas) > 1:
        raise InvalidArgument(
            f"schema must be one name: the dsn gives schema= {len(schemas)} times, got {schemas!r}"
        )
    schema = schemas[0] if schemas else None
    query = "&".join(kept)
    return base + ("?" + query if query else "") + hash + fragment, schema


def missing_database(exc: BaseException | None) -> bool:
    """Whether a driver's error says the DSN's database does not exist (a connection refused
    for it carries no SQLSTATE: its message says so)."""
    if exc is None:
        return False
    state = getattr(getattr(exc, "diag", None), "sqlstate", None) or ""
    low = str(exc).lower()
    return state == "3D000" or ("database" in low and "does not exist" in low)


def _channel(schema: str) -> str:
    """The LISTEN/NOTIFY channel of a schema's stores: ``duetime:<schema>``, or, past the 63
    bytes PostgreSQL allows a channel name (a schema of 56 bytes or more), ``duetime#`` and a
    digest of the schema name (every process computes the same)."""
    channel = f"duetime:{schema}"
    if len(channel.encode()) <= 63:
        return channel
    return "duetime#" + hashlib.sha256(schema.encode()).hexdigest()[:32]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def redact_dsn(dsn: str) -> str:
    """The DSN (or any store URL) for messages: without its password."""
    dsn = re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", dsn)


def _redact_in(text: str, dsn: str) -> str:
    """``text`` (a driver's message about ``dsn``, which may quote any part of it) without the
    DSN's password."""
    found = re.findall(r"://[^:/@]*:([^@/]*)@", dsn)
    found += [p.strip("'") for p in re.findall(r"password\s*=\s*('[^']*'|\S+)", dsn)]
    for password in found:
        if password:
            text = text.replace(password, "***")
    return redact_dsn(text)


# How many jobs due together one worker takes in a row before another stretch (_spread).
_STRETCH = 256


def _spread(rows: list[JobRow]) -> list[JobRow]:
    """``rows`` in the order this process takes jobs due at the same instant with the same
    priority (between processes they have none): stretches of ``_STRETCH`` jobs in id order
    from a random start, the stretches in an order of this process's own.

    Workers then mostly claim in different stretches, each a batch at a time, and meet only
    near the end. A shuffle of single jobs had every worker's batch draw from the whole set:
    four workers on 20 000 jobs due at one instant lost 7 700-8 100 claims to each other (now
    3 900-6 100), and a batch that mostly lost made its worker read every change since its
    last look."""
    rows.sort(key=attrgetter("id"))
    # (From a start of this process's own: a set of one stretch or less, tens of cron jobs on
    # the same minute, would otherwise be claimed by every worker from the same first job.)
    start = random.randrange(len(rows)) if rows else 0
    rows = rows[start:] + rows[:start]
    stretches = [rows[i : i + _STRETCH] for i in range(0, len(rows), _STRETCH)]
    random.shuffle(stretches)
    return [row for stretch in stretches for row in stretch]


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
            first use). Default: the URL's ``schema=`` query parameter if it has one, else
            ``"duetime"``. Any name: it is always quoted.
        poll_interval: Seconds between looks for changes a lost notification did not announce,
            for expired leases and for heartbeats. Default 5 seconds (notifications make
            changes arrive at once; see docs/many-workers.md).
        retention: How long finished runs, and rows of ended jobs, are kept (seconds or a
            timedelta). Default 7 days.
        connect_timeout: Seconds to wait for the server when connecting (> 0; libpq counts
            whole seconds, so it is rounded, to at least 1). Default 5 seconds.

    A store belongs to one Scheduler (a new one may take it once that one has shut down); open
    one per Scheduler (any number may share a
    database and schema). Needs ``pip install "duetime[postgres]"`` (psycopg 3).
    """

    __slots__ = (
        "_backoff",
        "_channel",
        "_closed",
        "_conn",
        "_cut",
        "_down_until",
        "_listener",
        "_low",
        "_on_change",
        "_queued_ahead",
        "_stop",
        "connect_timeout",
        "dsn",
        "schema",
    )

    _SAME_WORKER = "worker IS NOT DISTINCT FROM ?"

    keeps_nul = False
    # (A B-tree entry holds at most 2 704 bytes; a run's key is the id and 41 bytes more.)
    id_bytes_most = 2048

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        poll_interval: float | int | timedelta = 5.0,
        retention: float | int | timedelta = timedelta(days=7),
        connect_timeout: float | int = 5.0,
    ) -> None:
        if not isinstance(dsn, str):
            raise TypeError(f"dsn must be a str, got {dsn!r}")
        if schema is not None and not isinstance(schema, str):
            raise TypeError(f"schema must be a str, got {schema!r}")
        if dsn.lower().startswith(("postgresql://", "postgres://")):
            # (The store URL's schema= parameter, as from_url and the command line take it.)
            dsn, in_url = _split_schema(dsn)
            if in_url is not None:
                if schema is not None and schema != in_url:
                    raise InvalidArgument(
                        f"schema must be one name: the dsn says schema={in_url!r}, the "
                        f"schema argument {schema!r}"
                    )
                schema = in_url
        if schema is None:
            schema = "duetime"
        if not schema or "\x00" in schema or len(schema.encode()) > 63:
            raise InvalidArgument(
                f"schema must be a PostgreSQL name of 1 to 63 bytes without NUL, got {schema!r}"
            )
        if schema.startswith("pg_"):
            raise InvalidArgument(
                f"schema must not start with 'pg_' (PostgreSQL keeps such names for its own "
                f"schemas), got {schema!r}"
            )
        super().__init__(_quote(schema) + ".", retention)
        self.dsn = dsn
        self.schema = schema
        self.poll_ns = duration_ns("poll_interval", poll_interval, allow_zero=False)
        self.connect_timeout = (
            duration_ns("connect_timeout", connect_timeout, allow_zero=False) / NS_PER_SECOND
        )
        _check_dsn(dsn)
        self._channel = _channel(schema)
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = True
        self._down_until = 0.0  # real monotonic time before which no reconnect is tried
        self._cut = False  # the last statement that failed lost the connection
        self._backoff = _RECONNECT_FIRST
        self._low = "0"  # the oldest transaction id whose writes may not have been read yet
        # The queued runs read with the last changes, for the queued_runs() call that follows.
        self._queued_ahead: list[Any] | None = None
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()
        self._on_change: Callable[[], None] | None = None

    def __repr__(self) -> str:
        return (
            f"<PostgresStore {redact_dsn(self.dsn)!r} schema={self.schema!r} jobs={self.count()}>"
        )

    @classmethod
    def from_url(cls, url: str) -> PostgresStore:
        """A store for ``postgresql://user@host:port/dbname`` (``postgres://`` too); a query
        parameter ``schema=name`` chooses the schema, the others go to libpq."""
        url = lower_scheme(url)  # (libpq reads only a lower-case scheme)
        try:
            parts = urlsplit(url)
        except ValueError as exc:  # ("Invalid IPv6 URL")
            raise InvalidArgument(
                f"store must look like 'postgresql://user@host:5432/dbname', got "
                f"{redact_dsn(url)!r}: {exc}"
            ) from None
        if parts.scheme not in ("postgresql", "postgres"):
            raise InvalidArgument(
                f"store must look like 'postgresql://user@host:5432/dbname', "
                f"got {redact_dsn(url)!r}"
            )
        dsn, schema = _split_schema(url)
        return cls(dsn, schema=schema)

    # -- connections and errors -------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return f"{redact_dsn(self.dsn)!r} (schema {self.schema!r})"

    def _fail(self, what: str, exc: Exception) -> StoreError:
        state = getattr(getattr(exc, "diag", None), "sqlstate", None) or ""
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        low = text.lower()
        if missing_database(exc):
            advice = "create the database first (createdb NAME), or name another one"
        elif (
            state in ("28P01", "28000")
            or "authentication failed" in low
            or ("role" in low and "does not exist" in low and not state)
        ):
            advice = "check the user and password in the DSN (or ~/.pgpass)"
        elif "invalid" in low and "value" in low and not state:
            # (libpq refusing one of the DSN's settings, sslmode=bogus: no server was asked.)
            advice = "check the settings in the DSN"
        elif state == "54000":
            advice = (
                "a value is too long for PostgreSQL's index (a job id: keep ids under 2 048 "
                "bytes, which schedule() checks for new jobs)"
            )
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
        driver = psycopg_module()  # (imported when first used: typed Any)
        conn: psycopg.Connection[Any] = driver.connect(
            self.dsn,
            autocommit=True,
            connect_timeout=max(1, round(self.connect_timeout)),
            application_name=f"duetime {self.worker}"[:63],
            **_tcp_defaults(self.dsn),
        )
        return conn

    def _handle(self, what: str) -> _Handle:
        """The open connection, reopened if it was lost (at most once per backoff period)."""
        if self._closed:
            raise StoreError(self._where, "the store is closed", "its scheduler was shut down")
        conn = self._conn
        if conn is not None and not conn.closed:
            return _Handle(conn)
        if self._batch:
            # The batch's transaction went with the connection: what it wrote is gone, and
            # what follows must not be committed alone on a new one.
            raise StoreError(
                self._where,
                f"{what} failed (the connection was lost in the middle of a batch: nothing "
                "of the batch is stored)",
                "run the batch again",
            )
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
        logger.info("reconnected to PostgreSQL %s", redact_dsn(self.dsn))
        return _Handle(conn)

    def retry_in_ns(self) -> int:
        """``SQLStore.retry_in_ns``: until the next attempt to reopen a lost connection, at
        least a quarter of a second, at most 5 seconds. A connection cut (a server restart,
        ``pg_terminate_backend``) is reopened at the next use: the fires whose claim it failed
        are tried again then, not seconds later (each failing try costs nothing while the
        server stays away: no attempt is made before the backoff ends)."""
        if not self._cut:
            # The connection stood: the statement itself failed (a read-only replica after a
            # failover, a permission, a full disk), which a quick retry would only repeat.
            return super().retry_in_ns()
        wait = self._down_until - real_monotonic()
        return int(min(max(wait, 0.25), _RECONNECT_MAX) * NS_PER_SECOND)

    def _lost(self, exc: Exception) -> None:
        """After an error: if the connection broke, drop it (the next use reopens it)."""
        conn = self._conn
        self._cut = conn is not None and (conn.closed or conn.broken)
        if conn is not None and self._cut:
            logger.warning("lost the connection to PostgreSQL %s: %s", redact_dsn(self.dsn), exc)
            with contextlib.suppress(Exception):
                conn.close()
            self._conn = None

    def _dialect(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def _unplaceheld(self, text: str) -> str:
        # (psycopg reads % as a placeholder's start in any statement sent with parameters.)
        return text.replace("%", "%%")

    @contextlib.contextmanager
    def _tx(self, what: str) -> Iterator[_Handle]:
        """One transaction (or the open batch's), all or nothing."""
        db = self._handle(what)
        psycopg = psycopg_module()
        if self._batch:
            try:
                yield db
            except psycopg.Error as exc:
                # (A StoreError, as outside a batch: callers restore what they changed.)
                self._lost(exc)
                raise self._fail(what, exc) from exc
            return
        try:
            with db.conn.transaction():
                yield db
        except psycopg.Error as exc:
            self._lost(exc)
            raise self._fail(what, exc) from exc
        if db.conn.closed or db.conn.broken:
            # (Cut in the block, its failure caught there: psycopg leaves a transaction on a
            # closed connection without a word, and nothing was committed.)
            self._lost(RuntimeError("closed in a transaction"))
            raise StoreError(
                self._where,
                f"{what} failed (the connection was lost before the transaction committed: "
                "nothing of it is stored)",
                "check that PostgreSQL is running",
            )

    def _write(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """One statement that writes (in its own transaction): its rows. Never sent twice: if
        the connection broke, whether the server committed it is unknown."""
        db = self._handle(what)
        psycopg = psycopg_module()
        try:
            rows: list[Any] = db.execute(sql, params).fetchall()
        except psycopg.Error as exc:
            self._lost(exc)
            raise self._fail(what, exc) from exc
        return rows

    def _read(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """A query that only reads: its rows."""
        psycopg = psycopg_module()
        for first in (True, False):
            db = self._handle(what)
            try:
                rows: list[Any] = db.execute(sql, params).fetchall()
            except psycopg.Error as exc:
                self._lost(exc)
                if first and self._conn is None and not self._batch:
                    # The connection had broken (cut while idle: a server restart, a
                    # terminated backend). A read can be sent again, once, on a new one: the
                    # call that polled first then neither fails nor logs an error for it.
                    continue
                raise self._fail(what, exc) from exc
            return rows
        raise AssertionError("unreachable")  # (the second pass returns or raises)

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

    def claim_many(self, asks: Sequence[ClaimAsk]) -> list[ClaimAnswer]:
        """``SQLStore.claim_many``: the regular first-attempt claims (the common case) in one
        statement, one round trip and one commit, which also reads back the rows of the jobs
        whose claims were not won; the others one by one."""
        return self.settle_and_claim((), asks)[1]

    def settle_many(self, outcomes: Sequence[SettleAsk]) -> list[bool | StoreError]:
        """``SQLStore.settle_many`` in one statement, one round trip and one commit (a job's
        row is written once, the last one given)."""
        return self.settle_and_claim(outcomes, ())[0]

    def settle_and_claim(
        self, outcomes: Sequence[SettleAsk], asks: Sequence[ClaimAsk]
    ) -> tuple[list[bool | StoreError], list[ClaimAnswer]]:
        """``SQLStore.settle_and_claim``: the outcomes and the regular first-attempt claims in
        one transaction and one round trip (two statements, pipelined); the other claims one
        by one, after it."""
        self.insert_pending()
        if any(row is None for *_, row in outcomes):
            # (A run of a job cancelled meanwhile records the run only: rare, one by one.)
            return super().settle_many(outcomes), self.claim_many(asks)
        claims: list[ClaimAnswer] = [("", None)] * len(asks)
        # (attempt 1, with a row and a guard: the others are claimed one by one, after it.)
        batch = [
            (i, ask)
            for i, ask in enumerate(asks)
            if ask[3] == 1 and ask[6] is not None and ask[7] is not None
        ]
        statements = []
        if outcomes:
            statements.append((self._q(_SETTLE_MANY), self._settle_params(outcomes)))
        if batch:
            solo = any(ask[8] for _, ask in batch)
            statements.append(
                (
                    self._q(_CLAIM_MANY_SOLO if solo else _CLAIM_MANY),
                    self._claim_params(batch, solo),
                )
            )
        settled: list[bool | StoreError] = []
        try:
            results = (
                []
                if not statements
                else self._pipeline("recording outcomes and claiming runs", statements)
            )
        except StoreError as exc:
            settled = [exc] * len(outcomes)
            for i, _ in batch:
                claims[i] = exc
        else:
            if outcomes:
                settled = self._settled(outcomes, results.pop(0))
            if batch:
                self._claimed(batch, results.pop(0), claims)
        batched = {i for i, _ in batch}
        for i, ask in enumerate(asks):
            if i not in batched:
                claims[i] = caught(self._claim_answer, ask)
        return settled, claims

    def _pipeline(self, what: str, statements: Sequence[tuple[str, Any]]) -> list[list[Any]]:
        """Run ``statements`` in one transaction, sent together (one round trip); their
        rows."""
        if len(statements) == 1:
            return [self._write(what, *statements[0])]
        psycopg = psycopg_module()
        conn = self._handle(what).conn
        try:
            with conn.pipeline(), conn.transaction():
                cursors = [conn.execute(sql, params) for sql, params in statements]
            return [cursor.fetchall() for cursor in cursors]
        except psycopg.Error as exc:
            self._lost(exc)
            raise self._fail(what, exc) from exc

    def _claim_params(
        self, batch: Sequence[tuple[int, ClaimAsk]], solo: bool = False
    ) -> tuple[Any, ...]:
        # (The solo statement names this worker four times: the lock's two waits, the run's
        # worker, the skip.)
        claims = []
        for _, (key, job_id, due, attempt, now, lease_ns, row, guard, alone) in batch:
            assert row is not None
            values = (guard, key, due, attempt, now + lease_ns, now, int(alone), job_id)
            claims.append(values + job_values(row, 0, now)[PROGRESS_AT:])
        if solo:
            return (json.dumps(claims), self.worker, self.worker, self.worker, self.worker)
        return (json.dumps(claims), self.worker)

    def _claimed(
        self,
        batch: Sequence[tuple[int, ClaimAsk]],
        result: list[Any],
        answers: list[ClaimAnswer],
    ) -> None:
        """Fill ``answers`` for ``batch`` from what ``_CLAIM_MANY`` answered."""
        revs: dict[str, int] = {}
        recorded: set[str] = set()
        beaten: dict[str, tuple[Any, list[Any]]] = {}
        for tag, name, rev, due, *columns in result:
            if tag == "u":
                revs[name] = rev
            elif tag == "r":
                recorded.add(name)
            else:
                beaten[name] = (due, columns)
        for i, (key, job_id, *_, row, _, _) in batch:
            rev = revs.get(job_id)
            if rev is None:
                due, columns = beaten[job_id]
                # Still due here: another transaction holds the row ("busy"); the row comes
                # back as it stood when the statement began (before that transaction's change,
                # which the retry finds): the job is put back as it was before this process
                # moved it on, without a read of its own.
                answers[i] = (
                    "busy" if due else "lost",
                    None if columns[0] is None else read_row(columns),
                )
                continue
            assert row is not None
            self._wrote((row,), rev)
            if key in recorded:
                self._held.add(key)
                answers[i] = ("won", None)
            else:
                answers[i] = ("done", None)

    def _settle_params(self, outcomes: Sequence[SettleAsk]) -> tuple[Any, ...]:
        rows: dict[str, tuple[Any, ...]] = {}
        runs = []
        for key, attempt, state, error, now, row in outcomes:
            assert row is not None
            rows[row.id] = (row.id, row.trigger, *job_values(row, 0, now)[PROGRESS_AT:])
            final = state != "failed"
            retry = None if final else self._retry_at(row, key, attempt)
            runs.append((key, attempt, state, now if final else None, error, retry))
        return (json.dumps(runs), self.worker, json.dumps(list(rows.values())))

    def _settled(self, outcomes: Sequence[SettleAsk], result: list[Any]) -> list[bool | StoreError]:
        """The answers to ``outcomes`` from what ``_SETTLE_MANY`` answered."""
        ((keys, ids, revs),) = result
        written = dict(zip(ids or (), revs or (), strict=True))
        for *_, row in outcomes:
            assert row is not None
            rev = written.get(row.id)
            if rev is not None:
                self._wrote((row,), rev)
        recorded = set(keys or ())
        self._held.difference_update(recorded)
        # Not recorded: written already (a retry after a lost commit)? The general path checks.
        return [
            True if outcome[0] in recorded else caught(self.settle, *outcome)
            for outcome in outcomes
        ]

    def insert_new(self, rows: Sequence[JobRow], now: int) -> list[str]:
        """``SQLStore.insert_new``; one new job outside a batch (``schedule()``, the common
        case) takes one round trip."""
        if self._batch or len(rows) != 1:
            return super().insert_new(rows, now)
        (row,) = rows
        values = job_values(row, 0, now)
        ((rev, _),) = self._write(
            "saving jobs",
            self._q(_INSERT_ONE),
            (row.id, *values[2:], *ENDED_STATES, self._channel, self.worker),
        )
        if rev is None:
            return [row.id]
        self._wrote(rows, rev)
        return []

    # -- opening ----------------------------------------------------------------------------------

    def open(self, worker: str) -> None:
        """Connect, create or check the schema and its tables. Called once, by the Scheduler."""
        self.worker = worker
        psycopg = psycopg_module()
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
        psycopg = psycopg_module()
        conn = self._conn
        assert conn is not None
        s = _quote(self.schema)
        try:
            version = self._version(conn)
            if version is None:
                # Serialize first uses (a restart herd): only the first creates. The check is
                # made again in a transaction begun *after* the lock is held: a transaction that
                # was already open while another worker created the schema keeps answering from
                # its stale catalog cache that nothing exists, and running the script again
                # beside workers already using the tables deadlocks (CREATE INDEX and CREATE
                # TRIGGER lock the tables even when there is nothing to create).
                key = (self._channel,)
                # (Bounded: a worker stopped while it held the lock must not hang every start.)
                conn.execute(f"SET lock_timeout = '{_CREATE_WAIT}s'")
                conn.execute("SELECT pg_advisory_lock(hashtext(%s))", key)
                conn.execute("RESET lock_timeout")
                try:
                    with conn.transaction():
                        if self._version(conn) is None:
                            # (No parameters: psycopg sends the script as one simple query.)
                            conn.execute(_SCHEMA.replace("{s}", s).encode())
                            conn.execute(
                                f"INSERT INTO {self._unplaceheld(s)}.meta (key, value) "
                                "VALUES ('schema', %s) "
                                "ON CONFLICT (key) DO NOTHING",
                                (SCHEMA_VERSION,),
                            )
                finally:
                    if not conn.closed:
                        conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", key)
                version = self._version(conn)
        except psycopg.Error as exc:
            foreign = self._foreign_tables(conn)
            if foreign:
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise StoreError(
                    self._where,
                    f"creating the tables failed ({text}): the schema holds tables of the "
                    f"same names that are not duetime's ({', '.join(foreign)})",
                    "choose another schema= for duetime's tables",
                ) from exc
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

    def _foreign_tables(self, conn: psycopg.Connection[Any]) -> list[str]:
        """After creating the tables failed: the tables of duetime's names in the schema if it
        has no duetime meta table (another program's tables), else nothing."""
        s = _quote(self.schema)
        try:
            found = [
                name
                for name in ("meta", "jobs", "runs", "dead", "workers")
                if conn.execute("SELECT to_regclass(%s)", (f"{s}.{name}",)).fetchone()
                not in (None, (None,))
            ]
        except Exception:  # (the connection is gone: the failure says so itself)
            return []
        return [] if "meta" in found else found

    def created(self) -> bool:
        """Whether the schema's tables exist, looked at without creating them (the command line
        asks before it opens a store: opening creates them).

        Raises:
            StoreError: The server cannot be reached.
        """
        psycopg = psycopg_module()
        try:
            with self._connect() as conn:
                return self._version(conn) is not None
        except psycopg.Error as exc:
            raise self._fail("connecting", exc) from exc

    def _version(self, conn: psycopg.Connection[Any]) -> int | None:
        s = _quote(self.schema)
        found = conn.execute("SELECT to_regclass(%s)", (f"{s}.meta",)).fetchone()
        if found is None or found[0] is None:
            return None
        row = conn.execute(f"SELECT value FROM {s}.meta WHERE key = 'schema'").fetchone()
        return None if row is None else int(row[0])

    def retire(self) -> None:
        """``SQLStore.retire``, on the open connection only: a shutdown does not wait to
        reconnect for it (a worker whose record stays simply lapses)."""
        conn = self._conn
        if conn is not None and not conn.closed:
            super().retire()

    def close(self) -> None:
        """Stop listening and close the connections (the Scheduler's shutdown does)."""
        self.retire()
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

    @property
    def renewable(self) -> bool:
        """Whether a new Scheduler may take this store once its own has shut down and closed
        it (``SQLStore.renew``): not for a subclass, which ``_fresh`` cannot rebuild."""
        return type(self) is PostgresStore

    def _fresh(self) -> PostgresStore:
        fresh = PostgresStore(self.dsn, schema=self.schema)
        fresh.poll_ns, fresh.retention_ns = self.poll_ns, self.retention_ns
        fresh.connect_timeout = self.connect_timeout
        return fresh

    def _read_closed(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """``SQLStore._read_closed``: a connection of its own for the read."""
        try:
            with self._connect() as conn:
                return conn.execute(sql, params).fetchall()
        except Exception as exc:
            raise self._fail(what, exc) from exc

    # -- changes ----------------------------------------------------------------------------------

    def load_rows(self) -> list[JobRow]:
        """Every live job's row (what opening a store loads)."""
        low = self._read("loading jobs", "SELECT pg_snapshot_xmin(pg_current_snapshot())::text")
        found = super().load_rows()
        self._low = low[0][0]
        for row in found:
            self._mine[row.id] = row.rev
        return _spread(found)

    def changed_rows(self) -> Changes | None:
        """What other processes have written since this one last looked: the live jobs' rows
        and the ended jobs' ids and states (both empty if none but fires were queued for
        ``queued_runs``), or None if nothing changed (one indexed query)."""
        low = self._low
        rows = self._read("polling", self._q(_CHANGES), (low, low))
        # (The bound, the queue and the ended jobs ride on one row: looked for, not assumed to
        # lead.)
        head = next(values for values in rows if values[0] is not None)
        self._low, queued = head[0], head[1]
        mine = self._mine
        ended: list[tuple[str, str]] = []
        if head[2]:
            for job_id, state, rev in zip(head[2], head[3], head[4], strict=True):
                # (Rows this process wrote come back too: known by id and rev, skipped.)
                if mine.get(job_id) != rev:
                    mine[job_id] = rev
                    ended.append((job_id, state))
        changed = []
        for values in rows:
            job_id = values[5]
            if job_id is None or mine.get(job_id) == values[-1]:
                continue
            row = read_row(values[5:])
            mine[job_id] = row.rev
            changed.append(row)
        changed = _spread(changed)
        ahead: list[Any] = json.loads(queued) if queued else []
        if not changed and not ended and self.knows_queued(ahead):
            self._queued_ahead = None
            return None
        # (Rows changed, or fires were queued that this process has not taken in: a backfill
        # elsewhere writes no job row, only runs, and must reach the workers all the same.)
        self._queued_ahead = ahead
        return Changes(changed, ended)

    def queued_runs(self) -> list[QueuedRun]:
        """``SQLStore.queued_runs``; right after ``changed_rows`` found changes, without a
        query (it read them)."""
        ahead, self._queued_ahead = self._queued_ahead, None
        if ahead is None:
            return super().queued_runs()
        return self._new_queued(ahead)

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
        # (Its own stop event, callback and name: a thread that outlived close() by its join's
        # bound, in a reconnect during an outage, must stop when it comes back, not go on for
        # a scheduler that took the renewed store.)
        stop, on_change, worker = self._stop, self._on_change, self.worker
        driver = psycopg_module()
        backoff = _RECONNECT_FIRST
        conn: psycopg.Connection[Any] | None = None
        failures = 0  # since the connection was last up: the first is a warning, the rest debug
        while not stop.is_set():
            try:
                if conn is None:
                    conn = self._connect()
                    conn.execute(f"LISTEN {_quote(self._channel)}")
                    backoff = _RECONNECT_FIRST
                    if failures > 1:
                        logger.warning(
                            "listening to PostgreSQL again, after %d failed attempts", failures
                        )
                    failures = 0
                    self._fire(on_change)  # notifications may have been missed while it was down
                woken = False
                for note in conn.notifies(timeout=0.5, stop_after=1):
                    woken = note.payload != worker
                if woken:
                    # Gather the notifications that came meanwhile into the one look.
                    for _ in conn.notifies(timeout=0.0):
                        pass
                    self._fire(on_change)
            except driver.Error as exc:
                if stop.is_set():
                    break
                failures += 1
                (logger.debug if failures > 1 else logger.warning)(
                    "lost the listening connection to PostgreSQL: %s", exc
                )
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
                conn = None
                stop.wait(backoff)
                backoff = min(backoff * 2, _RECONNECT_MAX)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _fire(self, callback: Callable[[], None] | None) -> None:
        if callback is None:
            return
        try:
            callback()
        except Exception:  # pragma: no cover - the Scheduler's refresh logs its own failures
            logger.exception("reading changes after a notification failed")
