"""SaaS trial warnings that survive a restart: the jobs live in a SQLite file.

The app schedules a warning 3 days before each trial ends (09:00 in the customer's zone), and a
nightly cleanup. Then it is deployed (stopped) and comes back two days later: the jobs come back
from the file, the warning that fell due while it was down is sent once, late, and the nightly
cleanup runs once for the missed nights (its misfire policy, RUN_ONCE). Each send carries its fire
key, which a real app would store beside the email it sent, so that a retry or a second worker
never sends twice. Time is a FakeClock, so the two days pass in a blink.
"""

from __future__ import annotations

import tempfile
from datetime import date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from duetime import FakeClock, Scheduler, SQLiteStore, current_run

UTC = ZoneInfo("UTC")
clock = FakeClock(start=datetime(2026, 3, 9, 12, 0, tzinfo=UTC))
sent: dict[str, str] = {}  # fire key -> customer: the idempotency record a real app keeps


def send_trial_warning(customer: str, trial_end: date) -> None:
    run = current_run()
    assert run is not None
    if run.key in sent:  # a second attempt of the same fire: already done
        return
    sent[run.key] = customer
    print(f"  {clock.now():%a %H:%M} UTC  warn {customer}: trial ends {trial_end} ({run.key})")


def cleanup() -> None:
    print(f"  {clock.now():%a %H:%M} UTC  nightly cleanup")


def open_app(path: Path) -> Scheduler:
    """What the app does at every start: open the store and register its tasks."""
    s = Scheduler(clock=clock, store=SQLiteStore(path))
    s.register("send_trial_warning", send_trial_warning)
    s.register("cleanup", cleanup)
    return s


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "jobs.db"
        s = open_app(path)
        trials = {
            "alice": (date(2026, 3, 13), ZoneInfo("Europe/Berlin")),
            "bob": (date(2026, 3, 16), ZoneInfo("America/New_York")),
        }
        for customer, (end, zone) in trials.items():
            warn_at = datetime.combine(end - timedelta(days=3), time(9, 0), tzinfo=zone)
            s.schedule(
                "send_trial_warning",
                warn_at,
                args=[customer, end],
                id=f"trial-warning-{customer}",
            )
        s.schedule("cleanup", "0 3 * * *", id="cleanup")
        print(f"Monday: {len(s)} jobs scheduled into {path.name}; the app is stopped for a deploy")
        s.shutdown()

        clock.advance(timedelta(days=2))  # down until Wednesday noon
        s = open_app(path)
        print(f"Wednesday: restarted, {len(s)} jobs back from the file: {[j.id for j in s.jobs()]}")
        s.run_until(datetime(2026, 3, 14, 12, 0, tzinfo=UTC))
        print(f"By Saturday: {len(sent)} warnings sent, each once; {len(s)} job left")
        assert sorted(sent.values()) == ["alice", "bob"]
        assert [j.id for j in s.jobs()] == ["cleanup"]
        done = {r.key.split("@")[0] for r in s.runs(state="succeeded", limit=1000)}
        assert done == {"trial-warning-alice", "trial-warning-bob", "cleanup"}
        s.shutdown()


if __name__ == "__main__":
    main()
