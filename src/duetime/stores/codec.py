"""What a durable store writes for a job: its arguments as JSON, its function as a name, and its
trigger and retry policy as plain records; and the way back.

A store holds data, never code. Arguments are JSON (never pickle), with aware and naive
datetimes, dates, ``Decimal`` and ``UUID`` carried as tagged strings so they come back as they
went in. A function is stored as its registered task name or, unregistered, as
``"module:qualname"`` if it can be imported back; lambdas, closures, methods and other callables
that cannot be named are refused, as is anything JSON cannot carry, before anything is stored.
Every refusal is an ``InvalidArgument`` naming the parameter and the value.

Triggers and retry policies become dicts of JSON values (``encode_trigger``/``decode_trigger``,
``encode_retry``/``decode_retry``); times inside them are ISO strings with their offset, and
zones are IANA names (or fixed offsets). Due times themselves are stored as UTC instants by the
store (``duetime.stores.timebase``).
"""

from __future__ import annotations

import importlib
import json
import math
import reprlib
import sys
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any, cast
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from duetime._validate import NS_PER_SECOND
from duetime.cron import Cron
from duetime.errors import InvalidArgument
from duetime.poisson import Poisson, Window
from duetime.recurrence import After, At, FixedDelay, FixedRate, Recurrence
from duetime.retry import ExponentialBackoff, FixedBackoff, NoRetry, RetryPolicy

__all__ = [
    "decode_retry",
    "decode_trigger",
    "dumps_args",
    "encode_retry",
    "encode_trigger",
    "load_json",
    "load_trigger",
    "loads_args",
    "resolve_task",
    "task_reference",
    "under_prefixes",
]

_TAGS = ("$datetime", "$zoned", "$date", "$decimal", "$uuid", "$dict")

# -- arguments -----------------------------------------------------------------------------------


#: How deeply a job's arguments may nest (lists and dicts in one another), and how long their
#: JSON may be (characters). Bounded both ways: ``schedule()`` refuses more, and a stored row
#: holding more is unreadable (quarantined), so no row can exhaust a reader's stack or memory.
ARGS_DEPTH_MOST = 100
ARGS_CHARS_MOST = 16 * 1024 * 1024
#: The longest stored trigger, retry policy, options or side record (characters).
RECORD_CHARS_MOST = 1024 * 1024


def _encode(value: Any, where: str, depth: int = 0) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if value.bit_length() > 10_000:
            # (Python refuses to write or read integers of more than 4 300 digits as text.)
            try:
                str(value)
            except ValueError as exc:
                raise InvalidArgument(f"{where} cannot be stored: {exc}") from None
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f"{where} cannot be stored: {value!r} is not finite in JSON")
        return value
    if isinstance(value, datetime):
        zone = value.tzinfo
        if isinstance(zone, ZoneInfo) and zone.key is not None:
            # (Its zone, not only its offset: an hour added to it after a restart must cross
            # a DST change as it would have before.)
            return {"$zoned": [value.isoformat(), zone.key]}
        return {"$datetime": value.isoformat()}
    if isinstance(value, date):
        return {"$date": value.isoformat()}
    if isinstance(value, Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, UUID):
        return {"$uuid": str(value)}
    if isinstance(value, (list, tuple, dict)) and depth >= ARGS_DEPTH_MOST:
        raise RecursionError  # (dumps_args says so, with the arguments)
    if isinstance(value, (list, tuple)):
        return [_encode(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidArgument(
                    f"{where} cannot be stored: dict key {k!r} is not a str (JSON object keys are)"
                )
            out[k] = _encode(v, f"{where}[{k!r}]", depth + 1)
        # A user's dict that looks like a tag is wrapped, so it comes back as a dict.
        if len(out) == 1 and next(iter(out)) in _TAGS:
            return {"$dict": out}
        return out
    raise InvalidArgument(
        f"{where} cannot be stored: {value!r} ({type(value).__name__}) is not JSON; a durable "
        f"job's arguments are JSON values, datetimes, dates, Decimals and UUIDs (pass an id "
        f"and load the object in the job)"
    )


def _decode(value: Any, depth: int = 0) -> Any:
    """A stored argument back as it went in. Every shape is checked: a row is data someone
    may have written by hand, and a wrong one raises ValueError (the row is unreadable)."""
    if isinstance(value, list):
        if depth >= ARGS_DEPTH_MOST:
            raise ValueError(f"arguments nested more than {ARGS_DEPTH_MOST} deep")
        return [_decode(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if depth >= ARGS_DEPTH_MOST:
            raise ValueError(f"arguments nested more than {ARGS_DEPTH_MOST} deep")
        if len(value) == 1:
            ((tag, inner),) = value.items()
            if tag in _TAGS:
                return _untag(tag, inner, depth)
        return {k: _decode(v, depth + 1) for k, v in value.items()}
    return value


def _untag(tag: str, inner: Any, depth: int) -> Any:
    """The value a tagged record (``{"$date": "2027-01-01"}``) stands for."""
    if tag == "$dict":
        if type(inner) is not dict:
            raise ValueError(f"$dict holds {type(inner).__name__}, not an object")
        return {k: _decode(v, depth + 1) for k, v in inner.items()}
    if tag == "$zoned":
        if type(inner) is list and len(inner) == 2 and all(type(v) is str for v in inner):
            return _zoned(*inner)
        # (A user's dict of that one key, stored before the tag existed: a dict.)
        return {tag: _decode(inner, depth + 1)}
    if type(inner) is not str:
        raise ValueError(f"{tag} holds {type(inner).__name__}, not a string")
    if tag == "$datetime":
        return datetime.fromisoformat(inner)
    if tag == "$date":
        return date.fromisoformat(inner)
    if tag == "$decimal":
        return Decimal(inner)  # (InvalidOperation is a ValueError... of ArithmeticError's)
    return UUID(inner)


def _zoned(iso: str, key: str) -> datetime:
    """A datetime stored with its IANA zone: the same instant, in that zone (with its fold); with
    the fixed offset it was stored with if this host does not know the zone."""
    when = datetime.fromisoformat(iso)
    try:
        return when.astimezone(ZoneInfo(key))
    except (ValueError, OverflowError, ZoneInfoNotFoundError):
        # (OverflowError: within a day of datetime.max or .min, the conversion through UTC
        # leaves the calendar; the stored offset still names the instant.)
        return when


_NO_ARGS = '{"args":[],"kwargs":{}}'


def dumps_args(args: tuple[Any, ...] | list[Any], kwargs: Mapping[str, Any] | None) -> str:
    """A job's arguments as a JSON document.

    Tuples inside the arguments come back as lists (JSON has one sequence type).

    Raises:
        InvalidArgument: An argument JSON cannot carry; the message names it (``args[1]``,
            ``kwargs['when']``).
    """
    if not args and not kwargs:
        return _NO_ARGS
    try:
        doc = {
            "args": [_encode(v, f"args[{i}]", 1) for i, v in enumerate(args)],
            "kwargs": {k: _encode(v, f"kwargs[{k!r}]", 1) for k, v in (kwargs or {}).items()},
        }
        text = json.dumps(doc, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        # (A list or dict that contains itself, or nesting deeper than ARGS_DEPTH_MOST.)
        raise InvalidArgument(
            "args and kwargs cannot be stored: a value contains itself, or is nested too "
            f"deeply for JSON (more than {ARGS_DEPTH_MOST} levels), got "
            f"args={reprlib.repr(args)} kwargs={reprlib.repr(kwargs)}"
        ) from None
    if len(text) > ARGS_CHARS_MOST:
        raise InvalidArgument(
            f"args and kwargs cannot be stored: their JSON is {len(text)} characters long, "
            f"more than {ARGS_CHARS_MOST} (pass an id and load the data in the job)"
        )
    return text


def loads_args(text: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The inverse of ``dumps_args``: ``(args, kwargs)``.

    Raises:
        ValueError: ``text`` is not what ``dumps_args`` writes (the message says what is
            wrong): a stored row is read as data that anyone may have written.
    """
    if text == _NO_ARGS:  # (most jobs: a fresh empty dict each, as a caller may fill it)
        return (), {}
    doc = load_json(text, "args", ARGS_CHARS_MOST)
    if type(doc) is not dict or set(doc) != {"args", "kwargs"}:
        raise ValueError("args is not an object of 'args' and 'kwargs'")
    args, kwargs = doc["args"], doc["kwargs"]
    if type(args) is not list or type(kwargs) is not dict:
        raise ValueError("args holds args that are not a list, or kwargs not an object")
    try:
        return tuple(_decode(v, 1) for v in args), {k: _decode(v, 1) for k, v in kwargs.items()}
    except ArithmeticError as exc:  # (a Decimal that is not a number)
        raise ValueError(f"args holds a bad value: {exc!r}") from None


def load_json(text: Any, what: str, most: int = RECORD_CHARS_MOST) -> Any:
    """A stored JSON text as values, bounded: at most ``most`` characters, nested no deeper
    than the parser's stack allows (deeper is refused, not a crash).

    Raises:
        ValueError: ``text`` is not a string, is longer, nested too deeply, or not JSON;
            the message names ``what``.
    """
    if not isinstance(text, str):
        raise ValueError(f"{what} is {type(text).__name__}, not JSON text")
    if len(text) > most:
        raise ValueError(f"{what} is {len(text)} characters long, more than {most}")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from None


# -- functions -----------------------------------------------------------------------------------


def task_reference(func: Callable[..., Any], tasks: Mapping[str, Callable[..., Any]]) -> str:
    """How a store names ``func``: its registered task name, else ``"module:qualname"``.

    Raises:
        InvalidArgument: ``func`` is neither registered nor importable by name (a lambda, a
            closure, a method, a partial, an object with ``__call__``).
    """
    for name, registered in tasks.items():
        if registered is func:
            return name
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", None)
    if (
        isinstance(module, str)
        and isinstance(qualname, str)
        and "<" not in qualname
        and module != "__main__"
        and _lookup(module, qualname) is func
    ):
        return f"{module}:{qualname}"
    raise InvalidArgument(
        f"func {func!r} cannot be stored: a durable job names its function, and this one is "
        f"neither a registered task nor importable by module and name; register it with "
        f"@s.task('name') or s.register('name', fn)"
    )


def _lookup(module: str, qualname: str, *, load: bool = True) -> Any:
    """The object ``module:qualname`` names, or None. ``load=False`` looks only in modules this
    process has imported already: what a stored record names is never imported on its word."""
    try:
        obj: Any = importlib.import_module(module) if load else sys.modules.get(module)
        if obj is None:
            return None
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return obj


def _defined_at(module: str, qualname: str, *, load: bool = True) -> Any:
    """The object defined as ``module:qualname``, or None.

    Walking ``qualname`` with ``getattr`` reaches whatever the module imported
    (``myapp.tasks:os.system``), and a class's attributes (``Task.__init__.__globals__``): a
    stored name therefore resolves only to an object whose own ``__module__`` and
    ``__qualname__`` are the ones stored, that is, one *defined* there. Dunder parts are
    refused before any ``getattr``, so no special attribute is walked on a row's word.
    """
    parts = qualname.split(".")
    if not module or any(not p.isidentifier() or p.startswith("__") for p in parts):
        return None
    if not all(p.isidentifier() for p in module.split(".")):
        return None
    found = _lookup(module, qualname, load=load)
    if (
        getattr(found, "__module__", None) != module
        or getattr(found, "__qualname__", None) != qualname
    ):
        return None
    return found


def under_prefixes(module: str, prefixes: Iterable[str]) -> bool:
    """Whether ``module`` is one of ``prefixes`` or inside one (``import_tasks=``)."""
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def resolve_task(
    reference: str,
    tasks: Mapping[str, Callable[..., Any]],
    import_prefixes: tuple[str, ...] = (),
) -> Callable[..., Any] | None:
    """The function a stored reference names in this process, or None if this process does
    not run it.

    A registered name resolves to its function. A ``"module:qualname"`` resolves only if this
    process registered that very function, or its module is under one of ``import_prefixes``
    and the callable is *defined* there (``_defined_at``): a row in a database is never reason
    enough to import and run code (anyone who can write the database could otherwise run
    ``os:system``, or ``myapp.tasks:os.system`` through an allowed module's imports).
    """
    func = tasks.get(reference)
    if func is not None:
        return func
    module, sep, qualname = reference.partition(":")
    if not sep:
        return None
    for registered in tasks.values():
        if (
            getattr(registered, "__module__", None) == module
            and getattr(registered, "__qualname__", None) == qualname
        ):
            return registered
    if under_prefixes(module, import_prefixes):
        found = _defined_at(module, qualname)
        if callable(found):
            defined: Callable[..., Any] = found
            return defined
    return None


# -- triggers ------------------------------------------------------------------------------------


def _zone_name(tz: str | tzinfo | None, where: str) -> Any:
    if tz is None or isinstance(tz, str):
        return tz
    if isinstance(tz, ZoneInfo):
        return tz.key
    if isinstance(tz, timezone):
        offset = tz.utcoffset(None)
        return {"offset_seconds": int(offset.total_seconds())}
    raise InvalidArgument(
        f"{where} cannot be stored: the zone {tz!r} has no IANA name; use a zone name "
        f"such as 'Europe/Berlin'"
    )


def _zone(value: Any) -> str | tzinfo | None:
    if isinstance(value, dict):
        return timezone(timedelta(seconds=value["offset_seconds"]))
    zone: str | tzinfo | None = value  # (a name, or None: as it was stored)
    return zone


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _at(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _seconds(value: float | int | timedelta) -> float | int:
    return value.total_seconds() if isinstance(value, timedelta) else value


def encode_trigger(trigger: Recurrence) -> dict[str, Any]:
    """A recurrence as a record of JSON values.

    Raises:
        InvalidArgument: A recurrence of a type duetime does not know how to store (a user's
            own ``Recurrence`` class), or a zone without an IANA name.
    """
    cls = type(trigger)
    if cls is At:
        return {"type": "at", "when": cast(At, trigger).when.isoformat()}
    if cls is After:
        return {"type": "after", "delay_ns": cast(After, trigger)._ns}
    if cls is FixedRate or cls is FixedDelay:
        # (The exact types: a subclass is a user's recurrence, not stored.)
        every = cast("FixedRate | FixedDelay", trigger)
        rec: dict[str, Any] = {
            "type": "fixed_rate" if cls is FixedRate else "fixed_delay",
            "interval": [[unit or "seconds", _seconds(v)] for unit, v in every._spec],
        }
        if isinstance(every, FixedRate):
            rec["start"] = _when(every.start)
        else:
            initial = every.initial_delay
            rec["initial_delay"] = None if initial is None else _seconds(initial)
        return rec
    if cls is Cron:
        cron = cast(Cron, trigger)
        return {
            "type": "cron",
            "expr": cron.expr,
            "tz": _zone_name(cron.tz, "when"),
            "start": _when(cron.start),
            "end": _when(cron.end),
        }
    if cls is Poisson:
        p = cast(Poisson, trigger)
        window = p.window
        windows: list[Window] = (
            [window] if isinstance(window, Window) else [] if window is None else list(window)
        )
        return {
            "type": "poisson",
            "per_day": p.per_day,
            "rate": p.rate,
            "mean_interval": p.mean_interval,
            "windows": [
                {
                    "start": w.start if isinstance(w.start, str) else w.start.isoformat(),
                    "end": w.end if isinstance(w.end, str) else w.end.isoformat(),
                    "days": list(w.days) if isinstance(w.days, (list, tuple)) else w.days,
                    "tz": _zone_name(w.tz, "when"),
                }
                for w in windows
            ],
            "single_window": p.window is not None and not isinstance(p.window, (list, tuple)),
        }
    raise InvalidArgument(
        f"when cannot be stored: {trigger!r} is a {cls.__name__}, and a durable store keeps "
        f"At, After, FixedRate, FixedDelay, Cron and Poisson"
    )


def decode_trigger(record: Mapping[str, Any]) -> Recurrence:
    """The inverse of ``encode_trigger``."""
    kind = record["type"]
    if kind == "at":
        return At(datetime.fromisoformat(record["when"]))
    if kind == "after":
        ns = record["delay_ns"]
        return After._checked(ns / NS_PER_SECOND, ns)
    if kind in ("fixed_rate", "fixed_delay"):
        units = dict(record["interval"])
        if kind == "fixed_rate":
            return FixedRate(**units, start=_at(record["start"]))
        return FixedDelay(**units, initial_delay=record["initial_delay"])
    if kind == "cron":
        return Cron(
            record["expr"],
            tz=_zone(record["tz"]),
            start=_at(record["start"]),
            end=_at(record["end"]),
        )
    if kind == "poisson":
        windows = [
            Window(
                _time_of_day(w["start"]),
                _time_of_day(w["end"]),
                days=w["days"],
                tz=_zone(w["tz"]),
            )
            for w in record["windows"]
        ]
        window: Window | list[Window] | None = windows or None
        if record["single_window"] and windows:
            window = windows[0]
        return Poisson(
            per_day=record["per_day"],
            rate=record["rate"],
            mean_interval=record["mean_interval"],
            window=window,
        )
    raise InvalidArgument(f"record is not a stored trigger: {dict(record)!r}")


# Decoded triggers by their stored text. Triggers are frozen values, so jobs on one schedule (a
# cron per tenant, "every 5 minutes", a batch scheduled for one instant) share one instance, and
# loading a store decodes each distinct schedule once. Bounded: one-shot jobs at distinct times
# would otherwise keep an entry each.
_TRIGGERS: dict[str, Recurrence] = {}
_TRIGGERS_MAX = 1024


def load_trigger(text: str) -> Recurrence:
    """``decode_trigger`` of a stored JSON text, from a cache of the recent distinct texts.

    Raises:
        InvalidArgument: ``text`` is not a stored trigger (never cached).
    """
    trigger = _TRIGGERS.get(text)
    if trigger is None:
        trigger = _load_at(text) or decode_trigger(json.loads(text))
        if len(_TRIGGERS) >= _TRIGGERS_MAX:
            _TRIGGERS.clear()
        _TRIGGERS[text] = trigger
    return trigger


# How ``_durable.trigger_json`` writes an ``At``: most rows of a store of one-shot jobs, each at
# an instant of its own, so not in the cache above.
_AT_HEAD = '{"type":"at","when":"'
_AT_TAIL = '"}'


def _load_at(text: str) -> At | None:
    """The ``At`` a stored text written by duetime holds, read without the JSON parser (a
    third of a one-shot job's decoding at start-up); None for anything else, which the
    general path reads (and refuses, if it must, with its own message)."""
    if not (text.startswith(_AT_HEAD) and text.endswith(_AT_TAIL)):
        return None
    iso = text[len(_AT_HEAD) : -len(_AT_TAIL)]
    if '"' in iso or "\\" in iso:  # (not one JSON string: the general path says what it is)
        return None
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return None
    return At(when) if when.tzinfo is not None else None


def _time_of_day(text: str) -> str | time:
    # "HH:MM" as the user wrote it (Window's own form), or a datetime.time's isoformat.
    return text if text.count(":") == 1 else time.fromisoformat(text)


# -- retry policies ------------------------------------------------------------------------------


def _exceptions(classes: Any) -> list[str]:
    classes = classes if isinstance(classes, tuple) else (classes,)
    out = []
    for cls in classes:
        name = f"{cls.__module__}:{cls.__qualname__}"
        if _lookup(cls.__module__, cls.__qualname__) is not cls:
            raise InvalidArgument(
                f"retry cannot be stored: retry_on names {cls!r}, which cannot be imported by "
                f"module and name"
            )
        out.append(name)
    return out


def _exception_classes(names: list[str]) -> tuple[type[BaseException], ...]:
    found = []
    for name in names:
        module, _, qualname = name.partition(":")
        cls = _defined_at(module, qualname, load=False)
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise InvalidArgument(
                f"record names {name!r}, which is not an exception class of a module this "
                f"process has imported (a stored record never imports code)"
            )
        found.append(cls)
    return tuple(found)


def encode_retry(policy: RetryPolicy | None) -> dict[str, Any] | None:
    """A retry policy as a record of JSON values (None: the scheduler's default).

    Raises:
        InvalidArgument: A policy of a type duetime does not know how to store.
    """
    if policy is None:
        return None
    if type(policy) is NoRetry:
        return {"type": "none"}
    if type(policy) is FixedBackoff:
        return {
            "type": "fixed",
            "delays": [_seconds(d) for d in policy.delays],
            "retry_on": _exceptions(policy.retry_on),
        }
    if type(policy) is ExponentialBackoff:
        return {
            "type": "exponential",
            "base": policy.base,
            "factor": policy.factor,
            "cap": policy.cap,
            "max_attempts": policy.max_attempts,
            "jitter": policy.jitter,
            "retry_on": _exceptions(policy.retry_on),
        }
    raise InvalidArgument(
        f"retry cannot be stored: {policy!r} is a {type(policy).__name__}, and a durable store "
        f"keeps NoRetry, FixedBackoff and ExponentialBackoff"
    )


def decode_retry(record: Mapping[str, Any] | None) -> RetryPolicy | None:
    """The inverse of ``encode_retry``."""
    if record is None:
        return None
    kind = record["type"]
    if kind == "none":
        return NoRetry()
    if kind == "fixed":
        return FixedBackoff(record["delays"], retry_on=_exception_classes(record["retry_on"]))
    if kind == "exponential":
        return ExponentialBackoff(
            base=record["base"],
            factor=record["factor"],
            cap=record["cap"],
            max_attempts=record["max_attempts"],
            jitter=record["jitter"],
            retry_on=_exception_classes(record["retry_on"]),
        )
    raise InvalidArgument(f"record is not a stored retry policy: {dict(record)!r}")
