"""A Starlette app whose lifespan owns an AsyncScheduler, driven by Starlette's real TestClient.

The lifespan starts the scheduler on the app's event loop and stops it with the app; request
handlers schedule work on it (a receipt 60 seconds after an order), and a recurring job refreshes
a cache every 5 minutes. FastAPI takes the same lifespan: ``FastAPI(lifespan=lifespan)``.

A FakeClock makes it instant: the test moves time with ``clock.advance()`` and the running
scheduler wakes up. Note that ``advance()`` under a running scheduler runs what fell due at the
*new* time, late (a job due at +60 s that the clock jumps 90 s past starts at +90 s); stepping
with ``run_until()`` instead sets the clock to each job's own due time (docs/testing.md). In
production, leave the clock out.

Needs the examples extra: ``pip install "duetime[examples]"`` (Starlette and httpx).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timezone

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from duetime import AsyncScheduler, FakeClock, FixedRate

clock = FakeClock(start=datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc))
activity: list[str] = []


def stamp() -> str:
    return f"{clock.now():%H:%M:%S} UTC"


async def refresh_cache() -> None:
    await asyncio.sleep(0)  # an awaitable call: an HTTP fetch, a DB query...
    activity.append(f"{stamp()}  refreshed the cache")


async def send_receipt(order: str) -> None:
    activity.append(f"{stamp()}  sent the receipt for {order}")


@asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    async with AsyncScheduler(clock=clock, tz="UTC") as scheduler:
        scheduler.schedule(refresh_cache, FixedRate(minutes=5), id="refresh-cache")
        app.state.scheduler = scheduler
        yield
    activity.append(f"{stamp()}  scheduler stopped with the app")


async def place_order(request: Request) -> JSONResponse:
    order = request.path_params["order"]
    job = request.app.state.scheduler.schedule(
        send_receipt, 60, args=(order,), id=f"receipt-{order}"
    )
    return JSONResponse({"order": order, "receipt_at": job.next_run_time.isoformat()})


async def show_activity(request: Request) -> JSONResponse:
    # A test hook: wait until the scheduler has run everything that is due, then report.
    await request.app.state.scheduler.idle()
    return JSONResponse(activity)


app = Starlette(
    routes=[
        Route("/orders/{order}", place_order, methods=["POST"]),
        Route("/activity", show_activity),
    ],
    lifespan=lifespan,
)


def main() -> None:
    with TestClient(app) as client:  # runs the lifespan: the scheduler starts
        reply = client.post("/orders/A-1001").json()
        assert reply == {"order": "A-1001", "receipt_at": "2026-01-05T09:01:00+00:00"}
        clock.advance(60)  # exactly to the receipt's due time
        assert client.get("/activity").json() == ["09:01:00 UTC  sent the receipt for A-1001"]
        clock.advance(240)  # to 09:05, the first cache refresh
        assert client.get("/activity").json()[-1] == "09:05:00 UTC  refreshed the cache"
        client.post("/orders/B-2002")  # receipt due at 09:06
        clock.advance(90)  # jump past it: it runs late, at the new time
        assert client.get("/activity").json()[-1] == "09:06:30 UTC  sent the receipt for B-2002"
    print("\n".join(activity))
    assert activity[-1] == "09:06:30 UTC  scheduler stopped with the app"


if __name__ == "__main__":
    main()
