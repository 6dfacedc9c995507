"""A job as a durable store's row, and back: the conversion at the store boundary.

The Scheduler keeps jobs as ``Job`` objects with their side occurrences; a durable store keeps
``JobRow``s of plain values. With a durable store the Scheduler reads time through
``duetime.clock.WallAxis``, so every due time a job holds is already a UTC instant in
nanoseconds and is stored as it is (``duetime.stores.timebase`` documents the translation).

A function is stored by reference (``codec.task_reference``) and found again only among the
functions this process registered, or under the module prefixes it allows imports from; a
job whose task is not found here loads with ``MissingTask`` as its function and never runs in
this process.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import timezone
from typing import Any

from duetime._validate import ns_to_datetime
from duetime.errors import InvalidArgument, StoredError, exception_message
from duetime.job import (
    _QUEUED,
    DEFAULT_OPTIONS,
    Job,
    JobOptions,
    JobState,
    Misfire,
    Overlap,
    Side,
)
from duetime.recurrence import MONOTONIC
from duetime.stores import codec
from duetime.stores.records import JobRow

__all__ = [
    "MissingTask",
    "apply_row",
    "check_limiter",
    "check_row",
    "error_text",
    "job_row",
    "parse_error",
    "sides_of",
    "trigger_json",
]


class MissingTask:
    """The function of a loaded job whose task this process has not registered.

    It is never called: the Scheduler leaves such a job pending (another process, or this one
    after ``register``, runs it).
    """

    def __init__(self, task: str) -> None:
        self.task = task
        self.__qualname__ = task  # what Job.name shows: the task's name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"task {self.task!r} is not registered in this process")

    def __repr__(self) -> str:
        return f"<task {self.task!r}, not registered in this process>"


def error_text(error: BaseException | None) -> str | None:
    """An exception as a store keeps it: ``"Type: message"``."""
    if error is None:
        return None
    if isinstance(error, StoredError):
        return str(error)
    name = type(error).__qualname__
    text = storable(exception_message(error))
    return f"{name}: {text}" if text else name


def storable(text: str) -> str:
    """``text`` as every store can keep it: PostgreSQL's text takes no NUL, UTF-8 no lone
    surrogate (both may come in a job's exception message); each is written escaped."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def parse_error(text: str | None) -> StoredError | None:
    """The inverse of ``error_text``."""
    if text is None:
        return None
    name, _, message = text.partition(": ")
    return StoredError(name, message)


def _options(opts: JobOptions) -> str:
    return json.dumps(
        {
            "misfire": None if opts.misfire is None else opts.misfire.value,
            "grace_ns": opts.grace_ns,
            "overlap": None if opts.overlap is None else opts.overlap.value,
            "jitter_ns": opts.jitter_ns,
            "executor": opts.executor,
        },
        separators=(",", ":"),
    )


# Recurrences are immutable values: many jobs share one, and a row is rewritten at every
# change, so each is encoded once. (Bounded: cleared when it grows past this.)
_TRIGGERS: dict[Any, str] = {}
_TRIGGERS_MAX = 4096


def trigger_json(trigger: Any) -> str:
    """A recurrence as a JSON document (``codec.encode_trigger``), cached by value."""
    try:
        return _TRIGGERS[trigger]
    except KeyError:
        pass
    except TypeError:  # unhashable: a user's own class, which encode_trigger refuses below
        return json.dumps(codec.encode_trigger(trigger), separators=(",", ":"))
    text = json.dumps(codec.encode_trigger(trigger), separators=(",", ":"))
    if len(_TRIGGERS) >= _TRIGGERS_MAX:
        _TRIGGERS.clear()
    _TRIGGERS[trigger] = text
    return text


def check_limiter(limiter: object) -> None:
    """Refuse a rate limiter: a ``TokenBucket`` cannot be stored.

    Raises:
        InvalidArgument: ``limiter`` is not None.
    """
    if limiter is not None:
        raise InvalidArgument(
            f"limiter cannot be stored: a TokenBucket lives in one process's memory, and a "
            f"durable store keeps a job for any process; got {limiter!r}"
        )


# What a durable store's times can be: 64-bit integers of nanoseconds since the epoch (UTC),
# where memory takes any time from the year 1 to 9999. (Said in every message about them.)
_NS_MIN, _NS_MAX = -(2**63), 2**63 - 1
STORABLE_TIMES = "times from 1677-09-21 to 2262-04-11 UTC"


def storable_ns(ns: int) -> bool:
    """Whether a durable store can hold the time ``ns`` (UTC epoch nanoseconds)."""
    return _NS_MIN <= ns <= _NS_MAX


def describe_ns(ns: int) -> str:
    """``ns`` (UTC epoch nanoseconds) as an ISO 8601 instant, for messages."""
    try:
        return ns_to_datetime(ns, timezone.utc).isoformat()
    except OverflowError:
        return f"{ns} ns after the epoch"


def check_storable(job: Job) -> None:
    """Refuse a job whose next fire a durable store cannot hold (``schedule``,
    ``reschedule``: the caller's ``when``), before anything is written.

    Raises:
        InvalidArgument: The next fire falls outside the years 1677 to 2262.
    """
    due = job._due
    if due is None:
        return
    for ns in (job._base, due):
        if ns is not None and not storable_ns(ns):
            raise InvalidArgument(
                f"when is outside what a durable store holds ({STORABLE_TIMES}): job "
                f"{job._id!r} would fall due at {describe_ns(ns)}"
            )


def job_row(job: Job, task: str, args: str | None = None) -> JobRow:
    """``job`` as a row. ``task`` is its function's reference; ``args`` its arguments as JSON if
    the caller has them already.

    Raises:
        InvalidArgument: Something of the job cannot be stored (the message names it).
    """
    opts = job._opts
    check_limiter(opts.limiter)
    x = job._x
    sides = x.sides if x is not None else None
    state = job._state
    return JobRow(
        id=job.id,
        name=x.name if x is not None else None,
        task=task,
        args=codec.dumps_args(job.args, job.kwargs) if args is None else args,
        trigger=trigger_json(job.trigger),
        retry=None
        if opts.retry is None
        else json.dumps(codec.encode_retry(opts.retry), separators=(",", ":")),
        options=_options(opts) if opts is not DEFAULT_OPTIONS else "{}",
        priority=job.priority,
        state=state.value,
        # _base outlives its entry (a run in progress still reads it): a row has a next fire
        # only while one is pending, or the claim guard would let a second process through.
        next_base=job._base if job._due is not None else None,
        next_due=job._due,
        sides=_sides_json(sides),
        catchup=bool(x is not None and x.catchup),
        attempt=job.attempt,
        runs=job.runs,
        failures=job.failures,
        last_error=error_text(job.last_error),
    )


def _sides_json(sides: list[Any] | None) -> str | None:
    if not sides:
        return None
    out = []
    for side in sides:
        if side.claimed:
            continue  # held through the runs table: a lease, not a pending side
        out.append(
            {
                "key": side.key,
                "base": side.base,
                "attempt": side.attempt,
                "delay": side.prev_delay,
                # A held-back or blocked start has no due time: it is due when loaded.
                "due": side.due if side.hold == _QUEUED else None,
                "reserved": side.reserved,
            }
        )
    return json.dumps(out, separators=(",", ":")) if out else None


def sides_of(job: Job, row: JobRow, now: int) -> list[Side]:
    """The side occurrences a row records, queued (held-back ones due ``now``).

    Raises:
        ValueError: ``row.sides`` is not what ``job_row`` writes (the row is unreadable).
    """
    if not row.sides:
        return []
    records = codec.load_json(row.sides, "sides")
    if type(records) is not list:
        raise ValueError("sides is not a list")
    out = []
    for rec in records:
        if type(rec) is not dict:
            raise ValueError("sides holds an item that is not an object")
        values: list[Any] = [rec.get(k) for k in _SIDE_FIELDS]
        key, base, attempt, delay, due = values
        if not (
            type(key) is str
            and _is_ns(base)
            and type(attempt) is int
            and 0 <= attempt <= _COUNT_MOST
            and (delay is None or (type(delay) in (int, float) and 0 <= delay < 2**63))
            and (due is None or _is_ns(due))
        ):
            raise ValueError(f"sides holds a record of wrong values: {_short(rec)}")
        side = Side(job, base, MONOTONIC, attempt, delay, False, key)
        side.due = now if due is None else due
        side.hold = _QUEUED
        out.append(side)
    return out


_SIDE_FIELDS = ("key", "base", "attempt", "delay", "due")
# The most a row's counters (attempt, runs, failures) can be: one less than PostgreSQL's
# integer column holds, so that one more run can still be counted.
_COUNT_MOST = 2**31 - 2


def _is_ns(value: object) -> bool:
    """Whether ``value`` is a time a store holds (integer epoch nanoseconds, 64-bit)."""
    return type(value) is int and _NS_MIN <= value <= _NS_MAX


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def check_row(row: JobRow) -> None:
    """Refuse a row whose plain fields are not of their kind (a row is data someone may have
    written by hand): each is used as read, after loading, where a wrong one would raise
    far from here (a text priority in the heap's comparisons, a float due in the clock's).

    Raises:
        ValueError: A field is wrong; the message names it and shows the value.
    """
    for name, value, ok in (
        ("id", row.id, type(row.id) is str),
        ("name", row.name, row.name is None or type(row.name) is str),
        ("task", row.task, type(row.task) is str and row.task != ""),
        ("priority", row.priority, type(row.priority) is int and -(2**63) <= row.priority < 2**63),
        ("state", row.state, row.state in _STATE),
        ("next_base", row.next_base, row.next_base is None or _is_ns(row.next_base)),
        ("next_due", row.next_due, row.next_due is None or _is_ns(row.next_due)),
        ("catchup", row.catchup, type(row.catchup) is bool),
        ("attempt", row.attempt, type(row.attempt) is int and 0 <= row.attempt <= _COUNT_MOST),
        ("runs", row.runs, type(row.runs) is int and 0 <= row.runs <= _COUNT_MOST),
        ("failures", row.failures, type(row.failures) is int and 0 <= row.failures <= _COUNT_MOST),
        ("last_error", row.last_error, row.last_error is None or type(row.last_error) is str),
    ):
        if not ok:
            raise ValueError(f"column {name} holds {_short(value)}")


# A row's state -> the JobState (a dict look, not an Enum call: paid per row loaded).
_STATE = {state.value: state for state in JobState}


def apply_row(
    job: Job,
    row: JobRow,
    resolve: Callable[[str], Callable[..., Any] | None],
) -> None:
    """Give ``job`` everything ``row`` records except its side occurrences and its queue
    entries (the Scheduler queues them).

    Raises:
        InvalidArgument: The row names something this process cannot rebuild (a retry
            policy's exception class from a module it has not imported).
    """
    check_row(row)
    trigger = codec.load_trigger(row.trigger)
    retry = None if row.retry is None else codec.decode_retry(codec.load_json(row.retry, "retry"))
    args, kwargs = codec.loads_args(row.args)
    func = resolve(row.task)
    job._id = row.id
    job.func = func if func is not None else MissingTask(row.task)
    job._trigger = trigger
    job.args = args
    job.kwargs = kwargs or None
    job.priority = row.priority
    if row.options == "{}" and retry is None:
        # (Most jobs; loading a hundred thousand of them at start-up is where this counts.)
        job._opts = DEFAULT_OPTIONS
    else:
        options: Mapping[str, Any] = codec.load_json(row.options, "options")
        if type(options) is not dict:
            raise ValueError("options is not an object")
        misfire = options.get("misfire")
        overlap = options.get("overlap")
        grace, jitter, executor = (options.get(k) for k in ("grace_ns", "jitter_ns", "executor"))
        if not (
            (grace is None or (_is_ns(grace) and grace >= 0))
            and (jitter is None or (_is_ns(jitter) and jitter >= 0))
            and (executor is None or type(executor) is str)
        ):
            raise ValueError(f"options holds wrong values: {_short(options)}")
        opts = JobOptions(
            retry=retry,
            misfire=None if misfire is None else Misfire(misfire),
            grace_ns=grace,
            overlap=None if overlap is None else Overlap(overlap),
            jitter_ns=jitter or 0,
            executor=executor,
        )
        job._opts = DEFAULT_OPTIONS if opts == DEFAULT_OPTIONS else opts
    # A row in state "running" stays so here while its run goes on elsewhere (or went on in
    # this process before a restart): the run's record, not the row, says what becomes of it.
    state = _STATE.get(row.state)
    if state is None:
        raise ValueError(f"{row.state!r} is not a valid JobState")
    job._state = state
    job._base = row.next_base
    job._due = row.next_due
    job.runs = row.runs
    if (
        row.name is not None
        or row.failures
        or row.last_error is not None
        or row.catchup
        or job._x is not None
    ):
        x = job._extras()
        x.name = row.name
        x.failures = row.failures
        x.last_error = parse_error(row.last_error)
        x.catchup = row.catchup
    # (Kept in the extras when it is not what Job.attempt says, which is what it infers from
    # the runs or the attempt kept before: a dead letter queued again by retry_failed has run
    # once and is at attempt 0.)
    if row.attempt != job.attempt:
        job._extras().attempt = row.attempt
