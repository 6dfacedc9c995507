"""Habits from APScheduler 3 and what duetime spells instead: hints for error messages.

A user coming from APScheduler writes ``add_job``, ``misfire_grace_time=`` or ``"interval"``; each
of these gets an error that names the duetime spelling (docs/migrating.md has the whole map).
Nothing here runs on a path that succeeds: only where an error is being built.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "CRON_KEYWORDS",
    "INTERVAL_KEYWORDS",
    "SCHEDULER_KEYWORDS",
    "hint_keywords",
    "install_hints",
    "keyword_hint",
    "trigger_hint",
]


#: APScheduler 3's trigger names, given as ``when``, and what to pass instead.
_APSCHEDULER_TRIGGERS = {
    "interval": "FixedRate(minutes=5) (or FixedDelay(...))",
    "cron": "Cron(hour=9) or a cron string such as '0 9 * * *'",
    "date": "an aware datetime, or At(datetime)",
}

#: APScheduler 3's add_job() keywords and what they are in duetime.
_APSCHEDULER_KEYWORDS = {
    "replace_existing": "replace=True",
    "misfire_grace_time": "grace=seconds",
    "coalesce": "misfire=Misfire.RUN_ONCE (coalesce) or misfire=Misfire.RUN_ALL",
    "max_instances": "overlap=Overlap.SKIP, QUEUE or ALLOW, or a named executor",
    "next_run_time": "paused=True to add it paused, or an At(datetime) as when",
    "jobstore": "Scheduler(store=...)",
    "trigger": "the second positional argument, when",
}
#: APScheduler's trigger arguments, given to schedule(), and how duetime's triggers spell them.
_INTERVAL = "FixedRate({k}=...) (or FixedDelay, After)"
_FIELD = "Cron({k}=...) or a cron string"
_TRIGGER_KEYWORDS = {
    **{k: _INTERVAL.format(k=k) for k in ("weeks", "days", "hours", "minutes", "seconds")},
    **{k: _FIELD.format(k=k) for k in ("month", "day", "day_of_week", "hour", "minute", "second")},
    "run_date": "At(datetime), or an aware datetime, as when",
    "start_date": "FixedRate(..., start=datetime) or Cron(..., start=datetime)",
    "end_date": "Cron(..., end=datetime)",
    "timezone": "Cron(..., tz=...) or Scheduler(tz=...)",
    "tz": "Cron(..., tz=...) or Scheduler(tz=...)",
    "year": "not a cron field: bound the years with Cron(..., start=..., end=...)",
    "week": "not a cron field: Cron's day_of_week with a #n or a start=/end= bound",
}


def keyword_hint(keyword: str) -> str:
    """A hint for a keyword that APScheduler's add_job() takes, or ``""``."""
    if keyword in _APSCHEDULER_KEYWORDS:
        return f"; APScheduler's {keyword} is {_APSCHEDULER_KEYWORDS[keyword]} here"
    if keyword in _TRIGGER_KEYWORDS:
        return (
            f"; {keyword} belongs to the trigger, which is when: "
            f"{_TRIGGER_KEYWORDS[keyword]} (docs/migrating.md)"
        )
    return ""


#: APScheduler 3's Scheduler methods and what to write instead.
_APSCHEDULER_NAMES = {
    "add_job": "s.schedule(func, when, args=..., id=...)",
    "scheduled_job": "@s.scheduled(when)",
    "get_jobs": "s.jobs()",
    "get_job": "s.get(id)",
    "remove_job": "s.cancel(id)",
    "remove_all_jobs": "for job in s.jobs(): job.cancel()",
    "pause_job": "s.pause(id)",
    "resume_job": "s.resume(id)",
    "reschedule_job": "s.reschedule(id, when)",
    "modify_job": "s.schedule(func, when, id=id, replace=True)",
    "add_listener": "s.subscribe(listener, *event_types)",
    "remove_listener": "the function s.subscribe() returned",
    "add_executor": "Scheduler(executors={name: executor})",
    "add_jobstore": 'Scheduler(store="sqlite:///jobs.db") or store="postgresql://..."',
    "print_jobs": "print(s.jobs())",
}


class _ForeignName:
    """A class attribute for a method another library has and duetime spells differently:
    reading it raises the ``AttributeError`` a missing attribute would, naming what to write.

    A descriptor and not ``Scheduler.__getattr__``: a class with ``__getattr__`` loses CPython's
    fast attribute lookup on every access (measured: schedule() +30 %, cancel() +25 %).
    """

    def __init__(self, name: str, hint: str) -> None:
        self._name = name
        self._hint = hint

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        cls = owner.__name__ if owner is not None else "Scheduler"
        raise AttributeError(
            f"{cls} has no {self._name}() (APScheduler 3's name): use {self._hint} "
            f"(docs/migrating.md maps APScheduler calls to duetime)"
        )


def trigger_hint(when: str) -> str | None:
    """What to pass instead of one of APScheduler's trigger names given as ``when``, or None."""
    return _APSCHEDULER_TRIGGERS.get(when)


def install_hints(cls: type) -> None:
    """Give ``cls`` (the Scheduler) APScheduler's method names, each raising the
    ``AttributeError`` a missing attribute would, naming what to write instead."""
    for name, hint in _APSCHEDULER_NAMES.items():
        setattr(cls, name, _ForeignName(name, hint))


#: APScheduler 3's scheduler constructor keywords, given to Scheduler().
SCHEDULER_KEYWORDS = {
    "timezone": "use tz=",
    "jobstores": 'use store= (one store: "sqlite:///jobs.db" or "postgresql://...")',
    "job_defaults": "give misfire=, grace= and overlap= to Scheduler() itself",
    "misfire_grace_time": "use grace=seconds",
    "coalesce": "use misfire=Misfire.RUN_ONCE (coalesce) or misfire=Misfire.RUN_ALL",
    "max_instances": "use overlap=Overlap.SKIP, QUEUE or ALLOW",
}
#: APScheduler 3's CronTrigger keywords that Cron() spells differently or lacks.
CRON_KEYWORDS = {
    "timezone": "use tz=",
    "start_date": "use start=",
    "end_date": "use end= (inclusive, as in APScheduler)",
    "year": "Cron has no year field: bound the years with start= and end=",
    "week": "Cron has no week field: use day_of_week with #n, or start= and end=",
    "jitter": "jitter is a job option: schedule(..., jitter=seconds)",
}
#: APScheduler 3's IntervalTrigger keywords that FixedRate()/FixedDelay() spell differently or lack.
INTERVAL_KEYWORDS = {
    "start_date": "use FixedRate(..., start=datetime) or FixedDelay(..., initial_delay=seconds)",
    "end_date": "intervals have no end bound: cancel the job, or use Cron(..., end=)",
    "timezone": "intervals need none, they are elapsed time (Cron(..., tz=) for wall-clock times)",
    "jitter": "jitter is a job option: schedule(..., jitter=seconds)",
}


def hint_keywords(cls: type, hints: Mapping[str, str]) -> None:
    """Make ``cls(...)`` given one of APScheduler's keywords in ``hints`` (that ``cls`` does
    not take) raise the ``TypeError`` Python would, naming what to write instead.

    The check runs before the constructor, on the keywords only: a call that binds costs one
    dict test per keyword given, and the constructor's own errors reach the caller untouched.
    """
    init: Callable[..., None] = cls.__init__  # type: ignore[misc]
    known = set(inspect.signature(init).parameters)
    foreign = {k: v for k, v in hints.items() if k not in known}

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        for keyword in kwargs:
            if keyword in foreign:
                raise TypeError(
                    f"{type(self).__name__}() got an unexpected keyword argument {keyword!r} "
                    f"(APScheduler's): {foreign[keyword]} (docs/migrating.md)"
                )
        init(self, *args, **kwargs)

    setattr(cls, "__init__", __init__)  # noqa: B010  # (mypy refuses assigning a method)
