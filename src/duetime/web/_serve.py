"""``python -m duetime web``: serve the dashboard with uvicorn."""

from __future__ import annotations

import logging

import uvicorn

from duetime.stores._views import StoreView
from duetime.web import create_app

__all__ = ["serve"]

logger = logging.getLogger("duetime")


def serve(url: str, *, host: str, port: int, token: str | None, read_only: bool) -> int:
    """Check the store, then serve its dashboard until interrupted. Returns the exit status.

    Raises:
        InvalidArgument: The store does not exist or holds no duetime tables.
        StoreError: It cannot be read.
    """
    StoreView(url).check()
    app = create_app(url, token=token, read_only=read_only)
    board = app.state.dashboard
    auth = "token required" if board.token else "no token: anyone who reaches it may act"
    mode = "read-only" if read_only else auth
    print(f"duetime dashboard on http://{host}:{port}/ ({mode}); Ctrl-C stops it", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
    return 0
