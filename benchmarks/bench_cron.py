"""Cron figures: a simulated year of a per-minute cron, next to croniter's own loop.

duetime runs `*/1 * * * *` (525 600 fires) in Europe/Berlin with run_until on a FakeClock, DST
policy and all; croniter's get_next loop walks the same range in the same zone. The ratio is
duetime's overhead over croniter (target <= 1.5x).

Run: python benchmarks/bench_cron.py (nox -s bench).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from _common import median_times, parse, table
from croniter import croniter

from duetime import Cron, FakeClock, Scheduler

TZ = ZoneInfo("Europe/Berlin")


def main() -> None:
    args = parse(__doc__ or "")
    days = 7 if args.quick else 365
    start = datetime(2026, 1, 1, tzinfo=TZ)
    end = start + timedelta(days=days)
    expected = days * 24 * 60  # one per minute; the DST days have 23 and 25 hours
    counts: dict[str, int] = {}

    def with_duetime() -> None:
        clock = FakeClock(start=start)
        s = Scheduler(clock=clock, tz=TZ)
        s.schedule(lambda: None, Cron("*/1 * * * *"))
        counts["duetime"] = s.run_until(end)

    def with_croniter() -> None:
        it = croniter("*/1 * * * *", start)
        n = 0
        stop = end.timestamp()
        while it.get_next(float) <= stop:
            n += 1
        counts["croniter"] = n

    repeat = max(1, min(args.repeat, 3))
    medians = median_times({"duetime": with_duetime, "croniter": with_croniter}, repeat)
    ours, theirs = medians["duetime"], medians["croniter"]
    rows: list[tuple[str, float | None]] = [
        ("croniter get_next loop", theirs),
        ("duetime run_until", ours),
    ]
    table(
        f"{days} days of '*/1 * * * *' in Europe/Berlin ({expected:,} fires)",
        "seconds",
        rows,
        "croniter get_next loop",
    )
    print(
        f"  fires/s: duetime {counts['duetime'] / ours:,.0f}, croniter {counts['croniter'] / theirs:,.0f}"
    )
    print(f"  fires counted: duetime {counts['duetime']:,}, croniter {counts['croniter']:,}")
    assert counts["duetime"] == counts["croniter"], "the two disagree on the fire count"


if __name__ == "__main__":
    main()
