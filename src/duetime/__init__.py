"""duetime: run work at the right time, in-process: by hand on a fake clock, or on its own thread.

Public names only; each lives in the module that owns its idea (see the docs' concepts page).
"""

from __future__ import annotations

import logging

from duetime._declared import task
from duetime.aio import AsyncScheduler
from duetime.clock import Clock, FakeClock, SteppableClock, SystemClock
from duetime.core import EventQueue
from duetime.cron import Cron
from duetime.errors import (
    ConflictingIdError,
    DuetimeError,
    InvalidArgument,
    JobLookupError,
    SchedulerShutdownError,
    StoredError,
    StoreError,
)
from duetime.events import (
    Event,
    JobAdded,
    JobCancelled,
    JobDead,
    JobDeferred,
    JobEvent,
    JobFailed,
    JobLost,
    JobMissed,
    JobPaused,
    JobRescheduled,
    JobResumed,
    JobSkipped,
    JobStarted,
    JobSucceeded,
    SchedulerStarted,
    SchedulerStopped,
)
from duetime.job import Job, JobState, Misfire, Overlap, Run, current_run
from duetime.poisson import Poisson, Window
from duetime.ratelimit import TokenBucket
from duetime.recurrence import After, At, FixedDelay, FixedRate, Recurrence
from duetime.retry import ExponentialBackoff, FixedBackoff, NoRetry, RetryPolicy
from duetime.scheduler import FailedJob, ScheduleOptions, Scheduler
from duetime.stats import Lateness, Stats
from duetime.stores import JobStore, MemoryStore
from duetime.stores.postgres import PostgresStore
from duetime.stores.records import RunRecord, UnreadableRow
from duetime.stores.sqlite import SQLiteStore

__version__ = "0.1.0"

# A library does not decide where log records go: without this, Python's last-resort handler
# would print duetime's warnings to stderr in applications that never configured logging.
logging.getLogger("duetime").addHandler(logging.NullHandler())

__all__ = [
    "After",
    "AsyncScheduler",
    "At",
    "Clock",
    "ConflictingIdError",
    "Cron",
    "DuetimeError",
    "Event",
    "EventQueue",
    "ExponentialBackoff",
    "FailedJob",
    "FakeClock",
    "FixedBackoff",
    "FixedDelay",
    "FixedRate",
    "InvalidArgument",
    "Job",
    "JobAdded",
    "JobCancelled",
    "JobDead",
    "JobDeferred",
    "JobEvent",
    "JobFailed",
    "JobLookupError",
    "JobLost",
    "JobMissed",
    "JobPaused",
    "JobRescheduled",
    "JobResumed",
    "JobSkipped",
    "JobStarted",
    "JobState",
    "JobStore",
    "JobSucceeded",
    "Lateness",
    "MemoryStore",
    "Misfire",
    "NoRetry",
    "Overlap",
    "Poisson",
    "PostgresStore",
    "Recurrence",
    "RetryPolicy",
    "Run",
    "RunRecord",
    "SQLiteStore",
    "ScheduleOptions",
    "Scheduler",
    "SchedulerShutdownError",
    "SchedulerStarted",
    "SchedulerStopped",
    "Stats",
    "SteppableClock",
    "StoreError",
    "StoredError",
    "SystemClock",
    "TokenBucket",
    "UnreadableRow",
    "Window",
    "current_run",
    "task",
]
