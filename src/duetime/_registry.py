"""The task registry: names that stand for functions (``register``, ``@task``, ``tasks``).

A durable store names a job's function by its task name; a loaded job whose task this process
has not registered waits for it (``Replica.unresolved``), and registering it later makes the
job runnable here. The registry's dict is the scheduler's ``_tasks``; this part is what
writes to it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from duetime._durable import MissingTask
from duetime._options import (
    check_task_name,
)
from duetime._replica import Replica
from duetime._validate import (
    name_hint,
)
from duetime.errors import (
    InvalidArgument,
)
from duetime.runner import RunnerLike

__all__ = ["Host", "TaskRegistry"]

logger = logging.getLogger("duetime")

F = TypeVar("F", bound=Callable[..., Any])


class Host(Protocol):
    """What this part uses of the scheduler that composes it."""

    _lock: threading.RLock
    _replica: Replica | None
    _runner: RunnerLike | None
    _tasks: dict[str, Callable[..., Any]]


class TaskRegistry:
    """The task names of the scheduler that composes it (see the module's docstring)."""

    def __init__(self, host: Host) -> None:
        self._s = host

    def register(self, name: str, func: Callable[..., Any]) -> None:
        """``Scheduler.register`` (see there)."""
        check_task_name(name)
        if not callable(func):
            raise TypeError(f"func must be callable, got {func!r}")
        with self._s._lock:
            known = self._s._tasks.get(name)
            if known is not None and known is not func:
                raise InvalidArgument(
                    f"name {name!r} is already the task {known!r}; a task name means one function"
                )
            self._s._tasks[name] = func
            replica = self._s._replica
            if replica is not None:
                replica.task_of.pop(func, None)  # rows name it by its task name from now on
                if replica.store.is_open:
                    replica.announce()
                if replica.unresolved:
                    replica.unpark()
                    # Runs of the task whose lease ran out were passed over while nothing here
                    # could run them: look for them at once, not a poll interval later (never,
                    # on a FakeClock that does not move).
                    replica.next_poll = 0
                    if self._s._runner is not None:
                        self._s._runner.poll_now()

    def task(self, name: str) -> Callable[[F], F]:
        """``Scheduler.task`` (see there)."""
        if callable(name):
            # (@s.task without the name: the function came as the name, and would have been
            # replaced by the decorator, registered under nothing.)
            raise TypeError(
                f"task() takes the task's name, then decorates: write "
                f"@s.task({getattr(name, '__name__', 'name')!r}) above the function, got the "
                f"function {name!r} itself"
            )
        check_task_name(name)

        def decorate(func: F) -> F:
            self.register(name, func)
            return func

        return decorate

    def tasks(self) -> dict[str, Callable[..., Any]]:
        """``Scheduler.tasks`` (see there)."""
        with self._s._lock:
            return dict(self._s._tasks)

    def task_named(self, name: str) -> Callable[..., Any]:
        func = self._s._tasks.get(name)
        if func is None and self._s._replica is not None:
            # A process that only schedules (a web app, an admin script) names tasks that
            # its workers register: the job is stored under the name, and this process
            # leaves it to them (or to a later register()), as it does a loaded one.
            found = self._s._replica.resolve(name)
            if found is None and name not in self._s._replica.hinted_tasks:
                hint = name_hint(name, self._s._tasks)
                if hint:  # (a near miss of a name this process registered: likely a typo)
                    self._s._replica.hinted_tasks.add(name)
                    logger.warning(
                        "task %r is not registered in this process: the job is stored for "
                        "the processes that register it%s",
                        name,
                        hint,
                    )
            return found or MissingTask(name)
        if func is None:
            known = ", ".join(sorted(self._s._tasks)) or "none yet"
            raise InvalidArgument(
                f"func {name!r} is not a registered task (registered: {known}); register it "
                f"with @s.task({name!r}) or s.register({name!r}, fn)"
                + name_hint(name, self._s._tasks)
            )
        return func
