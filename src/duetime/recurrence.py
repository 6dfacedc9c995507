"""Recurrences: when is a job due, and when is it due next?

A recurrence answers one question and touches nothing else: given when an occurrence was due (and,
for fixed-delay work, when it finished), when is the next one, or None? It never sees the queue, the
job or the lock; jitter, misfire handling and overlap are applied by the scheduler around it, so
each rule is written once and not once per recurrence.

Every recurrence lives in one *timebase*: ``WALL`` (epoch nanoseconds; follows wall-clock jumps;
"at 09:00 Berlin time") or ``MONOTONIC`` (elapsed nanoseconds; "30 seconds from now"). The scheduler
keeps one queue per timebase. All times here are integers in nanoseconds, so sums like
``anchor + k * interval`` are exact.

Recurrences are immutable values: one instance may be shared by many jobs and schedulers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from duetime import _foreign
from duetime._validate import (
    DURATION_MOST_S,
    NS_PER_SECOND,
    aware_datetime,
    datetime_to_ns,
    duration_ns,
)
from duetime.errors import InvalidArgument

if TYPE_CHECKING:
    from duetime.clock import NsClock

__all__ = [
    "MONOTONIC",
    "WALL",
    "After",
    "At",
    "Env",
    "FixedDelay",
    "FixedRate",
    "Recurrence",
]

#: Timebase of recurrences measured on the wall clock (they follow wall-clock jumps).
WALL = 0
#: Timebase of recurrences measured in elapsed time (immune to wall-clock jumps).
MONOTONIC = 1

#: How many occurrences ``Recurrence.skip`` walks one by one before it stops counting; beyond
#: this, a recurrence without a closed form reports a lower bound instead of iterating a year of
#: minutes.
SKIP_COUNT_LIMIT = 1_000

_setattr = object.__setattr__


class Env:
    """What a recurrence may consult: the clock, the random source and the default zone.

    One per scheduler; recurrences read the clock through it only when their answer depends on
    "now" (``first``, and ``next`` of a fixed-delay recurrence).
    """

    __slots__ = ("clock", "rng", "tz")

    def __init__(self, clock: NsClock, rng: random.Random, tz: tzinfo) -> None:
        self.clock = clock
        self.rng = rng
        self.tz = tz


@runtime_checkable
class Recurrence(Protocol):
    """The protocol every ``when`` object implements: a class of your own with these six
    members can be passed as ``when`` (``WALL``, ``MONOTONIC`` and ``Env`` are in this module).

    Attributes:
        timebase: ``WALL`` or ``MONOTONIC``: which clock the returned nanoseconds are on.
        after_finish: True if the next occurrence depends on when the previous one finished
            (fixed delay). The scheduler then asks for it at finish; otherwise it asks when an
            occurrence starts, so a long run cannot push the schedule back.
        recurring: True if there may be more than one occurrence (a one-shot is False: its
            missed occurrence always runs, and a failed one goes to the dead letters).
    """

    @property
    def timebase(self) -> int: ...

    @property
    def after_finish(self) -> bool: ...

    @property
    def recurring(self) -> bool: ...

    def first(self, env: Env) -> int | None:
        """The first due time, in nanoseconds of ``timebase``, or None if there is none."""
        ...

    def next(self, due: int, env: Env) -> int | None:
        """The occurrence after the one due at ``due`` (nanoseconds), or None when finished."""
        ...

    def skip(self, due: int, until: int, env: Env) -> tuple[int | None, int]:
        """The first occurrence after ``until``, starting from the one due at ``due``.

        Returns:
            ``(next_due, skipped)``: the first due time strictly after ``until`` (or None), and how
            many occurrences lay in ``(due, until]`` (a lower bound past ``SKIP_COUNT_LIMIT``).
        """
        ...


def _skip_by_walking(rec: Recurrence, due: int, until: int, env: Env) -> tuple[int | None, int]:
    """``skip`` for recurrences with no closed form: step with ``next``, counting, bounded."""
    skipped = 0
    nxt = rec.next(due, env)
    while nxt is not None and nxt <= until:
        skipped += 1
        if skipped >= SKIP_COUNT_LIMIT:
            # Enough counting: jump straight to the first occurrence after ``until``.
            return rec.next(until, env), skipped
        nxt = rec.next(nxt, env)
    return nxt, skipped


@dataclass(frozen=True, slots=True)
class At:
    """Once, at an aware wall-clock datetime.

    Args:
        when: An aware datetime. Naive datetimes raise ``InvalidArgument``: "09:00" means
            nothing until a zone says where.
    """

    when: datetime
    _ns: int = field(init=False, repr=False, compare=False)

    timebase: ClassVar[int] = WALL
    after_finish: ClassVar[bool] = False
    recurring: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ns", datetime_to_ns(aware_datetime("when", self.when)))

    def first(self, env: Env) -> int | None:
        """The datetime in epoch nanoseconds."""
        return self._ns

    def next(self, due: int, env: Env) -> int | None:
        """None: a one-shot has no next occurrence."""
        return None

    def skip(self, due: int, until: int, env: Env) -> tuple[int | None, int]:
        """Nothing to skip: a one-shot always runs, however late."""
        return None, 0


#: timedelta's keywords, largest first, in nanoseconds: the spellings of an interval.
_UNITS = (
    ("weeks", 604_800 * NS_PER_SECOND),
    ("days", 86_400 * NS_PER_SECOND),
    ("hours", 3_600 * NS_PER_SECOND),
    ("minutes", 60 * NS_PER_SECOND),
    ("seconds", NS_PER_SECOND),
    ("milliseconds", 1_000_000),
    ("microseconds", 1_000),
)


class _Interval:
    """An immutable interval given as timedelta's keywords or one positional value.

    ``FixedRate(minutes=5)``, ``FixedRate(300)`` and ``FixedRate(timedelta(minutes=5))`` are the
    same interval. The spelling is kept for ``repr``, which reads back as written.
    """

    __slots__ = ("_ns", "_spec")
    _ns: int
    _spec: tuple[tuple[str, Any], ...]

    #: The positional form's name in messages, and whether zero is an interval.
    _positional: ClassVar[str] = "interval"
    _allow_zero: ClassVar[bool] = False

    def _set_interval(self, interval: Any, *units: Any) -> None:
        """Set the interval from the positional value or from timedelta's keywords, given in
        ``_UNITS`` order."""
        given = {name: v for (name, _), v in zip(_UNITS, units, strict=True) if v is not None}
        if interval is not None:
            if given:
                raise TypeError(
                    f"{type(self).__name__}() takes an interval either positionally or as "
                    f"keywords ({', '.join(given)}), not both: got {interval!r}"
                )
            # (Messages name the positional form as the signature does: interval, or delay.)
            ns = duration_ns(self._positional, interval, allow_zero=self._allow_zero)
            spec: tuple[tuple[str, Any], ...] = (("", interval),)
        elif not given:
            raise TypeError(
                f"{type(self).__name__}() needs an interval: seconds positionally or "
                f"timedelta's keywords, e.g. {type(self).__name__}(minutes=5)"
            )
        else:
            ns = 0
            for unit, unit_ns in _UNITS:
                if unit in given:
                    value = given[unit]
                    if unit != "seconds" and (
                        isinstance(value, bool) or not isinstance(value, (int, float))
                    ):
                        raise TypeError(f"{unit} must be a number, got {value!r}")
                    ns += duration_ns(unit, value, bounded=False) * unit_ns // NS_PER_SECOND
            if (ns == 0 and not self._allow_zero) or ns > DURATION_MOST_S * NS_PER_SECOND:
                bound = "positive" if ns == 0 else "at most a thousand years"
                raise InvalidArgument(
                    f"the interval must be {bound}, got "
                    f"{', '.join(f'{k}={v!r}' for k, v in given.items())}"
                )
            spec = tuple((unit, given[unit]) for unit, _ in _UNITS if unit in given)
        _setattr(self, "_ns", ns)
        _setattr(self, "_spec", spec)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    # Immutable but picklable and copyable, as the frozen dataclasses they replaced were: the
    # default protocol restores slots through __setattr__, which refuses.
    def __getstate__(self) -> dict[str, Any]:
        return {
            name: getattr(self, name)
            for cls in type(self).__mro__
            for name in getattr(cls, "__slots__", ())
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            _setattr(self, name, value)

    @property
    def interval(self) -> timedelta:
        """The interval (to the microsecond)."""
        return timedelta(microseconds=self._ns // 1_000)

    @property
    def seconds(self) -> float:
        """The interval in seconds."""
        return self._ns / NS_PER_SECOND

    def _interval_repr(self) -> list[str]:
        return [f"{k}={v!r}" if k else repr(v) for k, v in self._spec]


class After(_Interval):
    """Once, a delay after scheduling, measured in monotonic (elapsed) time.

    Args:
        delay: Seconds (int or float, >= 0) or a timedelta; or give it with timedelta's
            keywords instead: ``After(minutes=5)``.
        weeks, days, hours, minutes, seconds, milliseconds, microseconds: The delay as
            timedelta's keywords (numbers, >= 0).
    """

    __slots__ = ("delay",)
    #: The delay as given (or, given as keywords, as a timedelta).
    delay: float | int | timedelta

    timebase: ClassVar[int] = MONOTONIC
    after_finish: ClassVar[bool] = False
    recurring: ClassVar[bool] = False
    _positional: ClassVar[str] = "delay"
    _allow_zero: ClassVar[bool] = True

    def __init__(
        self,
        delay: float | int | timedelta | None = None,
        /,
        *,
        weeks: float | None = None,
        days: float | None = None,
        hours: float | None = None,
        minutes: float | None = None,
        seconds: float | int | timedelta | None = None,
        milliseconds: float | None = None,
        microseconds: float | None = None,
    ) -> None:
        self._set_interval(delay, weeks, days, hours, minutes, seconds, milliseconds, microseconds)
        _setattr(self, "delay", self.interval if delay is None else delay)

    @classmethod
    def _checked(cls, delay: float | int | timedelta, ns: int) -> After:
        """Build from a delay the caller has already converted to ``ns`` (the Scheduler, which
        names the parameter in its own errors), skipping the second check."""
        obj = object.__new__(cls)
        _setattr(obj, "delay", delay)
        _setattr(obj, "_ns", ns)
        _setattr(obj, "_spec", (("", delay),))
        return obj

    def __repr__(self) -> str:
        return f"After({', '.join(self._interval_repr())})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not After:
            return NotImplemented
        return self._ns == other._ns

    def __hash__(self) -> int:
        return hash((After, self._ns))

    def first(self, env: Env) -> int | None:
        """Now (monotonic) plus the delay."""
        return env.clock.monotonic_ns() + self._ns

    def next(self, due: int, env: Env) -> int | None:
        """None: a one-shot has no next occurrence."""
        return None

    def skip(self, due: int, until: int, env: Env) -> tuple[int | None, int]:
        """Nothing to skip: a one-shot always runs, however late."""
        return None, 0


class FixedRate(_Interval):
    """Every interval of elapsed time, without drift.

    Occurrence k is due at ``anchor + k * interval``, computed and not accumulated, so a run that
    starts late does not push later ones back. Runs still going when the next is due are governed
    by the job's ``overlap``; occurrences missed entirely by its ``misfire`` policy.

    Args:
        interval: The period in seconds (> 0) or as a timedelta; or give it with timedelta's
            keywords instead: ``FixedRate(minutes=5)``, ``FixedRate(hours=1, minutes=30)``.
        weeks, days, hours, minutes, seconds, milliseconds, microseconds: The period as
            timedelta's keywords (numbers, >= 0, adding up to more than zero).
        start: An aware datetime for the first occurrence (the anchor). If it is in the past,
            the first occurrence is the first point of the grid ``start + k * interval`` that
            is not. Default: one period after scheduling. In memory the grid runs on elapsed
            (monotonic) time from there, like every fixed rate: a wall-clock step (NTP) moves
            it with the clock's new reading; a durable store keeps it as UTC instants.
    """

    __slots__ = ("_start_ns", "start")
    start: datetime | None
    _start_ns: int | None

    timebase: ClassVar[int] = MONOTONIC
    after_finish: ClassVar[bool] = False
    recurring: ClassVar[bool] = True

    def __init__(
        self,
        interval: float | int | timedelta | None = None,
        /,
        *,
        weeks: float | None = None,
        days: float | None = None,
        hours: float | None = None,
        minutes: float | None = None,
        seconds: float | int | timedelta | None = None,
        milliseconds: float | None = None,
        microseconds: float | None = None,
        start: datetime | None = None,
    ) -> None:
        self._set_interval(
            interval, weeks, days, hours, minutes, seconds, milliseconds, microseconds
        )
        start_ns = None
        if start is not None:
            start_ns = datetime_to_ns(aware_datetime("start", start))
        _setattr(self, "start", start)
        _setattr(self, "_start_ns", start_ns)

    def __repr__(self) -> str:
        parts = self._interval_repr()
        if self.start is not None:
            parts.append(f"start={self.start!r}")
        return f"FixedRate({', '.join(parts)})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not FixedRate:
            return NotImplemented
        return self._ns == other._ns and self._start_ns == other._start_ns

    def __hash__(self) -> int:
        return hash((FixedRate, self._ns, self._start_ns))

    def first(self, env: Env) -> int | None:
        """One period from now, or the first grid point from ``start`` not in the past."""
        clock = env.clock
        mono = clock.monotonic_ns()
        if self._start_ns is None:
            return mono + self._ns
        if getattr(clock, "monotonic_is_wall", False):
            # (A durable store's view: the grid is in UTC instants, exactly. Two readings of the
            # one clock a few hundred nanoseconds apart would put it off the grid, and two
            # processes on different fire keys.)
            anchor = self._start_ns
        else:
            # Convert the wall-clock anchor to monotonic once; from here on it is elapsed time.
            anchor = self._start_ns - clock.time_ns() + mono
        if anchor >= mono:
            return anchor
        return anchor + -(-(mono - anchor) // self._ns) * self._ns

    def next(self, due: int, env: Env) -> int | None:
        """Exactly one period after ``due`` (integers: no accumulated rounding)."""
        return due + self._ns

    def skip(self, due: int, until: int, env: Env) -> tuple[int | None, int]:
        """Closed form: the first grid point after ``until``, in O(1)."""
        if until < due + self._ns:
            return due + self._ns, 0
        k = (until - due) // self._ns  # grid points in (due, until]
        return due + (k + 1) * self._ns, k


class FixedDelay(_Interval):
    """Again an interval of elapsed time after each run finishes.

    Args:
        interval: The pause between the end of one run and the start of the next, in seconds
            (> 0) or as a timedelta; or give it with timedelta's keywords instead:
            ``FixedDelay(minutes=5)``.
        weeks, days, hours, minutes, seconds, milliseconds, microseconds: The pause as
            timedelta's keywords (numbers, >= 0, adding up to more than zero).
        initial_delay: Delay before the first run, in seconds or as a timedelta. Default: the
            same as the interval.
    """

    __slots__ = ("_initial_ns", "initial_delay")
    initial_delay: float | int | timedelta | None
    _initial_ns: int

    timebase: ClassVar[int] = MONOTONIC
    after_finish: ClassVar[bool] = True
    recurring: ClassVar[bool] = True

    def __init__(
        self,
        interval: float | int | timedelta | None = None,
        /,
        *,
        weeks: float | None = None,
        days: float | None = None,
        hours: float | None = None,
        minutes: float | None = None,
        seconds: float | int | timedelta | None = None,
        milliseconds: float | None = None,
        microseconds: float | None = None,
        initial_delay: float | int | timedelta | None = None,
    ) -> None:
        self._set_interval(
            interval, weeks, days, hours, minutes, seconds, milliseconds, microseconds
        )
        initial = self._ns if initial_delay is None else duration_ns("initial_delay", initial_delay)
        _setattr(self, "initial_delay", initial_delay)
        _setattr(self, "_initial_ns", initial)

    def __repr__(self) -> str:
        parts = self._interval_repr()
        if self.initial_delay is not None:
            parts.append(f"initial_delay={self.initial_delay!r}")
        return f"FixedDelay({', '.join(parts)})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not FixedDelay:
            return NotImplemented
        return self._ns == other._ns and self._initial_ns == other._initial_ns

    def __hash__(self) -> int:
        return hash((FixedDelay, self._ns, self._initial_ns))

    def first(self, env: Env) -> int | None:
        """``initial_delay`` from now."""
        return env.clock.monotonic_ns() + self._initial_ns

    def next(self, due: int, env: Env) -> int | None:
        """The interval after now (called when the previous run has finished)."""
        return env.clock.monotonic_ns() + self._ns

    def skip(self, due: int, until: int, env: Env) -> tuple[int | None, int]:
        """Fixed-delay occurrences are never missed: the next is measured from a finish."""
        return max(until, env.clock.monotonic_ns()) + self._ns, 0


def seconds_of(ns: int) -> float:
    """Nanoseconds as float seconds, for messages and events."""
    return ns / NS_PER_SECOND


_foreign.hint_keywords(FixedRate, _foreign.INTERVAL_KEYWORDS)
_foreign.hint_keywords(FixedDelay, _foreign.INTERVAL_KEYWORDS)
