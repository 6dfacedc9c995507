from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from duetime import Clock, FakeClock, InvalidArgument, SteppableClock, SystemClock

START = datetime(2026, 1, 5, 8, 0, tzinfo=timezone.utc)


def test_fake_clock_starts_where_told() -> None:
    c = FakeClock(start=START)
    assert c.now() == START
    assert c.time() == START.timestamp()
    assert c.monotonic() == 0.0
    assert FakeClock().time() == 0.0
    assert FakeClock(start=-5).time_ns() == -5_000_000_000


def test_advance_is_exact() -> None:
    a, b = FakeClock(), FakeClock()
    for _ in range(10_000):
        a.advance(0.1)
    b.advance(1000)
    assert a.time_ns() == b.time_ns() == 1_000_000_000_000
    assert a.monotonic_ns() == b.monotonic_ns()
    assert a.time() == 1000.0


def test_advance_accepts_timedelta_and_moves_both_timebases() -> None:
    c = FakeClock(start=START)
    c.advance(timedelta(minutes=1, microseconds=5))
    assert c.now() == START + timedelta(minutes=1, microseconds=5)
    assert c.monotonic_ns() == 60_000_005_000


@pytest.mark.parametrize("bad", [-1, -0.5, timedelta(seconds=-1), float("nan"), float("inf")])
def test_advance_rejects_bad_values_and_does_not_move(bad: object) -> None:
    c = FakeClock(start=START)
    with pytest.raises(InvalidArgument, match="seconds"):
        c.advance(bad)  # type: ignore[arg-type]
    assert c.now() == START and c.monotonic_ns() == 0


@pytest.mark.parametrize("bad", ["1", None, True])
def test_advance_rejects_wrong_types(bad: object) -> None:
    with pytest.raises(TypeError, match="seconds must be a number"):
        FakeClock().advance(bad)  # type: ignore[arg-type]


def test_set_moves_forward_only() -> None:
    c = FakeClock(start=START)
    c.set(START + timedelta(hours=1))
    assert c.monotonic() == 3600.0
    with pytest.raises(InvalidArgument, match="must not be earlier"):
        c.set(START)
    with pytest.raises(InvalidArgument, match="timezone-aware"):
        c.set(datetime(2030, 1, 1))
    assert c.now() == START + timedelta(hours=1)


def test_jump_wall_moves_only_the_wall_clock_either_way() -> None:
    c = FakeClock(start=START)
    c.jump_wall(-3600)
    assert c.now() == START - timedelta(hours=1)
    assert c.monotonic_ns() == 0
    c.jump_wall(timedelta(days=1))
    assert c.now() == START + timedelta(hours=23)
    with pytest.raises(InvalidArgument, match="finite"):
        c.jump_wall(float("nan"))
    with pytest.raises(TypeError, match="seconds"):
        c.jump_wall("1")  # type: ignore[arg-type]


def test_start_validation() -> None:
    with pytest.raises(InvalidArgument, match="timezone-aware"):
        FakeClock(start=datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="start must be"):
        FakeClock(start="2026")  # type: ignore[arg-type]


def test_protocols() -> None:
    assert isinstance(FakeClock(), SteppableClock)
    assert isinstance(SystemClock(), Clock)
    assert not isinstance(SystemClock(), SteppableClock)


def test_system_clock_reads_real_time() -> None:
    import time

    c = SystemClock()
    assert abs(c.time() - time.time()) < 5
    assert c.monotonic_ns() <= time.monotonic_ns()
    assert abs(c.time_ns() / 1e9 - c.time()) < 5
    assert c.monotonic() > 0
    cond = threading.Condition()
    with cond:
        c.wait(cond, 0)  # a zero timeout returns at once
    assert repr(c) == "SystemClock(precision=0.0003)"


def test_system_clock_wait_returns_when_notified_and_validates_precision() -> None:
    c = SystemClock(precision=0.001)
    cond = threading.Condition()
    notified = threading.Event()

    def notifier() -> None:
        with cond:
            cond.notify_all()
        notified.set()

    with cond:
        t = threading.Thread(target=notifier)
        t.start()
        started = time.monotonic()
        c.wait(cond, 30.0)
        waited = time.monotonic() - started
    t.join(5)
    assert notified.is_set()
    assert waited < 5  # it returned on the notify, not after 30 s
    with pytest.raises(InvalidArgument, match="precision must be in"):
        SystemClock(precision=2)
    with pytest.raises(TypeError, match="precision must be a number"):
        SystemClock(precision="fast")  # type: ignore[arg-type]


def test_fake_wait_wakes_when_time_moves() -> None:
    c = FakeClock()
    cond = threading.Condition()
    woke = threading.Event()
    seen: list[int] = []

    def sleeper() -> None:
        with cond:
            c.wait(cond, 10)  # first wait registers and returns (spurious wakeup)
            ready.set()
            while c.monotonic_ns() == 0:
                c.wait(cond, 10)
            seen.append(c.monotonic_ns())
        woke.set()

    ready = threading.Event()
    t = threading.Thread(target=sleeper)
    t.start()
    assert ready.wait(5)
    c.advance(1)
    t.join(5)
    assert not t.is_alive()
    assert woke.is_set() and seen == [1_000_000_000]


def test_fake_wait_with_spent_timeout_returns_at_once() -> None:
    c = FakeClock()
    cond = threading.Condition()
    with cond:
        c.wait(cond, 0)
        c.wait(cond, -1)
    assert c.monotonic_ns() == 0


def test_on_move_callbacks() -> None:
    c = FakeClock()
    moves: list[float] = []
    remove = c.on_move(lambda: moves.append(c.time()))
    c.advance(1)
    c.jump_wall(5)
    remove()
    c.advance(1)
    assert moves == [1.0, 6.0]
    remove()  # idempotent


def test_repr_mentions_time() -> None:
    assert "1970-01-01" in repr(FakeClock())
