"""``python -m duetime worker``: a process that runs the jobs of a durable store (docs/worker.md).

It imports the tasks modules its operator names (the allow-list: only the tasks they declare
with ``@duetime.task`` are registered), opens a Scheduler on the store and runs until SIGTERM
or SIGINT. The first signal shuts it down gracefully: no new claims, the runs going on finish
and their outcomes are written, exit status 0. A second signal ends the process at once (exit
status 128 + the signal's number: 130 for SIGINT, 143 for SIGTERM); the runs it held are taken
over by another worker when their leases run out.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from types import FrameType
from typing import Any

from duetime._declared import declared
from duetime.errors import InvalidArgument, StoreError
from duetime.scheduler import Scheduler
from duetime.stores._url import store_from_url
from duetime.stores.postgres import missing_database, redact_dsn
from duetime.stores.sqlite import SQLiteStore

logger = logging.getLogger("duetime")

#: The ``--executor`` choices: a pool of threads, a pool of processes, or the runner's thread.
EXECUTORS = ("thread", "process", "inline")
#: The ``--log-level`` choices.
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
#: The signals that stop a worker.
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class WorkerUsage(Exception):
    """A bad argument of the worker command (a store URL, a tasks module): the command line
    prints it as one line and exits with status 2."""


class _Stop(Exception):
    """Raised in the main thread by the first SIGTERM or SIGINT."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def load_tasks(modules: Sequence[str]) -> dict[str, Callable[..., Any]]:
    """Import each module and collect the tasks declared in it with ``@duetime.task``.

    Returns:
        Task name -> function, for every module, in the order given.

    Raises:
        WorkerUsage: A module does not import (not found, or its code raised), or declares no
            task.
    """
    tasks: dict[str, Callable[..., Any]] = {}
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:
            text = " ".join(str(exc).split()) or "(no message)"
            raise WorkerUsage(
                f"--tasks {module}: the module does not import: {type(exc).__name__}: {text} "
                f"(give a module name such as myapp.tasks, importable from the current folder "
                f"or PYTHONPATH)"
            ) from None
        found = declared(module) or _defined_functions(module)
        if not found:
            raise WorkerUsage(
                f"--tasks {module}: the module declares no task (decorate its task functions "
                f"with @duetime.task; a package's modules count once it imports them)"
            )
        tasks.update(found)
    return tasks


def _defined_functions(module: str) -> dict[str, Callable[..., Any]]:
    """A module without ``@duetime.task``: its public functions *defined* there, by
    ``"module:qualname"`` (how a process that schedules them stores them). Naming the module
    allows them, as ``import_tasks=`` does; what it merely imports is not its."""
    found = sys.modules[module]
    return {
        f"{module}:{value.__qualname__}": value
        for name, value in vars(found).items()
        if inspect.isfunction(value) and value.__module__ == module and not name.startswith("_")
    }


def _ignore_signals() -> None:
    """A process pool's worker leaves SIGINT and SIGTERM to the worker command, which stops
    it: a Ctrl-C reaching the whole process group must not kill the jobs it runs."""
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def make_executor(kind: str, max_concurrent: int | None) -> Executor | str | None:
    """The executor for ``--executor``: None for the Scheduler's own pool of 8 threads (a
    thread pool without ``--max-concurrent``), else a pool of ``max_concurrent`` threads, a
    process pool (``max_concurrent`` processes, default one per CPU) or ``"inline"``."""
    if kind == "inline":
        return "inline"
    if kind == "process":
        # (Imported here: 10 ms that every other command of the command line would pay.)
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # (spawn, not fork: this process runs threads, which fork would copy mid-stride.)
        return ProcessPoolExecutor(
            max_concurrent,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_ignore_signals,
        )
    if max_concurrent is None:
        return None
    return ThreadPoolExecutor(max_concurrent, thread_name_prefix="duetime-worker")


def open_scheduler(
    url: str,
    executor: Executor | str | None,
    max_concurrent: int | None,
    modules: Sequence[str] = (),
) -> Scheduler:
    """A scheduler on the store ``url`` names, made if it does not exist yet (a worker may
    start before anything was scheduled), allowed to run the functions defined under
    ``modules`` that jobs name by ``"module:qualname"`` (``import_tasks=``).

    Raises:
        WorkerUsage: The URL is not a store's, names a SQLite file in a folder that does not
            exist, or a PostgreSQL database that does not exist.
        StoreError: The store fails otherwise (a server that does not answer).
    """
    try:
        store = store_from_url(url)
        if isinstance(store, SQLiteStore) and not Path(store.path).parent.is_dir():
            raise WorkerUsage(
                f"--store names {store.path!r}, in a folder that does not exist "
                f"({Path(store.path).parent})"
            )
        return Scheduler(
            store=store,
            executor=executor,
            max_concurrent=max_concurrent,
            import_tasks=list(modules),
        )
    except InvalidArgument as exc:
        raise WorkerUsage(f"--store: {exc}") from None
    except StoreError as exc:
        if missing_database(exc.__cause__):
            raise WorkerUsage(f"--store: {exc}") from None
        raise


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGTERM and SIGINT held back while the worker starts (the threads it starts inherit
    the mask, so the main thread alone takes them); one that came meanwhile is delivered when
    the block ends, to the handlers installed by then."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:  # pragma: no cover - not POSIX
        yield
        return
    mask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        mask(signal.SIG_UNBLOCK, _SIGNALS)


def _configure_logging(level: str) -> None:
    """Log records of every logger (duetime's and the tasks') to stderr at ``level``."""
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger().setLevel(level)


def run(
    url: str,
    modules: Sequence[str],
    executor: str = "thread",
    max_concurrent: int | None = None,
    log_level: str = "INFO",
) -> int:
    """Run a worker until SIGTERM or SIGINT (call it from the main thread).

    Args:
        url: The store's URL.
        modules: The tasks modules to import (at least one).
        executor: One of ``EXECUTORS``.
        max_concurrent: Most runs at once in this process (None: the executor's size; 8
            threads by default).
        log_level: One of ``LOG_LEVELS``.

    Returns:
        0 after a graceful stop. A second signal ends the process with status 128 + its
        number instead, without returning.

    Raises:
        WorkerUsage: A bad argument (see ``load_tasks`` and ``open_scheduler``).
        StoreError: The store fails at start.
    """
    if max_concurrent is not None and max_concurrent < 1:
        raise WorkerUsage(f"--max-concurrent must be at least 1, got {max_concurrent}")
    _configure_logging(log_level)
    tasks = load_tasks(modules)
    pool = make_executor(executor, max_concurrent)
    owned = pool if isinstance(pool, Executor) else None
    signals = _Signals()
    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    s: Scheduler | None = None
    try:
        with _signals_held():
            try:
                s = open_scheduler(url, pool, max_concurrent, modules)
            except BaseException:
                if owned is not None:
                    owned.shutdown(wait=False)
                raise
            signals.worker = _start(s, tasks, url, executor, max_concurrent)
            for sig in _SIGNALS:
                signal.signal(sig, signals.handle)
        forever = threading.Event()
        while True:
            forever.wait(3600)
    except _Stop as stop:
        assert s is not None
        logger.info(
            "worker %s stopping (%s): no new claims; the runs going on finish (a second signal "
            "exits at once)",
            signals.worker,
            signal.Signals(stop.signum).name,
        )
        s.shutdown(wait=True)
        if owned is not None:
            owned.shutdown(wait=True)
        logger.info("worker %s stopped", signals.worker)
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _start(
    s: Scheduler,
    tasks: dict[str, Callable[..., Any]],
    url: str,
    executor: str,
    max_concurrent: int | None,
) -> str:
    """Register ``tasks`` in ``s``, start its runner and log the start; the worker's id."""
    for name, func in tasks.items():
        s.register(name, func)
    s.start()
    worker = str(getattr(s.store, "worker", "?"))
    logger.info(
        "worker %s started: store %s, tasks %s, executor %s%s, %d job(s) in the store",
        worker,
        redact_dsn(url),
        ", ".join(tasks),
        executor,
        "" if max_concurrent is None else f", max_concurrent {max_concurrent}",
        len(s),
    )
    return worker


class _Signals:
    """What SIGTERM and SIGINT do: the first stops the worker gracefully (``_Stop`` raised in
    the main thread), a second ends the process at once."""

    def __init__(self) -> None:
        self.worker = "?"  # (its id, for the log, once it has started)
        self.stopping = False

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.stopping:
            self.stopping = True
            raise _Stop(signum)
        logger.warning(
            "worker %s: second signal (%s): exiting at once; its runs going on are taken over "
            "by another worker when their leases run out",
            self.worker,
            signal.Signals(signum).name,
        )
        pools = sys.modules.get("multiprocessing")  # (imported for a process pool only)
        for child in pools.active_children() if pools is not None else ():
            child.kill()  # (a process pool's: its jobs stop too, as the threads' do)
        logging.shutdown()
        os._exit(128 + signum)
