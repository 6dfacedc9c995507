"""Stepping time by hand: run_pending, step, run_until, run_for, on a steppable clock.

The scheduler composes one ``Stepping`` and delegates its stepping methods to it; the loop
(``run_to``) calls the life cycle's steps as the scheduler chose them (``Cycle``), and reads an
exact ``FakeClock`` through its integers, where a method call costs as much as the read.

Lock rules: each method takes the scheduler's lock itself, and releases it around every run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from heapq import heappop
from typing import Any, Protocol

from duetime._engine import Cycle
from duetime._replica import Replica
from duetime._timers import (
    DUE_SHIFT,
)
from duetime._validate import (
    aware_datetime,
    datetime_to_ns,
    duration_ns,
    epoch_ns,
    in_calendar,
)
from duetime.clock import (
    Clock,
    NsClock,
    SteppableClock,
)
from duetime.errors import (
    InvalidArgument,
    SchedulerShutdownError,
)
from duetime.events import (
    Event,
)
from duetime.job import (
    Occ,
    Run,
)
from duetime.recurrence import MONOTONIC
from duetime.stores.memory import MemoryStore

__all__ = ["Host", "Stepping"]

logger = logging.getLogger("duetime")


class Host(Protocol):
    """What this part uses of the scheduler that composes it."""

    _clock: NsClock
    _cycle: Cycle
    _fake: bool
    _lock: threading.RLock
    _pending_events: list[Event]
    _replica: Replica | None
    _shutdown: bool
    _store: MemoryStore
    _user_clock: Clock

    def _emit(self, events: Sequence[Event]) -> None: ...

    def _execute(self, occ: Occ, contained: bool = False) -> None: ...

    def _observed(self) -> bool: ...

    def _pop_due(self, wall: int, mono: int) -> tuple[Any, int, int] | None: ...

    def _drain_events(self) -> Sequence[Event]: ...


class Stepping:
    """Time driven by hand, for the scheduler that composes it (see the module's docstring)."""

    def __init__(self, host: Host) -> None:
        self._s = host

    def steppable(self, method: str) -> SteppableClock:
        if self._s._shutdown:
            raise SchedulerShutdownError(method)
        clock = self._s._clock
        if self._s._replica is not None:
            with self._s._lock:
                self._s._replica.sync_locked()
            if not isinstance(self._s._user_clock, SteppableClock):
                raise TypeError(
                    f"{method}() needs a steppable clock such as FakeClock; this scheduler's "
                    f"clock is {self._s._user_clock!r}, which only real time moves"
                )
            return clock  # type: ignore[return-value]
        if self._s._fake:
            # A FakeClock is steppable; the protocol check below costs ~500 bytecodes, which
            # a simulation stepping one event at a time would pay on every call.
            return clock  # type: ignore[return-value]
        if not isinstance(clock, SteppableClock):
            raise TypeError(
                f"{method}() needs a steppable clock such as FakeClock; this scheduler's clock "
                f"is {self._s._user_clock!r}, which only real time moves"
            )
        return clock

    def run_pending(self) -> int:
        """``Scheduler.run_pending`` (see there)."""
        clock = self._s._clock
        with self._s._lock:
            if self._s._shutdown:
                raise SchedulerShutdownError("run_pending")
            if self._s._replica is not None:
                self._s._replica.sync_locked()
            wall = clock.time_ns()
            mono = clock.monotonic_ns()
        count = 0
        while True:
            with self._s._lock:
                item = self._s._pop_due(wall, mono)
                if item is None:
                    break
                occ = self._s._cycle.begin(*item, clock.time_ns(), clock.monotonic_ns())
                events = self._s._drain_events()
            if events:
                self._s._emit(events)
            if occ is not None:
                self._s._execute(occ)
                count += 1
        return count

    def step(self, until: datetime | float | int | None = None) -> Run | None:
        """``Scheduler.step`` (see there)."""
        clock = self.steppable("step")
        with self._s._lock:  # (a subscribe() meanwhile must not be overwritten by a stale read)
            self._s._observed()
        horizon = None if until is None else self.target("until", until)
        floor = clock.time_ns()  # (durable: leases ending after this are still to stop at)
        while True:
            with self._s._lock:
                wall = clock.time_ns()
                mono = clock.monotonic_ns()
                head = self._s._store.head(wall, mono)
                if self._s._replica is not None:
                    # A lease ending before the next occurrence (and the horizon) is where a
                    # lost run falls due, taken over: time stops there first (run_until).
                    end = self._s._replica.next_lease_end(max(floor, wall))
                    if (
                        end is not None
                        and (head is None or end <= head[2] - mono + wall)
                        and (horizon is None or end <= horizon)
                    ):
                        floor = self._s._replica.stop_at_lease_end(clock, end)
                        continue
                if horizon is not None and (head is None or head[2] > horizon - wall + mono):
                    # (head[2] is on the monotonic axis; the horizon is wall-clock.)
                    if horizon > wall:
                        clock.advance_ns(horizon - wall)
                    return None
                if head is None:
                    return None
                tb, entry, due = head
                if due > mono:
                    # Both timebases move alike, so this stays the head, now due.
                    clock.advance_ns(due - mono)
                    wall = clock.time_ns()
                    mono = clock.monotonic_ns()
                key = self._s._store.take(tb, entry)
                occ = self._s._cycle.begin(key, tb, entry >> DUE_SHIFT, wall, mono)
                events = self._s._drain_events()
            if events:
                self._s._emit(events)
            if occ is not None:
                self._s._execute(occ)
                return Run(occ.job, occ.due, occ.timebase, occ.attempt, occ.fire)

    def run_until(self, when: datetime | float | int) -> int:
        """``Scheduler.run_until`` (see there)."""
        clock = self.steppable("run_until")
        target = self.target("when", when)
        if self._s._replica is not None:
            return self._s._replica.run_to(clock, target)
        return self.run_to(clock, target)

    @staticmethod
    def target(param: str, when: datetime | float | int) -> int:
        """A wall-clock target (aware datetime or epoch seconds) in epoch nanoseconds."""
        if isinstance(when, datetime):
            return datetime_to_ns(aware_datetime(param, when))
        if isinstance(when, (int, float)) and not isinstance(when, bool):
            return epoch_ns(param, when)
        raise TypeError(f"{param} must be an aware datetime or epoch seconds, got {when!r}")

    def run_for(self, seconds: float | int | timedelta) -> int:
        """``Scheduler.run_for`` (see there)."""
        clock = self.steppable("run_for")
        span = duration_ns("seconds", seconds)
        target = clock.time_ns() + span
        if not in_calendar(target):
            # (The stepping loop moves a FakeClock without asking it: it would pass the year
            # 9999, and every later reading of the time raise OverflowError.)
            raise InvalidArgument(
                f"seconds would take the clock past the years 1 to 9999, got {seconds!r}"
            )
        if self._s._replica is not None:
            return self._s._replica.run_to(clock, target)
        return self.run_to(clock, target)

    def run_to(self, clock: SteppableClock, target: int) -> int:
        # The stepping loop: take the head if it is due by the target, move the clock to its
        # due time, and hand it to the one life cycle (_begin, _call, _finish_locked), the same
        # methods the runners use. Each outcome is recorded under the lock acquisition that
        # takes the next occurrence, so an event costs one acquisition.
        count = 0
        host = self._s  # (a local: the loop reads it per event)
        lock = host._lock
        with lock:  # (a subscribe() meanwhile must not be overwritten by a stale read)
            host._observed()
        # Bound methods in a try/finally cost half of a with statement on CPython 3.11, which
        # looks up __enter__ and __exit__ on every entry.
        acquire = lock.acquire
        release = lock.release
        store = host._store
        head = store.head
        queues = store.queues
        qwall, qmono = queues
        heap = qmono._heap
        run = qmono._run
        live = qmono._live
        begin, call, finish = host._cycle
        time_ns = clock.time_ns
        monotonic_ns = clock.monotonic_ns
        advance_ns = clock.advance_ns
        # An unwatched FakeClock is read and moved through its two integers. (Its own lock
        # guards those against other threads moving it; a clock being stepped here has no
        # runner, and a test that advances it from another thread meanwhile races anyway.)
        fake = host._fake
        done: tuple[Occ, Any, Exception | None] | None = None
        tail: Sequence[Event] = ()
        outcome: Sequence[Event] = ()
        try:
            while True:
                if outcome:
                    # A run's outcome reaches listeners before the clock moves on, and what
                    # they schedule is in the queues when the next head is chosen.
                    host._emit(outcome)
                    outcome = ()
                acquire()
                try:
                    if done is not None:
                        finish(done)
                        done = None
                        if host._pending_events:
                            outcome = host._drain_events()
                            continue
                    if fake:
                        wall = clock._wall  # type: ignore[attr-defined]
                        mono = clock._mono  # type: ignore[attr-defined]
                    else:
                        wall = time_ns()
                        mono = monotonic_ns()
                    limit = target - wall + mono  # the wall-clock target on the monotonic axis
                    if qwall._live:  # both queues: compare their heads on one axis
                        found = head(wall, mono)
                        if found is None or found[2] > limit:
                            tail = host._drain_events()
                            break
                        tb, entry, due = found
                        key = queues[tb].pop_entry(entry)
                    else:
                        # TimerQueue.head() and pop_entry() on the monotonic queue, inlined:
                        # a queue step, not a life-cycle step, and a call here would cost
                        # ~900 instructions per event (docs/decisions.md).
                        if qmono._new:
                            qmono.absorb()
                        while True:
                            if run and not (heap and heap[0] < run[-1]):
                                entry = run[-1]
                                if entry >> DUE_SHIFT > limit:
                                    key = None
                                    break
                                run.pop()
                            elif heap:
                                entry = heap[0]
                                if entry >> DUE_SHIFT > limit:
                                    key = None
                                    break
                                heappop(heap)
                            else:
                                key = None
                                break
                            key = live.pop(entry, None)
                            if key is not None:
                                key._qkey = None
                                break
                            qmono._stale -= 1
                        if key is None:
                            tail = host._drain_events()
                            break
                        tb = MONOTONIC
                        due = entry >> DUE_SHIFT
                    if due > mono:
                        # The clock is exact integers: after this jump "now" equals the due
                        # time, so the occurrence is never left a rounding error short of due.
                        if fake and not clock._watched:  # type: ignore[attr-defined]
                            wall += due - mono
                            clock._wall = wall  # type: ignore[attr-defined]
                            clock._mono = mono = due  # type: ignore[attr-defined]
                        else:
                            advance_ns(due - mono)
                            wall += due - mono
                            mono = due
                    occ = begin(key, tb, entry >> DUE_SHIFT, wall, mono)
                    events = host._drain_events() if host._pending_events else ()
                finally:
                    release()
                if events:
                    host._emit(events)
                if occ is not None:
                    done = call(occ)
                    if done is not None:
                        count += 1
        finally:
            if done is not None:
                with lock:
                    finish(done)
        if tail:
            host._emit(tail)
        wall = time_ns()
        if target > wall:
            advance_ns(target - wall)
        return count
