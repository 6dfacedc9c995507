"""Runs' outcomes on their way to a durable store: the outbox, what is owed, and settling them.

A durable run's outcome is recorded in memory when it finishes (``Replica.finish``), then
written to the store, fenced: the store refuses the outcome of a run this process no longer
holds. While the thread runner runs, outcomes wait in the outbox and are written together
before its next claim (``flush``); what the store cannot take now is owed and written at the
next poll (``pay_owed``). A change read from the store about a job whose outcome is not written
yet waits for it (``settle_first``).

Lock rules: every method runs with the scheduler's lock held.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict as _asdict
from typing import NamedTuple, Protocol

from duetime import _durable
from duetime._validate import (
    datetime_to_ns,
)
from duetime.errors import (
    StoreError,
)
from duetime.job import (
    Job,
    JobState,
)
from duetime.stats import StatsRecorder
from duetime.stores.base import SettleAsk
from duetime.stores.memory import MemoryStore
from duetime.stores.postgres import PostgresStore
from duetime.stores.records import (
    JobRow,
)
from duetime.stores.sqlite import SQLiteStore

__all__ = ["Outcome", "Outcomes", "ReplicaHost"]

logger = logging.getLogger("duetime")

_CANCELLED = JobState.CANCELLED


class Outcome(NamedTuple):
    """A durable run's outcome waiting to be written to the store."""

    job: Job
    fire: str
    attempt: int
    due: int
    state: str  # "succeeded", "failed" (a retry follows) or "dead"
    error: Exception | None
    at: int  # wall ns when the run finished


class ReplicaHost(Protocol):
    """What the outcomes use of the replica that holds them."""

    _stats: StatsRecorder
    _dead_stored: dict[str, int]

    def reload(self, job: Job, row: JobRow | None = None, quiet: bool = False) -> None: ...

    def row(self, job: Job) -> JobRow: ...


class Outcomes:
    """The outcomes a replica has not written yet (see the module's docstring)."""

    def __init__(self, host: ReplicaHost, store: SQLiteStore | PostgresStore) -> None:
        self._r = host
        self._store = store
        # Outcomes not written yet: waiting for the runner to write them together, or owed
        # because the store could not be reached (written at the next poll).
        self.outbox: list[Outcome] = []
        self.written_at = 0  # monotonic ns when the outbox was last written
        self.owed: list[Outcome] = []
        # Ids of jobs changed elsewhere while their outcome was owed: read back once it is paid.
        self._after_owed: set[str] = set()

    def flush(self) -> None:
        """Write the outcomes waiting in the outbox (lock held; never raises). Not inside a
        ``batch()``: they would be part of its transaction, and a block that raised would take
        them with it (other runs' outcomes: the runs stayed "running", and ran again after
        their leases). ``batch()`` writes them before it opens and after it closes."""
        outbox = self.outbox
        if outbox and not self._store.batch_open:
            self.outbox = []
            self._record(outbox)

    def _record(self, outcomes: list[Outcome], final: bool = False) -> None:
        """Write runs' outcomes, each with its job's row as it is now (lock held). What the
        store cannot take now is owed: the next poll writes it (``final``: the store is about
        to close, and there is no next poll)."""
        asks = self.asks(outcomes)
        self.after(outcomes, asks, self._store.settle_many(asks), final)

    def asks(self, outcomes: list[Outcome]) -> list[SettleAsk]:
        """The store's arguments for ``outcomes``: each with its job's row as it is now."""
        rows: dict[int, JobRow] = {}
        asks: list[SettleAsk] = []
        for job, fire, attempt, _, state, error, now in outcomes:
            if job._state is _CANCELLED:
                # Cancelled since the run started (here, or elsewhere and read back): the run
                # is recorded, the row left to the cancel, which wrote it. Written from this
                # copy, the row ended a job another process had added under the id meanwhile.
                # (Asked for each outcome, each time: an outcome owed and written again later,
                # or a second of the job's, is the cancelled copy's too.)
                asks.append((fire, attempt, state, _durable.error_text(error), now, None))
                continue
            row = rows.get(id(job))
            if row is None:
                row = rows[id(job)] = self._r.row(job)
            asks.append((fire, attempt, state, _durable.error_text(error), now, row))
        return asks

    def after(
        self,
        outcomes: list[Outcome],
        asks: list[SettleAsk],
        answers: Sequence[bool | StoreError],
        final: bool = False,
    ) -> None:
        """Act on the store's answers to ``outcomes``: owe what failed, read back the jobs of
        runs this worker no longer held, keep dead letters."""
        store = self._store
        owed: list[str] = []  # fire keys whose outcome could not be written
        failure: StoreError | None = None
        for outcome, ask, answer in zip(outcomes, asks, answers, strict=True):
            job, fire, _, due, state, _, now = outcome
            if isinstance(answer, StoreError):
                owed.append(fire)
                failure = answer
                self.owed.append(outcome)
            elif not answer:
                logger.warning(
                    "run %s of job %r finished, but this worker no longer holds it (its lease "
                    "ran out and another worker took it over): its outcome is not recorded",
                    fire,
                    job._id,
                )
                # Nor counted here: the run is the other worker's (counted there), and the
                # retry or dead letter this outcome made here will not be.
                stats = self._r._stats
                if state == "succeeded":
                    stats.succeeded -= 1
                else:
                    stats.failed -= 1
                    if state == "failed":
                        stats.retried -= 1
                    else:
                        dead = store.dead_letter(job.id)
                        if dead is not None and dead.job is job:
                            MemoryStore.take_dead(store, job.id)
                            stats.dead -= 1
                # Read back the job the id names now: this copy may have ended here meanwhile
                # (read back, it came back to life beside a new job of the id, unindexed).
                current = store.get(job.id)
                if current is not None:
                    self._r.reload(current)
            elif state == "dead":
                # (No row asked for a job that ended while the run went on: the letter keeps
                # this copy all the same.)
                row = ask[5] if ask[5] is not None else self._r.row(job)
                dead = store.dead_letter(job.id)
                if dead is not None and dead.job is job:
                    try:
                        store.save_dead(
                            job.id,
                            json.dumps(_asdict(row)),
                            ask[3] or "",  # (the error's text, as the outcome recorded it)
                            _durable.storable(dead.traceback),
                            dead.attempts,
                            due,
                            now,
                        )
                    except StoreError as exc:
                        logger.error("could not record dead letter %r: %s", job._id, exc)
                    else:
                        # In the store now: another process may take it (sync_dead).
                        self._r._dead_stored[job.id] = datetime_to_ns(dead.failed_at)
        if owed:
            # One line for the lot: a store down for a while fails every outcome of every poll.
            logger.error(
                "could not record the outcome of %s (%s): %s",
                f"run {owed[0]}" if len(owed) == 1 else f"{len(owed)} runs ({owed[0]}, ...)",
                "closing the store: run again once the lease runs out, by another worker or "
                "after a restart"
                if final
                else "trying again at the next poll",
                failure,
            )

    def settle_first(
        self, rows: list[JobRow], ended: list[tuple[str, str]]
    ) -> tuple[list[JobRow], list[tuple[str, str]]]:
        """Of changes read from the store (lock held), those to jobs whose outcome this process
        has not written yet (waiting in the outbox, or owed) are not applied: the outcomes are
        written first, merged there with the change as any outcome is, and those jobs read
        back. (Applied over the outcome, a row written elsewhere while the fire ran here, still
        saying "running" and not counting the run, undid the run in memory, and the outcome
        then written from that copy left the job "running" in the store for good.) A row whose
        job is no longer in memory (cancelled here, added again elsewhere) is applied as ever."""
        waiting = {o.job._id for o in self.outbox} | {o.job._id for o in self.owed}
        hit = {row.id for row in rows if row.id in waiting}
        hit.update(id for id, _ in ended if id in waiting)
        if not hit:
            return rows, ended
        self.flush()
        if self.owed:
            self.pay_owed()
        store = self._store
        jobs = {id: store.get(id) for id in hit}
        # (One whose outcome the store refused again stays owed, its job as memory has it: read
        # back once the outcome is written, pay_owed. So does one whose outcome waits for the
        # end of a batch.)
        owed = {o.job._id for o in self.owed} | {o.job._id for o in self.outbox}
        for id, job in jobs.items():
            if job is None:
                continue
            if id in owed:
                self._after_owed.add(id)
            else:
                self._r.reload(job)
        return (
            [row for row in rows if jobs.get(row.id) is None],
            [(id, state) for id, state in ended if jobs.get(id) is None],
        )

    def pay_owed(self, final: bool = False) -> None:
        """Write the outcomes a lost connection kept from being recorded (lock held), and read
        back the jobs that a change made elsewhere met meanwhile (settle_first). ``final``:
        the store is about to close (``record``). Not inside a ``batch()``
        (``Outcomes.flush``)."""
        if self._store.batch_open:
            return
        owed, self.owed = self.owed, []
        if owed:
            self._record(owed, final)
        if self._after_owed:
            still = {o.job._id for o in self.owed}
            store = self._store
            for id in [id for id in self._after_owed if id not in still]:
                self._after_owed.discard(id)
                job = store.get(id)
                if job is not None:
                    self._r.reload(job)

    def write_locked(self) -> None:
        """Write every outcome waiting, in the outbox or owed, and read back the jobs a change
        elsewhere met meanwhile (``settle_first``), as a poll does (lock held; outside a
        batch's transaction)."""
        self.flush()
        if self.owed or self._after_owed:
            self.pay_owed()

    def pay_all(self) -> None:
        """Write every outcome still waiting, once, before the store closes (lock held)."""
        if self.owed or self.outbox:
            # (One attempt, the owed ones first, the older; what fails is logged. The jobs a
            # change elsewhere met while their outcome was owed are read back, as at a poll:
            # after the close, memory is the last word.)
            self.owed += self.outbox
            self.outbox = []
            self.pay_owed(final=True)
            self.owed = []
