"""Helpers for the real-process tests (tests/test_sqlite.py, tests/test_postgres.py): fill a
store with jobs due now, start and stop worker processes (tests/store_worker.py), read what they
did. Waiting is ``conftest.until`` with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from duetime import At, Scheduler

from . import conftest

WORKER = str(Path(__file__).with_name("store_worker.py"))

#: How often the real-process tests look at the store while they wait (seconds): often enough
#: to notice at once, rarely enough to leave the machine to the workers.
EVERY = 0.02

#: Each worker's stderr file, by pid: what ``explain`` shows when a test fails.
_STDERR: dict[int, Path] = {}
_NUMBERS = itertools.count()


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
    """Start a worker process on the store (a path is a SQLite file) writing to ``effects``;
    its stderr goes to a file beside ``effects``, for ``explain``."""
    path = effects.with_name(f"worker-{next(_NUMBERS)}.err")
    with path.open("wb") as err:
        p = subprocess.Popen(
            [sys.executable, WORKER, store, str(effects), *options],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    _STDERR[p.pid] = path
    return p


def explain(procs: list[subprocess.Popen[bytes]]) -> str:
    """What each worker said on stderr; a live one first dumps its threads' stacks (SIGUSR1,
    see tests/store_worker.py), so that a test that timed out shows where the workers were."""
    parts = []
    for p in procs:
        path = _STDERR.get(p.pid)
        if path is None:
            continue
        if p.poll() is None:
            size = path.stat().st_size
            p.send_signal(signal.SIGUSR1)
            deadline = time.monotonic() + 2.0  # a stopped worker dumps nothing: don't wait long
            while path.stat().st_size == size and time.monotonic() < deadline:
                time.sleep(0.01)
            state = "running"
        else:
            state = f"exited with {p.returncode}"
        text = path.read_text(errors="replace")[-4000:]
        parts.append(f"--- worker {p.pid}, {state}:\n{text}")
    return "\n".join(parts)


def running(procs: list[subprocess.Popen[bytes]]) -> bool:
    """True; fail at once, with what the workers said, if any of them has exited."""
    if any(p.poll() is not None for p in procs):
        raise AssertionError(f"a worker exited on its own\n{explain(procs)}")
    return True


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


def until(
    procs: list[subprocess.Popen[bytes]],
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
) -> None:
    """``conftest.until`` for the real-process tests: looks every ``EVERY`` seconds, fails at
    once if a worker exits on its own, and says what the workers were doing if time runs out."""
    conftest.until(
        lambda: running(procs) and predicate(), timeout, what, EVERY, lambda: explain(procs)
    )
