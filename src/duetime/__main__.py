"""The command line: ``python -m duetime demo`` and ``python -m duetime cron EXPR``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from duetime._validate import zone
from duetime.clock import FakeClock
from duetime.cron import Cron, _offset, fire_times
from duetime.errors import InvalidArgument
from duetime.scheduler import Scheduler


def demo() -> int:
    """Schedule three jobs on a fake day, run the day in a blink, show cancel and reschedule."""
    tz = zone("tz", "Europe/Berlin")
    day = datetime(2026, 3, 2, tzinfo=tz)  # a Monday
    clock = FakeClock(start=day)
    s = Scheduler(clock=clock, tz=tz)

    def job(name: str) -> None:
        print(f"  {clock.now().astimezone(tz):%H:%M}  {name}")

    print("A day of work on a FakeClock (Europe/Berlin), run with run_until():")
    s.schedule(job, day.replace(hour=9), args=("send_email",), id="send_email")
    s.schedule(job, day.replace(hour=2), args=("backup_database",), id="backup_database")
    s.schedule(job, day.replace(hour=9, minute=5), args=("refresh_cache",), id="refresh_cache")
    ran = s.run_until(day + timedelta(days=1))
    print(f"  -> {ran} jobs ran; the clock is now {clock.now().astimezone(tz):%Y-%m-%d %H:%M}")

    print("\nCancel and reschedule on the next day:")
    tomorrow = day + timedelta(days=1)
    warn = s.schedule(job, tomorrow.replace(hour=9), args=("trial_warning",), id="trial-warn")
    s.schedule(job, tomorrow.replace(hour=10), args=("upsell_email",), id="upsell")
    s.cancel("upsell")
    print("  cancelled 'upsell' (10:00)")
    warn.reschedule(tomorrow.replace(hour=11, minute=30))
    print(f"  rescheduled 'trial-warn' from 09:00 to {warn.next_run_time:%H:%M}")
    s.schedule(job, "*/30 12-13 * * *", args=("every half hour, 12-13h",), id="cron")
    ran = s.run_until(tomorrow.replace(hour=14))
    print(f"  -> {ran} jobs ran; still scheduled: {[j.id for j in s.jobs()]}")
    return 0


def cron(expr: str, tz_name: str, count: int, start: str | None) -> int:
    """Print the next fire times of a cron expression, marking those near a DST change."""
    try:
        tz = zone("--tz", tz_name)
        c = Cron(expr, tz=tz)
        if start is None:
            after = datetime.now(timezone.utc)
        else:
            after = datetime.fromisoformat(start)
            if after.tzinfo is None:
                after = after.replace(tzinfo=tz)
    except (InvalidArgument, ValueError, TypeError) as exc:
        print(f"duetime cron: {exc}", file=sys.stderr)
        return 2
    kind = "wildcard-timed" if c.wildcard_timed else "fixed-timed"
    print(f"{expr!r} in {tz_name} ({kind}), after {after.isoformat()}:")
    previous = _offset(tz, int(after.timestamp()))
    for fire in fire_times(c, after, count):
        local = fire.astimezone(tz)
        here = _offset(tz, int(fire.timestamp()))
        marks = []
        if here != previous:
            marks.append(f"DST change {_hhmm(previous)} -> {_hhmm(here)} before this fire")
        other = local.replace(fold=1 - local.fold).astimezone(timezone.utc)
        if other != fire.astimezone(timezone.utc):
            which = "first" if local.fold == 0 else "second"
            marks.append(f"repeated hour, {which} pass")
        previous = here
        utc = fire.astimezone(timezone.utc)
        mark = f"  <- {'; '.join(marks)}" if marks else ""
        print(f"  {local:%Y-%m-%d %H:%M:%S %Z (%z)}   {utc:%Y-%m-%d %H:%M:%S} UTC{mark}")
    return 0


def _hhmm(offset: int) -> str:
    sign = "-" if offset < 0 else "+"
    offset = abs(offset)
    return f"UTC{sign}{offset // 3600:02d}:{offset % 3600 // 60:02d}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m duetime``."""
    parser = argparse.ArgumentParser(prog="python -m duetime", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run a simulated day of jobs on a FakeClock")
    p_cron = sub.add_parser("cron", help="print the next fire times of a cron expression")
    p_cron.add_argument("expr", help='cron expression, e.g. "30 2 * * *"')
    p_cron.add_argument("--tz", default="UTC", help="IANA zone (default UTC)")
    p_cron.add_argument("-n", type=int, default=10, help="how many fire times (default 10)")
    p_cron.add_argument("--from", dest="start", help="ISO date-time to start after (default now)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo()
    return cron(args.expr, args.tz, args.n, args.start)


if __name__ == "__main__":
    sys.exit(main())
