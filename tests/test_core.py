from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from duetime import EventQueue
from duetime.core import COMPACT_MIN


def drain(q: EventQueue[Any], now: float = float("inf")) -> list[Any]:
    out = []
    while (k := q.pop_due(now)) is not None:
        out.append(k)
    return out


def test_pops_in_due_order() -> None:
    q: EventQueue[str] = EventQueue()
    for key, due in [("c", 3.0), ("a", 1.0), ("b", 2.0)]:
        q.push(key, due)
    assert drain(q) == ["a", "b", "c"]


def test_equal_due_lower_priority_first_then_fifo() -> None:
    q: EventQueue[str] = EventQueue()
    q.push("late-low", 5, priority=1)
    q.push("first", 5, priority=0)
    q.push("second", 5, priority=0)
    q.push("early", 4, priority=9)
    assert drain(q) == ["early", "first", "second", "late-low"]


def test_keys_need_not_be_orderable() -> None:
    q: EventQueue[object] = EventQueue()
    a, b = object(), object()
    q.push(a, 1)
    q.push(b, 1)  # same due and priority: the comparison must stop at seq
    assert drain(q) == [a, b]


def test_pop_due_respects_now_and_inclusive_bound() -> None:
    q: EventQueue[str] = EventQueue()
    q.push("x", 10)
    assert q.pop_due(9.999) is None
    assert q.pop_due(10) == "x"
    assert q.pop_due(100) is None


def test_cancel_is_lazy_and_counted() -> None:
    q: EventQueue[int] = EventQueue()
    for i in range(10):
        q.push(i, i)
    assert q.cancel(3) is True
    assert q.cancel(3) is False
    assert q.cancel(99) is False
    assert len(q) == 9
    assert q.stale == 1
    assert 3 not in q
    assert drain(q) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert q.stale == 0  # discarded when it surfaced


def test_push_of_live_key_reschedules() -> None:
    q: EventQueue[str] = EventQueue()
    q.push("a", 1)
    q.push("b", 2)
    q.push("a", 3)  # generation bump: the entry at 1 is stale
    assert len(q) == 2
    assert q.stale == 1
    assert q.due_of("a") == 3
    assert q.peek() == 2
    assert drain(q) == ["b", "a"]


def test_nan_due_is_refused_and_changes_nothing() -> None:
    q: EventQueue[str] = EventQueue()
    q.push("a", 2.0)
    with pytest.raises(ValueError, match="due must not be NaN, got nan"):
        q.push("a", float("nan"))
    with pytest.raises(ValueError, match="due must not be NaN"):
        q.push("b", float("nan"))
    assert len(q) == 1 and q.due_of("a") == 2.0 and "b" not in q
    q.push("c", 1.0)
    assert [q.pop_due(5.0), q.pop_due(5.0), q.pop_due(5.0)] == ["c", "a", None]


def test_a_due_that_orders_with_nothing_and_a_nan_priority_or_now_are_refused() -> None:
    # (None went into an empty queue: len 1, peek() None, pop_due a raw TypeError, and the next
    # good push refused as not comparing with it. pop_due(nan) popped what was not due.)
    q: EventQueue[str] = EventQueue()
    with pytest.raises(TypeError, match="due must be a value that orders"):
        q.push("a", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="priority must not be NaN, got nan"):
        q.push("a", 1.0, float("nan"))  # type: ignore[arg-type]
    assert len(q) == 0
    q.push("b", 5.0)
    with pytest.raises(ValueError, match="now must not be NaN, got nan"):
        q.pop_due(float("nan"))
    assert q.pop_due(4.0) is None and q.pop_due(5.0) == "b"


def test_peek_and_head_skip_stale_entries() -> None:
    q: EventQueue[str] = EventQueue()
    q.push("a", 1)
    q.push("b", 2)
    q.cancel("a")
    assert q.peek() == 2
    head = q.head()
    assert head is not None and head[3] == "b"
    assert q.pop() == head
    assert q.pop() is None
    assert q.peek() is None


def test_compaction_when_stale_exceeds_half() -> None:
    q: EventQueue[int] = EventQueue()
    n = 1000
    for i in range(n):
        q.push(i, i)
    for i in range(0, n, 2):
        q.cancel(i)
    assert q.compactions == 0  # exactly half stale: not more than half
    q.cancel(1)
    assert q.compactions == 1
    assert q.stale == 0
    assert len(q._heap) == len(q) == n // 2 - 1
    assert drain(q) == list(range(3, n, 2))


def test_small_heaps_are_not_compacted() -> None:
    q: EventQueue[int] = EventQueue()
    for i in range(COMPACT_MIN):
        q.push(i, i)
    for i in range(COMPACT_MIN):
        q.cancel(i)
    assert q.compactions == 0
    assert q.stale == COMPACT_MIN
    assert q.peek() is None


def test_shared_counter_keeps_fifo_across_queues() -> None:
    import itertools

    c = itertools.count()
    q1: EventQueue[str] = EventQueue(counter=c)
    q2: EventQueue[str] = EventQueue(counter=c)
    q1.push("first", 1)
    q2.push("second", 1)
    h1, h2 = q1.head(), q2.head()
    assert h1 is not None and h2 is not None
    assert h1 < h2


def test_entries_lists_live_in_order_and_clear() -> None:
    q: EventQueue[str] = EventQueue()
    q.push("b", 2)
    q.push("a", 1)
    q.push("c", 3)
    q.cancel("c")
    assert [e[3] for e in q.entries()] == ["a", "b"]
    q.clear()
    assert len(q) == 0 and q.stale == 0 and q.peek() is None
    assert "EventQueue live=0" in repr(q)


class QueueMachine(RuleBasedStateMachine):
    """EventQueue against a plain list model sorted by (due, priority, insertion)."""

    def __init__(self) -> None:
        super().__init__()
        self.q: EventQueue[int] = EventQueue()
        self.model: dict[int, tuple[int, int, int]] = {}
        self.seq = 0

    def _model_order(self) -> list[int]:
        return [k for k, _ in sorted(self.model.items(), key=lambda kv: kv[1])]

    @rule(key=st.integers(0, 30), due=st.integers(0, 50), priority=st.integers(-2, 2))
    def push(self, key: int, due: int, priority: int) -> None:
        rescheduled = key in self.model
        self.q.push(key, due, priority)
        self.model[key] = (due, priority, self.seq)
        self.seq += 1
        if rescheduled:
            self.check_compaction_bound()

    @rule(key=st.integers(0, 30))
    def cancel(self, key: int) -> None:
        live = key in self.model
        assert self.q.cancel(key) == live
        self.model.pop(key, None)
        if live:
            # (A cancel of a key that is not queued changes nothing, so it checks nothing: a
            # heap that grew past COMPACT_MIN by plain pushes is compacted at the next entry
            # that goes stale.)
            self.check_compaction_bound()

    def check_compaction_bound(self) -> None:
        # Checked where the design checks it (after a cancel or reschedule, as asyncio does):
        # pops alone may leave more than half stale until the next cancel.
        heap = len(self.q._heap)
        assert self.q.stale * 2 <= heap or heap <= COMPACT_MIN

    @rule(now=st.integers(0, 60))
    def pop_due(self, now: int) -> None:
        order = self._model_order()
        expected = order[0] if order and self.model[order[0]][0] <= now else None
        assert self.q.pop_due(now) == expected
        if expected is not None:
            del self.model[expected]

    @precondition(lambda self: len(self.model) > 0)
    @rule()
    def drain_all(self) -> None:
        assert drain(self.q) == self._model_order()
        self.model.clear()

    @rule(n=st.integers(150, 300))
    def bulk_push_then_cancel_most(self, n: int) -> None:
        # Big enough to cross COMPACT_MIN and trigger compaction mid-sequence.
        base = 1000 + self.seq
        for i in range(n):
            self.push(base + i, i % 40, 0)
        for i in range(n - 5):
            self.cancel(base + i)
        assert self.q.compactions >= 1

    @invariant()
    def same_contents(self) -> None:
        assert len(self.q) == len(self.model)
        order = self._model_order()
        assert self.q.peek() == (self.model[order[0]][0] if order else None)


QueueMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestQueueMachine = QueueMachine.TestCase


@pytest.mark.parametrize("n", [1, 2, 150])
def test_reschedule_many_times_keeps_one_live_entry(n: int) -> None:
    q: EventQueue[str] = EventQueue()
    for i in range(n):
        q.push("k", n - i)
    assert len(q) == 1
    assert q.due_of("k") == 1
    assert drain(q) == ["k"]


def test_a_push_that_cannot_be_ordered_changes_nothing() -> None:
    # (A str due among floats used to leave its key live and a junk entry in the heap: every
    # later pop_due raised; a str priority was accepted and broke the next valid push.)
    q: EventQueue[str] = EventQueue()
    q.push("x", 1.0)
    q.push("z", 2.0)
    with pytest.raises(TypeError, match="due must compare with the dues already queued, got '5'"):
        q.push("y", "5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="priority must be a number, got 'p'"):
        q.push("y", 1.0, "p")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unhashable"):
        q.push(["a", "list"], 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="due must compare"):
        q.push("x", "later")  # type: ignore[arg-type]  # (a reschedule: x keeps its entry)
    assert len(q) == 2 and "y" not in q
    q.push("w", 1.5, 0.5)  # type: ignore[arg-type]  # (a float priority orders as it did)
    assert [q.pop_due(10), q.pop_due(10), q.pop_due(10), q.pop_due(10)] == ["x", "w", "z", None]


def test_a_heap_grown_past_the_minimum_by_pushes_compacts_at_the_next_stale_entry() -> None:
    # Plain pushes add no stale entry, so they check nothing: a heap of COMPACT_MIN entries,
    # most of them stale, may grow past it, its stale entries (fewer than COMPACT_MIN) kept
    # until the next cancel or reschedule compacts it.
    q: EventQueue[int] = EventQueue()
    for i in range(COMPACT_MIN):
        q.push(i, i)
    for i in range(COMPACT_MIN - 5):
        q.cancel(i)
    assert q.stale == COMPACT_MIN - 5 and q.compactions == 0
    q.push(1000, 0)
    q.push(1001, 0)
    assert q.stale == COMPACT_MIN - 5  # (past the minimum, more than half stale: not yet)
    q.cancel(1000)
    assert q.stale == 0 and q.compactions == 1 and len(q) == 6
