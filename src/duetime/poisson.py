"""Poisson arrivals, optionally confined to opening windows ("~300 a day, office hours").

Exponential gaps make work arrive smoothly and unpredictably, with no top-of-the-minute spikes.
With windows, gaps are measured in *open time only*: the process is a time-changed Poisson
process whose clock stops while every window is closed. So

* nothing fires outside a window;
* nothing bunches at the opening (a gap that runs past closing time simply continues when the
  next window opens; an "overdue" backlog is never released at once);
* the daily target holds: the rate per open second is ``per_day`` divided by the open seconds of
  an open day.

Windows are local wall-clock times in a zone, so a window from 09:00 to 18:00 is 9 hours long
on ordinary days, 8 on the spring-forward day and 10 on the fall-back day (real elapsed seconds
are what the Poisson clock counts).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import date, datetime, time, timedelta, timezone, tzinfo

from duetime._validate import DURATION_MOST_S, NS_PER_SECOND, positive_number, zone, zone_key
from duetime.cron import _offset, _transitions
from duetime.errors import InvalidArgument
from duetime.recurrence import MONOTONIC, WALL, Env, _skip_by_walking

__all__ = ["Poisson", "Window"]

_DAY_NAMES = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
_MAX_DAYS_SCANNED = 8  # a window open on any weekday opens within a week


def _parse_clock(name: str, value: object) -> int:
    """``"HH:MM"`` (``"24:00"`` allowed) or a ``datetime.time`` -> seconds after midnight."""
    if isinstance(value, time):
        if value.tzinfo is not None or value.microsecond:
            # (Its zone was dropped without a word, and its microseconds: a window is whole
            # seconds of local time in the window's tz=.)
            raise InvalidArgument(
                f"{name} must be a time of day in whole seconds without a zone (give the zone "
                f"as Window(..., tz=...)), got {value!r}"
            )
        return value.hour * 3600 + value.minute * 60 + value.second
    if not isinstance(value, str):
        raise TypeError(f"{name} must be 'HH:MM' or a datetime.time, got {value!r}")
    parts = value.split(":")
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        nums = [int(p) for p in parts]
    except ValueError:
        raise InvalidArgument(f"{name} must be 'HH:MM', got {value!r}") from None
    hour, minute = nums[0], nums[1]
    second = nums[2] if len(nums) == 3 else 0
    if (hour, minute, second) == (24, 0, 0):
        return 86400
    if not (0 <= hour < 24 and 0 <= minute < 60 and 0 <= second < 60):
        raise InvalidArgument(f"{name} is not a time of day: {value!r}")
    return hour * 3600 + minute * 60 + second


def _parse_days(value: object) -> frozenset[int]:
    """``"mon-fri"``, ``"mon,wed,fri"``, ``"sat-sun"``, an iterable of 0-6 (Monday=0), or None
    (every day)."""
    if value is None:
        return frozenset(range(7))
    if isinstance(value, str):
        days: set[int] = set()
        for part in value.lower().replace(" ", "").split(","):
            ends = part.split("-")
            if len(ends) > 2 or any(e not in _DAY_NAMES for e in ends):
                raise InvalidArgument(
                    f"days must be like 'mon-fri' or 'mon,wed,fri', got {value!r}"
                )
            a = _DAY_NAMES.index(ends[0])
            b = _DAY_NAMES.index(ends[-1])
            i = a
            while True:  # wrap-around ranges such as 'fri-mon' are allowed
                days.add(i)
                if i == b:
                    break
                i = (i + 1) % 7
        return frozenset(days)
    if isinstance(value, Iterable):
        items = list(value)
        for d in items:
            if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= 6:
                raise InvalidArgument(f"days must hold weekday numbers 0-6, got {value!r}")
        if not items:
            raise InvalidArgument(f"days must not be empty, got {value!r}")
        return frozenset(items)
    raise TypeError(f"days must be a string like 'mon-fri' or weekday numbers, got {value!r}")


@dataclass(frozen=True, slots=True)
class Window:
    """A daily opening window in local wall-clock time.

    Args:
        start: Opening time, ``"HH:MM"`` or a ``datetime.time``.
        end: Closing time (``"24:00"`` for midnight). Earlier than ``start`` means overnight:
            ``Window("22:00", "06:00")`` opens at 22:00 and closes at 06:00 the next morning.
        days: Weekdays on which the window *opens*: ``"mon-fri"``, ``"sat,sun"``, weekday
            numbers (Monday = 0), or None for every day.
        tz: Zone of the times (IANA name or tzinfo). None: the scheduler's zone.

    Raises:
        InvalidArgument: A bad time, an empty window (start equal to end) or no days.
    """

    start: str | time
    end: str | time
    days: str | Sequence[int] | None = None
    tz: str | tzinfo | None = field(default=None, compare=False)  # (compared as _tz_key)
    _start_s: int = field(init=False, repr=False, compare=False)
    _end_s: int = field(init=False, repr=False, compare=False)
    _days: frozenset[int] = field(init=False, repr=False, compare=False)
    _zone: tzinfo | None = field(init=False, repr=False, compare=False)
    _tz_key: object = field(init=False, repr=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        start = _parse_clock("start", self.start)
        end = _parse_clock("end", self.end)
        if start == 86400:
            raise InvalidArgument(f"start must be before 24:00, got {self.start!r}")
        if start == end:
            raise InvalidArgument(
                f"window is empty: start and end are both {self.start!r}; "
                "use Window('00:00', '24:00') for a whole day"
            )
        if isinstance(self.days, Sequence) and not isinstance(self.days, str):
            set_(self, "days", tuple(self.days))
        set_(self, "_start_s", start)
        set_(self, "_end_s", end if end > start else end + 86400)
        set_(self, "_days", _parse_days(self.days))
        set_(self, "_zone", None if self.tz is None else zone("tz", self.tz))
        set_(self, "_tz_key", zone_key(self.tz))

    @property
    def nominal_seconds(self) -> int:
        """Length of one opening in seconds, ignoring DST."""
        return self._end_s - self._start_s

    def intervals(self, after: int, tz: tzinfo) -> Iterator[tuple[int, int]]:
        """Openings as ``(open, close)`` epoch seconds, in order, the first one closing after
        ``after``. Infinite; callers bound their loops."""
        z = self._zone or tz
        day = datetime.fromtimestamp(after, z).date() - timedelta(days=1)
        while True:
            if day.weekday() in self._days:
                for a, b in _opening(day, self._start_s, self._end_s, z):
                    if b > after:
                        yield a, b
            day += timedelta(days=1)


_EPOCH_DAY = date(1970, 1, 1)

# UTC offsets lie within this many seconds of zero: -12:00 to +14:00 today, and the local mean
# times of the 19th century reached past +15:13 (America/Metlakatla before 1867).
_OFFSET_MOST = 16 * 3600


def _opening(day: date, start: int, end: int, tz: tzinfo) -> list[tuple[int, int]]:
    """The instants (epoch seconds, as intervals in order) whose local time in ``tz`` is from
    ``day`` + ``start`` seconds up to ``day`` + ``end`` (which may pass midnight).

    Exactly those: a window's end or start in a spring-forward gap is where the clocks jump
    (the hour that does not exist is not open), and a fall-back fold opens both passes of the
    local times inside the window and neither pass of those outside it. (Reading both ends by
    PEP 495 fold=0 opened local times outside the window: 03:00-03:29 for a window to 02:30 on
    the spring day, 02:00-02:29 of the second pass for one from 02:30 on the autumn day.)"""
    midnight = (day - _EPOCH_DAY).days * 86400  # the day's local midnight, read as if UTC
    lo, hi = midnight + start, midnight + end
    out: list[tuple[int, int]] = []
    # Each stretch of one offset, over every instant that could read as such a local time.
    first, last = lo - _OFFSET_MOST, hi + _OFFSET_MOST
    offset = _offset(tz, first)
    # (Most days: one offset from end to end, two readings. This runs for every next time a
    # Poisson job draws, and probing the stretch for changes costs as much again per six hours.)
    changes = [] if _offset(tz, last) == offset else _transitions(tz, first, last)
    bounds = [first] + [at for at, _ in changes] + [last]
    offsets = [offset] + [off for _, off in changes]
    for t, stop, off in zip(bounds, bounds[1:], offsets, strict=False):
        a, b = max(t, lo - off), min(stop, hi - off)
        if a < b:
            if out and out[-1][1] == a:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
    return out


def _open_intervals(windows: Sequence[Window], after: int, tz: tzinfo) -> Iterator[tuple[int, int]]:
    """The union of the windows' openings from ``after`` on, in order, without overlaps.

    Touching or overlapping openings are joined, but a joined stretch is handed out a day at a
    time: windows that cover every hour of every day (``Window("00:00", "24:00")``, or two
    halves) would otherwise join into one stretch that never ends, and the walk that looks for
    its end would run until the calendar does."""
    merged = heapq.merge(*(w.intervals(after, tz) for w in windows))
    cur_a, cur_b = next(merged)
    for a, b in merged:
        if a <= cur_b:
            if b > cur_b and cur_b - cur_a >= 86400:
                yield max(cur_a, after), cur_b
                cur_a = cur_b
            cur_b = max(cur_b, b)
            continue
        yield max(cur_a, after), cur_b
        cur_a, cur_b = a, b
        # Yielded lazily: the caller stops as soon as its gap is used up.
    yield max(cur_a, after), cur_b  # pragma: no cover - merged streams are infinite


_WEEK = 7 * 86400


def _weekly_open_seconds(windows: Sequence[Window], tz: tzinfo | None = None) -> int:
    """The seconds of a week (nominal: no DST) that the union of ``windows`` is open.

    Overlapping windows count their common time once. Windows in different zones are placed by
    each zone's offset at a fixed winter instant; one without a zone is placed in ``tz`` (the
    scheduler's), or, where that is not known yet, as if in the zone of the first that has
    one."""
    reference = datetime(2026, 1, 5, 12, tzinfo=timezone.utc)
    others = tz or next((w._zone for w in windows if w._zone is not None), None)
    pieces: list[tuple[int, int]] = []
    for w in windows:
        zone = w._zone or others
        offset = zone.utcoffset(reference) if zone is not None else None
        shift = -int(offset.total_seconds()) if offset is not None else 0
        for day in w._days:
            a = (day * 86400 + w._start_s + shift) % _WEEK
            b = a + w.nominal_seconds
            if b > _WEEK:
                pieces += [(a, _WEEK), (0, b - _WEEK)]
            else:
                pieces.append((a, b))
    pieces.sort()
    total = 0
    cur_a, cur_b = pieces[0]
    for a, b in pieces[1:]:
        if a <= cur_b:
            cur_b = max(cur_b, b)
        else:
            total += cur_b - cur_a
            cur_a, cur_b = a, b
    return total + cur_b - cur_a


def _per_open_second(per_day: float, windows: Sequence[Window], weekly: int) -> float:
    """``per_day`` arrivals per open day as a rate per open second: a week's ``weekly`` open
    seconds fall on the weekdays the windows open on."""
    open_days = set().union(*(w._days for w in windows))
    return per_day / (weekly / len(open_days))


@dataclass(frozen=True, slots=True)
class Poisson:
    """Random arrivals at a steady average rate, optionally only inside windows.

    Give exactly one of ``per_day``, ``rate`` or ``mean_interval``. Random draws come from the
    scheduler's ``rng``: ``Scheduler(rng=random.Random(seed))`` makes them reproducible.

    Args:
        per_day: Average arrivals per day. With windows: per *open day* (open seconds of a
            typical week divided by the number of weekdays the windows open on).
        rate: Average arrivals per second (per open second with windows).
        mean_interval: Average gap in seconds, or a timedelta (in open seconds with windows).
        window: A ``Window``, or several (their union is open time).

    Raises:
        InvalidArgument: No or several rate parameters, a non-positive or non-finite rate.
    """

    per_day: float | None = None
    _: KW_ONLY
    rate: float | None = None
    mean_interval: float | timedelta | None = None
    window: Window | Sequence[Window] | None = None
    _rate: float = field(init=False, repr=False, compare=False)
    _windows: tuple[Window, ...] = field(init=False, repr=False, compare=False)
    _share: float = field(init=False, repr=False, compare=False)  # open share of the week
    # Windows with a zone and windows without one: the open time of their union, and so the
    # rate and the share, depend on the scheduler's zone, known only when the job is placed.
    _mixed: bool = field(init=False, repr=False, compare=False)
    _in_zone: dict[object, tuple[float, float]] = field(init=False, repr=False, compare=False)

    after_finish = False
    recurring = True

    def __post_init__(self) -> None:
        mean_interval = self.mean_interval
        if isinstance(mean_interval, timedelta):
            # (Stored as seconds, like the other durations a recurrence keeps.)
            mean_interval = mean_interval.total_seconds()
            object.__setattr__(self, "mean_interval", mean_interval)
        given = {
            k: v
            for k, v in (
                ("per_day", self.per_day),
                ("rate", self.rate),
                ("mean_interval", mean_interval),
            )
            if v is not None
        }
        if len(given) != 1:
            raise InvalidArgument(
                f"give exactly one of per_day, rate or mean_interval, got {given or 'none'!r}"
            )
        ((name, value),) = given.items()
        positive_number(name, value)
        windows: tuple[Window, ...]
        if self.window is None:
            windows = ()
        elif isinstance(self.window, Window):
            windows = (self.window,)
        elif isinstance(self.window, Sequence) and all(isinstance(w, Window) for w in self.window):
            windows = tuple(self.window)
            if not windows:
                raise InvalidArgument("window must not be an empty list")
            object.__setattr__(self, "window", windows)
        else:
            raise TypeError(f"window must be a Window or a list of Windows, got {self.window!r}")
        weekly = _weekly_open_seconds(windows) if windows else _WEEK
        if name == "rate":
            rate = float(value)
        elif name == "mean_interval":
            rate = 1.0 / value
        elif windows:
            rate = _per_open_second(value, windows, weekly)
        else:
            rate = value / 86400
        # The mean gap in calendar time: open time goes by at the windows' share of the week.
        share = weekly / _WEEK
        if rate * share * DURATION_MOST_S < 1:
            raise InvalidArgument(
                f"{name} gives a mean gap of more than a thousand years "
                f"({DURATION_MOST_S} seconds)"
                + ("" if share == 1 else f" of calendar time (open {share:.2%} of it)")
                + f", got {value!r}"
            )
        object.__setattr__(self, "_rate", rate)
        object.__setattr__(self, "_windows", windows)
        object.__setattr__(self, "_share", share)
        zoned = {w._zone is not None for w in windows}
        object.__setattr__(self, "_mixed", len(zoned) == 2)
        object.__setattr__(self, "_in_zone", {})

    def _rate_in(self, tz: tzinfo) -> tuple[float, float]:
        """The rate (per open second) and the open share of the week with the scheduler's zone
        ``tz`` (only windows of mixed zones depend on it)."""
        if not self._mixed:
            return self._rate, self._share
        key = zone_key(tz)
        found = self._in_zone.get(key)
        if found is None:
            weekly = _weekly_open_seconds(self._windows, tz)
            rate = self._rate
            if self.per_day is not None:
                rate = _per_open_second(self.per_day, self._windows, weekly)
            found = self._in_zone[key] = (rate, weekly / _WEEK)
        return found

    @property
    def timebase(self) -> int:
        """``WALL`` with windows (they are wall-clock times), else ``MONOTONIC``."""
        return WALL if self._windows else MONOTONIC

    @property
    def rate_per_second(self) -> float:
        """Arrivals per (open) second."""
        return self._rate

    def first(self, env: Env) -> int | None:
        """The first arrival after now."""
        now = env.clock.time_ns() if self._windows else env.clock.monotonic_ns()
        return self.next(now, env)

    def next(self, due: int, env: Env) -> int | None:
        """One exponential gap (of open time) after ``due``."""
        # (At most a thousand years of calendar time: a mean near that bound draws, rarely, a
        # gap past any date.)
        rate, share = self._rate_in(env.tz)
        gap = min(env.rng.expovariate(rate), DURATION_MOST_S * share)
        if not self._windows:
            return due + max(1, round(gap * NS_PER_SECOND))
        return self._advance_open(due, gap, env.tz)

    def skip(self, due: int, until: int, env: Env) -> tuple[int | None, int]:
        """The first arrival after ``until``, counting arrivals in ``(due, until]`` (bounded)."""
        return _skip_by_walking(self, due, until, env)

    def _advance_open(self, t_ns: int, gap: float, tz: tzinfo) -> int:
        """The instant ``gap`` open seconds after ``t_ns``."""
        t = t_ns / NS_PER_SECOND
        after = math.floor(t)
        remaining = gap
        for a, b in _open_intervals(self._windows, after, tz):
            start = max(float(a), t)
            span = b - start
            if remaining < span:
                return max(t_ns + 1, round((start + remaining) * NS_PER_SECOND))
            remaining -= max(0.0, span)
        raise AssertionError("unreachable: open intervals are infinite")  # pragma: no cover
