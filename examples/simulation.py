"""EventQueue on its own: a tiny discrete-event simulation of a coffee bar.

The core is public because a simulation needs exactly this: a heap of events by time with FIFO
ties and O(1) cancel (a customer who gives up waiting cancels their pending "order ready" event).
"""

from __future__ import annotations

import random

from duetime import EventQueue

rng = random.Random(3)
q: EventQueue[tuple[str, int]] = EventQueue()
now = 0.0
barista_free_at = 0.0
served = gave_up = 0

for customer in range(200):  # arrivals, ~1 a minute
    now += rng.expovariate(1 / 60)
    q.push(("arrive", customer), now)

patience: dict[int, float] = {}
while (head := q.head()) is not None:
    now = head[0]
    kind, customer = q.pop_due(now) or ("", -1)
    if kind == "arrive":
        start = max(now, barista_free_at)
        barista_free_at = start + rng.uniform(30, 90)
        q.push(("ready", customer), barista_free_at)
        q.push(("give_up", customer), now + 240)  # leaves after 4 minutes
    elif kind == "ready":
        q.cancel(("give_up", customer))  # O(1): the stale entry stays until it surfaces
        served += 1
    elif kind == "give_up":
        q.cancel(("ready", customer))
        gave_up += 1

print(
    f"served {served}, gave up {gave_up}, simulated {now / 3600:.1f} h, compactions {q.compactions}"
)
assert served + gave_up == 200
