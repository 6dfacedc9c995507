"""The pytest plugin that duetime installs (entry point ``pytest11``): its fixtures."""

from __future__ import annotations

import random
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from duetime import FakeClock, Scheduler
from duetime.testing import FAKE_START


def test_fake_clock_fixture_starts_on_a_monday_morning(fake_clock: FakeClock) -> None:
    assert fake_clock.now() == FAKE_START
    assert FAKE_START.weekday() == 0 and FAKE_START.hour == 8
    assert fake_clock.monotonic_ns() == 0


def test_scheduler_fixture_uses_the_fake_clock_utc_and_a_seeded_rng(
    scheduler: Scheduler, fake_clock: FakeClock
) -> None:
    assert scheduler.clock is fake_clock
    assert scheduler.tz.utcoffset(None) == timezone.utc.utcoffset(None)
    assert scheduler.rng.random() == random.Random(0).random()
    ran: list[int] = []
    scheduler.schedule(ran.append, 5, args=(1,))
    scheduler.run_for(5)
    assert ran == [1]


def test_fixtures_come_from_the_installed_plugin(pytestconfig: object) -> None:
    manager = pytestconfig.pluginmanager  # type: ignore[attr-defined]
    assert manager.has_plugin("duetime")


@pytest.mark.duetime_tz("Europe/Berlin")
def test_scheduler_fixture_takes_a_zone_from_the_marker(scheduler: Scheduler) -> None:
    job = scheduler.schedule(print, "0 9 * * *")  # a cron string is read in the zone
    assert str(scheduler.tz) == "Europe/Berlin"
    assert job.next_run_time == datetime(2026, 1, 6, 9, 0, tzinfo=ZoneInfo("Europe/Berlin"))


class TestZoneByFixture:
    @pytest.fixture
    def duetime_tz(self) -> str:
        return "Asia/Tokyo"

    def test_overriding_duetime_tz(self, scheduler: Scheduler) -> None:
        assert str(scheduler.tz) == "Asia/Tokyo"


def test_the_zone_marker_needs_one_zone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.duetime_tz()
        def test_it(scheduler):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*duetime_tz takes one zone*"])
