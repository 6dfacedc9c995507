"""Triggers as people write them, for listings: the command line's ``jobs`` and the dashboard.

``describe_trigger(Cron("0 9 * * *", tz="Europe/Berlin"))`` is ``cron '0 9 * * *'
Europe/Berlin``; ``describe_trigger(FixedRate(minutes=5))`` is ``every 5 min``. The text is for
reading, not parsing back: ``repr`` is the exact form.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from duetime.cron import Cron
from duetime.poisson import Poisson, Window
from duetime.recurrence import After, At, FixedDelay, FixedRate

__all__ = ["describe_duration", "describe_trigger"]

_UNITS = (("d", 86_400), ("h", 3_600), ("min", 60))


def describe_duration(seconds: float | timedelta) -> str:
    """A duration as people say it: ``5 min``, ``1 h 30 min``, ``90 ms``, ``2 d``.

    Args:
        seconds: The duration, in seconds (or a timedelta).
    """
    total = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
    if total < 1:
        return f"{total * 1000:g} ms"
    parts = []
    rest = total
    for name, size in _UNITS:
        if rest >= size:
            count = int(rest // size)
            parts.append(f"{count} {name}")
            rest -= count * size
    if rest:
        parts.append(f"{rest:g} s")
    return " ".join(parts)


def _zone_name(tz: Any) -> str:
    """A zone by its IANA name where it has one (``Europe/Berlin``), else ``UTC`` or ``""``
    (a fixed offset: ``_instant`` writes it after the time)."""
    key = getattr(tz, "key", None)
    if isinstance(key, str):
        return key
    if isinstance(tz, str):
        return tz
    if tz is timezone.utc:
        return "UTC"
    return ""


def _instant(when: datetime, tz: tzinfo | str | None = None) -> str:
    """``when`` as ``2027-03-29 09:00 Europe/Berlin``, in ``tz`` or its own zone; with a fixed
    offset as ``2027-03-29 09:00 +01:00``; seconds only where there are any."""
    zone = when.tzinfo if tz is None else _as_zone(tz)
    local = when.astimezone(zone) if zone is not None else when
    precise = local.second or local.microsecond
    text = local.strftime("%Y-%m-%d %H:%M:%S" if precise else "%Y-%m-%d %H:%M")
    name = _zone_name(tz if tz is not None else zone)
    if name:
        return f"{text} {name}"
    return f"{text} {local.isoformat()[-6:]}" if local.utcoffset() is not None else text


def _as_zone(tz: tzinfo | str) -> tzinfo | None:
    if not isinstance(tz, str):
        return tz
    try:
        return ZoneInfo(tz)
    except (ValueError, ZoneInfoNotFoundError):
        return None


def _window(w: Window) -> str:
    days = "" if w.days is None else f"{w.days if isinstance(w.days, str) else list(w.days)} "
    tz = "" if w.tz is None else f" {_zone_name(w.tz)}"
    return f"{days}{w.start}-{w.end}{tz}"


def describe_trigger(trigger: object) -> str:
    """A trigger as people write it.

    ``at 2027-03-29 09:00 Europe/Berlin``, ``after 30 s``, ``every 5 min``, ``every 1 min
    after each run ends``, ``cron '0 9 * * mon-fri' Europe/Berlin``, ``~300/day in mon-fri
    09:00-17:00 Europe/Berlin``; a trigger of another kind by its ``repr``.

    Args:
        trigger: A recurrence (``At``, ``After``, ``FixedRate``, ``FixedDelay``, ``Cron``,
            ``Poisson``) or anything else.
    """
    if isinstance(trigger, At):
        return f"at {_instant(trigger.when)}"
    if isinstance(trigger, After):
        return f"after {describe_duration(trigger.seconds)}"
    if isinstance(trigger, FixedRate):
        start = "" if trigger.start is None else f" from {_instant(trigger.start)}"
        return f"every {describe_duration(trigger.seconds)}{start}"
    if isinstance(trigger, FixedDelay):
        first = trigger.initial_delay
        then = "" if first is None else f", first after {describe_duration(_seconds(first))}"
        return f"every {describe_duration(trigger.seconds)} after each run ends{then}"
    if isinstance(trigger, Cron):
        text = f"cron {trigger.expr!r}"
        if trigger.tz is not None:
            text += f" {_zone_name(trigger.tz)}"
        if trigger.start is not None:
            text += f" from {_instant(trigger.start, trigger.tz)}"
        if trigger.end is not None:
            text += f" until {_instant(trigger.end, trigger.tz)}"
        return text
    if isinstance(trigger, Poisson):
        if trigger.per_day is not None:
            rate = f"~{trigger.per_day:g}/day"
        elif trigger.rate is not None:
            rate = f"~{trigger.rate:g}/s"
        else:
            rate = f"every ~{describe_duration(_seconds(trigger.mean_interval))}"
        window = trigger.window
        if window is None:
            return rate
        windows = [window] if isinstance(window, Window) else list(window)
        return f"{rate} in {', '.join(_window(w) for w in windows)}"
    return repr(trigger)


def _seconds(value: Any) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)
