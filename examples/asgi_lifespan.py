"""A FastAPI/Starlette-style lifespan: the scheduler lives as long as the web app.

The lifespan context manager starts an AsyncScheduler on the app's event loop and shuts it down
with the app. A stand-in "app" below plays the framework's part (it enters the lifespan, serves a
few requests that schedule work, and exits), so the example runs without a web framework. A
FakeClock makes it instant; in production, leave the clock out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from duetime import AsyncScheduler, FakeClock, FixedRate

clock = FakeClock(start=1_767_600_000.0)
log: list[str] = []


@dataclass
class App:
    """What a framework's app object offers a lifespan: somewhere to keep state."""

    state: dict[str, Any] = field(default_factory=dict)


async def refresh_cache() -> None:
    await asyncio.sleep(0)  # an awaitable call: an HTTP fetch, a DB query...
    log.append(f"t={clock.monotonic():5.0f}s refreshed cache")


async def send_receipt(order: str) -> None:
    log.append(f"t={clock.monotonic():5.0f}s sent receipt for {order}")


@asynccontextmanager
async def lifespan(app: App) -> AsyncIterator[None]:
    # With FastAPI: app = FastAPI(lifespan=lifespan)
    async with AsyncScheduler(clock=clock, tz="UTC") as scheduler:
        scheduler.schedule(refresh_cache, FixedRate(300), id="refresh-cache")
        app.state["scheduler"] = scheduler
        yield
    log.append("scheduler stopped with the app")


async def place_order(app: App, order: str) -> None:
    """A request handler: schedule a receipt 60 s after the order."""
    app.state["scheduler"].schedule(send_receipt, 60, args=(order,))


async def main() -> None:
    app = App()
    async with lifespan(app):
        scheduler: AsyncScheduler = app.state["scheduler"]
        await place_order(app, "A-1001")
        for _ in range(4):  # let fake time pass: five minutes per step
            clock.advance(150)
            await scheduler.idle()
            clock.advance(150)
            await scheduler.idle()
    print("\n".join(log))
    assert log.count("t=  300s refreshed cache") == 1
    assert "t=  150s sent receipt for A-1001" in log
    assert log[-1] == "scheduler stopped with the app"


asyncio.run(main())
