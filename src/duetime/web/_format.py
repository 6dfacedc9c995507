"""How the dashboard writes what a store holds: triggers as people write them, times in a job's
own zone, with a mark where a daylight-saving change lies on the way."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from duetime._describe import describe_trigger
from duetime._validate import NS_PER_SECOND, zone
from duetime.cron import Cron, Transition, fire_times, transitions
from duetime.stores.codec import load_json, load_trigger

__all__ = [
    "Fire",
    "NextRun",
    "ago",
    "at_ns",
    "cron_preview",
    "duration",
    "next_run",
    "time_text",
    "trigger_text",
    "trigger_zone",
    "utc",
]


def _offset(delta: timedelta | None) -> str:
    if not delta:
        return "UTC"
    seconds = int(delta.total_seconds())
    sign = "-" if seconds < 0 else "+"
    seconds = abs(seconds)
    return f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"


def _record(text: str) -> dict[str, Any] | None:
    try:
        record = load_json(text, "trigger")
    except ValueError:  # (bounded: a row nested too deeply is no record either)
        return None
    return record if isinstance(record, dict) else None


def trigger_text(text: str) -> str:
    """A stored trigger (JSON) as people write it (``duetime._describe``): ``cron '0 9 * * *'
    Europe/Berlin``, ``every 5 min``, ``at 2027-03-29 09:00 +02:00``; the stored text itself if
    it is not a trigger this process can read (a row is data: never an error page)."""
    try:
        trigger = load_trigger(text)
    except Exception:
        return text
    return describe_trigger(trigger)


def _tz(value: Any) -> tzinfo | None:
    if isinstance(value, dict):
        return timezone(timedelta(seconds=int(value.get("offset_seconds", 0))))
    if isinstance(value, str):
        try:
            return ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            return None
    return None


def trigger_zone(text: str) -> tzinfo:
    """The zone a job's times are shown in: its trigger's (a cron's or window's zone, an
    ``at``'s offset), else UTC."""
    record = _record(text) or {}
    kind = record.get("type")
    found: tzinfo | None = None
    if kind == "cron":
        found = _tz(record.get("tz"))
    elif kind == "at":
        try:
            found = datetime.fromisoformat(str(record.get("when"))).tzinfo
        except ValueError:
            found = None
    elif kind == "poisson":
        for w in record.get("windows") or ():
            if isinstance(w, dict) and (found := _tz(w.get("tz"))) is not None:
                break
    return found or timezone.utc


def at_ns(ns: int) -> datetime:
    """Epoch nanoseconds as an aware UTC datetime."""
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=ns // 1000)


def utc(ns: int | None) -> datetime | None:
    """Epoch nanoseconds as an aware UTC datetime (None stays None)."""
    return None if ns is None else at_ns(ns)


def _zone_name(tz: tzinfo, when: datetime) -> str:
    if isinstance(tz, ZoneInfo):
        return f"{when:%Z} ({tz.key})"
    return _offset(when.utcoffset())


@dataclass(frozen=True, slots=True)
class NextRun:
    """A job's next run as shown.

    Attributes:
        text: The time in the job's zone, ``2027-03-28 09:00 CEST (Europe/Berlin)``.
        iso: The instant in ISO 8601 with its offset (for machines).
        dst: What daylight-saving change lies between now and then, or at that instant ("" if
            none).
    """

    text: str
    iso: str
    dst: str


def next_run(ns: int | None, trigger: str, now: int) -> NextRun | None:
    """The next run ``ns`` (UTC epoch ns) in the zone of the job's ``trigger`` (stored JSON),
    marked if the zone's offset changes between ``now`` and then, or at that instant (a time
    the clocks skip over or pass twice)."""
    when = utc(ns)
    start = utc(now)
    if when is None or start is None:
        return None
    tz = trigger_zone(trigger)
    try:
        local = when.astimezone(tz)
        before = min(start, when).astimezone(tz).utcoffset()
    except (OverflowError, ValueError):
        return NextRun(f"{when:%Y-%m-%d %H:%M:%S} UTC", when.isoformat(), "")
    here = local.utcoffset()
    marks = []
    if before is not None and here is not None and before != here:
        marks.append(f"DST change {_offset(before)} -> {_offset(here)} before this run")
    naive = local.replace(tzinfo=None)
    other = naive.replace(tzinfo=tz, fold=1 - local.fold)
    just_before = (when - timedelta(microseconds=1)).astimezone(tz).utcoffset()
    if other.utcoffset() != here:
        # (The local time reads two ways: the clocks pass it twice.)
        which = "first" if local.fold == 0 else "second"
        marks.append(f"at a DST change (local time repeated, {which} pass)")
    elif just_before != here:
        marks.append(f"at a DST change ({_offset(just_before)} -> {_offset(here)})")
    seconds = f":{local:%S}" if local.second else ""
    text = f"{local:%Y-%m-%d %H:%M}{seconds} {_zone_name(tz, local)}"
    return NextRun(text, local.isoformat(), "; ".join(marks))


def time_text(ns: int | None) -> str:
    """A UTC epoch-ns time as ``2026-12-08 01:20:05 UTC``, "" for None."""
    when = utc(ns)
    return "" if when is None else f"{when:%Y-%m-%d %H:%M:%S} UTC"


def duration(ns: int | None) -> str:
    """A span of nanoseconds as ``1.25 s`` / ``3 min 20 s`` ("" for None)."""
    if ns is None:
        return ""
    sign = "-" if ns < 0 else ""
    seconds = abs(ns) / NS_PER_SECOND
    if seconds < 60:
        return f"{sign}{seconds:.3g} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{sign}{minutes} min {rest} s"
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours} h {minutes} min"


def ago(ns: int, now: int) -> str:
    """How long before ``now`` ``ns`` was ("in ..." if after)."""
    if ns > now:
        return f"in {duration(ns - now)}"
    return f"{duration(now - ns)} ago"


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire of a cron preview.

    Attributes:
        local: Its local time, ``2027-03-28 03:30:00 CEST (+02:00)``.
        utc: The same instant in UTC.
        mark: What a DST change did on the way to it or does at it ("" if nothing).
        changes: The DST changes between the fire before and this one, as sentences.
    """

    local: str
    utc: str
    mark: str
    changes: tuple[str, ...]


def _change_text(t: Transition, wildcard: bool) -> str:
    lo, hi = t.local_range
    shift = f"{_offset(t.offset_before)} -> {_offset(t.offset_after)}"
    if t.gap:
        head = f"{lo:%Y-%m-%d}: clocks jump from {lo:%H:%M} to {hi:%H:%M} ({shift})"
    else:
        head = f"{lo:%Y-%m-%d}: clocks go back from {hi:%H:%M} to {lo:%H:%M} ({shift})"
    if not t.affected:
        return head
    what = ", ".join(f"{a:%H:%M}" for a in t.affected)
    if t.gap:
        fate = "skipped (wildcard-timed)" if wildcard else "fire after the jump (fixed-timed)"
        return f"{head}; {what} do not exist that day: {fate}"
    fate = "fire in both passes (wildcard-timed)" if wildcard else "fire once (fixed-timed)"
    return f"{head}; {what} happen twice: {fate}"


def cron_preview(expr: str, tz_name: str, count: int, after: datetime) -> tuple[str, list[Fire]]:
    """The next ``count`` fires of ``expr`` in zone ``tz_name`` after ``after``: the kind of
    expression (fixed- or wildcard-timed) and each fire, DST changes marked (``duetime.cron``,
    as ``python -m duetime cron`` shows them).

    Raises:
        InvalidArgument: A bad expression or zone.
    """
    tz = zone("tz", tz_name)
    cron = Cron(expr, tz=tz)
    kind = "wildcard-timed" if cron.wildcard_timed else "fixed-timed"
    fires = []
    previous = after
    for fire in fire_times(cron, after, count):
        changes = tuple(
            _change_text(t, cron.wildcard_timed) for t in transitions(cron, previous, fire)
        )
        local = fire.astimezone(tz)
        marks = []
        before, here = previous.astimezone(tz).utcoffset(), local.utcoffset()
        if before is not None and here is not None and before != here:
            marks.append(f"DST change {_offset(before)} -> {_offset(here)} before this fire")
        other = local.replace(fold=1 - local.fold).astimezone(timezone.utc)
        if other != fire.astimezone(timezone.utc):
            marks.append(f"repeated time, {'first' if local.fold == 0 else 'second'} pass")
        previous = fire
        fires.append(
            Fire(
                f"{local:%Y-%m-%d %H:%M:%S %Z} ({_offset(here)})",
                f"{fire.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC",
                "; ".join(marks),
                changes,
            )
        )
    return kind, fires
