from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import psycopg
import pytest

from duetime import Cron, FakeClock, FixedRate, PostgresStore, Scheduler, SQLiteStore
from duetime.__main__ import main


def fire_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The header and the fire lines of a cron preview (without its DST notes)."""
    return [ln for ln in capsys.readouterr().out.splitlines() if not ln.startswith("  --")]


def test_demo_prints_jobs_in_time_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    lines = [ln.strip() for ln in out.splitlines() if ln.startswith(("  0", "  1"))]
    assert lines[:3] == [
        "02:00 CET  backup_database",
        "09:00 CET  send_email",
        "09:05 CET  refresh_cache",
    ]
    assert "cancelled 'upsell'" in out
    assert "rescheduled 'trial-warn' from 09:00 to 11:30 CET" in out
    assert "11:30 CET  trial_warning" in out and "upsell_email" not in out.split("cancelled")[1]


def test_demo_shows_jobs_surviving_a_restart(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out.split("Durable:")[1]
    assert "stops at 08:30 CET with 3 jobs stored; it is down until 11:10 CET" in out
    assert "restarted: 3 jobs back: trial, sync, report" in out
    after = out.split("restarted")[1]
    assert "11:10 CET  trial warning for a@example.com (due 09:00 CET)" in after
    assert after.count("sync (once for a gap)") == 1  # RUN_ONCE: one run for the gap
    for hour in ("09", "10", "11"):  # RUN_ALL: every missed hour
        assert f"11:10 CET  hourly report (every missed hour) (due {hour}:00 CET)" in after
    assert (
        "6 runs recorded, each under its fire key (UTC), e.g. sync@2026-03-04T07:30:00+00:00" in out
    )


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A store with two jobs (a fixed-rate tick and a one-shot that has failed for good), in a
    SQLite file or in a PostgreSQL schema."""
    clock = FakeClock(datetime(2026, 3, 2, 8, 0, tzinfo=timezone.utc))
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
    else:
        url = f"{request.getfixturevalue('pg_database')}?schema={request.getfixturevalue('pg_schema')}"
    s = Scheduler(clock, store=url)
    s.register("ok", print)
    s.register("bad", int)
    s.schedule("ok", FixedRate(60), args=["tick"], id="tick")
    s.schedule("bad", 10, args=["not a number"], id="broken")
    s.run_for(30)
    s.shutdown()
    return url


def test_jobs_and_runs_print_tables(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", "--store", store_url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["ID", "NAME", "STATE", "NEXT", "RUN", "(UTC)", "TRIGGER"]
    assert out[1].split()[:5] == ["tick", "ok", "scheduled", "2026-03-02", "08:01:00"]
    assert out[-1] == "1 job(s)"
    assert main(["runs", "--store", store_url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:3] == ["broken@2026-03-02T08:00:10+00:00", "dead", "1"]
    assert "ValueError: invalid literal for int()" in out[1]
    assert main(["runs", "--store", store_url, "--state", "succeeded"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "0 run(s)"


def test_store_commands_change_the_store(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pause", "tick", "--store", store_url]) == 0
    assert capsys.readouterr().out == "paused tick\n"
    assert main(["pause", "tick", "--store", store_url]) == 0  # (a no-op, said as one)
    assert capsys.readouterr().out == "tick was paused already\n"
    main(["jobs", "--store", store_url, "--state", "paused"])
    assert "tick" in capsys.readouterr().out
    assert main(["resume", "tick", "--store", store_url]) == 0
    assert main(["resume", "tick", "--store", store_url]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == ["resumed tick", "tick is not paused"]
    assert main(["retry", "broken", "--store", store_url]) == 0
    assert main(["trigger", "tick", "--store", store_url]) == 0
    assert main(["cancel", "tick", "--store", store_url]) == 0
    capsys.readouterr()
    main(["jobs", "--store", store_url])
    out = capsys.readouterr().out
    assert "broken" in out and "tick" not in out


def test_jobs_shows_triggers_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    start = datetime(2026, 3, 2, 8, 0, tzinfo=timezone.utc)
    s = Scheduler(FakeClock(start), store=url)
    s.register("ok", print)
    s.schedule("ok", start + timedelta(days=2), id="once")
    s.schedule("ok", Cron("0 9 * * *", tz="Europe/Berlin", end=start + timedelta(days=9)), id="c")
    s.shutdown()
    assert main(["jobs", "--store", url]) == 0
    out = capsys.readouterr().out
    # As people write them (they read as dataclass reprs, and before that as
    # At(when=datetime.datetime(2026, ...))).
    assert "cron '0 9 * * *' Europe/Berlin until 2026-03-11 09:00 Europe/Berlin" in out
    # (In the offset it was scheduled with: the machine's zone here.)
    assert re.search(r"at 2026-03-04 (08:00 UTC|09:00 \+01:00)", out)


def test_store_commands_report_bad_ids_and_stores(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cancel", "nope", "--store", store_url]) == 1
    assert capsys.readouterr().err == "python -m duetime cancel: no job with id 'nope'\n"
    assert main(["retry", "tick", "--store", store_url]) == 1  # (live, not a dead letter)
    assert capsys.readouterr().err == "python -m duetime retry: no failed job with id 'tick'\n"
    assert main(["jobs", "--store", f"sqlite:///{tmp_path / 'missing.db'}"]) == 2
    assert "which does not exist" in capsys.readouterr().err
    # Another program's database (or an empty file) is not a store: it was given duetime's
    # tables and listed as one with no jobs.
    foreign = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(foreign)) as con:
        con.execute("CREATE TABLE users (id INTEGER)")
        con.commit()
    (tmp_path / "empty.db").touch()
    for name in ("app.db", "empty.db"):
        assert main(["jobs", "--store", f"sqlite:///{tmp_path / name}"]) == 2
        assert "which is not a duetime store" in capsys.readouterr().err
    with contextlib.closing(sqlite3.connect(foreign)) as con:
        assert con.execute("SELECT name FROM sqlite_master").fetchall() == [("users",)]
    assert (tmp_path / "empty.db").stat().st_size == 0
    assert main(["jobs", "--store", "postgresql://nowhere.invalid/app"]) == 1
    assert "connecting failed" in capsys.readouterr().err
    if store_url.startswith("postgresql:"):
        # A mistyped schema is named, not created (it would list no jobs instead).
        database = store_url.partition("?")[0]
        missing = f"{database}?schema=missing_schema"
        assert main(["jobs", "--store", missing]) == 2
        assert "has no duetime schema 'missing_schema'" in capsys.readouterr().err
        assert main(["cancel", "tick", "--store", missing]) == 2
        assert "has no duetime schema 'missing_schema'" in capsys.readouterr().err
        with psycopg.connect(database) as conn:
            found = conn.execute("SELECT to_regnamespace('missing_schema')").fetchone()
        assert found == (None,)
        # A database that does not exist is a bad --store too, as a missing file is.
        nodb = database.rpartition("/")[0] + "/duetime_no_such_database"
        assert main(["jobs", "--store", nodb]) == 2
        assert 'database "duetime_no_such_database" does not exist' in capsys.readouterr().err
    assert main(["jobs", "--store", "mysql://db/app"]) == 2
    assert "store must be a store object or a URL" in capsys.readouterr().err
    assert main(["runs", "--store", store_url, "-n", "0"]) == 2
    assert "-n must be between 1 and" in capsys.readouterr().err


def test_jobs_says_which_tasks_no_worker_has_registered(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def tick_line() -> str:
        assert main(["jobs", "--store", store_url]) == 0
        out = capsys.readouterr().out
        return next(line for line in out.splitlines() if line.startswith("tick"))

    # The process that scheduled it has shut down: nothing runs task "ok" now.
    assert tick_line().endswith("no worker has registered this task")
    worker = Scheduler(store=store_url)  # (not started: registering is what counts)
    try:
        worker.register("ok", print)
        assert "no worker" not in tick_line()
    finally:
        worker.shutdown()
    assert tick_line().endswith("no worker has registered this task")


def test_a_worker_that_imports_its_tasks_counts_as_registering_them(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    s = Scheduler(store=store_url)
    s.schedule(json.dumps, FixedRate(60), id="dumps")  # stored as "json:dumps"
    s.shutdown()
    worker = Scheduler(store=store_url, import_tasks=["json"])  # (registers nothing)
    try:
        assert main(["jobs", "--store", store_url]) == 0
        out = capsys.readouterr().out
        line = next(line for line in out.splitlines() if line.startswith("dumps"))
        assert "no worker" not in line
    finally:
        worker.shutdown()


def test_a_job_the_command_cannot_load_is_named_not_hidden(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Scheduled by a process that imported the module its retry policy names; this one has
    # not, so it cannot rebuild the job: it lists it as unreadable, with the reason, and warns,
    # instead of listing nothing.
    (tmp_path / "cli_appmod_x.py").write_text("class Declined(Exception):\n    pass\n")
    script = (
        "import sys; sys.path.insert(0, sys.argv[2])\n"
        "import cli_appmod_x\n"
        "from duetime import Scheduler, ExponentialBackoff\n"
        "s = Scheduler(store=sys.argv[1])\n"
        "s.schedule(print, '0 0 1 1 *', id='charge-42',\n"
        "           retry=ExponentialBackoff(retry_on=(cli_appmod_x.Declined,)))\n"
        "s.shutdown()\n"
    )
    subprocess.run([sys.executable, "-c", script, store_url, str(tmp_path)], check=True, timeout=60)
    assert main(["jobs", "--store", store_url]) == 0
    out, err = capsys.readouterr()
    line = next(row for row in out.splitlines() if row.startswith("charge-42"))
    assert line.split()[1:3] == ["-", "unreadable"] and "cli_appmod_x:Declined" in line
    assert "job 'charge-42' in the store cannot be loaded here" in err and "cli_appmod_x" in err


def test_cron_command_marks_dst(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cron", "30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-03-28", "-n", "3"])
    assert code == 0
    out = fire_lines(capsys)
    assert "fixed-timed" in out[0]
    assert out[1].split()[:2] == ["2026-03-28", "02:30:00"]
    assert out[2].split()[:2] == ["2026-03-29", "03:30:00"]  # the gap: fold=0 reading
    assert "DST change UTC+01:00 -> UTC+02:00" in out[2]
    assert "01:30:00 UTC" in out[2]


def test_cron_command_shows_both_passes_of_a_repeated_hour(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["cron", "0 * * * *", "--tz", "America/New_York", "--from", "2026-11-01T00:30", "-n", "3"])
    out = fire_lines(capsys)
    assert "01:00:00 EDT" in out[1] and "first pass" in out[1]
    assert "01:00:00 EST" in out[2] and "second pass" in out[2]
    assert "02:00:00 EST" in out[3]


def test_cron_command_rejects_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cron", "61 * * * *"]) == 2
    assert "'61 * * * *'" in capsys.readouterr().err
    assert main(["cron", "* * * * *", "--tz", "Mars/Olympus"]) == 2
    assert "Mars/Olympus" in capsys.readouterr().err


def test_module_entry_point_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "duetime", "demo"], capture_output=True, text=True, check=True
    )
    assert "backup_database" in proc.stdout


def preview(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(["cron", *argv]) == 0
    return capsys.readouterr().out.splitlines()


def test_preview_says_which_times_a_spring_forward_skips(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = preview(
        capsys, "*/30 2 * * *", "--tz", "Europe/Berlin", "--from", "2027-03-28", "-n", "2"
    )
    assert out[1] == (
        "  -- 2027-03-28: clocks jump from 02:00 to 03:00 (UTC+01:00 -> UTC+02:00); 02:00, 02:30 "
        "do not exist that day and are skipped (wildcard-timed)"
    )
    assert out[2].split()[:2] == ["2027-03-29", "02:00:00"]
    fixed = preview(
        capsys, "30 2 * * *", "--tz", "Europe/Berlin", "--from", "2027-03-28", "-n", "1"
    )
    assert "02:30 does not exist that day and fires 1 hour later (fixed-timed)" in fixed[1]
    assert fixed[2].split()[:2] == ["2027-03-28", "03:30:00"]


def test_preview_says_which_times_a_fall_back_repeats(capsys: pytest.CaptureFixture[str]) -> None:
    out = preview(capsys, "30 2 * * *", "--tz", "Europe/Berlin", "--from", "2027-10-31", "-n", "2")
    notes = [ln for ln in out if ln.startswith("  --")]
    assert notes == [
        "  -- 2027-10-31: clocks go back from 03:00 to 02:00 (UTC+02:00 -> UTC+01:00); 02:30 "
        "happens twice and fires once, in the first pass (fixed-timed)"
    ]
    wild = preview(
        capsys, "*/30 2 * * *", "--tz", "Europe/Berlin", "--from", "2027-10-31", "-n", "4"
    )
    assert any(
        "02:00, 02:30 happen twice and fire in both passes (wildcard-timed)" in ln for ln in wild
    )


@pytest.mark.parametrize(
    ("start", "note"),
    [
        (
            "2027-03-28T02:30",
            "note: --from 2027-03-28T02:30 does not exist in Europe/Berlin (clocks go forward); "
            "read as 2027-03-28 03:30:00 CEST (+0200), Python's PEP 495 fold=0 reading",
        ),
        (
            "2027-10-31T02:30",
            "note: --from 2027-10-31T02:30 happens twice in Europe/Berlin (clocks go back); read "
            "as the first, 2027-10-31 02:30:00 CEST (+0200)",
        ),
    ],
)
def test_a_from_in_a_gap_or_fold_says_how_it_was_read(
    capsys: pytest.CaptureFixture[str], start: str, note: str
) -> None:
    out = preview(capsys, "0 9 * * *", "--tz", "Europe/Berlin", "--from", start, "-n", "1")
    assert out[1] == f"  {note}"


BAD_ARGUMENTS = [
    (["cron", "0 9 * * *", "-n", "-1"], "-n must be between 1 and 10000, got -1"),
    (["cron", "0 9 * * *", "-n", "0"], "-n must be between 1 and 10000, got 0"),
    (["cron", "0 9 * * *", "-n", "999999999"], "-n must be between 1 and 10000, got 999999999"),
    (["cron", "L 9 * * *"], "the minute field has 'L', which belongs in a day field"),
    (
        ["cron", "0 9 * * *", "--from", "0001-01-01T00:00+05:00"],
        "--from must fall within the years",
    ),
    (["cron", "0 9 * * *", "-n", "x"], "argument -n: invalid int value: 'x'"),
    (["cron", "61 * * * *"], "'61 * * * *'"),
    (["cron", "0 9 * *"], "expr must have 5 fields"),
    (["cron", "0 0 30 2 *"], "can never match"),
    (["cron", "0 9 * * *", "--tz", "Europe/Berln"], "did you mean Europe/Berlin?"),
    (["cron", "0 9 * * *", "--from", "yesterday"], "--from must be an ISO date"),
    (["cron"], "the following arguments are required: expr"),
    (["cron", "0 9 * * *", "--bogus"], "unrecognized arguments: --bogus"),
    (["demo", "extra"], "unrecognized arguments: extra"),
    (["nonsense"], "invalid choice: 'nonsense'"),
    ([], "the following arguments are required: command"),
]


@pytest.mark.parametrize(
    ("argv", "message"), BAD_ARGUMENTS, ids=[" ".join(a[0]) or "none" for a in BAD_ARGUMENTS]
)
def test_every_bad_argument_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("python -m duetime") and message in line and "Traceback" not in line


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["jobs", "--store", "sqlite:///x.db", "--state", "bogus"],
            "python -m duetime jobs: error: argument --state: invalid choice: 'bogus'",
        ),
        (
            ["runs", "--store", "sqlite:///x.db", "-z"],
            "python -m duetime runs: error: unrecognized arguments: -z",
        ),
        (["demo", "extra"], "python -m duetime demo: error: unrecognized arguments: extra"),
    ],
)
def test_a_subcommand_s_bad_argument_is_reported_under_its_name(
    capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    # (They said "python -m duetime: error:", as if the top-level command had refused them.)
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(line)


def test_bad_arguments_exit_2_without_a_traceback_in_a_real_process() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "duetime", "cron", "0 9 * * *", "-n", "-1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "python -m duetime cron: error: -n must be between 1 and 10000, got -1 (see --help)"
    )


def test_a_reader_that_goes_away_gets_no_traceback() -> None:
    # (`python -m duetime cron ... -n 10000 | head -1` printed BrokenPipeError's traceback.)
    proc = subprocess.Popen(
        [sys.executable, "-m", "duetime", "cron", "* * * * *", "-n", "10000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"'* * * * *' in UTC")
    proc.stdout.close()
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_help_is_plain_text_and_explains_the_timing_tags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["cron", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "``" not in text and ":func:" not in text
    assert "fixed-timed     minute and hour are fixed" in text
    assert "wildcard-timed  minute or hour starts with '*'" in text
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "``" not in top and "cron" in top and "demo" in top


@pytest.mark.parametrize("start", ["9999-12-31T23:59", "0001-01-01", "0001-01-02T00:00+05:00"])
def test_a_from_at_the_ends_of_the_calendar_is_no_crash(
    capsys: pytest.CaptureFixture[str], start: str
) -> None:
    assert main(["cron", "0 9 * * *", "--tz", "Europe/Berlin", "--from", start, "-n", "2"]) == 0
    assert capsys.readouterr().out.startswith("'0 9 * * *' in Europe/Berlin")


def test_a_preview_that_reaches_the_end_of_the_calendar_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # (It stopped early, exit 0, without a word: fewer fires than -n asked for.)
    assert main(["cron", "0 0 1 1 *", "--from", "9997-06-01", "-n", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:3]] == ["9998-01-01", "9999-01-01"]
    assert lines[3] == (
        "  no more fires before the end of the calendar (the year 9999): 2 of the 5 asked for"
    )
    assert main(["cron", "0 0 29 2 mon", "--from", "9999-03-01", "-n", "3"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "  no fires before the end of the calendar (the year 9999): 0 of the 3 asked for"
    )


def test_a_change_loads_only_the_job_it_changes(
    store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A command that changes one job reads that job alone, not the whole store (a million rows
    # took seconds for a pause): the store's `only`.
    s = Scheduler(FakeClock(datetime(2026, 3, 2, 8, 0, tzinfo=timezone.utc)), store=store_url)
    s.register("ok", print)
    s.schedule("ok", FixedRate(60), id="other")
    s.shutdown()
    loaded: list[list[str]] = []
    for kind in (SQLiteStore, PostgresStore):
        original = kind.load_rows

        def spy(self: Any, original: Any = original) -> Any:
            rows = original(self)
            loaded.append(sorted(row.id for row in rows))
            return rows

        monkeypatch.setattr(kind, "load_rows", spy)
    assert main(["pause", "tick", "--store", store_url]) == 0
    assert loaded == [["tick"]]
    assert main(["jobs", "--store", store_url, "--state", "paused"]) == 0
    assert "tick" in capsys.readouterr().out
    assert loaded[-1] == ["other", "tick"]  # (the listing reads every live job)
