"""A worker process for the real-process tests of tests/test_sqlite.py and tests/test_postgres.py.

``python store_worker.py STORE EFFECTS [--work S] [--offset S] [--declare ANCHOR]`` opens the
store (a path is a SQLite file; a URL any store), registers the task ``record`` (append the run's
fire key and this pid to EFFECTS, work a little, then append the same line to EFFECTS.done) and
runs jobs until it is killed. Each line is written with one ``os.write`` on an ``O_APPEND`` file,
so lines of several processes never interleave.

``--offset`` runs the scheduler on a clock that many seconds ahead of the real one (negative:
behind). ``--declare`` makes the worker declare, at start-up, a fixed-rate schedule every 0.2 s
from the epoch second ANCHOR (id ``tick``), as every copy of an application would.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import threading
from datetime import datetime, timezone

from duetime import FixedRate, Scheduler, SystemClock, current_run


class OffsetClock(SystemClock):
    """The system clock, shifted: a host whose clock is off."""

    def __init__(self, offset: float) -> None:
        super().__init__()
        self._offset_ns = round(offset * 1e9)

    def time_ns(self) -> int:
        return super().time_ns() + self._offset_ns

    def time(self) -> float:
        return self.time_ns() / 1e9


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("effects")
    parser.add_argument("--work", type=float, default=0.0)
    parser.add_argument("--offset", type=float, default=0.0)
    parser.add_argument("--declare", type=float, default=None)
    parser.add_argument("--lease", type=float, default=2.0)
    opts = parser.parse_args()
    # A test that times out asks every worker where its threads are (tests/workers.py).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    store = opts.store if "://" in opts.store else f"sqlite:///{opts.store}"
    fd = os.open(opts.effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    done = os.open(opts.effects + ".done", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pause = threading.Event()

    def record() -> None:
        run = current_run()
        assert run is not None
        line = f"{run.key} {os.getpid()}\n".encode()
        os.write(fd, line)
        if opts.work:
            pause.wait(opts.work)  # the job's own work: a kill may land here
        os.write(done, line)

    # One run at a time (inline): a kill interrupts at most one run. A short lease so that a
    # killed worker's run is taken over within seconds.
    clock = OffsetClock(opts.offset) if opts.offset else None
    s = Scheduler(clock, store=store, executor="inline", lease=opts.lease)
    s.register("record", record)
    if opts.declare is not None:
        start = datetime.fromtimestamp(opts.declare, timezone.utc)
        s.schedule("record", FixedRate(0.2, start=start), id="tick", replace=True)
    s.start()
    print("ready", flush=True)
    threading.Event().wait()  # until killed


if __name__ == "__main__":
    main()
