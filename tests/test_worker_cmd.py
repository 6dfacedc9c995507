"""``python -m duetime worker`` as a real process, on SQLite and PostgreSQL: it runs the jobs
another process schedules, stops gracefully at the first SIGTERM or SIGINT (the run going on
finishes and its outcome is written, exit status 0), at once at a second (128 + the signal's
number), and refuses a bad store or tasks module with one line and exit status 2.

Every wait polls a file or the store with a deadline (``conftest.until``), never a fixed sleep;
a job that must be running while the test signals the worker waits for a file the test writes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

import duetime
from duetime import At, RunRecord, Scheduler
from duetime._declared import declared

from . import conftest

#: The tasks module the workers import (written into each test's folder, their working folder).
TASKS = """\
import pathlib
import threading

import duetime


@duetime.task("touch")
def touch(path: str) -> None:
    pathlib.Path(path).write_text("done")


@duetime.task
def hold(folder: str) -> None:
    # Says it started, then waits (at most a minute) for the test to let it finish.
    where = pathlib.Path(folder)
    (where / "started").write_text("")
    pause = threading.Event()
    for _ in range(6000):
        if (where / "go").exists():
            break
        pause.wait(0.01)
    (where / "finished").write_text("")


@duetime.task("boom")
def boom() -> None:
    raise RuntimeError("kaboom")
"""

#: Longest a test waits for a worker to do something (seconds): only a hang reaches it.
WAIT = 60.0
EVERY = 0.01


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL: a SQLite file, or a schema of the session's PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}"
    database = request.getfixturevalue("pg_database")
    return f"{database}?schema={request.getfixturevalue('pg_schema')}"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The workers' working folder, with the tasks module ``wtasks`` in it."""
    (tmp_path / "wtasks.py").write_text(TASKS)
    (tmp_path / "notasks.py").write_text("X = 1\n")
    (tmp_path / "broken.py").write_text("raise RuntimeError('no database\\nconfigured')\n")
    return tmp_path


class Worker:
    """A worker process, its stderr in a file."""

    def __init__(self, proc: subprocess.Popen[bytes], err: Path) -> None:
        self.proc = proc
        self.err = err

    def stderr(self) -> str:
        return self.err.read_text() if self.err.exists() else ""

    def wait_for(self, text: str) -> None:
        conftest.until(
            lambda: text in self.stderr(),
            WAIT,
            f"{text!r} on the worker's stderr",
            EVERY,
            explain=self.stderr,
        )

    def exit_status(self) -> int:
        return self.proc.wait(timeout=WAIT)


@pytest.fixture
def spawn(folder: Path) -> Iterator[Callable[..., Worker]]:
    """Start ``python -m duetime worker`` with arguments, in the tests' folder; whatever is
    left of it at the end of the test (a pool's processes too) is killed."""
    started: list[Worker] = []

    def start(*args: str) -> Worker:
        err = folder / f"worker-{len(started)}.err"
        with err.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "duetime", "worker", *args],
                cwd=folder,
                stdout=subprocess.DEVNULL,
                stderr=out,
                start_new_session=True,  # (its own process group: killed whole below)
            )
        started.append(Worker(proc, err))
        return started[-1]

    yield start
    for w in started:
        # (The group, even if the worker has exited: a pool process it left behind goes too.)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(w.proc.pid, signal.SIGKILL)
        w.proc.wait(timeout=WAIT)


def schedule(store: str, task: str, *args: str, id: str) -> str:
    """Schedule a one-shot of ``task`` due now from this process (which has not registered
    it: the job is stored under the name); its fire key."""
    now = datetime.now(timezone.utc)
    s = Scheduler(store=store)
    try:
        s.schedule(task, At(now), args=list(args), id=id)
    finally:
        s.shutdown()
    return f"{id}@{now.isoformat()}"


def alive(group: int) -> bool:
    """Whether a process of the process group ``group`` is still running (not a zombie)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    states = subprocess.run(
        ["ps", "-o", "stat=", "-g", str(group)], capture_output=True, text=True, check=False
    ).stdout.split()
    return any(not s.startswith("Z") for s in states)


def run_of(store: str, key: str) -> RunRecord | None:
    """The store's record of the run ``key``, read by a scheduler of this process."""
    s = Scheduler(store=store)
    try:
        return next((r for r in s.runs(limit=1000) if r.key == key), None)
    finally:
        s.shutdown()


def test_the_worker_runs_what_another_process_schedules(
    store: str, folder: Path, spawn: Callable[..., Worker]
) -> None:
    w = spawn("--store", store, "--tasks", "wtasks")
    w.wait_for("started: store")
    key = schedule(store, "touch", str(folder / "touched"), id="touch-1")
    # (A process that passes the function itself stores it as module:qualname: the same task.)
    schedule(store, "wtasks:touch", str(folder / "touched-too"), id="touch-2")
    conftest.until((folder / "touched").exists, WAIT, "the job ran", EVERY, explain=w.stderr)
    conftest.until((folder / "touched-too").exists, WAIT, "the 2nd ran", EVERY, w.stderr)
    conftest.until(
        lambda: (r := run_of(store, key)) is not None and r.state == "succeeded",
        WAIT,
        "its outcome recorded",
        0.05,
        explain=w.stderr,
    )
    w.proc.send_signal(signal.SIGTERM)
    assert w.exit_status() == 0
    lines = w.stderr().splitlines()
    started = [ln for ln in lines if "started: store" in ln]
    assert len(started) == 1
    assert "tasks touch, wtasks:hold, boom" in started[0]
    assert "executor thread" in started[0]
    assert [ln for ln in lines if "stopping (SIGTERM)" in ln]
    assert lines[-1].endswith("stopped")


def test_a_plain_tasks_module_runs_its_functions_by_module_and_qualname(
    store: str, folder: Path, spawn: Callable[..., Worker]
) -> None:
    # No @duetime.task: naming the module allows the functions defined in it (import_tasks=),
    # never what it imports (os.system stays out of reach).
    (folder / "plaintasks.py").write_text(
        "import os\nimport pathlib\n\n\ndef touch(path):\n"
        "    pathlib.Path(path).write_text('done')\n"
    )
    w = spawn("--store", store, "--tasks", "plaintasks")
    w.wait_for("started: store")
    schedule(store, "plaintasks:touch", str(folder / "plain"), id="plain-1")
    schedule(store, "plaintasks:os.system", f"touch {folder / 'pwned'}", id="evil")
    conftest.until((folder / "plain").exists, WAIT, "the job ran", EVERY, explain=w.stderr)
    w.proc.send_signal(signal.SIGTERM)
    assert w.exit_status() == 0
    assert not (folder / "pwned").exists()
    assert "tasks plaintasks:touch" in w.stderr()


@pytest.mark.parametrize(
    ("executor", "signum"),
    [
        ("thread", signal.SIGTERM),
        ("thread", signal.SIGINT),
        ("process", signal.SIGTERM),
        ("inline", signal.SIGINT),
    ],
)
def test_a_signal_lets_the_run_going_on_finish_and_exits_0(
    store: str,
    folder: Path,
    spawn: Callable[..., Worker],
    executor: str,
    signum: signal.Signals,
) -> None:
    key = schedule(store, "wtasks:hold", str(folder), id="hold-1")
    w = spawn("--store", store, "--tasks", "wtasks", "--executor", executor)
    conftest.until((folder / "started").exists, WAIT, "the job started", EVERY, explain=w.stderr)
    w.proc.send_signal(signum)
    w.wait_for(f"stopping ({signum.name})")
    assert w.proc.poll() is None  # (it waits for the run)
    (folder / "go").write_text("")
    assert w.exit_status() == 0
    assert (folder / "finished").exists()
    assert w.stderr().splitlines()[-1].endswith("stopped")
    record = run_of(store, key)
    assert record is not None and record.state == "succeeded" and record.finished is not None
    # The command line reads the same outcome.
    out = subprocess.run(
        [sys.executable, "-m", "duetime", "runs", "--store", store],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=True,
    ).stdout
    assert [ln.split()[1] for ln in out.splitlines() if ln.startswith("hold-1@")] == ["succeeded"]


@pytest.mark.parametrize(
    ("executor", "signum"),
    [("thread", signal.SIGTERM), ("thread", signal.SIGINT), ("process", signal.SIGTERM)],
)
def test_a_second_signal_exits_at_once(
    store: str,
    folder: Path,
    spawn: Callable[..., Worker],
    executor: str,
    signum: signal.Signals,
) -> None:
    key = schedule(store, "wtasks:hold", str(folder), id="hold-2")
    w = spawn("--store", store, "--tasks", "wtasks", "--executor", executor)
    conftest.until((folder / "started").exists, WAIT, "the job started", EVERY, explain=w.stderr)
    w.proc.send_signal(signal.SIGTERM)
    w.wait_for("stopping (SIGTERM)")
    w.proc.send_signal(signum)
    assert w.exit_status() == 128 + signum
    assert "second signal" in w.stderr()
    # Nothing of it is left: a process pool's processes went with it.
    conftest.until(
        lambda: not alive(w.proc.pid), WAIT, "its process group to be gone", EVERY, w.stderr
    )
    assert not (folder / "finished").exists()
    record = run_of(store, key)
    # Left to its lease: another worker takes it over when the lease runs out.
    assert record is not None and record.state == "running"


def test_a_failing_job_is_logged(store: str, folder: Path, spawn: Callable[..., Worker]) -> None:
    w = spawn("--store", store, "--tasks", "wtasks", "--log-level", "warning")
    key = schedule(store, "boom", id="boom-1")
    w.wait_for("job 'boom-1' attempt 1 failed (RuntimeError: kaboom)")
    conftest.until(
        lambda: (r := run_of(store, key)) is not None and r.state == "dead",
        WAIT,
        "the failure recorded",
        0.05,
        explain=w.stderr,
    )
    w.proc.send_signal(signal.SIGTERM)
    assert w.exit_status() == 0
    assert "started: store" not in w.stderr()  # (INFO, below --log-level warning)


def usage_error(spawn: Callable[..., Worker], *args: str) -> str:
    """The one line a worker started with bad arguments prints, checking it exits with 2."""
    w = spawn(*args)
    assert w.exit_status() == 2
    lines = w.stderr().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("python -m duetime worker: error: ")
    return lines[0]


def test_a_bad_store_url_exits_2_with_one_line(
    store: str, folder: Path, spawn: Callable[..., Worker]
) -> None:
    line = usage_error(spawn, "--store", "mysql://app@db/app", "--tasks", "wtasks")
    assert "URL such as 'sqlite:///jobs.db'" in line
    if store.startswith("sqlite"):
        line = usage_error(
            spawn, "--store", "sqlite:///no/such/folder/jobs.db", "--tasks", "wtasks"
        )
        assert "in a folder that does not exist" in line
    else:
        missing = store.rsplit("/", 1)[0] + "/no_such_database_here"
        line = usage_error(spawn, "--store", missing, "--tasks", "wtasks")
        assert 'database "no_such_database_here" does not exist' in line


@pytest.mark.parametrize(
    ("module", "says"),
    [
        ("no_such_module", "does not import: ModuleNotFoundError: No module named"),
        ("broken", "does not import: RuntimeError: no database configured"),
        ("notasks", "declares no task (decorate its task functions with @duetime.task;"),
    ],
)
def test_a_bad_tasks_module_exits_2_with_one_line(
    folder: Path, spawn: Callable[..., Worker], module: str, says: str
) -> None:
    store = f"sqlite:///{folder / 'jobs.db'}"
    line = usage_error(spawn, "--store", store, "--tasks", "wtasks", "--tasks", module)
    assert f"--tasks {module}: the module {says}" in line
    assert not (folder / "jobs.db").exists()  # (the modules are imported first)


def test_bad_options_exit_2_with_one_line(folder: Path, spawn: Callable[..., Worker]) -> None:
    store = f"sqlite:///{folder / 'jobs.db'}"
    assert "--max-concurrent must be at least 1, got 0" in usage_error(
        spawn, "--store", store, "--tasks", "wtasks", "--max-concurrent", "0"
    )
    assert "--executor: invalid choice: 'fork'" in usage_error(
        spawn, "--store", store, "--tasks", "wtasks", "--executor", "fork"
    )
    assert "required: --tasks" in usage_error(spawn, "--store", store)


# -- @duetime.task, in this process ---------------------------------------------------------------


def test_task_declares_by_name_or_module_and_qualname() -> None:
    def plain() -> None: ...

    def named() -> None: ...

    plain.__module__ = named.__module__ = "tests.declared_here"
    plain.__qualname__, named.__qualname__ = "plain", "named"
    assert duetime.task(plain) is plain
    assert duetime.task("declared-here-named")(named) is named
    assert declared("tests.declared_here") == {
        "tests.declared_here:plain": plain,
        "declared-here-named": named,
    }
    assert declared("tests.declared") == {}  # (a prefix is a module, not a string's start)
    assert set(declared("tests")) >= {"tests.declared_here:plain", "declared-here-named"}

    def other() -> None: ...

    with pytest.raises(duetime.InvalidArgument, match="already declared"):
        duetime.task("declared-here-named")(other)
    with pytest.raises(duetime.InvalidArgument, match="must not be empty"):
        duetime.task("")
    with pytest.raises(TypeError, match="takes a task name"):
        duetime.task(42)  # type: ignore[call-overload]
