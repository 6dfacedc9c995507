"""asyncio integration: the runner as a task on the loop instead of a thread.

``AsyncScheduler`` is a ``Scheduler`` whose runner is a coroutine: coroutine jobs run as tasks on
the running loop, plain functions in their executor (by default the loop's). It sleeps on an
``asyncio.Event`` that is set, through ``loop.call_soon_threadsafe``, when an insert from any thread
becomes the new head, when a run finishes, or (with a ``FakeClock``) when fake time moves. So async
code can be tested without real sleeping, exactly like threaded code::

    async with AsyncScheduler(clock=clock) as s:
        s.schedule(fetch, 10)
        clock.advance(10)
        await s.idle()

The job life cycle is the Scheduler's own; the runner (``duetime._aiorunner``) differs from the
threaded one only in how it waits and dispatches.
"""

from __future__ import annotations

from collections.abc import Awaitable

from duetime._aiorunner import AsyncRunner
from duetime.scheduler import Scheduler

__all__ = ["AsyncRunner", "AsyncScheduler"]


class AsyncScheduler(Scheduler):
    """A Scheduler whose runner is a task on the running asyncio loop.

    Use it as ``async with AsyncScheduler(...) as s:`` (for example in a web framework's lifespan
    handler), or call ``await s.run_async()`` yourself. ``schedule``, ``cancel`` and the other
    management methods are safe to call from any thread.

    Args:
        *args: As for ``Scheduler``.
        **kwargs: As for ``Scheduler``.
    """

    # (Annotated without asyncio, which is imported only when used: typing.get_type_hints()
    # must resolve these from the module's names.)
    _task: Awaitable[None] | None = None

    def start(self) -> Awaitable[None]:  # type: ignore[override]
        """Start the runner as a task on the running loop: ``await s.start()``.

        The task starts at once; the returned future is done when the runner has installed
        itself, so awaiting it is optional.

        Raises:
            RuntimeError: No asyncio loop is running in this thread. (A thread runner would
                never await coroutine jobs, so an AsyncScheduler refuses to start without one.)
        """
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "AsyncScheduler runs on a running asyncio loop: use 'async with "
                "AsyncScheduler(...) as s:' or 'await s.start()' inside a coroutine, or use "
                "Scheduler for a thread runner"
            ) from None
        # Claimed here, under the lock, so that a second start() is refused at once.
        runner = self._claim_runner("start", AsyncRunner)
        self._task = loop.create_task(self._serve(runner))
        started: asyncio.Future[None] = loop.create_future()
        # Callbacks run in order: the task's first step (the runner's start) comes first.
        loop.call_soon(started.set_result, None)
        return started

    def __enter__(self) -> AsyncScheduler:
        raise TypeError(
            "AsyncScheduler is an async context manager: use 'async with AsyncScheduler(...) "
            "as s:' inside a coroutine (or Scheduler with a plain 'with')"
        )

    async def __aenter__(self) -> AsyncScheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self, cancel_running: bool = False) -> None:
        """Stop the runner task and wait for running jobs (cancelling them if asked)."""
        self.shutdown(wait=False, cancel_running=cancel_running)
        if self._task is not None:
            await self._task

    async def idle(self) -> None:
        """Wait until nothing is due and nothing is running (for tests)."""
        runner = self._runner
        if not isinstance(runner, AsyncRunner):
            raise RuntimeError("the asyncio runner is not running")
        await runner.idle()
