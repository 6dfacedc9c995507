"""Two worker processes on one PostgreSQL database: each invoice reminder is sent once.

Run: python examples/many_workers.py [postgresql://user@host:5432/dbname]
(default: DUETIME_EXAMPLE_PG_DSN, else postgresql://postgres@127.0.0.1:5432/postgres). Needs
``pip install "duetime[postgres]"`` and a PostgreSQL server; the example keeps its jobs in a
schema of its own (``duetime_example``) and drops it at the end.

The parent process schedules 40 reminders due now and a "digest" every 0.5 s; two worker
processes (the same program, started with ``worker``) both declare the digest at start-up, as
every copy of an application does, and run whatever is due. Each reminder's side effect is
written with its fire key (``current_run().key``), the idempotency key a real email API would
get. At the end the parent checks that every reminder was sent exactly once and that both
workers took part.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from tempfile import TemporaryDirectory

from duetime import FixedRate, PostgresStore, Scheduler, StoreError, current_run

SCHEMA = "duetime_example"
ANCHOR = datetime(2026, 1, 1, tzinfo=timezone.utc)  # the digest's grid: the same in every copy


def store(dsn: str) -> PostgresStore:
    return PostgresStore(dsn, schema=SCHEMA)


def worker(dsn: str, outbox: str) -> None:
    """One copy of the application: register the tasks, declare the schedule, run."""
    fd = os.open(outbox, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def send_reminder(invoice: int) -> None:
        run = current_run()
        assert run is not None
        # One write per line on an O_APPEND file: lines of both workers never interleave.
        os.write(fd, f"reminder {invoice} {run.key} {os.getpid()}\n".encode())

    def digest() -> None:
        run = current_run()
        assert run is not None
        os.write(fd, f"digest - {run.key} {os.getpid()}\n".encode())

    s = Scheduler(store=store(dsn), lease=5)
    s.register("send_reminder", send_reminder)
    s.register("digest", digest)
    # Every copy declares the same schedule; replace=True makes the later declaration the
    # one schedule, and its fire keys make each digest run once.
    s.schedule("digest", FixedRate(0.5, start=ANCHOR), id="digest", replace=True)
    s.start()
    print("ready", flush=True)
    threading.Event().wait()  # until the parent stops it


def main(dsn: str) -> None:
    import psycopg  # the example's own look at the database (drop the schema at the end)

    with TemporaryDirectory() as tmp:
        outbox = Path(tmp) / "outbox.txt"
        workers = [
            subprocess.Popen(
                [sys.executable, __file__, "worker", dsn, str(outbox)], stdout=subprocess.PIPE
            )
            for _ in range(2)
        ]
        try:
            for w in workers:
                assert w.stdout is not None
                w.stdout.readline()  # "ready"
            s = Scheduler(store=store(dsn))
            s.register("send_reminder", print)  # (this process schedules; it does not run)
            now = datetime.now(timezone.utc)
            with s.batch():  # one transaction for the 40 jobs
                for invoice in range(1, 41):
                    s.schedule("send_reminder", now, args=[invoice], id=f"remind-{invoice}")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                lines = outbox.read_text().splitlines() if outbox.exists() else []
                reminders = sum(line.startswith("reminder") for line in lines)
                if reminders >= 40 and len(lines) - reminders >= 4:  # and a few digests
                    break
                time.sleep(0.05)
            runs = s.runs(state="succeeded", limit=1000)
            s.shutdown()
        finally:
            for w in workers:
                w.kill()
                w.wait()
        lines = [line.split() for line in outbox.read_text().splitlines()]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{SCHEMA}" CASCADE')

    reminders = [invoice for kind, invoice, _, _ in lines if kind == "reminder"]
    digests = [key for kind, _, key, _ in lines if kind == "digest"]
    by_worker = {pid for _, _, _, pid in lines}
    print(f"reminders sent: {len(reminders)} (distinct: {len(set(reminders))})")
    print(f"digests run: {len(digests)} (distinct fire keys: {len(set(digests))})")
    print(f"workers that took part: {len(by_worker)}; runs recorded: {len(runs)}")
    assert sorted(map(int, reminders)) == list(range(1, 41)), "each reminder exactly once"
    assert len(digests) >= 4 and len(digests) == len(set(digests)), "each digest fire once"
    assert len(by_worker) == 2, "both workers took part"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        default = "postgresql://postgres@127.0.0.1:5432/postgres"
        dsn = (
            sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DUETIME_EXAMPLE_PG_DSN", default)
        )
        try:
            main(dsn)
        except StoreError as exc:
            if os.environ.get("CI"):
                raise
            print(f"skipped: this example needs a PostgreSQL server ({exc})")
