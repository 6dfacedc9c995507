"""Tasks declared at module level with ``@duetime.task``, without a Scheduler: what a tasks
module gives ``python -m duetime worker --tasks MODULE`` (docs/worker.md).

The decorator only records the function under its task name, in this process's memory; a
worker registers the tasks of the modules its operator names, and no others.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, overload

from duetime.errors import InvalidArgument

F = TypeVar("F", bound=Callable[..., Any])

# Task name -> function, in the order they were declared (a dict keeps it).
_DECLARED: dict[str, Callable[..., Any]] = {}
_LOCK = threading.Lock()


def _where(func: Callable[..., Any]) -> tuple[object, object]:
    return getattr(func, "__module__", None), getattr(func, "__qualname__", None)


def _declare(name: str | None, func: Callable[..., Any]) -> None:
    if not callable(func):
        raise TypeError(f"@duetime.task decorates a function, got {func!r}")
    module, qualname = _where(func)
    if name is None:
        if not isinstance(module, str) or not isinstance(qualname, str):
            raise InvalidArgument(
                f"@duetime.task without a name names the task 'module:qualname', and {func!r} "
                f"has none: give it a name, @duetime.task('name')"
            )
        name = f"{module}:{qualname}"
    with _LOCK:
        known = _DECLARED.get(name)
        # (The same module:qualname again is the module imported afresh, importlib.reload:
        # the new function takes the name.)
        if known is not None and known is not func and _where(known) != (module, qualname):
            raise InvalidArgument(
                f"task name {name!r} is already declared for {known!r}; a task name means one "
                f"function"
            )
        _DECLARED[name] = func


@overload
def task(name: F, /) -> F: ...


@overload
def task(name: str | None = None, /) -> Callable[[F], F]: ...


def task(name: Any = None, /) -> Any:
    """Declare a task in a tasks module, for the workers that import it: ``@duetime.task``
    (the task is named ``"module:qualname"``) or ``@duetime.task("send_report")``.

    The function is returned unchanged; it is only recorded under its name. A worker started
    with ``python -m duetime worker --tasks myapp.tasks`` registers every task declared in
    ``myapp.tasks`` (and in the modules under it that it imports); a ``Scheduler`` of your own
    registers them with ``s.register(name, fn)``, as any task (docs/worker.md).

    Args:
        name: The task's name, as jobs name it (``schedule("send_report", ...)``); without
            one, ``"module:qualname"``, which is also how a process that schedules the
            function itself (``schedule(send_report, ...)``) stores it.

    Raises:
        TypeError: ``name`` is neither a str nor the decorated function.
        InvalidArgument: ``name`` is empty, or already declared for another function.
    """
    if callable(name):
        _declare(None, name)
        return name
    if name is not None and not isinstance(name, str):
        raise TypeError(f"@duetime.task takes a task name (str), got {name!r}")
    if name is not None and not name:
        raise InvalidArgument("@duetime.task: the task name must not be empty")

    def decorate(func: F) -> F:
        _declare(name, func)
        return func

    return decorate


def declared(module: str) -> dict[str, Callable[..., Any]]:
    """The tasks declared in ``module`` or in a module under it (``myapp.tasks.email`` for
    ``myapp.tasks``), by name, in the order they were declared."""
    with _LOCK:
        found = list(_DECLARED.items())
    return {
        name: func
        for name, func in found
        if isinstance(m := _where(func)[0], str) and (m == module or m.startswith(module + "."))
    }
