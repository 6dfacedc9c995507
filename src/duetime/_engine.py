"""The engine's package-internal interface: what a runner may use of the scheduler it runs.

A runner (the thread runner in ``duetime.runner``, the asyncio runner in ``duetime._aiorunner``)
takes due occurrences, hands them to an executor and records their outcomes through the one life
cycle the Scheduler owns. It gets these operations as an ``Engine`` built once by the Scheduler,
instead of reaching into the Scheduler's private fields, and it never imports ``duetime.scheduler``:
the modules form a one-way stack (tests/test_layers.py checks it).

The operations are the Scheduler's own bound methods, stored as attributes, so calling one costs
the same as calling the method itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from duetime.clock import NsClock
from duetime.events import Event
from duetime.job import Occ

__all__ = ["Cycle", "Engine"]


@dataclass(frozen=True, slots=True, eq=False)
class Engine:
    """What a runner may do with the scheduler it runs. All times are integer nanoseconds.

    Attributes:
        lock: The scheduler's lock; the operations marked "lock held" need it.
        cond: The condition variable (on ``lock``) that runners sleep on and ``wait_idle``
            callers wait on.
        clock: The scheduler's clock.
        wall_check: Longest sleep while wall-clock entries are queued (nanoseconds).
        executor: The default executor spec (``None``: a pool; ``"inline"``; an Executor).
        executors: The named executors.
        head: ``(wall, mono) -> (timebase, entry, due on the monotonic axis) | None``: the
            earliest queued entry (lock held).
        wall_queued: ``() -> bool``: whether any wall-clock entry is queued (lock held).
        pop_due: ``(wall, mono) -> (key, timebase, due) | None``: take the earliest entry due
            now (lock held).
        begin: ``(key, timebase, due, wall, mono) -> Occ | None``: decide whether a taken entry
            runs now (lock held).
        begin_due: With a durable store, ``(wall, mono, most) -> [Occ] | None``: ``pop_due``
            and ``begin`` for every fire due now at once (up to a batch, and to ``most`` if not
            None), claimed together; None if nothing was due (lock held). None without a
            durable store.
        flush: ``() -> None``: write the outcomes waiting to be recorded in a durable store
            (lock held; never raises a store's failure). While a runner's ``flushes`` is
            true, outcomes wait for this call instead of being written one by one.
        execute: ``(occ) -> None``: run the job's function, catching what it raises, and
            record the outcome (lock not held). In a runner's thread or a pool's: whatever
            it raises is its outcome.
        execute_here: ``execute`` in the thread of the asyncio loop (an ``"inline"`` plain
            function): a ``KeyboardInterrupt`` or ``SystemExit`` goes on to the loop, as a
            coroutine job's does.
        finish: ``(occ, result, error) -> None``: record an outcome produced elsewhere, by a
            process pool or a coroutine (lock not held).
        abandon: ``(occ, failed=False, give_back=False, lost=False, interrupted=False) ->
            None``: forget an occurrence that produced no outcome; ``give_back``: it never
            started, stopped by shutdown; ``lost``: cancelled or rescheduled before it started;
            ``interrupted``: shutdown cancelled it while it ran (lock not held).
        abandon_all: ``(occs, failed=False, give_back=False) -> None``: ``abandon`` for several
            occurrences, with one write to a durable store (lock not held).
        emit_started: ``(occ) -> None``: tell listeners an occurrence starts (lock not held).
        emit: ``(events) -> None``: deliver events to listeners (lock not held).
        drain_events: ``() -> events``: the events raised under the lock, to emit once it is
            released (lock held).
        idle: ``() -> bool``: nothing due now and nothing running (lock held).
        now: ``() -> datetime``: the clock's wall time in the scheduler's zone.
        running: ``() -> int``: occurrences running now (lock held).
        poll: With a durable store, how often (nanoseconds) the runner must call ``sync``;
            0 without one.
        sync: ``() -> None``: read other processes' changes, renew leases, take over lost
            runs (lock held; never raises a store's failure).
        renew: ``() -> None``: with a durable store, renew the leases of this process's runs
            when a poll is due, and nothing else (lock held; never raises a store's failure):
            what a stopping runner does while it waits for them.
        may_start: With a durable store, ``(occ) -> bool``: whether a claimed run may start
            (one claimed long ago is asked of the store; a run taken over by another worker
            meanwhile is abandoned), for the runs ``execute`` does not start: coroutines and
            process pools' (lock not held). None without one.
    """

    lock: threading.RLock
    cond: threading.Condition
    clock: NsClock
    wall_check: int
    executor: Any
    executors: dict[str, Any]
    head: Callable[[int, int], tuple[int, int, int] | None]
    wall_queued: Callable[[], bool]
    pop_due: Callable[[int, int], tuple[Any, int, int] | None]
    begin: Callable[[Any, int, int, int, int], Occ | None]
    begin_due: Callable[[int, int, int | None], list[Occ] | None] | None
    flush: Callable[[], None]
    execute: Callable[[Occ], None]
    execute_here: Callable[[Occ], None]
    finish: Callable[[Occ, Any, Exception | None], None]
    abandon: Callable[..., None]
    abandon_all: Callable[..., None]
    emit_started: Callable[[Occ], None]
    emit: Callable[[Sequence[Event]], None]
    drain_events: Callable[[], Sequence[Event]]
    idle: Callable[[], bool]
    now: Callable[[], datetime]
    running: Callable[[], int]
    poll: int
    sync: Callable[[], None]
    renew: Callable[[], None]
    may_start: Callable[[Occ], bool] | None


class Cycle(NamedTuple):
    """The life cycle's steps as the scheduler calls them: its own, or, with a durable store,
    its replica's, which claim a run before ``begin`` and settle it after ``finish``. Chosen
    once, at construction."""

    begin: Callable[[Any, int, int, int, int], Occ | None]
    call: Callable[..., tuple[Occ, Any, Exception | None] | None]
    finish: Callable[[tuple[Occ, Any, Exception | None]], None]
