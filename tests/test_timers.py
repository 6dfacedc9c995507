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
    assert q.stale * 2 <= len(q._heap) or len(q._heap) <= COMPACT_MIN
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
