"""A store with something of everything for the dashboard's tests (tests/test_web*.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from duetime import FakeClock, FixedRate, NoRetry, Scheduler

BERLIN = ZoneInfo("Europe/Berlin")
#: The name that must show as text, never run.
XSS = "<script>alert(1)</script>"


def hello() -> None:
    """A task that succeeds."""


def boom() -> None:
    """A task that fails, with markup in its message."""
    raise ValueError("<b>no</b> such thing")


def fill(store: Any, extra: int = 0) -> None:
    """Schedule a few jobs into ``store`` on a FakeClock that starts now, and run 3 s of them:
    two crons in Berlin, a FixedRate named ``XSS``, a one-shot across a DST change, a job that
    dies (a dead letter), one that succeeded; and ``extra`` one-shots ``bulk-0000``...."""
    now = datetime.now(timezone.utc)
    s = Scheduler(clock=FakeClock(start=now), store=store, tz="Europe/Berlin")
    s.register("hello", hello)
    s.register("boom", boom)
    s.schedule("hello", "0 9 * * *", id="daily", name="Daily report")
    # (From November to March 28, a DST change lies before its next run.)
    s.schedule("hello", "0 9 29 3 *", id="spring", name="Spring report")
    s.schedule("hello", FixedRate(minutes=5), id="xss", name=XSS)
    s.schedule("hello", datetime(now.year + 2, 3, 29, 9, 0, tzinfo=BERLIN), id="trial")
    s.schedule("boom", timedelta(seconds=1), id="fails", retry=NoRetry())
    s.schedule("hello", timedelta(seconds=2), id="once")
    with s.batch():
        for i in range(extra):
            s.schedule("hello", timedelta(days=1, seconds=i), id=f"bulk-{i:04d}")
    s.run_for(timedelta(seconds=3))
    s.shutdown()
