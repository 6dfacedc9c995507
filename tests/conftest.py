"""Shared fixtures. ``fake_clock`` and ``scheduler`` come from duetime's own pytest plugin
(``duetime.testing``), which the test suite dogfoods."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from duetime import Event, Scheduler

# For tests of duetime's own pytest plugin (tests/test_testing.py).
pytest_plugins = ["pytester"]


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
