"""The job handle and the small enums that describe a job's life.

A ``Job`` is what ``Scheduler.schedule`` returns: the user's handle to cancel, reschedule, pause or
inspect one piece of scheduled work. Its mutable fields are owned by the scheduler and changed only
under the scheduler's lock; reading them from another thread gives a recent, consistent-enough
value, as reading ``Thread.is_alive()`` would.
"""

from __future__ import annotations

import contextvars
import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, NamedTuple, Protocol

from duetime._validate import duration_ns, ns_to_datetime
from duetime.ratelimit import TokenBucket
from duetime.recurrence import After, At, Recurrence
from duetime.retry import RetryPolicy

__all__ = ["Job", "JobState", "Misfire", "Overlap", "Run", "current_run"]

_QUEUED, _HELD, _BLOCKED = 0, 1, 2


class JobState(enum.Enum):
    """Where a job is in its life."""

    #: Queued, waiting for its next occurrence.
    SCHEDULED = "scheduled"
    #: An occurrence is executing right now (a recurring job may also be queued again).
    RUNNING = "running"
    #: Held back by ``pause()``; keeps its next run time for ``resume()``.
    PAUSED = "paused"
    #: A one-shot job that ran successfully, or a recurring job whose recurrence ended.
    COMPLETED = "completed"
    #: Removed by ``cancel()``.
    CANCELLED = "cancelled"
    #: A one-shot job whose last attempt failed with no retry left (see ``Scheduler.failed()``).
    FAILED = "failed"


class Misfire(enum.Enum):
    """What to do with occurrences of a recurring job that came due while nothing could run them.

    An occurrence *misfires* when it starts more than the job's ``grace`` seconds after it was
    due: after a stall, a suspended laptop, or a wall-clock jump forward.
    """

    #: Run once now for all the missed occurrences, then continue from the next future time.
    RUN_ONCE = "run_once"
    #: Drop the missed occurrences; continue from the next future time.
    SKIP = "skip"
    #: Run every missed occurrence, oldest first, one at a time (never listed all at once).
    RUN_ALL = "run_all"


class Overlap(enum.Enum):
    """What to do when a recurring job comes due while its previous run is still going."""

    #: Do not start; emit ``JobSkipped`` and wait for the next occurrence.
    SKIP = "skip"
    #: Start as soon as the previous run ends.
    QUEUE = "queue"
    #: Start anyway; runs may overlap.
    ALLOW = "allow"


@dataclass(frozen=True, slots=True)
class JobOptions:
    """The rarely-changed per-job settings, shared by every job that uses the defaults.

    Grouping them keeps a ``Job`` small: a million pending one-shot jobs all point at one
    ``JobOptions`` instead of carrying seven slots each.
    """

    retry: RetryPolicy | None = None
    misfire: Misfire | None = None
    grace_ns: int | None = None
    overlap: Overlap | None = None
    jitter_ns: int = 0
    limiter: TokenBucket | None = None
    executor: str | None = None


DEFAULT_OPTIONS = JobOptions()


class Job:
    """A handle on one scheduled piece of work.

    Attributes:
        func: The callable that runs.
        args: Positional arguments for ``func``.
        kwargs: Keyword arguments for ``func``.
        priority: Lower runs first among jobs due at the same instant.
        runs: How many runs have finished (successfully or not), each attempt one: a
            one-shot that succeeds on its third attempt has ``runs == 3`` and ``failures == 2``.
    """

    __slots__ = (
        "_base",
        "_due",
        "_id",
        "_qkey",
        "_running",
        "_sched",
        "_state",
        "_trigger",
        "_x",
        "args",
        "func",
        "kwargs",
        "priority",
        "runs",
    )

    _sched: JobHost
    _id: str | None
    func: Callable[..., Any]
    _trigger: Recurrence | float | int | datetime
    args: tuple[Any, ...]
    kwargs: dict[str, Any] | None
    priority: int
    _state: JobState
    _due: int | None
    _base: int | None
    _qkey: int | None
    _running: int
    runs: int
    _x: _Extras | None

    def __init__(self) -> None:
        raise TypeError("Job handles are made by Scheduler.schedule(), not directly")

    @property
    def _opts(self) -> JobOptions:
        x = self._x
        return DEFAULT_OPTIONS if x is None else x.opts

    @_opts.setter
    def _opts(self, opts: JobOptions) -> None:
        if opts is not DEFAULT_OPTIONS or self._x is not None:
            self._extras().opts = opts

    @property
    def _sides(self) -> list[Any] | None:
        """Side entries (retries, deferred, held or triggered runs) the job waits on."""
        x = self._x
        return None if x is None else x.sides

    @_sides.setter
    def _sides(self, sides: list[Any] | None) -> None:
        if sides is not None or self._x is not None:
            self._extras().sides = sides

    @property
    def id(self) -> str:
        """The job's unique key in its scheduler.

        A job scheduled without ``id=`` gets a short generated one the first time it is read:
        formatting and indexing ids that nobody looks at was a measurable share of scheduling a
        one-shot job (and ~50 bytes each).
        """
        job_id = self._id
        if job_id is None:
            job_id = self._sched._name_job(self)
        return job_id

    @property
    def attempt(self) -> int:
        """The attempt number of the current or last occurrence: 1 for the first try, 0 before
        any. (Kept in the rarely used extras only when it is not the obvious value.)"""
        x = self._x
        if x is not None and x.attempt is not None:
            return x.attempt
        return 1 if self.runs or self._running else 0

    @property
    def failures(self) -> int:
        """How many attempts have raised."""
        x = self._x
        return 0 if x is None else x.failures

    @property
    def last_error(self) -> BaseException | None:
        """The exception of the most recent failed attempt, or None."""
        x = self._x
        return None if x is None else x.last_error

    def _extras(self) -> _Extras:
        x = self._x
        if x is None:
            x = self._x = _Extras()
        return x

    @property
    def trigger(self) -> Recurrence:
        """The ``Recurrence`` that decides when the job runs.

        For the shorthands ``schedule(fn, 30)`` and ``schedule(fn, aware_datetime)`` this is
        ``After(30)`` or ``At(aware_datetime)``, built on first read: a million pending one-shot
        jobs need not hold a million recurrence objects.
        """
        trigger = self._trigger
        if type(trigger) is float or type(trigger) is int:
            # (schedule() checked it already; this only converts it.)
            trigger = self._trigger = After._checked(trigger, duration_ns("delay", trigger))
        elif type(trigger) is datetime:
            trigger = self._trigger = At(trigger)
        return trigger  # type: ignore[return-value]

    @property
    def name(self) -> str:
        """A human-readable name: the one given, else the function's qualified name."""
        x = self._x
        if x is not None and x.name is not None:
            return x.name
        return getattr(self.func, "__qualname__", None) or repr(self.func)

    @property
    def state(self) -> JobState:
        """The job's current ``JobState``."""
        return self._state

    @property
    def next_run_time(self) -> datetime | None:
        """When the job is next due, as an aware datetime in the scheduler's zone (rounded up to
        the microsecond, as ``Scheduler.next_run_time()``).

        None when it is not queued (paused, finished, cancelled, or waiting on a running
        fixed-delay occurrence).
        """
        return self._sched._job_next_run_time(self)

    def cancel(self) -> bool:
        """Cancel this job. Returns False if it was no longer live."""
        return self._sched.cancel(self)

    def reschedule(self, when: Any) -> Job:
        """Give this job a new ``when`` (same id); its old next occurrence can never fire."""
        return self._sched.reschedule(self, when)

    def pause(self) -> None:
        """Hold this job back until ``resume()``."""
        self._sched.pause(self)

    def resume(self) -> None:
        """Queue a paused job again at the run time it had when paused."""
        self._sched.resume(self)

    def __repr__(self) -> str:
        return f"<Job id={self.id!r} name={self.name!r} state={self._state.value}>"


class JobHost(Protocol):
    """What a ``Job`` handle asks of the scheduler that made it: a small internal protocol, so
    that this module need not import the Scheduler (which imports it)."""

    def _name_job(self, job: Job) -> str: ...

    def _job_next_run_time(self, job: Job) -> datetime | None: ...

    def _to_datetime(self, ns: int, timebase: int) -> datetime: ...

    def cancel(self, job_or_id: Job | str) -> bool: ...

    def reschedule(self, job_or_id: Job | str, when: Any) -> Job: ...

    def pause(self, job_or_id: Job | str) -> None: ...

    def resume(self, job_or_id: Job | str) -> None: ...


class Occ(NamedTuple):
    """One occurrence as the life cycle passes it around; also what ``current_run()`` holds.

    A tuple, so that the hot path builds it with one C call (``new_occ``) and reads it as fast
    as a tuple; its fields are read by name.
    """

    job: Job
    due: int  # due time on its timebase's axis (ns)
    timebase: int  # WALL or MONOTONIC
    attempt: int  # 1 for the first attempt, 2 for the first retry, ...
    started: int  # monotonic ns when it was begun
    prev_delay: float | None  # the retry delay that led to this attempt, if any
    # None for a regular occurrence in memory: ``Run.key`` derives it when asked.
    fire: str | None
    # The job's generation (``_Extras.gen``) when it was taken: it moves when the job is given
    # a new schedule, and an occurrence taken under an older one never starts.
    gen: int


#: ``new_occ(Occ, (job, due, timebase, attempt, started, prev_delay, fire, gen))``: an ``Occ``
#: built by ``tuple.__new__`` itself, one C call, without the Python-level ``__new__`` a
#: NamedTuple has (the life cycle builds one per run).
new_occ = tuple.__new__


def revoked(occ: Occ) -> bool:
    """Whether a taken occurrence must not start after all: its job was cancelled, or given a
    new schedule, since it was taken (in an executor's queue, say). A cancel or a reschedule
    counts until the function starts; a run that has started finishes."""
    job = occ.job
    return job._state is _CANCELLED or (job._x is not None and job._x.gen != occ.gen)


_CANCELLED = JobState.CANCELLED  # (a global read, not an enum attribute, on every run)


class Side:
    """An occurrence attempt kept beside a job's regular schedule.

    Retries, runs deferred by a rate limiter, runs held back by an overlap policy or by
    ``max_concurrent``, and ``trigger()`` calls each get one. A side is always listed in its
    job's ``_sides`` until it starts, so a job with one is never taken for finished; while queued
    it is keyed in the monotonic queue by this object, so it can neither displace nor be
    displaced by the job's next regular occurrence.
    """

    __slots__ = (
        "_qkey",
        "attempt",
        "base",
        "base_tb",
        "claimed",
        "due",
        "hold",
        "job",
        "key",
        "prev_delay",
        "reserved",
        "since",
    )

    def __init__(
        self,
        job: Job,
        base: int,
        base_tb: int,
        attempt: int,
        prev_delay: float | None = None,
        reserved: bool = False,
        key: str | None = None,
    ) -> None:
        self.job = job
        self.base = base  # the occurrence's own due time, in base_tb
        self.base_tb = base_tb
        self.attempt = attempt
        self.prev_delay = prev_delay
        self.reserved = reserved  # a rate-limiter token is already held for this start
        self.due: int | None = None  # monotonic due while queued (kept while paused)
        # While blocked by max_concurrent: the monotonic time it was due, which it is queued
        # at again when a slot frees (so it is taken in due order among what is due then).
        self.since: int | None = None
        # _QUEUED (has a due time), _HELD (waits for the job's running run to end) or
        # _BLOCKED (waits in the store's blocked list for a max_concurrent slot).
        self.hold = _QUEUED
        self._qkey: int | None = None  # its live entry in the monotonic TimerQueue
        # The fire key, when it is not the regular occurrence's (``job_id@due``): a
        # ``trigger()`` run's own key, or the key a retry continues. None: derived from base.
        self.key = key
        # With a durable store: 1 if the store has given this process the run already (a
        # lost run taken over), 2 if the fire is recorded as queued in the store's runs
        # (backfill) rather than in the job's row; 0 otherwise.
        self.claimed = 0


class _Extras:
    """A job's rarely used state (see ``Job._x``)."""

    __slots__ = (
        "attempt",
        "backlog",
        "catchup",
        "failures",
        "gen",
        "last_error",
        "name",
        "opts",
        "resumed",
        "sides",
        "task",
        "triggered",
    )

    def __init__(self) -> None:
        self.opts = DEFAULT_OPTIONS
        self.sides: list[Any] | None = None
        self.attempt: int | None = None  # None: Job.attempt derives it
        self.name: str | None = None
        self.failures = 0
        self.last_error: BaseException | None = None
        self.catchup = False  # in the middle of a Misfire.RUN_ALL catch-up
        # The next regular occurrence was due already when the last run started (two came due
        # together): it waits for that run to end, whatever the overlap policy but ALLOW.
        self.backlog = False
        # The task name a durable store keeps the job under, when it is not its function's
        # first registered name (one function registered under several names): None otherwise.
        self.task: str | None = None
        # Bumped when the job is given a new schedule while occurrences of it are taken (in an
        # executor's queue, say): those never start (Occ.gen).
        self.gen = 0
        # The microsecond (since the epoch) whose fire key the last trigger() took, in memory:
        # a second trigger() in that microsecond or before takes the next one's.
        self.triggered: int | None = None
        # The clock's (wall, monotonic) readings when the job was last resumed: its fires due
        # before then fell in a pause, skipped on purpose, and are not reported as misfires.
        self.resumed: tuple[int, int] | None = None


class Run:
    """One occurrence of a job: what ``current_run()`` and ``Scheduler.step()`` return.

    Attributes:
        job: The job this occurrence belongs to.
        attempt: 1 for the first try of the occurrence, 2 for its first retry, ...
    """

    __slots__ = ("_due", "_key", "_tb", "attempt", "job")

    def __init__(
        self, job: Job, due: int, timebase: int, attempt: int, key: str | None = None
    ) -> None:
        self.job = job
        self._due = due
        self._tb = timebase
        self.attempt = attempt
        self._key = key

    @property
    def key(self) -> str:
        """The occurrence's fire key: ``"<job id>@<due time in UTC, ISO 8601>"``, or for a
        ``trigger()`` run ``"<job id>@trigger-<time of the call in UTC>"``.

        Every attempt of one occurrence has the same key, and every process that computes the
        same fire computes the same key: a job can use it to make its side effects idempotent
        (a durable store records each key once).
        """
        if self._key is None:
            due = self.job._sched._to_datetime(self._due, self._tb).astimezone(timezone.utc)
            self._key = fire_key(self.job.id, due)
        return self._key

    @property
    def scheduled_time(self) -> datetime:
        """When this occurrence was due, as an aware datetime in the scheduler's zone."""
        return self.job._sched._to_datetime(self._due, self._tb)

    def __repr__(self) -> str:
        return (
            f"<Run job={self.job.id!r} scheduled={self.scheduled_time.isoformat()} "
            f"attempt={self.attempt}>"
        )


# The running occurrence, as the life cycle's own record; current_run() builds the Run object
# only when someone asks, so runs that never ask pay nothing for it.
_current: contextvars.ContextVar[Occ | None] = contextvars.ContextVar(
    "duetime_current_run", default=None
)


def current_run() -> Run | None:
    """The occurrence being run in this context, or None outside a job.

    Works in threads, in the inline executor and in asyncio tasks started by duetime.
    """
    cur = _current.get()
    if cur is None:
        return None
    return Run(cur.job, cur.due, cur.timebase, cur.attempt, cur.fire)


def fire_key(job_id: str, due: datetime) -> str:
    """The fire key of job ``job_id``'s occurrence due at ``due`` (an aware UTC datetime)."""
    return f"{job_id}@{due.isoformat()}"


# Fire times' ISO text by epoch nanoseconds (fire_key_at): the fires claimed together mostly
# share a few instants (a cron minute, a backlog), and formatting one costs more than the rest
# of building its key.
_ISO: dict[int, str] = {}
_ISO_MAX = 4096


def fire_key_at(job_id: str, due_ns: int) -> str:
    """``fire_key`` for a fire due at ``due_ns`` (epoch nanoseconds)."""
    iso = _ISO.get(due_ns)
    if iso is None:
        if len(_ISO) >= _ISO_MAX:
            _ISO.clear()
        iso = _ISO[due_ns] = ns_to_datetime(due_ns, timezone.utc).isoformat()
    return f"{job_id}@{iso}"


_new = object.__new__
_SCHEDULED = JobState.SCHEDULED


def new_job(scheduler: JobHost, func: Callable[..., Any], trigger: Any) -> Job:
    """A new job with the defaults: no id yet, no arguments, priority 0, default options,
    nothing queued.

    A function rather than ``Job.__init__`` because it is on the path of every ``schedule()``
    call: building the object this way costs less than half of a class call with an
    ``__init__`` (measured on CPython 3.11), and callers set only what differs.
    """
    job: Job = _new(Job)
    job._sched = scheduler
    # None until someone asks: most jobs never need a string id (see the id property).
    job._id = None
    job.func = func
    # A Recurrence, or the raw delay of the ``schedule(fn, 30)`` shorthand: the After
    # object is built only if someone reads ``trigger`` (see the property).
    job._trigger = trigger
    job.args = ()
    job.kwargs = None
    job.priority = 0
    job._state = _SCHEDULED
    # The regular schedule: _due is when the next regular occurrence's entry is due (jitter
    # included) in the trigger's timebase, None when there is none; _base is its un-jittered
    # time, which is where the recurrence continues from. Retries, rate-limited deferrals and
    # out-of-band triggers are side entries (_sides) so they never disturb it.
    job._due = job._base = None
    # The live entry of the regular occurrence in its TimerQueue (None when not queued).
    job._qkey = None
    job._running = job.runs = 0
    # Rarely used state (non-default options, side entries, a display name, failure
    # bookkeeping), created on first use: a pending one-shot job should not carry slots it
    # will not use. Fourteen slots make a 144-byte object.
    job._x = None
    return job
