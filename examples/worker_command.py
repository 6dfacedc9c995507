"""The worker command: an app schedules by task name, ``python -m duetime worker`` runs the jobs.

Run: python examples/worker_command.py (POSIX: it stops the worker with SIGTERM).

In a temporary folder, the example writes a tasks module (``reminders.py``, one task declared
with ``@duetime.task``), starts ``python -m duetime worker --store sqlite:///jobs.db --tasks
reminders`` there, and, as the app would, schedules five reminders due now by the task's name.
Once the worker has sent them it gets SIGTERM, stops gracefully (exit status 0), and the
store's run records, read with ``python -m duetime runs``, show each reminder run once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from tempfile import TemporaryDirectory

from duetime import At, Scheduler

TASKS = """\
import pathlib

import duetime
from duetime import current_run


@duetime.task("remind")
def remind(email: str) -> None:
    run = current_run()
    with pathlib.Path("outbox.txt").open("a") as out:  # (the worker's folder)
        out.write(f"{email} {run.key if run else '?'}\\n")
"""


def until(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    """Wait (polling every 10 ms) until ``condition`` holds; fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    pause = threading.Event()
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        pause.wait(0.01)


def main() -> None:
    with TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "reminders.py").write_text(TASKS)
        url = f"sqlite:///{folder / 'jobs.db'}"
        log = folder / "worker.log"
        with log.open("wb") as err:
            worker = subprocess.Popen(
                [sys.executable, "-m", "duetime", "worker", "--store", url, "--tasks", "reminders"],
                cwd=folder,
                stderr=err,
            )
        try:
            until(lambda: "started" in log.read_text(), "the worker to start")
            app = Scheduler(store=url)  # the app: it schedules, the worker runs
            now = datetime.now(timezone.utc)
            for i in range(5):
                app.schedule("remind", At(now), args=[f"user{i}@example.com"], id=f"remind-{i}")
            app.shutdown()
            outbox = folder / "outbox.txt"
            until(
                lambda: outbox.exists() and len(outbox.read_text().splitlines()) == 5,
                "five reminders",
            )
            worker.send_signal(signal.SIGTERM)
            status = worker.wait(timeout=30)
        finally:
            if worker.poll() is None:
                worker.kill()
        print(f"the worker exited with status {status}; its log (stderr):")
        for line in log.read_text().splitlines():
            print(f"  {line}")
        print("sent:")
        for line in sorted(outbox.read_text().splitlines()):
            print(f"  {line}")
        runs = subprocess.run(
            [sys.executable, "-m", "duetime", "runs", "--store", url],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        print("python -m duetime runs:")
        for line in runs.splitlines():
            print(f"  {line}")
        assert status == 0
        assert runs.count("succeeded") == 5 and "5 run(s)" in runs


if __name__ == "__main__":
    main()
