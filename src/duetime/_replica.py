"""The durable component: a Scheduler's replica of a durable store, and the protocol that keeps
it (claim, settle, outcomes, leases, sync).

A ``Scheduler`` on a ``SQLiteStore`` or ``PostgresStore`` composes one ``Replica``, chosen at
construction: its life cycle then begins, calls and finishes runs through ``Replica.begin``,
``Replica.call`` and ``Replica.finish``, which wrap the scheduler's own steps with the store's
claim and settle. The replica holds every job of the store in memory (``load``, ``sync_locked``)
and claims each fire before running it; a worker that holds only the work due within a horizon
(a "window") would narrow what ``open`` loads and ``sync_locked`` takes in, and keep the claim
and settle protocol as it is.

Lock rules: every method runs with the scheduler's lock held, except ``call`` (the job's
function runs outside it), ``may_start`` and the at-exit hook, which take it themselves.
"""

from __future__ import annotations

import atexit
import json
import logging
import operator
import os
import socket
import threading
import weakref
from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import Any, Protocol

from duetime import _durable
from duetime._dead import FailedJob
from duetime._durable import MissingTask
from duetime._outcomes import Outcome, Outcomes
from duetime._timers import (
    DUE_SHIFT,
)
from duetime._validate import (
    NS_PER_SECOND,
    datetime_to_ns,
    name_hint,
    ns_to_datetime,
)
from duetime.clock import (
    NsClock,
    SteppableClock,
    real_monotonic,
    real_time_ns,
)
from duetime.errors import (
    ConflictingIdError,
    InvalidArgument,
    JobLookupError,
    StoredError,
    StoreError,
)
from duetime.events import (
    Event,
    JobLost,
)
from duetime.job import (
    Job,
    JobHost,
    JobOptions,
    JobState,
    Misfire,
    Occ,
    Overlap,
    fire_key_at,
    new_job,
)
from duetime.job import Side as _Side
from duetime.policy import Verdict
from duetime.ratelimit import TokenBucket
from duetime.recurrence import MONOTONIC, At
from duetime.runner import RunnerLike
from duetime.stats import StatsRecorder
from duetime.stores import codec
from duetime.stores.base import SOLO_SKIP, SOLO_WAIT, ClaimAnswer, ClaimAsk, SettleAsk
from duetime.stores.memory import MemoryStore
from duetime.stores.postgres import PostgresStore
from duetime.stores.records import (
    DEFINITION,
    ENDED_STATES,
    JobRow,
)
from duetime.stores.sqlite import SQLiteStore

__all__ = ["Host", "Replica"]

logger = logging.getLogger("duetime")

_RUNNING = JobState.RUNNING
_CANCELLED = JobState.CANCELLED
# A job's resting state by the name a row stores.
_ENDED_STATE = {state: JobState(state) for state in ENDED_STATES}
# Why retry_failed() cannot queue a dead letter whose id a live job has taken (it has no
# replace=True to point at).
_LIVE_AGAIN = (
    "a live job has that id now: cancel it first, or drop the dead letter (discard_failed)"
)
# How long a run waits before its claim is tried again when another process was changing its
# job at that moment (nanoseconds).
_BUSY_BACKOFF = NS_PER_SECOND // 4
# warn_twin looks for a copy of a job scheduled without id= in a process's first this many
# such calls, while it holds at most _TWIN_JOBS jobs (a scan of them each).
_TWIN_CHECKS = 100
_TWIN_JOBS = 10_000
# How long the interpreter's exit waits for a busy scheduler's lock (seconds).
_EXIT_LOCK_WAIT = 5.0
# How long a process's word of the tasks it runs lasts in the store (said again before then).
_WORKER_TTL = 60 * NS_PER_SECOND
# How many due fires the thread runner claims at once from a durable store (one round trip and
# one commit on PostgreSQL, with the outcomes of the batch before). More amortizes the
# statement's cost: a claim of 16 costs nearly what one of 64 does, and a burst of quick jobs
# runs twice as fast in batches of 128 as of 16. Fewer leaves more of a burst to the other
# workers when jobs are long and run inline. So a burst starts at _CLAIM_FIRST; the next batch
# is twice as large while a full batch was dispatched (run, when inline) within _CLAIM_QUICK real
# seconds, half as large (not below _CLAIM_FIRST) when it took four times that. A batch that
# took everything due ends the burst.
_CLAIM_FIRST = 16
_CLAIM_MOST = 256
_CLAIM_QUICK = 0.005
# How long after the outbox was last written (with a batch's claims, or alone) a finished run's
# outcome may wait in it to be written with others (nanoseconds). Waiting saves a commit per run;
# what waits runs again after a crash.
_OUTBOX_WAIT = NS_PER_SECOND // 100


class Host(JobHost, Protocol):
    """What the replica uses of the scheduler that composes it."""

    _clock: NsClock
    _lock: threading.RLock
    _cond: threading.Condition
    _lease: int
    _tz: tzinfo
    _stats: StatsRecorder
    _tasks: dict[str, Callable[..., Any]]
    _import_tasks: tuple[str, ...]
    _executors_spec: dict[str, Any]
    _overlap: Overlap
    _pending_events: list[Event]
    _runner: RunnerLike | None
    _running_total: int
    _shutdown: bool

    def _abandon(
        self,
        occ: Occ,
        failed: bool = False,
        give_back: bool = False,
        lost: bool = False,
        interrupted: bool = False,
    ) -> None: ...

    def _begin(self, key: Any, tb: int, due: int, wall: int, mono: int) -> Occ | None: ...

    def _call(
        self, occ: Occ, contained: bool = False
    ) -> tuple[Occ, Any, Exception | None] | None: ...

    def _drop_side(self, side: _Side) -> None: ...

    def _finish_locked(self, done: tuple[Occ, Any, Exception | None]) -> None: ...

    def _mark_resumed(self, job: Job) -> None: ...

    def _now_dt(self) -> datetime: ...

    def _observed(self) -> bool: ...

    def _push_regular(self, job: Job) -> None: ...

    def _push_side(self, side: _Side) -> None: ...

    def _queue_side(self, side: _Side, due_mono: int) -> None: ...

    def _report_missed(
        self, job: Job, base: int, tb: int, count: int, exact: bool, policy: Misfire
    ) -> None: ...

    def _revive(self, job: Job, id: str) -> None: ...

    def _run_to(self, clock: SteppableClock, target: int) -> int: ...

    @staticmethod
    def _set_params(
        job: Job,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None,
        name: str | None,
        priority: int,
        opts: JobOptions,
    ) -> None: ...

    def _come_to_rest(self, job: Job, failed: bool = False) -> None: ...

    def _skipped(self, job: Job, base: int, tb: int, reason: str) -> None: ...

    def _sort_dead(self) -> None: ...

    def _unqueue(self, job: Job) -> None: ...


class Replica:
    """A scheduler's replica of a durable store's jobs and the durable protocol (see the
    module's docstring)."""

    def __init__(self, host: Host, store: SQLiteStore | PostgresStore) -> None:
        self._s = host
        self._store = store
        # The host's parts this one uses; none of them is ever replaced.
        self._clock = host._clock
        self._lock = host._lock
        self._cond = host._cond
        self._lease = host._lease
        self._tz = host._tz
        self._stats = host._stats
        self._tasks = host._tasks
        self._import_tasks = host._import_tasks
        self._executors_spec = host._executors_spec
        self.task_of: dict[Any, str] = {}  # function -> task reference, for rows
        self.unresolved: dict[str, list[Job]] = {}  # task -> loaded jobs waiting for it
        self._warned_tasks: set[str] = set()
        self.hinted_tasks: set[str] = set()  # stored under a near miss of a registered name
        self._twin_checks = 0  # schedule() calls without id= checked for copies (warn_twin)
        self._warned_executors: set[str] = set()
        # Shut down without waiting: close the store once the runs still going have ended.
        self.close_when_idle = False
        # Executor names this process has not, that it stored jobs for (warned once each).
        self.stored_for_others: set[str] = set()
        self.next_poll = 0  # clock time of the next heartbeat / lease scan
        self._requeue = False  # queued fires were dropped from memory: take them in again
        self._announce_at = 0  # real epoch ns when this process next says which tasks it runs
        # Runs taken over from a lost worker and not started yet: this process holds their
        # leases too, so they are renewed like running ones.
        self._taken: set[_Side] = set()
        # Jobs this process could not read back from the store after a failed claim.
        self._unsure: set[Job] = set()
        # Ids of jobs a failed batch cancelled, to read back once the store answers.
        self.unsure_ids: set[str] = set()
        # Store failures of each kind ("claims", "polls", "lease upkeeps") since its last success:
        # the first of a row is logged as an ERROR, the rest (an outage retried every quarter
        # second for every due fire) at DEBUG, and the recovery once (_store_failed).
        self._failing: dict[str, int] = {}
        # The dead letters last seen in the store, id -> failed_at (ns, to the microsecond)
        # (sync_dead): only those may be dropped from memory when the store no longer has them
        # (taken elsewhere); a letter of this process not written yet (its outcome waits in the
        # outbox, or is owed) is not.
        self._dead_stored: dict[str, int] = {}
        # Runs' outcomes on their way to the store.
        self.outcomes = Outcomes(self, store)
        # The runner's batch size, and when (real seconds) the last full batch was claimed:
        # None if the last batch took everything due.
        self._claim_limit = _CLAIM_FIRST
        self._full_since: float | None = None
        self._next_purge = 0
        # Misfires this process computed and reports only if it moves the job on (_missed):
        # id(job) -> _report_missed's arguments.
        self.missed_held: dict[int, tuple[Any, ...]] = {}

    def trigger(self, side: _Side, wall: int, mono: int) -> Occ | None:
        """``trigger()`` without a runner, on a durable store: claim ``side`` and return it to
        run here. A claim that could not be made is not dropped: if another process held the
        job's row this instant, the fire is enqueued as a queued run (this process's next
        turn, or any worker, runs it); if the store failed, its ``StoreError`` is raised and
        nothing is left behind. Lock held."""
        won, answer = self._claim_one(side, MONOTONIC, mono, wall, mono, quiet=True, hold=False)
        if won is not None or answer is None or (type(answer) is tuple and answer[0] != "busy"):
            return won
        job = side.job
        if job._sides and side in job._sides:  # (the job could not be read back)
            self._s._drop_side(side)
        if isinstance(answer, StoreError):
            raise answer
        if self._store.contains(job):
            self.enqueue_trigger(job, side, wall)
        return None

    def enqueue_trigger(self, job: Job, side: _Side, wall: int) -> None:
        """Record a ``trigger()`` fire as a queued run, as ``backfill`` does, and queue it here
        (lock held). Not as a pending side in the job's row: a worker running the job meanwhile
        writes the row from what it knew, which would drop the fire."""
        key = side.key
        assert key is not None
        if key in self._store.enqueue(job.id, [(key, wall)]):
            self.queue_fire(job, key, wall, self._clock.time_ns())

    def call(self, occ: Occ, contained: bool = False) -> tuple[Occ, Any, Exception | None] | None:
        """``_call`` with a durable store: the run starts only if ``_may_start``."""
        if not self.may_start(occ):
            return None
        return self._s._call(occ, contained)

    def may_start(self, occ: Occ) -> bool:
        """With a durable store, whether a claimed run may start now (lock not held). One
        claimed more than half a lease ago (it waited in an executor's queue, behind a long
        batch, or this process stalled: SIGSTOP, a frozen VM) starts only if its record is
        still this process's; if another worker took it over meanwhile, it is abandoned here.
        (A fresh claim is not asked: that would cost a round trip per run.)"""
        fire = occ.fire
        if fire is None:
            return True
        now = self._clock.monotonic_ns()
        if now - occ.started <= self._lease // 2:
            return True
        with self._lock:
            try:
                held = self._store.start_held(fire, occ.attempt, now, self._lease)
            except StoreError as exc:
                logger.error("could not check run %s before it started: %s", fire, exc)
                return True  # (unknown: at-least-once start)
        if held:
            return True
        logger.warning(
            "run %s of job %r was taken over by another worker before it started here "
            "(claimed %.1f s ago, past its lease): not started",
            fire,
            occ.job.id,
            (now - occ.started) / NS_PER_SECOND,
        )
        self._s._abandon(occ)
        return False

    def sync_dead(self) -> None:
        """With a durable store, bring the dead letters in memory up to the store's: other
        processes add them (their jobs die there) and take them (retry, discard). Lock held.
        If the store cannot answer, what memory holds stands (the failure is logged)."""
        store = self._store
        if not store.is_open:
            return
        try:
            found = store.load_dead()
        except StoreError as exc:
            logger.error("could not read the dead letters from the store: %s", exc)
            return
        dead: dict[str, FailedJob] = store.dead
        # (failed_at is kept to the microsecond in memory: compared so.)
        kept: dict[str, int] = {record[0]: record[6] // 1000 * 1000 for record in found}
        for id, seen in self._dead_stored.items():
            here = dead.get(id)
            # Taken elsewhere, and memory still holds the very letter the store had (not one
            # this process made since, for the same id, and has not written yet).
            if id not in kept and here is not None and datetime_to_ns(here.failed_at) == seen:
                MemoryStore.take_dead(store, id)  # (from memory only)
        added = False
        for record in found:
            here = dead.get(record[0])
            # New, or the same id died again elsewhere since: the store's is the later one.
            if here is None or datetime_to_ns(here.failed_at) < kept[record[0]]:
                self._restore_dead(*record)
                added = True
        self._dead_stored.clear()
        self._dead_stored.update(kept)
        if added:
            self._s._sort_dead()

    def retry_failed(self, id: str, entry: FailedJob) -> None:
        """``retry_failed`` on a durable store (lock held): the letter taken and the job
        written in one transaction, as a new job (an id another process has taken meanwhile
        is refused, ConflictingIdError); if the store refuses, the letter stays, here too."""
        job = entry.job
        if type(job.func) is MissingTask:
            # Letters load with the store, before the application registers its tasks.
            func = self.resolve(job.func.task)
            if func is not None:
                task = job.func.task
                job.func = func
                self.name_task(job, task)
        store = self._store
        trigger, state = job._trigger, job._state
        attempt = None if job._x is None else job._x.attempt
        self._s._revive(job, id)
        try:
            with store.batch():
                MemoryStore.take_dead(store, id)
                # Gone from the store though it was there: another process took it (retried
                # or discarded it) after this one last looked. (One this process has not
                # written yet, its outcome waiting, is not in the store: it goes on.)
                if not store.delete_dead(id) and id in self._dead_stored:
                    raise JobLookupError(id, "failed job")
                row = self.row(job)
                if row.next_base is not None:
                    # Asked for again at the instant it died, the fire has the dead one's key:
                    # that record gives way (the user asked for the run), or the new fire would
                    # be taken for one already done and complete without running.
                    store.reopen_key(fire_key_at(id, row.next_base))
                store.insert_new([row], self._clock.time_ns())
        except BaseException as exc:
            self._s._unqueue(job)
            store.forget(job)
            job._trigger, job._state = trigger, state
            job._extras().attempt = attempt
            if isinstance(exc, JobLookupError):
                self._dead_stored.pop(id, None)
            elif id not in store.dead:
                MemoryStore.put_dead(store, id, entry)
                self._s._sort_dead()
            if isinstance(exc, ConflictingIdError):
                raise ConflictingIdError(id, _LIVE_AGAIN) from None
            raise

    @property
    def store(self) -> SQLiteStore | PostgresStore:
        """The durable store this replica keeps."""
        return self._store

    @property
    def poll_ns(self) -> int:
        """How often the store asks to be polled (nanoseconds)."""
        return self._store.poll_ns

    def open(self) -> None:
        """Open the store, load its jobs and dead letters (at construction)."""
        store = self._store
        worker = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"
        store.open(worker)
        # At interpreter exit without shutdown(): the runner's thread is a daemon, and dies
        # with its finished runs' outcomes unwritten (they would run again after their lease).
        # (A weak reference: the hook must not keep a dropped scheduler alive.)
        self_ref = weakref.ref(self)

        def at_exit() -> None:
            s = self_ref()
            if s is not None:
                s._at_exit()

        self._exit_hook = at_exit
        atexit.register(at_exit)
        with self._lock:
            now = self._clock.time_ns()
            load = self._load_row
            for row in store.load_rows():
                load(row, now)
            if self._import_tasks:  # (a worker that registers nothing, importing its tasks)
                self.announce()
            for id, job_json, error, tb, attempts, due, failed_at in store.load_dead():
                self._restore_dead(id, job_json, error, tb, attempts, due, failed_at)
                self._dead_stored[id] = failed_at // 1000 * 1000
            self._load_queued(now)

    def announce(self) -> None:
        """Tell the store which tasks this process runs (lock held), for the command line's
        "no worker has registered this task"; said again at polls, before it lapses."""
        names = set(self._tasks)
        for func in self._tasks.values():
            module = getattr(func, "__module__", None)
            qualname = getattr(func, "__qualname__", None)
            if isinstance(module, str) and isinstance(qualname, str):
                names.add(f"{module}:{qualname}")
        now = real_time_ns()
        # ("at": when it was said, the worker's last heartbeat for the dashboard.)
        tasks = json.dumps(
            {"names": sorted(names), "prefixes": list(self._import_tasks), "at": now}
        )
        # Lapses after three polls unsaid (a crashed or stopped process), and not under a
        # minute: a process that polls seldom, or not at all, still counts for a while.
        ttl = max(3 * min(self._store.poll_ns, self._lease // 3), _WORKER_TTL)
        self._store.announce(tasks, now + ttl)
        self._announce_at = now + ttl // 3

    def resolve(self, task: str) -> Callable[..., Any] | None:
        return codec.resolve_task(task, self._tasks, self._import_tasks)

    def check_storable(
        self,
        func: Callable[..., Any],
        trigger: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None,
        id: str | None,
        name: str | None,
        limiter: TokenBucket | None,
        task_name: str | None,
    ) -> tuple[str, str]:
        """Refuse, before anything changes, what a durable store cannot keep. Returns the task
        reference (``task_name``, the name asked for, if the function has several) and the
        arguments as JSON."""
        ref = codec.task_reference(func, self._tasks) if task_name is None else task_name
        args_json = codec.dumps_args(args, kwargs)
        if type(trigger) is not float and type(trigger) is not int:
            _durable.trigger_json(At(trigger) if type(trigger) is datetime else trigger)
        _durable.check_limiter(limiter)
        nul = not self._store.keeps_nul
        for param, text in (("id", id), ("name", name), ("task", ref)):
            if not isinstance(text, str):
                continue  # (None, or a wrong type: refused below, naming the type)
            if nul and "\x00" in text:
                raise InvalidArgument(
                    f"{param} must not contain NUL characters (PostgreSQL cannot store them "
                    f"in text), got {text!r}"
                )
            try:
                size = len(text.encode())
            except UnicodeEncodeError:
                raise InvalidArgument(
                    f"{param} cannot be stored: it is not UTF-8 text (a lone surrogate), "
                    f"got {text!r}"
                ) from None
            most = self._store.id_bytes_most
            if param == "id" and most is not None and size > most and text not in self._store.index:
                # (An id stored already, by an earlier version that had no limit, stands: its
                # index entry fit, compressed.)
                raise InvalidArgument(
                    f"id must be at most {most} bytes of UTF-8 on this store (it is indexed), "
                    f"got {size} bytes: {text[:40]!r}..."
                )
        return ref, args_json

    def declared_again(
        self,
        stored: Job,
        func: Callable[..., Any],
        trigger: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any] | None,
        name: str | None,
        priority: int,
        opts: JobOptions,
        ref: str,
        paused: bool,
    ) -> bool:
        """Whether ``replace=True`` asks for exactly what the stored job is (lock held): every
        copy of an application declaring its schedule at start-up. Then the job is left as it
        stands: its next fire, a ``RUN_ALL`` backlog after downtime, a pause made elsewhere.
        (Replacing it would start it afresh from now and drop what fell due meanwhile.)"""
        if paused and stored._state is not JobState.PAUSED:
            return False
        asked = new_job(self._s, func, trigger)
        asked._id = stored._id
        self._s._set_params(asked, func, args, kwargs, name, priority, opts)
        definition = operator.attrgetter(*DEFINITION)
        return definition(_durable.job_row(asked, ref)) == definition(self.row(stored))

    def row(self, job: Job) -> JobRow:
        func = job.func
        if type(func) is MissingTask:
            return _durable.job_row(job, func.task)
        x = job._x
        if x is not None and x.task is not None:
            return _durable.job_row(job, x.task)
        return _durable.job_row(job, self._task_ref(func))

    def _task_ref(self, func: Callable[..., Any]) -> str:
        """How rows name ``func`` by default: its first registered name, else its
        ``module:qualname`` (cached)."""
        ref = self.task_of.get(func)
        if ref is None:
            ref = self.task_of[func] = codec.task_reference(func, self._tasks)
        return ref

    def name_task(self, job: Job, ref: str) -> None:
        """Keep ``job`` under task name ``ref``: remembered on the job if its function's
        default name is another (a function registered under several names)."""
        if type(job.func) is MissingTask:
            return  # (named by its task: rows take it from there)
        x = job._x
        if ref != self._task_ref(job.func):
            job._extras().task = ref
        elif x is not None:
            x.task = None

    def insert(self, job: Job, ref: str, args_json: str) -> None:
        """Write a new job's row (lock held); undo the in-memory add if the store refuses."""
        self.name_task(job, ref)
        if ref not in self._tasks and ":" in ref and type(job.func) is not MissingTask:
            # A function passed in this process runs here under its module:qualname.
            self._tasks.setdefault(ref, job.func)
        try:
            _durable.check_storable(job)
            taken = self._store.insert_new(
                [_durable.job_row(job, ref, args_json)], self._clock.time_ns()
            )
        except BaseException:
            self.drop_local(job)
            raise
        if taken:
            self.drop_local(job)
            raise ConflictingIdError(taken[0])

    def warn_twin(self, job: Job, ref: str, args_json: str) -> None:
        """Warn if ``job``, scheduled without ``id=``, is a copy (task, arguments, trigger) of
        a job the store holds already (lock held): a start-up script that schedules without
        ids adds one more copy at every restart. Checked for a process's first
        ``_TWIN_CHECKS`` such calls outside a ``batch()`` (start-up is where it happens), while
        it holds at most ``_TWIN_JOBS`` jobs, so that the check never costs a busy process."""
        if (
            self._twin_checks >= _TWIN_CHECKS
            or self._store.batch_open
            or self._store.count() > _TWIN_JOBS
        ):
            return
        self._twin_checks += 1
        trigger = job._trigger
        for other in self._store.jobs():
            if other is job or other._trigger != trigger:
                continue
            row = self.row(other)
            if row.task == ref and row.args == args_json:
                logger.warning(
                    "job %r is a copy of job %r (the same task %r, arguments and trigger), "
                    "scheduled without id=: a script that runs at every start adds one more "
                    "each time; pass id= to declare the job once (with replace=True to update "
                    "it)",
                    job._id,
                    other._id,
                    ref,
                )
                return

    def load_live(self, id: str) -> bool:
        """Load live job ``id`` from the store into memory (lock held); whether it was there.

        Raises:
            ConflictingIdError: The store holds it live, but it cannot be loaded here.
        """
        try:
            row = self._store.load_row(id)
        except StoreError:
            return False
        if row is None or row.state in ENDED_STATES:
            return False
        self._restore(None, row, self._clock.time_ns())
        if self._store.get(id) is None:
            raise ConflictingIdError(
                id,
                "the store holds a job under it that this process cannot load (the warning "
                "logged when it was read says why), so it cannot replace it: replace it from a "
                "process that can load it, or cancel it there",
            )
        return True

    def drop_local(self, job: Job) -> None:
        self._s._unqueue(job)
        job._state = JobState.CANCELLED
        self._store.forget(job)

    def save(self, job: Job, before: JobRow, drop_retries: bool = False) -> None:
        """Write a job's row after a change (lock held). If the store fails, the job is put
        back as ``before`` (its row before the change: the store, which refused, may not be
        there to read it back from) and the error raised. ``drop_retries``: the change
        dropped the job's pending retries (SQLStore.write)."""
        if self.outcomes.outbox:
            # Outcomes first: the change is written after the runs that ended before it (and
            # a read back, below, then finds them counted, not a copy without them).
            self.outcomes.flush()
        try:
            _durable.check_storable(job)
            differ = self._store.write([self.row(job)], self._clock.time_ns(), drop_retries)
        except BaseException:
            # (A StoreError, or InvalidArgument: a time the store cannot hold.)
            self._restore(job, before, self._clock.time_ns())
            raise
        if differ:
            # (The store kept its counters, or ended a run this copy saw going: read back.)
            self.reload(job)

    def _save_quiet(self, job: Job) -> None:
        """Write the progress of a job the runner moved on without running it (a fire
        skipped, or run elsewhere): only its progress, and not over a cancel, pause or resume
        made meanwhile elsewhere (as an outcome). A failure is logged, not raised, and the
        job read back."""
        held = self.missed_held.pop(id(job), None)
        try:
            written = self._store.write_progress(
                [self.row(job)],
                self._clock.time_ns(),
                None if held is None else [held[1]],
            )
        except StoreError as exc:
            logger.error("could not record job %r: %s", job._id, exc)
            self.reload(job, quiet=True)
            return
        # (Skipped misfires are this process's to report if its write moved the job on from
        # the fire it popped: another process that skipped them too wrote first otherwise.)
        if held is not None and written[0]:
            self._s._report_missed(*held)

    def reload(self, job: Job, row: JobRow | None = None, quiet: bool = False) -> None:
        """Read a job back from the store (unless its ``row`` was read already), dropping what
        this process believed. ``quiet``: a failure is not logged (the caller did)."""
        if row is None:
            try:
                row = self._store.load_row(job.id)
            except StoreError as exc:
                # What this process believes of the job may be wrong (a claim that failed left
                # it at its next fire): read it again once the store answers.
                if not quiet:
                    logger.error(
                        "could not read job %r back from the store (trying again at the next "
                        "poll): %s",
                        job._id,
                        exc,
                    )
                self._unsure.add(job)
                return
        self._unsure.discard(job)
        if row is None:
            self.drop_local(job)
            return
        self._restore(job, row, self._clock.time_ns())

    def _load_row(self, row: JobRow, now: int) -> None:
        """``_restore`` of a live job's row as the store is opened (lock held): the common
        case, a job with no side occurrences, kept short (a worker opening a store of a hundred
        thousand jobs pays each line that many times before it claims anything)."""
        if row.sides is not None or row.id in self._store.index:
            self._restore(None, row, now)
            return
        job = new_job(self._s, None, None)  # type: ignore[arg-type]
        try:
            _durable.apply_row(job, row, self.resolve)
            func = job.func
            if type(func) is not MissingTask:
                # (May raise: a function import_tasks= found that no name reaches.)
                self.name_task(job, row.task)
        except Exception as exc:  # (a row is data: whatever is wrong with it, never fatal)
            self._quarantine(row, exc)
            return
        if type(func) is MissingTask:
            self.unresolved.setdefault(func.task, []).append(job)
        self._store.add(job, row.id)
        if job._due is not None and job._state is not JobState.PAUSED:
            self._s._push_regular(job)

    def _restore(self, job: Job | None, row: JobRow, now: int) -> None:
        """Make the in-memory job match ``row`` (a new Job if ``job`` is None), queued."""
        store = self._store
        if job is None:
            job = store.get(row.id)
        if row.state in ENDED_STATES:
            store.quarantine.discard("jobs", row.id)
            if job is not None:
                self._drop_ended(job, row.state, now)
            return
        fresh = job is None
        held: list[str] = []  # the fire keys of the sides this process held
        # Runs this process took over from a lost worker and has not started: the row never
        # holds them (their run records do, with this process's lease), so they are kept
        # across the read, or nobody would run them while the heartbeat renewed their lease.
        taken: list[_Side] = []
        if job is None:
            job = new_job(self._s, None, None)  # type: ignore[arg-type]
        else:
            held = [self._fire_of(x) for x in job._sides or () if x.claimed != 1]
            taken = [x for x in job._sides or () if x.claimed == 1]
            self._s._unqueue(job)
        running = job._running
        was_paused = job._state is JobState.PAUSED
        try:
            _durable.apply_row(job, row, self.resolve)
            if type(job.func) is not MissingTask:
                self.name_task(job, row.task)
            sides = _durable.sides_of(job, row, now)
        except Exception as exc:  # (a row is data: whatever is wrong with it, never fatal)
            self._quarantine(row, exc)
            if not fresh:
                self.drop_local(job)
            return
        store.quarantine.discard("jobs", row.id)
        if not fresh and was_paused and row.state != "paused":
            self._s._mark_resumed(job)  # (resumed by another process)
        if running:
            job._state = JobState.PAUSED if row.state == "paused" else _RUNNING
        job._sides = sides or None
        if held:
            # Sides the row does not record are dropped here: fires queued in the store's runs
            # (backfill, trigger), which the row never holds, and retries another process
            # wrote out of it from a stale copy.
            kept = {self._fire_of(x) for x in sides}
            self._load_at_next_poll([key for key in held if key not in kept])
        if fresh:
            store.add(job, row.id)
        if type(job.func) is MissingTask:
            self.unresolved.setdefault(job.func.task, []).append(job)
        if job._state is not JobState.PAUSED:
            if job._due is not None:
                self._s._push_regular(job)
            for side in sides:
                self._s._push_side(side)
        if taken:
            have = {self._fire_of(x) for x in sides}
            mono = self._clock.monotonic_ns()
            for x in taken:
                if self._fire_of(x) not in have:
                    self._s._queue_side(x, mono)

    def cancel_unreadable(self, id: str) -> bool:
        """Cancel job ``id`` if the store holds it live but this process cannot load it (lock
        held): the only change such a row takes. Whether it was live."""
        store = self._store
        if ("jobs", id) not in store.quarantine:
            return False
        return bool(store.cancel_unreadable(id, self._clock.time_ns()))

    def _quarantine(self, row: JobRow, exc: Exception) -> None:
        """Skip a live job's row that this process cannot load, with a WARNING (once) naming
        the store, the table and the id; ``unreadable()`` lists it, ``cancel`` removes it."""
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, RecursionError):
            reason = "a value nested too deeply"
        self._store.quarantine.add("jobs", row.id, reason)

    def _drop_ended(self, job: Job, state: str, now: int) -> None:
        """Drop the in-memory ``job``: the store says it ended (``state``, one of
        ``ENDED_STATES``) in another process (lock held)."""
        for x in job._sides or ():
            if x.claimed == 1:  # taken over here, not started: nobody will run it
                self._mark_lost_quiet(self._fire_of(x), now)
        self._s._unqueue(job)
        job._state = _ENDED_STATE[state]
        self._store.forget(job)

    def _mark_lost_quiet(self, key: str, now: int) -> None:
        """Record a run this process took over as lost (its job ended meanwhile); a failure is
        logged (the lease then runs out, and the next taker finds the job ended)."""
        try:
            self._store.mark_lost(key, now)
        except StoreError as exc:
            logger.error("could not record run %s as lost: %s", key, exc)

    def _restore_dead(
        self, id: str, job_json: str, error: str, tb: str, attempts: int, due: int, at: int
    ) -> None:
        job = new_job(self._s, None, None)  # type: ignore[arg-type]
        try:
            record = codec.load_json(job_json, "job")
            if type(record) is not dict:
                raise ValueError("job is not an object")
            _durable.apply_row(job, JobRow(**record), self.resolve)
            job._state = JobState.FAILED
            letter = FailedJob(
                job,
                _durable.parse_error(error) or StoredError("Error", ""),
                tb,
                attempts,
                ns_to_datetime(due, self._tz),
                ns_to_datetime(at, self._tz),
            )
        except Exception as exc:  # (a record is data: whatever is wrong with it, never fatal)
            self._store.quarantine.add("dead", id, str(exc) or type(exc).__name__)
            return
        MemoryStore.put_dead(self._store, id, letter)

    def _load_at_next_poll(self, keys: list[str]) -> None:
        """Have the next poll take ``keys`` in again from the store's runs, those still queued
        or with a retry pending (lock held): fires dropped from memory that the job's row does
        not hold."""
        if keys:
            self._store.forget_queued(keys)
            self._requeue = True

    def _load_queued(self, now: int) -> None:
        """Queue the fires that ``backfill`` or ``trigger`` (here or in another process)
        enqueued, and the pending retries this process does not hold (a process writing their
        job's row from a stale copy dropped them from it: the failed run's record keeps them)."""
        for key, job_id, due, attempt, retry in self._store.queued_runs():
            job = self._store.get(job_id)
            if job is None:
                continue
            if retry is None:
                self.queue_fire(job, key, due, now)
            elif not any(self._fire_of(x) == key for x in job._sides or ()):
                self._s._queue_side(
                    _Side(job, due, MONOTONIC, attempt + 1, None, False, key), retry
                )

    def queue_fire(self, job: Job, key: str, due: int, now: int) -> None:
        """Queue a fire recorded as queued in the store's runs (a backfill), due now: at its
        own time if that is past, so that fires enqueued by separate backfills (or before a
        restart) run oldest first, as one backfill's do."""
        side = _Side(job, due, MONOTONIC, 1, None, False, key)
        side.claimed = 2  # kept in the store's runs, not in the job's row
        self._s._queue_side(side, min(due, now))

    def refresh(self) -> None:
        """Read other processes' changes to the jobs (takes the lock): PostgreSQL's listening
        thread calls it when notified. It gives up once the scheduler is shut down: shutdown
        closes the store holding the lock and waits for that thread, which must not be
        waiting for the lock meanwhile."""
        lock = self._lock
        while not lock.acquire(timeout=0.05):
            if self._s._shutdown:
                return
        try:
            self.sync_locked(full=False)
        finally:
            lock.release()

    def sync_locked(self, full: bool = True) -> None:
        """Read other processes' changes (lock held); with ``full``, also renew this process's
        leases, take over runs whose lease ran out and delete old records, when due."""
        store = self._store
        if not store.is_open:
            return  # shut down: what is in memory is the last word
        try:
            changes = store.changed_rows()
            now = self._clock.time_ns()
            if changes is not None:
                rows, ended = changes.rows, changes.ended
                if (rows or ended) and (self.outcomes.outbox or self.outcomes.owed):
                    rows, ended = self.outcomes.settle_first(rows, ended)
                get = store.get
                for id, state in ended:
                    store.quarantine.discard("jobs", id)
                    job = get(id)
                    if job is not None:
                        self._drop_ended(job, state, now)
                for row in rows:
                    self._restore(None, row, now)
            if changes is not None or self._requeue:
                self._requeue = False
                self._load_queued(now)
            for job in list(self._unsure):
                if store.contains(job):
                    self.reload(job)
                else:
                    self._unsure.discard(job)
            for id in list(self.unsure_ids):
                self.load_missing(id)
                self.unsure_ids.discard(id)
            if self._failing:
                self._store_answered("polls")
        except StoreError as exc:
            # The runner keeps going: the next poll tries again. The leases are renewed all
            # the same (a connection cut as the changes were read is reopened for it): with
            # this read failing at every poll, runs going here lost their leases and ran twice.
            self._store_failed("polls")("%s", exc)
        try:
            now = self._clock.time_ns()
            if full and now >= self.next_poll:
                self.next_poll = now + min(store.poll_ns, self._lease // 3)
                if self.outcomes.owed:
                    self.outcomes.pay_owed()
                if self._taken:
                    self._taken = {x for x in self._taken if x in (x.job._sides or ())}
                if self._s._running_total or self._taken:
                    store.heartbeat(now, self._lease)
                self._take_over_lost(now)
                if (self._tasks or self._import_tasks) and real_time_ns() >= self._announce_at:
                    self.announce()
                if now >= self._next_purge:
                    self._next_purge = now + 3600 * NS_PER_SECOND
                    store.purge(now)
                if self._failing:
                    self._store_answered("lease upkeeps")
        except StoreError as exc:
            # The runner keeps going: the next poll tries again.
            self._store_failed("lease upkeeps")("%s", exc)

    def _take_over_lost(self, now: int) -> None:
        """Take over the runs whose lease ran out (lock held; a store's failure propagates)."""
        for key, job_id, due, attempt, worker in self._store.expired(now):
            self._take_over(key, job_id, due, attempt, worker, now)

    def renew_locked(self) -> None:
        """Renew the leases of the runs going on here when a poll is due (lock held): all of
        ``sync_locked``'s upkeep that a stopping runner wants while it waits for them (it
        must not take other workers' lost runs over, nor read their changes)."""
        store = self._store
        if not store.is_open or not (self._s._running_total or self._taken):
            return
        now = self._clock.time_ns()
        if now < self.next_poll:
            return
        self.next_poll = now + min(store.poll_ns, self._lease // 3)
        try:
            store.heartbeat(now, self._lease)
        except StoreError as exc:
            self._store_failed("lease upkeeps")("%s", exc)

    def _store_failed(self, kind: str) -> Callable[..., None]:
        """How to log a store failure of ``kind``: ``logger.error`` for the first since the
        last success of that kind, ``logger.debug`` for the rest."""
        count = self._failing.get(kind, 0)
        self._failing[kind] = count + 1
        return logger.debug if count else logger.error

    def _store_answered(self, kind: str) -> None:
        """A store call of ``kind`` went through: after failures, say so once."""
        count = self._failing.pop(kind, 0)
        if count > 1:
            logger.warning(
                "%s go through again, after %d failures (the first logged as an error, the "
                "others at DEBUG)",
                kind,
                count,
            )

    def load_missing(self, id: str) -> None:
        """Load job ``id`` from the store into memory, where it is missing, if the store has it
        live (lock held; a store's failure propagates)."""
        row = self._store.load_row(id)
        if row is not None and row.state not in ENDED_STATES and id not in self._store.index:
            self._restore(None, row, self._clock.time_ns())

    def _take_over(
        self, key: str, job_id: str, due: int, attempt: int, worker: str | None, now: int
    ) -> None:
        store = self._store
        job = store.get(job_id)
        if job is None:
            row = store.load_row(job_id)
            if row is None or row.state in ENDED_STATES:
                store.mark_lost(key, now)
            return
        if type(job.func) is MissingTask or self._lacks(job._opts.executor):
            return  # a process that runs this task (on that executor) will take it
        if worker == store.worker and job._running:
            return  # still running here: a late heartbeat, not a lost run
        if not store.take_over(key, worker, attempt, now, self._lease):
            return
        logger.warning(
            "run %s of job %r was lost by worker %s (its lease ran out, or it gave the run "
            "back at shutdown); running it again, attempt %d",
            key,
            job_id,
            worker,
            attempt + 1,
        )
        side = _Side(job, due, MONOTONIC, attempt + 1, None, False, key)
        side.claimed = 1
        self._taken.add(side)
        if job._state is JobState.RUNNING and not job._running:
            job._state = JobState.SCHEDULED
        # At its own due time, long past: it goes before the job's later fires that waited for
        # its lease to run out (Overlap.QUEUE, a RUN_ALL backlog), as it would have run first.
        self._s._queue_side(side, min(due, now))
        if self._s._observed():  # (rare, and reached from a poll, before any claim refreshed it)
            self._s._pending_events.append(
                JobLost(
                    job_id,
                    self._s._now_dt(),
                    ns_to_datetime(due, self._tz),
                    attempt + 1,
                    key,
                    worker,
                )
            )

    def _park(self, job: Job) -> None:
        """A due occurrence of a task this process has not registered: keep it for a process
        that has (or for ``register``), and say so once."""
        task = job.func.task  # type: ignore[attr-defined]
        waiting = self.unresolved.setdefault(task, [])
        if job not in waiting:
            waiting.append(job)
        if task not in self._warned_tasks:
            self._warned_tasks.add(task)
            logger.warning(
                "job %r is due but its task %r is not registered in this process; it stays "
                "pending (register the task, or allow its module with import_tasks=)%s",
                job._id,
                task,
                name_hint(task, self._tasks),
            )

    def _lacks(self, executor: str | None) -> bool:
        """Whether this process's runner cannot run a job of ``executor`` (its name, None for
        the default): a durable store's job of an executor another process has and this one
        does not. (Without a runner, jobs run in the calling thread: nothing is missing.)"""
        return (
            executor is not None
            and self._s._runner is not None
            and executor not in self._executors_spec
        )

    def _leave_to_others(self, job: Job, executor: str) -> None:
        """A due occurrence of a job whose executor this process does not have (another
        process stored it with ``executor=``): it is not claimed here, and stays pending for a
        process that has one of that name (or until the job changes). Said once per name."""
        if executor not in self._warned_executors:
            self._warned_executors.add(executor)
            logger.warning(
                "job %r is due but its executor %r is not one of this process's executors "
                "(Scheduler(executors=...)); it stays pending for a process that has it",
                job._id,
                executor,
            )

    def unpark(self) -> None:
        """A task was registered: give the jobs waiting for any task that now resolves (its
        name, or a ``"module:qualname"`` naming the same function) the function, and queue
        them."""
        for task in list(self.unresolved):
            func = self.resolve(task)
            if func is None:
                continue
            for job in self.unresolved.pop(task):
                if not self._store.contains(job):
                    continue
                job.func = func
                self.name_task(job, task)
                if job._state is not JobState.PAUSED:
                    # (A job loaded before its task was registered is still queued: only one
                    # popped and parked meanwhile needs queueing again.)
                    if job._due is not None and job._qkey is None:
                        self._s._push_regular(job)
                    for side in job._sides or ():
                        if side.due is not None and side._qkey is None:
                            self._s._push_side(side)

    def begin(self, key: Any, tb: int, due: int, wall: int, mono: int) -> Occ | None:
        """``_begin`` with a durable store: decide as in memory, then claim the run from the
        store; if another process has it, read the job back instead."""
        return self._claim_one(key, tb, due, wall, mono)[0]

    def _claim_one(
        self,
        key: Any,
        tb: int,
        due: int,
        wall: int,
        mono: int,
        quiet: bool = False,
        hold: bool = True,
    ) -> tuple[Occ | None, ClaimAnswer | None]:
        """Decide one popped entry and claim it alone: the occurrence to run (None if not),
        and the store's answer (None if nothing was asked of it). ``hold``: see ``_claimed``."""
        # Inside a batch, its new jobs' rows go in first, before memory changes for the claim:
        # an id taken elsewhere then raises with nothing to undo but the entry's pop (the job
        # is read back, queued again).
        try:
            self._store.insert_pending()
        except BaseException:
            self.reload(key if type(key) is Job else key.job, quiet=True)
            raise
        prepared = self._prepare_claim(key, tb, due, wall, mono)
        if prepared is None:
            return None, None
        occ, ask = prepared
        if ask is None:
            return occ, None
        (answer,) = self._store.claim_many([ask])
        return self._claimed(key, occ, ask, answer, quiet, hold), answer

    def begin_due(self, wall: int, mono: int, most: int | None = None) -> list[Occ] | None:
        """The thread runner's ``pop_due`` and ``begin`` with a durable store: take what is
        due now (a batch of up to ``_claim_limit`` fires, one per job), decide each in memory,
        then claim them from the store together, in the transaction that writes the outcomes
        waiting in the outbox (one round trip and one commit on PostgreSQL, where a fire's
        claim and its outcome are otherwise most of its cost). Returns the occurrences to run
        (runs taken over from a lost worker first, then the claims won, in queue order); None
        if nothing was due (the outbox then waits). Lock held.

        The batch stops at a second entry of a job already in it (its next fire, due too): a
        job's fires are claimed one after the other, so that the next one's guard is the row
        the previous claim wrote.
        """
        store = self._store
        self._s._observed()
        head = store.head(wall, mono)
        if head is None or head[2] > mono:
            self._full_since = None
            return None
        store.insert_pending()  # (in a batch: see _claim_one)
        limit = self._batch_limit()
        if most is not None:
            limit = min(limit, most)
        # The outcomes waiting to be written go with the claims, in the same transaction; their
        # rows are taken now, before the claims move any job on (the claims' guards are what
        # these rows say).
        outcomes, self.outcomes.outbox = self.outcomes.outbox, []
        settle = self.outcomes.asks(outcomes)
        runs: list[Occ] = []
        asks: list[tuple[Any, Occ, ClaimAsk]] = []
        claiming: set[int] = set()  # id() of the jobs in asks
        # Jobs whose fire was skipped: their rows are written after the outcomes' (which are
        # older), not before.
        skipped: dict[int, Job] = {}
        while head is not None and head[2] <= mono and len(asks) < limit:
            tb, entry, _ = head
            key = store.key_of(tb, entry)
            job = key if type(key) is Job else key.job
            if id(job) in claiming or id(job) in skipped:
                # (A skipped job's row is written after the claims: a claim now would find the
                # row before the skip, lose, and read the skip back out of existence.)
                break
            store.take(tb, entry)
            prepared = self._prepare_claim(key, tb, entry >> DUE_SHIFT, wall, mono, skipped)
            if prepared is not None:
                occ, ask = prepared
                if ask is None:
                    runs.append(occ)
                else:
                    asks.append((key, occ, ask))
                    claiming.add(id(job))
            head = store.head(wall, mono)
        if asks or outcomes:
            runs += self._settle_and_claim(outcomes, settle, asks)
        for job in skipped.values():
            # (Also a job the skip ended: its row must say so, and its misfires be reported.)
            self._save_quiet(job)
        self.outcomes.written_at = self._clock.monotonic_ns()
        self._full_since = real_monotonic() if len(asks) == limit else None
        return runs

    def _batch_limit(self) -> int:
        """How many fires the next batch claims at most (lock held): _CLAIM_FIRST for the first
        of a burst, twice the last while full batches run quickly, half when they run slowly
        (see _CLAIM_FIRST)."""
        limit = self._claim_limit
        if self._full_since is None:
            limit = _CLAIM_FIRST
        else:
            spent = real_monotonic() - self._full_since
            if spent < _CLAIM_QUICK:
                limit = min(2 * limit, _CLAIM_MOST)
            elif spent > 4 * _CLAIM_QUICK:
                limit = max(limit // 2, _CLAIM_FIRST)
        self._claim_limit = limit
        return limit

    def _settle_and_claim(
        self,
        outcomes: list[Outcome],
        settle: list[SettleAsk],
        asks: list[tuple[Any, Occ, ClaimAsk]],
    ) -> list[Occ]:
        """Write ``outcomes`` and claim ``asks`` in one transaction, and act on the answers
        (lock held): the occurrences whose claim this process won, to run."""
        try:
            settled, answers = self._store.settle_and_claim(settle, [ask for _, _, ask in asks])
        except Exception:
            # Not the store's refusal (that is a StoreError answer): a bug. Put back what was
            # taken, so that the runner, which logs it and pauses, tries it all again.
            self.outcomes.outbox[:0] = outcomes
            for _, occ, _ in asks:
                occ.job._running -= 1
                self._s._running_total -= 1
                self.reload(occ.job)
            raise
        self.outcomes.after(outcomes, settle, settled)
        runs: list[Occ] = []
        lost = 0
        failed = [a for a in answers if isinstance(a, StoreError)]
        quiet = len(failed) > 1  # one line for the lot, below
        for (key, occ, ask), answer in zip(asks, answers, strict=True):
            won = self._claimed(key, occ, ask, answer, quiet)
            if won is not None:
                runs.append(won)
            elif type(answer) is tuple and answer[0] == "lost":
                lost += 1
        if quiet:
            self._store_failed("claims")(
                "could not claim %d runs (trying again in %.2g s): %s",
                len(failed),
                self._store.retry_in_ns() / NS_PER_SECOND,
                failed[0],
            )
        if lost * 2 > len(asks) >= 4:
            # Other workers are taking these fires: read what they took (one query) rather than
            # lose a claim for each of them.
            self.sync_locked(full=False)
        return runs

    def _prepare_claim(
        self,
        key: Any,
        tb: int,
        due: int,
        wall: int,
        mono: int,
        skipped: dict[int, Job] | None = None,
    ) -> tuple[Occ, ClaimAsk | None] | None:
        """The first half of ``Replica.begin``: decide in memory whether a popped entry runs
        now. Returns None if not, else its occurrence and the claim to make for it (None: this
        process holds the run already, a run taken over from a lost worker). A job whose fire
        is skipped is written now, or put in ``skipped`` for the caller to write."""
        regular = type(key) is Job
        job: Job = key if regular else key.job
        if type(job.func) is MissingTask:
            if not regular:
                key.due = due
            self._park(job)
            return None
        executor = job._opts.executor
        if executor is not None and self._lacks(executor):
            if not regular:
                key.due = due
            self._leave_to_others(job, executor)
            return None
        popped = job._base if regular else None
        catching_up = regular and job._x is not None and job._x.catchup
        occ = self._s._begin(key, tb, due, wall, mono)
        if occ is None:
            if skipped is None:
                self._save_quiet(job)
            else:
                skipped[id(job)] = job
            return None
        if not regular and key.claimed == 1:
            # A run taken over from a lost worker is this process's already; it starts here
            # unless a run of the job is going in another worker (then it waits, as any fire
            # of the job does, unless Overlap.ALLOW), or unless it is no longer this
            # process's: stalled past the lease while it waited, another worker took it over
            # in turn (it started in both, and twice here, a held copy of each attempt).
            wait = (job._opts.overlap or self._s._overlap) is not Overlap.ALLOW
            try:
                verdict = self._store.start_taken(
                    key.key, job.id, key.attempt, wall, self._lease, wait
                )
            except StoreError as exc:
                logger.error("could not start run %s taken over: %s", key.key, exc)
                verdict = "wait"
            if verdict != "start":
                job._running -= 1
                self._s._running_total -= 1
                if verdict == "wait":
                    self._s._queue_side(key, wall + _BUSY_BACKOFF)
                else:
                    self._taken.discard(key)
                    logger.warning(
                        "run %s of job %r, taken over here, was taken over again before it "
                        "started (this process stalled past its lease): not started",
                        key.key,
                        job.id,
                    )
                    self.reload(job)  # (as the store has it: the other worker's run going)
                    return None
                self._s._come_to_rest(job)
                return None
            self._taken.discard(key)
            return occ, None
        fire = occ.fire
        if fire is None:
            fire = fire_key_at(job.id, occ.due)
        # A regular fire of a recurring job under Overlap.SKIP is skipped, by the store, if a
        # run of the job is going in another process (in this one, _begin skipped it already);
        # one of a Misfire.RUN_ALL catch-up waits for that run to end instead ("busy"), as it
        # would in this process, or the backlog lost the fires that met it. Every other fire
        # but a one-shot job's own waits so (unless Overlap.ALLOW), as it is held in this
        # process: a recurring job's under Overlap.QUEUE, retries, trigger() runs and the runs
        # another process held back (they reach the others in the job's row).
        solo = 0
        overlap = job._opts.overlap or self._s._overlap
        if overlap is not Overlap.ALLOW:
            if not regular:
                solo = SOLO_WAIT
            elif job.trigger.recurring:
                if overlap is Overlap.SKIP:
                    catching_up = catching_up or (job._x is not None and job._x.catchup)
                    solo = SOLO_WAIT if catching_up else SOLO_SKIP
                else:
                    solo = SOLO_WAIT
        ask = (fire, job.id, occ.due, occ.attempt, wall, self._lease, self.row(job), popped, solo)
        return occ, ask

    def _claimed(
        self,
        key: Any,
        occ: Occ,
        ask: ClaimAsk,
        answer: ClaimAnswer,
        quiet: bool = False,
        hold: bool = True,
    ) -> Occ | None:
        """The second half of ``Replica.begin``: act on the store's answer to a claim (and
        the job's row, if the store read it back). Returns the occurrence to run if this
        process won it. ``quiet``: the caller logs a failure (of many claims at once).
        ``hold``: a claim that failed or met a busy row holds the job's fires back for a
        while (the runner's claims); not for ``trigger()``, whose caller is told, and whose
        failure must leave the job's schedule as it was."""
        job = occ.job
        fire = ask[0]
        wall = ask[4]
        row = None
        pause = _BUSY_BACKOFF
        if isinstance(answer, StoreError):
            pause = self._store.retry_in_ns()
            if not quiet:
                self._store_failed("claims")(
                    "could not claim a run of job %r (trying again in %.2g s): %s",
                    job._id,
                    pause / NS_PER_SECOND,
                    answer,
                )
            outcome = "failed"
        else:
            if self._failing:
                self._store_answered("claims")
            outcome, row = answer
        held = self.missed_held.pop(id(job), None)
        if held is not None and outcome in ("won", "done"):
            # ("done": this claim moved the job on, and only its run was not recorded.)
            self._s._report_missed(*held)
        if outcome == "won":
            return occ._replace(fire=fire)
        job._running -= 1
        self._s._running_total -= 1
        if job._x is not None:
            job._x.backlog = False  # (set by the start that did not happen)
        if outcome in ("failed", "busy"):
            self._claim_refused(
                key, job, fire, row, wall + pause, quiet or outcome == "failed", hold
            )
        elif outcome == "lost":
            self._claim_lost(key, job, fire, row, ask[3])
        else:  # the fire ran or runs already (a backfill, another process): skip it
            if ask[8] == SOLO_SKIP and self._overlapped_elsewhere(fire):
                self._s._skipped(job, occ.due, occ.timebase, Verdict.SKIP.value)
            self._s._come_to_rest(job)
            self._save_quiet(job)
        return None

    def _claim_refused(
        self, key: Any, job: Job, fire: str, row: JobRow | None, until: int, quiet: bool, hold: bool
    ) -> None:
        """A claim that failed or met a busy row (lock held): read the job back, and with
        ``hold`` hold its fires back until ``until``; ``quiet``: the read back logs nothing."""
        if type(key) is not Job and key.claimed != 1:
            # The side left the job's sides when it was popped, so reading the job back
            # cannot restore it if the row does not hold it (a queued fire never is).
            self._load_at_next_poll([fire])
        # The store is the truth: read the job back, and try its fire again after a pause
        # (the same fire: the claim's guard is its due time, which the pause leaves alone).
        # "busy": another process is claiming or changing this job right now; its change
        # reaches this one soon (and replaces the retry), or it rolled back. (A failed
        # claim was logged: a read back failing with it says nothing new.)
        self.reload(job, row, quiet)
        if hold:
            if job._due is not None and job._qkey is not None:
                job._due = max(job._due, until)
                self._s._push_regular(job)
            for side in job._sides or ():
                if side.due is not None and side._qkey is not None:
                    side.due = max(side.due, until)
                    self._s._push_side(side)

    def _claim_lost(self, key: Any, job: Job, fire: str, row: JobRow | None, attempt: int) -> None:
        """A claim another worker won (lock held): read the job back, without this fire."""
        self.reload(job, row)
        if type(key) is not Job:
            # The fire's key ran, or runs, elsewhere: a copy of this side read back from
            # the row must not be queued again (it would lose the same claim forever).
            # Only a copy of this attempt or an earlier one: a later attempt of the same
            # fire is the retry the worker that won this one queued when it failed (it
            # was dropped, and the job written as completed over it).
            stale = [
                x for x in job._sides or () if self._fire_of(x) == fire and x.attempt <= attempt
            ]
            if stale:
                for x in stale:
                    self._s._drop_side(x)
                self._s._come_to_rest(job)
                self._save_quiet(job)

    def _overlapped_elsewhere(self, fire: str) -> bool:
        """After a claim under ``Overlap.SKIP`` answered "done": whether it was the store that
        skipped the fire, because another process's run of the job was going (its key is not
        recorded), rather than a run of the fire key itself (a backfill ran it). One more query,
        only after such an answer (a fire overlapping a run elsewhere): a skip is then reported
        as in one process. (A failure of that query is not: the fire is skipped all the same.)"""
        try:
            return fire not in self._store.recorded_keys([fire])
        except StoreError:
            return False

    def _fire_of(self, side: _Side) -> str:
        """A side occurrence's fire key."""
        if side.key is not None:
            return side.key
        return fire_key_at(side.job.id, side.base)

    def finish(self, done: tuple[Occ, Any, Exception | None]) -> None:
        """``_finish_locked`` with a durable store: record the outcome in memory, then in the
        store, fenced: if this process no longer holds the run, its outcome is refused.

        While the thread runner runs, outcomes wait in an outbox that it writes, all at once,
        before it next claims (``Outcomes.flush``): a batch of short runs then costs one write
        of their outcomes instead of one each. A run that finishes ``_OUTBOX_WAIT`` or more
        after the outbox was last written writes it at once: a crash then repeats at most that
        much finished work (and the run that was going on). (Measured from the last write, not
        from the claim: in a batch that runs longer, the runs after it would each be written
        alone.)"""
        occ, _, error = done
        job = occ.job
        before = tuple(job._sides or ())  # (a copy: the finish appends to the job's list)
        self._s._finish_locked(done)
        fire = occ.fire
        assert fire is not None
        if error is None:
            state = "succeeded"
        elif any(
            s.key == fire and s.attempt == occ.attempt + 1
            for s in job._sides or ()
            if s not in before
        ):
            state = "failed"
        else:
            state = "dead"
        clock = self._clock
        self.outcomes.outbox.append(
            Outcome(job, fire, occ.attempt, occ.due, state, error, clock.time_ns())
        )
        runner = self._s._runner
        if runner is None or not runner.flushes:
            self.outcomes.flush()
            if self.close_when_idle:
                self.close_if_idle_locked()
            return
        now = clock.monotonic_ns()
        if now - self.outcomes.written_at >= _OUTBOX_WAIT:
            self.outcomes.flush()
            self.outcomes.written_at = now

    def next_lease_end(self, floor: int) -> int | None:
        """When the first lease of a run going ends after ``floor`` (lock held), or None (none,
        or the store did not answer: the look at the target says so again if it still
        fails)."""
        try:
            end: int | None = self._store.next_lease_end(floor)
        except StoreError as exc:
            logger.debug("could not read when leases run out: %s", exc)
            return None
        return end

    def stop_at_lease_end(self, clock: SteppableClock, end: int) -> int:
        """Move the clock to ``end``, where a lease runs out, and look at the store there (lock
        held): a lost run is taken over. Returns the time from which to look for the next
        lease end (each stop moves on, whatever the clock could do)."""
        step = 0  # (after the first try, at least a microsecond: see below)
        for _ in range(3):
            # (A job may have moved the clock past the end already; a clock that keeps coarser
            # time than nanoseconds may stop short of it, where the lease has not run out yet:
            # it is nudged on.)
            now = clock.time_ns()
            if now >= end:
                break
            clock.advance_ns(max(end - now, step))
            step = 1000
        self.next_poll = 0
        self.sync_locked()
        return max(end, clock.time_ns())

    def run_to(self, clock: SteppableClock, target: int) -> int:
        """``_run_to``, and with a durable store, again for what a look at the store at the
        target finds due (runs whose lease ran out meanwhile, other processes' changes). Time
        stops at the end of each lease of a run going elsewhere on the way, for a look at the
        store: a run lost by a worker that died is taken over when its lease runs out, before
        the fires due after that, as the thread runner's polls would."""
        count = 0
        floor = clock.time_ns()  # leases ending after this are still to stop at
        while True:
            with self._lock:
                end = self.next_lease_end(floor)
            if end is None or end > target:
                break
            # The fires due before the lease's end, then the takeover, then the rest: at the
            # end itself, the lost run (queued at its own due time) goes first. (A job may
            # have moved the clock past the end meanwhile, or a clock of its own not reach
            # it to the nanosecond: each pass moves on from the end all the same.)
            if end - 1 > clock.time_ns():
                count += self._s._run_to(clock, end - 1)
            with self._lock:
                floor = self.stop_at_lease_end(clock, end)
        count += self._s._run_to(clock, target)
        while True:
            with self._lock:
                self.next_poll = 0
                self.sync_locked()
                head = self._store.head(clock.time_ns(), clock.monotonic_ns())
                if head is None or head[2] > clock.monotonic_ns():
                    break
            count += self._s._run_to(clock, target)
        return count

    def close_if_idle_locked(self) -> None:
        """Close the store of a scheduler shut down without waiting once nothing of it runs
        any more (lock held; ``shutdown``)."""
        if self.close_when_idle and self._s._running_total == 0:
            self.close_when_idle = False
            if self._store.is_open:
                self.close_store_locked()

    def _at_exit(self) -> None:
        """At interpreter exit, a durable scheduler never shut down: write the outcomes of the
        runs that finished, and say which runs, still going, will run again once their lease
        runs out (their threads end with the interpreter). Claims no more work."""
        if not self._lock.acquire(timeout=_EXIT_LOCK_WAIT):
            logger.warning(
                "the interpreter exits without Scheduler.shutdown(), and the scheduler was "
                "busy: finished runs whose outcome is not written run again after their lease"
            )
            return
        try:
            if self._s._shutdown or not self._store.is_open:
                return
            self._s._shutdown = True
            self._cond.notify_all()
            self.outcomes.pay_all()
            going = self._store.held_keys()
            if going:
                logger.warning(
                    "the interpreter exits without Scheduler.shutdown() while %d run(s) go on "
                    "(%s): they run again once their lease runs out; call shutdown() to let "
                    "them finish",
                    len(going),
                    ", ".join(going[:10]) + (", ..." if len(going) > 10 else ""),
                )
            self.close_store_locked()
        finally:
            self._lock.release()

    def close_store_locked(self) -> None:
        """Close the durable store at the end of the scheduler's life (lock held), once the
        outcomes still waiting are written: the outbox's, and those a lost connection kept
        from the store (owed, and until now written at the next poll, which will not come).
        One that still cannot be written is logged: its run is taken over when its lease runs
        out, and runs again."""
        self.outcomes.pay_all()
        self._store.close()
        atexit.unregister(self._exit_hook)
