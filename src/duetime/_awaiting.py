"""Running what a job returned when it is a coroutine: a coroutine function scheduled on the
thread runner, stepped by hand or sent to a process pool runs to completion, never leaving a
coroutine object behind while its run counts as a success. (Its own module: the Scheduler and
the thread runner's process-pool path both use it, and neither may import the other.)"""

from __future__ import annotations

import contextvars
import inspect
from concurrent.futures import ThreadPoolExecutor
from types import AsyncGeneratorType, CoroutineType, GeneratorType
from typing import Any


def await_result(coro: Any) -> Any:
    """Run a coroutine that a job returned to completion, in an event loop of this thread.

    A coroutine function scheduled on the thread runner or stepped by hand must really run, not
    leave a coroutine object behind while its run counts as a success. Each run gets a fresh
    loop (``asyncio.run``); AsyncScheduler is the way to share one loop with the application.
    Called from code that already runs a loop in this thread (``run_until`` inside an async
    test), the coroutine runs on a helper thread with its own loop, in the same context.

    An async generator (an ``async def`` with ``yield``) or a generator (a ``def`` with
    ``yield``) cannot be run as a job: calling the function only makes the generator, and its
    body never runs. That is the job's failure, a ``TypeError``.

    A ``CancelledError`` out of the job's own coroutine (it awaited something cancelled) is that
    job's failure, not an interruption of whoever runs it: it is raised as a ``RuntimeError``,
    which the life cycle records like any exception of the job.
    """
    if type(coro) is GeneratorType:
        raise TypeError(
            "the job is a generator function (def with yield), which cannot be run as a job: "
            "its body never runs; make it a plain function (or iterate the generator in one)"
        )
    if type(coro) is AsyncGeneratorType:
        raise TypeError(
            "the job is an async generator function (async def with yield), which cannot be "
            "run as a job: its body never runs; make it a plain async def"
        )
    import asyncio  # (here: a program on the thread runner never pays for importing it)

    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        ctx = contextvars.copy_context()
        with ThreadPoolExecutor(1, thread_name_prefix="duetime-await") as pool:
            return pool.submit(ctx.run, asyncio.run, coro).result()
    except asyncio.CancelledError as exc:
        raise RuntimeError(f"the job's coroutine was cancelled ({exc!r})") from exc


def is_generator_function(func: Any) -> bool:
    """Whether ``func`` is a generator function (a ``def`` with ``yield``; a method or
    ``functools.partial`` of one, or an object whose ``__call__`` is one): asked only of a job
    that returned a generator, which a plain function returning one (``os.walk(path)``, a
    generator expression) may do as its result."""
    return inspect.isgeneratorfunction(func) or (
        not inspect.isroutine(func) and inspect.isgeneratorfunction(type(func).__call__)
    )


def call_to_completion(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func(*args, **kwargs)``, a coroutine it returns run to completion: what a process pool
    runs for a job (the bare function goes there; a coroutine object cannot cross back)."""
    result = func(*args, **kwargs)
    kind = type(result)
    if (
        kind is CoroutineType
        or kind is AsyncGeneratorType
        or (kind is GeneratorType and is_generator_function(func))
    ):
        return await_result(result)
    return result
