"""The command line: ``python -m duetime demo``, ``python -m duetime cron EXPR``, and the
commands that read and change a durable store: ``jobs``, ``runs``, ``cancel``, ``pause``,
``resume``, ``trigger`` and ``retry`` (each with ``--store URL``).

Every bad argument ends in one line on stderr and exit status 2, never a traceback, and so does
a store that does not exist or was never given duetime's tables; an unknown job id or a store
that fails otherwise (corrupt, locked, a server that does not answer), in one line and exit
status 1 (docs/cli.md).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import NoReturn

from duetime import _worker
from duetime._describe import describe_trigger
from duetime._durable import MissingTask
from duetime._validate import zone
from duetime.clock import FakeClock, SystemClock, real_time_ns
from duetime.cron import Cron, Transition, fire_times, transitions
from duetime.errors import DuetimeError, InvalidArgument, JobLookupError, StoreError
from duetime.job import Job, JobState, Misfire, current_run
from duetime.recurrence import FixedRate
from duetime.scheduler import Scheduler
from duetime.stores import codec
from duetime.stores._url import store_from_url
from duetime.stores._views import check_existing
from duetime.stores.postgres import PostgresStore
from duetime.stores.records import RUN_STATES
from duetime.stores.sqlite import SQLiteStore


def demo() -> int:
    """Schedule three jobs on a fake day, run the day in a blink, show cancel and reschedule."""
    tz = zone("tz", "Europe/Berlin")
    day = datetime(2026, 3, 2, tzinfo=tz)  # a Monday
    clock = FakeClock(start=day)
    s = Scheduler(clock=clock, tz=tz)

    def job(name: str) -> None:
        print(f"  {clock.now().astimezone(tz):%H:%M %Z}  {name}")

    print("A day of work on a FakeClock (Europe/Berlin), run with run_until():")
    s.schedule(job, day.replace(hour=9), args=("send_email",), id="send_email")
    s.schedule(job, day.replace(hour=2), args=("backup_database",), id="backup_database")
    s.schedule(job, day.replace(hour=9, minute=5), args=("refresh_cache",), id="refresh_cache")
    ran = s.run_until(day + timedelta(days=1))
    print(f"  -> {ran} jobs ran; the clock is now {clock.now().astimezone(tz):%Y-%m-%d %H:%M %Z}")

    print("\nCancel and reschedule on the next day:")
    tomorrow = day + timedelta(days=1)
    warn = s.schedule(job, tomorrow.replace(hour=9), args=("trial_warning",), id="trial-warn")
    s.schedule(job, tomorrow.replace(hour=10), args=("upsell_email",), id="upsell")
    s.cancel("upsell")
    print("  cancelled 'upsell' (10:00 CET)")
    warn.reschedule(tomorrow.replace(hour=11, minute=30))
    print(f"  rescheduled 'trial-warn' from 09:00 to {warn.next_run_time:%H:%M %Z}")
    s.schedule(job, "*/30 12-13 * * *", args=("every half hour, 12-13h",), id="cron")
    ran = s.run_until(tomorrow.replace(hour=14))
    print(f"  -> {ran} jobs ran; still scheduled: {[j.id for j in s.jobs()]}")
    with tempfile.TemporaryDirectory() as folder:
        durable_demo(Path(folder) / "jobs.db", tz)
    return 0


def durable_demo(path: Path, tz: tzinfo) -> None:
    """Schedule into a SQLite file, stop, be down for a while, start again: the jobs come back
    and what fell due meanwhile follows each job's misfire policy."""
    start = datetime(2026, 3, 4, 8, 0, tzinfo=tz)
    clock = FakeClock(start=start)

    def note(name: str) -> None:
        run = current_run()
        due = "" if run is None else f" (due {run.scheduled_time.astimezone(tz):%H:%M %Z})"
        print(f"  {clock.now().astimezone(tz):%H:%M %Z}  {name}{due}")

    print(f"\nDurable: jobs in a SQLite file ({path.name}), surviving a restart:")
    s = Scheduler(clock=clock, tz=tz, store=SQLiteStore(path))
    s.register("note", note)
    s.schedule("note", start.replace(hour=9), args=("trial warning for a@example.com",), id="trial")
    s.schedule("note", FixedRate(minutes=30), args=("sync (once for a gap)",), id="sync")
    s.schedule(
        "note",
        "0 * * * *",
        args=("hourly report (every missed hour)",),
        id="report",
        misfire=Misfire.RUN_ALL,
    )
    s.run_until(start.replace(minute=30))
    s.shutdown()
    print(
        f"  the process stops at {clock.now().astimezone(tz):%H:%M %Z} with {len(s)} jobs "
        f"stored; it is down until "
        f"{start.replace(hour=11, minute=10):%H:%M %Z}"
    )
    clock.set(start.replace(hour=11, minute=10))
    s = Scheduler(clock=clock, tz=tz, store=SQLiteStore(path))
    s.register("note", note)
    print(f"  restarted: {len(s)} jobs back: {', '.join(j.id for j in s.jobs())}")
    s.run_until(start.replace(hour=11, minute=10))
    runs = s.runs(limit=1000)
    print(f"  -> {len(runs)} runs recorded, each under its fire key (UTC), e.g. {runs[-1].key}")
    s.shutdown()


_KINDS = """\
How cron times meet daylight saving time (docs/time.md):
  fixed-timed     minute and hour are fixed ("30 2 * * *"): each matching local time fires
                  once. A time that happens twice (clocks go back) fires in the first pass; a
                  time that does not exist (clocks go forward) fires at the same distance past
                  the change, 02:30 becoming 03:30 (Python's PEP 495 fold=0 reading).
  wildcard-timed  minute or hour starts with '*' ("*/30 2 * * *"): fires at every real
                  instant whose local time matches, so twice in a repeated hour and not at all
                  in a skipped one.
"""


#: The most fire times one preview prints (a larger -n is a typo, and would take minutes).
_MAX_COUNT = 10_000


class _Usage(Exception):
    """A bad command-line argument: one line on stderr, exit status 2. ``prog``: the
    (sub)command whose parser refused it, when known."""

    def __init__(self, message: str, prog: str | None = None) -> None:
        super().__init__(message)
        self.prog = prog


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Usage(message, self.prog)


def _local(when: datetime, tz: tzinfo) -> str:
    return f"{when.astimezone(tz):%Y-%m-%d %H:%M:%S %Z (%z)}"


def _read_from(start: str | None, tz: tzinfo) -> tuple[datetime, str | None]:
    """``--from`` as an aware datetime, and a note if a naive one fell in a gap or fold."""
    if start is None:
        return datetime.fromtimestamp(SystemClock().time(), timezone.utc), None
    try:
        after = datetime.fromisoformat(start)
    except ValueError:
        raise _Usage(
            f"--from must be an ISO date or date-time such as 2027-03-28 or "
            f"2027-03-28T02:30, got {start!r}"
        ) from None
    if after.tzinfo is not None:
        try:
            after.astimezone(timezone.utc).astimezone(tz)
        except (OverflowError, ValueError):
            raise _Usage(
                f"--from must fall within the years 1-9999 in UTC and in --tz, got {start!r}"
            ) from None
        return after, None
    first, second = after.replace(tzinfo=tz, fold=0), after.replace(tzinfo=tz, fold=1)
    if first.utcoffset() == second.utcoffset():
        return first, None
    # The instant, shown as it reads on the zone's clocks (a gap time reads differently).
    first = first.astimezone(timezone.utc).astimezone(tz)
    if first.replace(tzinfo=None) == after:
        return first, (
            f"note: --from {start} happens twice in {tz} (clocks go back); read as the first, "
            f"{_local(first, tz)}"
        )
    return first, (
        f"note: --from {start} does not exist in {tz} (clocks go forward); read as "
        f"{_local(first, tz)}, Python's PEP 495 fold=0 reading"
    )


def _times(local: tuple[datetime, ...]) -> str:
    return ", ".join(f"{t:%H:%M:%S}" if t.second else f"{t:%H:%M}" for t in local)


def _span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds()) // 60
    if minutes % 60:
        return f"{minutes} minutes"
    return "1 hour" if minutes == 60 else f"{minutes // 60} hours"


def _transition_line(t: Transition, wildcard: bool) -> str:
    """One line saying what a DST change does to the expression's times (nothing is silent)."""
    lo, hi = t.local_range
    shift = f"{_hhmm(t.offset_before)} -> {_hhmm(t.offset_after)}"
    if t.gap:
        span = f"{hi:%H:%M}" if hi.date() == lo.date() else f"{hi:%Y-%m-%d %H:%M}"
        head = f"  -- {lo:%Y-%m-%d}: clocks jump from {lo:%H:%M} to {span} ({shift})"
    else:
        head = f"  -- {lo:%Y-%m-%d}: clocks go back from {hi:%H:%M} to {lo:%H:%M} ({shift})"
    if not t.affected:
        return head
    one = len(t.affected) == 1
    what = _times(t.affected)
    if t.gap and wildcard:
        verb = "does not exist that day and is" if one else "do not exist that day and are"
        return f"{head}; {what} {verb} skipped (wildcard-timed)"
    if t.gap:
        verb = "does not exist that day and fires" if one else "do not exist that day and fire"
        return (
            f"{head}; {what} {verb} {_span(t.offset_after - t.offset_before)} later (fixed-timed)"
        )
    verb = "happens twice and fires" if one else "happen twice and fire"
    if wildcard:
        return f"{head}; {what} {verb} in both passes (wildcard-timed)"
    return f"{head}; {what} {verb} once, in the first pass (fixed-timed)"


def cron(expr: str, tz_name: str, count: int, start: str | None) -> int:
    """Print the next fire times of a cron expression, saying what DST changes do to it."""
    if not 1 <= count <= _MAX_COUNT:
        raise _Usage(f"-n must be between 1 and {_MAX_COUNT}, got {count}")
    try:
        tz = zone("--tz", tz_name)
        c = Cron(expr, tz=tz)
    except (InvalidArgument, TypeError) as exc:
        raise _Usage(str(exc)) from None
    after, note = _read_from(start, tz)
    kind = "wildcard-timed" if c.wildcard_timed else "fixed-timed"
    print(f"{expr!r} in {tz_name} ({kind}), after {after.isoformat()}:")
    if note:
        print(f"  {note}")
    previous_fire = after
    shown = 0
    for fire in fire_times(c, after, count):
        shown += 1
        for t in transitions(c, previous_fire, fire):
            print(_transition_line(t, c.wildcard_timed))
        local = fire.astimezone(tz)
        marks = []
        before, here = previous_fire.astimezone(tz).utcoffset(), local.utcoffset()
        if before is not None and here is not None and here != before:
            marks.append(f"DST change {_hhmm(before)} -> {_hhmm(here)} before this fire")
        other = local.replace(fold=1 - local.fold).astimezone(timezone.utc)
        if other != fire.astimezone(timezone.utc):
            which = "first" if local.fold == 0 else "second"
            marks.append(f"repeated time, {which} pass")
        previous_fire = fire
        utc = fire.astimezone(timezone.utc)
        mark = f"  <- {'; '.join(marks)}" if marks else ""
        print(f"  {_local(local, tz)}   {utc:%Y-%m-%d %H:%M:%S} UTC{mark}")
    if shown < count:
        # (Not a silent stop: the calendar ends at the year 9999.)
        print(
            f"  no {'more ' if shown else ''}fires before the end of the calendar "
            f"(the year 9999): {shown} of the {count} asked for"
        )
    return 0


def _hhmm(offset: timedelta) -> str:
    seconds = int(offset.total_seconds())
    sign = "-" if seconds < 0 else "+"
    seconds = abs(seconds)
    return f"UTC{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows as columns padded to their widest cell."""
    cells = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _when(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _open(url: str, only: str | None = None) -> Scheduler:
    """A scheduler on the store a URL names, to read and change it (it runs nothing); with
    ``only``, it loads that job alone (a command that changes one job)."""
    try:
        store = store_from_url(url)
        check_existing(store, "--store")
        if only is not None:
            store.only = frozenset((only,))
        return Scheduler(store=store)
    except InvalidArgument as exc:
        message = str(exc)
        raise _Usage(message if message.startswith("--store") else f"--store: {message}") from exc


def _utc(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat()


def jobs(url: str, state: str | None) -> int:
    """Print the store's jobs as a table: the live ones, those this process cannot read
    (``unreadable``, with the reason), and with ``--state dead`` the dead letters with their
    last error."""
    s = _open(url)
    try:
        rows: list[tuple[object, ...]] = []
        notes: list[str] = []
        if state not in ("dead", "unreadable"):
            found = [j for j in s.jobs() if state is None or j.state.value == state]
            rows += [
                (j.id, j.name, j.state.value, _when(j.next_run_time), describe_trigger(j.trigger))
                for j in found
            ]
            notes += _unrunnable(s, found)
        if state in (None, "unreadable"):
            for bad in s.unreadable():
                if bad.table == "jobs":
                    rows.append((bad.id, None, "unreadable", None, None))
                    notes.append(f"cannot be read: {bad.reason}")
        dead = s.failed()
        if state == "dead":
            for letter in dead:
                job = letter.job
                rows.append((job.id, job.name, "dead", None, describe_trigger(job.trigger)))
                notes.append(f"last error: {letter.error}")
        header: tuple[str, ...] = ("ID", "NAME", "STATE", "NEXT RUN (UTC)", "TRIGGER")
        if any(notes):
            header += ("",)  # (a column without a heading: the heading line stays as it was)
            rows = [(*row, note) for row, note in zip(rows, notes, strict=True)]
        print(_table(header, rows))
        if dead and state is None:
            print(f"({len(dead)} dead job(s), not listed: --state dead lists them)")
        print(f"{len(rows)} job(s)")
    finally:
        s.shutdown()
    return 0


def _unrunnable(s: Scheduler, jobs: Sequence[Job]) -> list[str]:
    """For each job, "no worker has registered this task" if no live process on the store has
    said it runs the job's task (Scheduler.register records it), else ""."""
    store = s.store
    if not isinstance(store, (SQLiteStore, PostgresStore)):
        return [""] * len(jobs)  # (no processes record themselves in memory)
    try:
        names, prefixes = store.live_tasks(real_time_ns())
    except StoreError:
        return [""] * len(jobs)  # (a store made before processes recorded themselves)

    def runnable(task: str) -> bool:
        if task in names:
            return True
        module, sep, _ = task.partition(":")
        return bool(sep) and codec.under_prefixes(module, prefixes)

    return [
        ""
        if not isinstance(j.func, MissingTask) or runnable(j.func.task)
        else "no worker has registered this task"
        for j in jobs
    ]


def runs(url: str, job: str | None, state: str | None, count: int) -> int:
    """Print the store's run records as a table, newest first."""
    s = _open(url)
    try:
        found = s.runs(job, state=state, limit=count)
        rows = [
            (r.key, r.state, r.attempt, _when(r.started), _when(r.finished), r.worker, r.error)
            for r in found
        ]
        print(_table(("KEY", "STATE", "ATTEMPT", "STARTED", "FINISHED", "WORKER", "ERROR"), rows))
        print(f"{len(found)} run(s)")
    finally:
        s.shutdown()
    return 0


def change(url: str, action: str, id: str) -> int:
    """Cancel, pause, resume, trigger or retry one job of a store."""
    s = _open(url, only=id)
    already = None
    try:
        if action == "cancel":
            if not s.cancel(id):
                raise JobLookupError(id)
        elif action == "retry":
            s.retry_failed(id)
        else:
            job = s.get(id)
            if job is None:
                for bad in s.unreadable():
                    if bad.table == "jobs" and bad.id == id:
                        raise DuetimeError(
                            f"job {id!r} cannot be read ({bad.reason}); cancel is the one "
                            "change an unreadable job takes"
                        )
                raise JobLookupError(id)
            # (Pausing a paused job, resuming one that is not, changes nothing: say so.)
            if action == "pause" and job.state is JobState.PAUSED:
                already = f"{id} was paused already"
            elif action == "resume" and job.state is not JobState.PAUSED:
                already = f"{id} is not paused"
            getattr(s, action)(id)
    finally:
        s.shutdown()
    done = {"cancel": "cancelled", "pause": "paused", "resume": "resumed"}
    what = done.get(action, "queued a run of" if action == "trigger" else "queued again")
    print(already or f"{what} {id}")
    return 0


def _parser() -> _Parser:
    parser = _Parser(
        prog="python -m duetime",
        description="duetime's command line: a demo, a preview of cron expressions, and the "
        "jobs and runs of a durable store (list them; cancel, pause, resume, trigger or retry "
        "one).",
        epilog="Bad arguments exit with status 2 and one line saying what was wrong.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sub.add_parser(
        "demo",
        help="run a simulated day of jobs on a FakeClock",
        description="Schedule a few jobs on a simulated day (a FakeClock) and run it at once.",
    )
    p_cron = sub.add_parser(
        "cron",
        help="print the next fire times of a cron expression",
        description="Print the next fire times of a cron expression, in local time and UTC,\n"
        "and what daylight-saving changes on the way do to it.",
        epilog=_KINDS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p_cron.add_argument("expr", help='cron expression, e.g. "30 2 * * *"')
    p_cron.add_argument("--tz", default="UTC", help="IANA zone (default UTC)")
    p_cron.add_argument(
        "-n", type=int, default=10, help=f"how many fire times, 1-{_MAX_COUNT} (default 10)"
    )
    p_cron.add_argument(
        "--from",
        dest="start",
        help="ISO date or date-time to start after, read in --tz if it has no offset "
        "(default: now)",
    )
    store_help = (
        "the store: sqlite:///relative.db, sqlite:////absolute/path.db or "
        "postgresql://user@host:5432/dbname[?schema=name]"
    )
    p_jobs = sub.add_parser(
        "jobs",
        help="list a store's jobs",
        description="List the live jobs of a durable store, and the rows it cannot read "
        "(unreadable); --state dead lists the dead jobs (dead letters) with their last error.",
    )
    p_jobs.add_argument("--store", required=True, help=store_help)
    p_jobs.add_argument(
        "--state",
        choices=["scheduled", "running", "paused", "dead", "unreadable"],
        help="only jobs in this state",
    )
    p_runs = sub.add_parser(
        "runs",
        help="list a store's recorded runs",
        description="List the runs a durable store recorded, newest first.",
    )
    p_runs.add_argument("--store", required=True, help=store_help)
    p_runs.add_argument("--job", help="only this job's runs")
    p_runs.add_argument("--state", choices=RUN_STATES, help="only runs in this state")
    p_runs.add_argument("-n", type=int, default=50, help="how many at most (default 50)")
    for action, text in (
        ("cancel", "cancel a job"),
        ("pause", "pause a job"),
        ("resume", "resume a paused job"),
        ("trigger", "queue one extra run of a job now (a worker runs it)"),
        ("retry", "queue a dead job (a dead letter) again"),
    ):
        p = sub.add_parser(action, help=text, description=f"{text[0].upper()}{text[1:]}.")
        p.add_argument("id", help="the job's id")
        p.add_argument("--store", required=True, help=store_help)
    _worker_parser(sub, store_help)
    _web_parser(sub, store_help)
    return parser


def _worker_parser(sub: argparse._SubParsersAction[_Parser], store_help: str) -> None:
    """The ``worker`` subcommand's arguments (docs/worker.md)."""
    p = sub.add_parser(
        "worker",
        help="run the jobs of a store until SIGTERM or SIGINT",
        description="Run the jobs of a durable store, with the tasks that the named modules "
        "declare with @duetime.task, until SIGTERM or SIGINT: the first lets the runs going on "
        "finish and exits 0, a second exits at once (128 + the signal's number).",
    )
    p.add_argument("--store", required=True, help=store_help)
    p.add_argument(
        "--tasks",
        action="append",
        required=True,
        metavar="MODULE",
        help="a module whose @duetime.task functions this worker runs (repeat for more)",
    )
    p.add_argument(
        "--executor",
        choices=_worker.EXECUTORS,
        default="thread",
        help="where jobs run: a thread pool (default), a process pool, or inline in the "
        "runner's thread (one at a time)",
    )
    p.add_argument(
        "--max-concurrent",
        type=int,
        metavar="N",
        help="most jobs running at once in this process (default: 8 threads; one process per CPU)",
    )
    p.add_argument(
        "--log-level",
        type=str.upper,
        choices=_worker.LOG_LEVELS,
        default="INFO",
        help="log records at this level and above go to stderr (default INFO)",
    )


def _run_worker(args: argparse.Namespace) -> int:
    """``python -m duetime worker``: its bad arguments are this command's usage errors."""
    try:
        return _worker.run(
            args.store, args.tasks, args.executor, args.max_concurrent, args.log_level
        )
    except _worker.WorkerUsage as exc:
        raise _Usage(str(exc)) from None


def _web_parser(sub: argparse._SubParsersAction[_Parser], store_help: str) -> None:
    """``web``: serve the dashboard (the ``duetime[web]`` extra, docs/dashboard.md)."""
    p = sub.add_parser(
        "web",
        help="serve a store's web dashboard (needs duetime[web])",
        description="Serve the web dashboard and /metrics of a durable store.",
    )
    p.add_argument("--store", required=True, help=store_help)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument(
        "--token",
        default=os.environ.get("DUETIME_WEB_TOKEN") or None,
        help="the token reading and acting need (default: $DUETIME_WEB_TOKEN; none if unset)",
    )
    p.add_argument("--read-only", action="store_true", help="hide and refuse every action")


def web(args: argparse.Namespace) -> int:
    """Serve the dashboard of ``args.store`` (``python -m duetime web``)."""
    if not 0 <= args.port <= 65535:
        raise _Usage(f"--port must be between 0 and 65535, got {args.port}")
    try:
        # (Imported here, by name: the extra's packages load only for this command.)
        serve = importlib.import_module("duetime.web._serve").serve
    except ImportError as exc:
        raise _Usage(f'the dashboard needs pip install "duetime[web]" ({exc})') from None
    try:
        status: int = serve(
            args.store,
            host=args.host,
            port=args.port,
            token=args.token,
            read_only=args.read_only,
        )
    except InvalidArgument as exc:
        raise _Usage(f"--store: {exc}") from exc
    return status


@contextlib.contextmanager
def _warnings_shown(prog: str) -> Iterator[None]:
    """duetime's warnings on stderr while a store command runs: what the store holds that
    this command cannot read (a job whose retry policy names a module it has not imported)
    must not vanish from the listing in silence."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter(f"{prog}: warning: %(message)s"))
    log = logging.getLogger("duetime")
    log.addHandler(handler)
    try:
        yield
    finally:
        log.removeHandler(handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m duetime``: returns the exit status (2: bad arguments)."""
    parser = _parser()
    try:
        # (Arguments the subcommand does not take are its error, named after it, as argparse
        # would name the top-level command.)
        args, extra = parser.parse_known_args(argv)
        if extra:
            raise _Usage(f"unrecognized arguments: {' '.join(extra)}")
        if args.command == "demo":
            return demo()
        if args.command == "cron":
            return cron(args.expr, args.tz, args.n, args.start)
        if args.command == "worker":
            return _run_worker(args)
        with _warnings_shown(f"{parser.prog} {args.command}"):
            if args.command == "jobs":
                return jobs(args.store, args.state)
            if args.command == "runs":
                if not 1 <= args.n <= _MAX_COUNT:
                    raise _Usage(f"-n must be between 1 and {_MAX_COUNT}, got {args.n}")
                return runs(args.store, args.job, args.state, args.n)
            if args.command == "web":
                return web(args)
            return change(args.store, args.command, args.id)
    except _Usage as exc:
        command = exc.prog or parser.prog
        if exc.prog is None and "args" in locals():
            command = f"{parser.prog} {args.command}"
        print(f"{command}: error: {exc} (see --help)", file=sys.stderr)
        return 2
    except DuetimeError as exc:
        print(f"{parser.prog} {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (``| head``): not an error of this command. Python would print
        # a traceback flushing stdout at exit; point it at nothing instead.
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print(file=sys.stderr)  # (after the ^C the terminal shows)
        return 130


if __name__ == "__main__":
    sys.exit(main())
