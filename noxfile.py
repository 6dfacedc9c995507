"""Sessions: tests (every supported Python found), lint, typecheck, docs, examples, bench.

``nox`` runs the default ones; ``nox -s bench`` runs the benchmarks against their peers.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests", "lint", "typecheck", "docs", "examples"]
nox.options.reuse_existing_virtualenvs = False

SUPPORTED = ["3.10", "3.11", "3.12", "3.13"]


def _runs(version: str) -> bool:
    """Whether ``python3.X`` runs here (a pyenv shim exists even for inactive versions)."""
    exe = shutil.which(f"python{version}")
    if exe is None:
        return False
    return subprocess.run([exe, "-c", ""], capture_output=True, check=False).returncode == 0


# Every supported interpreter that actually runs here; CI picks the oldest and newest.
FOUND = [v for v in SUPPORTED if _runs(v)] or ["3.11"]
ROOT = Path(__file__).parent


@nox.session(python=FOUND)
def tests(session: nox.Session) -> None:
    """Run the test suite (the PostgreSQL tests need a server: DUETIME_TEST_PG_DSN)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install(".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on src and tests."""
    session.install("-e", ".[typecheck,test]")
    session.run("mypy", "--strict", "src", "tests")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the docs with warnings as errors."""
    session.install("-e", ".[docs,web]")  # (web: docs/dashboard.md's API reference)
    out = ROOT / "docs" / "_build" / "html"
    session.run("sphinx-build", "-W", "--keep-going", "-b", "html", "docs", str(out))


@nox.session
def examples(session: nox.Session) -> None:
    """Run every script in examples/ (the ASGI one with Starlette's real test client)."""
    session.install("-e", ".[examples]")
    scripts = sorted((ROOT / "examples").glob("*.py"))
    if not scripts:
        session.error("examples/ has no scripts")
    for script in scripts:
        session.run("python", str(script))
    session.run("python", "-m", "duetime", "demo")


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmarks with their peers (stdlib sched, heapq, SimPy, APScheduler)."""
    session.install("-e", ".[bench]")
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        session.run("python", str(script), *session.posargs)
