"""Exceptions raised by duetime.

Every exception builds its own message from the values it is given, so a caller never has to
format one, and each subclasses the builtin that an ``except`` clause written without duetime in
mind would reach for (``ValueError`` for bad input, ``LookupError`` for unknown ids).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConflictingIdError",
    "DuetimeError",
    "InvalidArgument",
    "JobLookupError",
    "SchedulerShutdownError",
    "StoreError",
    "StoredError",
]


class DuetimeError(Exception):
    """Base class of every exception duetime raises on purpose."""


class InvalidArgument(DuetimeError, ValueError):
    """A parameter has a value duetime cannot accept; the message names the parameter."""


class JobLookupError(DuetimeError, KeyError):
    """No live job (or, from ``retry_failed``, no failed job) has the given id.

    A ``KeyError`` (so a ``LookupError``), as APScheduler's is: code that catches either works.

    Args:
        job_id: The id that was looked up.
        kind: What was looked for, in the message: ``"job"`` or ``"failed job"``.
    """

    def __init__(self, job_id: Any, kind: str = "job") -> None:
        self.job_id = job_id
        super().__init__(f"no {kind} with id {job_id!r}")

    def __str__(self) -> str:
        # LookupError subclasses such as KeyError repr() their argument; keep the sentence.
        return str(self.args[0])


class ConflictingIdError(DuetimeError, ValueError):
    """A job with this id is already scheduled and ``replace=True`` was not given (or the job a
    durable store holds under it cannot be read here, so it cannot be replaced from here).

    Args:
        job_id: The id that is already in use.
        why: What stands in the way, when it is not the usual (then the message says to pass
            ``replace=True``).
    """

    def __init__(self, job_id: Any, why: str | None = None) -> None:
        self.job_id = job_id
        if why is None:
            why = "pass replace=True to reschedule it"
        super().__init__(f"id {job_id!r} is already scheduled; {why}")


class SchedulerShutdownError(DuetimeError, RuntimeError):
    """The scheduler has been shut down and accepts no more work."""

    def __init__(self, action: str = "schedule") -> None:
        super().__init__(f"cannot {action}: the scheduler has been shut down")


class StoreError(DuetimeError, RuntimeError):
    """A store could not do what was asked: the file or server is unreachable, locked,
    read-only, corrupt, or from a newer version of duetime. Nothing was half-written.

    Args:
        store: What the store is (its path or address), for the message.
        problem: What went wrong.
        advice: What to do about it.
    """

    def __init__(self, store: str, problem: str, advice: str = "") -> None:
        self.store = store
        self.problem = problem
        self.advice = advice
        super().__init__(f"store {store}: {problem}" + (f"; {advice}" if advice else ""))


def exception_message(error: BaseException) -> str:
    """``str(error)``, or a placeholder if its ``__str__`` fails: a job's exception is logged
    and recorded, and a faulty one must not take the runner down with it."""
    try:
        return str(error)
    except Exception:
        return "<message not printable>"


class StoredError(DuetimeError):
    """An exception as a store recorded it: its type's name and its message.

    A durable store keeps a failed attempt's error as text (an exception object does not
    survive a restart); ``Job.last_error`` and dead letters loaded from a store hold one.

    Args:
        type_name: The original exception's qualified type name.
        message: Its ``str()``.
    """

    def __init__(self, type_name: str, message: str) -> None:
        self.type_name = type_name
        self.message = message
        super().__init__(f"{type_name}: {message}" if message else type_name)
