"""Stores: where a Scheduler keeps its jobs and their queued occurrences.

``MemoryStore`` (the default) keeps them in this process's memory; ``SQLiteStore`` keeps them in
a file too, so they survive restarts and processes on one host can share them;
``PostgresStore`` keeps them in PostgreSQL, for many processes on many hosts. ``JobStore`` is
the protocol a store implements.
"""

from __future__ import annotations

from duetime.stores.base import JobStore
from duetime.stores.memory import MemoryStore
from duetime.stores.postgres import PostgresStore
from duetime.stores.records import RunRecord
from duetime.stores.sqlite import SQLiteStore

__all__ = ["JobStore", "MemoryStore", "PostgresStore", "RunRecord", "SQLiteStore"]
