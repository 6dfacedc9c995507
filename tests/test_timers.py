"""The Scheduler's packed-int timer heap (duetime._timers), against a sorted-list model."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from duetime._timers import DUE_SHIFT, PRIORITY_MAX, PRIORITY_MIN, TimerQueue
from duetime.core import COMPACT_MIN


class Key:
    """A stand-in for a Job or side: anything with a ``_qkey`` slot."""

    __slots__ = ("_qkey", "name")

    def __init__(self, name: int) -> None:
        self.name = name
        self._qkey: int | None = None

    def __repr__(self) -> str:
        return f"Key({self.name})"


def pop_all(q: TimerQueue) -> list[Key]:
    out = []
    while (entry := q.head()) is not None:
        out.append(q.pop_entry(entry))
    return out


dues = st.integers(-(2**62), 2**62)
priorities = st.integers(PRIORITY_MIN, PRIORITY_MAX)


def entry_for(due: int, priority: int, seq: int) -> int:
    """The entry TimerQueue.push makes for ``(due, priority, seq)``."""
    key = Key(0)
    TimerQueue(itertools.count(seq)).push(key, due, priority)
    assert key._qkey is not None
    return key._qkey


seqs = st.integers(0, 2**48 - 1)


@given(a=st.tuples(dues, priorities, seqs), b=st.tuples(dues, priorities, seqs))
def test_packed_entries_order_and_decode_like_tuples(
    a: tuple[int, int, int], b: tuple[int, int, int]
) -> None:
    assert (entry_for(*a) < entry_for(*b)) == (a < b)
    assert entry_for(*a) >> DUE_SHIFT == a[0]  # negative due times decode too (>> floors)


def test_reschedule_leaves_one_live_entry_and_counts_stale() -> None:
    q = TimerQueue()
    k = Key(1)
    q.push(k, 50, 0)
    q.push(k, 10, 0)
    assert len(q) == 1 and q.stale == 1
    assert q.head() is not None and q.head() >> DUE_SHIFT == 10  # type: ignore[operator]
    assert pop_all(q) == [k] and k._qkey is None
    assert q.stale == 0  # the stale entry was discarded on the way


def test_cancel_is_o1_lazy_and_compacts_past_half() -> None:
    q = TimerQueue()
    keys = [Key(i) for i in range(300)]
    for i, k in enumerate(keys):
        q.push(k, i, 0)
    assert q.cancel(keys[0]) and not q.cancel(keys[0])
    for k in keys[1:295]:
        q.cancel(k)
    assert q.compactions >= 1
    assert q.stale * 2 <= q.held() or q.held() <= COMPACT_MIN
    assert pop_all(q) == keys[295:]


class TimerMachine(RuleBasedStateMachine):
    """TimerQueue against a plain dict model sorted by (due, priority, insertion)."""

    def __init__(self) -> None:
        super().__init__()
        self.q = TimerQueue()
        self.keys = [Key(i) for i in range(12)]
        self.model: dict[int, tuple[int, int, int]] = {}
        self.seq = 0

    def order(self) -> list[int]:
        return [k for k, _ in sorted(self.model.items(), key=lambda kv: kv[1])]

    @rule(k=st.integers(0, 11), due=st.integers(-5, 40), priority=st.integers(-2, 2))
    def push(self, k: int, due: int, priority: int) -> None:
        self.q.push(self.keys[k], due, priority)
        self.model[k] = (due, priority, self.seq)
        self.seq += 1

    @rule(k=st.integers(0, 11))
    def cancel(self, k: int) -> None:
        assert self.q.cancel(self.keys[k]) == (k in self.model)
        self.model.pop(k, None)

    @rule()
    def pop(self) -> None:
        order = self.order()
        entry = self.q.head()
        if not order:
            assert entry is None
            return
        assert entry is not None and entry >> DUE_SHIFT == self.model[order[0]][0]
        assert self.q.pop_entry(entry) is self.keys[order[0]]
        del self.model[order[0]]

    @rule(n=st.integers(COMPACT_MIN + 2, COMPACT_MIN + 80))
    def churn(self, n: int) -> None:
        # Reschedule one key n times: enough stale entries to force a compaction.
        before = self.q.compactions
        for i in range(n):
            self.push(0, i % 30, 0)
        assert self.q.compactions > before

    @rule(dues=st.lists(st.integers(-5, 40), min_size=5, max_size=12))
    def bulk(self, dues: list[int]) -> None:
        # Many pushes before a read: absorbed as a sorted run, where single pushes made
        # while a run is big go to the heap; pops must merge the two.
        for k, due in enumerate(dues):
            self.push(k, due, 0)

    @invariant()
    def every_held_entry_is_live_or_counted_stale(self) -> None:
        assert self.q.held() == len(self.q) + self.q.stale

    @invariant()
    def same_contents(self) -> None:
        assert len(self.q) == len(self.model)
        assert sorted(k.name for k in self.q.live_keys()) == sorted(self.model)
        for i, key in enumerate(self.keys):
            assert (key._qkey is not None) == (i in self.model)


TimerMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestTimerMachine = TimerMachine.TestCase


@pytest.mark.parametrize("priority", [PRIORITY_MIN, PRIORITY_MAX])
def test_extreme_priorities_keep_due_order(priority: int) -> None:
    q = TimerQueue()
    a, b = Key(1), Key(2)
    q.push(a, 2, PRIORITY_MIN)
    q.push(b, 1, priority)
    assert pop_all(q) == [b, a]


def test_a_trickle_after_a_bulk_goes_to_the_heap_and_pops_merge_both() -> None:
    q = TimerQueue()
    bulk = [Key(i) for i in range(40)]
    for i, k in enumerate(bulk):
        q.push(k, 10 * i, 0)
    assert q.head() is not None  # the read sorts the bulk into the run
    assert len(q._run) == 40 and not q._heap and not q._new
    early, late = Key(100), Key(101)
    q.push(late, 395, 0)
    q.push(early, 5, 0)
    assert q.head() is not None
    assert len(q._heap) == 2 and len(q._run) == 40  # too few to re-sort the run for
    assert pop_all(q) == [bulk[0], early, *bulk[1:40], late]


def test_a_big_enough_batch_is_merged_into_the_run() -> None:
    q = TimerQueue()
    first = [Key(i) for i in range(20)]
    for i, k in enumerate(first):
        q.push(k, 2 * i, 0)
    q.head()
    second = [Key(100 + i) for i in range(10)]  # 10 * 4 >= 20: merged, not heaped
    for i, k in enumerate(second):
        q.push(k, 2 * i + 1, 0)
    q.head()
    assert len(q._run) == 30 and not q._heap
    interleaved = [k for i in range(10) for k in (first[i], second[i])]
    assert pop_all(q) == interleaved + first[10:]


def test_compaction_hands_live_entries_to_the_next_read() -> None:
    q = TimerQueue()
    keys = [Key(i) for i in range(400)]
    for i, k in enumerate(keys):
        q.push(k, 400 - i, 0)
    q.head()
    for k in keys[:300]:
        q.cancel(k)
    assert q.compactions == 1
    assert q.held() == len(q) + q.stale and len(q._new) <= 400 - 201
    assert pop_all(q) == keys[300:][::-1]


def test_the_scheduler_queues_what_push_would_queue() -> None:
    # Scheduler.schedule inlines TimerQueue.push for a plain delay at priority 0; the
    # general path calls push. Both must make the same entry, apart from the sequence number.
    from duetime import FakeClock, Scheduler

    s = Scheduler(clock=FakeClock())
    fast = s.schedule(print, 1.5)
    general = s.schedule(print, 1.5, priority=0, args=())
    assert fast._qkey is not None and general._qkey is not None
    assert general._qkey - fast._qkey == 1
    q = TimerQueue()
    key = Key(0)
    q.push(key, 1_500_000_000, 0)
    assert key._qkey is not None and key._qkey >> 48 == fast._qkey >> 48


def test_queues_of_at_most_compact_min_entries_are_never_compacted() -> None:
    q = TimerQueue()
    keys = [Key(i) for i in range(COMPACT_MIN)]
    for i, k in enumerate(keys):
        q.push(k, i, 0)
    for k in keys[:-1]:
        q.cancel(k)
    assert q.compactions == 0 and q.stale == COMPACT_MIN - 1
    assert pop_all(q) == keys[-1:] and q.stale == 0
