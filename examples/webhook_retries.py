"""Webhooks that fail: exponential backoff, dead letters, and a manual retry.

Three webhook deliveries to a flaky endpoint, simulated on a FakeClock. Two recover within their
retries; one exhausts them, lands in the dead-letter list, and is queued again by hand once the
endpoint is fixed.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from duetime import ExponentialBackoff, FakeClock, JobDead, JobFailed, Scheduler, current_run

clock = FakeClock(start=datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc))
s = Scheduler(clock=clock, rng=random.Random(7))
start = clock.now()

# How many times each endpoint fails before it answers; "billing" is down for a long time.
failures_left = {"orders": 1, "shipping": 3, "billing": 99}


def deliver(endpoint: str) -> str:
    run = current_run()
    assert run is not None
    elapsed = (clock.now() - start).total_seconds()
    if failures_left[endpoint] > 0:
        failures_left[endpoint] -= 1
        print(f"  t={elapsed:7.1f}s  {endpoint:8} attempt {run.attempt}: 503")
        raise ConnectionError(f"{endpoint}: 503 Service Unavailable")
    print(f"  t={elapsed:7.1f}s  {endpoint:8} attempt {run.attempt}: 200 OK")
    return "delivered"


def on_event(event: object) -> None:
    if isinstance(event, JobFailed) and event.retry_at is not None:
        wait = (event.retry_at - event.time).total_seconds()
        print(f"             {event.job_id:8} retry in {wait:.1f}s")
    elif isinstance(event, JobDead):
        print(f"             {event.job_id:8} DEAD after {event.attempts} attempts")


s.subscribe(on_event, JobFailed, JobDead)
policy = ExponentialBackoff(base=1, factor=2, cap=60, max_attempts=5, jitter="full")
for endpoint in failures_left:
    s.schedule(deliver, 0, args=(endpoint,), id=endpoint, retry=policy)

print("Delivering three webhooks:")
s.run_for(timedelta(minutes=10))

dead = s.failed()
print(f"\nDead letters: {[(d.job.id, d.attempts, type(d.error).__name__) for d in dead]}")
assert [d.job.id for d in dead] == ["billing"]
print(dead[0].traceback.strip().splitlines()[-1])

print("\nThe billing endpoint is fixed; retry the dead letter:")
failures_left["billing"] = 0
s.retry_failed("billing")
s.run_for(timedelta(seconds=1))
assert s.failed() == [] and len(s) == 0
print("Nothing left in the dead-letter list.")
