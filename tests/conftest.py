"""Shared fixtures. ``fake_clock`` comes from duetime's own pytest plugin (``duetime.testing``),
which the test suite dogfoods; ``scheduler`` is the plugin's, run twice: on the default
``MemoryStore`` and on a ``SQLiteStore`` file, so that every test written against it checks both
stores behave alike. A test about what only memory does says so with
``@pytest.mark.memory_only("why")``."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from duetime import Event, FakeClock, InvalidArgument, Scheduler, SQLiteStore
from duetime.stores import codec

# For tests of duetime's own pytest plugin (tests/test_testing.py).
pytest_plugins = ["pytester"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "memory_only(reason): the test is about MemoryStore; skipped on SQLiteStore"
    )


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

    s.schedule = schedule_registered  # type: ignore[method-assign]


@pytest.fixture(params=["memory", "sqlite"])
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
        s = Scheduler(
            clock=fake_clock, tz=tz, rng=random.Random(0), store=SQLiteStore(tmp_path / "j.db")
        )
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
    return (
        [(j.id, j.state, j.next_run_time, j.priority) for j in s.jobs()],
        len(s),
        s.next_run_time(),
        st.live_entries,
        st.stale_entries,
        st.started,
        s.clock.time_ns(),
        s.clock.monotonic_ns(),
    )


#: Real seconds a correct threaded test never comes near; only a hang would reach it.
WAIT = 10.0


def until(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    """Poll ``predicate`` (yielding 1 ms at a time) until it holds; fail after ``timeout``
    real seconds, which only a hang reaches."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout} s: {predicate!r}")
        pause.wait(0.001)
