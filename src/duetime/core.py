"""The pure heap core: a priority queue of keys ordered by due time, with O(1) cancel.

``EventQueue`` knows numbers and keys and nothing else: no clock, no threads, no I/O, no jobs. It
is public because it is useful on its own (a discrete-event simulation needs exactly this);
``duetime.compat.sched`` is built on it, and the Scheduler's private ``TimerQueue``
(duetime._timers) shares its algorithm and its ``LazyHeap`` base.

Entries are tuples ``(due, priority, seq, key)``. ``seq`` comes from a counter that never repeats,
so two entries never compare equal on the first three fields and the comparison never reaches the
key (keys need not be orderable). The same ``seq`` is the entry's *generation*: a key's live entry
is recorded in ``_live``, and any other entry for that key still sitting in the heap is stale.
That gives

* reschedule: push a new entry for the key; the old one silently becomes stale;
* cancel in O(1): forget the live entry; the stale tuple stays in the heap (lazy deletion) and is
  thrown away when it reaches the top;
* compaction: when stale entries are more than half of a heap of more than ``COMPACT_MIN``
  entries, rebuild it in O(n) with ``heapify`` (the rule CPython's asyncio uses for its timer
  heap), so a cancel-heavy workload cannot grow memory without bound and amortized cost stays O(1).

Keeping the generation implicit in the entry's identity, instead of a separate per-key counter,
saves a dict update per push and 8 bytes per entry: identity comparison (``is``) of the stored
tuple is the cheapest liveness test Python has.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Iterator
from heapq import heapify, heappop, heappush
from typing import Any, Generic, TypeVar

__all__ = ["COMPACT_MIN", "EventQueue"]

K = TypeVar("K", bound=Hashable)

#: Heaps at or below this size are never compacted: rebuilding a small heap costs more than
#: popping its few stale entries as they surface.
COMPACT_MIN = 100

Entry = tuple[float, int, int, K]


class LazyHeap:
    """The state every lazily-deleting queue here shares: the heap, the live index, the stale
    count and the compaction count. ``EventQueue`` and the Scheduler's ``TimerQueue`` differ in
    what an entry is and where entries wait, and so in how they compact (``_went_stale``)."""

    __slots__ = ("_compactions", "_counter", "_heap", "_live", "_stale")

    def __init__(self, counter: Iterator[int] | None = None) -> None:
        self._heap: list[Any] = []
        self._live: dict[Any, Any] = {}
        self._counter = counter if counter is not None else itertools.count()
        self._stale = 0
        self._compactions = 0

    def __len__(self) -> int:
        """Number of live keys (stale entries are not counted)."""
        return len(self._live)

    def __bool__(self) -> bool:
        return bool(self._live)

    @property
    def stale(self) -> int:
        """Number of dead entries still held in the heap, awaiting discard or compaction."""
        return self._stale

    @property
    def compactions(self) -> int:
        """How many times the heap has been rebuilt to shed stale entries."""
        return self._compactions

    def clear(self) -> None:
        """Drop every entry, live and stale."""
        self._heap.clear()
        self._live.clear()
        self._stale = 0

    def _went_stale(self) -> None:
        """Count one more dead entry; compact when they are over half of those held."""
        raise NotImplementedError


class EventQueue(LazyHeap, Generic[K]):
    """A min-heap of keys by ``(due, priority, insertion order)`` with lazy O(1) deletion.

    ``due`` may be any real number (integers, such as nanoseconds, keep comparisons exact).
    Lower ``priority`` pops first among equal ``due``; equal ``(due, priority)`` pop in insertion
    (FIFO) order. Pushing a key that is already live reschedules it.

    Args:
        counter: Source of sequence numbers. Two queues that share a counter keep FIFO order
            between them; the default is a private ``itertools.count()``.

    Example:
        >>> q = EventQueue()
        >>> q.push("b", 2.0)
        >>> q.push("a", 1.0)
        >>> q.cancel("b")
        True
        >>> q.pop_due(5.0), q.pop_due(5.0)
        ('a', None)
    """

    __slots__ = ()

    _heap: list[Entry[K]]
    _live: dict[K, Entry[K]]

    def __init__(self, *, counter: Iterator[int] | None = None) -> None:
        super().__init__(counter)

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def __repr__(self) -> str:
        return (
            f"<EventQueue live={len(self._live)} stale={self._stale} "
            f"compactions={self._compactions}>"
        )

    def due_of(self, key: K) -> float | None:
        """The due time of ``key``'s live entry, or None if the key is not queued."""
        entry = self._live.get(key)
        return None if entry is None else entry[0]

    def peek(self) -> float | None:
        """The due time of the next live entry, or None when the queue is empty."""
        entry = self.head()
        return None if entry is None else entry[0]

    def head(self) -> Entry[K] | None:
        """The next live entry ``(due, priority, seq, key)`` without removing it."""
        heap = self._heap
        live = self._live
        while heap:
            entry = heap[0]
            if live.get(entry[3]) is entry:
                return entry
            heappop(heap)
            self._stale -= 1
        return None

    def entries(self) -> list[Entry[K]]:
        """All live entries in pop order. O(n log n); meant for listings, not hot paths."""
        return sorted(self._live.values())

    # -- mutation ---------------------------------------------------------------------------

    def push(self, key: K, due: float, priority: int = 0) -> None:
        """Queue ``key`` at ``due``; if ``key`` is live, reschedule it (the old entry goes stale).

        Args:
            key: Any hashable; it is never compared, only hashed.
            due: When the key becomes due, in whatever unit the caller uses consistently.
            priority: Lower pops first among entries with the same ``due``.

        Raises:
            ValueError: ``due`` or ``priority`` is NaN (it compares false with everything, so
                it would leave the heap out of order and every later pop wrong). A plain
                ``ValueError``: the core imports nothing, not even duetime's errors.
            TypeError: ``priority`` is not a number, ``key`` is not hashable, ``due`` does not
                order (``None``), or it does not compare with the dues already queued (the
                queue is left as it was).
        """
        if due != due:  # noqa: PLR0124 (NaN only: any type with != is accepted as it was)
            raise ValueError(f"due must not be NaN, got {due!r}")
        if not isinstance(priority, (int, float)):
            raise TypeError(f"priority must be a number, got {priority!r}")
        if priority != priority:  # noqa: PLR0124
            raise ValueError(f"priority must not be NaN, got {priority!r}")
        if not self._heap:
            # (Into an empty heap nothing is compared: a due that orders with nothing, None,
            # went in, and the next good push was refused as not comparing with it.)
            try:
                due < due  # noqa: B015, PLR0124
            except TypeError:
                raise TypeError(f"due must be a value that orders (<), got {due!r}") from None
        entry = (due, priority, next(self._counter), key)
        # setdefault is one dict operation for the common case (a new key); a reschedule
        # overwrites the mapping below and leaves the old entry in the heap as stale. (First:
        # an unhashable key raises here, before the heap is touched.)
        live = self._live
        old = live.setdefault(key, entry)
        try:
            heappush(self._heap, entry)
        except TypeError:
            # A due that does not compare with those queued (a str among floats): the push
            # must change nothing, and heappush has put the entry somewhere in the heap.
            self._unpush(entry)
            if old is entry:
                del live[key]
            raise TypeError(f"due must compare with the dues already queued, got {due!r}") from None
        if old is not entry:
            self._live[key] = entry
            self._went_stale()

    def _unpush(self, entry: Entry[K]) -> None:
        """Take back an entry a failed heappush left in the heap (found by identity: the
        entry cannot be compared), and restore the heap's order."""
        heap = self._heap
        for i, e in enumerate(heap):
            if e is entry:
                heap[i] = heap[-1]
                heap.pop()
                heapify(heap)
                return

    def cancel(self, key: K) -> bool:
        """Forget ``key`` in O(1) amortized. Returns whether it was live."""
        if self._live.pop(key, None) is None:
            return False
        self._went_stale()
        return True

    def pop_due(self, now: float) -> K | None:
        """Remove and return the next live key with ``due <= now``, or None if none is due."""
        entry = self.pop_due_entry(now)
        return None if entry is None else entry[3]

    def pop_due_entry(self, now: float) -> Entry[K] | None:
        """Like ``pop_due`` but return the whole entry ``(due, priority, seq, key)``.

        Raises:
            ValueError: ``now`` is NaN (nothing is due at no time; every entry compared as due).
        """
        if now != now:  # noqa: PLR0124
            raise ValueError(f"now must not be NaN, got {now!r}")
        heap = self._heap
        live = self._live
        while heap:
            entry = heap[0]
            if entry[0] > now:
                return None
            heappop(heap)
            key = entry[3]
            # One dict operation when the entry is live (the common case): pop, and only if
            # the key had been rescheduled to another entry, put that mapping back.
            current = live.pop(key, None)
            if current is entry:
                return entry
            if current is not None:
                live[key] = current
            self._stale -= 1
        return None

    def pop(self) -> Entry[K] | None:
        """Remove and return the next live entry regardless of its due time."""
        entry = self.head()
        if entry is not None:
            heappop(self._heap)
            del self._live[entry[3]]
        return entry

    def _went_stale(self) -> None:
        self._stale += 1
        if self._stale * 2 > len(self._heap) > COMPACT_MIN:
            # The live index holds exactly the live entries, so the rebuilt heap is a C-level
            # copy plus heapify: O(n) with no per-entry Python work. In place, so the list
            # object stays the same.
            self._heap[:] = self._live.values()
            heapify(self._heap)
            self._stale = 0
            self._compactions += 1
