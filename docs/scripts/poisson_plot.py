"""Draw docs/_generated/poisson_windows.png: ~300 arrivals a day in office hours, simulated.

Left: arrivals per day over 1 000 simulated days (weekdays only have any). Right: time of day of
every arrival. Seeded, so the figure is the same on every build.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from duetime import FakeClock, Poisson, Window
from duetime.recurrence import Env


def main(out: Path) -> None:
    tz = ZoneInfo("Europe/Berlin")
    start = datetime(2026, 1, 5, tzinfo=tz)
    env = Env(FakeClock(start=start), random.Random(2026), tz)
    rec = Poisson(per_day=300, window=Window("09:00", "18:00", days="mon-fri"))
    end = int((start + timedelta(days=1000)).timestamp() * 1e9)
    fires = []
    due = rec.first(env)
    while due is not None and due < end:
        fires.append(datetime.fromtimestamp(due / 1e9, tz))
        due = rec.next(due, env)
    per_day = Counter(f.date() for f in fires)
    days = [start.date() + timedelta(days=d) for d in range(1000)]
    counts = [per_day.get(d, 0) for d in days if d.weekday() < 5]
    hours = [f.hour + f.minute / 60 for f in fires]

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    left.hist(counts, bins=40, color="#4062bb")
    left.axvline(300, color="black", linestyle="--", linewidth=1)
    left.set_title(f"Arrivals per weekday (mean {sum(counts) / len(counts):.1f}, target 300)")
    left.set_xlabel("arrivals in a day")
    right.hist(hours, bins=[h / 4 for h in range(97)], color="#f45b69")
    right.set_xlim(0, 24)
    right.set_xticks(range(0, 25, 3))
    right.set_title("Time of day (window 09:00-18:00 Berlin)")
    right.set_xlabel("hour")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("poisson_windows.png"))
