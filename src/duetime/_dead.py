"""Dead letters: the one-shot jobs whose last attempt failed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from duetime.job import Job

__all__ = ["FailedJob"]


@dataclass(frozen=True, slots=True)
class FailedJob:
    """A one-shot job whose last attempt failed: an entry of the dead-letter list.

    Attributes:
        job: The job (state ``FAILED``).
        error: The last exception.
        traceback: The formatted traceback of ``error``.
        attempts: How many attempts were made.
        scheduled_time: When the occurrence was due.
        failed_at: When the last attempt failed.
    """

    job: Job
    error: BaseException
    traceback: str
    attempts: int
    scheduled_time: datetime
    failed_at: datetime
