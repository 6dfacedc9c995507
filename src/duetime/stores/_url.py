"""A durable store from its URL: the one reading of ``sqlite:///...`` and ``postgresql://...``
that the Scheduler, the command line and the dashboard share."""

from __future__ import annotations

from duetime._validate import lower_scheme
from duetime.errors import InvalidArgument
from duetime.stores.postgres import PostgresStore, redact_dsn
from duetime.stores.sqlite import SQLiteStore

__all__ = ["store_from_url"]


def store_from_url(url: str) -> SQLiteStore | PostgresStore:
    """A new, unopened store for ``sqlite:///path`` or ``postgresql://...``.

    Raises:
        InvalidArgument: ``url`` is neither (the message shows it, its password left out).
    """
    url = lower_scheme(url)
    if url.startswith("sqlite:"):
        return SQLiteStore.from_url(url)
    if url.startswith(("postgresql:", "postgres:")):
        return PostgresStore.from_url(url)
    raise InvalidArgument(
        f"store must be a store object or a URL such as 'sqlite:///jobs.db' or "
        f"'postgresql://user@host/dbname', got {redact_dsn(url)!r}"
    )
