"""Habits from APScheduler 3 and what duetime spells instead: hints for error messages.

A user coming from APScheduler writes ``add_job``, ``misfire_grace_time=`` or ``"interval"``; each
of these gets an error that names the duetime spelling (docs/migrating.md has the whole map).
Nothing here runs on a path that succeeds: only where an error is being built.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install_hints", "keyword_hint", "trigger_hint"]


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
