"""Stores: where a Scheduler keeps its jobs and their queued occurrences.

``MemoryStore`` (the default) keeps them in this process's memory. ``JobStore`` is the protocol a
store implements; durable stores (SQLite, PostgreSQL) implement it too.
"""

from __future__ import annotations

from duetime.stores.base import JobStore
from duetime.stores.memory import MemoryStore

__all__ = ["JobStore", "MemoryStore"]
