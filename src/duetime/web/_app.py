"""The dashboard's ASGI application (Starlette): pages, JSON API, actions and metrics."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import asdict
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode

from jinja2 import Environment, PackageLoader
from markupsafe import Markup
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

from duetime.clock import real_monotonic, real_time_ns
from duetime.errors import DuetimeError, InvalidArgument, JobLookupError, StoreError
from duetime.scheduler import Scheduler
from duetime.stores._views import JOB_STATES, DeadView, JobView, RunView, StoreView, open_store
from duetime.stores.codec import load_json
from duetime.stores.postgres import PostgresStore
from duetime.stores.records import RUN_STATES
from duetime.stores.sqlite import SQLiteStore
from duetime.web._chart import runs_chart
from duetime.web._format import (
    ago,
    at_ns,
    cron_preview,
    duration,
    next_run,
    time_text,
    trigger_text,
    utc,
)
from duetime.web._metrics import StoreCollector

__all__ = ["DEAD_ACTIONS", "JOB_ACTIONS", "Dashboard"]

logger = logging.getLogger("duetime")

#: The actions on a job, and on a dead letter, as their buttons name them.
JOB_ACTIONS = ("trigger", "pause", "resume", "cancel")
DEAD_ACTIONS = ("retry", "discard")

_SESSION = "duetime_session"
_CSRF = "duetime_csrf"
_FLASH = "duetime_flash"
_PAGE = 50  # rows per page
_MOST = 500  # the largest page the API gives
_CACHE_NS = 1_000_000_000  # how long a read is reused (ns): at most one query a second each
_STATIC = {"style.css": "text/css; charset=utf-8", "live.js": "text/javascript; charset=utf-8"}
_HEADERS = {
    # Every asset is the app's own: nothing is loaded from elsewhere.
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
_DONE = {
    "trigger": "queued a run of",
    "pause": "paused",
    "resume": "resumed",
    "cancel": "cancelled",
    "retry": "queued again",
    "discard": "discarded the dead letter of",
}

Endpoint = Callable[[Request], Awaitable[Response]]


class _HTTPError(Exception):
    """A request refused: its status and what to say."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Cache:
    """Reads kept for a second, so that any number of open pages polling cost the store at
    most one query a second for each distinct read."""

    def __init__(self, ttl_ns: int = _CACHE_NS) -> None:
        self.ttl_ns = ttl_ns
        self._lock = threading.Lock()
        self._kept: dict[Hashable, tuple[int, Any]] = {}

    def get(self, key: Hashable, read: Callable[[], Any]) -> Any:
        now = int(real_monotonic() * 1e9)
        with self._lock:
            found = self._kept.get(key)
            if found is not None and found[0] > now:
                return found[1]
            value = read()  # (under the lock: two pages asking at once make one query)
            if len(self._kept) > 1000:
                self._kept = {k: v for k, v in self._kept.items() if v[0] > now}
            self._kept[key] = (int(real_monotonic() * 1e9) + self.ttl_ns, value)
            return value

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()


def _limit(request: Request) -> int:
    text = request.query_params.get("limit", str(_PAGE))
    try:
        limit = int(text)
    except ValueError:
        raise _HTTPError(400, f"limit must be a whole number, got {text!r}") from None
    if not 1 <= limit <= _MOST:
        raise _HTTPError(400, f"limit must be between 1 and {_MOST}, got {limit}")
    return limit


def _choice(request: Request, name: str, allowed: tuple[str, ...]) -> str | None:
    value = request.query_params.get(name) or None
    if value is not None and value not in allowed:
        raise _HTTPError(400, f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _before(request: Request) -> tuple[int, str] | None:
    due = request.query_params.get("before_due")
    if not due:
        return None
    try:
        return int(due), request.query_params.get("before_key", "")
    except ValueError:
        raise _HTTPError(400, f"before_due must be a whole number, got {due!r}") from None


def _local_path(target: str | None, default: str) -> str:
    """``target`` if it is a path of this site (no other host), else ``default``."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return default


def job_url(id: str) -> str:
    """The job page's path."""
    return "/jobs/" + quote(id, safe="")


class Dashboard:
    """The application's state and endpoints (``create_app`` builds one).

    Args:
        store: A store URL or a ``SQLiteStore``/``PostgresStore`` (only its place is used).
        token: The access token, or None for none (anyone who reaches the port may read, and
            act unless ``read_only``).
        read_only: Hide every action and refuse action requests.
        refresh: Seconds between a page's refreshes of its live lists (at least 1).
    """

    def __init__(
        self,
        store: str | SQLiteStore | PostgresStore,
        *,
        token: str | None = None,
        read_only: bool = False,
        refresh: float = 5.0,
    ) -> None:
        if token is not None and (not isinstance(token, str) or not token):
            raise InvalidArgument("token must be a non-empty string or None")
        if not refresh >= 1:
            raise InvalidArgument(f"refresh must be at least 1 second, got {refresh!r}")
        self.source = store
        self.view = StoreView(store)
        self.token = token
        self.read_only = read_only
        self.refresh = float(refresh)
        self._session = (
            hmac.new(token.encode(), b"duetime-web-session", hashlib.sha256).hexdigest()
            if token
            else ""
        )
        self._cache = _Cache()
        self._act_lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StoreCollector(self.view, real_time_ns))
        self.templates = Environment(
            loader=PackageLoader("duetime.web", "templates"), autoescape=True
        )
        self.templates.globals.update(job_url=job_url, read_only=read_only)
        self.templates.filters.update(
            urldecode=unquote, urlencode_id=lambda id: quote(str(id), safe="")
        )

    # -- reading (each through the cache) ---------------------------------------------------------

    def _read(self, key: Hashable, read: Callable[[], Any]) -> Awaitable[Any]:
        return run_in_threadpool(self._cache.get, key, read)

    # -- access -----------------------------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        if self.token is None:
            return True
        header = request.headers.get("authorization", "")
        if header[:7].lower() == "bearer ":
            return hmac.compare_digest(header[7:].strip().encode(), self.token.encode())
        cookie = request.cookies.get(_SESSION, "")
        return hmac.compare_digest(cookie.encode(), self._session.encode())

    def _bearer(self, request: Request) -> bool:
        """Whether the request carries the token as ``Authorization: Bearer`` (which no other
        site can make a browser send: no CSRF check is needed then)."""
        header = request.headers.get("authorization", "")
        return bool(self.token) and header[:7].lower() == "bearer " and self._authorized(request)

    @staticmethod
    def _csrf_ok(request: Request, sent: str | None) -> bool:
        cookie = request.cookies.get(_CSRF, "")
        return bool(cookie) and sent is not None and hmac.compare_digest(cookie, sent)

    def guarded(self, endpoint: Endpoint, *, api: bool = False) -> Endpoint:
        """``endpoint`` behind the token check, with the security headers and errors as pages
        (HTML) or ``{"error": ...}`` (API)."""

        async def handle(request: Request) -> Response:
            try:
                if not self._authorized(request):
                    if api:
                        raise _HTTPError(401, "a token is needed: Authorization: Bearer TOKEN")
                    target = request.url.path + (
                        f"?{request.url.query}" if request.url.query else ""
                    )
                    return self._secure(
                        RedirectResponse("/login?" + urlencode({"next": target}), 303), request
                    )
                response = await endpoint(request)
            except _HTTPError as exc:
                response = self._error(request, exc.status, str(exc), api)
            except StoreError as exc:
                logger.warning("dashboard: %s", exc)
                response = self._error(request, 503, str(exc), api)
            return self._secure(response, request)

        return handle

    def _error(self, request: Request, status: int, message: str, api: bool) -> Response:
        if api:
            headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
            return JSONResponse({"error": message}, status, headers=headers)
        return self._page(request, "error.html", {"message": message, "title": "Error"}, status)

    def _secure(self, response: Response, request: Request) -> Response:
        response.headers.update(_HEADERS)
        csrf = request.scope.get("duetime.csrf")
        if csrf is not None and not request.cookies.get(_CSRF):
            response.set_cookie(_CSRF, csrf, httponly=True, samesite="strict", path="/")
        return response

    def _csrf_token(self, request: Request) -> str:
        token = request.cookies.get(_CSRF) or request.scope.get("duetime.csrf")
        if not token:
            token = secrets.token_urlsafe(32)
        request.scope["duetime.csrf"] = token
        return token

    def _page(
        self, request: Request, name: str, context: dict[str, Any], status: int = 200
    ) -> HTMLResponse:
        fragment = request.query_params.get("fragment") == "1" and "live" in context
        context = {
            "request": request,
            "csrf": self._csrf_token(request),
            "refresh_ms": int(self.refresh * 1000),
            "logged_in": bool(self.token) and self._authorized(request),
            "flash": request.cookies.get(_FLASH, ""),
            **context,
        }
        template = context["live"] if fragment else name
        response = HTMLResponse(self.templates.get_template(template).render(context), status)
        if context["flash"] and not fragment:
            response.delete_cookie(_FLASH, path="/")
        return response

    # -- pages ------------------------------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        return RedirectResponse("/jobs", 303)

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            return PlainTextResponse("not found", 404)
        text = resources.files("duetime.web").joinpath("static").joinpath(name).read_bytes()
        return Response(
            text, media_type=_STATIC[name], headers={"Cache-Control": "max-age=300", **_HEADERS}
        )

    async def _jobs(self, request: Request) -> dict[str, Any]:
        state = _choice(request, "state", JOB_STATES)
        after = request.query_params.get("after", "")
        limit = _limit(request)
        found: list[JobView] = await self._read(
            ("jobs", state, after, limit + 1),
            lambda: self.view.jobs(state, after, limit + 1),
        )
        more = len(found) > limit
        found = found[:limit]
        ids = tuple(j.id for j in found)
        last: dict[str, RunView] = await self._read(("last", ids), lambda: self.view.last_runs(ids))
        now = real_time_ns()
        rows = [self._job_dict(j, last.get(j.id), now) for j in found]
        return {"jobs": rows, "next": found[-1].id if more else None, "state": state}

    def _job_dict(self, job: JobView, last: RunView | None, now: int) -> dict[str, Any]:
        nxt = next_run(job.next_due, job.trigger, now)
        try:
            record = load_json(job.trigger, "trigger")
        except ValueError:  # (a row is data: bounded, and never an error page)
            record = None
        return {
            "id": job.id,
            "name": job.name,
            "task": job.task,
            "trigger": trigger_text(job.trigger),
            "trigger_record": record,
            "state": job.state,
            "next_run": None if nxt is None else nxt.iso,
            "next_run_text": "" if nxt is None else nxt.text,
            "dst": "" if nxt is None else nxt.dst,
            "attempt": job.attempt,
            "runs": job.runs,
            "failures": job.failures,
            "last_error": job.last_error,
            "last_outcome": None if last is None else last.state,
            "last_run": None if last is None else self._run_dict(last),
        }

    @staticmethod
    def _run_dict(run: RunView) -> dict[str, Any]:
        late = None if run.started is None else run.started - run.due
        return {
            "key": run.key,
            "job_id": run.job_id,
            "state": run.state,
            "attempt": run.attempt,
            "worker": run.worker,
            "due": _iso(run.due),
            "started": _iso(run.started),
            "finished": _iso(run.finished),
            "lateness_seconds": None if late is None else late / 1e9,
            "lateness": duration(late),
            "due_text": time_text(run.due),
            "started_text": time_text(run.started),
            "finished_text": time_text(run.finished),
            "error": run.error,
        }

    async def jobs_page(self, request: Request) -> Response:
        data = await self._jobs(request)
        query = {k: v for k, v in request.query_params.items() if k in ("state", "limit")}
        live = "/jobs?" + urlencode({**dict(request.query_params), "fragment": "1"})
        nxt = None
        if data["next"] is not None:
            nxt = "/jobs?" + urlencode({**query, "after": data["next"]})
        first = "/jobs?" + urlencode(query) if request.query_params.get("after") else None
        return self._page(
            request,
            "jobs.html",
            {
                **data,
                "title": "Jobs",
                "states": JOB_STATES,
                "live": "_jobs.html",
                "live_url": live,
                "next_url": nxt,
                "first_url": first,
            },
        )

    async def job_page(self, request: Request) -> Response:
        id = request.path_params["id"]
        data = await self._job(id)
        return self._page(
            request,
            "job.html",
            {
                **data,
                "title": f"Job {id}",
                "live": "_job.html",
                "live_url": job_url(id) + "?fragment=1",
                "actions": JOB_ACTIONS,
            },
        )

    async def _job(self, id: str) -> dict[str, Any]:
        job: JobView | None = await self._read(("job", id), lambda: self.view.job(id))
        dead: DeadView | None = await self._read(("dead1", id), lambda: self.view.dead_one(id))
        if job is None and dead is None:
            raise _HTTPError(404, f"no job has the id {id!r}")
        runs: list[RunView] = await self._read(
            ("jobruns", id), lambda: self.view.runs(id, None, None, 100)
        )
        now = real_time_ns()
        return {
            "job": None if job is None else self._job_dict(job, runs[0] if runs else None, now),
            "dead": None if dead is None else self._dead_dict(dead),
            "runs": [self._run_dict(r) for r in runs],
        }

    async def _runs(self, request: Request) -> dict[str, Any]:
        state = _choice(request, "state", RUN_STATES)
        job = request.query_params.get("job") or None
        before = _before(request)
        limit = _limit(request)
        found: list[RunView] = await self._read(
            ("runs", job, state, before, limit + 1),
            lambda: self.view.runs(job, state, before, limit + 1),
        )
        more = len(found) > limit
        found = found[:limit]
        nxt = (found[-1].due, found[-1].key) if more else None
        return {
            "runs": [self._run_dict(r) for r in found],
            "next": None if nxt is None else {"before_due": nxt[0], "before_key": nxt[1]},
            "state": state,
            "job": job,
        }

    async def runs_page(self, request: Request) -> Response:
        data = await self._runs(request)
        query = {k: v for k, v in request.query_params.items() if k in ("state", "job", "limit")}
        nxt = None if data["next"] is None else "/runs?" + urlencode({**query, **data["next"]})
        first = "/runs?" + urlencode(query) if request.query_params.get("before_due") else None
        return self._page(
            request,
            "runs.html",
            {
                **data,
                "title": "Runs",
                "states": RUN_STATES,
                "chart": Markup(await self._chart()),
                "live": "_runs.html",
                "live_url": "/runs?" + urlencode({**dict(request.query_params), "fragment": "1"}),
                "next_url": nxt,
                "first_url": first,
            },
        )

    async def _chart(self) -> str:
        now = real_time_ns()
        hour = now // 3_600_000_000_000
        since = (hour - 23) * 3_600_000_000_000
        counts = await self._read(("perhour", hour), lambda: self.view.runs_per_hour(since))
        return runs_chart(counts, hour)

    async def chart(self, request: Request) -> Response:
        return Response(await self._chart(), media_type="image/svg+xml")

    @staticmethod
    def _dead_dict(dead: DeadView) -> dict[str, Any]:
        return {
            "id": dead.id,
            "name": dead.name,
            "task": dead.task,
            "error": dead.error,
            "traceback": dead.traceback,
            "attempts": dead.attempts,
            "due": _iso(dead.due),
            "failed_at": _iso(dead.failed_at),
            "failed_text": time_text(dead.failed_at),
        }

    async def _dead(self) -> list[dict[str, Any]]:
        found: list[DeadView] = await self._read(("dead",), self.view.dead)
        return [self._dead_dict(d) for d in found]

    async def dead_page(self, request: Request) -> Response:
        return self._page(
            request,
            "dead.html",
            {
                "dead": await self._dead(),
                "title": "Dead letters",
                "live": "_dead.html",
                "live_url": "/dead?fragment=1",
                "actions": DEAD_ACTIONS,
            },
        )

    async def _workers(self) -> list[dict[str, Any]]:
        now = real_time_ns()
        found = await self._read(("workers",), lambda: self.view.workers(now))
        return [
            {
                **asdict(w),
                "until": _iso(w.until),
                "until_text": time_text(w.until),
                "heartbeat": None if w.heartbeat is None else _iso(w.heartbeat),
                "heartbeat_text": "-" if w.heartbeat is None else ago(w.heartbeat, now),
                "live": w.until > now,
                "lapses": ago(w.until, now),
            }
            for w in found
        ]

    async def workers_page(self, request: Request) -> Response:
        return self._page(
            request,
            "workers.html",
            {
                "workers": await self._workers(),
                "title": "Workers",
                "live": "_workers.html",
                "live_url": "/workers?fragment=1",
            },
        )

    async def cron_page(self, request: Request) -> Response:
        expr = request.query_params.get("expr", "")
        tz = request.query_params.get("tz", "UTC") or "UTC"
        text = request.query_params.get("n", "10")
        context: dict[str, Any] = {"title": "Cron preview", "expr": expr, "tz": tz, "n": text}
        if expr:
            try:
                n = int(text)
                if not 1 <= n <= 100:
                    raise ValueError
            except ValueError:
                context["error"] = f"n must be a whole number from 1 to 100, got {text!r}"
            else:
                try:
                    kind, fires = cron_preview(expr, tz, n, at_ns(real_time_ns()))
                except (InvalidArgument, TypeError) as exc:
                    context["error"] = str(exc)
                else:
                    context.update(kind=kind, fires=fires)
        status = 400 if "error" in context else 200
        return self._page(request, "cron.html", context, status)

    # -- login ------------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        target = _local_path(request.query_params.get("next"), "/jobs")
        context: dict[str, Any] = {"title": "Log in", "next": target}
        if request.method == "POST":
            form = await _form(request)
            target = _local_path(_field(form.get("next")), "/jobs")
            context["next"] = target
            if not self._csrf_ok(request, _field(form.get("csrf"))):
                context["message"] = "The form expired: try again."
                return self._secure(self._page(request, "login.html", context, 403), request)
            sent = _field(form.get("token")) or ""
            if self.token is None or hmac.compare_digest(sent.encode(), self.token.encode()):
                response: Response = RedirectResponse(target, 303)
                if self.token is not None:
                    response.set_cookie(
                        _SESSION, self._session, httponly=True, samesite="strict", path="/"
                    )
                return self._secure(response, request)
            context["message"] = "Wrong token."
            return self._secure(self._page(request, "login.html", context, 401), request)
        return self._secure(self._page(request, "login.html", context), request)

    async def logout(self, request: Request) -> Response:
        form = await _form(request)
        if not self._csrf_ok(request, _field(form.get("csrf"))):
            raise _HTTPError(403, "the form expired (CSRF check failed): reload the page")
        response = RedirectResponse("/login", 303)
        response.delete_cookie(_SESSION, path="/")
        return response

    # -- actions ----------------------------------------------------------------------------------

    def act(self, action: str, id: str) -> str:
        """Do ``action`` on job or dead letter ``id``, through a Scheduler opened on the store
        for it, loading that job alone (as the command line does); returns what was done.

        Raises:
            _HTTPError: The id is unknown (404) or the action refused (409).
        """
        with self._act_lock:
            store = open_store(self.source)
            store.only = frozenset((id,))  # (the one job acted on: not the whole store)
            s = Scheduler(store=store)
            try:
                if action == "cancel":
                    if not s.cancel(id):
                        raise JobLookupError(id)
                elif action == "retry":
                    s.retry_failed(id)
                elif action == "discard":
                    if not s.discard_failed(id):
                        raise JobLookupError(id)
                else:
                    if s.get(id) is None:
                        raise JobLookupError(id)
                    getattr(s, action)(id)
            except JobLookupError:
                raise _HTTPError(404, f"no job has the id {id!r}") from None
            except StoreError:
                raise
            except DuetimeError as exc:
                raise _HTTPError(409, str(exc)) from None
            finally:
                s.shutdown()
                self._cache.clear()
        logger.info("dashboard: %s %r", action, id)
        return f"{_DONE[action]} {id}"

    def _check_action(self, action: str, allowed: tuple[str, ...]) -> None:
        if action not in allowed:
            raise _HTTPError(404, f"no action {action!r}: one of {', '.join(allowed)}")
        if self.read_only:
            raise _HTTPError(403, "the dashboard is read-only: actions are refused")

    async def form_action(self, request: Request) -> Response:
        id, action = request.path_params["id"], request.path_params["action"]
        dead = request.url.path.startswith("/dead/")
        self._check_action(action, DEAD_ACTIONS if dead else JOB_ACTIONS)
        form = await _form(request)
        if not self._csrf_ok(request, _field(form.get("csrf"))):
            raise _HTTPError(403, "the form expired (CSRF check failed): reload the page")
        done = await run_in_threadpool(self.act, action, id)
        target = _local_path(_field(form.get("next")), "/dead" if dead else job_url(id))
        response = RedirectResponse(target, 303)
        response.set_cookie(_FLASH, quote(done), httponly=True, samesite="strict", path="/")
        return response

    async def api_action(self, request: Request) -> Response:
        id, action = request.path_params["id"], request.path_params["action"]
        dead = request.url.path.startswith("/api/dead/")
        self._check_action(action, DEAD_ACTIONS if dead else JOB_ACTIONS)
        if not self._bearer(request) and not self._csrf_ok(
            request, request.headers.get("x-csrf-token")
        ):
            raise _HTTPError(
                403,
                "an action needs Authorization: Bearer TOKEN, or the X-CSRF-Token header "
                "equal to the duetime_csrf cookie",
            )
        done = await run_in_threadpool(self.act, action, id)
        return JSONResponse({"ok": True, "action": action, "id": id, "done": done})

    # -- API --------------------------------------------------------------------------------------

    async def api_jobs(self, request: Request) -> Response:
        return JSONResponse(await self._jobs(request))

    async def api_job(self, request: Request) -> Response:
        return JSONResponse(await self._job(request.path_params["id"]))

    async def api_runs(self, request: Request) -> Response:
        return JSONResponse(await self._runs(request))

    async def api_dead(self, request: Request) -> Response:
        return JSONResponse({"dead": await self._dead()})

    async def api_workers(self, request: Request) -> Response:
        return JSONResponse({"workers": await self._workers()})

    async def metrics(self, request: Request) -> Response:
        body = await run_in_threadpool(self._cache.get, ("metrics",), self._scrape)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    def _scrape(self) -> bytes:
        return generate_latest(self.registry)

    # -- the application --------------------------------------------------------------------------

    def routes(self) -> list[Route]:
        """The application's routes."""
        g = self.guarded

        def api(endpoint: Endpoint) -> Endpoint:
            return g(endpoint, api=True)

        return [
            Route("/", g(self.home)),
            Route("/static/{name}", self.static),
            Route("/login", self.login, methods=["GET", "POST"]),
            Route("/logout", g(self.logout), methods=["POST"]),
            Route("/jobs", g(self.jobs_page)),
            Route("/jobs/{id:path}/{action}", g(self.form_action), methods=["POST"]),
            Route("/jobs/{id:path}", g(self.job_page)),
            Route("/runs", g(self.runs_page)),
            Route("/chart.svg", g(self.chart)),
            Route("/dead", g(self.dead_page)),
            Route("/dead/{id:path}/{action}", g(self.form_action), methods=["POST"]),
            Route("/workers", g(self.workers_page)),
            Route("/cron", g(self.cron_page)),
            Route("/metrics", api(self.metrics)),
            Route("/api/jobs", api(self.api_jobs)),
            Route("/api/jobs/{id:path}/{action}", api(self.api_action), methods=["POST"]),
            Route("/api/jobs/{id:path}", api(self.api_job)),
            Route("/api/runs", api(self.api_runs)),
            Route("/api/dead", api(self.api_dead)),
            Route("/api/dead/{id:path}/{action}", api(self.api_action), methods=["POST"]),
            Route("/api/workers", api(self.api_workers)),
        ]

    def close(self) -> None:
        """Close the store connection."""
        self.view.close()


def _field(value: Any) -> str | None:
    return value if isinstance(value, str) else None


async def _form(request: Request) -> dict[str, str]:
    """The fields of a urlencoded form (the dashboard's forms send nothing else; the first
    value of each name)."""
    body = await request.body()
    if len(body) > 65_536:
        raise _HTTPError(413, "the form is too large")
    fields: dict[str, str] = {}
    for name, value in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
        fields.setdefault(name, value)
    return fields


def _iso(ns: int | None) -> str | None:
    when = utc(ns)
    return None if when is None else when.isoformat()
