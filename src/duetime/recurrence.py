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
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from duetime._validate import (
    NS_PER_SECOND,
    aware_datetime,
    datetime_to_ns,
    duration_ns,
)

if TYPE_CHECKING:
    from duetime.clock import Clock

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

    def __init__(self, clock: Clock, rng: random.Random, tz: tzinfo) -> None:
        self.clock = clock
        self.rng = rng
        self.tz = tz


@runtime_checkable
class Recurrence(Protocol):
    """The protocol every ``when`` object implements.

    Attributes:
        timebase: ``WALL`` or ``MONOTONIC``: which clock the returned nanoseconds are on.
        after_finish: True if the next occurrence depends on when the previous one finished
            (fixed delay). The scheduler then asks for it at finish; otherwise it asks when an
            occurrence starts, so a long run cannot push the schedule back.
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


@dataclass(frozen=True, slots=True)
class After:
    """Once, a delay after scheduling, measured in monotonic (elapsed) time.

    Args:
        delay: Seconds (int or float, >= 0) or a timedelta.
    """

    delay: float | int | timedelta
    _ns: int = field(init=False, repr=False, compare=False)

    timebase: ClassVar[int] = MONOTONIC
    after_finish: ClassVar[bool] = False
    recurring: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _setattr(self, "_ns", duration_ns("delay", self.delay))

    @classmethod
    def _checked(cls, delay: float | int | timedelta, ns: int) -> After:
        """Build from a delay the caller has already converted to ``ns`` (the Scheduler, which
        names the parameter in its own errors), skipping the second check in
        ``__post_init__``."""
        obj = object.__new__(cls)
        _setattr(obj, "delay", delay)
        _setattr(obj, "_ns", ns)
        return obj

    def first(self, env: Env) -> int | None:
        """Now (monotonic) plus the delay."""
        return env.clock.monotonic_ns() + self._ns

    def next(self, due: int, env: Env) -> int | None:
        """None: a one-shot has no next occurrence."""
        return None

    def skip(self, due: int, until: int, env: Env) -> tuple[int | None, int]:
        """Nothing to skip: a one-shot always runs, however late."""
        return None, 0


@dataclass(frozen=True, slots=True)
class FixedRate:
    """Every ``seconds`` of elapsed time, without drift.

    Occurrence k is due at ``anchor + k * interval``, computed and not accumulated, so a run that
    starts late does not push later ones back. Runs still going when the next is due are governed
    by the job's ``overlap``; occurrences missed entirely by its ``misfire`` policy.

    Args:
        seconds: The period: seconds (> 0) or a timedelta.
        start: An aware datetime for the first occurrence (the anchor). If it is in the past,
            the first occurrence is the first point of the grid ``start + k * seconds`` that is
            not. Default: one period after scheduling.
    """

    seconds: float | int | timedelta
    start: datetime | None = None
    _ns: int = field(init=False, repr=False, compare=False)
    _start_ns: int | None = field(init=False, repr=False, compare=False)

    timebase: ClassVar[int] = MONOTONIC
    after_finish: ClassVar[bool] = False
    recurring: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ns", duration_ns("seconds", self.seconds, allow_zero=False))
        start_ns = None
        if self.start is not None:
            start_ns = datetime_to_ns(aware_datetime("start", self.start))
        object.__setattr__(self, "_start_ns", start_ns)

    def first(self, env: Env) -> int | None:
        """One period from now, or the first grid point from ``start`` not in the past."""
        mono = env.clock.monotonic_ns()
        if self._start_ns is None:
            return mono + self._ns
        # Convert the wall-clock anchor to monotonic once; from here on it is elapsed time.
        anchor = self._start_ns - env.clock.time_ns() + mono
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


@dataclass(frozen=True, slots=True)
class FixedDelay:
    """Again ``seconds`` of elapsed time after each run finishes.

    Args:
        seconds: The pause between the end of one run and the start of the next: seconds (> 0)
            or a timedelta.
        initial_delay: Delay before the first run, in seconds or as a timedelta. Default: the
            same as ``seconds``.
    """

    seconds: float | int | timedelta
    initial_delay: float | int | timedelta | None = None
    _ns: int = field(init=False, repr=False, compare=False)
    _initial_ns: int = field(init=False, repr=False, compare=False)

    timebase: ClassVar[int] = MONOTONIC
    after_finish: ClassVar[bool] = True
    recurring: ClassVar[bool] = True

    def __post_init__(self) -> None:
        ns = duration_ns("seconds", self.seconds, allow_zero=False)
        object.__setattr__(self, "_ns", ns)
        initial = (
            ns if self.initial_delay is None else duration_ns("initial_delay", self.initial_delay)
        )
        object.__setattr__(self, "_initial_ns", initial)

    def first(self, env: Env) -> int | None:
        """``initial_delay`` from now."""
        return env.clock.monotonic_ns() + self._initial_ns

    def next(self, due: int, env: Env) -> int | None:
        """``seconds`` after now (called when the previous run has finished)."""
        return env.clock.monotonic_ns() + self._ns

    def skip(self, due: int, until: int, env: Env) -> tuple[int | None, int]:
        """Fixed-delay occurrences are never missed: the next is measured from a finish."""
        return max(until, env.clock.monotonic_ns()) + self._ns, 0


def seconds_of(ns: int) -> float:
    """Nanoseconds as float seconds, for messages and events."""
    return ns / NS_PER_SECOND
