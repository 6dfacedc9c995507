"""``JobStore``: what the Scheduler asks of the store under it.

The Scheduler decides *what* changes (the rules in ``duetime.policy``, the recurrences, the
retries); the store records it and answers what is due. Changes to the set of live jobs, their
queued occurrences, the dead letters and the starts waiting for a ``max_concurrent`` slot go
through these methods, which the Scheduler calls with its lock held, except in five hot spots
that use ``MemoryStore``'s own structures (see ``duetime.stores.memory``). ``DurableStore`` adds
the SQL side: whole-row writes, claims under a lease, fenced outcomes, polling, run records.

Occurrences are identified by their *key*: a ``Job`` for its regular occurrence, or the
Scheduler's side-occurrence object for a retry, a rate-limited deferral, a held-back run or a
``trigger()``; a key carries a ``_qkey`` slot the store uses to find its queued entry. Times are
integer nanoseconds of the occurrence's timebase (``WALL``: epoch; ``MONOTONIC``: the clock's
elapsed time). ``head`` and ``take`` answer in packed entries (``duetime._timers``), whose order
is ``(due, priority, insertion)``.

``MemoryStore``, ``SQLiteStore`` and ``PostgresStore`` implement ``JobStore``, and
tests/test_stores.py is its conformance suite, run on all three; the two SQL stores implement
``DurableStore`` too (tests/test_sqlite.py runs on both, tests/test_postgres.py adds
PostgreSQL's own). docs/decisions.md says why the durable side looks as it does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from duetime.errors import StoreError
from duetime.job import Job
from duetime.stores.records import Changes, JobRow, RunRecord

__all__ = [
    "SOLO_SKIP",
    "SOLO_WAIT",
    "ClaimAnswer",
    "ClaimAsk",
    "DurableStore",
    "JobStore",
    "SettleAsk",
]

# ``claim``'s arguments: (key, job id, due, attempt, now, lease ns, row, guard, solo).
ClaimAsk = tuple[str, str, int, int, int, int, JobRow | None, int | None, int]

# A claim's ``solo``, for a regular fire of a recurring job while another worker's run of the
# job is going: skip the fire (Overlap.SKIP; the claim answers "done"), or wait for that run
# to end (Misfire.RUN_ALL catching up, one fire after the other; the claim answers "busy").
# 0: neither.
SOLO_SKIP = 1
SOLO_WAIT = 2

#: A fire ``queued_runs`` answers: ``(key, job id, due, attempt, retry due)``; the retry due is
#: None for a fire enqueued by ``backfill`` or ``trigger``, and for a failed attempt whose retry
#: is pending, when that retry is due (epoch nanoseconds).
QueuedRun = tuple[str, str, int, int, "int | None"]

# What ``claim_many`` answers for one claim: (answer, the job's row read back or None), or the
# error that kept it from being made.
ClaimAnswer = tuple[str, JobRow | None] | StoreError

# ``settle``'s arguments: (key, attempt, state, error, now, row).
SettleAsk = tuple[str, int, str, str | None, int, JobRow | None]


@runtime_checkable
class JobStore(Protocol):
    """Live jobs, their queued occurrences, dead letters and waiting starts."""

    # -- jobs -------------------------------------------------------------------------------------

    def add(self, job: Job, id: str | None) -> None:
        """Record a new live job, under ``id`` (None: anonymous until its id is first read)."""
        ...

    def get(self, id: str) -> Job | None:
        """The live job with this id, or None."""
        ...

    def contains(self, job: Job) -> bool:
        """Whether ``job`` is live here."""
        ...

    def count(self) -> int:
        """How many jobs are live."""
        ...

    def jobs(self) -> list[Job]:
        """The live jobs, in no particular order."""
        ...

    def loosen(self, job: Job) -> None:
        """``job``'s regular occurrence left the queue while the job lives on (it runs, is
        paused or waits): keep it findable."""
        ...

    def forget(self, job: Job) -> None:
        """``job`` has ended: it is no longer live."""
        ...

    def name(self, job: Job, id: str) -> None:
        """An anonymous live job has been given ``id``: find it by that id from now on."""
        ...

    # -- occurrences ------------------------------------------------------------------------------

    def push(self, timebase: int, key: Any, due: int, priority: int) -> None:
        """Queue ``key``'s occurrence at ``due``; a previous entry of ``key`` goes stale."""
        ...

    def unqueue(self, timebase: int, key: Any) -> bool:
        """Drop ``key``'s queued occurrence. Returns whether it was queued."""
        ...

    def head(self, wall: int, mono: int) -> tuple[int, int, int] | None:
        """The earliest queued occurrence: ``(timebase, entry, due on the monotonic axis)``, the
        clock reading ``(wall, mono)`` converting between the timebases; None if none."""
        ...

    def key_of(self, timebase: int, entry: int) -> Any:
        """The key of the entry ``head()`` just returned, left queued."""
        ...

    def take(self, timebase: int, entry: int) -> Any:
        """Take the occurrence ``head()`` just returned (it is no longer queued); its key."""
        ...

    def wall_queued(self) -> bool:
        """Whether any wall-clock occurrence is queued."""
        ...

    def queued(self) -> Iterator[Any]:
        """Every queued key, in no particular order."""
        ...

    # -- starts waiting for a max_concurrent slot -------------------------------------------------

    def block(self, side: Any) -> None:
        """Keep a start until a slot frees."""
        ...

    def unblock(self, side: Any) -> None:
        """Forget a waiting start."""
        ...

    def blocked_count(self) -> int:
        """How many starts wait for a slot."""
        ...

    def next_blocked(self) -> Any | None:
        """Take the oldest waiting start, or None."""
        ...

    # -- dead letters -----------------------------------------------------------------------------

    def put_dead(self, id: str, record: Any) -> None:
        """Keep a dead letter for job ``id``."""
        ...

    def take_dead(self, id: str) -> Any | None:
        """Remove and return job ``id``'s dead letter, or None."""
        ...

    def dead_letter(self, id: str) -> Any | None:
        """Job ``id``'s dead letter, or None (it stays kept)."""
        ...

    def dead_letters(self) -> list[Any]:
        """The dead letters, oldest first."""
        ...

    # -- numbers ----------------------------------------------------------------------------------

    def queue_stats(self) -> tuple[int, int, int]:
        """``(live entries, stale entries, compactions)`` for ``Scheduler.stats()``."""
        ...


@runtime_checkable
class DurableStore(JobStore, Protocol):
    """What a store that keeps jobs beyond the process adds: the SQL side of the seam.

    The in-memory structures of ``JobStore`` stay the Scheduler's working copy; these methods
    write it through to the store and ask the store who runs what. Each change is one
    transaction; every claim can fail because another process won, and then changes nothing.
    Times are UTC epoch nanoseconds. ``SQLiteStore`` and ``PostgresStore`` implement it
    (``duetime.stores._sql.SQLStore``; docs/durability.md, docs/many-workers.md).
    """

    durable: bool
    worker: str
    poll_ns: int

    def open(self, worker: str) -> None:
        """Connect and create or check the schema; ``worker`` names this process in claims."""
        ...

    def close(self) -> None:
        """Close the connection."""
        ...

    @property
    def is_open(self) -> bool:
        """Whether the connection is open."""
        ...

    def load_rows(self) -> list[JobRow]:
        """Every live job's row."""
        ...

    def load_row(self, id: str) -> JobRow | None:
        """One job's row as the store has it now."""
        ...

    def changed_rows(self) -> Changes | None:
        """What other processes wrote since the last look: the live jobs' rows, and the ids
        and states of the jobs that ended (None: nothing changed; the Scheduler then skips
        ``queued_runs``, so a store answers empty lists when only queued fires are new)."""
        ...

    def write(self, rows: Sequence[JobRow], now: int) -> set[str]:
        """Write whole rows, one transaction; the ids of those whose stored state or counters
        are not what was sent (the writer reads them back)."""
        ...

    def write_progress(
        self, rows: Sequence[JobRow], now: int, guards: Sequence[int | None] | None = None
    ) -> list[bool]:
        """Write the progress of jobs the runner moved on (a skipped fire), as outcomes do:
        not over an ended job, not over a pause or resume made meanwhile; one transaction.
        A row with a guard only if its next regular fire is still the guard. Whether each
        row was written as given."""
        ...

    def insert_new(self, rows: Sequence[JobRow], now: int) -> list[str]:
        """Insert new jobs' rows; returns ids already live (then nothing is written)."""
        ...

    def batch(self) -> AbstractContextManager[None]:
        """Make the changes inside the block one transaction."""
        ...

    def claim(
        self,
        key: str,
        job_id: str,
        due: int,
        attempt: int,
        now: int,
        lease_ns: int,
        row: JobRow | None,
        guard: int | None,
    ) -> str:
        """Start fire ``key`` here under a lease, moving the job's row on from ``guard``:
        ``"won"``, ``"lost"`` (nothing written), ``"busy"`` (another transaction holds the job:
        nothing written, try again shortly) or ``"done"`` (the key ran already)."""
        ...

    def settle(
        self, key: str, attempt: int, state: str, error: str | None, now: int, row: JobRow | None
    ) -> bool:
        """Record an attempt's outcome and the job's row, fenced by worker and attempt."""
        ...

    def claim_many(self, asks: Sequence[ClaimAsk]) -> list[ClaimAnswer]:
        """Several claims (one job at most once): for each, ``claim``'s answer and the job's
        row if the store read it back (a claim not won), or the ``StoreError`` that kept it
        from being made."""
        ...

    def settle_many(self, outcomes: Sequence[SettleAsk]) -> list[bool | StoreError]:
        """Several outcomes: for each, ``settle``'s answer or the ``StoreError`` that kept it
        from being written."""
        ...

    def settle_and_claim(
        self, outcomes: Sequence[SettleAsk], asks: Sequence[ClaimAsk]
    ) -> tuple[list[bool | StoreError], list[ClaimAnswer]]:
        """``settle_many(outcomes)`` then ``claim_many(asks)``, in one transaction where the
        store can (the thread runner's turn: last batch's outcomes, next batch's claims)."""
        ...

    def heartbeat(self, now: int, lease_ns: int) -> None:
        """Renew the leases of every run this worker holds."""
        ...

    def expired(self, now: int) -> list[tuple[str, str, int, int, str | None]]:
        """Runs whose lease ran out (its end is ``now`` or before): ``(key, job id, due,
        attempt, worker)``."""
        ...

    def next_lease_end(self, now: int) -> int | None:
        """When the first lease of a run going (any worker's, this one's too: a run a job's
        SystemExit interrupted) runs out after ``now``, or None:
        how far hand-stepped time may move before a lost run is to be taken over (a lease has
        run out at its end: ``expired`` answers it then)."""
        ...

    def take_over(
        self, key: str, old_worker: str | None, attempt: int, now: int, lease_ns: int
    ) -> bool:
        """Take an expired run, raising its attempt."""
        ...

    def mark_lost(self, key: str, now: int) -> None:
        """Record that nobody will run an expired run again."""
        ...

    def enqueue(self, job_id: str, fires: Sequence[tuple[str, int]]) -> list[str]:
        """Record fires ``(key, due)`` as queued unless recorded already; the new keys."""
        ...

    def queued_runs(self) -> list[QueuedRun]:
        """Queued fires and pending retries not taken in by this process yet."""
        ...

    def runs(self, job_id: str | None, state: str | None, limit: int) -> list[RunRecord]:
        """Run records, newest due first."""
        ...

    def purge(self, now: int) -> int:
        """Delete records older than the retention; how many went."""
        ...

    def save_dead(
        self, id: str, job: str, error: str, traceback: str, attempts: int, due: int, now: int
    ) -> None:
        """Keep a dead letter."""
        ...

    def load_dead(self) -> list[tuple[str, str, str, str, int, int, int]]:
        """Every dead letter."""
        ...

    def recorded_keys(self, keys: Sequence[str]) -> set[str]:
        """Those of fire keys ``keys`` that have a run recorded (queued, going or finished)."""
        ...

    def reopen_key(self, key: str) -> None:
        """Forget the finished run recorded under ``key``, so that the key can run again."""
        ...
