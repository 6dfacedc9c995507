"""The Scheduler's own timer queue: EventQueue's algorithm with each entry packed into one int,
and a sorted run beside the heap.

``EventQueue`` (duetime.core) is the general, public queue: any hashable key, any numeric due
time, any priority, entries that are readable tuples. The Scheduler needs less generality and
much more speed, because its per-occurrence overhead is what decides whether duetime beats the
standard library's ``sched`` at all. So its two queues (wall clock and monotonic) use this
specialisation of the same algorithm:

* An entry is one non-negative-offset int: ``due << 80 | (priority + 2**31) << 48 | seq``.
  Comparing two entries compares ``(due, priority, seq)`` in one C-level int comparison instead
  of a tuple walk, an entry costs ~48 bytes instead of a 4-tuple plus a separate ``seq`` int
  (~136 bytes), and the queue holds no tuples for the cyclic garbage collector to traverse.
  ``due`` is integer nanoseconds (any sign: ``>>`` floors, so ordering and decoding hold for
  negative times too), ``priority`` must fit in 32 signed bits, and ``seq`` in 48 bits
  (2.8e14 pushes).
* The live index maps entry -> key object, and the key object (a Job or a retry/deferred side)
  remembers its live entry in its ``_qkey`` slot. That makes the "generation" of a key simply
  its newest entry: a reschedule pushes a fresh entry and drops the old one from the index,
  which leaves the old one stale where it lies (lazy deletion, O(1) cancel).
* Pushes are appended unsorted and sorted in batches when the queue is next read (see
  ``TimerQueue``): a simulation that schedules 200 000 jobs and then runs them pays one
  C-level sort and an O(1) pop per job instead of a heap's sift on every push and pop, which
  was a fifth of its cost per job. Entries trickling in one at a time go to an ordinary heap.
* Compaction is EventQueue's rule: rebuild when stale entries are more than half of the
  entries held, past ``COMPACT_MIN``. The live index's keys *are* the live entries, so the
  rebuild is a C-level copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from heapq import heappop, heappush
from typing import Any

from duetime.core import COMPACT_MIN, LazyHeap

__all__ = ["DUE_SHIFT", "PRIORITY_MAX", "PRIORITY_MIN", "PRIORITY_ZERO_BITS", "TimerQueue"]

#: Bits below the due time in an entry: 32 of priority, 48 of sequence number.
DUE_SHIFT = 80
_PRIORITY_SHIFT = 48
_PRIORITY_BIAS = 1 << 31
#: The priority field of an entry at the default priority 0, for the Scheduler's inlined push.
PRIORITY_ZERO_BITS = _PRIORITY_BIAS << _PRIORITY_SHIFT
#: The range of a job's priority (a signed 32-bit int, as in Java's executors).
PRIORITY_MIN = -(1 << 31)
PRIORITY_MAX = (1 << 31) - 1


class TimerQueue(LazyHeap):
    """A priority queue of packed entries with O(1) lazy cancel; keys carry their entry in
    ``_qkey``.

    Entries live in one of three lists, and the queue's minimum is the smaller of two heads:

    * ``_new``: pushed since the queue was last read, in no order. A push is an append.
    * ``_run``: a sorted run, descending, so its minimum is last and pops in O(1).
    * ``_heap``: a min-heap for entries that trickle in while a large run is being consumed.

    Before a read, ``_new`` is absorbed: when it is at least a quarter of the run's size it is
    merged into the run by one ``list.sort`` (timsort finds the run already sorted, so the
    merge costs O(run) plus O(new log new), all in C, i.e. O(log n) per entry amortized);
    otherwise its entries are pushed onto the heap. The common simulation shape, many jobs
    scheduled and then a long ``run_until``, so costs one C-level sort and an O(1) pop per
    occurrence, where a heap pays O(log n) Python-visible sift work on every push and pop;
    a queue fed one entry at a time behaves like a plain heap.

    Not thread-safe: the Scheduler calls it with its lock held.
    """

    __slots__ = ("_new", "_run")

    _heap: list[int]

    def __init__(self, counter: Iterator[int] | None = None) -> None:
        super().__init__(counter)
        self._run: list[int] = []
        self._new: list[int] = []

    def live_keys(self) -> list[Any]:
        """The live key objects, in no particular order."""
        return list(self._live.values())

    def held(self) -> int:
        """Entries held, live and stale."""
        return len(self._heap) + len(self._run) + len(self._new)

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
        self._new.append(entry)
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

    def _went_stale(self) -> None:
        self._stale += 1
        stale2 = self._stale * 2
        if stale2 > COMPACT_MIN:  # a cheap test first: held(), inlined, takes three len calls
            held = len(self._heap) + len(self._run) + len(self._new)
            if stale2 > held > COMPACT_MIN:
                # The live index's keys are exactly the live entries: a C-level copy into
                # _new, to be sorted into a fresh run by the next read (work the pops would
                # otherwise do on a heap), and nothing at all when nothing reads, as when a
                # burst of cancels empties the queue.
                self._new[:] = self._live
                self._run.clear()
                self._heap.clear()
                self._stale = 0
                self._compactions += 1

    def clear(self) -> None:
        super().clear()
        self._run.clear()
        self._new.clear()

    def absorb(self) -> None:
        """Move the entries pushed since the last read into the run or the heap."""
        new = self._new
        run = self._run
        if len(new) * 4 >= len(run):
            run += new
            run.sort(reverse=True)
        else:
            heap = self._heap
            for entry in new:
                heappush(heap, entry)
        new.clear()

    def head(self) -> int | None:
        """The next live entry (discarding stale ones on the way), or None."""
        if self._new:
            self.absorb()
        heap = self._heap
        run = self._run
        live = self._live
        while True:
            if run and not (heap and heap[0] < run[-1]):
                entry = run[-1]
                if entry in live:
                    return entry
                run.pop()
            elif heap:
                entry = heap[0]
                if entry in live:
                    return entry
                heappop(heap)
            else:
                return None
            self._stale -= 1

    def pop_entry(self, entry: int) -> Any:
        """Remove the head, which ``head()`` just returned as ``entry``; return its key."""
        run = self._run
        if run and run[-1] is entry:
            run.pop()
        else:
            heappop(self._heap)
        key = self._live.pop(entry)
        key._qkey = None
        return key
