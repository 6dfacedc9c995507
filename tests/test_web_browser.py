"""The dashboard's pages in a real browser: Debian's chromium driven by Playwright, against a
real uvicorn server on 127.0.0.1 (in a thread, or ``python -m duetime web`` in a process).

Without chromium or Playwright these tests skip saying why; under ``CI`` they fail instead.
With ``DUETIME_SCREENSHOTS=1`` they save the screenshots docs/dashboard.md shows into
docs/_static/ (else into the test's temporary directory).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import httpx
import pytest
import uvicorn

from duetime import FakeClock, Scheduler, SQLiteStore
from duetime.stores._views import open_store
from duetime.web import create_app
from tests.conftest import WAIT, until
from tests.web_data import XSS, fill, hello

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Page

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parent.parent
NAV = ("Jobs", "Runs", "Dead letters", "Workers", "Cron preview")
# Milliseconds a browser condition may take (only a hang reaches it).
MS = int(WAIT * 1000)


def _unavailable(why: str) -> NoReturn:
    message = (
        f"the browser tests need Playwright and Debian's chromium ({CHROMIUM}): {why}; "
        'pip install -e ".[test]" and apt-get install -y chromium'
    )
    if os.environ.get("CI"):
        pytest.fail(f"under CI the browser tests must run: {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A headless chromium, for the module."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc})")
    if not Path(CHROMIUM).exists():
        _unavailable(f"{CHROMIUM} does not exist")
    with sync_playwright() as p:
        try:
            found = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, timeout=WAIT * 1000)
        except Error as exc:
            _unavailable(f"chromium did not start ({exc})")
        try:
            yield found
        finally:
            found.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A page in a fresh browser context (cookies of its own), failing on any script error
    or dialog (an ``alert`` would be markup run as code)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(MS)
    found = context.new_page()
    problems: list[str] = []
    found.on("pageerror", lambda exc: problems.append(f"script error: {exc}"))

    def dialog(d: Dialog) -> None:
        problems.append(f"dialog: {d.message}")
        d.dismiss()

    found.on("dialog", dialog)
    try:
        yield found
    finally:
        context.close()
    assert problems == []


@pytest.fixture
def shots(tmp_path: Path) -> Callable[[Page, str], None]:
    """Save a page's screenshot: into docs/_static/ with DUETIME_SCREENSHOTS=1."""
    folder = ROOT / "docs" / "_static" if os.environ.get("DUETIME_SCREENSHOTS") else tmp_path

    def take(page: Page, name: str) -> None:
        page.screenshot(path=str(folder / f"dashboard-{name}.png"))

    return take


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Served:
    """An app served by uvicorn on 127.0.0.1 in a thread (``with``: started and stopped)."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", ws="none"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        until(lambda: self.server.started, what="uvicorn started")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(WAIT)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A filled store (SQLite, then PostgreSQL)."""
    found: Any
    if request.param == "sqlite":
        found = SQLiteStore(tmp_path / "jobs.db")
    else:
        found = request.getfixturevalue("pg_store")()
    fill(found)
    return found


@pytest.fixture
def sqlite_store(tmp_path: Path) -> SQLiteStore:
    found = SQLiteStore(tmp_path / "jobs.db")
    fill(found)
    return found


def visible(page: Page, role: str, name: str) -> None:
    from playwright.sync_api import expect

    expect(page.get_by_role(role, name=name, exact=True).first).to_be_visible()  # type: ignore[arg-type]


def test_every_page_links_to_the_others_and_shows_tables(
    page: Page, sqlite_store: SQLiteStore, shots: Callable[[Page, str], None]
) -> None:
    from playwright.sync_api import expect

    # A live worker, for the Workers page.
    worker = Scheduler(clock=FakeClock(), store=SQLiteStore(sqlite_store.path))
    worker.register("hello", hello)
    try:
        with Served(create_app(sqlite_store)) as served:
            for path, heading, shot in (
                ("/jobs", "Jobs", "jobs"),
                ("/jobs/fails", "Job fails", "job"),
                ("/runs", "Runs", "runs"),
                ("/dead", "Dead letters", "dead"),
                ("/workers", "Workers", "workers"),
            ):
                page.goto(served.url + path)
                expect(page.get_by_role("heading", level=1)).to_have_text(heading)
                for name in NAV:
                    visible(page, "link", name)
                assert page.get_by_role("columnheader").count() >= 5
                shots(page, shot)
            # From page to page by the links themselves.
            page.goto(served.url + "/jobs")
            for name in NAV:
                page.get_by_role("link", name=name, exact=True).click()
                expect(page.get_by_role("heading", level=1)).to_have_text(name)
            page.goto(served.url + "/jobs")
            expect(page.get_by_role("cell", name="cron '0 9 * * *' Europe/Berlin")).to_be_visible()
            expect(page.get_by_role("cell", name="every 5 min")).to_be_visible()
            page.goto(served.url + "/workers")
            expect(page.get_by_role("cell", name="live", exact=True)).to_be_visible()
    finally:
        worker.shutdown()


def test_buttons_act_on_a_job(page: Page, store: Any) -> None:
    from playwright.sync_api import expect

    with Served(create_app(store)) as served:
        page.goto(served.url + "/jobs/daily")
        facts = page.locator("dl.facts")
        expect(facts).to_contain_text("scheduled")
        page.get_by_role("button", name="Pause", exact=True).click()
        expect(page.get_by_role("status")).to_have_text("paused daily")
        expect(facts).to_contain_text("paused")
        page.get_by_role("button", name="Resume", exact=True).click()
        expect(page.get_by_role("status")).to_have_text("resumed daily")
        expect(facts).to_contain_text("scheduled")
        page.get_by_role("button", name="Trigger", exact=True).click()
        expect(page.get_by_role("status")).to_have_text("queued a run of daily")
        page.goto(served.url + "/runs?state=queued")
        expect(page.get_by_role("cell", name="daily", exact=True)).to_be_visible()
        page.goto(served.url + "/jobs/daily")
        page.get_by_role("button", name="Cancel", exact=True).click()
        expect(page.get_by_role("status")).to_have_text("cancelled daily")
        expect(facts).to_contain_text("cancelled")


@pytest.mark.parametrize("action", ["Retry", "Discard"])
def test_buttons_act_on_a_dead_letter(page: Page, sqlite_store: SQLiteStore, action: str) -> None:
    from playwright.sync_api import expect

    with Served(create_app(sqlite_store)) as served:
        page.goto(served.url + "/dead")
        row = page.get_by_role("row").filter(has_text="fails")
        expect(row).to_contain_text("ValueError: <b>no</b> such thing")
        row.get_by_role("button", name=action, exact=True).click()
        done = "queued again fails" if action == "Retry" else "discarded the dead letter of fails"
        expect(page.get_by_role("status")).to_have_text(done)
        expect(page.get_by_role("cell", name="No dead letters.")).to_be_visible()


def test_lists_refresh_without_reloading_the_page(page: Page, sqlite_store: SQLiteStore) -> None:
    from playwright.sync_api import expect

    with Served(create_app(sqlite_store, refresh=1)) as served:
        page.goto(served.url + "/jobs?state=paused")
        expect(page.get_by_role("cell", name="No jobs in state paused.")).to_be_visible()
        page.evaluate("window.stillHere = true")
        # Another process pauses a job: the open page shows it by itself.
        other = Scheduler(store=open_store(sqlite_store))
        try:
            other.pause("daily")
        finally:
            other.shutdown()
        expect(page.get_by_role("link", name="daily", exact=True)).to_be_visible()
        assert page.evaluate("window.stillHere") is True  # (not reloaded)


def test_markup_shows_as_text(page: Page, sqlite_store: SQLiteStore) -> None:
    from playwright.sync_api import expect

    with Served(create_app(sqlite_store)) as served:
        page.goto(served.url + "/jobs")
        expect(page.get_by_role("cell", name=XSS, exact=True)).to_be_visible()
        page.goto(served.url + "/jobs/fails")
        expect(page.get_by_text("ValueError: <b>no</b> such thing").first).to_be_visible()
    # (The page fixture fails the test if an alert opened.)


def test_a_token_asks_for_a_login(page: Page, sqlite_store: SQLiteStore) -> None:
    from playwright.sync_api import expect

    with Served(create_app(sqlite_store, token="s3cret")) as served:
        page.goto(served.url + "/runs")
        expect(page.get_by_role("heading", level=1)).to_have_text("Log in")
        page.get_by_label("Token").fill("wrong")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("alert")).to_have_text("Wrong token.")
        page.get_by_label("Token").fill("s3cret")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Runs")
        page.get_by_role("button", name="Log out").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Log in")


def test_read_only_shows_no_buttons(page: Page, sqlite_store: SQLiteStore) -> None:
    with Served(create_app(sqlite_store, read_only=True)) as served:
        page.goto(served.url + "/jobs/daily")
        visible(page, "link", "Jobs")
        assert page.get_by_role("button").count() == 0
        page.goto(served.url + "/dead")
        visible(page, "cell", "fails")
        assert page.get_by_role("button").count() == 0


def test_cron_preview_marks_dst_changes(
    page: Page, sqlite_store: SQLiteStore, shots: Callable[[Page, str], None]
) -> None:
    from playwright.sync_api import expect

    with Served(create_app(sqlite_store)) as served:
        page.goto(served.url + "/cron")
        page.get_by_label("Expression").fill("30 2 * * 0")
        page.get_by_label("Zone").fill("Europe/Berlin")
        page.get_by_label("Fires").fill("60")
        page.get_by_role("button", name="Preview").click()
        expect(page.get_by_text("(fixed-timed), from now")).to_be_visible()
        expect(page.get_by_text("clocks jump from 02:00 to 03:00").first).to_be_visible()
        expect(page.get_by_text("clocks go back from 03:00 to 02:00").first).to_be_visible()
        assert page.get_by_role("columnheader").count() == 3
        shots(page, "cron")


def test_the_web_command_serves_the_dashboard(page: Page, sqlite_store: SQLiteStore) -> None:
    from playwright.sync_api import expect

    port = free_port()
    env = {**os.environ, "DUETIME_WEB_TOKEN": "t0ken"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "duetime",
            "web",
            "--store",
            f"sqlite:///{sqlite_store.path}",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert proc.poll() is None, proc.communicate()
        try:
            return httpx.get(url + "/static/style.css", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        until(answers, what="python -m duetime web answered", every=0.05)
        assert httpx.get(url + "/api/jobs", timeout=WAIT).status_code == 401
        metrics = httpx.get(url + "/metrics", headers={"Authorization": "Bearer t0ken"})
        assert 'duetime_jobs{state="scheduled"} 4.0' in metrics.text
        page.goto(url + "/jobs")
        page.get_by_label("Token").fill("t0ken")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Jobs")
        expect(page.get_by_role("link", name="daily", exact=True)).to_be_visible()
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=WAIT)
    assert f"duetime dashboard on http://127.0.0.1:{port}/" in out
