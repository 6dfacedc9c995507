"""Clocks: where the time comes from, and how a runner sleeps until it changes.

This is the only module in duetime that reads real time. Everything else asks a ``Clock``, which
is what lets one Scheduler serve an application (``SystemClock``), a unit test and a simulation
(``FakeClock``, moved by hand) without a line of difference.

A clock has two timebases. ``time`` is the wall clock (epoch seconds): it follows NTP steps and a
person changing the date, and it is what "at 09:00" means. ``monotonic`` only ever moves forward at
the rate of real elapsed time: it is what "in 30 seconds" means. ``FakeClock`` keeps both as
integer nanoseconds so that arithmetic on them is exact: ten thousand ``advance(0.1)`` calls land
on exactly ``advance(1000)``, and a stepping loop that jumps to a due time compares equal to it
instead of falling a rounding error short and spinning (the asyncio virtual-clock hang,
cpython#116342).
"""

from __future__ import annotations

import threading
import time as _time
import weakref
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import ClassVar, Protocol, runtime_checkable

from duetime._validate import (
    EPOCH_MOST_NS,
    NS_PER_SECOND,
    aware_datetime,
    datetime_to_ns,
    duration_ns,
    epoch_ns,
    in_calendar,
    signed_duration_ns,
)
from duetime.errors import InvalidArgument

__all__ = [
    "Clock",
    "FakeClock",
    "NsClock",
    "SecondsClock",
    "SteppableClock",
    "SystemClock",
    "WallAxis",
    "real_monotonic",
    "real_sleep",
    "real_time_ns",
]

#: The operating system's monotonic clock (seconds) and sleep, for code that must take real time
#: as a default, such as ``duetime.compat.sched``; they are ``time.monotonic`` and ``time.sleep``
#: themselves, so identity checks against the standard library's functions still hold.
real_monotonic = _time.monotonic
real_sleep = _time.sleep
#: The system's wall clock (epoch nanoseconds), for what concerns real processes whatever clock a
#: scheduler runs on: which worker processes are alive (a durable store's list of workers).
real_time_ns = _time.time_ns


@runtime_checkable
class Clock(Protocol):
    """What a Scheduler needs from a source of time: two readings and a way to sleep.

    A clock may also read integer nanoseconds (``time_ns`` and ``monotonic_ns``, see
    ``NsClock``), as every clock of duetime's does, and should if it can: without them the
    Scheduler derives nanoseconds from the seconds, as exact as a float is (about a quarter of
    a microsecond for today's epoch seconds).

    Implementations must be safe to call from several threads.
    """

    def time(self) -> float:
        """Wall-clock time in seconds since the Unix epoch."""
        ...

    def monotonic(self) -> float:
        """Monotonic time in seconds: never goes back, unaffected by wall-clock steps."""
        ...

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Sleep on ``condition`` (held by the caller) for up to ``timeout`` seconds of this clock.

        Returns early when the condition is notified, and may return spuriously: callers loop and
        re-read the time. ``None`` means no limit.
        """
        ...


@runtime_checkable
class NsClock(Clock, Protocol):
    """A ``Clock`` that also reads integer nanoseconds, which is how the Scheduler keeps time."""

    def time_ns(self) -> int:
        """Wall-clock time in integer nanoseconds since the Unix epoch."""
        ...

    def monotonic_ns(self) -> int:
        """Monotonic time in integer nanoseconds."""
        ...


@runtime_checkable
class SteppableClock(NsClock, Protocol):
    """A clock whose time a program moves by hand (what ``step`` and ``run_until`` need)."""

    def advance_ns(self, ns: int) -> None:
        """Move both timebases forward by ``ns`` nanoseconds (``ns >= 0``)."""
        ...


class _View:
    """A clock seen through another: ``inner``'s wall-clock seconds and its sleeps."""

    __slots__ = ("inner",)

    def __init__(self, inner: Clock) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    def time(self) -> float:
        """The wrapped clock's wall-clock seconds."""
        return self.inner.time()

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Sleep as the wrapped clock sleeps."""
        self.inner.wait(condition, timeout)

    def watch(self, condition: threading.Condition) -> None:
        """Have the wrapped clock notify ``condition`` when it moves, if it can
        (``FakeClock.watch``)."""
        watch = getattr(self.inner, "watch", None)
        if watch is not None:
            watch(condition)


class SecondsClock(_View):
    """A ``Clock`` that reads only seconds, seen as an ``NsClock`` (package-internal: the
    Scheduler wraps such a clock in it). Sleeping is the wrapped clock's own."""

    __slots__ = ()

    def monotonic(self) -> float:
        """The wrapped clock's monotonic seconds."""
        return self.inner.monotonic()

    def time_ns(self) -> int:
        """The wrapped clock's wall-clock seconds in nanoseconds (rounded)."""
        return round(self.inner.time() * NS_PER_SECOND)

    def monotonic_ns(self) -> int:
        """The wrapped clock's monotonic seconds in nanoseconds (rounded)."""
        return round(self.inner.monotonic() * NS_PER_SECOND)


class SystemClock:
    """The operating system's clocks: ``time.time_ns`` and ``time.monotonic_ns``.

    Args:
        precision: Seconds before a timed wait's deadline at which the runner stops sleeping
            on its condition variable and yields until the deadline instead. Waking from a
            condition variable overshoots by ~0.1-0.6 ms on a typical Linux VM (timer slack
            plus scheduling); this window brings jobs that much closer to their due time, at a
            cost of at most ``precision`` CPU seconds per timed wake-up (never while idle:
            waits without a deadline, or with a spent one, do not spin). 0 disables it.
    """

    __slots__ = ("precision",)

    def __init__(self, precision: float = 0.0003) -> None:
        if isinstance(precision, bool) or not isinstance(precision, (int, float)):
            raise TypeError(f"precision must be a number of seconds, got {precision!r}")
        if not 0 <= precision < 1:
            raise InvalidArgument(f"precision must be in [0, 1) seconds, got {precision!r}")
        self.precision = float(precision)

    def time(self) -> float:
        """Wall-clock seconds since the epoch, from the OS."""
        return _time.time()

    def monotonic(self) -> float:
        """Monotonic seconds, from the OS."""
        return _time.monotonic()

    def time_ns(self) -> int:
        """Wall-clock nanoseconds since the epoch, from the OS."""
        return _time.time_ns()

    def monotonic_ns(self) -> int:
        """Monotonic nanoseconds, from the OS."""
        return _time.monotonic_ns()

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Block on ``condition`` for up to ``timeout`` real seconds (None: until notified).

        The last ``precision`` seconds are spent yielding (zero-timeout waits, which release
        the lock and return at once if notified) rather than asleep, so the caller resumes
        close to the deadline instead of a timer-slack later.
        """
        if timeout is None:
            condition.wait()
            return
        if timeout <= 0:
            return
        deadline = _time.monotonic() + timeout
        coarse = timeout - self.precision
        if coarse > 0 and condition.wait(coarse):
            return  # notified
        while _time.monotonic() < deadline:
            if condition.wait(0):
                return

    def __repr__(self) -> str:
        return f"SystemClock(precision={self.precision!r})"


_PAST_9999 = "{name} would take the wall clock past the years 1 to 9999, got {value!r}"


class FakeClock:
    """A clock that moves only when told to, exactly, and wakes sleepers when it does.

    Both timebases are integers in nanoseconds. ``advance`` moves both; ``jump_wall`` moves only
    the wall clock (an NTP step or a person changing the date), which is how tests show that
    "in 30 seconds" does not move when the date does.

    Args:
        start: Initial wall-clock time, as epoch seconds or an aware datetime. Defaults to 0.0
            (1970-01-01 UTC). The monotonic clock starts at 0.

    Example:
        >>> clock = FakeClock(start=datetime(2026, 1, 5, 8, 0, tzinfo=timezone.utc))
        >>> clock.advance(90)
        >>> clock.now().isoformat()
        '2026-01-05T08:01:30+00:00'
    """

    #: Real seconds at most that the first wait on a condition the clock does not know yet
    #: sleeps (see ``wait``).
    FIRST_WAIT: ClassVar[float] = 0.5

    def __init__(self, start: float | int | datetime = 0.0) -> None:
        if isinstance(start, datetime):
            wall = datetime_to_ns(aware_datetime("start", start))
        elif isinstance(start, bool) or not isinstance(start, (int, float)):
            raise TypeError(f"start must be epoch seconds or an aware datetime, got {start!r}")
        else:
            # Epoch seconds may be negative (before 1970).
            wall = epoch_ns("start", start)
        self._wall = wall
        self._mono = 0
        self._lock = threading.Lock()
        # Conditions that a runner has slept on. They stay registered (weakly) so that a move
        # of time can never fall between a runner reading the time and starting to wait.
        self._conditions: weakref.WeakSet[threading.Condition] = weakref.WeakSet()
        self._callbacks: list[Callable[[], None]] = []
        self._watched = False

    def __repr__(self) -> str:
        return f"FakeClock(start={self.now().isoformat()!r}, monotonic={self.monotonic()!r})"

    # -- reading ----------------------------------------------------------------------------

    def time(self) -> float:
        """Fake wall-clock seconds since the epoch."""
        return self._wall / NS_PER_SECOND

    def monotonic(self) -> float:
        """Fake monotonic seconds (starts at 0)."""
        return self._mono / NS_PER_SECOND

    def time_ns(self) -> int:
        """Fake wall-clock nanoseconds since the epoch."""
        return self._wall

    def monotonic_ns(self) -> int:
        """Fake monotonic nanoseconds."""
        return self._mono

    def now(self) -> datetime:
        """The fake wall-clock time as an aware UTC datetime (microsecond precision)."""
        return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(
            microseconds=self._wall // 1_000
        )

    # -- moving -----------------------------------------------------------------------------

    def advance(self, seconds: float | int | timedelta) -> None:
        """Move both timebases forward.

        Args:
            seconds: How far, in seconds or as a timedelta. Negative values raise
                ``InvalidArgument``: monotonic time cannot go back (use ``jump_wall``).
        """
        ns = duration_ns("seconds", seconds)
        if ns == 0:
            return
        with self._lock:
            wall = self._wall + ns
            if wall > EPOCH_MOST_NS:
                # (Accepted, it made every later reading of the time an OverflowError.)
                raise InvalidArgument(_PAST_9999.format(name="seconds", value=seconds))
            self._wall = wall
            self._mono += ns
        if self._watched:
            self._notify()

    def advance_ns(self, ns: int) -> None:
        """Move both timebases forward by ``ns`` integer nanoseconds."""
        if type(ns) is not int:
            raise TypeError(f"ns must be an int (nanoseconds), got {ns!r}")
        if ns < 0:
            raise InvalidArgument(f"ns must not be negative, got {ns!r}")
        if ns == 0:
            return
        with self._lock:
            wall = self._wall + ns
            if wall > EPOCH_MOST_NS:
                raise InvalidArgument(_PAST_9999.format(name="ns", value=ns))
            self._wall = wall
            self._mono += ns
        if self._watched:
            self._notify()

    def set(self, when: datetime) -> None:
        """Move forward to the wall-clock time ``when`` (both timebases move by the difference).

        Args:
            when: An aware datetime not earlier than the current fake time.
        """
        target = datetime_to_ns(aware_datetime("when", when))
        with self._lock:
            delta = target - self._wall
        if delta < 0:
            raise InvalidArgument(
                f"when must not be earlier than the clock's time {self.now().isoformat()}, "
                f"got {when!r}; use jump_wall() to step the wall clock back"
            )
        self.advance_ns(delta)

    def jump_wall(self, seconds: float | int | timedelta) -> None:
        """Step the wall clock only, forward or back, as an NTP correction would.

        Args:
            seconds: Signed amount in seconds, or a timedelta. Monotonic time does not move.
        """
        ns = signed_duration_ns("seconds", seconds)
        with self._lock:
            if not in_calendar(self._wall + ns):
                raise InvalidArgument(_PAST_9999.format(name="seconds", value=seconds))
            self._wall += ns
        if self._watched:
            self._notify()

    # -- sleeping ---------------------------------------------------------------------------

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Sleep on ``condition`` until fake time moves or the condition is notified.

        No real time limit applies: a runner on a FakeClock sleeps until the test moves the clock
        or the scheduler wakes it (an insert, a shutdown). ``timeout`` is only consulted to return
        at once when it is already used up.

        The clock notifies the conditions it knows (``watch``). The first wait on one it does not
        know yet registers it and sleeps at most ``FIRST_WAIT`` real seconds: a move between the
        caller's read of the time and that registration notified nobody, and this early return
        (which the protocol allows) has the caller read the time again instead of sleeping
        through it. Code that reads the time and then sleeps registers first with ``watch``
        (duetime's runner does), and every wait of it sleeps until the clock moves.
        """
        if timeout is not None and timeout <= 0:
            return
        if condition not in self._conditions:
            self.watch(condition)
            condition.wait(self.FIRST_WAIT)
            return
        condition.wait()

    def watch(self, condition: threading.Condition) -> None:
        """Notify ``condition`` (``notify_all``) whenever fake time moves, from now on (until
        the condition is garbage-collected)."""
        with self._lock:
            self._conditions.add(condition)
            self._watched = True

    def on_move(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` (from the moving thread) after every move of time.

        Returns:
            A function that unregisters the callback.
        """
        with self._lock:
            self._callbacks.append(callback)
            self._watched = True

        def remove() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return remove

    def _notify(self) -> None:
        # Callers skip this while nothing is watched: WeakSet iteration is slow, and a
        # simulation that nobody sleeps on should not pay for it.
        with self._lock:
            conditions = list(self._conditions)
            callbacks = list(self._callbacks)
        for condition in conditions:
            with condition:
                condition.notify_all()
        for callback in callbacks:
            callback()


class WallAxis(_View):
    """A view of a clock whose monotonic timebase is its wall clock (package-internal).

    A Scheduler on a durable store reads time through this view, so that every due time it
    computes (``After(30)``, a fixed-rate grid, a retry's backoff) is a UTC instant: monotonic
    nanoseconds mean nothing after a restart or in another process, and two processes that
    compute the same fixed-rate grid must compute the same instants, or their fire keys would
    differ. The price is that elapsed-time delays follow wall-clock steps, as ``At`` does.

    Moving (``advance_ns``) and sleeping are the wrapped clock's own.
    """

    __slots__ = ()

    inner: NsClock

    #: Read by recurrences that convert a wall-clock anchor: here there is nothing to convert.
    monotonic_is_wall: ClassVar[bool] = True

    def monotonic(self) -> float:
        """The wrapped clock's wall-clock seconds (this view's monotonic axis)."""
        return self.inner.time()

    def time_ns(self) -> int:
        """The wrapped clock's wall-clock nanoseconds."""
        return self.inner.time_ns()

    def monotonic_ns(self) -> int:
        """The wrapped clock's wall-clock nanoseconds (this view's monotonic axis)."""
        return self.inner.time_ns()

    def advance_ns(self, ns: int) -> None:
        """Move the wrapped clock (which must be steppable) forward by ``ns`` nanoseconds."""
        self.inner.advance_ns(ns)  # type: ignore[attr-defined]
