"""Reading schedule()'s arguments: the keyword options, the ``when`` shorthands, recurrences.

The scheduler composes one ``Options`` and asks it, before it takes its lock, what a call's
arguments mean; nothing here changes a job or the store. The module's functions check the
arguments the constructor and ``schedule`` share (priority, retry, store URL, task name)."""

from __future__ import annotations

import inspect
import logging
import random
from collections.abc import Sequence
from concurrent.futures import Executor
from datetime import datetime, timedelta, tzinfo
from typing import Any, Protocol

from duetime import _foreign
from duetime._replica import Replica
from duetime._timers import (
    PRIORITY_MAX,
    PRIORITY_MIN,
)
from duetime._validate import (
    DURATION_MOST_S,
    NS_PER_SECOND,
    aware_datetime,
    datetime_to_ns,
    duration_ns,
    integer,
)
from duetime.clock import (
    Clock,
    NsClock,
    SystemClock,
)
from duetime.cron import Cron
from duetime.errors import (
    InvalidArgument,
)
from duetime.job import (
    JobOptions,
    Misfire,
    Overlap,
)
from duetime.ratelimit import TokenBucket
from duetime.recurrence import MONOTONIC, WALL, After, At, Env, Recurrence
from duetime.retry import RetryPolicy
from duetime.stores._url import store_from_url
from duetime.stores.memory import MemoryStore
from duetime.stores.records import LEASE_MOST_NS

__all__ = ["Host", "Options"]

logger = logging.getLogger("duetime")


def check_priority(value: Any) -> int:
    integer("priority", value)
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise InvalidArgument(
            f"priority must be between {PRIORITY_MIN} and {PRIORITY_MAX}, got {value!r}"
        )
    return int(value)


def timebase_of(trigger: Any) -> int:
    """The timebase of a job's trigger, without building an After/At for a raw shorthand."""
    cls = type(trigger)
    if cls is float or cls is int:
        return MONOTONIC
    return WALL if cls is datetime else trigger.timebase


def check_retry(retry: object) -> None:
    """Refuse what is not a retry policy instance (a policy class looks like one to the
    protocol check, and would fail only at the first retry)."""
    if retry is not None and (isinstance(retry, type) or not isinstance(retry, RetryPolicy)):
        raise TypeError(f"retry must be a RetryPolicy, got {retry!r}")


# Classes already known to implement Recurrence (see _recurrence).
_RECURRENCE_TYPES: set[type] = set()


def check_task_name(name: object) -> None:
    """Refuse what cannot be a task name (``register``, ``task``)."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {name!r}")
    if not name:
        raise InvalidArgument("name must not be empty")


class Host(Protocol):
    """What this part uses of the scheduler that composes it."""

    _clock: NsClock
    _env: Env
    _executors_spec: dict[str, Any]
    _replica: Replica | None
    _tz: tzinfo


class Options:
    """What schedule()'s arguments mean, for the scheduler that composes it."""

    def __init__(self, host: Host) -> None:
        self._s = host

    def options(
        self,
        retry: RetryPolicy | None,
        misfire: Misfire | None,
        grace: float | int | timedelta | None,
        overlap: Overlap | None,
        jitter: float | int | timedelta | None,
        limiter: TokenBucket | None,
        executor: str | None,
    ) -> JobOptions:
        check_retry(retry)
        if misfire is not None and not isinstance(misfire, Misfire):
            raise TypeError(f"misfire must be a Misfire, got {misfire!r}")
        if overlap is not None and not isinstance(overlap, Overlap):
            raise TypeError(f"overlap must be an Overlap, got {overlap!r}")
        if limiter is not None and not isinstance(limiter, TokenBucket):
            raise TypeError(f"limiter must be a TokenBucket, got {limiter!r}")
        if executor is not None:
            if not isinstance(executor, str):
                raise TypeError(f"executor must be the name of an executor, got {executor!r}")
            if executor not in self._s._executors_spec:
                if self._s._replica is None or not executor.strip():
                    raise InvalidArgument(
                        f"executor {executor!r} is not one of the scheduler's executors "
                        f"{sorted(self._s._executors_spec)!r}"
                    )
                # A durable job is for whichever process has that executor (a web process
                # schedules work for the workers that have a "reports" pool), as a task
                # name this process has not registered is. Said once per name.
                if executor not in self._s._replica.stored_for_others:
                    self._s._replica.stored_for_others.add(executor)
                    logger.warning(
                        "executor %r is not one of this scheduler's executors %r: its jobs "
                        "are stored for the processes that have one (if none has, they never "
                        "run)",
                        executor,
                        sorted(self._s._executors_spec),
                    )
        return JobOptions(
            retry=retry,
            misfire=misfire,
            grace_ns=None if grace is None else duration_ns("grace", grace),
            overlap=overlap,
            jitter_ns=0 if jitter is None else duration_ns("jitter", jitter),
            limiter=limiter,
            executor=executor,
        )

    def when(self, when: Any) -> tuple[Recurrence | float | int | datetime, int | None, bool]:
        """Validate ``when`` and return ``(trigger, first due, later)`` for a job; ``later``:
        the first due is not computed yet (a Recurrence: ``_first`` computes it once the call
        is known to go through, as it may draw from the scheduler's rng, a Poisson's gap, and a
        refused call must not move a seeded simulation on).

        The shorthands ``30`` / ``30.0`` (After) and an aware ``datetime`` (At) are kept as the
        raw value, the Recurrence being built only if someone reads ``job.trigger``: for a
        one-shot job, that object would be most of the cost of scheduling it.
        """
        cls = type(when)
        if cls is float and 0 <= when <= DURATION_MOST_S:  # also False for NaN
            return when, self._s._clock.monotonic_ns() + round(when * NS_PER_SECOND), False
        if cls is int and 0 <= when <= DURATION_MOST_S:
            return when, self._s._clock.monotonic_ns() + when * NS_PER_SECOND, False
        if cls is datetime:
            first = datetime_to_ns(aware_datetime("when", when))
            self.note_past(when, first)
            return when, first, False
        return self.recurrence("when", when), None, True

    def first(self, trigger: Any) -> int | None:
        """The first due of a job given ``trigger``, a Recurrence (``_when``'s ``later``)."""
        due: int | None = trigger.first(self._s._env)
        if type(trigger) is At and due is not None:
            self.note_past(trigger.when, due)
        elif due is None:
            # Accepted (a window that closed is not bad input: the same code may run before
            # and after it), but not silently: the job ends at once, having never run.
            logger.warning(
                "when %r has no fire to come (its end has passed, or nothing in its window "
                "matches): the job is completed at once without running",
                trigger,
            )
        return due

    def note_past(self, when: datetime, first: int) -> None:
        """Say at INFO that a one-shot in the past will run at once (it is not dropped)."""
        late = self._s._clock.time_ns() - first
        if late > 0:
            logger.info(
                "when %s is %.3f seconds in the past: the job runs at once (a one-shot "
                "always runs late rather than never)",
                when.isoformat(),
                late / NS_PER_SECOND,
            )

    def recurrence(self, param: str, when: Any) -> Recurrence:
        """Turn the other forms of ``when`` into a Recurrence (validating them)."""
        cls = type(when)
        if cls in _RECURRENCE_TYPES:
            return when  # type: ignore[no-any-return]
        if isinstance(when, type):
            # (A class has the protocol's methods, unbound: it passed isinstance() below and
            # failed at its first use with "first() missing 1 required positional argument".)
            raise TypeError(
                f"{param} must be a Recurrence, not the class {when.__name__}: write "
                f"{when.__name__}(...), e.g. FixedRate(minutes=5), got {when!r}"
            )
        if isinstance(when, Recurrence):
            # A protocol isinstance() walks every attribute (~30 µs); remember the class.
            _RECURRENCE_TYPES.add(cls)
            return when
        if isinstance(when, datetime):
            aware_datetime(param, when)
            return At(when)
        if isinstance(when, (int, float, timedelta)) and not isinstance(when, bool):
            # Checked and converted once, under the caller's parameter name.
            return After._checked(when, duration_ns(param, when))
        if isinstance(when, str):
            hint = _foreign.trigger_hint(when)
            if hint is not None:
                raise InvalidArgument(
                    f"{param} {when!r} is APScheduler's name for a trigger; pass the trigger "
                    f"itself: {hint}"
                )
            try:
                return Cron(when, tz=self._s._tz)
            except InvalidArgument as exc:
                # (Cron's messages name its own parameter, expr; the caller passed this one.)
                text = str(exc)
                if text.startswith("expr "):
                    raise InvalidArgument(f"{param} {text[5:]}") from None
                raise
        raise TypeError(
            f"{param} must be a Recurrence, an aware datetime, seconds, a timedelta or a cron "
            f"string, got {when!r}"
        )


def check_clock(clock: Clock | None) -> Clock:
    """The clock a Scheduler was given, checked (a SystemClock if None)."""
    if clock is None:
        clock = SystemClock()
    elif isinstance(clock, type) and not isinstance(
        inspect.getattr_static(clock, "time", None), (staticmethod, classmethod)
    ):
        # (The class has the protocol's methods, unbound: it passed the check below and
        # failed at the first reading of the time.)
        raise TypeError(
            f"clock must be a clock, not a class: write clock={clock.__name__}(), got {clock!r}"
        )
    elif not isinstance(clock, Clock):
        raise TypeError(
            f"clock must implement the Clock protocol (time, monotonic, wait; and "
            f"time_ns, monotonic_ns if it can), got {clock!r}"
        )
    return clock


def check_store(store: MemoryStore | str | None) -> MemoryStore:
    """The store a Scheduler was given, checked (a URL opened; a MemoryStore if None)."""
    if store is None:
        store = MemoryStore()
    elif isinstance(store, str):
        store = store_from_url(store)
    elif not isinstance(store, MemoryStore):
        raise TypeError(
            f"store must be a MemoryStore, a SQLiteStore, a PostgresStore or a store URL "
            f"such as 'sqlite:///jobs.db', got {store!r}"
        )
    return store


def check_settings(
    rng: random.Random | None,
    retry: RetryPolicy | None,
    misfire: Misfire,
    overlap: Overlap,
    max_concurrent: int | None,
    import_tasks: Sequence[str],
) -> random.Random:
    """Check a Scheduler's defaults and limits; the random generator it uses (a new one if
    None)."""
    if rng is None:
        rng = random.Random()
    elif not isinstance(rng, random.Random):
        raise TypeError(f"rng must be a random.Random, got {rng!r}")
    check_retry(retry)
    if not isinstance(misfire, Misfire):
        raise TypeError(f"misfire must be a Misfire, got {misfire!r}")
    if not isinstance(overlap, Overlap):
        raise TypeError(f"overlap must be an Overlap, got {overlap!r}")
    if max_concurrent is not None:
        integer("max_concurrent", max_concurrent)
        if max_concurrent < 1:
            raise InvalidArgument(f"max_concurrent must be at least 1, got {max_concurrent!r}")
    if (
        isinstance(import_tasks, str)
        or not hasattr(import_tasks, "__iter__")
        or not all(isinstance(p, str) for p in import_tasks)
    ):
        raise TypeError(
            f"import_tasks must be a list of module prefixes (str), got {import_tasks!r}"
        )
    if any(not p.strip(". ") for p in import_tasks):
        raise InvalidArgument(
            f"import_tasks must name module prefixes such as 'myapp.tasks', got {import_tasks!r}"
        )
    return rng


def lease_ns(lease: float | int | timedelta) -> int:
    """A Scheduler's lease, checked, in nanoseconds."""
    ns = duration_ns("lease", lease, allow_zero=False, bounded=False)
    if ns > LEASE_MOST_NS:
        # (A run lost with a longer lease would in effect never be run again.)
        raise InvalidArgument(f"lease must be at most a year (seconds), got {lease!r}")
    return ns


def check_executors(executor: Any, executors: dict[str, Any] | None) -> dict[str, Any]:
    """Check a Scheduler's default executor and its named ones; the named ones, copied."""
    if executor is not None and executor != "inline" and not isinstance(executor, Executor):
        raise TypeError(
            f"executor must be 'inline', None or a concurrent.futures.Executor, got {executor!r}"
        )
    if executors is not None and not isinstance(executors, dict):
        raise TypeError(f"executors must be a dict of name -> executor, got {executors!r}")
    for name, ex in (executors or {}).items():
        if not isinstance(name, str):
            raise TypeError(f"executors keys must be str, got {name!r}")
        if ex != "inline" and not isinstance(ex, Executor):
            raise TypeError(
                f"executors[{name!r}] must be 'inline' or a concurrent.futures.Executor, got {ex!r}"
            )
    if executors and "default" in executors and executor is None:
        # APScheduler's spelling of the default executor: here it would be only a name no
        # job selects, and every job would run on duetime's own pool instead.
        raise InvalidArgument(
            f"executors['default'] does not set the default executor here (APScheduler's "
            f"spelling), got {executors['default']!r}: write "
            f"Scheduler(executor={executors['default']!r}); a named executor runs only the "
            f"jobs that select it with schedule(..., executor=name)"
        )
    return dict(executors or {})


def check_call(
    args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any] | None, replace: bool, paused: bool
) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
    """schedule()'s ``args`` (as a tuple) and ``kwargs`` (None if empty), checked with its two
    flags."""
    if type(args) is not tuple:
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"args must be a tuple or list, got {args!r}")
        args = tuple(args)
    if kwargs is not None:
        if not isinstance(kwargs, dict):
            raise TypeError(f"kwargs must be a dict or None, got {kwargs!r}")
        if not kwargs:
            kwargs = None
        elif not all(type(k) is str for k in kwargs):
            # (As a call would: f(**{1: 2}) is a TypeError; a store would make it "1".)
            raise TypeError(f"kwargs keys must be str, got {kwargs!r}")
    for flag, value in (("replace", replace), ("paused", paused)):
        if type(value) is not bool:
            raise TypeError(f"{flag} must be a bool, got {value!r}")
    return args, kwargs


def check_names(id: str | None, name: str | None) -> None:
    """Check schedule()'s ``id`` and ``name``."""
    if id is not None:
        if not isinstance(id, str):
            raise TypeError(f"id must be a str or None, got {id!r}")
        if not id:
            raise InvalidArgument("id must not be empty")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {name!r}")
