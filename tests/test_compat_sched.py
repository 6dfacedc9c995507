from __future__ import annotations

import sched as stdlib_sched
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.compat import sched


class VirtualTime:
    def __init__(self) -> None:
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def run_with(module: Any, ops: list[tuple[str, int, int]]) -> list[Any]:
    vt = VirtualTime()
    s = module.scheduler(vt.time, vt.sleep)
    out: list[Any] = []
    events = []
    for i, (op, t, p) in enumerate(ops):
        if op == "enter":
            events.append(s.enterabs(t, p, out.append, ((i, vt.now),)))
        elif op == "cancel" and events:
            ev = events.pop(t % len(events))
            s.cancel(ev)
    s.run()
    return out


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["enter", "enter", "cancel"]), st.integers(0, 5), st.integers(0, 2)
        ),
        max_size=40,
    )
)
@settings(max_examples=200, deadline=None)
def test_same_order_as_the_standard_library(ops: list[tuple[str, int, int]]) -> None:
    assert run_with(sched, ops) == run_with(stdlib_sched, ops)


def test_api_surface_matches_the_standard_library() -> None:
    vt = VirtualTime()
    s = sched.scheduler(vt.time, vt.sleep)
    assert s.empty()
    e1 = s.enter(10, 1, print, ("x",))
    e2 = s.enterabs(5, 1, print, kwargs={"sep": "-"})
    assert isinstance(e1, sched.Event) and e1.time == 10 and e2.kwargs == {"sep": "-"}
    assert s.queue == [e2, e1]
    assert not s.empty()
    assert s.run(blocking=False) == 5.0
    s.cancel(e1)
    s.cancel(e2)
    assert s.empty() and s.run() is None
    with pytest.raises(ValueError, match="not in the queue"):
        s.cancel(e1)


def test_cancel_of_an_event_that_already_ran_raises(capsys: pytest.CaptureFixture[str]) -> None:
    vt = VirtualTime()
    s = sched.scheduler(vt.time, vt.sleep)
    ev = s.enter(1, 0, print, ("ran",))
    s.run()
    assert capsys.readouterr().out == "ran\n"
    with pytest.raises(ValueError, match="not in the queue"):
        s.cancel(ev)


def test_non_blocking_run_executes_due_events_only() -> None:
    vt = VirtualTime()
    s = sched.scheduler(vt.time, vt.sleep)
    out: list[int] = []
    s.enterabs(0, 0, out.append, (1,))
    s.enterabs(3, 0, out.append, (2,))
    assert s.run(blocking=False) == 3
    assert out == [1]


def test_default_run_wakes_for_an_earlier_event_from_another_thread() -> None:
    # The standard library's run() would sit in time.sleep for the hour-long delay. This one
    # waits on a condition variable: an earlier event and a cancel from another thread wake it.
    s = sched.scheduler()
    far = s.enter(3600, 0, lambda: None)
    ran = threading.Event()
    done = threading.Event()

    def runner() -> None:
        s.run()
        done.set()

    t = threading.Thread(target=runner, daemon=True)
    t.start()
    s.enter(0, 0, ran.set)
    assert ran.wait(5), "run() did not wake for the earlier event"
    s.cancel(far)
    t.join(5)
    assert done.is_set() and not t.is_alive()


def test_cancel_is_constant_time_with_many_pending() -> None:
    # O(1) lazy cancel: cancelling 20 000 events costs about as much per event as cancelling
    # 2 000 (the standard library's list.remove makes this quadratic). Compare per-cancel
    # cost with a generous factor so a noisy machine cannot flake it.
    def per_cancel(n: int) -> float:
        s = sched.scheduler(time.monotonic, time.sleep)
        evs = [s.enterabs(float(i), 0, print) for i in range(n)]
        t0 = time.perf_counter()
        for ev in evs[::2]:
            s.cancel(ev)
        return (time.perf_counter() - t0) / (n // 2)

    small = min(per_cancel(2_000) for _ in range(3))
    large = min(per_cancel(20_000) for _ in range(3))
    assert large < small * 5
