from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from duetime import Clock, FakeClock, InvalidArgument, Scheduler, SteppableClock, SystemClock
from duetime.clock import NsClock

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
    # (A step back too far was reported without its sign, as more than "at most" allows.)
    with pytest.raises(InvalidArgument, match=r"within a thousand years .*got -1e\+20$"):
        c.jump_wall(-1e20)
    with pytest.raises(InvalidArgument, match=r"finite number of seconds, got -inf$"):
        c.jump_wall(float("-inf"))
    assert c.now() == START + timedelta(hours=23)


def test_start_validation() -> None:
    with pytest.raises(InvalidArgument, match="timezone-aware"):
        FakeClock(start=datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="start must be"):
        FakeClock(start="2026")  # type: ignore[arg-type]


def test_protocols() -> None:
    assert isinstance(FakeClock(), SteppableClock)
    assert isinstance(SystemClock(), Clock)
    assert not isinstance(SystemClock(), SteppableClock)


class SecondsOnly:
    """A clock written to the design's three methods (time, monotonic, wait), over a FakeClock."""

    def __init__(self) -> None:
        self.fake = FakeClock(start=datetime(2026, 3, 29, 7, 0, tzinfo=timezone.utc))

    def time(self) -> float:
        return self.fake.time()

    def monotonic(self) -> float:
        return self.fake.monotonic()

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        self.fake.wait(condition, timeout)


def test_a_clock_of_seconds_only_drives_a_scheduler() -> None:
    clock = SecondsOnly()
    assert isinstance(clock, Clock) and not isinstance(clock, NsClock)
    s = Scheduler(clock=clock)
    ran: list[float] = []
    try:
        assert s.clock is clock
        job = s.schedule(lambda: ran.append(clock.time()), 90)
        assert job.next_run_time == datetime(2026, 3, 29, 7, 1, 30, tzinfo=timezone.utc)
        clock.fake.advance(89)
        assert s.run_pending() == 0
        clock.fake.advance(1)
        assert s.run_pending() == 1
        with pytest.raises(
            TypeError,
            match=r"run_for\(\) needs a steppable clock .* is <tests.test_clock.SecondsOnly",
        ):
            s.run_for(1)
    finally:
        s.shutdown()
    assert ran == [clock.fake.time()]


def test_a_class_of_static_methods_is_a_clock_and_a_plain_class_is_refused() -> None:
    class Static:
        @staticmethod
        def time() -> float:
            return 1_000_000.0

        @staticmethod
        def monotonic() -> float:
            return 5.0

        @staticmethod
        def wait(condition: threading.Condition, timeout: float | None) -> None:
            condition.wait(timeout)

    s = Scheduler(clock=Static)
    try:
        job = s.schedule(print, 10)
        assert job.next_run_time == datetime.fromtimestamp(1_000_010, timezone.utc)
    finally:
        s.shutdown()
    with pytest.raises(
        TypeError, match=r"clock must be a clock, not a class: write clock=SecondsOnly\(\)"
    ):
        Scheduler(clock=SecondsOnly)  # type: ignore[arg-type]


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


def test_fake_wait_sleeps_until_time_moves() -> None:
    # One wait, as a test of the clock itself would write it: it sleeps until the clock moves.
    c = FakeClock()
    cond = threading.Condition()
    entered = threading.Event()
    seen: list[int] = []

    def sleeper() -> None:
        with cond:
            entered.set()
            c.wait(cond, 10)
            seen.append(c.monotonic_ns())

    t = threading.Thread(target=sleeper)
    t.start()
    assert entered.wait(5)
    with cond:  # (acquired once the sleeper has released it, asleep in wait)
        assert seen == []
    assert t.is_alive()
    c.advance(1)
    t.join(5)
    assert not t.is_alive()
    assert seen == [1_000_000_000]


def test_a_watched_condition_hears_a_move_between_a_read_and_the_first_wait() -> None:
    # The sleeper holds the condition from its read of the time to its wait; the clock moves in
    # between (its notification waits for the lock, which the wait releases), and wakes it.
    c = FakeClock()
    cond = threading.Condition()
    read = threading.Event()
    seen: list[tuple[int, int]] = []

    def sleeper() -> None:
        with cond:
            c.watch(cond)
            before = c.monotonic_ns()
            read.set()
            c.wait(cond, 10)
            seen.append((before, c.monotonic_ns()))

    t = threading.Thread(target=sleeper)
    t.start()
    assert read.wait(5)
    c.advance(1)
    t.join(5)
    assert not t.is_alive() and seen == [(0, 1_000_000_000)]


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


def test_fake_time_is_refused_past_the_year_9999_where_it_is_moved() -> None:
    # (advance() and jump_wall() went past it; every reading of the time then raised
    # OverflowError, far from the call that did it.)
    clock = FakeClock(start=datetime(9999, 12, 31, 23, tzinfo=timezone.utc))
    with pytest.raises(
        InvalidArgument,
        match=r"seconds would take the wall clock past the years 1 to 9999, got 7200",
    ):
        clock.advance(7200)
    with pytest.raises(InvalidArgument, match=r"ns would take the wall clock past the years"):
        clock.advance_ns(7200 * 10**9)
    with pytest.raises(InvalidArgument, match=r"seconds would take the wall clock past"):
        clock.jump_wall(timedelta(hours=2))
    assert clock.now() == datetime(9999, 12, 31, 23, tzinfo=timezone.utc)
    clock.advance(3599)
    assert clock.now().minute == 59


def test_run_for_past_the_year_9999_is_refused_before_time_moves() -> None:
    # (The stepping loop moved the clock itself: the job ran in the year 10000 and every later
    # reading of the time raised OverflowError.)
    clock = FakeClock(start=datetime(9999, 12, 31, 12, tzinfo=timezone.utc))
    s = Scheduler(clock=clock)
    s.schedule(print, 86400)
    with pytest.raises(
        InvalidArgument, match=r"seconds would take the clock past the years 1 to 9999, got 172800"
    ):
        s.run_for(2 * 86400)
    assert clock.now() == datetime(9999, 12, 31, 12, tzinfo=timezone.utc) and len(s) == 1
