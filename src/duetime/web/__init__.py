"""duetime's web dashboard and Prometheus metrics for a durable store (``pip install
"duetime[web]"``).

``create_app(store)`` is an ASGI application (Starlette) to serve with any ASGI server or to
mount in a Starlette or FastAPI application; ``python -m duetime web --store URL`` serves one
with uvicorn. It reads the store with small paged queries of its own (never by loading every job
into a Scheduler), so a page answers in milliseconds over a million jobs; its actions (Trigger,
Pause, Resume, Cancel, Retry, Discard) go through a Scheduler opened on the store for each, as
the command line's do. See docs/dashboard.md.

``import duetime`` never imports this package: the core needs none of its dependencies.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

from starlette.applications import Starlette

from duetime.stores.postgres import PostgresStore
from duetime.stores.sqlite import SQLiteStore
from duetime.web._app import Dashboard

__all__ = ["create_app"]


def create_app(
    store: str | SQLiteStore | PostgresStore,
    *,
    token: str | None = None,
    read_only: bool = False,
    refresh: float = 5.0,
    prepare: bool = True,
) -> Starlette:
    """The dashboard of a durable store, as an ASGI application.

    Args:
        store: The store: a URL (``sqlite:///jobs.db``, ``postgresql://user@host/db``) or a
            ``SQLiteStore`` or ``PostgresStore`` object (only the place it names is used: the
            dashboard opens connections of its own, and never the object's).
        token: The access token that reading and acting need (as ``Authorization: Bearer
            TOKEN``, or typed into the login form, which sets a cookie). Default: the
            ``DUETIME_WEB_TOKEN`` environment variable if set, else none (anyone who reaches
            the port may read and act: bind 127.0.0.1).
        read_only: Hide every action and refuse action requests (403).
        refresh: Seconds between an open page's refreshes of its lists (at least 1). Each
            distinct read is kept for a second, so that open pages cost the store at most one
            query a second each, however many there are.
        prepare: Add the index the jobs list filtered by state needs to the store, if it is
            missing (``CREATE INDEX IF NOT EXISTS``, at start-up).

    Raises:
        InvalidArgument: ``store`` is not a store URL or object, or a bad option.
    """
    if token is None:
        token = os.environ.get("DUETIME_WEB_TOKEN") or None
    board = Dashboard(store, token=token, read_only=read_only, refresh=refresh)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if prepare:
            from starlette.concurrency import run_in_threadpool

            await run_in_threadpool(board.view.prepare)
        try:
            yield
        finally:
            board.close()

    app = Starlette(routes=board.routes(), lifespan=lifespan)
    app.state.dashboard = board
    return app
