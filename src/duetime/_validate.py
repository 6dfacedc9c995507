"""Boundary checks shared by every public entry point.

Each helper takes the parameter's name so that the error can say which argument was wrong, and
each returns the value in duetime's internal unit (integer nanoseconds for durations) so callers
validate and convert in one step and never hold a half-checked value.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from datetime import datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from duetime.errors import InvalidArgument

NS_PER_SECOND = 1_000_000_000
#: The longest duration accepted anywhere, in seconds: a thousand years. A longer one is a
#: mistake (a timestamp passed as a delay, milliseconds as seconds), and one past the year 9999
#: would be accepted only to fail later, where a datetime is made of it.
DURATION_MOST_S = 1000 * 365 * 86_400
_DURATION_MOST_NS = DURATION_MOST_S * NS_PER_SECOND
# From here on a float cannot hold a nanosecond (its spacing is more than 1 ns): see epoch_ns.
_FLOAT_NS_EXACT = 2.0**23


def duration_ns(name: str, value: object, *, allow_zero: bool = True, bounded: bool = True) -> int:
    """Convert a duration in seconds (int, float or timedelta) to integer nanoseconds.

    ``bounded``: refuse more than a thousand years (every duration but a retention, where
    ``timedelta.max`` means "keep everything")."""
    if isinstance(value, bool) or not isinstance(value, (int, float, timedelta)):
        raise TypeError(f"{name} must be a number of seconds or a timedelta, got {value!r}")
    if isinstance(value, timedelta):
        ns = (value.days * 86_400 + value.seconds) * NS_PER_SECOND + value.microseconds * 1_000
    elif isinstance(value, int):
        ns = value * NS_PER_SECOND
    else:
        if math.isnan(value) or math.isinf(value):
            raise InvalidArgument(f"{name} must be a finite number of seconds, got {value!r}")
        # round() and not int(): 0.1 * 1e9 is 100000000.00000001 and 0.7 * 1e9 is
        # 699999999.9999999; both must land on the nanosecond a person meant.
        # (Past the bound, before it can overflow: 1e300 seconds is not a number of ns.)
        if not bounded or -DURATION_MOST_S <= value <= DURATION_MOST_S:
            ns = round(value * NS_PER_SECOND)
        else:
            ns = -1 if value < 0 else _DURATION_MOST_NS + 1
    if ns < 0:
        raise InvalidArgument(f"{name} must not be negative, got {value!r}")
    if ns == 0 and not allow_zero:
        raise InvalidArgument(f"{name} must be positive, got {value!r}")
    if ns > _DURATION_MOST_NS and bounded:
        raise InvalidArgument(
            f"{name} must be at most a thousand years ({DURATION_MOST_S} seconds), got {value!r}"
        )
    return ns


def epoch_ns(name: str, value: float | int) -> int:
    """Epoch seconds (an int, or a finite float) as epoch nanoseconds.

    A float of today's epoch seconds cannot hold nanoseconds (its spacing there is 238 ns), and
    ``datetime.timestamp()`` may land a step or two away from the microsecond it was given:
    such a float is read to the nearest microsecond, datetime's resolution, so that
    ``run_until(due.timestamp())`` reaches a job due at ``due``. Small floats (a simulation's
    clock started at 0) keep their nanoseconds.
    """
    if isinstance(value, int):
        ns = value * NS_PER_SECOND
    elif not math.isfinite(value):
        raise InvalidArgument(f"{name} must be a finite epoch time, got {value!r}")
    elif abs(value) >= _FLOAT_NS_EXACT:
        ns = round(value * 1_000_000) * 1_000
    else:
        ns = round(value * NS_PER_SECOND)
    if not _EPOCH_LEAST_NS <= ns <= EPOCH_MOST_NS:
        raise InvalidArgument(
            f"{name} must be an epoch time between the years 1 and 9999 (seconds), got {value!r}"
        )
    return ns


def in_calendar(ns: int) -> bool:
    """Whether epoch nanoseconds ``ns`` fall between the years 1 and 9999 (a datetime can be
    made of them)."""
    return _EPOCH_LEAST_NS <= ns <= EPOCH_MOST_NS


def signed_duration_ns(name: str, value: object) -> int:
    """Like ``duration_ns`` but either sign is allowed (epoch times, wall-clock steps)."""
    if isinstance(value, timedelta):
        negative = value < timedelta(0)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        negative = value < 0
    else:
        raise TypeError(f"{name} must be a number of seconds or a timedelta, got {value!r}")
    try:
        ns = duration_ns(name, -value if negative else value)
    except InvalidArgument as exc:
        if not negative:
            raise
        # (Checked as its magnitude, reported as given: the message named the value without
        # its sign, and "at most" a thousand years.)
        text = str(exc).replace(f"got {-value!r}", f"got {value!r}")
        text = text.replace("must be at most a thousand years", "must be within a thousand years")
        raise InvalidArgument(text) from None
    return -ns if negative else ns


def aware_datetime(name: str, value: object) -> datetime:
    """Return ``value`` if it is a timezone-aware datetime, else raise naming ``name``."""
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a timezone-aware datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(
            f"{name} must be timezone-aware (a naive datetime is ambiguous), got {value!r}"
        )
    return value


_EPOCH = datetime(1970, 1, 1, tzinfo=ZoneInfo("UTC"))


def datetime_to_ns(value: datetime) -> int:
    """Epoch nanoseconds of an aware datetime, exactly (no float round trip)."""
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * NS_PER_SECOND + delta.microseconds * 1_000


_EPOCH_LEAST_NS = datetime_to_ns(datetime.min.replace(tzinfo=_EPOCH.tzinfo))
#: The last epoch nanosecond a datetime can show (the end of the year 9999).
EPOCH_MOST_NS = datetime_to_ns(datetime.max.replace(tzinfo=_EPOCH.tzinfo))


def lower_scheme(url: str) -> str:
    """``url`` with its scheme in lower case: a URL's scheme is case-insensitive (RFC 3986),
    libpq's and the stores' prefix tests are not."""
    scheme, colon, rest = url.partition(":")
    return scheme.lower() + colon + rest if colon and scheme.isalpha() else url


def ns_to_datetime(ns: int, tz: tzinfo) -> datetime:
    """The aware datetime in ``tz`` for epoch nanoseconds (truncated to microseconds)."""
    return (_EPOCH + timedelta(microseconds=ns // 1_000)).astimezone(tz)


def zone(name: str, value: object) -> tzinfo:
    """Resolve a time zone given as an IANA name or a tzinfo."""
    if isinstance(value, tzinfo):
        return value
    if not isinstance(value, str):
        raise TypeError(f"{name} must be an IANA zone name or a tzinfo, got {value!r}")
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        # (OSError: a name the file system refuses, longer than a file name may be.)
        raise InvalidArgument(
            f"{name} is not a known time zone: {value!r}{_zone_hint(value)}"
        ) from exc


def zone_key(tz: object) -> object:
    """What a zone given to a recurrence compares by: its IANA name where it has one (so that
    ``"Europe/Berlin"`` and ``ZoneInfo("Europe/Berlin")`` are one zone, and a trigger read back
    from a store, which keeps the name, equals the one scheduled), else the tzinfo itself."""
    key = getattr(tz, "key", None)
    return key if isinstance(key, str) else tz


def _zone_hint(value: str) -> str:
    """``"; did you mean ...?"`` naming the nearest real zones, or ``""``.

    Only on the error path: listing the zones reads the tz database (tens of milliseconds).
    """
    names = {n.lower(): n for n in available_timezones()}
    wanted = value.lower().replace(" ", "_")
    if wanted in names:
        close = [wanted]
    else:
        close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.75)
        # Name only the nearly-best ones: 'Europe/Berln' is Berlin, not also Dublin.
        if close:
            best = difflib.SequenceMatcher(None, wanted, close[0]).ratio()
            close = [
                c for c in close if difflib.SequenceMatcher(None, wanted, c).ratio() >= best - 0.02
            ]
    if not close:  # 'Berlin' for 'Europe/Berlin': match the city alone
        close = [n for n in names if n.rsplit("/", 1)[-1] == wanted][:3]
    if not close:
        return ""
    return "; did you mean " + " or ".join(names[c] for c in close) + "?"


def name_hint(wanted: str, names: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` naming the nearest of ``names`` (task names, say), or ``""``."""
    close = difflib.get_close_matches(wanted, list(names), n=2, cutoff=0.7)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"


def integer(name: str, value: Any) -> int:
    """Return ``value`` if it is an int (and not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    return value


def positive_number(name: str, value: Any) -> float | int:
    """Return ``value`` if it is a positive finite int or float (and not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidArgument(f"{name} must be a positive finite number, got {value!r}")
    return value
