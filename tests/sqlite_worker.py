"""A worker process for the real-process tests of tests/test_sqlite.py.

``python sqlite_worker.py DB SIDE_EFFECTS [WORK_SECONDS]`` opens the store, registers the task
``record`` (append the run's fire key and this pid to SIDE_EFFECTS, work a little, then append the
same line to SIDE_EFFECTS.done) and runs jobs until it is killed. Each line is written with one ``os.write`` on an ``O_APPEND`` file, so
lines of several processes never interleave.
"""

from __future__ import annotations

import os
import sys
import threading

from duetime import Scheduler, current_run


def main() -> None:
    db, side_effects = sys.argv[1], sys.argv[2]
    work = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    fd = os.open(side_effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    done = os.open(side_effects + ".done", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pause = threading.Event()

    def record() -> None:
        run = current_run()
        assert run is not None
        line = f"{run.key} {os.getpid()}\n".encode()
        os.write(fd, line)
        if work:
            pause.wait(work)  # the job's own work: a kill may land here
        os.write(done, line)

    # One run at a time (inline): a kill interrupts at most one run. A short lease so that a
    # killed worker's run is taken over within seconds.
    s = Scheduler(store=f"sqlite:///{db}", executor="inline", lease=2.0)
    s.register("record", record)
    s.start()
    print("ready", flush=True)
    threading.Event().wait()  # until killed


if __name__ == "__main__":
    main()
