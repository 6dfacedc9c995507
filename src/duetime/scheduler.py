"""The Scheduler: the thread-safe facade over the store, the clock and the job life cycle.

A job's occurrences go through one life cycle, whoever drives time:

* ``_begin`` decides, under the lock, whether a taken occurrence runs now (misfire, overlap, rate
  limit, ``max_concurrent``, asking the pure rules in ``duetime.policy``) and queues the next
  regular occurrence of rate-like recurrences;
* ``_call`` runs the job outside the lock, catching what it raises;
* ``_finish_locked`` records the outcome under the lock: retries, dead letters, fixed-delay
  successors, the job's resting state.

``run_pending``, ``step``, ``run_until`` and ``trigger`` call these in this thread; the thread
runner (``duetime.runner``) hands ``_execute`` (``_call`` then ``_finish_locked``) to an executor,
and the asyncio runner (``duetime._aiorunner``) does the same for plain functions and awaits
coroutine functions in a task (its one difference: ``_call`` cannot await). Each step has one
copy, its common case kept short at its top; the stepping loop inlines only the queue pop.

With a durable store the scheduler composes a ``duetime._replica.Replica``, chosen at
construction: the three steps are then the replica's (``_cycle``), which claim each run in the
store before ``_begin`` and settle it after ``_finish_locked``; everything else the durable
store needs (loading, sync, leases, outcomes) is the replica's too.

Changes to jobs, queued occurrences, dead letters and waiting starts go through the store
(``duetime.stores``), mostly by way of ``_queue_regular``, ``_queue_side``, ``_hold_side``,
``_unqueue`` and ``_come_to_rest``. Five hot spots use ``MemoryStore``'s structures directly
instead: the keyword-less ``schedule()`` (push), the common ``cancel()``, the stepping loop's pop,
``_begin``'s common case (indexing an anonymous job it took) and ``_finish_locked``'s (dropping
it). A durable store will need them to take the general path (docs/decisions.md).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import random
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta, tzinfo
from types import AsyncGeneratorType, CoroutineType, GeneratorType
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from duetime import _durable, _foreign, policy
from duetime._aiorunner import AsyncRunner, is_coroutine_function
from duetime._awaiting import await_result as _await
from duetime._awaiting import is_generator_function
from duetime._dead import FailedJob
from duetime._dead_letters import DeadLetters
from duetime._durable import MissingTask
from duetime._engine import Cycle, Engine
from duetime._manual import ManualFires
from duetime._options import (
    Options,
    check_call,
    check_clock,
    check_executors,
    check_names,
    check_priority,
    check_settings,
    check_store,
    lease_ns,
    timebase_of,
)
from duetime._registry import TaskRegistry
from duetime._replica import Replica
from duetime._service import Service
from duetime._stepping import Stepping
from duetime._timers import (
    DUE_SHIFT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    PRIORITY_ZERO_BITS,
)
from duetime._validate import (
    DURATION_MOST_S,
    EPOCH_MOST_NS,
    NS_PER_SECOND,
    duration_ns,
    integer,
    ns_to_datetime,
    zone,
)
from duetime.clock import (
    Clock,
    FakeClock,
    NsClock,
    SecondsClock,
    SteppableClock,
    WallAxis,
)
from duetime.errors import (
    ConflictingIdError,
    InvalidArgument,
    JobLookupError,
    SchedulerShutdownError,
    StoreError,
    exception_message,
)
from duetime.events import (
    Event,
    JobAdded,
    JobCancelled,
    JobDead,
    JobDeferred,
    JobFailed,
    JobMissed,
    JobPaused,
    JobRescheduled,
    JobResumed,
    JobSkipped,
    JobStarted,
    JobSucceeded,
    Listener,
    dispatch,
    log_event,
)
from duetime.job import (
    _BLOCKED,
    _HELD,
    _QUEUED,
    DEFAULT_OPTIONS,
    Job,
    JobOptions,
    JobState,
    Misfire,
    Occ,
    Overlap,
    Run,
    _current,
    fire_key_at,
    new_job,
    new_occ,
    revoked,
)
from duetime.job import Side as _Side
from duetime.policy import Verdict
from duetime.ratelimit import TokenBucket
from duetime.recurrence import MONOTONIC, Env, Recurrence
from duetime.retry import NoRetry, RetryPolicy
from duetime.runner import RunnerLike
from duetime.stats import Stats, StatsRecorder
from duetime.stores.memory import MemoryStore
from duetime.stores.postgres import PostgresStore
from duetime.stores.records import (
    ENDED_STATES,
    LEASE_MOST_NS,
    RUN_STATES,
    RunRecord,
    UnreadableRow,
)
from duetime.stores.sqlite import SQLiteStore
from duetime.stores.timebase import to_utc

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pragma: no cover
    # So that typing.get_type_hints() resolves schedule()'s annotations on 3.10 too, where
    # typing_extensions is not a dependency: only type checkers need it there.
    with contextlib.suppress(ImportError):
        from typing_extensions import Unpack

__all__ = ["FailedJob", "ScheduleOptions", "Scheduler"]


def _nothing() -> None:
    """What the runners' durable-only hooks do without a durable store."""


logger = logging.getLogger("duetime")
_log_enabled = logger.isEnabledFor  # (bound once: schedule()'s quick path asks it per call)

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R", bound=RunnerLike)


class ScheduleOptions(TypedDict, total=False):
    """The keyword options of ``Scheduler.schedule`` (see there), for type checkers.

    A wrapper can pass them through with ``**options: Unpack[ScheduleOptions]``.
    """

    args: tuple[Any, ...] | list[Any]
    kwargs: dict[str, Any] | None
    id: str | None
    name: str | None
    priority: int
    retry: RetryPolicy | None
    misfire: Misfire | None
    grace: float | int | timedelta | None
    overlap: Overlap | None
    jitter: float | int | timedelta | None
    limiter: TokenBucket | None
    executor: str | None
    replace: bool
    paused: bool


_OPTION_NAMES = ScheduleOptions.__optional_keys__

_SCHEDULER_IDS = itertools.count(1)
_RUNNING = JobState.RUNNING
_COMPLETED = JobState.COMPLETED
_CANCELLED = JobState.CANCELLED
_SCHEDULED = JobState.SCHEDULED
# A store's name of an ended state -> the state (ENDED_STATES; a dict look, not an Enum call:
# a poll may drop thousands of jobs other workers finished).
_ENDED_STATE = {state: JobState(state) for state in ENDED_STATES}
_ENDED = frozenset((JobState.COMPLETED, JobState.CANCELLED, JobState.FAILED))
# The delays schedule() takes on its fast path; the rest go through duration_ns, which names
# what is wrong (negative, NaN, more than a thousand years).
_FAR = DURATION_MOST_S
# The sequence number's bits in a queue entry (duetime._timers).
_SEQ_MASK = (1 << 48) - 1
#: ``schedule()``'s default for ``when``, so that leaving it out gets a message saying how.
_NO_WHEN: Any = object()
# (A default only so that schedule(func=f, ...) reaches a message of duetime's, not Python's
# "missing 1 required positional argument: 'func'" beside the func it was given.)
_NO_FUNC: Any = object()


# Types of the raw shorthand values a Job may hold in place of an After or At (Job.trigger).
_SHORTHAND = (float, int, datetime)


def _held_regular(side: _Side) -> bool:
    """Whether ``side`` is a regular fire held back by ``Overlap.QUEUE`` (the one later regular
    fires coalesce into), not a retry, a ``trigger()`` run or a run taken over from a lost
    worker: each of those is a fire of its own, and one coalesced into it would never run."""
    return side.hold == _HELD and side.key is None and side.attempt == 1 and not side.claimed


_LEASE_MOST = LEASE_MOST_NS


class Scheduler:
    """Runs callables at the right time: by hand on a FakeClock, or on its own thread.

    Args:
        clock: Where time comes from. Default: ``SystemClock()``.
        tz: Zone for displayed times and for cron strings given as ``when``: an IANA name or
            a tzinfo. Default ``"UTC"`` (a server's local zone is an accident of deployment;
            name the zone you mean).
        rng: Random source for jitter, Poisson gaps and retry jitter. Pass
            ``random.Random(seed)`` for reproducible runs.
        retry: Default ``RetryPolicy`` for jobs that give none. Default ``NoRetry()``.
        misfire: Default ``Misfire`` policy for recurring jobs. Default ``Misfire.RUN_ONCE``.
        grace: Default misfire grace in seconds: an occurrence starting later than this after
            its due time has misfired. Default 1 second.
        overlap: Default ``Overlap`` policy. Default ``Overlap.SKIP``.
        executor: For the runner thread: ``"inline"``, a ``concurrent.futures.Executor``, or
            None for a thread pool of 8 workers.
        executors: Named executors that jobs select with ``schedule(..., executor=name)``.
            The name ``"default"`` without ``executor=`` is refused: it is APScheduler's
            spelling of the default executor, which here is ``executor=``.
        max_concurrent: Upper bound on occurrences running at once across all jobs (None: no
            bound beyond the executors').
        wall_check_interval: Longest the runner sleeps, in seconds, while wall-clock jobs are
            pending, so that a wall-clock jump is noticed. Default 1 second.
        store: Where jobs are kept: a new ``MemoryStore`` (the default: this process's
            memory, nothing written anywhere), a ``SQLiteStore``, or a URL for one
            (``"sqlite:///jobs.db"``). See docs/durability.md.
        lease: With a durable store: seconds a claimed run stays this process's without a
            heartbeat; a run whose lease runs out (its process died or stalled) is taken over
            by another process, its attempt raised. Renewed at least three times per lease
            while the run goes on. Default 30 seconds.
        import_tasks: With a durable store: module prefixes (``["myapp.tasks"]``) under which a
            stored ``"module:qualname"`` task may be imported; any other task runs only if this
            process registered it (a row in a database is never reason enough to run code).
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        tz: str | tzinfo = "UTC",
        rng: random.Random | None = None,
        retry: RetryPolicy | None = None,
        misfire: Misfire = Misfire.RUN_ONCE,
        grace: float | int | timedelta = 1.0,
        overlap: Overlap = Overlap.SKIP,
        executor: Any = None,
        executors: dict[str, Any] | None = None,
        max_concurrent: int | None = None,
        wall_check_interval: float | int | timedelta = 1.0,
        store: MemoryStore | str | None = None,
        lease: float | int | timedelta = 30.0,
        import_tasks: Sequence[str] = (),
    ) -> None:
        clock = check_clock(clock)
        store = check_store(store)
        if store.owner is not None:
            self._take_over_store(store)
        rng = check_settings(rng, retry, misfire, overlap, max_concurrent, import_tasks)
        self._import_tasks = tuple(import_tasks)
        self._lease = lease_ns(lease)
        self._grace = duration_ns("grace", grace)
        self._wall_check = duration_ns("wall_check_interval", wall_check_interval, allow_zero=False)
        self._tz = zone("tz", tz)
        self._user_clock = clock
        inner: NsClock = clock if isinstance(clock, NsClock) else SecondsClock(clock)
        # A durable store keeps UTC instants: this scheduler then measures elapsed time on the
        # wall clock too (see duetime.clock.WallAxis and docs/durability.md).
        if isinstance(store, (SQLiteStore, PostgresStore)):
            inner = WallAxis(inner)
        self._clock = clock = inner
        # An exact FakeClock (not a subclass, which may override its readings) is read through
        # its integers on the hottest paths: a method call there costs as much as the read.
        self._fake = type(clock) is FakeClock
        self._rng = rng
        self._env = Env(clock, rng, self._tz)
        self._retry: RetryPolicy = retry if retry is not None else NoRetry()
        self._misfire = misfire
        self._overlap = overlap
        self._max_concurrent = max_concurrent

        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        # Jobs, their queued occurrences, dead letters and starts waiting for a slot: every
        # change to them goes through the store (see duetime.stores).
        self._store = store
        self._listeners: list[tuple[Listener, tuple[type[Event], ...]]] = []
        # Task names (register, @task) -> functions.
        self._tasks: dict[str, Callable[..., Any]] = {}
        # Default ids: a per-scheduler prefix plus a counter. Unique within the process (and,
        # with the random part, across restarts) at ~0.1 µs, where uuid4() costs ~3 µs.
        self._id_prefix = f"{next(_SCHEDULER_IDS):x}{os.urandom(3).hex()}-"
        self._id_counter = itertools.count(1)
        self._running_total = 0
        self._shutdown = False
        self._stats = StatsRecorder()
        # Events raised while the lock is held wait here until the lock is released.
        self._pending_events: list[Event] = []
        self._watch = False  # _observed(), as last read
        self._runner: RunnerLike | None = None
        # Checked here, not when start() builds the runner: a typo should fail where it is
        # written, not minutes later in a deployment.
        self._executors_spec = check_executors(executor, executors)
        # (Taken only now: a constructor that fails leaves the store free for the next try.)
        store.owner = self
        self._opts = Options(self)  # what schedule()'s arguments mean
        self._registry = TaskRegistry(self)  # register, task, tasks
        self._stepping = Stepping(self)  # run_pending, step, run_until, run_for
        self._dead_letters = DeadLetters(self)  # failed, retry_failed, discard_failed
        self._manual = ManualFires(self)  # trigger, backfill
        self._service = Service(self)  # start, shutdown, wait_idle
        # The life cycle's three steps (begin, call, finish): the replica's, which claim and
        # settle each run in the store, when the store is durable; chosen here, once.
        self._replica: Replica | None = None
        self._cycle = Cycle(self._begin, self._call, self._finish_locked)
        if isinstance(store, (SQLiteStore, PostgresStore)):
            self._open_replica(store)
        self._engine = self._make_engine(executor)

    def _open_replica(self, store: SQLiteStore | PostgresStore) -> None:
        """Compose the replica of a durable store and take its life-cycle steps, then load the
        store (at construction). A store that fails to open is closed, and left free if it
        loaded nothing."""
        durable = self._replica = Replica(self, store)
        self._cycle = Cycle(durable.begin, durable.call, durable.finish)
        try:
            durable.open()
        except BaseException:
            if store.is_open:
                store.close()
            if not store.count() and not store.dead:
                # (Only a store that loaded nothing is free: loaded jobs belong to this
                # scheduler, which is gone, and would come with the store.)
                store.owner = None
            raise

    def _make_engine(self, executor: Any) -> Engine:
        """What the runners may use (the package-internal interface; see duetime._engine)."""
        replica = self._replica
        store = self._store
        return Engine(
            lock=self._lock,
            cond=self._cond,
            clock=self._clock,
            wall_check=self._wall_check,
            executor=executor,
            executors=self._executors_spec,
            head=store.head,
            wall_queued=store.wall_queued,
            pop_due=self._pop_due,
            begin=self._cycle.begin,
            begin_due=replica.begin_due if replica is not None else None,
            flush=replica.outcomes.flush if replica is not None else _nothing,
            execute=self._execute_contained,
            execute_here=self._execute,
            finish=self._finish_outcome,
            abandon=self._abandon,
            abandon_all=self._abandon_all,
            emit_started=self._emit_started,
            emit=self._emit,
            drain_events=self._drain_events,
            idle=self._idle_locked,
            now=self._now_dt,
            running=lambda: self._running_total,
            poll=min(replica.poll_ns, self._lease // 3) if replica is not None else 0,
            sync=replica.sync_locked if replica is not None else _nothing,
            renew=replica.renew_locked if replica is not None else _nothing,
            may_start=replica.may_start if replica is not None else None,
        )

    @staticmethod
    def _take_over_store(store: Any) -> None:
        """Take a store another Scheduler owns, if that one has shut down and closed it (a
        restart on the same store object): the old scheduler keeps what it held, on a copy,
        so its jobs stay its own. Otherwise refuse."""
        owner: Any = store.owner
        why = ""
        if getattr(store, "renewable", False) and getattr(owner, "_shutdown", False):
            # (Under the old scheduler's lock: its runs() may be reading the closed store.)
            with owner._lock:
                if not store.is_open:
                    owner._store = store.renew()
                    return
            why = (
                " (it shut down without closing the store: shutdown(wait=False), or from "
                "inside one of its jobs, leaves it open until the runs still going have "
                "ended; shut it down with wait=True, or open a new store on the same file "
                "or database)"
            )
        raise InvalidArgument(
            f"store must not be in use: a store belongs to one Scheduler, and {store!r} "
            f"belongs to {owner!r}{why}"
        )

    # -- properties ---------------------------------------------------------------------------

    @property
    def clock(self) -> Clock:
        """The scheduler's clock."""
        return self._user_clock

    @property
    def store(self) -> MemoryStore:
        """The store that keeps this scheduler's jobs."""
        return self._store

    @property
    def tz(self) -> tzinfo:
        """The scheduler's zone (for displayed times and cron strings)."""
        return self._tz

    @property
    def rng(self) -> random.Random:
        """The scheduler's random source."""
        return self._rng

    def __repr__(self) -> str:
        return f"<Scheduler jobs={len(self)} clock={self._user_clock!r} tz={self._tz}>"

    # -- scheduling -----------------------------------------------------------------------------

    def schedule(
        self,
        func: Callable[..., Any] | str = _NO_FUNC,
        /,
        when: Any = _NO_WHEN,
        *misplaced: Any,
        **options: Unpack[ScheduleOptions],
    ) -> Job:
        """Schedule ``func(*args, **kwargs)`` to run ``when``.

        Args:
            func: Any callable (a coroutine function runs to completion; on ``AsyncScheduler``,
                as a task on its loop), or the name of a task given to ``register``/``task``.
                With a durable store, the name of a task this process has not registered
                is stored for the processes that have (it stays pending here).
            when: A ``Recurrence`` (``At``, ``After``, ``FixedRate``, ``FixedDelay``, ``Cron``,
                ``Poisson``), an aware datetime (= ``At``), a number of seconds or a timedelta
                (= ``After``), or a cron string (= ``Cron`` in the scheduler's zone).
            **options: Any of these keywords:

                - ``args``: positional arguments for ``func`` (a tuple or list).
                - ``kwargs``: keyword arguments for ``func`` (a dict).
                - ``id``: unique key (str); default a short generated one.
                - ``name``: display name; default ``func.__qualname__``.
                - ``priority``: lower runs first among occurrences due at the same instant;
                  a signed 32-bit int (-2**31 to 2**31 - 1). Default 0.
                - ``retry``: ``RetryPolicy`` for failed attempts; default the scheduler's.
                - ``misfire``: ``Misfire`` policy for late occurrences of a recurring job.
                - ``grace``: seconds (or a timedelta) an occurrence may start late before it
                  counts as misfired.
                - ``overlap``: ``Overlap`` policy for a recurring job whose previous run is
                  still going.
                - ``jitter``: delay each occurrence by ``uniform(0, jitter)`` seconds (never
                  accumulating).
                - ``limiter``: a ``TokenBucket`` the job's starts must take a token from.
                - ``executor``: name of an executor given to ``Scheduler(executors=...)`` (with a
                  durable store, possibly only to the other processes': it runs on theirs).
                - ``replace``: if a job with ``id`` is live, give it these parameters (a
                  reschedule) instead of raising ``ConflictingIdError``. Default False.
                - ``paused``: add the job paused; ``resume()`` queues it. Default False.

        Returns:
            The ``Job`` handle.

        Raises:
            TypeError: ``func`` is not callable, a keyword is unknown or an argument has the
                wrong type.
            InvalidArgument: An argument has a bad value (the message names it).
            ConflictingIdError: ``id`` is live and ``replace`` is False.
            SchedulerShutdownError: The scheduler has been shut down.
        """
        # The keywords are gathered rather than declared because a call that passes none, the
        # bulk of a simulation's scheduling, then skips binding fifteen defaults and checking
        # each: an anonymous one-shot delay is created and queued right here. Anything else
        # goes through _schedule, which validates every option by name.
        if options or misplaced or not callable(func):
            if misplaced:
                raise TypeError(
                    f"schedule() takes the job's arguments as args=(...), not positionally: "
                    f"write schedule(func, when, args={misplaced!r}) "
                    f"(got {len(misplaced)} extra positional argument(s))"
                )
            if "func" in options or func is _NO_FUNC:
                raise TypeError(
                    "schedule() takes the function first, positionally: "
                    "schedule(func, when, args=(...)), e.g. schedule(send_report, 30)"
                    + (
                        f" (got func={options['func']!r} as a keyword)"  # type: ignore[typeddict-item]
                        if "func" in options
                        else " (got no function)"
                    )
                )
            for keyword in options:
                if keyword not in _OPTION_NAMES:
                    raise TypeError(
                        f"Scheduler.schedule() got an unexpected keyword argument "
                        f"{keyword!r}{_foreign.keyword_hint(keyword)}"
                    )
            return self._schedule(func, when, **options)
        cls = type(when)
        clock = self._clock
        if cls is float and 0 <= when <= _FAR:  # also False for NaN
            first = round(when * NS_PER_SECOND) + (
                clock._mono if self._fake else clock.monotonic_ns()  # type: ignore[attr-defined]
            )
        elif cls is int and 0 <= when <= _FAR:
            first = when * NS_PER_SECOND + (
                clock._mono if self._fake else clock.monotonic_ns()  # type: ignore[attr-defined]
            )
        else:
            return self._schedule(func, when)
        lock = self._lock
        lock.acquire()
        try:
            if (
                self._shutdown
                or self._runner is not None
                or self._listeners
                or self._replica is not None
                or _log_enabled(logging.DEBUG)  # (events go to the log: _observed)
            ):
                plain = False  # handed to _schedule below, once the lock is released:
                # its listeners must not run with the lock held.
            else:
                plain = True
                # Such a job is found through its queue entry, so it needs no index entry
                # (the store's anonymous count counts it).
                job = new_job(self, func, when)
                job._base = job._due = first
                # TimerQueue.push for a key not yet queued, at priority 0, inlined: the call
                # was ~4% of an event (tests/test_timers.py checks both make the same entry).
                store = self._store
                q = store.queues[MONOTONIC]
                job._qkey = entry = (first << DUE_SHIFT) + PRIORITY_ZERO_BITS + next(q._counter)
                q._live[entry] = job
                q._new.append(entry)
                store.anonymous += 1
        finally:
            lock.release()
        if plain:
            return job
        return self._schedule(func, when)

    def _schedule(
        self,
        func: Callable[..., Any] | str,
        when: Any,
        /,
        *,
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: dict[str, Any] | None = None,
        id: str | None = None,
        name: str | None = None,
        priority: int = 0,
        retry: RetryPolicy | None = None,
        misfire: Misfire | None = None,
        grace: float | int | timedelta | None = None,
        overlap: Overlap | None = None,
        jitter: float | int | timedelta | None = None,
        limiter: TokenBucket | None = None,
        executor: str | None = None,
        replace: bool = False,
        paused: bool = False,
    ) -> Job:
        """``schedule`` with its options bound: the general path, which validates each."""
        # Everything is checked and computed before the lock is taken and anything changes:
        # bad input can never leave the scheduler half-updated.
        task_name = None
        if type(func) is str:
            task_name = func
            func = self._registry.task_named(func)
        elif not callable(func):
            raise TypeError(f"func must be callable or a registered task name, got {func!r}")
        if when is _NO_WHEN:
            raise TypeError(
                "schedule() needs when: schedule(func, when), e.g. schedule(func, 30) for "
                "30 seconds from now or schedule(func, '0 9 * * *') for 09:00 every day"
            )
        trigger, first, later = self._opts.when(when)
        # A plain delay: queued below without _add's general placement when nothing else
        # stands in the way (no options, no id, not paused, no runner to wake).
        plain = type(trigger) is float or type(trigger) is int
        args, kwargs = check_call(args, kwargs, replace, paused)
        if self._replica is not None:
            ref, args_json = self._replica.check_storable(
                func, trigger, tuple(args), kwargs, id, name, limiter, task_name
            )
        check_names(id, name)
        if type(priority) is not int or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
            priority = check_priority(priority)
        if (
            retry is None
            and misfire is None
            and grace is None
            and overlap is None
            and jitter is None
            and limiter is None
            and executor is None
        ):
            opts = DEFAULT_OPTIONS
        else:
            opts = self._opts.options(retry, misfire, grace, overlap, jitter, limiter, executor)
            plain = False
        if replace and id is None:
            # (Without an id there is nothing to replace: each call makes a new job. Warned,
            # not refused: the call does what it says for a job that is new.)
            logger.warning(
                "replace=True without id= replaces nothing: each call adds a new job; give "
                "the job an id, e.g. schedule(func, when, id='nightly', replace=True)"
            )

        with self._lock:
            if self._shutdown:
                raise SchedulerShutdownError("schedule")
            if self._replica is not None and not self._replica.store.batch_open:
                # (Inside a batch this process holds the write lock: nobody else can change.)
                self._replica.sync_locked(full=False)
            existing = None if id is None else self._store.get(id)
            if existing is not None:
                if not replace:
                    raise ConflictingIdError(id)
                if self._replica is not None and self._replica.declared_again(
                    existing, func, trigger, args, kwargs, name, priority, opts, ref, paused
                ):
                    if type(existing.func) is MissingTask and type(func) is not MissingTask:
                        # Loaded before its function was known here (a "module:qualname" this
                        # process does not import on the store's word): it is now.
                        self._tasks.setdefault(ref, func)
                        self._replica.unpark()
                    return existing
                job = existing  # the same handle gets the new parameters
            else:
                job = new_job(self, func, trigger)
            if later:
                first = self._opts.first(trigger)
            before = (
                self._replica.row(existing)
                if self._replica is not None and existing is not None
                else None
            )
            self._set_params(job, func, args, kwargs, name, priority, opts)
            if type(func) is MissingTask and self._replica is not None:
                self._replica.unresolved.setdefault(func.task, []).append(job)
            if existing is not None:
                if self._replica is not None:
                    self._replica.name_task(job, ref)
                replaced = self._retarget(job, trigger, first, paused)
                if before is not None and self._replica is not None:
                    self._replica.save(job, before, drop_retries=True)
                if replaced is None:
                    return job
                event: Event = replaced
            elif (
                plain
                and id is None
                and not paused
                and self._runner is None
                and self._replica is None
            ):
                # An anonymous delay with default options but arguments, a name or a priority
                # (schedule() queues the keyword-less ones itself), queued without _add's
                # general placement. Such a job is found through its queue entry, so it needs
                # no index entry (the store's anonymous count).
                job._base = job._due = first
                self._store.add(job, None)
                self._store.push(MONOTONIC, job, first, priority)  # type: ignore[arg-type]
                if not self._observed():
                    return job
                event = JobAdded(job.id, self._now_dt(), self._job_next_run_time(job))
            elif self._replica is None:
                self._add(job, id, first, paused)
                if not self._observed():
                    return job
                event = JobAdded(job.id, self._now_dt(), self._job_next_run_time(job))
            else:
                unnamed = id is None
                if id is None:  # a stored job needs its id now
                    id = self._id_prefix + format(next(self._id_counter), "x")
                added = self._add_stored(
                    self._replica, job, id, first, paused, ref, args_json, unnamed, replace
                )
                if not added:
                    if not self._replica.load_live(id):
                        raise ConflictingIdError(
                            id,
                            "another process added a job under it at the same moment, and "
                            "it could not be read back to be replaced (the store failed, "
                            "or the job ended meanwhile): try again",
                        ) from None
                    return self._schedule(
                        func if task_name is None else task_name,
                        when,
                        args=args,
                        kwargs=kwargs,
                        id=id,
                        name=name,
                        priority=priority,
                        retry=retry,
                        misfire=misfire,
                        grace=grace,
                        overlap=overlap,
                        jitter=jitter,
                        limiter=limiter,
                        executor=executor,
                        replace=True,
                        paused=paused,
                    )
                if not self._observed():
                    return job
                event = JobAdded(job.id, self._now_dt(), self._job_next_run_time(job))
        self._emit([event])
        return job

    def _add_stored(
        self,
        replica: Replica,
        job: Job,
        id: str,
        first: int | None,
        paused: bool,
        ref: str,
        args_json: str,
        unnamed: bool,
        replace: bool,
    ) -> bool:
        """Add a new job on a durable store and insert its row (lock held). False if another
        process inserted a job under ``id`` since this one looked (copies of an application
        declaring the same job at start-up) and ``replace`` asks to take that job in and give
        it these parameters; without ``replace`` that is a ``ConflictingIdError``."""
        self._add(job, id, first, paused)
        if unnamed:
            replica.warn_twin(job, ref, args_json)
        try:
            replica.insert(job, ref, args_json)
        except ConflictingIdError:
            if not replace:
                raise
            return False
        return True

    def _add(self, job: Job, id: str | None, first: int | None, paused: bool) -> None:
        """Index and queue a new job (lock held)."""
        if id is not None:
            job._id = id
        self._store.add(job, id)
        self._place_first(job, first, paused)
        if id is None and job._state is JobState.PAUSED:
            # An anonymous job is counted as queued; placed paused, it is loose instead.
            # (Placement may also have ended it at once: forget() then uncounted it.)
            self._store.loosen(job)

    @staticmethod
    def _set_params(
        job: Job,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None,
        name: str | None,
        priority: int,
        opts: JobOptions,
    ) -> None:
        """Give a new job, or one ``replace=True`` reuses, what ``schedule()`` set besides its
        recurrence (lock held)."""
        job.func = func
        job.args = args
        job.kwargs = kwargs
        if name is not None or job._x is not None:
            job._extras().name = name
        job.priority = priority
        job._opts = opts

    def _retarget(
        self,
        job: Job,
        trigger: Recurrence | float | int | datetime,
        first: int | None,
        paused: bool,
    ) -> Event | None:
        """Give a live job a new recurrence (lock held). Its pending occurrences go stale and
        can never fire; a run in progress finishes. Returns the event to emit, if anyone
        listens."""
        previous = self._job_next_run_time(job) if self._observed() else None
        self._unqueue(job)
        if job._running:
            # Occurrences taken but not started yet (in an executor's queue) were the old
            # schedule's: they never start (_call). A run going on finishes.
            job._extras().gen += 1
        if job._x is not None:
            # A RUN_ALL catch-up, or an occurrence due before the run going now started, was
            # the old recurrence's: the new one's fires meet that run as any other fire does.
            job._x.catchup = job._x.backlog = False
        job._trigger = trigger
        if not paused and job._state is not JobState.RUNNING:
            job._state = JobState.SCHEDULED
        self._place_first(job, first, paused)
        if not self._observed():
            return None
        return JobRescheduled(job.id, self._now_dt(), previous, self._job_next_run_time(job))

    # -- tasks ----------------------------------------------------------------------------------

    def register(self, name: str, func: Callable[..., Any]) -> None:
        """Register ``func`` under a task name, so that jobs can name it: ``schedule(name,
        when)``. A durable store records a job's task by this name (a store holds data, never
        code: only tasks registered in a process run there).

        Raises:
            TypeError: ``name`` is not a str or ``func`` is not callable.
            InvalidArgument: ``name`` is empty, or taken by another function.
        """
        return self._registry.register(name, func)

    def task(self, name: str) -> Callable[[F], F]:
        """Decorator form of ``register``: ``@s.task("send_trial_warning")``.

        The function is registered at decoration time and returned unchanged.
        """
        return self._registry.task(name)

    def tasks(self) -> dict[str, Callable[..., Any]]:
        """The registered tasks, by name."""
        return self._registry.tasks()

    def scheduled(
        self, when: Any = _NO_WHEN, **options: Unpack[ScheduleOptions]
    ) -> Callable[[F], F]:
        """Decorator form of ``schedule``: ``@s.scheduled(Cron("*/15 * * * *"))`` (or
        ``@s.scheduled(when=...)``).

        The function is scheduled at decoration time and returned unchanged.
        """
        if when is _NO_WHEN or (callable(when) and not isinstance(when, type)):
            # (A callable ``when`` is @s.scheduled without its parentheses: the function came
            # as ``when``, and would have been replaced by the decorator, scheduled never. A
            # class is not: @s.scheduled(FixedRate) gets _recurrence's message.)
            got = "" if when is _NO_WHEN else f", got the function {when!r} as when"
            raise TypeError(
                "scheduled() needs when: @s.scheduled(when), e.g. @s.scheduled('0 9 * * *') "
                f"for 09:00 every day or @s.scheduled(FixedRate(minutes=5)){got}"
            )

        def decorate(func: F) -> F:
            self.schedule(func, when, **options)
            return func

        return decorate

    # -- queue bookkeeping (the one place a job's next run changes) ---------------------------

    def _place_first(self, job: Job, first: int | None, paused: bool) -> None:
        if paused:
            job._state = JobState.PAUSED
            job._base = job._due = first
            return
        if first is None:
            job._base = job._due = None
            self._come_to_rest(job)
            return
        self._queue_regular(job, first)

    def _queue_regular(self, job: Job, base: int) -> None:
        """Make ``base`` (+ jitter) the job's next regular occurrence and queue it (unless the
        job is paused: then it is only recorded, and ``resume`` queues it)."""
        job._base = base
        job._due = policy.jittered(base, job._opts.jitter_ns, self._rng)
        if job._state is not JobState.PAUSED:
            self._push_regular(job)

    def _push_regular(self, job: Job) -> None:
        assert job._due is not None
        self._push(timebase_of(job._trigger), job, job._due, job.priority)

    def _queue_side(self, side: _Side, due_mono: int) -> None:
        """Queue a side occurrence at ``due_mono`` (only recorded while the job is paused)."""
        side.due = due_mono
        side.hold = _QUEUED
        self._attach_side(side)
        if side.job._state is not JobState.PAUSED:
            self._push_side(side)

    def _push_side(self, side: _Side) -> None:
        assert side.due is not None
        self._push(MONOTONIC, side, side.due, side.job.priority)

    def _push(self, tb: int, key: Job | _Side, due: int, priority: int) -> None:
        """Put an entry in a queue, waking the runner if it becomes the new head."""
        if self._runner is not None:
            self._runner.note_push(tb, due)
        self._store.push(tb, key, due, priority)

    def _hold_side(self, side: _Side, hold: int) -> None:
        """Keep a side unqueued until the job's run ends (_HELD) or a slot frees (_BLOCKED)."""
        side.due = None
        side.hold = hold
        self._attach_side(side)
        if hold == _BLOCKED:
            self._store.block(side)

    def _drop_side(self, side: _Side) -> None:
        """Take a side out of the queue and of its job's ``_sides`` (lock held)."""
        job = side.job
        self._store.unqueue(MONOTONIC, side)
        assert job._sides is not None
        job._sides.remove(side)
        if not job._sides:
            job._sides = None

    @staticmethod
    def _attach_side(side: _Side) -> None:
        """List a side in its job's ``_sides`` (once): pending work the job must wait for."""
        job = side.job
        if job._sides is None:
            job._sides = [side]
        elif side not in job._sides:
            job._sides.append(side)

    def _release_held(self, job: Job) -> None:
        """The job's last run ended: queue what waited for it, now: its sides, and the next
        occurrence of a catch-up (``_begin``)."""
        if job._running or job._state is JobState.CANCELLED:
            return
        if job._due is not None and job._qkey is None and job._state is not JobState.PAUSED:
            self._push_regular(job)
        if job._sides:
            now = self._clock.monotonic_ns()
            for side in list(job._sides):
                if side.hold == _HELD:
                    # At the time it was due, as a blocked start is (_release_blocked): among
                    # what is due now it goes in due order, before the job's later fires (a
                    # RUN_ALL backlog, due already), which would otherwise pass it for ever.
                    since = side.since
                    side.since = None
                    self._queue_side(side, now if since is None else min(since, now))

    def _release_blocked(self) -> None:
        """Queue blocked starts, oldest first, while ``max_concurrent`` leaves room."""
        if self._max_concurrent is None:
            return
        room = self._max_concurrent - self._running_total
        now = self._clock.monotonic_ns()
        while room > 0:
            side = self._store.next_blocked()
            if side is None:
                return
            # At the time it was due: among what is due now (a RUN_ALL backlog, queued at its
            # own past due times; a run held back, queued now), it goes in due order.
            since = side.since
            side.since = None
            self._queue_side(side, now if since is None else min(since, now))
            room -= 1

    def _unqueue(self, job: Job) -> None:
        """Remove every pending entry of ``job`` (regular and side) and forget them."""
        if job._due is not None:
            self._store.unqueue(timebase_of(job._trigger), job)
            job._due = job._base = None
            self._store.loosen(job)
        if job._sides:
            for side in job._sides:
                self._store.unqueue(MONOTONIC, side)
                if side.hold == _BLOCKED:
                    self._store.unblock(side)
        job._sides = None

    def _come_to_rest(self, job: Job, failed: bool = False) -> None:
        """Give a job whose pending work changed its resting state; end it if none is left.

        A paused job stays paused while it has anything pending, and ends like any other job
        when it has nothing left (a paused one-shot whose run finished).
        """
        new = policy.resting_state(
            job._state,
            running=job._running,
            pending=job._due is not None or bool(job._sides),
            failed=failed,
        )
        if new is not None:
            job._state = new
            if new in _ENDED:
                self._store.forget(job)

    # -- management -----------------------------------------------------------------------------

    def _lookup(self, job_or_id: Job | str) -> Job:
        if self._replica is not None:
            self._replica.sync_locked(full=False)
        if isinstance(job_or_id, Job):
            if job_or_id._id is None:
                if job_or_id._sched is self and job_or_id._state not in _ENDED:
                    return job_or_id
                raise JobLookupError(job_or_id.id)
            job = self._store.get(job_or_id._id)
            if job is not job_or_id:
                raise JobLookupError(job_or_id.id)
            return job
        if not isinstance(job_or_id, str):
            raise TypeError(f"job_or_id must be a Job or a job id (str), got {job_or_id!r}")
        job = self._store.get(job_or_id)
        if job is None:
            raise JobLookupError(job_or_id)
        return job

    def get(self, id: str) -> Job | None:
        """The live job with this id, or None."""
        if not isinstance(id, str):
            raise TypeError(f"id must be a str, got {id!r}")
        if self._replica is not None:
            self._replica.refresh()
        return self._store.get(id)

    def __contains__(self, item: object) -> bool:
        if self._replica is not None:
            self._replica.refresh()
        if isinstance(item, Job):
            if item._id is None:
                return item._sched is self and item._state not in _ENDED
            return self._store.contains(item)
        return isinstance(item, str) and self._store.get(item) is not None

    def __len__(self) -> int:
        """Number of live jobs (scheduled, running or paused)."""
        if self._replica is not None:
            self._replica.refresh()
        return self._store.count()

    def cancel(self, job_or_id: Job | str) -> bool:
        """Cancel a job: none of its pending occurrences will run.

        A run already in progress finishes; nothing is queued after it.

        Args:
            job_or_id: The ``Job`` or its id.

        Returns:
            True if the job was live, False if it had already ended or was unknown.
        """
        if type(job_or_id) is Job and job_or_id._sched is self:
            job = job_or_id
            lock = self._lock
            lock.acquire()  # (cheaper than a with statement: see _run_to)
            try:
                if (
                    job._state is _SCHEDULED
                    and job._id is None
                    and job._x is None
                    and job._qkey is not None
                    and not self._observed()
                    and job not in self._store.index
                ):
                    # The common case: a queued anonymous job with nothing on the side, which
                    # is counted, not indexed. _unqueue and MemoryStore.forget, inlined.
                    store = self._store
                    store.queues[timebase_of(job._trigger)].cancel(job)
                    job._due = job._base = None
                    job._state = _CANCELLED
                    store.anonymous -= 1
                    return True
            finally:
                lock.release()
        if not isinstance(job_or_id, (Job, str)):
            raise TypeError(f"job_or_id must be a Job or a job id (str), got {job_or_id!r}")
        with self._lock:
            try:
                job = self._lookup(job_or_id)
            except JobLookupError:
                if self._replica is not None and isinstance(job_or_id, str):
                    return self._replica.cancel_unreadable(job_or_id)
                return False
            event = (
                JobCancelled(job.id, self._now_dt(), self._job_next_run_time(job))
                if self._observed()
                else None
            )
            if self._replica is not None:
                # Written first: a store that refuses it leaves the job as it was, here too.
                state, job._state = job._state, JobState.CANCELLED
                try:
                    self._replica.store.write(
                        [self._replica.row(job)], self._clock.time_ns(), drop_retries=True
                    )
                except BaseException:
                    job._state = state
                    raise

            self._unqueue(job)
            job._state = JobState.CANCELLED
            self._store.forget(job)
        if event is not None:
            self._emit([event])
        return True

    def reschedule(self, job_or_id: Job | str, when: Any) -> Job:
        """Give a live job a new ``when``, keeping its id.

        The old next occurrence can never fire (its queue entry goes stale). Pending retries
        and deferrals of earlier occurrences are dropped too.

        Args:
            job_or_id: The ``Job`` or its id.
            when: Any form ``schedule`` accepts.

        Raises:
            JobLookupError: No live job has that id.
            SchedulerShutdownError: The scheduler has been shut down (the job would look
                due and never run).
        """
        if self._shutdown:
            raise SchedulerShutdownError("reschedule")
        trigger, first, later = self._opts.when(when)
        if self._replica is not None and later:
            # Refused before anything changes: a recurrence with no first time ends the job
            # in memory, which no putting back undoes.
            _durable.trigger_json(trigger)
        with self._lock:
            job = self._lookup(job_or_id)
            if later:
                first = self._opts.first(trigger)
            before = self._replica.row(job) if self._replica is not None else None
            event = self._retarget(job, trigger, first, job._state is JobState.PAUSED)
            if before is not None and self._replica is not None:
                self._replica.save(job, before, drop_retries=True)
        if event is not None:
            self._emit([event])
        return job

    def pause(self, job_or_id: Job | str) -> None:
        """Hold a job back: nothing of it starts until ``resume``. Pausing twice is a no-op.

        An occurrence already handed to an executor (waiting in a busy pool's queue) or, with
        a durable store, already claimed in the runner's current batch still runs: it was
        begun before the pause (see docs/decisions.md). Cancel the job to revoke those too.

        Raises:
            JobLookupError: No live job has that id.
        """
        with self._lock:
            job = self._lookup(job_or_id)
            if job._state is JobState.PAUSED:
                return
            event = (
                JobPaused(job.id, self._now_dt(), self._job_next_run_time(job))
                if self._observed()
                else None
            )
            before = self._replica.row(job) if self._replica is not None else None
            # Keep the due times (job._due, side.due) so resume can queue them again.
            if job._due is not None:
                self._store.unqueue(timebase_of(job._trigger), job)
                self._store.loosen(job)
            now = self._clock.monotonic_ns()
            for side in job._sides or ():
                self._store.unqueue(MONOTONIC, side)
                if side.hold == _BLOCKED:  # it would have started: it starts on resume
                    self._store.unblock(side)
                    side.hold, side.due = _QUEUED, now
            job._state = JobState.PAUSED
            if before is not None and self._replica is not None:
                self._replica.save(job, before)
        if event is not None:
            self._emit([event])

    def resume(self, job_or_id: Job | str) -> None:
        """Queue a paused job again at the times it had when paused.

        Occurrences that came due meanwhile are then late, and the job's misfire policy applies
        (by default: run once, then continue from the next future time). Resuming a job that is
        not paused is a no-op.

        Raises:
            JobLookupError: No live job has that id.
            SchedulerShutdownError: The scheduler has been shut down (the job would look
                due and never run).
        """
        if self._shutdown:
            raise SchedulerShutdownError("resume")
        with self._lock:
            job = self._lookup(job_or_id)
            if job._state is not JobState.PAUSED:
                return
            before = self._replica.row(job) if self._replica is not None else None
            job._state = JobState.SCHEDULED
            self._mark_resumed(job)
            if job._due is not None:  # the next regular occurrence, jitter as drawn before
                self._push_regular(job)
            mono = self._clock.monotonic_ns()
            for side in job._sides or ():
                if side.hold == _QUEUED:
                    if side.reserved and side.due is not None and side.due < mono:
                        # Its token's instant passed while it was paused: the bucket counted
                        # a start then. Started now on it, the job would run beside the
                        # starts the bucket allows now; it takes a token of its own instead.
                        side.reserved = False
                    self._push_side(side)
            self._come_to_rest(job)
            if before is not None and self._replica is not None:
                self._replica.save(job, before)
            event = (
                JobResumed(job.id, self._now_dt(), self._job_next_run_time(job))
                if self._observed()
                else None
            )
        if event is not None:
            self._emit([event])

    def trigger(self, job_or_id: Job | str) -> None:
        """Run one extra occurrence of a job now, out of band; its schedule is not touched.

        Without a running runner it runs at once in the calling thread; with one, it is handed
        to the runner like any due occurrence.

        Raises:
            JobLookupError: No job has that id.
            SchedulerShutdownError: The scheduler has been shut down.
        """
        return self._manual.trigger(job_or_id)

    def jobs(self) -> list[Job]:
        """Live jobs ordered by next run time (jobs with none, e.g. paused, last)."""
        with self._lock:
            if self._replica is not None:
                self._replica.sync_locked(full=False)
            jobs = self._store.jobs()
            wall = self._clock.time_ns()
            mono = self._clock.monotonic_ns()
            keyed = []
            for i, job in enumerate(jobs):
                nxt = self._job_next_mono(job, wall, mono)
                # Ties in the order they run: their queue entries' sequence numbers.
                entry = job._qkey
                seq = i if entry is None else entry & _SEQ_MASK
                keyed.append((nxt is None, nxt or 0, job.priority, entry is None, seq, i))
        keyed.sort()
        return [jobs[k[5]] for k in keyed]

    def next_run_time(self) -> datetime | None:
        """When the earliest queued occurrence is due, in the scheduler's zone, or None.

        Rounded up to the microsecond (a datetime has no nanoseconds), so that
        ``run_until(next_run_time())`` always runs that occurrence.
        """
        with self._lock:
            if self._replica is not None:
                self._replica.sync_locked(full=False)
            wall = self._clock.time_ns()
            # (Durable: one axis, so one reading; two would differ by the time between them.)
            mono = wall if self._replica is not None else self._clock.monotonic_ns()
            head = self._store.head(wall, mono)
            if head is None:
                return None
            return self._to_datetime(head[2], MONOTONIC, wall, mono, up=True)

    def _job_next_mono(self, job: Job, wall: int, mono: int) -> int | None:
        if job._state is JobState.PAUSED:
            return None
        best = None
        if job._due is not None:
            if timebase_of(job._trigger) == MONOTONIC or self._replica is not None:
                best = job._due
            else:
                best = job._due - wall + mono
        for side in job._sides or ():
            if side.due is not None and (best is None or side.due < best):
                best = side.due
        return best

    def _job_next_run_time(self, job: Job) -> datetime | None:
        with self._lock:
            wall = self._clock.time_ns()
            mono = self._clock.monotonic_ns()
            nxt = self._job_next_mono(job, wall, mono)
            return None if nxt is None else self._to_datetime(nxt, MONOTONIC, wall, mono, up=True)

    def _now_dt(self) -> datetime:
        """The clock's wall time as an aware datetime in the scheduler's zone."""
        return ns_to_datetime(self._clock.time_ns(), self._tz)

    def _name_job(self, job: Job) -> str:
        """Give an anonymous job its generated id, the first time anyone reads ``job.id``."""
        with self._lock:
            if job._id is None:
                job_id = self._id_prefix + format(next(self._id_counter), "x")
                while self._store.get(job_id) is not None:
                    # (Taken by a job given that very id: a generated id is as unique as one
                    # given.)
                    job_id = self._id_prefix + format(next(self._id_counter), "x")
                self._store.name(job, job_id)
                job._id = job_id
            return job._id

    def _to_datetime(
        self,
        ns: int,
        timebase: int,
        wall: int | None = None,
        mono: int | None = None,
        *,
        up: bool = False,
    ) -> datetime:
        """``ns`` on ``timebase`` as a datetime in the scheduler's zone: truncated to the
        microsecond, or rounded ``up`` to it. A next run time rounds up: a datetime cannot
        show nanoseconds, and a truncated one handed back to ``run_until`` would stop short
        of the job (a loop of ``run_until(next_run_time())`` never got past it)."""
        if timebase == MONOTONIC and self._replica is None:
            # (With a durable store both timebases are the wall clock: WallAxis.)
            if wall is None or mono is None:
                wall = self._clock.time_ns()
                mono = self._clock.monotonic_ns()
            ns = ns - mono + wall
        if up:
            ns = min(-(-ns // 1_000) * 1_000, EPOCH_MOST_NS)
        return ns_to_datetime(ns, self._tz)

    # -- events ---------------------------------------------------------------------------------

    def subscribe(self, listener: Listener, *event_types: type[Event]) -> Callable[[], None]:
        """Call ``listener(event)`` for every event of the given types (all types if none).

        Listeners run outside the scheduler's lock, in the thread that caused the event; one
        that raises is logged and the others still run. A listener is a plain function: an
        ``async def`` one would never be awaited, so it is refused (from a plain listener, hand
        the work to your loop: ``loop.call_soon_threadsafe(...)``).

        Returns:
            A function that unsubscribes the listener.

        Raises:
            TypeError: ``listener`` is not callable or is an ``async def`` function, or an
                event type is not an ``Event`` subclass.
        """
        if not callable(listener):
            raise TypeError(f"listener must be callable, got {listener!r}")
        if is_coroutine_function(listener):
            raise TypeError(
                f"listener must be a plain function, got the async def {listener!r}: a listener "
                f"is called, never awaited, so its body would never run; subscribe a plain "
                f"function that hands the work to your event loop "
                f"(loop.call_soon_threadsafe or asyncio.run_coroutine_threadsafe)"
            )
        for t in event_types:
            if not (isinstance(t, type) and issubclass(t, Event)):
                raise TypeError(f"event_types must be Event subclasses, got {t!r}")
        entry = (listener, tuple(event_types))
        with self._lock:
            # Copy-on-write: dispatch iterates a snapshot without holding the lock.
            self._listeners = [*self._listeners, entry]
            self._watch = True

        def unsubscribe() -> None:
            with self._lock:
                self._listeners = [e for e in self._listeners if e is not entry]
                self._observed()

        return unsubscribe

    def _observed(self) -> bool:
        """Whether events are wanted: a listener is subscribed, or the ``duetime`` logger
        logs DEBUG (every state change goes to logging as well; otherwise none is built).

        Also kept in ``_watch``, which the life cycle's per-run paths read instead: the
        logger's check costs 40 ns, three times a run, 12 % of ``run_until``'s cost per job.
        The drivers refresh it once per call (the stepping loop) or per wake (the runners), so
        a level set while a ``run_until`` goes on shows from the next call on."""
        watch = self._watch = bool(self._listeners) or logger.isEnabledFor(logging.DEBUG)
        return watch

    def _emit(self, events: Sequence[Event]) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            for event in events:
                log_event(event)
        listeners = self._listeners
        if listeners:
            for event in events:
                dispatch(listeners, event)

    # -- the life cycle -------------------------------------------------------------------------

    def _pop_due(self, wall: int, mono: int) -> tuple[Any, int, int] | None:
        """Pop the earliest entry due at ``(wall, mono)``: ``(key, queue index, due)``."""
        self._observed()  # (once per wake of a runner, per run of run_pending)
        head = self._store.head(wall, mono)
        if head is None or head[2] > mono:
            return None
        tb, entry, _ = head
        return self._store.take(tb, entry), tb, entry >> DUE_SHIFT

    def _begin(self, key: Any, tb: int, due: int, wall: int, mono: int) -> Occ | None:
        """Decide whether a popped entry runs now. Called with the lock held.

        ``wall`` and ``mono`` are the clock's current readings. Returns the occurrence to
        execute, or None if it was skipped, deferred or held back (in which case whatever
        comes next has been queued).
        """
        if type(key) is Job:
            job = key
            job._due = None
            if job._id is None:
                # Its regular entry is no longer queued: index it (MemoryStore.loosen, inlined).
                store = self._store
                if job not in store.index:
                    store.index[job] = job
                    store.anonymous -= 1
            trig: Any = job._trigger
            x = job._x
            if (
                (x is None or x.opts is DEFAULT_OPTIONS)
                and not job._running
                and self._max_concurrent is None
                and (type(trig) in _SHORTHAND or not trig.recurring)
            ):
                # The common case, kept short: every line here is paid once per run, by every
                # driver (stepping, the thread runner, the asyncio runner).
                job._running = 1
                self._running_total += 1
                job._state = _RUNNING
                if x is not None:
                    x.attempt = 1
                late = (mono if tb else wall) - due
                if late > 0:
                    self._stats.record_late(late)
                # _base is always set while a regular entry is queued.
                return new_occ(
                    Occ, (job, job._base, tb, 1, mono, None, None, 0 if x is None else x.gen)
                )
            if job._running and x is not None and (x.catchup or x.backlog):
                # Misfire.RUN_ALL catches a backlog up one occurrence at a time: this one waits,
                # unqueued, for the run going on to end (_release_held queues it then), instead
                # of meeting the overlap policy, which would skip it (or coalesce it). So does
                # one that was due already when that run started (a runner hands the first of
                # two occurrences due together to its pool, then meets the second): that run
                # did not overlap it, it came first.
                job._due = due
                return None
            opts = job._opts
            trig = job.trigger
            base = job._base
            assert base is not None
            attempt = 1
            prev_delay = None
            now_tb = mono if tb == MONOTONIC else wall
            late = now_tb - due
            if (
                job._running
                and trig.recurring
                and (opts.misfire or self._misfire) is Misfire.RUN_ALL
                and late > (opts.grace_ns if opts.grace_ns is not None else self._grace)
            ):
                # The oldest of a backlog RUN_ALL catches up (the wall clock jumped while a run
                # went on) waits for that run, as the rest of the backlog will: the overlap
                # policy would otherwise skip it, and the catch-up would start one late.
                job._due = due
                return None
            if trig.recurring and not self._plan_next(job, base, tb, late, now_tb):
                self._come_to_rest(job)
                return None
            if job._running:
                verdict = policy.overlap(
                    job._running,
                    opts.overlap or self._overlap,
                    recurring_regular=trig.recurring,
                    has_held=any(_held_regular(x) for x in job._sides or ()),
                )
                if verdict is not Verdict.START:
                    if verdict is Verdict.HOLD:  # start when the running one ends
                        held = _Side(job, base, trig.timebase, 1)
                        # (From its base: the entry's due may have been put off, a claim that
                        # met a run elsewhere tried again later, and a RUN_ALL backlog due
                        # before that would pass it.)
                        held.since = min(mono, base if tb == MONOTONIC else base - wall + mono)
                        self._hold_side(held, _HELD)
                    else:  # skipped, or coalesced into the one run already held back
                        self._skipped(job, base, tb, verdict.value)
                    self._come_to_rest(job)
                    return None
            limiter = opts.limiter
            reserved = False
            base_tb = trig.timebase
            fire = None
        else:
            side: _Side = key
            job = side.job
            if (
                job._running
                and policy.overlap(
                    job._running,
                    job._opts.overlap or self._overlap,
                    recurring_regular=False,
                    has_held=False,
                )
                is not Verdict.START
            ):
                # A retry, held-back run or trigger() of a job with a run still going waits for
                # that run to end rather than overlap it.
                side.since = min(mono, due)
                self._hold_side(side, _HELD)
                return None
            jsides = job._sides
            if jsides is not None:
                jsides.remove(side)
                if not jsides:
                    job._sides = None
            side.due = None
            base = side.base
            base_tb = side.base_tb
            attempt = side.attempt
            prev_delay = side.prev_delay
            limiter = job._opts.limiter
            reserved = side.reserved
            fire = side.key
        if limiter is not None and not reserved:
            at = limiter.reserve(mono)
            if at > mono:
                self._queue_side(_Side(job, base, base_tb, attempt, prev_delay, True, fire), at)
                self._stats.deferred += 1
                if self._watch:
                    self._pending_events.append(
                        JobDeferred(
                            job.id,
                            self._now_dt(),
                            self._to_datetime(base, base_tb),
                            self._to_datetime(at, MONOTONIC),
                        )
                    )
                self._come_to_rest(job)
                return None
        if self._max_concurrent is not None and self._running_total >= self._max_concurrent:
            # Blocked until a run finishes (_release_blocked), oldest first, its token kept.
            blocked = key if type(key) is _Side else _Side(job, base, base_tb, attempt, prev_delay)
            blocked.reserved = True
            blocked.since = min(mono, due if tb == MONOTONIC else due - wall + mono)
            self._hold_side(blocked, _BLOCKED)
            self._come_to_rest(job)
            return None
        if type(key) is Job and trig.recurring:
            nxt = job._due
            backlog = (
                nxt is not None
                and nxt <= (mono if tb == MONOTONIC else wall)
                and (opts.overlap or self._overlap) is not Overlap.ALLOW
            )
            if backlog or (job._x is not None and job._x.backlog):
                job._extras().backlog = backlog
        job._running += 1
        self._running_total += 1
        job._state = _RUNNING
        if attempt != 1 or job._x is not None:
            job._extras().attempt = attempt
        late = (mono if tb else wall) - due
        if late > 0 and (type(key) is Job or key.claimed != 2):
            # (Not a fire a backfill enqueued, queued at its own, long past, time: it is late
            # by design, and would swamp the figure.)
            self._stats.record_late(late)
        x = job._x
        return new_occ(
            Occ, (job, base, base_tb, attempt, mono, prev_delay, fire, 0 if x is None else x.gen)
        )

    def _plan_next(self, job: Job, base: int, tb: int, late: int, now_tb: int) -> bool:
        """Apply the misfire policy to a regular occurrence of a recurring job and queue the
        next regular occurrence of a rate-like recurrence. Returns whether this one runs.

        ``RUN_ALL`` catches up one occurrence at a time, oldest first, as long as the backlog is
        at most ``_BACKFILL_LIMIT`` occurrences (measured once per catch-up, not on every late
        pop); a larger backlog, such as a year-long wall-clock jump under a per-minute cron, is
        coalesced as ``RUN_ONCE`` would and reported as an inexact ``JobMissed``.
        """
        opts = job._opts
        misfire = opts.misfire or self._misfire
        catching_up = job._x is not None and job._x.catchup
        plan = policy.plan_misfire(
            job.trigger,
            base,
            late,
            now_tb,
            grace=opts.grace_ns if opts.grace_ns is not None else self._grace,
            policy=misfire,
            catching_up=catching_up,
            env=self._env,
        )
        if plan.catchup != catching_up:
            job._extras().catchup = plan.catchup
        if plan.missed:
            self._missed(job, base, tb, plan.missed, plan.exact, misfire)
        if plan.next_base is not None and not self._past_store(job, plan.next_base):
            self._queue_regular(job, plan.next_base)
        return plan.run

    def _past_store(self, job: Job, base: int) -> bool:
        """Whether ``base``, the next regular fire of ``job`` (its trigger's timebase), is past
        what a durable store holds (64-bit nanoseconds: the years 1677 to 2262): then the
        recurrence ends here, with a WARNING (a claim of the fire before it could not be
        written, and its job would be tried again and again)."""
        if self._replica is None:
            return False
        clock = self._clock
        utc = to_utc(base, timebase_of(job._trigger), clock.time_ns(), clock.monotonic_ns())
        # (Up to the latest it may be jittered to.)
        return self._unstorable(
            job, "next fire", utc, job._opts.jitter_ns, "the recurrence ends here"
        )

    def _unstorable(self, job: Job, what: str, utc: int, spread: int, then: str) -> bool:
        """Whether a durable store cannot hold ``utc`` (+ up to ``spread`` ns), ``job``'s
        ``what``: then say so, and what happens ``then``, at WARNING."""
        if _durable.storable_ns(utc + spread):
            return False
        logger.warning(
            "job %r: its %s (%s) is past what a durable store holds (%s); %s",
            job._id,
            what,
            _durable.describe_ns(utc),
            _durable.STORABLE_TIMES,
            then,
        )
        return True

    def _missed(
        self, job: Job, base: int, tb: int, count: int, exact: bool, policy: Misfire
    ) -> None:
        if self._replica is not None:
            # Every started process pops the same missed fires: the one whose claim (or skip)
            # moves the job on reports them (_claimed, _save_quiet), the others do not.
            # (``base`` is the fire popped: the guard of the claim or skip that moves it on.)
            self._replica.missed_held[id(job)] = (job, base, tb, count, exact, policy)
            return
        self._report_missed(job, base, tb, count, exact, policy)

    def _mark_resumed(self, job: Job) -> None:
        """Note that ``job`` is resumed now (here, or read back from a resume elsewhere): the
        fires it missed while paused were held back on purpose (``_report_missed``)."""
        clock = self._clock
        job._extras().resumed = (clock.time_ns(), clock.monotonic_ns())

    def _report_missed(
        self, job: Job, base: int, tb: int, count: int, exact: bool, policy: Misfire
    ) -> None:
        self._stats.missed += count
        x = job._x
        resumed = None if x is None else x.resumed
        # Fires that fell due while the job was paused were held back on purpose: the policy
        # applies to them all the same, but they are no misfire to warn of.
        paused = resumed is not None and base <= resumed[tb]
        (logger.info if paused else logger.warning)(
            "job %r missed %s%d occurrence(s) (misfire policy %s)%s",
            job.id,
            "" if exact else "at least ",
            count,
            policy.value,
            ", held back by a pause" if paused else "",
        )
        if self._watch:
            self._pending_events.append(
                JobMissed(
                    job.id,
                    self._now_dt(),
                    self._to_datetime(base, tb),
                    count,
                    exact,
                    policy.value,
                )
            )

    def _skipped(self, job: Job, base: int, tb: int, reason: str) -> None:
        self._stats.skipped += 1
        logger.info("job %r skipped an occurrence: %s", job.id, reason)
        if self._watch:
            self._pending_events.append(
                JobSkipped(job.id, self._now_dt(), self._to_datetime(base, tb), reason)
            )

    def _execute(self, occ: Occ, contained: bool = False) -> None:
        """Run one occurrence in the calling thread (no lock held) and record the outcome.
        ``contained``: see ``_call`` (the runner's threads)."""
        done = self._cycle.call(occ, contained)
        if done is None:
            return
        with self._lock:
            self._cycle.finish(done)
            events = self._drain_events()
        if events:
            self._emit(events)

    def _execute_contained(self, occ: Occ) -> None:
        """``_execute`` for the thread runner: in its thread or a pool's, whatever the job
        raises is its outcome (see ``_call``)."""
        self._execute(occ, True)

    def _emit_started(self, occ: Occ) -> None:
        if self._watch:
            started = JobStarted(
                occ.job.id,
                self._to_datetime(occ.started, MONOTONIC),
                self._to_datetime(occ.due, occ.timebase),
                occ.attempt,
            )
            try:
                self._emit([started])
            except BaseException:
                # A listener's KeyboardInterrupt or SystemExit in the main thread (time stepped
                # by hand, or an asyncio runner's loop there), which reaches the caller: the
                # run never began, and is undone rather than left running for good.
                self._abandon(occ, failed=True)
                raise

    def _finish_outcome(self, occ: Occ, result: Any, error: Exception | None) -> None:
        """Record an outcome that was produced elsewhere (a process pool, a rejection)."""
        with self._lock:
            self._cycle.finish((occ, result, error))
            events = self._drain_events()
        if events:
            self._emit(events)

    def _abandon(
        self,
        occ: Occ,
        failed: bool = False,
        give_back: bool = False,
        lost: bool = False,
        interrupted: bool = False,
    ) -> None:
        """Forget an occurrence that will not produce an outcome: cancelled or rescheduled
        before it started (``lost``), or interrupted by a BaseException (``failed``).
        ``give_back``: it never started and was stopped by shutdown (see ``_abandon_all``);
        ``interrupted``: shutdown cancelled it while it ran (a coroutine)."""
        self._abandon_all((occ,), failed, give_back, lost, interrupted)

    def _abandon_all(
        self,
        occs: Sequence[Occ],
        failed: bool = False,
        give_back: bool = False,
        lost: bool = False,
        interrupted: bool = False,
    ) -> None:
        """``_abandon`` for several occurrences (the rest of a batch that shutdown() stopped),
        with one write to a durable store.

        With a durable store, the run of a job cancelled before it started is recorded as lost:
        nobody is to run that fire any more. Work that shutdown stopped before it started
        (``give_back``) is not work that must never run: it is given back, and the next look
        for lost runs, by another process or this one restarted, takes it over (kept claimed
        until its lease ran out, a rolling restart left it waiting that long). A run that was
        interrupted stays claimed until its lease runs out, as a crashed one does: it may have
        done part of its work.
        """
        returned: list[tuple[str, int]] = []
        with self._lock:
            for occ in occs:
                job = occ.job
                job._running -= 1
                self._running_total -= 1
                fire = occ.fire
                cancelled = job._state is _CANCELLED
                if self._replica is not None and fire is not None:
                    if not failed and (lost or cancelled):
                        with contextlib.suppress(StoreError):
                            self._replica.store.mark_lost(fire, self._clock.time_ns())
                            # Rescheduled: a new first fire at the same instant has the same
                            # key, which must stay free for it to run.
                            if (
                                not cancelled
                                and job._base is not None
                                and fire_key_at(job.id, job._base) == fire
                            ):
                                self._replica.store.reopen_key(fire)
                    elif give_back:
                        returned.append((fire, occ.attempt))
                    elif interrupted:
                        self._replica.store.let_lapse(fire)
                if (
                    (give_back or interrupted)
                    and self._shutdown
                    and not (failed or lost or cancelled)
                    and job._due is None
                    and not job._sides
                    and job._running == 0
                ):
                    # Shutdown stopped it before it ran to its end: not completed. It stays
                    # scheduled at its due time (a durable store runs it after a restart).
                    self._queue_regular(job, occ.due)
                self._after_run(job, failed)
            if returned and self._replica is not None:
                try:
                    self._replica.store.release(returned)
                except StoreError as exc:
                    logger.warning(
                        "could not give back %d runs (taken over when their leases run out): %s",
                        len(returned),
                        exc,
                    )
                else:
                    logger.info(
                        "gave back %d runs this process will not start (other processes take "
                        "them over at their next poll)",
                        len(returned),
                    )
            if self._replica is not None and self._replica.close_when_idle:
                self._replica.close_if_idle_locked()

    def _call(self, occ: Occ, contained: bool = False) -> tuple[Occ, Any, Exception | None] | None:
        """Call the job's function for one occurrence; never raises what the job raises.

        Returns None, without calling, if the occurrence was ``revoked`` after it was popped
        (the job cancelled or rescheduled while it waited in an executor's queue, say).
        A ``BaseException`` (``KeyboardInterrupt``, ``SystemExit``) raised where time is
        stepped by hand is not the job's outcome: the run is abandoned, its bookkeeping undone,
        and the exception propagates to the caller (Ctrl-C stops a simulation). ``contained``
        (the runner's threads, where there is no caller to tell: the runner thread died, or a
        pool kept it in a future nobody reads): it is the job's failure, a ``RuntimeError``
        whose ``__cause__`` it is, as from a process pool.
        """
        job = occ.job
        if revoked(occ):
            self._abandon(occ, lost=True)
            return None
        if self._watch:
            self._emit_started(occ)
        token = _current.set(occ)
        try:
            kwargs = job.kwargs
            result = job.func(*job.args, **kwargs) if kwargs else job.func(*job.args)
            kind = type(result)
            if (
                kind is CoroutineType
                or kind is AsyncGeneratorType
                or (kind is GeneratorType and is_generator_function(job.func))
            ):
                result = _await(result)
        except Exception as exc:
            _current.reset(token)
            return (occ, None, exc)
        except BaseException as exc:
            _current.reset(token)
            if contained:
                error = RuntimeError(f"job raised {exc!r}")
                error.__cause__ = exc
                return (occ, None, error)
            self._abandon(occ, failed=True)
            raise
        _current.reset(token)
        return (occ, result, None)

    def _finish_locked(self, done: tuple[Occ, Any, Exception | None]) -> None:
        """Record the outcome of an occurrence. Called with the lock held."""
        occ, result, error = done
        job = occ.job
        job._running -= 1
        self._running_total -= 1
        job.runs += 1
        x = job._x
        if (
            error is None
            and (x is None or x.sides is None)
            and not self._watch
            and not self._store.blocked
            and self._runner is None
            and (type(job._trigger) in _SHORTHAND or not job.trigger.after_finish)
        ):
            # The common case, kept short: a success nobody is listening to.
            self._stats.succeeded += 1
            if job._state is _RUNNING and not job._running and job._due is None:
                job._state = _COMPLETED
                del self._store.index[job if job._id is None else job._id]
            else:
                if job._due is not None and job._qkey is None:
                    self._release_held(job)  # (a catch-up's next occurrence waited for it)
                self._come_to_rest(job)
            return
        self._finish_slow(occ, result, error)

    def _finish_slow(self, occ: Occ, result: Any, error: BaseException | None) -> None:
        job, base, base_tb, attempt, started, prev_delay, fire, _ = occ
        listening = self._watch
        events = self._pending_events
        failed_dead = False
        live = job._state is not JobState.CANCELLED
        if error is None:
            self._stats.succeeded += 1
            if listening:
                events.append(
                    JobSucceeded(
                        job.id,
                        self._now_dt(),
                        self._to_datetime(base, base_tb),
                        self._to_datetime(started, MONOTONIC),
                        attempt,
                        result,
                    )
                )
            settled = True
        else:
            settled, failed_dead = self._failure(
                job, base, base_tb, attempt, started, prev_delay, error, events, live, fire
            )
        if live and settled and job.trigger.after_finish and job._due is None:
            nxt = job.trigger.next(base, self._env)
            if nxt is not None and not self._past_store(job, nxt):
                self._queue_regular(job, nxt)
        self._after_run(job, failed_dead)

    def _after_run(self, job: Job, failed: bool) -> None:
        """A run of ``job`` is over (lock held): start what waited for it, settle the job, and
        tell the runner (and wait_idle callers)."""
        # Runs blocked by max_concurrent first: they have waited longer than a run this one
        # held back, which would otherwise take the freed slot every time (a late-running job
        # under Overlap.QUEUE starved the others). (They are queued at the times they were
        # due, the held run now; and, of two due at one instant, the first queued goes first.)
        self._release_blocked()
        self._release_held(job)
        self._come_to_rest(job, failed=failed)
        if self._runner is not None:
            self._runner.notify()

    def _failure(
        self,
        job: Job,
        base: int,
        base_tb: int,
        attempt: int,
        started: int,
        prev_delay: float | None,
        error: BaseException,
        events: list[Event],
        live: bool,
        fire: str | None = None,
    ) -> tuple[bool, bool]:
        """Handle a failed attempt. Returns ``(occurrence settled, one-shot job now dead)``."""
        trouble = job._extras()
        trouble.failures += 1
        trouble.last_error = error
        self._stats.failed += 1
        retry = job._opts.retry or self._retry
        mono = self._clock.monotonic_ns()
        delay = self._retry_delay(job, retry, attempt, error, prev_delay, mono) if live else None
        retry_at = None
        if delay is not None:
            retry_at = mono + round(delay * NS_PER_SECOND)
            self._queue_side(_Side(job, base, base_tb, attempt + 1, delay, False, fire), retry_at)
            self._stats.retried += 1
            # One line per attempt that will be retried; the traceback belongs to the last one.
            logger.warning(
                "job %r attempt %d failed (%s: %s); retrying in %.3f s",
                job.id,
                attempt,
                type(error).__name__,
                exception_message(error),
                delay,
            )
        else:
            logger.error(
                "job %r attempt %d failed (%s: %s)%s",
                job.id,
                attempt,
                type(error).__name__,
                exception_message(error),
                "" if isinstance(retry, NoRetry) else f"; it is dead after {attempt} attempt(s)",
                exc_info=error,
            )
        if self._watch:
            events.append(
                JobFailed(
                    job.id,
                    self._to_datetime(mono, MONOTONIC),
                    self._to_datetime(base, base_tb),
                    self._to_datetime(started, MONOTONIC),
                    attempt,
                    error,
                    None if retry_at is None else self._to_datetime(retry_at, MONOTONIC),
                )
            )
        if delay is not None:
            return False, False
        return True, self._dead(job, base, base_tb, attempt, error, mono, events, live)

    def _retry_delay(
        self,
        job: Job,
        retry: RetryPolicy,
        attempt: int,
        error: BaseException,
        prev_delay: float | None,
        mono: int,
    ) -> float | None:
        """The seconds until a failed attempt's retry, or None: no retry (the policy gives up,
        fails, or a durable store could not hold the retry's time). Lock held."""
        delay, problem, raised = policy.retry_delay(retry, attempt, error, self._rng, prev_delay)
        if problem is not None:
            logger.error(
                "retry policy %r %s; giving up on job %r",
                retry,
                problem,
                job.id,
                exc_info=raised,
            )
        if delay is not None and self._replica is not None:
            at = to_utc(mono + round(delay * NS_PER_SECOND), MONOTONIC, self._clock.time_ns(), mono)
            if self._unstorable(job, "retry", at, 0, "not retried"):
                return None
        return delay

    def _dead(
        self,
        job: Job,
        base: int,
        base_tb: int,
        attempt: int,
        error: BaseException,
        mono: int,
        events: list[Event],
        live: bool,
    ) -> bool:
        """An occurrence whose last attempt failed: count it, tell listeners, and keep a dead
        letter if its job is a one-shot that ends with it (lock held). Whether it does."""
        self._stats.dead += 1
        if self._watch:
            events.append(
                JobDead(job.id, self._now_dt(), self._to_datetime(base, base_tb), attempt, error)
            )
        one_shot_dead = policy.dead_letter(
            live=live,
            recurring=job.trigger.recurring,
            pending=job._due is not None or bool(job._sides),
            running=job._running,
        )
        if one_shot_dead:
            self._store.put_dead(
                job.id,
                FailedJob(
                    job,
                    error,
                    "".join(traceback.format_exception(type(error), error, error.__traceback__)),
                    attempt,
                    self._to_datetime(base, base_tb),
                    self._to_datetime(mono, MONOTONIC),
                ),
            )
        return one_shot_dead

    # -- dead letters ---------------------------------------------------------------------------

    def failed(self) -> list[FailedJob]:
        """One-shot jobs whose last attempt failed (the dead-letter list), oldest first. With
        a durable store: as the store has it now, whichever process the jobs died in."""
        return self._dead_letters.failed()

    def _sort_dead(self) -> None:
        """Order the dead letters oldest first, as ``failed()`` promises (lock held)."""
        return self._dead_letters.sort_dead()

    def retry_failed(self, id: str | Job | FailedJob) -> Job:
        """Queue a dead one-shot job again, now, with a fresh attempt count.

        Args:
            id: The job's id, or the ``Job`` or ``FailedJob`` (from ``failed()``) itself.

        Raises:
            JobLookupError: No failed job has that id.
            ConflictingIdError: A live job has taken the id meanwhile.
        """
        return self._dead_letters.retry_failed(id)

    def _revive(self, job: Job, id: str) -> None:
        """Make a dead letter's job live again under ``id``, due now, with a fresh attempt
        count (lock held)."""
        return self._dead_letters.revive(job, id)

    def discard_failed(self, id: str | Job | FailedJob) -> bool:
        """Drop a job from the dead-letter list. Returns whether it was there.

        Args:
            id: The job's id, or the ``Job`` or ``FailedJob`` (from ``failed()``) itself.
        """
        return self._dead_letters.discard_failed(id)

    def stats(self) -> Stats:
        """A snapshot of counters, queue sizes and start-lateness percentiles."""
        with self._lock:
            live, stale, compactions = self._store.queue_stats()
            return self._stats.snapshot(
                live=live,
                stale=stale,
                compactions=compactions,
                jobs=len(self),
                running=self._running_total,
                held=sum(
                    side.hold == _HELD for job in self._store.jobs() for side in job._sides or ()
                ),
                blocked=self._store.blocked_count(),
            )

    # -- durable stores ---------------------------------------------------------------------------
    #
    # With a durable store (store.durable), the in-memory structures above stay the working
    # copy and the store's file is the truth: every change is written through (_save, _insert),
    # a run starts only after the store gives it to this process (Replica.begin: a claim), its
    # outcome is recorded only while this process still holds it (Replica.finish: fenced), and
    # other processes' changes are read back by polling (sync_locked). The two life-cycle
    # methods are swapped in per instance, so a MemoryStore scheduler never tests for any of it.

    def backfill(self, job_or_id: Job | str, start: datetime, end: datetime) -> list[str]:
        """Enqueue every fire of a job's recurrence in ``[start, end)`` that has not run and is
        not enqueued, oldest first; they run whatever the job's misfire policy. Only fires due
        by now are enqueued: the ones still to come run on schedule, not ahead of their time.

        Needs a durable store: it is the record of which fires ran. Calling it again for the
        same range enqueues nothing more.

        Args:
            job_or_id: The ``Job`` or its id.
            start: The first instant (an aware datetime), included.
            end: The last instant (an aware datetime), excluded.

        Returns:
            The fire keys enqueued by this call.

        Raises:
            InvalidArgument: ``start`` is after ``end``, or the recurrence has no fixed fire
                times (``FixedDelay``, ``Poisson``, ``After``).
            TypeError: The scheduler's store is not durable.
        """
        return self._manual.backfill(job_or_id, start, end)

    def runs(
        self, job_or_id: Job | str | None = None, *, state: str | None = None, limit: int = 100
    ) -> list[RunRecord]:
        """The runs a durable store recorded, newest due first.

        Args:
            job_or_id: Only this job's runs (a ``Job`` or an id; the job may have ended).
            state: Only runs in this state: ``queued``, ``running``, ``failed`` (a retry is
                due), ``succeeded``, ``dead`` or ``lost``.
            limit: At most this many (default 100).

        Raises:
            TypeError: The scheduler's store is not durable (a MemoryStore keeps no runs).
        """
        if self._replica is None:
            raise TypeError(
                "runs() needs a durable store (SQLiteStore, PostgresStore): a MemoryStore keeps "
                "no record of runs (subscribe to events instead)"
            )
        if job_or_id is None or isinstance(job_or_id, str):
            job_id = job_or_id
        elif isinstance(job_or_id, Job):
            job_id = job_or_id.id
        else:
            raise TypeError(f"job_or_id must be a Job, a job id (str) or None, got {job_or_id!r}")
        if state is not None and state not in RUN_STATES:
            raise InvalidArgument(f"state must be one of {', '.join(RUN_STATES)}, got {state!r}")
        integer("limit", limit)
        if limit < 1:
            raise InvalidArgument(f"limit must be at least 1, got {limit!r}")
        # (No store holds 2**62 runs: a larger limit asks for them all, and SQL takes no
        # integer beyond 64 bits.)
        limit = min(limit, 2**62)
        with self._lock:
            return self._replica.store.runs(job_id, state, limit)

    def unreadable(self) -> list[UnreadableRow]:
        """The stored rows this process could not read, and skipped (quarantined).

        A row is data that anyone who can write the database may have changed. One that is not
        what duetime writes (a wrong type, broken JSON, a value nested too deeply, a task this
        process may not import) is skipped with one WARNING naming the store, the table and the
        id, instead of stopping the process; every other job runs. ``cancel(id)`` ends an
        unreadable job. A MemoryStore holds no rows: always empty there.

        Returns:
            The quarantined rows (``UnreadableRow``: table, id, reason), by table and id.
        """
        if self._replica is None:
            return []
        with self._lock:
            self._replica.sync_locked(full=False)
            if self._replica is not None:
                self._replica.sync_dead()
            return self._replica.store.quarantine.rows()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Make the changes inside the block one transaction of a durable store: scheduling
        many jobs this way is many times faster than one transaction each. If the block
        raises, none of its changes is stored (the jobs it added are dropped from memory too).
        With a MemoryStore it changes nothing.

        The block holds the scheduler's lock: listeners of its changes run in it, with the lock
        held, and must not wait for other threads that use the scheduler. ``shutdown()`` inside
        the block is refused (``RuntimeError``): end the block first.
        """
        if self._replica is None:
            yield
            return
        with self._lock:
            store = self._replica.store
            outermost = not store.batch_open
            if outermost:
                self._replica.outcomes.write_locked()  # (of runs that ended before: no part of it)
            before = set(store.index)
            try:
                with store.batch():
                    yield
            except BaseException:
                for id in set(store.index) - before:
                    self._replica.drop_local(store.index[id])
                # The other changes (a pause, a reschedule, a cancel) were rolled back in the
                # store: read their jobs back, or memory would keep them (once the store
                # answers, if it does not now: _reload leaves them to the next poll).
                for id in store.touched():
                    job = store.index.get(id)
                    if job is not None:
                        self._replica.reload(job, quiet=True)
                        continue
                    try:  # (cancelled in the batch: back, if the store still has it live)
                        self._replica.load_missing(id)
                    except StoreError:
                        self._replica.unsure_ids.add(id)  # (at the next poll: memory holds nothing)
                raise
            finally:
                if outermost:
                    self._replica.outcomes.write_locked()  # (of runs that ended inside the block)

    # -- driving time by hand -------------------------------------------------------------------

    def run_pending(self) -> int:
        """Run, in this thread, every occurrence due at the clock's current time.

        Occurrences run in ``(due, priority, insertion)`` order; ones that running jobs make due
        by then run too. Works with any clock.

        Returns:
            How many occurrences ran.

        Raises:
            SchedulerShutdownError: The scheduler has been shut down.
        """
        return self._stepping.run_pending()

    def step(self, until: datetime | float | int | None = None) -> Run | None:
        """Jump the clock to the next due occurrence and run it (needs a steppable clock).

        An occurrence already overdue runs without moving the clock. Occurrences that are
        skipped or deferred on the way do not count: ``step`` returns the first that ran.

        Args:
            until: A horizon (an aware datetime, or epoch seconds): if the next occurrence is
                due after it, nothing runs and the clock is moved to ``until``, so that
                ``while s.step(until=end): ...`` never runs past the end of a simulation.
                Default: no horizon.

        Returns:
            The ``Run`` that ran, or None if nothing is queued (by ``until``).

        Raises:
            TypeError: The clock is not steppable (e.g. ``SystemClock``).
            SchedulerShutdownError: The scheduler has been shut down.
        """
        return self._stepping.step(until)

    def run_until(self, when: datetime | float | int) -> int:
        """Run every occurrence due up to and including ``when``, in order.

        Before each occurrence runs, the clock is set to that occurrence's own due time, so a
        job due at 09:00 sees 09:00. Occurrences scheduled by running jobs run too if they fall
        in the range. The clock ends at ``when`` (it never moves back).

        Args:
            when: Wall-clock target: an aware datetime, or epoch seconds.

        Returns:
            How many occurrences ran.

        Raises:
            TypeError: The clock is not steppable (e.g. ``SystemClock``).
            SchedulerShutdownError: The scheduler has been shut down.
        """
        return self._stepping.run_until(when)

    def run_for(self, seconds: float | int | timedelta) -> int:
        """``run_until`` the clock's time plus ``seconds`` (a number of seconds or timedelta).

        Raises:
            TypeError: The clock is not steppable (e.g. ``SystemClock``).
            SchedulerShutdownError: The scheduler has been shut down.
        """
        return self._stepping.run_for(seconds)

    def _run_to(self, clock: SteppableClock, target: int) -> int:
        # The stepping loop: take the head if it is due by the target, move the clock to its
        # due time, and hand it to the one life cycle (_begin, _call, _finish_locked), the same
        # methods the runners use. Each outcome is recorded under the lock acquisition that
        # takes the next occurrence, so an event costs one acquisition.
        return self._stepping.run_to(clock, target)

    def _drain_events(self) -> Sequence[Event]:
        """Hand over the events raised under the lock (call with the lock held).

        Never returns the live list: an empty take must not alias the list that other threads
        go on appending to, or its next events would be emitted twice.
        """
        events = self._pending_events
        if not events:
            return ()
        self._pending_events = []
        return events

    # -- running for real -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the runner thread: jobs run on their own, at their times.

        Raises:
            RuntimeError: The scheduler is already running.
            SchedulerShutdownError: The scheduler has been shut down.
        """
        return self._service.start()

    def _claim_runner(self, method: str, make: Callable[[Engine], R]) -> R:
        """Make the scheduler's one runner from its engine, for ``start`` or ``run_async``."""
        return self._service.claim_runner(method, make)

    @property
    def running(self) -> bool:
        """Whether the runner thread is running."""
        return self._runner is not None

    def shutdown(self, wait: bool = True, cancel_running: bool = False) -> None:
        """Stop the scheduler: no new work is accepted and no further occurrence is handed to
        an executor.

        Args:
            wait: Block until running jobs have finished (and, unless ``cancel_running``, the
                work already waiting in an executor's queue, which runs there).
            cancel_running: Cancel work handed to executors that has not started yet (with a
                durable store it is given back, for another process to run).
        """
        return self._service.shutdown(wait, cancel_running)

    async def run_async(self) -> None:
        """Run jobs on the running asyncio loop until ``shutdown()`` is called.

        Coroutine functions run as tasks on the loop; plain functions in the loop's default
        executor. The loop is woken by an insert from any thread, and by a ``FakeClock`` when
        fake time moves. See ``duetime.aio.AsyncScheduler`` for the context-manager form.
        """
        await self._serve(self._claim_runner("run_async", AsyncRunner))

    async def _serve(self, runner: AsyncRunner) -> None:
        """Run a claimed asyncio runner until it stops, then release the claim."""
        try:
            await runner.run()
        finally:
            with self._lock:
                self._runner = None
                # shutdown() without wait (all a coroutine may call) left a durable store open
                # for the runs still going; the runner has awaited them, so it can go now.
                if self._shutdown and self._replica is not None:
                    self._replica.close_store_locked()

    def wait_idle(self, timeout: float | timedelta | None = None) -> bool:
        """Block until nothing is due now and nothing is running (for tests).

        Without a runner (never started, or shut down), it waits only for runs still going
        (``shutdown(wait=False)`` let them finish): anything due then stays due, nobody is
        there to run it, and the answer is False at once. Called from inside one of the
        scheduler's own runs, or from a run's listener, it answers False at once (that run is
        going). With an asyncio runner it raises ``RuntimeError``: ``await s.idle()`` there.

        Args:
            timeout: Real seconds (or a timedelta) to wait at most (None: no limit).

        Returns:
            True if idle was reached, False on timeout.

        Raises:
            InvalidArgument: ``timeout`` is negative, NaN, infinite or more than a thousand
                years.
            TypeError: ``timeout`` is not a number of seconds or a timedelta.
        """
        return self._service.wait_idle(timeout)

    def _idle_locked(self) -> bool:
        """Whether nothing is due now and nothing is running (lock held). The runners add
        their own in-flight work to this."""
        return self._service.idle_locked()

    def __enter__(self) -> Scheduler:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown(wait=True)

    def __iter__(self) -> Iterator[Job]:
        return iter(self.jobs())


if not TYPE_CHECKING:  # (type checkers keep flagging them as unknown attributes)
    _foreign.install_hints(Scheduler)
_foreign.hint_keywords(Scheduler, _foreign.SCHEDULER_KEYWORDS)
