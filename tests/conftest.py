"""Shared fixtures. ``fake_clock`` and ``scheduler`` come from duetime's own pytest plugin
(``duetime.testing``), which the test suite dogfoods."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from duetime import Event, Scheduler


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


Snapshot = Callable[[Scheduler], tuple[Any, ...]]


#: Real seconds a correct threaded test never comes near; only a hang would reach it.
WAIT = 10.0


def until(predicate: Callable[[], bool], timeout: float = WAIT) -> None:
    """Wait (on an Event, not a sleep) until ``predicate`` holds; fail after ``timeout``."""
    done = threading.Event()
    deadline = threading.Timer(timeout, done.set)
    deadline.start()
    try:
        while not predicate():
            if done.wait(0.001):
                raise AssertionError("condition not reached")
    finally:
        deadline.cancel()
