"""pytest plugin: ``fake_clock`` and ``scheduler`` fixtures for testing code that uses duetime.

Installed with duetime (entry point ``pytest11``), so the fixtures are available in any test
suite without a conftest import::

    def test_trial_warning(scheduler, fake_clock):
        sent = []
        scheduler.schedule(sent.append, timedelta(days=3), args=("warn",))
        scheduler.run_for(timedelta(days=3))
        assert sent == ["warn"]
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from duetime.clock import FakeClock
from duetime.scheduler import Scheduler

__all__ = ["FAKE_START", "fake_clock", "scheduler"]

#: Where ``fake_clock`` starts: a Monday, 08:00 UTC, so weekday and office-hour rules have
#: something to bite on.
FAKE_START = datetime(2026, 1, 5, 8, 0, tzinfo=timezone.utc)


@pytest.fixture
def fake_clock() -> FakeClock:
    """A ``FakeClock`` at ``FAKE_START`` (2026-01-05 08:00 UTC, a Monday)."""
    return FakeClock(start=FAKE_START)


@pytest.fixture
def scheduler(fake_clock: FakeClock) -> Iterator[Scheduler]:
    """A ``Scheduler`` on ``fake_clock``, zone UTC, ``random.Random(0)``; shut down afterwards."""
    s = Scheduler(clock=fake_clock, tz="UTC", rng=random.Random(0))
    try:
        yield s
    finally:
        s.shutdown(wait=True)
