"""Helpers for the real-process tests (tests/test_sqlite.py, tests/test_postgres.py): fill a
store with jobs due now, start and stop worker processes (tests/store_worker.py), read what they
did. Waiting is ``conftest.until`` with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from duetime import At, Scheduler

WORKER = str(Path(__file__).with_name("store_worker.py"))

#: How often the real-process tests look at the store while they wait (seconds): often enough
#: to notice at once, rarely enough to leave the machine to the workers.
EVERY = 0.02


def fill(store: str, n: int) -> list[str]:
    """Schedule ``n`` one-shot jobs due now into the store (a URL), in one batch; their fire
    keys."""
    s = Scheduler(store=store)
    s.register("record", print)
    now = datetime.now(timezone.utc)
    with s.batch():
        for i in range(n):
            s.schedule("record", At(now), id=f"job-{i:04d}")
    s.shutdown()
    return [f"job-{i:04d}@{now.isoformat()}" for i in range(n)]


def spawn(store: str, effects: Path, *options: str) -> subprocess.Popen[bytes]:
    """Start a worker process on the store (a path is a SQLite file) writing to ``effects``."""
    return subprocess.Popen(
        [sys.executable, WORKER, store, str(effects), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Kill the workers still alive (a stopped one is continued first) and reap them all."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
    for p in procs:
        p.wait(timeout=10)


def lines(path: Path) -> list[list[str]]:
    """The ``fire-key pid`` lines the workers wrote, split; none if the file is not there yet."""
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []
