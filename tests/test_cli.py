from __future__ import annotations

import subprocess
import sys

import pytest

from duetime.__main__ import main


def test_demo_prints_jobs_in_time_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    lines = [ln.strip() for ln in out.splitlines() if ln.startswith(("  0", "  1"))]
    assert lines[:3] == ["02:00  backup_database", "09:00  send_email", "09:05  refresh_cache"]
    assert "cancelled 'upsell'" in out
    assert "rescheduled 'trial-warn' from 09:00 to 11:30" in out
    assert "11:30  trial_warning" in out and "upsell_email" not in out.split("cancelled")[1]


def test_cron_command_marks_dst(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["cron", "30 2 * * *", "--tz", "Europe/Berlin", "--from", "2026-03-28", "-n", "3"])
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    assert "fixed-timed" in out[0]
    assert out[1].split()[:2] == ["2026-03-28", "02:30:00"]
    assert out[2].split()[:2] == ["2026-03-29", "03:30:00"]  # the gap: fold=0 reading
    assert "DST change UTC+01:00 -> UTC+02:00" in out[2]
    assert "01:30:00 UTC" in out[2]


def test_cron_command_shows_both_passes_of_a_repeated_hour(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["cron", "0 * * * *", "--tz", "America/New_York", "--from", "2026-11-01T00:30", "-n", "3"])
    out = capsys.readouterr().out.splitlines()
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
