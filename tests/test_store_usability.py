"""A new user's first hour with the durable stores: what they are told, and what is not lost.

A task name one letter off gets "did you mean"; a start-up script that schedules without
``id=`` is told it adds a copy at every restart; a process that exits without ``shutdown()``
still writes its finished runs' outcomes; resuming a paused job does not warn of misfires the
pause held back on purpose; triggers read as people write them.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from duetime import (
    After,
    At,
    Cron,
    FakeClock,
    FixedDelay,
    FixedRate,
    InvalidArgument,
    Poisson,
    Scheduler,
    Window,
)
from duetime._describe import describe_duration, describe_trigger

UTC = timezone.utc
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    database = request.getfixturevalue("pg_database")
    return f"{database}?schema={request.getfixturevalue('pg_schema')}"


@pytest.fixture
def opened() -> Iterator[list[Scheduler]]:
    schedulers: list[Scheduler] = []
    yield schedulers
    for s in schedulers:
        s.shutdown()


def send_report() -> None:
    """A task for the tests (importable by name)."""


# -- did you mean ---------------------------------------------------------------------------------


def test_an_unregistered_task_name_gets_did_you_mean_in_memory() -> None:
    s = Scheduler(FakeClock(T0))
    s.register("send_report", send_report)
    with pytest.raises(InvalidArgument, match=r"did you mean 'send_report'\?"):
        s.schedule("send_reprot", 60)


def test_a_worker_without_the_task_says_did_you_mean(
    url: str, opened: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    s = Scheduler(FakeClock(T0), store=url)
    opened.append(s)
    s.schedule("send_reprot", At(T0 + timedelta(minutes=1)), id="r")  # (for another process)
    worker = Scheduler(FakeClock(T0), store=url)
    opened.append(worker)
    worker.register("send_report", send_report)
    with caplog.at_level(logging.WARNING, logger="duetime"):
        worker.run_until(T0 + timedelta(minutes=5))
    assert "task 'send_reprot' is not registered in this process; it stays pending" in caplog.text
    assert "import_tasks=); did you mean 'send_report'?" in caplog.text


def test_scheduling_a_near_miss_of_a_registered_name_warns_once(
    url: str, opened: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    s = Scheduler(FakeClock(T0), store=url)
    opened.append(s)
    s.register("send_report", send_report)
    with caplog.at_level(logging.WARNING, logger="duetime"):
        s.schedule("send_reprot", 60, id="a")
        s.schedule("send_reprot", 60, id="b")
        s.schedule("refresh_cache", 60, id="c")  # (nothing near: a worker's task, no warning)
    hints = [r for r in caplog.records if "did you mean" in r.getMessage()]
    assert len(hints) == 1 and "'send_report'" in hints[0].getMessage()


# -- copies at every restart ---------------------------------------------------------------------


def test_a_startup_script_without_ids_is_told_it_adds_a_copy(
    url: str, opened: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    def start() -> Scheduler:
        s = Scheduler(FakeClock(T0), store=url)
        opened.append(s)
        s.register("send_report", send_report)
        s.schedule("send_report", "0 9 * * *", args=["daily"])
        return s

    with caplog.at_level(logging.WARNING, logger="duetime"):
        start().shutdown()
        assert "copy" not in caplog.text
        again = start()
    assert len(again) == 2  # (still added: the warning says how to declare it once)
    [warning] = [r.getMessage() for r in caplog.records if "copy of job" in r.getMessage()]
    assert "pass id=" in warning and "'send_report'" in warning


def test_jobs_that_differ_in_arguments_are_no_copies(
    url: str, opened: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    s = Scheduler(FakeClock(T0), store=url)
    opened.append(s)
    s.register("send_report", send_report)
    with caplog.at_level(logging.WARNING, logger="duetime"):
        s.schedule("send_report", "0 9 * * *", args=["a"])
        s.schedule("send_report", "0 9 * * *", args=["b"])
        s.schedule("send_report", "0 9 * * *", args=["a"], id="named")  # (an id: on purpose)
    assert "copy of job" not in caplog.text


# -- exit without shutdown() ---------------------------------------------------------------------


def test_an_exit_without_shutdown_writes_the_finished_outcomes(tmp_path: Path) -> None:
    # A real process: its runner thread is a daemon, cut off at exit, and the runner writes
    # outcomes in batches (those of runs that end within 10 ms of the last write wait). The
    # last runs' outcomes were unwritten, so they ran again after their lease.
    db = tmp_path / "jobs.db"
    script = textwrap.dedent(
        f"""
        import threading
        from duetime import Scheduler
        s = Scheduler(store={f"sqlite:///{db}"!r}, lease=600, executor="inline")
        ran = []
        last = threading.Event()
        def work(n):
            ran.append(n)
            if len(ran) == 20:
                last.set()
        s.register("work", work)
        with s.batch():
            for n in range(20):
                s.schedule("work", 0, args=[n], id=f"job-{{n}}")
        s.start()
        last.wait(30)
        # (no shutdown: the interpreter exits at once)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    s = Scheduler(store=f"sqlite:///{db}")
    try:
        assert sorted(r.state for r in s.runs(limit=100)) == ["succeeded"] * 20
    finally:
        s.shutdown()


def test_an_exit_mid_run_of_an_inline_job_says_it_will_run_again(tmp_path: Path) -> None:
    # Inline, the job runs in the runner's daemon thread, which the interpreter does not wait
    # for (a pool's threads it does: their runs finish, and their outcomes are written).
    db = tmp_path / "jobs.db"
    started = tmp_path / "started"
    script = textwrap.dedent(
        f"""
        import logging, pathlib, threading, time
        from duetime import Scheduler
        logging.basicConfig()  # (duetime logs to "duetime", with no handler of its own)
        s = Scheduler(store={f"sqlite:///{db}"!r}, lease=600, executor="inline")
        def work():
            pathlib.Path({str(started)!r}).write_text("started")
            threading.Event().wait(60)
        s.register("work", work)
        s.schedule("work", 0, id="long")
        s.start()
        deadline = time.monotonic() + 30
        while not pathlib.Path({str(started)!r}).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "without Scheduler.shutdown() while 1 run(s) go on (long@" in done.stderr
    assert "run again once their lease runs out" in done.stderr


# -- a pause is no misfire ------------------------------------------------------------------------


def ticking(url: str, opened: list[Scheduler], clock: FakeClock) -> Scheduler:
    """A scheduler on ``url`` with a job "tick" every minute, run for two minutes."""
    s = Scheduler(clock, store=url)
    opened.append(s)
    s.register("send_report", send_report)
    s.schedule("send_report", FixedRate(minutes=1), id="tick")
    s.run_until(T0 + timedelta(minutes=2))
    return s


def test_resuming_a_paused_job_does_not_warn_of_misfires(
    url: str, opened: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(T0)
    s = ticking(url, opened, clock)
    s.pause("tick")
    clock.advance(timedelta(hours=1))
    s.resume("tick")
    with caplog.at_level(logging.INFO, logger="duetime"):
        s.run_until(T0 + timedelta(hours=1, minutes=5))
    missed = [r for r in caplog.records if "missed" in r.getMessage()]
    assert missed and all(r.levelno == logging.INFO for r in missed)
    assert "held back by a pause" in missed[0].getMessage()


def test_a_resume_elsewhere_is_no_misfire_either(
    url: str, opened: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(T0)
    worker = ticking(url, opened, clock)
    admin = Scheduler(clock, store=url)
    opened.append(admin)
    admin.pause("tick")
    worker.run_until(T0 + timedelta(minutes=3))  # (reads the pause)
    clock.advance(timedelta(hours=1))
    admin.resume("tick")
    with caplog.at_level(logging.WARNING, logger="duetime"):
        worker.run_until(T0 + timedelta(hours=1, minutes=5))
    assert "missed" not in caplog.text


def test_a_worker_that_was_down_still_warns_of_misfires(
    url: str, opened: list[Scheduler], caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(T0)
    s = ticking(url, opened, clock)
    clock.advance(timedelta(hours=1))
    with caplog.at_level(logging.WARNING, logger="duetime"):
        s.run_until(T0 + timedelta(hours=1, minutes=5))
    assert "missed" in caplog.text


# -- triggers as people write them --------------------------------------------------------------


@pytest.mark.parametrize(
    ("trigger", "text"),
    [
        (Cron("0 9 * * *", tz="Europe/Berlin"), "cron '0 9 * * *' Europe/Berlin"),
        (Cron("*/5 * * * *"), "cron '*/5 * * * *'"),
        (FixedRate(minutes=5), "every 5 min"),
        (FixedRate(5400), "every 1 h 30 min"),
        (FixedRate(0.25), "every 250 ms"),
        (FixedDelay(60, initial_delay=5), "every 1 min after each run ends, first after 5 s"),
        (After(30), "after 30 s"),
        (At(datetime(2027, 3, 29, 9, 0, tzinfo=UTC)), "at 2027-03-29 09:00 UTC"),
        (
            Poisson(per_day=300, window=Window("09:00", "18:00", days="mon-fri")),
            "~300/day in mon-fri 09:00-18:00",
        ),
    ],
)
def test_triggers_read_as_people_write_them(trigger: object, text: str) -> None:
    assert describe_trigger(trigger) == text


def test_an_instant_in_an_iana_zone_is_shown_in_it() -> None:
    from zoneinfo import ZoneInfo

    when = datetime(2027, 3, 29, 9, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    assert describe_trigger(At(when)) == "at 2027-03-29 09:00 Europe/Berlin"
    assert describe_duration(timedelta(days=2, seconds=1)) == "2 d 1 s"
