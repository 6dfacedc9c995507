"""Cron expressions with time zones and a written-down DST policy.

croniter does the calendar matching, on *naive local* times only, where it is plain wall-clock
arithmetic. Mapping local times to real instants is done here, because that is where schedulers go
wrong: jobs skipped on spring-forward, run twice or looping on fall-back.

The policy (docs/time.md):

* *Wildcard-timed* expressions (minute or hour field starting with ``*``) fire at every real
  instant whose local wall time matches: both passes of a repeated (fall-back) hour; a skipped
  (spring-forward) hour has no instants, so nothing fires in it.
* *Fixed-timed* expressions fire once per matching local date-time: a time in a fold fires at its
  first occurrence; a time in a gap fires at PEP 495's ``fold=0`` reading (the offset from before
  the transition), so 02:30 in a 02:00-03:00 gap fires at 03:30 new time. Two local times that
  land on the same instant fire once.

How: the timeline is cut into *segments* of constant UTC offset. Inside a segment, local time is
instant + offset, so "the first local match after L" (croniter) maps straight back to an instant.
Only the segment boundaries need care: a fold segment re-traverses local times (fixed-timed
expressions skip them), a gap segment is preceded by local times that do not exist (fixed-timed
expressions fire them, shifted, at the start of the segment). Away from transitions, which is
almost always, the cost is one croniter call plus one offset probe per fire. Transitions are found
by probing ``utcoffset`` and bisecting to the second; every search is bounded.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from functools import partial
from typing import TYPE_CHECKING, ClassVar, NoReturn

from duetime import _foreign
from duetime._validate import (
    NS_PER_SECOND,
    aware_datetime,
    datetime_to_ns,
    integer,
    zone,
    zone_key,
)
from duetime.errors import InvalidArgument
from duetime.recurrence import WALL, Env, _skip_by_walking

if TYPE_CHECKING:
    from croniter import croniter

__all__ = ["Cron", "Transition", "fire_times", "transitions"]

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# croniter's hashed ("H") and random ("R") extensions make a schedule differ between processes;
# a scheduler that must fire the same instant everywhere rejects them.
_NONDETERMINISTIC = re.compile(r"^[HhRr](?:$|[(/])")

_EPOCH_NAIVE = datetime(1970, 1, 1)
_SECOND = timedelta(seconds=1)
#: How far back a transition can still change what fires now (a fold or gap lasts at most a
#: day: Pacific/Apia skipped 2011-12-30 entirely).
_LOOKBACK = 26 * 3600
#: How far ahead one search trusts an unchanged offset before probing again.
_HORIZON = 3 * 86400
#: Grid on which the slow path probes for transitions before bisecting (no zone has had two
#: transitions within six hours).
_PROBE_STEP = 6 * 3600
#: Searches give up after this many windows; with croniter's own 50-year limit this bounds
#: every next-time computation.
_MAX_WINDOWS = 10_000


#: Epoch seconds that every zone can still show as a datetime (years 1 and 9999, a day inside).
_FIRST_S = -62_135_510_400
_LAST_S = 253_402_128_000


def _offset(tz: tzinfo, second: int) -> int:
    """UTC offset in seconds at an epoch second (clamped to years 1-9999, where datetime ends:
    the offset there is the zone's first or last anyway)."""
    off = datetime.fromtimestamp(min(max(second, _FIRST_S), _LAST_S), tz).utcoffset()
    assert off is not None
    return off.days * 86400 + off.seconds


@dataclass(frozen=True, slots=True, eq=False)
class _State:
    """Per-thread croniter instance (croniter objects keep a cursor: not shareable)."""

    local: threading.local = field(default_factory=threading.local)

    def __reduce__(self) -> tuple[type[_State], tuple[()]]:
        # A copy or an unpickled Cron starts with no croniter of its own (a thread-local
        # cannot be copied or pickled).
        return (_State, ())


@dataclass(frozen=True, slots=True)
class Cron:
    """A cron schedule in a time zone, with start and end bounds.

    Args:
        expr: 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first;
            names (``jan``, ``mon``), ranges, steps, ``L`` (last day of month), ``LW`` (last
            weekday of month), ``15W`` (weekday nearest the 15th), ``L5``/``5L`` (last Friday),
            ``mon#2`` (second Monday), ``@daily``-style aliases. Weekdays 0 and 7 are Sunday.
            As in crontab(5), a day field is restricted when it does not start with ``*``;
            the two day fields are OR-ed when both are restricted and AND-ed otherwise, and
            ``L``, ``W`` and ``#`` follow the same rule (docs/time.md).
        tz: IANA zone name or tzinfo the expression is read in. None: the scheduler's zone.
        second, minute, hour, day, month, day_of_week: Instead of ``expr``, APScheduler's
            CronTrigger fields (ints or field strings): ``Cron(hour=9)`` is ``"0 9 * * *"``.
            A field left out is ``*`` above the least significant one given and its minimum
            below it. ``day_of_week`` takes names (APScheduler numbers Monday 0, cron Sunday
            0), and ``day`` with ``day_of_week`` is refused (APScheduler ANDs them, cron ORs).
        start: Aware datetime; no fire before it.
        end: Aware datetime; no fire after it (inclusive).

    Raises:
        InvalidArgument: The expression is invalid or has no fire in 28 years (the
            calendar's whole weekday cycle), the zone is unknown, or ``end`` is before
            ``start``.
    """

    expr: str = ""
    tz: str | tzinfo | None = field(default=None, compare=False)  # (compared as _tz_key)
    start: datetime | None = None
    end: datetime | None = None
    second: int | str | None = field(default=None, kw_only=True, repr=False, compare=False)
    minute: int | str | None = field(default=None, kw_only=True, repr=False, compare=False)
    hour: int | str | None = field(default=None, kw_only=True, repr=False, compare=False)
    day: int | str | None = field(default=None, kw_only=True, repr=False, compare=False)
    month: int | str | None = field(default=None, kw_only=True, repr=False, compare=False)
    day_of_week: int | str | None = field(default=None, kw_only=True, repr=False, compare=False)
    _fields: str = field(init=False, repr=False, compare=False)
    _parts: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _zone: tzinfo | None = field(init=False, repr=False, compare=False)
    _tz_key: object = field(init=False, repr=False)
    _wildcard: bool = field(init=False, repr=False, compare=False)
    _start_s: int | None = field(init=False, repr=False, compare=False)
    _end_s: int | None = field(init=False, repr=False, compare=False)
    _state: _State = field(init=False, repr=False, compare=False)

    timebase: ClassVar[int] = WALL
    after_finish: ClassVar[bool] = False
    recurring: ClassVar[bool] = True

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        given = {name: getattr(self, name) for name, _ in _FIELD_ORDER}
        given = {name: value for name, value in given.items() if value is not None}
        if given:
            if self.expr:
                raise TypeError(
                    f"Cron takes an expression or field keywords, not both: got {self.expr!r} "
                    f"and {', '.join(given)}"
                )
            set_(self, "expr", _from_fields(given))
        expr = self.expr
        if not isinstance(expr, str):
            raise TypeError(f"expr must be a cron expression string, got {expr!r}")
        text = " ".join(expr.split())
        if text.startswith("@") and text.lower() not in _ALIASES:
            why = (
                "@reboot names no time: run the job when your program starts with schedule(func, 0)"
                if text.lower() == "@reboot"
                else "known aliases are " + ", ".join(_ALIASES)
            )
            raise InvalidArgument(f"expr is not a valid cron expression: {expr!r} ({why})")
        text = _ALIASES.get(text.lower(), text)
        fields = text.split(" ") if text else []
        if len(fields) not in (5, 6):
            raise InvalidArgument(
                f"expr must have 5 fields (or 6 with seconds first), got {len(fields)} in {expr!r}"
            )
        for f in fields:
            for part in f.split(","):
                if _NONDETERMINISTIC.match(part):
                    raise InvalidArgument(
                        f"expr uses croniter's hashed/random syntax {part!r}, which is not "
                        f"deterministic: {expr!r}"
                    )
        _check_fields(fields, expr, set(given))
        parts = _union(fields, expr)
        minute, hour = (fields[0], fields[1]) if len(fields) == 5 else (fields[1], fields[2])
        set_(self, "_parts", parts)
        set_(self, "_fields", text)
        # (`?` is `*` wherever it is written: a `? 2 * * *` fires in both passes of a repeated
        # 02:00 as `* 2 * * *` does.)
        set_(self, "_wildcard", minute.startswith(("*", "?")) or hour.startswith(("*", "?")))
        set_(self, "_zone", None if self.tz is None else zone("tz", self.tz))
        set_(self, "_tz_key", zone_key(self.tz))
        start_s = end_s = None
        if self.start is not None:
            start_s = -(-datetime_to_ns(aware_datetime("start", self.start)) // NS_PER_SECOND)
        if self.end is not None:
            end_s = datetime_to_ns(aware_datetime("end", self.end)) // NS_PER_SECOND
        if start_s is not None and end_s is not None and end_s < start_s:
            raise InvalidArgument(
                f"end must not be before start, got start={self.start!r}, end={self.end!r}"
            )
        set_(self, "_start_s", start_s)
        set_(self, "_end_s", end_s)
        set_(self, "_state", _State())

    @property
    def wildcard_timed(self) -> bool:
        """True if the minute or hour field starts with ``*`` (see the DST policy)."""
        return self._wildcard

    # -- Recurrence protocol (nanoseconds of wall-clock time) --------------------------------

    def first(self, env: Env) -> int | None:
        """The first fire strictly after now (and not before ``start``)."""
        now_s = self._not_before_start(env.clock.time_ns() // NS_PER_SECOND)
        return self._bounded(self.next_fire(now_s, self._tz(env)))

    def next(self, due: int, env: Env) -> int | None:
        """The first fire strictly after ``due``."""
        return self._bounded(self.next_fire(due // NS_PER_SECOND, self._tz(env)))

    def skip(self, due: int, until: int, env: Env) -> tuple[int | None, int]:
        """The first fire after ``until``, counting fires in ``(due, until]`` (bounded walk)."""
        return _skip_by_walking(self, due, until, env)

    def _tz(self, env: Env) -> tzinfo:
        return self._zone if self._zone is not None else env.tz

    def _not_before_start(self, t_s: int) -> int:
        """``t_s``, moved up so that the next fire after it is not before ``start``."""
        if self._start_s is not None and self._start_s - 1 > t_s:
            return self._start_s - 1
        return t_s

    def _bounded(self, fire_s: int | None) -> int | None:
        """A fire time in seconds as nanoseconds, or None past ``end``."""
        if fire_s is None or (self._end_s is not None and fire_s > self._end_s):
            return None
        return fire_s * NS_PER_SECOND

    # -- the DST-aware search (epoch seconds) --------------------------------------------------

    def _naive_next(self, local_s: int) -> int | None:
        """First naive local time (as seconds) strictly after ``local_s`` that matches."""
        local = self._state.local
        its: list[croniter] | None = getattr(local, "its", None)
        if its is None:
            its = local.its = [_iterator(part) for part in self._parts]
        # (Clamped to what a datetime can hold: there is no year 0 or 10000 to match in.)
        start = _EPOCH_NAIVE + timedelta(seconds=min(max(local_s, _FIRST_S), _LAST_S))
        if len(its) == 1:  # almost every expression: one croniter, no union to take
            try:
                nxt: datetime = its[0].get_next(datetime, start_time=start)
            except (ValueError, OverflowError):  # croniter's "no match in 50 years", year 9999
                return None
            return (nxt - _EPOCH_NAIVE) // _SECOND
        best: datetime | None = None
        for it in its:
            try:
                nxt = it.get_next(datetime, start_time=start)
            except (ValueError, OverflowError):  # croniter's "no match in 50 years", year 9999
                continue
            if best is None or nxt < best:
                best = nxt
        return None if best is None else (best - _EPOCH_NAIVE) // _SECOND

    def next_fire(self, t: int, tz: tzinfo) -> int | None:
        """The first fire instant strictly after epoch second ``t`` in zone ``tz``, or None."""
        for _ in range(_MAX_WINDOWS):
            lo, hi = t - _LOOKBACK, t + _HORIZON
            o = _offset(tz, t)
            if _offset(tz, lo) == o and _offset(tz, hi) == o:
                # Fast path: no transition near t, one offset; local time is instant + o.
                x = self._naive_next(t + o)
                if x is None:
                    return None
                c = x - o
                if c <= hi:
                    return c
            else:
                found, beyond = self._search_window(t, lo, hi, tz)
                if beyond is None:
                    return None
                if found:
                    return beyond
                c = beyond
                o = _offset(tz, hi)
            # The first local match lies beyond the window. Nothing fires before it (no local
            # time between here and there matches), so if no transition is near it, it is the
            # answer; otherwise search the window that ends at it.
            if _offset(tz, c) == o and _offset(tz, c - _LOOKBACK) == o:
                return c
            t = max(t + 1, c - _LOOKBACK - 1)
        return None

    def _search_window(self, t: int, lo: int, hi: int, tz: tzinfo) -> tuple[bool, int | None]:
        """Search segment by segment in ``(t, hi]``.

        Returns ``(True, fire)`` when a fire is found, else ``(False, c)`` where ``c`` is the
        first local match after the window mapped with the last segment's offset (None: no
        further match at all).
        """
        segments = [(lo, _offset(tz, lo))]
        segments.extend(_transitions(tz, lo, hi))
        fixed = not self._wildcard
        c_last: int | None = None
        for i, (s, o) in enumerate(segments):
            e = segments[i + 1][0] if i + 1 < len(segments) else None
            if e is not None and e <= t + 1:
                continue
            o_prev = segments[i - 1][1] if i > 0 else o
            lower = max(t + 1, s)
            candidates = []
            # Local times of this segment, from `lower` on.
            y = lower + o - 1
            if fixed and o_prev > o:
                # A fold: the local range [s+o, s+o_prev) already fired in the first pass.
                y = max(y, s + o_prev - 1)
            x = self._naive_next(y)
            if x is None:
                return False, None
            if e is None or x - o < e:
                candidates.append(x - o)
            if fixed and o_prev < o:
                # A gap: local times [s+o_prev, s+o) do not exist; fold=0 maps them to
                # x - o_prev, at the start of this segment.
                x2 = self._naive_next(max(lower + o_prev - 1, s + o_prev - 1))
                if x2 is not None and x2 < s + o and (e is None or x2 - o_prev < e):
                    candidates.append(x2 - o_prev)
            if candidates:
                best = min(candidates)
                if best <= hi:
                    return True, best
                c_last = best
            elif e is None:
                c_last = x - o
        return False, c_last


#: APScheduler's "2nd mon" day spelling.
_NTH = re.compile(r"^\s*([1-5])(?:st|nd|rd|th)\s+([a-z]{3})\s*$", re.I)


def _apscheduler_day(day: str, has_day_of_week: bool) -> dict[str, str]:
    """APScheduler's ``day="last"``, ``"last fri"`` and ``"2nd mon"`` in cron's spelling."""
    words = day.lower().split()
    if words == ["last"]:
        return {"day": "L"}
    # The rest name a weekday: they go to the day_of_week field, and day is left out.
    if has_day_of_week:
        raise InvalidArgument(
            f"day={day!r} names a weekday, and day_of_week is given too; give one of them"
        )
    if len(words) == 2 and words[0] == "last" and words[1] in _WEEKDAYS:
        return {"day_of_week": f"{words[1]}L"}
    m = _NTH.match(day)
    if m is not None and m[2].lower() in _WEEKDAYS:
        return {"day_of_week": f"{m[2].lower()}#{m[1]}"}
    raise InvalidArgument(f"day is not a day of the month cron can say, got {day!r}")


#: APScheduler's CronTrigger fields, most significant first, with their defaults.
_FIELD_ORDER = (("month", "1"), ("day", "1"), ("day_of_week", "*"), ("hour", "0"),
                ("minute", "0"), ("second", "0"))  # fmt: skip


#: Each field's name (as Cron's keyword), range and names, in a 6-field expression's order.
_FIELDS = (
    ("second", 0, 59),
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day", 1, 31),
    ("month", 1, 12),
    ("day_of_week", 0, 7),
)
_ITEM = re.compile(r"^(\*|[a-z0-9]+(?:-[a-z0-9]+)?)(?:/(.*))?$")


def _digits(text: str) -> bool:
    """Whether ``text`` is a number in ASCII digits (``"²".isdigit()`` is true, ``int("²")``
    fails)."""
    return text.isascii() and text.isdigit()


def _unnamed(names: dict[str, int], match: re.Match[str]) -> str:
    """A word of a field with ``names`` taken out (``re.sub``)."""
    return "" if match[0] in names else match[0]


def _field_name(name: str) -> str:
    """How messages name a field: ``Cron``'s keyword for it in crontab(5)'s words."""
    return "day-of-month" if name == "day" else name.replace("_", "-")


# Each field's place counted from the end of an expression (5 or 6 fields).
_FROM_END = {
    "day-of-week": -1,
    "month": -2,
    "day-of-month": -3,
    "hour": -4,
    "minute": -5,
    "second": -6,
}


def _as_written(expr: str, item: str, field: str) -> str:
    """``item`` of ``field`` (lower-cased, as the fields are read) as ``expr`` spells it."""
    written = expr.split()[_FROM_END[field]]
    at = written.lower().find(item)
    return item if at < 0 else written[at : at + len(item)]


def _check_fields(fields: list[str], expr: str, keywords: set[str]) -> None:
    """Refuse a value out of its field's range, a step below 1 or a word that is no name, naming
    the field (the keyword, for ``Cron(hour=25)``), before croniter reads the expression (its
    own messages number the fields from 0 and quote its rewritten expression). ``L`` and ``W``
    items are left to it, and ``#`` ones but for the occurrence's range."""
    spec = _FIELDS if len(fields) == 6 else _FIELDS[1:]
    for given, (name, low, high) in zip(fields, spec, strict=True):
        names = _MONTHS if name == "month" else _WEEKDAYS if name == "day_of_week" else {}

        def refuse(reason: str, name: str = name) -> NoReturn:
            if name in keywords:
                raise InvalidArgument(
                    f"{name} {reason} (Cron({name}=...) is not a valid cron expression: {expr!r})"
                )
            raise InvalidArgument(
                f"expr is not a valid cron expression: {expr!r} (the {_field_name(name)} field "
                f"{reason})"
            )

        for item in given.lower().replace("?", "*").split(","):
            if item == "last":
                refuse("takes L for the last day of the month, got 'last'")
            if "#" in item:
                nth = item.rpartition("#")[2]
                if not (_digits(nth) and 1 <= int(nth) <= 5):
                    refuse(f"must give a weekday's occurrence 1-5 after '#', got {item!r}")
                continue
            bare = _NAME.sub(partial(_unnamed, names), item)
            if ("l" in bare or "w" in bare) and _LW_ONLY.fullmatch(bare):
                continue  # (L, W: croniter reads them; _union refuses them out of days)
            match = _ITEM.match(item)
            if match is None:
                refuse(f"must be a number, a range or '*', got {item!r}")
            base, step = match.groups()
            if step is not None and not (_digits(step) and int(step) >= 1):
                refuse(f"must be stepped by a whole number of 1 or more, got {item!r}")
            if step is not None and name == "day_of_week" and _digits(base) and int(base) == 7:
                # ('n/s' runs to Saturday, so '7/1' is empty; croniter read it as '0/1', every
                # day, and cronsim as Sundays: said rather than guessed.)
                refuse(
                    f"steps from n up to Saturday (6), so nothing follows 7, got {item!r}; "
                    f"write 0/{step} to start from Sunday, or 7 for Sundays"
                )
            if base == "*":
                continue
            for value in base.split("-"):
                got = repr(value) if value == item else f"{value!r} in {item!r}"
                if _digits(value):
                    if not low <= int(value) <= high:
                        refuse(f"must be within {low}-{high}, got {got}")
                elif value not in names:
                    known = " or names such as " + ", ".join(list(names)[:3]) if names else ""
                    refuse(f"must be numbers {low}-{high}{known}, got {got}")


def _from_fields(given: dict[str, int | str]) -> str:
    """A cron expression from APScheduler-style field keywords (``Cron(hour=9)``).

    As in APScheduler's CronTrigger: a field left out is ``*`` while a less significant one is
    given, and its default (the minimum) after the last one given: ``hour=9`` is 09:00:00 daily.
    """
    for name, value in given.items():
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise TypeError(f"{name} must be an int or a cron field string, got {value!r}")
    day = given.get("day")
    if (isinstance(day, str) and day.strip().lower().startswith("last")) or _NTH.match(str(day)):
        given = {k: v for k, v in given.items() if k != "day"}
        given.update(_apscheduler_day(str(day), "day_of_week" in given))
    for name, value in given.items():
        if isinstance(value, str) and (not value or any(ch.isspace() for ch in value)):
            raise InvalidArgument(
                f"{name} must be one cron field (no spaces), got {value!r}; write the whole "
                f"expression as a string if you need more"
            )
    dow = given.get("day_of_week")
    if dow is not None and any(ch.isdigit() for ch in re.sub(r"#\d", "", str(dow))):
        raise InvalidArgument(
            f"day_of_week numbers differ between APScheduler (0 = Monday) and cron (0 = Sunday); "
            f"use names such as 'mon-fri', got {dow!r}"
        )
    if "day" in given and "day_of_week" in given:
        raise InvalidArgument(
            "Cron(day=..., day_of_week=...) is ambiguous: APScheduler runs on days matching "
            "both, cron on days matching either; write the cron expression you mean, e.g. "
            "Cron('0 9 1-7 * */7') for the first Sunday of each month (see docs/time.md)"
        )
    remaining = set(given)
    values = {}
    for name, default in _FIELD_ORDER:
        if name in given:
            values[name] = str(given[name])
            remaining.discard(name)
        else:
            values[name] = "*" if remaining else default
    parts = [values[n] for n in ("minute", "hour", "day", "month", "day_of_week")]
    if "second" in given:
        parts.insert(0, values["second"])
    return " ".join(parts)


_MONTHS = {
    m: i
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_WEEKDAYS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
#: ``5L`` / ``friL`` (Quartz's and cronsim's spelling of "the last Friday"): croniter says ``L5``.
_LAST_WEEKDAY = re.compile(r"^([0-7]|[a-z]{3})l$")
_RANGE = re.compile(r"^(\w+)-(\w+)(?:/\d+)?$")
_NAME = re.compile(r"[a-z]{3}")
#: The calendar's weekday pattern repeats every 28 years (between 1901 and 2099): a part with no
#: fire in the 28 years from here has none at all. 2001 starts a cycle clear of 2000 and 2100.
_CYCLE_START = datetime(2001, 1, 1)
_CYCLE_END = datetime(2029, 1, 1)


def _value(item: str, names: dict[str, int]) -> int | None:
    """The number an item of a field names (``"5"``, ``"may"``), or None."""
    if item.isdigit():
        return int(item)
    return names.get(item)


# What is left of an L, W or # item once the field's names are taken out ("friL" -> "l").
_LW_ONLY = re.compile(r"[\dlw#*/-]+")


def _items(field: str, names: dict[str, int]) -> tuple[list[str], list[str]]:
    """A field's list items as ``(plain, special)``: special ones (``L``, ``W``, ``#``) each
    need a croniter expression of their own, because croniter drops or refuses the other items
    of a list that holds one (``6#3,sat`` would silently be the third Saturday only)."""
    plain: list[str] = []
    special: list[str] = []
    for raw in field.split(","):
        item = raw
        m = _RANGE.match(item)
        if m is not None:
            a, b = _value(m[1], names), _value(m[2], names)
            if a is not None and a == b:
                # croniter reads an equal range ("5-5", "wed-wed") as the whole field.
                item = m[1]
        if names is _WEEKDAYS:
            m = re.fullmatch(r"(\d)-(\d)#(\d)", item)
            if m is not None and int(m[1]) <= 7 and int(m[2]) <= 7:
                # croniter takes "mon-fri#1" but refuses "1-5#1": one item per weekday (a
                # range past Saturday, "5-1#1", wraps round as "fri-mon#1" does).
                first, last = int(m[1]) % 7, int(m[2])
                days = (
                    range(first, last + 1)
                    if first <= last
                    else [*range(first, 7), *range(last + 1)]
                )
                special += [f"{day}#{m[3]}" for day in days]
                continue
            m = _LAST_WEEKDAY.match(item)
            if m is not None and _value(m[1], names) is not None:
                item = f"l{_value(m[1], names)}"
        elif item == "lw":
            # The last weekday of the month: croniter clamps 31 to the month's last day and
            # takes the nearest weekday inside the month, which is exactly that.
            item = "31w"
        # Special: an L, W or # once the field's own names ("jul", "wed") are left out.
        bare = _NAME.sub(lambda m: "" if m[0] in names else m[0], item)
        # (Only if nothing else is left: "jully" or "@daily" is a typo, which the field's own
        # message names better than "L, W and # mean days".)
        if ("l" in bare or "w" in bare or "#" in bare) and _LW_ONLY.fullmatch(bare):
            special.append(item)
        else:
            plain.append(item)
    return plain, special


def _plain_field(field: str, names: dict[str, int], expr: str, name: str) -> str:
    """A field other than the two day fields, with equal ranges made single values; ``L``,
    ``W`` and ``#`` are refused there (croniter would otherwise be left to guess)."""
    plain, special = _items(field, names)
    if special:
        written = _as_written(expr, special[0], name)
        raise InvalidArgument(
            f"expr is not a valid cron expression: {expr!r} (the {name} field has "
            f"{written!r}, which belongs in a day field: L, W and # mean days of the month or "
            f"of the week)"
        )
    return ",".join(plain)


def _day_groups(field: str, names: dict[str, int]) -> list[str]:
    """One croniter field per group of a day field's items that croniter can take together."""
    plain, special = _items(field, names)
    if "*" in plain:
        return ["*"]  # every day already
    return ([",".join(plain)] if plain else []) + special


def _union(fields: list[str], expr: str) -> tuple[str, ...]:
    """The expression as croniter expressions, each read with ``day_or=False`` (AND), whose
    union is its meaning; never-firing ones dropped.

    The day fields follow crontab(5) (Vixie cron, cronie, cronsim): they are OR-ed when both
    are restricted, a field being restricted when it does not start with ``*``
    (``1 1 1-7 * */7`` is the first Sunday of each month), and AND-ed otherwise. ``L``, ``W`` and
    ``#`` obey the same rule: ``0 0 1 * fri#2`` is the 1st and the second Friday.
    """
    fields = [f.lower().replace("?", "*") for f in fields]
    head = fields[:-3]
    dom, month, dow = fields[-3:]
    time_fields = [
        _plain_field(f, {}, expr, name)
        for f, name in zip(head, ("second", "minute", "hour")[-len(head) :], strict=True)
    ]
    month = _plain_field(month, _MONTHS, expr, "month")
    doms = _day_groups(dom, {})
    dows = _day_groups(dow, _WEEKDAYS)
    if dom.startswith("*") or dow.startswith("*"):
        days = [(d, w) for d in doms for w in dows]
    else:
        days = [(d, "*") for d in doms] + [("*", w) for w in dows]
    parts = []
    for d, w in days:
        part = " ".join([*time_fields, d, month, w])
        try:
            it = _iterator(part)
        except (ValueError, AttributeError, KeyError, TypeError, IndexError) as exc:
            # (croniter quotes the sub-expression it was given; the user wrote expr.)
            reason = str(exc).replace(f"[{part}]", "it").replace(part, "it")
            odd = [
                (i, field)
                for items, field in ((d, "day-of-month"), (w, "day-of-week"))
                for i in items.split(",")
                if re.search(r"[lw#]", i)
            ]
            if odd and ("not acceptable" in reason or "bands" in reason):
                # (croniter's own words: "it is not acceptable", "bands 'l-2' in field 2".)
                item, field = odd[0]
                written = _as_written(expr, item, field)
                reason = (
                    f"the {field} field has {written!r}, no form of L, W or # duetime reads: "
                    f"the day of the month takes L, LW and 15W, the day of the week 5L (or L5, "
                    f"friL), mon#2 and mon-fri#1"
                )
            raise InvalidArgument(
                f"expr is not a valid cron expression: {expr!r} ({reason})"
            ) from exc
        try:
            ok = it.get_next(datetime, start_time=_CYCLE_START) < _CYCLE_END
        except (ValueError, OverflowError):
            ok = False
        if ok and part not in parts:
            parts.append(part)
    if not parts:
        raise InvalidArgument(
            f"expr can never match: no date in 28 years (the calendar's whole weekday cycle) "
            f"matches {expr!r}; check the day-of-month against the month (Feb 30, Apr 31) "
            f"and the weekday against both"
        )
    return tuple(parts)


def _iterator(part: str) -> croniter:
    # (Imported at the first Cron: with dateutil, croniter is a tenth of what importing
    # duetime would otherwise cost a program that has no cron job.)
    from croniter import croniter

    return croniter(part, _EPOCH_NAIVE, second_at_beginning=True, day_or=False)


def _transitions(tz: tzinfo, lo: int, hi: int) -> list[tuple[int, int]]:
    """Offset changes in ``(lo, hi]`` as ``(first second of the new offset, new offset)``."""
    out: list[tuple[int, int]] = []
    a, oa = lo, _offset(tz, lo)
    while a < hi:
        b = min(a + _PROBE_STEP, hi)
        ob = _offset(tz, b)
        if ob != oa:
            left, right = a, b
            while right - left > 1:
                mid = (left + right) // 2
                if _offset(tz, mid) == oa:
                    left = mid
                else:
                    right = mid
            out.append((right, _offset(tz, right)))
        a, oa = b, ob
    return out


@dataclass(frozen=True, slots=True)
class Transition:
    """A change of a zone's UTC offset, and what it does to one cron expression.

    Attributes:
        at: The first instant of the new offset (aware, UTC).
        offset_before: The UTC offset before it.
        offset_after: The UTC offset from ``at`` on.
        affected: The expression's matching local times (naive) that the change skips (a gap,
            clocks forward) or repeats (a fold, clocks back), in order.
    """

    at: datetime
    offset_before: timedelta
    offset_after: timedelta
    affected: tuple[datetime, ...]

    @property
    def gap(self) -> bool:
        """True if clocks jump forward (local times are skipped), False if they go back."""
        return self.offset_after > self.offset_before

    @property
    def local_range(self) -> tuple[datetime, datetime]:
        """The skipped or repeated local times, as a half-open naive range."""
        at = self.at.replace(tzinfo=None)
        lo, hi = sorted((self.offset_before, self.offset_after))
        return at + lo, at + hi


def transitions(
    cron: Cron, after: datetime, until: datetime, tz: tzinfo | None = None
) -> list[Transition]:
    """The offset changes of the expression's zone in ``(after, until]``, each with the
    expression's local times it skips or repeats (so a preview can say what happens to them).

    Args:
        cron: The expression.
        after: An aware datetime.
        until: An aware datetime.
        tz: Zone for an expression built without one. Default: UTC.
    """
    zone_ = cron._zone or tz or timezone.utc
    lo = datetime_to_ns(aware_datetime("after", after)) // NS_PER_SECOND
    hi = datetime_to_ns(aware_datetime("until", until)) // NS_PER_SECOND
    out = []
    previous = _offset(zone_, lo)
    for start, offset in _transitions(zone_, lo, hi):
        a, b = sorted((start + previous, start + offset))  # the local seconds affected
        affected: list[datetime] = []
        x = cron._naive_next(a - 1)
        while x is not None and x < b and len(affected) < 100:
            affected.append(_EPOCH_NAIVE + timedelta(seconds=x))
            x = cron._naive_next(x)
        out.append(
            Transition(
                datetime.fromtimestamp(start, timezone.utc),
                timedelta(seconds=previous),
                timedelta(seconds=offset),
                tuple(affected),
            )
        )
        previous = offset
    return out


def fire_times(cron: Cron, after: datetime, count: int, tz: tzinfo | None = None) -> list[datetime]:
    """The next ``count`` fire times of ``cron`` strictly after ``after``, as aware datetimes.

    Args:
        cron: The expression.
        after: An aware datetime.
        count: How many (>= 0).
        tz: Zone for an expression built without one. Default: UTC.
    """
    aware_datetime("after", after)
    if integer("count", count) < 0:
        raise InvalidArgument(f"count must not be negative, got {count!r}")
    zone_ = cron._zone or tz or timezone.utc
    out: list[datetime] = []
    t = cron._not_before_start(datetime_to_ns(after) // NS_PER_SECOND)
    while len(out) < count:
        nxt = cron._bounded(cron.next_fire(t, zone_))
        if nxt is None or nxt // NS_PER_SECOND > _LAST_S:
            break  # (no fire, or none a datetime can show: past the year 9999)
        t = nxt // NS_PER_SECOND
        out.append(datetime.fromtimestamp(t, zone_))
    return out


_foreign.hint_keywords(Cron, _foreign.CRON_KEYWORDS)
