"""~300 nudges a day, spread out in office hours, never more than 60 a minute.

A Poisson recurrence inside a weekday 09:00-18:00 window (Berlin), behind a 60-per-minute token
bucket that a second, bursty job shares. A simulated week on a FakeClock; the counts and the
busiest minute are printed.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from duetime import FakeClock, FixedRate, Poisson, Scheduler, TokenBucket, Window

BERLIN = ZoneInfo("Europe/Berlin")
clock = FakeClock(start=datetime(2026, 5, 4, 0, 0, tzinfo=BERLIN))  # a Monday
s = Scheduler(clock=clock, tz="Europe/Berlin", rng=random.Random(42))
bucket = TokenBucket(60, per=60, burst=10)
nudges: list[datetime] = []
reports: list[datetime] = []

s.schedule(
    lambda: nudges.append(clock.now()),
    Poisson(per_day=300, window=Window("09:00", "18:00", days="mon-fri")),
    limiter=bucket,
    id="nudge",
)


# A batch job that fires 50 sends at once every day at 12:00 through the same bucket.
def batch() -> None:
    for _ in range(50):
        s.schedule(lambda: reports.append(clock.now()), 0, limiter=bucket)


s.schedule(batch, FixedRate(86400, start=datetime(2026, 5, 4, 12, tzinfo=BERLIN)))
s.run_for(timedelta(days=7))

per_day = Counter(t.astimezone(BERLIN).strftime("%a %d") for t in nudges)
print("Nudges per day (Europe/Berlin):", dict(per_day))
starts = Counter(t.astimezone(BERLIN).replace(second=0, microsecond=0) for t in nudges + reports)
busiest, count = starts.most_common(1)[0]
print(
    f"Busiest minute: {busiest:%a %H:%M} Europe/Berlin with {count} starts "
    f"(bucket: 60/min, burst 10)"
)
hours = sorted({t.astimezone(BERLIN).hour for t in nudges})
print(
    f"Nudge hours: {hours[0]:02d}:00-{hours[-1]:02d}:59 Europe/Berlin; weekend nudges: "
    f"{sum(1 for t in nudges if t.astimezone(BERLIN).weekday() >= 5)}"
)
print(f"Deferred by the bucket: {s.stats().deferred}; dropped: 0 (reports ran: {len(reports)})")
assert all(9 <= t.astimezone(BERLIN).hour < 18 for t in nudges)
assert all(t.astimezone(BERLIN).weekday() < 5 for t in nudges)
assert len(reports) == 7 * 50 and count <= 60
assert 0.8 < len(nudges) / (5 * 300) < 1.2
