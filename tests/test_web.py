"""The web dashboard through an HTTP client (Starlette's TestClient): the JSON API and its
paging, the actions, token, CSRF, read-only and escaping; /metrics; duetime.metrics; the
formatting of triggers and DST marks. The pages in a real browser: tests/test_web_browser.py."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from duetime import (
    After,
    At,
    Cron,
    FakeClock,
    FixedDelay,
    FixedRate,
    PostgresStore,
    Scheduler,
    SQLiteStore,
)
from duetime.__main__ import main
from duetime._durable import trigger_json
from duetime.metrics import register
from duetime.stores._views import StoreView
from duetime.web import _format, create_app
from tests.conftest import fresh_python
from tests.web_data import BERLIN, XSS, fill

NS = 1_000_000_000


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A filled store (on each kind in turn): the object to pass to ``create_app``."""
    found: Any
    if request.param == "sqlite":
        found = SQLiteStore(tmp_path / "jobs.db")
    else:
        found = request.getfixturevalue("pg_store")()
    fill(found, extra=120)
    return found


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A filled SQLite store's URL."""
    fill(SQLiteStore(tmp_path / "jobs.db"))
    return f"sqlite:///{tmp_path / 'jobs.db'}"


def client(store: Any, **options: Any) -> TestClient:
    return TestClient(create_app(store, **options))


def csrf_of(c: TestClient) -> str:
    """The CSRF token a page set (a page is read first)."""
    assert c.get("/jobs").status_code == 200
    token = c.cookies.get("duetime_csrf")
    assert token
    return token


def state_of(store: Any, id: str) -> str | None:
    view = StoreView(store)
    try:
        job = view.job(id)
        return None if job is None else job.state
    finally:
        view.close()


# -- the core stays light ------------------------------------------------------------------------


def test_import_duetime_imports_no_web_dependency() -> None:
    code = (
        "import sys, duetime, duetime.stores; "
        "print(*[m for m in ('starlette', 'jinja2', 'uvicorn', 'prometheus_client', "
        "'duetime.web', 'duetime.metrics') if m in sys.modules])"
    )
    assert fresh_python(code) == []


# -- JSON API --------------------------------------------------------------------------------------


def test_api_jobs_pages_by_keyset_and_filters_by_state(store: Any) -> None:
    with client(store) as c:
        seen: list[str] = []
        after = ""
        pages = 0
        while True:
            body = c.get("/api/jobs", params={"after": after, "limit": 50}).json()
            seen += [j["id"] for j in body["jobs"]]
            pages += 1
            if body["next"] is None:
                break
            after = body["next"]
        assert pages == 3
        assert seen == sorted(seen)
        assert len(seen) == len(set(seen)) == 126
        failed = c.get("/api/jobs", params={"state": "failed"}).json()["jobs"]
        assert [j["id"] for j in failed] == ["fails"]
        bad = c.get("/api/jobs", params={"state": "sleeping"})
        assert bad.status_code == 400
        assert "state must be one of" in bad.json()["error"]
        assert c.get("/api/jobs", params={"limit": 0}).status_code == 400


def test_api_jobs_shows_triggers_as_written_and_next_runs_in_the_jobs_zone(store: Any) -> None:
    with client(store) as c:
        jobs = {j["id"]: j for j in c.get("/api/jobs", params={"limit": 500}).json()["jobs"]}
    assert jobs["daily"]["trigger"] == "cron '0 9 * * *' Europe/Berlin"
    assert jobs["daily"]["next_run_text"].endswith("(Europe/Berlin)")
    assert datetime.fromisoformat(jobs["daily"]["next_run"]).astimezone(BERLIN).hour == 9
    assert jobs["xss"]["trigger"] == "every 5 min"
    assert jobs["trial"]["trigger"].startswith(f"at {jobs['trial']['next_run'][:4]}-03-29 09:00")
    assert jobs["fails"]["state"] == "failed"
    assert jobs["fails"]["last_outcome"] == "dead"
    assert jobs["once"]["last_outcome"] == "succeeded"
    assert jobs["once"]["state"] == "completed"


def test_api_job_lists_its_runs_with_lateness_worker_and_error(store: Any) -> None:
    with client(store) as c:
        body = c.get("/api/jobs/fails").json()
        assert c.get("/api/jobs/nobody").status_code == 404
    (run,) = body["runs"]
    assert run["state"] == "dead"
    assert run["attempt"] == 1
    assert run["worker"]
    assert run["error"] == "ValueError: <b>no</b> such thing"
    assert run["lateness_seconds"] is not None
    assert run["lateness_seconds"] >= 0
    assert body["dead"]["error"] == run["error"]


def test_api_runs_dead_and_workers(store: Any) -> None:
    with client(store) as c:
        runs = c.get("/api/runs").json()
        assert {r["job_id"] for r in runs["runs"]} >= {"fails", "once"}
        dead = c.get("/api/runs", params={"state": "dead"}).json()["runs"]
        assert [r["job_id"] for r in dead] == ["fails"]
        # Keyset pages of runs: one at a time, none twice.
        first = c.get("/api/runs", params={"limit": 1}).json()
        second = c.get("/api/runs", params={"limit": 1, **first["next"]}).json()
        assert first["runs"][0]["key"] != second["runs"][0]["key"]
        letters = c.get("/api/dead").json()["dead"]
        assert [(d["id"], d["attempts"]) for d in letters] == [("fails", 1)]
        assert c.get("/api/workers").json() == {"workers": []}  # (all shut down)


def test_workers_lists_a_live_scheduler_with_its_host(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    s = Scheduler(clock=FakeClock(), store=SQLiteStore(path))
    s.register("hello", lambda: None)
    try:
        with client(f"sqlite:///{path}") as c:
            (worker,) = c.get("/api/workers").json()["workers"]
            page = c.get("/workers").text
    finally:
        s.shutdown()
    assert worker["live"] is True
    assert worker["leases"] == 0
    assert worker["worker"].startswith(worker["host"] + ":")
    assert "hello" in worker["tasks"]
    assert worker["host"] in page
    # Its last heartbeat: when it last said it lives (real time: it registered just now).
    said = datetime.fromisoformat(worker["heartbeat"])
    assert abs(datetime.now(timezone.utc) - said) < timedelta(minutes=5)
    assert worker["heartbeat_text"].endswith(" ago") and "Last heartbeat" in page


# -- actions ---------------------------------------------------------------------------------------


def test_api_actions_change_the_store(store: Any) -> None:
    with client(store) as c:
        headers = {"X-CSRF-Token": csrf_of(c)}
        assert c.post("/api/jobs/daily/pause", headers=headers).json()["ok"] is True
        assert state_of(store, "daily") == "paused"
        assert c.post("/api/jobs/daily/resume", headers=headers).status_code == 200
        assert state_of(store, "daily") == "scheduled"
        assert c.post("/api/jobs/xss/trigger", headers=headers).status_code == 200
        queued = c.get("/api/runs", params={"state": "queued"}).json()["runs"]
        assert [r["job_id"] for r in queued] == ["xss"]
        assert c.post("/api/jobs/daily/cancel", headers=headers).status_code == 200
        assert state_of(store, "daily") == "cancelled"
        missing = c.post("/api/jobs/nobody/pause", headers=headers)
        assert missing.status_code == 404
        assert c.post("/api/jobs/daily/explode", headers=headers).status_code == 404
        # The dead letter: discard it, after a retry brought it back and it is not dead.
        assert c.post("/api/dead/fails/retry", headers=headers).status_code == 200
        assert state_of(store, "fails") == "scheduled"
        assert c.get("/api/dead").json()["dead"] == []
        assert c.post("/api/dead/fails/discard", headers=headers).status_code == 404


def test_discard_drops_a_dead_letter(sqlite_url: str) -> None:
    with client(sqlite_url) as c:
        headers = {"X-CSRF-Token": csrf_of(c)}
        assert c.post("/api/dead/fails/discard", headers=headers).status_code == 200
        assert c.get("/api/dead").json()["dead"] == []


def test_a_form_action_needs_the_csrf_token_of_its_cookie(sqlite_url: str) -> None:
    with client(sqlite_url) as c:
        token = csrf_of(c)
        assert c.post("/jobs/daily/pause").status_code == 403
        assert c.post("/jobs/daily/pause", data={"csrf": "forged"}).status_code == 403
        assert state_of(sqlite_url, "daily") == "scheduled"
        done = c.post("/jobs/daily/pause", data={"csrf": token}, follow_redirects=False)
        assert done.status_code == 303
        assert done.headers["location"] == "/jobs/daily"
        assert state_of(sqlite_url, "daily") == "paused"
        assert "paused daily" in c.get("/jobs/daily").text  # (the flash)
        # A redirect elsewhere is refused: the form's next must be a path of this site.
        away = c.post(
            "/jobs/daily/resume",
            data={"csrf": token, "next": "//evil.example/"},
            follow_redirects=False,
        )
        assert away.headers["location"] == "/jobs/daily"
    with client(sqlite_url) as other:  # (another browser: no cookie)
        assert other.post("/jobs/daily/pause", data={"csrf": token}).status_code == 403
        assert other.post("/api/jobs/daily/pause").status_code == 403


def test_read_only_hides_and_refuses_every_action(sqlite_url: str) -> None:
    with client(sqlite_url, read_only=True) as c:
        token = csrf_of(c)
        for page in ("/jobs/daily", "/dead", "/jobs/fails"):
            text = c.get(page).text
            for name in ("Trigger", "Pause", "Resume", "Cancel", "Retry", "Discard"):
                assert f">{name}</button>" not in text
        assert c.post("/jobs/daily/pause", data={"csrf": token}).status_code == 403
        assert c.post("/api/jobs/daily/pause", headers={"X-CSRF-Token": token}).status_code == 403
        assert c.post("/api/dead/fails/retry", headers={"X-CSRF-Token": token}).status_code == 403
    assert state_of(sqlite_url, "daily") == "scheduled"


def test_action_buttons_are_named_as_the_contract_says(sqlite_url: str) -> None:
    with client(sqlite_url) as c:
        job = c.get("/jobs/daily").text
        dead = c.get("/dead").text
    for name in ("Trigger", "Pause", "Resume", "Cancel"):
        assert f">{name}</button>" in job
    for name in ("Retry", "Discard"):
        assert f">{name}</button>" in dead


# -- token ------------------------------------------------------------------------------------------


def test_a_token_guards_reading_and_acting(sqlite_url: str) -> None:
    with client(sqlite_url, token="s3cret") as c:
        page = c.get("/jobs", follow_redirects=False)
        assert page.status_code == 303
        assert page.headers["location"] == "/login?next=%2Fjobs"
        assert c.get("/api/jobs").status_code == 401
        assert c.get("/metrics").status_code == 401
        assert c.get("/api/jobs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        bearer = {"Authorization": "Bearer s3cret"}
        assert c.get("/api/jobs", headers=bearer).status_code == 200
        assert c.get("/metrics", headers=bearer).status_code == 200
        # With the bearer token an action needs no CSRF token (no other site can send it).
        assert c.post("/api/jobs/daily/pause", headers=bearer).status_code == 200
        assert c.get("/static/style.css").status_code == 200  # (the login page's look)
        # The login form: a wrong token is refused, the right one sets a session cookie.
        form = c.get("/login?next=/runs")
        assert form.status_code == 200
        csrf = c.cookies["duetime_csrf"]
        wrong = c.post("/login", data={"csrf": csrf, "token": "nope", "next": "/runs"})
        assert wrong.status_code == 401
        assert "Wrong token" in wrong.text
        right = c.post(
            "/login",
            data={"csrf": csrf, "token": "s3cret", "next": "/runs"},
            follow_redirects=False,
        )
        assert right.status_code == 303
        assert right.headers["location"] == "/runs"
        assert "s3cret" not in right.headers["set-cookie"]
        assert c.get("/jobs").status_code == 200
        assert c.post("/logout", data={"csrf": csrf}, follow_redirects=False).status_code == 303
        assert c.get("/jobs", follow_redirects=False).status_code == 303


def test_the_token_comes_from_the_environment_too(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUETIME_WEB_TOKEN", "from-env")
    with client(sqlite_url) as c:
        assert c.get("/api/jobs").status_code == 401
        assert c.get("/api/jobs", headers={"Authorization": "Bearer from-env"}).status_code == 200


# -- pages ------------------------------------------------------------------------------------------


def test_markup_in_names_and_errors_shows_as_text(store: Any) -> None:
    with client(store) as c:
        pages = [
            c.get(p).text for p in ("/jobs?limit=500", "/jobs/xss", "/jobs/fails", "/runs", "/dead")
        ]
    assert XSS not in "".join(pages)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[0]
    assert "<b>no</b>" not in pages[2]
    assert "&lt;b&gt;no&lt;/b&gt;" in pages[2]


def test_every_page_links_to_the_others_and_has_header_rows(sqlite_url: str) -> None:
    with client(sqlite_url) as c:
        for path in ("/jobs", "/jobs/daily", "/runs", "/dead", "/workers", "/cron"):
            response = c.get(path)
            assert response.status_code == 200, path
            text = response.text
            for href, name in (
                ("/jobs", "Jobs"),
                ("/runs", "Runs"),
                ("/dead", "Dead letters"),
                ("/workers", "Workers"),
                ("/cron", "Cron preview"),
            ):
                assert f'href="{href}"' in text and f">{name}</a>" in text, (path, name)
            if path != "/cron":
                assert '<th scope="col">' in text, path
            assert "Content-Security-Policy" in response.headers
            assert "https://" not in text  # (every asset is the app's own)


def test_a_live_fragment_is_the_list_alone(sqlite_url: str) -> None:
    with client(sqlite_url) as c:
        page = c.get("/jobs?state=scheduled").text
        fragment = c.get("/jobs?state=scheduled&fragment=1").text
        runs = c.get("/runs?fragment=1").text
    assert 'data-live="/jobs?state=scheduled&amp;fragment=1"' in page
    assert fragment.lstrip().startswith("<table>")
    assert "<html" not in fragment
    assert "daily" in fragment
    assert "<svg" in runs


def test_open_pages_cost_the_store_at_most_one_query_a_second(sqlite_url: str) -> None:
    app = create_app(sqlite_url)
    board = app.state.dashboard
    count = 0
    read = board.view._read

    def counted(*args: Any) -> Any:
        nonlocal count
        count += 1
        return read(*args)

    board.view._read = counted
    with TestClient(app) as c:
        start = time.monotonic()
        for _ in range(20):  # (twenty pages polling at once)
            assert c.get("/jobs?fragment=1").status_code == 200
        seconds = time.monotonic() - start
    # Two reads (the page of jobs, and their last runs), once for each second begun.
    assert 2 <= count <= 2 * (int(seconds) + 1)


def test_the_runs_page_draws_runs_per_hour(sqlite_url: str) -> None:
    with client(sqlite_url) as c:
        svg = c.get("/chart.svg")
        page = c.get("/runs").text
    assert svg.headers["content-type"].startswith("image/svg+xml")
    assert "succeeded</title></rect>" in svg.text
    assert "dead</title></rect>" in svg.text
    assert "<svg" in page


def test_cron_preview_marks_dst_changes(sqlite_url: str) -> None:
    with client(sqlite_url) as c:
        page = c.get("/cron", params={"expr": "30 2 * * 0", "tz": "Europe/Berlin", "n": 60})
        bad = c.get("/cron", params={"expr": "61 * * * *", "tz": "Europe/Berlin"})
        zone = c.get("/cron", params={"expr": "* * * * *", "tz": "Mars/Olympus"})
    assert page.status_code == 200
    assert "fixed-timed" in page.text
    assert "clocks jump from 02:00 to 03:00" in page.text
    assert "clocks go back from 03:00 to 02:00" in page.text
    assert "DST change UTC -&gt; +01:00" in page.text or "DST change" in page.text
    assert bad.status_code == 400
    assert zone.status_code == 400


def test_next_run_marks_a_dst_change_on_the_way_and_at_the_instant() -> None:
    cron = '{"type":"cron","expr":"30 2 * * *","tz":"Europe/Berlin","start":null,"end":null}'
    winter = int(datetime(2027, 3, 1, tzinfo=timezone.utc).timestamp()) * NS
    summer = int(datetime(2027, 3, 29, 0, 30, tzinfo=timezone.utc).timestamp()) * NS
    shown = _format.next_run(summer, cron, winter)
    assert shown is not None
    assert shown.text == "2027-03-29 02:30 CEST (Europe/Berlin)"
    assert shown.dst == "DST change +01:00 -> +02:00 before this run"
    assert _format.next_run(summer, cron, summer - NS) == _format.NextRun(shown.text, shown.iso, "")
    # 02:30 on the night the clocks go back: it happens twice.
    fold = int(datetime(2027, 10, 31, 0, 30, tzinfo=timezone.utc).timestamp()) * NS
    twice = _format.next_run(fold, cron, fold - NS)
    assert twice is not None
    assert twice.dst == "at a DST change (local time repeated, first pass)"
    # A run at the very instant the clocks jump.
    jump = int(datetime(2027, 3, 28, 1, 0, tzinfo=timezone.utc).timestamp()) * NS
    at = _format.next_run(jump, cron, jump)
    assert at is not None
    assert at.dst == "at a DST change (+01:00 -> +02:00)"


@pytest.mark.parametrize(
    ("trigger", "text"),
    [
        (Cron("0 9 * * *", tz="Europe/Berlin"), "cron '0 9 * * *' Europe/Berlin"),
        (Cron("0 9 * * *"), "cron '0 9 * * *'"),
        (FixedRate(minutes=5), "every 5 min"),
        (FixedDelay(hours=1, minutes=30), "every 1 h 30 min after each run ends"),
        (
            At(datetime(2027, 3, 29, 9, 0, tzinfo=timezone(timedelta(hours=2)))),
            "at 2027-03-29 09:00 +02:00",
        ),
        (After(30), "after 30 s"),
    ],
)
def test_triggers_read_as_people_write_them(trigger: Any, text: str) -> None:
    # (As the store holds them: the stored JSON, read back.)
    assert _format.trigger_text(trigger_json(trigger)) == text


def test_a_stored_trigger_that_cannot_be_read_shows_as_stored() -> None:
    assert _format.trigger_text("not json") == "not json"
    assert _format.trigger_text('{"type":"cron"}') == '{"type":"cron"}'


# -- metrics ----------------------------------------------------------------------------------------


def test_metrics_say_what_the_store_holds(store: Any) -> None:
    with client(store) as c:
        response = c.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    jobs = {s.labels["state"]: s.value for s in families["duetime_jobs"].samples}
    assert jobs["failed"] == 1
    assert jobs["completed"] == 1
    assert jobs["scheduled"] == 124
    runs = {s.labels["state"]: s.value for s in families["duetime_runs"].samples}
    assert runs["dead"] == 1
    assert runs["succeeded"] >= 1
    duration = families["duetime_run_duration_seconds"]
    assert duration.type == "histogram"
    count = [s.value for s in duration.samples if s.name.endswith("_count")]
    assert count == [runs["dead"] + runs["succeeded"]]
    assert families["duetime_run_lateness_seconds"].type == "histogram"
    assert families["duetime_dead_letters"].samples[0].value == 1
    assert families["duetime_workers_live"].samples[0].value == 0
    assert families["duetime_store_up"].samples[0].value == 1


def test_register_exports_a_schedulers_own_counters() -> None:
    s = Scheduler(clock=FakeClock())
    s.schedule(lambda: None, timedelta(seconds=1))
    s.schedule(lambda: 1 / 0, timedelta(seconds=2))
    s.run_for(timedelta(seconds=3))
    registry = CollectorRegistry()
    collector = register(s, registry, labels={"scheduler": "main"})
    families = {
        f.name: f for f in text_string_to_metric_families(generate_latest(registry).decode())
    }
    assert families["duetime_runs_started"].samples[0].value == 2
    assert families["duetime_runs_succeeded"].samples[0].value == 1
    assert families["duetime_runs_failed"].samples[0].value == 1
    assert families["duetime_runs_started"].samples[0].labels == {"scheduler": "main"}
    quantiles = {x.labels["quantile"] for x in families["duetime_lateness_seconds"].samples}
    assert quantiles == {"0.5", "0.95", "0.99", "1"}
    with pytest.raises(ValueError, match="Duplicated"):
        register(s, registry, labels={"scheduler": "main"})
    registry.unregister(collector)
    s.shutdown()


# -- the store view and the command line ----------------------------------------------------------


def test_prepare_adds_the_state_index_once(sqlite_url: str) -> None:
    view = StoreView(sqlite_url)
    assert view.prepare()
    assert view.prepare()
    assert [j.id for j in view.jobs("failed")] == ["fails"]
    view.close()


def test_a_store_object_is_read_through_connections_of_its_own(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "o.db")
    fill(store)
    with client(store) as c:
        assert len(c.get("/api/jobs").json()["jobs"]) == 6
    assert not store.is_open


def test_web_command_refuses_a_missing_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["web", "--store", f"sqlite:///{tmp_path / 'none.db'}"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["web", "--store", "sqlite:///x.db", "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


def test_web_command_help_names_its_options() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "duetime", "web", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    for option in ("--store", "--host", "--port", "--token", "--read-only"):
        assert option in out


def test_postgres_store_is_read_without_loading_it(
    pg_store: Callable[..., PostgresStore],
) -> None:
    store = pg_store()
    fill(store)
    view = StoreView(store)
    try:
        view.check()
        assert view.prepare()
        assert [j.id for j in view.jobs(limit=2)] == ["daily", "fails"]
        assert view.job_counts()["scheduled"] == 4
    finally:
        view.close()


def test_a_store_that_fails_answers_503_and_store_up_0(tmp_path: Path) -> None:
    path = tmp_path / "gone.db"
    fill(SQLiteStore(path))
    with client(f"sqlite:///{path}", prepare=False) as c:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        response = c.get("/api/jobs")
        assert response.status_code == 503
        assert "listing jobs failed" in response.json()["error"]
        assert c.get("/jobs").status_code == 503
        families = {f.name: f for f in text_string_to_metric_families(c.get("/metrics").text)}
    assert families["duetime_store_up"].samples[0].value == 0
    assert "duetime_jobs" not in families
