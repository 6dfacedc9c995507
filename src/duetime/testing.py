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

__all__ = ["FAKE_START", "duetime_tz", "fake_clock", "pytest_configure", "scheduler"]

#: Where ``fake_clock`` starts: a Monday, 08:00 UTC, so weekday and office-hour rules have
#: something to bite on.
FAKE_START = datetime(2026, 1, 5, 8, 0, tzinfo=timezone.utc)


@pytest.fixture
def duetime_tz() -> str:
    """The ``scheduler`` fixture's zone: ``"UTC"``. Override this fixture (or use the
    ``duetime_tz`` marker) to test in another zone."""
    return "UTC"


@pytest.fixture
def fake_clock() -> FakeClock:
    """A ``FakeClock`` at ``FAKE_START`` (2026-01-05 08:00 UTC, a Monday)."""
    return FakeClock(start=FAKE_START)


def pytest_configure(config: pytest.Config) -> None:
    """Declare the ``duetime_tz`` marker (so ``--strict-markers`` accepts it)."""
    config.addinivalue_line(
        "markers", "duetime_tz(zone): the zone of the scheduler fixture (default UTC)"
    )


@pytest.fixture
def scheduler(fake_clock: FakeClock, request: pytest.FixtureRequest) -> Iterator[Scheduler]:
    """A ``Scheduler`` on ``fake_clock``, ``random.Random(0)``; shut down afterwards.

    Its zone is UTC unless the test says otherwise, with a marker or by parametrizing the
    ``duetime_tz`` fixture::

        @pytest.mark.duetime_tz("Europe/Berlin")
        def test_office_hours(scheduler): ...
    """
    marker = request.node.get_closest_marker("duetime_tz")
    if marker is not None and len(marker.args) != 1:
        raise pytest.UsageError(
            f"@pytest.mark.duetime_tz takes one zone, e.g. duetime_tz('Europe/Berlin'), got "
            f"{marker.args!r}"
        )
    tz = marker.args[0] if marker is not None else request.getfixturevalue("duetime_tz")
    s = Scheduler(clock=fake_clock, tz=tz, rng=random.Random(0))
    try:
        yield s
    finally:
        s.shutdown(wait=True)
