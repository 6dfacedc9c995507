"""Shared fixtures. ``fake_clock`` comes from duetime's own pytest plugin (``duetime.testing``),
which the test suite dogfoods; ``scheduler`` is the plugin's, run three times: on the default
``MemoryStore``, on a ``SQLiteStore`` file and on a ``PostgresStore`` (a schema of its own in the
session's throwaway database), so that every test written against it checks the stores behave
alike. A test about what only memory does says so with
``@pytest.mark.memory_only("why")``."""

from __future__ import annotations

import itertools
import os
import random
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import pytest

from duetime import Event, FakeClock, InvalidArgument, PostgresStore, Scheduler, SQLiteStore
from duetime.stores import codec

# For tests of duetime's own pytest plugin (tests/test_testing.py).
pytest_plugins = ["pytester"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "memory_only(reason): the test is about MemoryStore; skipped on SQL stores"
    )
    config.addinivalue_line(
        "markers", "sqlite_only: the test looks inside a SQLite file; not run on PostgreSQL"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test marked ``sqlite_only`` is not collected for the PostgreSQL store."""
    items[:] = [
        item
        for item in items
        if not (
            item.get_closest_marker("sqlite_only") is not None
            and "postgres" in getattr(getattr(item, "callspec", None), "params", {}).values()
        )
    ]


# -- PostgreSQL -------------------------------------------------------------------------------------

#: The server the PostgreSQL tests use (a postgresql:// URL); each test session creates a
#: database of its own on it.
PG_DSN = os.environ.get("DUETIME_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def _pg_unavailable(why: str) -> NoReturn:
    message = (
        f"PostgreSQL tests need a server: {why}. Start PostgreSQL (trust or password auth) and "
        f"set DUETIME_TEST_PG_DSN (now {PG_DSN!r}) to a postgresql:// URL whose user may CREATE DATABASE; "
        f'install the driver with pip install -e ".[test,postgres]"'
    )
    if os.environ.get("CI"):
        pytest.fail(f"under CI the PostgreSQL tests must run. {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A throwaway database on the test server, dropped at the end of the session; its URL."""
    try:
        import psycopg
        from psycopg import sql
    except ImportError:
        _pg_unavailable("psycopg is not installed")
    try:
        admin = psycopg.connect(PG_DSN, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        _pg_unavailable(f"could not connect ({str(exc).strip()})")
    name = f"duetime_test_{os.getpid()}_{secrets.token_hex(3)}"
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield urlunsplit(urlsplit(PG_DSN)._replace(path=f"/{name}"))
        finally:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


_SCHEMAS = itertools.count()


@pytest.fixture
def pg_schema(pg_database: str) -> str:
    """A schema name no other test in this session uses (created on first use)."""
    return f"t{next(_SCHEMAS)}_{secrets.token_hex(2)}"


@pytest.fixture
def pg_store(pg_database: str, pg_schema: str) -> Callable[..., PostgresStore]:
    """Make PostgresStores on the test database, all on this test's schema."""

    def make(**options: Any) -> PostgresStore:
        return PostgresStore(pg_database, schema=pg_schema, **options)

    return make


_TASK_NAMES = itertools.count()


def _registering(s: Scheduler) -> None:
    """Let the tests' closures and lambdas be scheduled on a durable store: each one is
    registered as a task first (a store keeps task names, never functions)."""
    schedule = s.schedule

    def schedule_registered(func: Any, /, *args: Any, **kwargs: Any) -> Any:
        if callable(func):
            try:
                codec.task_reference(func, s.tasks())
            except InvalidArgument:
                s.register(f"test-task-{next(_TASK_NAMES)}", func)
        return schedule(func, *args, **kwargs)

    s.schedule = schedule_registered  # type: ignore[method-assign, assignment]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def scheduler(
    fake_clock: FakeClock, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Scheduler]:
    """The plugin's ``scheduler`` (FakeClock, ``random.Random(0)``, zone from ``duetime_tz``),
    on each store in turn."""
    marker = request.node.get_closest_marker("duetime_tz")
    tz = marker.args[0] if marker is not None else request.getfixturevalue("duetime_tz")
    if request.param == "memory":
        s = Scheduler(clock=fake_clock, tz=tz, rng=random.Random(0))
    else:
        only = request.node.get_closest_marker("memory_only")
        if only is not None:
            pytest.skip(f"memory only: {only.args[0]}")
        store: Any
        if request.param == "sqlite":
            store = SQLiteStore(tmp_path / "j.db")
        else:
            store = request.getfixturevalue("pg_store")()
        s = Scheduler(clock=fake_clock, tz=tz, rng=random.Random(0), store=store)
        _registering(s)
    try:
        yield s
    finally:
        s.shutdown(wait=True)


class Recorder:
    """Collects events from a scheduler; ``of(T)`` filters by type."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


@pytest.fixture
def events(scheduler: Scheduler) -> Recorder:
    """Every event the ``scheduler`` fixture emits."""
    rec = Recorder()
    scheduler.subscribe(rec)
    return rec


@pytest.fixture
def calls() -> list[Any]:
    """A list jobs append to."""
    return []


def snapshot(s: Scheduler) -> tuple[Any, ...]:
    """Everything observable about a scheduler that bad input must not change."""
    st = s.stats()
    clock: Any = s.clock  # (a FakeClock: read in nanoseconds)
    return (
        [(j.id, j.state, j.next_run_time, j.priority) for j in s.jobs()],
        len(s),
        s.next_run_time(),
        st.live_entries,
        st.stale_entries,
        st.started,
        clock.time_ns(),
        clock.monotonic_ns(),
        # (A refused call must not draw from it: a seeded simulation would go another way.)
        s.rng.getstate(),
    )


#: Real seconds a correct threaded test never comes near; only a hang would reach it.
WAIT = 10.0


def until(
    predicate: Callable[[], bool],
    timeout: float = WAIT,
    what: str | None = None,
    every: float = 0.001,
    explain: Callable[[], str] | None = None,
) -> None:
    """Poll ``predicate`` (yielding ``every`` seconds at a time: 1 ms) until it holds; fail
    after ``timeout`` real seconds, which only a hang reaches, saying ``what`` was awaited and,
    with ``explain``, what it returns (the state of worker processes, say)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            message = f"{what or repr(predicate)} not reached within {timeout} s"
            if explain is not None:
                message = f"{message}\n{explain()}"
            raise AssertionError(message)
        pause.wait(every)


def fresh_python(code: str) -> list[str]:
    """Run ``code`` in a new interpreter (nothing imported yet: what ``import duetime`` alone
    imports can be seen there); the words it printed. Fails with its stderr if it fails."""
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split()
