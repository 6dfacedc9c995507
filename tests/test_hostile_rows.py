"""A stored row is data: it never runs code it was not allowed to, and never stops a process.

Anyone who can write the database can put anything in any column. Task names resolve only to
callables *defined* where they say (``myapp.tasks:os.system`` is refused even when the module
imports ``os``); a row that cannot be read is quarantined with one WARNING (``unreadable()``,
state ``unreadable`` in the command line, removed by ``cancel``), and every other job runs; a
forged lease counts as run out. The sweep below writes garbage of each kind into each column of
each table, on both stores, then opens a scheduler and runs the command line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from duetime import (
    At,
    FakeClock,
    FixedRate,
    InvalidArgument,
    Scheduler,
    SQLiteStore,
    UnreadableRow,
)
from duetime.__main__ import main
from duetime._durable import MissingTask
from duetime.stores import codec

UTC = timezone.utc
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
NS = 1_000_000_000


def ns(when: datetime) -> int:
    return int(when.timestamp()) * NS


class Backend:
    """One store under test: open schedulers on it, write its tables by hand, name its URL."""

    def __init__(self, kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.kind = kind
        self.opened: list[Scheduler] = []
        if kind == "sqlite":
            self.path = tmp_path / "jobs.db"
            self.url = f"sqlite:///{self.path}"
        else:
            database = request.getfixturevalue("pg_database")
            self.schema = request.getfixturevalue("pg_schema")
            self.dsn = database
            self.url = f"{database}?schema={self.schema}"

    def open(self, clock: FakeClock | None = None, **options: Any) -> Scheduler:
        s = Scheduler(clock or FakeClock(T0), store=self.url, **options)
        self.opened.append(s)
        return s

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """Run ``sql`` (``{p}`` for the tables' prefix, ``?`` placeholders) on the store."""
        if self.kind == "sqlite":
            with contextlib.closing(sqlite3.connect(self.path)) as conn:
                conn.execute(sql.replace("{p}", "duetime_"), params)
                conn.commit()
            return
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(
                sql.replace("{p}", f'"{self.schema}".').replace("?", "%s").encode(), params
            )

    def close_all(self) -> None:
        for s in self.opened:
            s.shutdown()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each store in turn (a test whose cases differ per store parametrizes it itself)."""
    b = Backend(request.param, request, tmp_path)
    yield b
    b.close_all()


@pytest.fixture
def evil_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package whose tasks module imports os and subprocess, as real ones do; returns the
    file a successful attack would create."""
    package = tmp_path / "dt_evil"
    package.mkdir()
    (package / "__init__.py").write_text("from dt_evil import tasks\n")
    (package / "tasks.py").write_text(
        "import os\nimport subprocess\nfrom os import system\n\n"
        "RAN = []\n\n\ndef ok(*args):\n    RAN.append(args)\n\n\n"
        "class Box:\n    def run(self):\n        pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "pwned"


# -- task names never reach code they were not allowed to -----------------------------------------


@pytest.mark.parametrize(
    ("reference", "prefixes"),
    [
        ("dt_evil.tasks:os.system", ("dt_evil.tasks",)),
        ("dt_evil.tasks:system", ("dt_evil.tasks",)),  # (imported by name: defined in posix)
        ("dt_evil.tasks:subprocess.call", ("dt_evil",)),
        ("dt_evil:tasks.os.system", ("dt_evil",)),
        ("dt_evil.tasks:Box.__init__.__globals__", ("dt_evil",)),
        ("dt_evil.tasks:Box.run.__globals__", ("dt_evil",)),
        ("os:system", ("dt_evil",)),
        ("duetime.scheduler:os.system", ("duetime",)),
    ],
)
def test_a_stored_name_resolves_only_to_a_callable_defined_where_it_says(
    evil_package: Path, reference: str, prefixes: tuple[str, ...]
) -> None:
    assert codec.resolve_task(reference, {}, prefixes) is None


def test_a_callable_defined_in_an_allowed_module_still_resolves(evil_package: Path) -> None:
    import dt_evil.tasks  # type: ignore[import-not-found]

    assert codec.resolve_task("dt_evil.tasks:ok", {}, ("dt_evil",)) is dt_evil.tasks.ok
    assert codec.resolve_task("dt_evil.tasks:Box.run", {}, ("dt_evil",)) is dt_evil.tasks.Box.run


@pytest.mark.parametrize("allowed", ["dt_evil.tasks", "dt_evil", "duetime"])
def test_a_tampered_task_never_runs_through_an_allowed_module(
    backend: Backend, evil_package: Path, allowed: str
) -> None:
    s = backend.open(import_tasks=["dt_evil"])
    s.schedule("dt_evil.tasks:ok", At(T0 + timedelta(minutes=1)), args=["x"], id="victim")
    s.shutdown()
    task = "duetime.scheduler:os.system" if allowed == "duetime" else "dt_evil.tasks:os.system"
    backend.execute(
        "UPDATE {p}jobs SET task = ?, args = ? WHERE id = 'victim'",
        (task, json.dumps({"args": [f"touch {evil_package}"], "kwargs": {}})),
    )
    t = backend.open(import_tasks=[allowed])
    t.run_until(T0 + timedelta(hours=1))
    assert not evil_package.exists()
    victim = t.get("victim")
    assert victim is not None and isinstance(victim.func, MissingTask)  # pending, never run


def test_a_tampered_dead_letter_never_runs_when_retried(
    backend: Backend, evil_package: Path
) -> None:
    s = backend.open(import_tasks=["dt_evil"])
    s.register("boom", _boom)
    s.schedule("boom", At(T0 + timedelta(minutes=1)), id="victim")
    s.run_until(T0 + timedelta(minutes=2))
    assert [f.job.id for f in s.failed()] == ["victim"]
    s.shutdown()
    _rewrite_dead_job(
        backend,
        "victim",
        task="dt_evil.tasks:os.system",
        args=json.dumps({"args": [f"touch {evil_package}"], "kwargs": {}}),
    )
    t = backend.open(import_tasks=["dt_evil.tasks"])
    t.register("boom", _boom)
    t.retry_failed("victim")
    t.run_until(T0 + timedelta(hours=1))
    assert not evil_package.exists()


def _boom() -> None:
    raise RuntimeError("boom")


def _rewrite_dead_job(backend: Backend, id: str, **fields: Any) -> None:
    """Change fields of the job a dead letter keeps (as JSON, in the dead table)."""
    if backend.kind == "sqlite":
        with contextlib.closing(sqlite3.connect(backend.path)) as conn:
            (text,) = conn.execute("SELECT job FROM duetime_dead WHERE id = ?", (id,)).fetchone()
    else:
        import psycopg

        with psycopg.connect(backend.dsn) as conn:
            row = conn.execute(
                f'SELECT job FROM "{backend.schema}".dead WHERE id = %s'.encode(), (id,)
            ).fetchone()
            assert row is not None
            text = row[0]
    record = json.loads(text)
    record.update(fields)
    backend.execute("UPDATE {p}dead SET job = ? WHERE id = ?", (json.dumps(record), id))


# -- the tamper sweep -----------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_ARGS = '{"args":' + DEEP + ',"kwargs":{}}'

# Garbage of each kind for each column of the jobs table. Text for text columns (both stores);
# the integer columns take text, floats and huge numbers on SQLite, which keeps any type in
# any column, and out-of-range integers on PostgreSQL, whose columns are typed. (NOT NULL
# holds on both: NULL only where a column takes it.)
TEXT_GARBAGE = ["{bad", "[1]", "[[1,2,3]]", "", DEEP, '{"$dict":[1,2]}', '"x"']
JOB_TEXT = {
    "name": [],
    "task": ["", "no_such_module:f"],
    "args": [
        *TEXT_GARBAGE,
        DEEP_ARGS,
        '{"args":[],"kwargs":[1]}',
        '{"args":[{"$dict":[1,2]}],"kwargs":{}}',
        '{"args":[{"$decimal":"x"}],"kwargs":{}}',
    ],
    "trigger": [*TEXT_GARBAGE, '{"type":"cron","expr":"bad","tz":null,"start":null,"end":null}'],
    "retry": [*TEXT_GARBAGE, '{"type":"fixed","delays":[-1],"retry_on":[]}'],
    "options": [*TEXT_GARBAGE, '{"misfire":"never"}', '{"jitter_ns":"x"}', '{"executor":[1]}'],
    "state": ["", "exploded"],
    "sides": [*TEXT_GARBAGE, '[{"key":1,"base":"x","attempt":1,"delay":null,"due":null}]'],
    "last_error": [],
}
JOB_INTEGER_SQLITE: list[object] = ["high", 1e20, 1.5, 2**63 - 1, -(2**63), -1]
JOB_INTEGERS = ["priority", "next_base", "next_due", "catchup", "attempt", "runs", "failures"]
JOB_INTEGER_PG = {
    "priority": [2**31 - 1, -(2**31)],
    "next_base": [2**63 - 1, -(2**63)],
    "next_due": [2**63 - 1, -(2**63)],
    "catchup": [7, -1],
    "attempt": [2**31 - 1, -1],
    "runs": [-1],
    "failures": [-1],
}


def _job_cases() -> list[Any]:
    cases = []
    for column, values in JOB_TEXT.items():
        for value in values:
            cases.append(pytest.param("both", column, value, id=f"{column}={value[:20]!r}"))
        cases.append(pytest.param("sqlite", column, 12345, id=f"{column}=12345"))
        cases.append(pytest.param("sqlite", column, b"\x00\xff", id=f"{column}=blob"))
    for column in JOB_INTEGERS:
        for odd in JOB_INTEGER_SQLITE:
            cases.append(pytest.param("sqlite", column, odd, id=f"{column}={odd!r}"))
        for number in JOB_INTEGER_PG[column]:
            cases.append(pytest.param("postgres", column, number, id=f"{column}={number!r}"))
    cases.append(pytest.param("sqlite", "rev", "abc", id="rev='abc'"))
    cases.append(pytest.param("sqlite", "id", None, id="id=NULL"))
    cases.append(pytest.param("sqlite", "id", 42, id="id=42"))
    return per_store(cases)


def per_store(cases: list[Any]) -> list[Any]:
    """``(where, *values)`` cases as ``(store, *values)``: "both" on each store, else on the one
    named (the other's typed column cannot hold the value)."""
    out = []
    for case in cases:
        where, *values = case.values
        for kind in ("sqlite", "postgres") if where == "both" else (where,):
            out.append(pytest.param(kind, *values, id=f"{kind}-{case.id}"))
    return out


def _two_jobs(backend: Backend, calls: list[str]) -> Scheduler:
    s = backend.open()
    s.register("record", calls.append)
    s.schedule("record", FixedRate(minutes=10), args=["good"], id="good")
    s.schedule("record", FixedRate(minutes=10), args=["bad"], id="bad")
    return s


def _check_every_other_job_runs_and_the_cli_copes(
    backend: Backend, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> set[str]:
    """Open a scheduler on the tampered store: it opens, runs the good job, and reports the
    bad one (unless it still reads); the command line lists, cancels. Returns the ids
    reported unreadable."""
    calls: list[str] = []
    with caplog.at_level(logging.WARNING, logger="duetime"):
        t = backend.open()
        t.register("record", calls.append)
        t.run_until(T0 + timedelta(hours=1))
        assert "good" in calls
        unreadable = {u.id for u in t.unreadable() if u.table == "jobs"}
        # Never silently gone: reported (unreadable, or ended with a WARNING: a next fire past
        # what a store holds), or read (odd but readable, under an id SQLite made text).
        assert unreadable or "bad" in t or "42" in t or "job 'bad'" in caplog.text
        t.shutdown()
    for id in unreadable:
        assert f"{id!r} in the store cannot be loaded here" in caplog.text
    assert main(["jobs", "--store", backend.url]) == 0
    out = capsys.readouterr().out
    for id in unreadable:
        assert any(line.startswith(id) and " unreadable " in line for line in out.splitlines()), out
    assert main(["jobs", "--store", backend.url, "--state", "dead"]) == 0
    assert main(["runs", "--store", backend.url]) == 0
    for id in unreadable:
        assert main(["cancel", id, "--store", backend.url]) == 0
    capsys.readouterr()
    if unreadable:
        again = backend.open()
        assert [u for u in again.unreadable() if u.table == "jobs"] == []
        again.shutdown()
    return unreadable


@pytest.mark.parametrize(("backend", "column", "value"), _job_cases(), indirect=["backend"])
def test_a_broken_job_row_is_quarantined_and_every_other_job_runs(
    backend: Backend,
    column: str,
    value: Any,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    s = _two_jobs(backend, [])
    s.shutdown()
    backend.execute(f"UPDATE {{p}}jobs SET {column} = ? WHERE id = 'bad'", (value,))
    _check_every_other_job_runs_and_the_cli_copes(backend, caplog, capsys)


def test_the_reported_values_name_the_store_table_and_id(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    s = _two_jobs(backend, [])
    s.shutdown()
    backend.execute("UPDATE {p}jobs SET options = '[1]' WHERE id = 'bad'")
    with caplog.at_level(logging.WARNING, logger="duetime"):
        t = backend.open()
    [bad] = t.unreadable()
    assert bad == UnreadableRow("jobs", "bad", bad.reason) and "options" in bad.reason
    [record] = [r for r in caplog.records if "'bad'" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "table jobs" in record.getMessage()
    assert ("jobs.db" if backend.kind == "sqlite" else backend.schema) in record.getMessage()
    assert [j.id for j in t.jobs()] == ["good"]


def test_a_row_broken_while_a_process_runs_is_quarantined_at_its_poll(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []
    s = _two_jobs(backend, calls)
    backend.execute("UPDATE {p}jobs SET sides = '{bad', rev = rev + 1000 WHERE id = 'bad'")
    with caplog.at_level(logging.WARNING, logger="duetime"):
        s.run_until(T0 + timedelta(hours=1))
    assert "good" in calls
    assert [u.id for u in s.unreadable()] == ["bad"]


@pytest.mark.parametrize(
    ("backend", "column", "value"),
    per_store(
        [
            pytest.param("sqlite", "due", "abc", id="due"),
            pytest.param("sqlite", "attempt", "x", id="attempt"),
            pytest.param("sqlite", "key", None, id="key"),
            pytest.param("sqlite", "lease_until", "abc", id="lease_until"),
            pytest.param("both", "state", "exploded", id="state"),
            pytest.param("sqlite", "started", 1e20, id="started"),
            pytest.param("sqlite", "worker", 7.5, id="worker"),
        ]
    ),
    indirect=["backend"],
)
def test_broken_run_records_are_worked_around(
    backend: Backend, column: str, value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[str] = []
    s = _two_jobs(backend, calls)
    s.backfill("bad", T0 - timedelta(minutes=30), T0)  # (queued runs)
    s.run_until(T0 + timedelta(minutes=1))
    s.backfill("bad", T0 - timedelta(hours=2), T0 - timedelta(hours=1))
    s.shutdown()
    backend.execute(f"UPDATE {{p}}runs SET {column} = ?", (value,))
    t = backend.open()
    t.register("record", calls.append)
    t.run_until(T0 + timedelta(hours=1))
    assert calls.count("good") >= 2
    t.runs()
    t.shutdown()
    assert main(["runs", "--store", backend.url]) == 0
    assert main(["jobs", "--store", backend.url]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    ("backend", "column", "value"),
    per_store(
        [
            pytest.param("both", "job", "{bad", id="job-not-json"),
            pytest.param("both", "job", DEEP, id="job-deep"),
            pytest.param("both", "job", "[1]", id="job-list"),
            pytest.param("sqlite", "due", "abc", id="due"),
            pytest.param("sqlite", "failed_at", 1e20, id="failed_at"),
            pytest.param("sqlite", "attempts", "x", id="attempts"),
            pytest.param("sqlite", "error", b"\xff", id="error"),
        ]
    ),
    indirect=["backend"],
)
def test_broken_dead_letters_are_quarantined(
    backend: Backend, column: str, value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    s = backend.open()
    s.register("boom", _boom)
    for id in ("dead-good", "dead-bad"):
        s.schedule("boom", At(T0 + timedelta(minutes=1)), id=id)
    s.run_until(T0 + timedelta(minutes=2))
    s.shutdown()
    backend.execute(f"UPDATE {{p}}dead SET {column} = ? WHERE id = 'dead-bad'", (value,))
    t = backend.open()
    t.register("boom", _boom)
    assert [f.job.id for f in t.failed()] == ["dead-good"]
    assert [(u.table, u.id) for u in t.unreadable()] == [("dead", "dead-bad")]
    t.shutdown()
    assert main(["jobs", "--store", backend.url, "--state", "dead"]) == 0
    out = capsys.readouterr().out
    assert "dead-good" in out and "last error: RuntimeError: boom" in out


def test_dead_options_of_the_wrong_shape_are_quarantined(backend: Backend) -> None:
    s = backend.open()
    s.register("boom", _boom)
    s.schedule("boom", At(T0 + timedelta(minutes=1)), id="dead-bad")
    s.run_until(T0 + timedelta(minutes=2))
    s.shutdown()
    _rewrite_dead_job(backend, "dead-bad", options="[1]")
    t = backend.open()
    assert t.failed() == []
    assert [(u.table, u.id) for u in t.unreadable()] == [("dead", "dead-bad")]


@pytest.mark.parametrize(
    ("backend", "column", "value"),
    per_store(
        [
            pytest.param("both", "tasks", DEEP, id="tasks-deep"),
            pytest.param("both", "tasks", "{bad", id="tasks-not-json"),
            pytest.param("both", "tasks", "[1]", id="tasks-list"),
            pytest.param("both", "tasks", '{"names": 5}', id="tasks-names"),
            pytest.param("sqlite", "until", "abc", id="until"),
        ]
    ),
    indirect=["backend"],
)
def test_broken_worker_records_name_no_task(
    backend: Backend, column: str, value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    s = backend.open()
    s.register("record", print)
    s.schedule("record", FixedRate(minutes=10), id="tick")
    backend.execute(f"UPDATE {{p}}workers SET {column} = ?", (value,))
    assert main(["jobs", "--store", backend.url]) == 0
    assert "tick" in capsys.readouterr().out


# -- forged leases ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "lease"),
    per_store(
        [
            pytest.param("both", 2**63 - 1, id="year-2262"),
            pytest.param("sqlite", "forever", id="text"),
            pytest.param("both", None, id="null"),
        ]
    ),
    indirect=["backend"],
)
def test_a_forged_lease_counts_as_run_out_and_the_run_is_taken_over(
    backend: Backend, lease: Any, caplog: pytest.LogCaptureFixture
) -> None:
    due = T0 + timedelta(minutes=1)
    s = backend.open()
    s.register("record", print)
    s.schedule("record", At(due), args=["lonely"], id="lonely")
    s.shutdown()
    key = f"lonely@{due.isoformat()}"
    backend.execute("UPDATE {p}jobs SET state = 'running' WHERE id = 'lonely'")
    backend.execute(
        "INSERT INTO {p}runs (key, job_id, due, state, attempt, worker, lease_until, started) "
        "VALUES (?, 'lonely', ?, 'running', 1, 'ghost:1:000000', ?, ?)",
        (key, ns(due), lease, ns(due)),
    )
    calls: list[str] = []
    with caplog.at_level(logging.WARNING, logger="duetime"):
        t = backend.open()
        t.register("record", calls.append)
        t.run_until(T0 + timedelta(minutes=30))
    assert calls == ["lonely"]
    if lease is not None:
        assert "beyond any a process takes" in caplog.text
    [run] = t.runs("lonely")
    assert (run.state, run.attempt) == ("succeeded", 2)


# -- bad paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "store",
    ["sqlite:///a\x00b.db", "postgresql://u@localhost/d\x00b"],
    ids=["sqlite", "postgres"],
)
def test_a_nul_in_a_store_url_is_invalid_argument(store: str) -> None:
    with pytest.raises(InvalidArgument, match="NUL"):
        Scheduler(store=store)


def test_a_nul_in_a_sqlite_path_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgument, match=r"path must not contain a NUL"):
        SQLiteStore("a\x00b.db")


def test_arguments_nested_past_the_bound_are_refused_at_schedule(backend: Backend) -> None:
    s = backend.open()
    s.register("record", print)
    deep: list[Any] = []
    for _ in range(codec.ARGS_DEPTH_MOST + 1):
        deep = [deep]
    with pytest.raises(InvalidArgument, match=r"nested too deeply"):
        s.schedule("record", 60, args=[deep], id="deep")
    assert "deep" not in s


# -- the dashboard ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "table", "column", "value"),
    per_store(
        [
            pytest.param("both", "jobs", "trigger", DEEP, id="trigger-deep"),
            pytest.param("both", "jobs", "trigger", "{bad", id="trigger-not-json"),
            pytest.param("both", "jobs", "options", "[1]", id="options-list"),
            pytest.param("sqlite", "jobs", "next_due", "abc", id="next_due-text"),
            pytest.param("sqlite", "jobs", "priority", "high", id="priority-text"),
            pytest.param("sqlite", "jobs", "runs", 1e20, id="runs-float"),
            pytest.param("both", "dead", "job", DEEP, id="dead-deep"),
            pytest.param("sqlite", "dead", "due", "abc", id="dead-due-text"),
            pytest.param("sqlite", "runs", "due", "abc", id="runs-due-text"),
            pytest.param("sqlite", "runs", "started", "abc", id="runs-started-text"),
            pytest.param("both", "workers", "tasks", DEEP, id="workers-deep"),
            pytest.param("sqlite", "workers", "until", "abc", id="workers-until-text"),
        ]
    ),
    indirect=["backend"],
)
def test_the_dashboard_shows_every_page_over_broken_rows(
    backend: Backend, table: str, column: str, value: Any
) -> None:
    starlette = pytest.importorskip("starlette.testclient")
    from duetime.web import create_app

    s = backend.open()
    s.register("record", print)
    s.register("boom", _boom)
    s.schedule("record", FixedRate(minutes=10), args=["bad"], id="bad")
    s.schedule("boom", At(T0 + timedelta(minutes=1)), id="dead")
    s.run_until(T0 + timedelta(minutes=2))
    s.shutdown()
    backend.execute(f"UPDATE {{p}}{table} SET {column} = ?", (value,))
    with starlette.TestClient(create_app(backend.url)) as c:
        for page in (
            "/jobs",
            "/jobs/bad",
            "/jobs/dead",
            "/runs",
            "/dead",
            "/workers",
            "/api/jobs",
            "/api/jobs/bad",
            "/api/runs",
            "/api/dead",
            "/api/workers",
            "/metrics",
        ):
            answer = c.get(page)
            assert answer.status_code == 200, (page, answer.text[:300])
