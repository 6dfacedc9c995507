"""``MemoryStore``: the default store, jobs held in this process's memory.

It keeps what a store keeps (the live jobs by id, the queued occurrences of both timebases, the
dead letters and the starts waiting for a ``max_concurrent`` slot) in the structures that make
the in-memory scheduler fast: two packed-int timer queues (``duetime._timers``) sharing one
sequence counter, a dict index, and a count instead of an index entry for anonymous jobs whose
occurrence is queued (a pending one-shot costs no index entry; see ``loosen``).

The Scheduler calls these methods with its lock held; the store has no lock of its own. Five
hot spots of the Scheduler read and write ``queues``, ``index``, ``anonymous`` and ``blocked``
directly (the keyword-less ``schedule()``, the common ``cancel()``, the stepping loop's pop, and
the common cases of ``_begin`` and ``_finish_locked``): these attributes are this store's fast
paths, documented here. ``SQLiteStore`` is a ``MemoryStore`` and keeps them: with it, the
Scheduler's schedule and cancel fast paths do not apply (its jobs always have ids), and its
``_begin`` and ``_finish_locked`` claim and settle in the file around the common cases.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from duetime._timers import DUE_SHIFT, TimerQueue
from duetime.job import Job, JobState
from duetime.recurrence import MONOTONIC, WALL

__all__ = ["MemoryStore"]

_ENDED = frozenset((JobState.COMPLETED, JobState.CANCELLED, JobState.FAILED))


class MemoryStore:
    """Jobs in memory: today's behaviour and speed, nothing written anywhere (the default).

    A store belongs to one Scheduler.
    """

    __slots__ = ("anonymous", "blocked", "dead", "index", "owner", "queues")

    def __init__(self) -> None:
        # One counter for both queues keeps FIFO order across timebases among equal times.
        counter = itertools.count()
        #: The wall-clock and the monotonic timer queue (indexed by timebase).
        self.queues: tuple[TimerQueue, TimerQueue] = (TimerQueue(counter), TimerQueue(counter))
        #: Live jobs by id; an anonymous job (no id read yet) whose regular occurrence is not
        #: queued is indexed by the Job itself.
        self.index: dict[str | Job, Job] = {}
        #: Anonymous jobs whose regular occurrence is queued: found through the queues, counted
        #: here instead of indexed.
        self.anonymous = 0
        #: Dead letters by job id (see Scheduler.failed()), oldest first.
        self.dead: dict[str, Any] = {}
        #: Occurrences waiting for a max_concurrent slot, oldest first.
        self.blocked: list[Any] = []
        #: The Scheduler that uses this store (a store belongs to one), or None yet.
        self.owner: object | None = None

    def __repr__(self) -> str:
        return f"<MemoryStore jobs={self.count()}>"

    # -- jobs -------------------------------------------------------------------------------------

    def add(self, job: Job, id: str | None) -> None:
        """Index a new job by ``id``, or count it as an anonymous queued job."""
        if id is not None:
            self.index[id] = job
        else:
            self.anonymous += 1

    def get(self, id: str) -> Job | None:
        """The live job with this id, or None."""
        return self.index.get(id)

    def contains(self, job: Job) -> bool:
        """Whether ``job`` (a handle of this store's scheduler) is live here."""
        if job._id is None:
            return job._state not in _ENDED
        return self.index.get(job._id) is job

    def count(self) -> int:
        """How many jobs are live."""
        return len(self.index) + self.anonymous

    def jobs(self) -> list[Job]:
        """The live jobs, in no particular order."""
        found = dict.fromkeys(self.index.values())
        if self.anonymous:  # queued anonymous jobs are found through the queues
            for queue in self.queues:
                for key in queue.live_keys():
                    found[key if type(key) is Job else key.job] = None
        return list(found)

    def loosen(self, job: Job) -> None:
        """An anonymous job's regular occurrence left the queue: index it so it stays findable."""
        if job._id is None and job not in self.index and job._state not in _ENDED:
            self.index[job] = job
            self.anonymous -= 1

    def forget(self, job: Job) -> None:
        """Drop an ended job from the index (or from the count of queued anonymous jobs)."""
        key = job if job._id is None else job._id
        if self.index.get(key) is job:
            del self.index[key]
        elif job._id is None:
            self.anonymous -= 1

    def name(self, job: Job, id: str) -> None:
        """Index an anonymous job under the id it has just been given."""
        if self.index.get(job) is job:  # loose: re-index it by its new id
            del self.index[job]
            self.index[id] = job
        elif job._state not in _ENDED:  # queued and counted: index it by id
            self.index[id] = job
            self.anonymous -= 1

    # -- occurrences ------------------------------------------------------------------------------

    def push(self, timebase: int, key: Any, due: int, priority: int) -> None:
        """Queue an occurrence (a Job's regular one, or a side occurrence) at ``due``
        (nanoseconds of ``timebase``); if ``key`` is queued already, its old entry goes stale."""
        self.queues[timebase].push(key, due, priority)

    def unqueue(self, timebase: int, key: Any) -> bool:
        """Drop ``key``'s queued occurrence, in O(1). Returns whether it was queued."""
        return self.queues[timebase].cancel(key)

    def head(self, wall: int, mono: int) -> tuple[int, int, int] | None:
        """The earliest queued occurrence of both timebases: ``(timebase, entry, due on the
        monotonic axis)``, or None.

        Entries are packed ints (see duetime._timers): moving a wall-clock entry onto the
        monotonic axis is one addition, after which one comparison orders the two heads by
        ``(due, priority, seq)``.
        """
        qwall, qmono = self.queues
        em = qmono.head()
        ew = qwall.head() if qwall._live else None
        if ew is None:
            return None if em is None else (MONOTONIC, em, em >> DUE_SHIFT)
        ew_mono = ew + ((mono - wall) << DUE_SHIFT)
        if em is None or ew_mono < em:
            return (WALL, ew, ew_mono >> DUE_SHIFT)
        return (MONOTONIC, em, em >> DUE_SHIFT)

    def key_of(self, timebase: int, entry: int) -> Any:
        """The key of the head occurrence ``head()`` just returned, left queued."""
        return self.queues[timebase]._live[entry]

    def take(self, timebase: int, entry: int) -> Any:
        """Take the head occurrence ``head()`` just returned; returns its key."""
        return self.queues[timebase].pop_entry(entry)

    def wall_queued(self) -> bool:
        """Whether any wall-clock occurrence is queued."""
        return bool(self.queues[WALL])

    def queued(self) -> Iterator[Any]:
        """Every queued key (jobs and side occurrences), in no particular order."""
        for queue in self.queues:
            yield from queue.live_keys()

    # -- starts waiting for a slot ---------------------------------------------------------------

    def block(self, side: Any) -> None:
        """Keep a start until a max_concurrent slot frees."""
        self.blocked.append(side)

    def unblock(self, side: Any) -> None:
        """Forget a waiting start (its job was cancelled, paused or rescheduled)."""
        self.blocked.remove(side)

    def blocked_count(self) -> int:
        """How many starts wait for a slot."""
        return len(self.blocked)

    def next_blocked(self) -> Any | None:
        """The oldest waiting start, taken, or None."""
        return self.blocked.pop(0) if self.blocked else None

    # -- dead letters -----------------------------------------------------------------------------

    def put_dead(self, id: str, record: Any) -> None:
        """Keep a dead letter (a one-shot job whose last attempt failed)."""
        self.dead[id] = record

    def take_dead(self, id: str) -> Any | None:
        """Remove and return a dead letter, or None."""
        return self.dead.pop(id, None)

    def dead_letter(self, id: str) -> Any | None:
        """Job ``id``'s dead letter, or None (it stays kept)."""
        return self.dead.get(id)

    def dead_letters(self) -> list[Any]:
        """The dead letters, oldest first."""
        return list(self.dead.values())

    # -- numbers ----------------------------------------------------------------------------------

    def queue_stats(self) -> tuple[int, int, int]:
        """``(live entries, stale entries, compactions)`` of the timer queues."""
        wall, mono = self.queues
        return len(wall) + len(mono), wall.stale + mono.stale, wall.compactions + mono.compactions
