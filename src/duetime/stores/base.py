"""``JobStore``: what the Scheduler asks of the store under it.

The Scheduler decides *what* changes (the rules in ``duetime.policy``, the recurrences, the
retries); the store records it and answers what is due. Changes to the set of live jobs, their
queued occurrences, the dead letters and the starts waiting for a ``max_concurrent`` slot go
through these methods, which the Scheduler calls with its lock held, except in five hot spots
that use ``MemoryStore``'s own structures (see ``duetime.stores.memory``); a durable store will
make the Scheduler take the general path there.

Occurrences are identified by their *key*: a ``Job`` for its regular occurrence, or the
Scheduler's side-occurrence object for a retry, a rate-limited deferral, a held-back run or a
``trigger()``; a key carries a ``_qkey`` slot the store uses to find its queued entry. Times are
integer nanoseconds of the occurrence's timebase (``WALL``: epoch; ``MONOTONIC``: the clock's
elapsed time). ``head`` and ``take`` answer in packed entries (``duetime._timers``), whose order
is ``(due, priority, insertion)``.

This is the protocol as the in-process Scheduler uses it today; ``MemoryStore`` implements it and
tests/test_stores.py is its conformance suite, written against the protocol so that the next
store runs it too.
docs/decisions.md says what durable stores add (claims with leases, one transaction per change,
the translation of monotonic times to UTC in ``duetime.stores.timebase``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from duetime.job import Job

__all__ = ["JobStore"]


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
