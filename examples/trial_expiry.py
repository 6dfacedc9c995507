"""The SaaS case: warn customers 3 days before their trial ends, over a simulated month.

Each signup schedules a warning for trial_end - 3 days (at 09:00 in the customer's zone). An
upgrade cancels it; a trial extension reschedules it. A month runs in a blink on a FakeClock.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from duetime import FakeClock, Scheduler

UTC = ZoneInfo("UTC")
clock = FakeClock(start=datetime(2026, 3, 1, 0, 0, tzinfo=UTC))
s = Scheduler(clock=clock, tz="UTC")
sent: list[tuple[str, str]] = []


def send_trial_warning(customer: str, trial_end: date) -> None:
    local = clock.now().astimezone(customers[customer][1])
    zone = customers[customer][1]
    sent.append((customer, f"{local:%Y-%m-%d %H:%M} {zone.key}"))
    print(f"  {local:%Y-%m-%d %H:%M} {zone.key:<16} warn {customer}: your trial ends {trial_end}")


def warning_time(trial_end: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(trial_end - timedelta(days=3), time(9, 0), tzinfo=zone)


# customer -> (trial end, zone)
customers = {
    "alice": (date(2026, 3, 14), ZoneInfo("Europe/Berlin")),
    "bob": (date(2026, 3, 20), ZoneInfo("America/New_York")),
    "chen": (date(2026, 3, 31), ZoneInfo("Asia/Shanghai")),
    "dana": (date(2026, 3, 25), ZoneInfo("Europe/Berlin")),
}


def signup(customer: str) -> None:
    end, zone = customers[customer]
    s.schedule(
        send_trial_warning,
        warning_time(end, zone),
        args=(customer, end),
        id=f"trial-warn-{customer}",
    )


def upgrade(customer: str) -> None:
    s.cancel(f"trial-warn-{customer}")
    print(f"  {clock.now():%Y-%m-%d %H:%M} {'UTC':<16} {customer} upgraded: warning cancelled")


def extend(customer: str, days: int) -> None:
    end, zone = customers[customer]
    customers[customer] = (end + timedelta(days=days), zone)
    job = s.reschedule(f"trial-warn-{customer}", warning_time(customers[customer][0], zone))
    job.args = (customer, customers[customer][0])
    print(f"  {clock.now():%Y-%m-%d %H:%M} {'UTC':<16} {customer} extended by {days} days")


print("March 2026, simulated:")
for c in customers:
    signup(c)
s.run_until(datetime(2026, 3, 5, tzinfo=UTC))
upgrade("bob")
s.run_until(datetime(2026, 3, 15, tzinfo=UTC))
extend("dana", 14)  # the warning for March 22 now goes out on April 5
s.run_until(datetime(2026, 4, 1, tzinfo=UTC))

assert [c for c, _ in sent] == ["alice", "chen"]
assert sent[0][1] == "2026-03-11 09:00 Europe/Berlin"
assert [j.id for j in s.jobs()] == ["trial-warn-dana"]
print(f"Still pending: {[(j.id, f'{j.next_run_time:%Y-%m-%d %H:%M} UTC') for j in s.jobs()]}")
