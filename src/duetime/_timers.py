"""The Scheduler's own timer heap: EventQueue's algorithm with each entry packed into one int.

``EventQueue`` (duetime.core) is the general, public queue: any hashable key, any numeric due
time, any priority, entries that are readable tuples. The Scheduler needs less generality and
much more speed, because its per-occurrence overhead is what decides whether duetime beats the
standard library's ``sched`` at all. So its two queues (wall clock and monotonic) use this
specialisation of the same algorithm:

* An entry is one non-negative-offset int: ``due << 80 | (priority + 2**31) << 48 | seq``.
  Comparing two entries compares ``(due, priority, seq)`` in one C-level int comparison instead
  of a tuple walk, an entry costs ~48 bytes instead of a 4-tuple plus a separate ``seq`` int
  (~136 bytes), and the heap holds no tuples for the cyclic garbage collector to traverse.
  ``due`` is integer nanoseconds (any sign: ``>>`` floors, so ordering and decoding hold for
  negative times too), ``priority`` must fit in 32 signed bits, and ``seq`` in 48 bits
  (2.8e14 pushes).
* The live index maps entry -> key object, and the key object (a Job or a retry/deferred side)
  remembers its live entry in its ``_qkey`` slot. That makes the "generation" of a key simply
  its newest entry: a reschedule pushes a fresh entry and drops the old one from the index,
  which leaves the old one stale in the heap (lazy deletion, O(1) cancel).
* Compaction is the same rule as EventQueue's: rebuild when stale entries are more than half of
  a heap of over ``COMPACT_MIN`` entries. The live index's keys *are* the live entries, so the
  rebuild is a C-level copy plus ``heapify``.
"""

from __future__ import annotations

from collections.abc import Iterable
from heapq import heappop, heappush
from typing import Any

from duetime.core import LazyHeap

__all__ = ["DUE_SHIFT", "PRIORITY_MAX", "PRIORITY_MIN", "TimerQueue"]

#: Bits below the due time in an entry: 32 of priority, 48 of sequence number.
DUE_SHIFT = 80
_PRIORITY_SHIFT = 48
_PRIORITY_BIAS = 1 << 31
#: The range of a job's priority (a signed 32-bit int, as in Java's executors).
PRIORITY_MIN = -(1 << 31)
PRIORITY_MAX = (1 << 31) - 1


class TimerQueue(LazyHeap):
    """A min-heap of packed entries with O(1) lazy cancel; keys carry their entry in ``_qkey``.

    Not thread-safe: the Scheduler calls it with its lock held.
    """

    __slots__ = ()

    _heap: list[int]

    def live_keys(self) -> list[Any]:
        """The live key objects, in no particular order."""
        return list(self._live.values())

    def push(self, key: Any, due: int, priority: int) -> None:
        """Queue ``key`` at ``due``; if it is queued already, its old entry goes stale."""
        entry = (
            (due << DUE_SHIFT)
            + ((priority + _PRIORITY_BIAS) << _PRIORITY_SHIFT)
            + next(self._counter)
        )
        old = key._qkey
        key._qkey = entry
        self._live[entry] = key
        heappush(self._heap, entry)
        if old is not None and self._live.pop(old, None) is not None:
            self._went_stale()

    def cancel(self, key: Any) -> bool:
        """Drop ``key``'s entry in O(1) amortized. Returns whether it was queued."""
        entry = key._qkey
        if entry is None:
            return False
        key._qkey = None
        if self._live.pop(entry, None) is None:
            return False
        self._went_stale()
        return True

    def _live_entries(self) -> Iterable[int]:
        return self._live

    def head(self) -> int | None:
        """The next live entry (discarding stale ones on the way), or None."""
        heap = self._heap
        live = self._live
        while heap:
            entry = heap[0]
            if entry in live:
                return entry
            heappop(heap)
            self._stale -= 1
        return None

    def pop_entry(self, entry: int) -> Any:
        """Remove the head, which ``head()`` just returned as ``entry``; return its key."""
        heappop(self._heap)
        key = self._live.pop(entry)
        key._qkey = None
        return key
