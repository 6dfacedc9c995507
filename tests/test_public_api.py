from __future__ import annotations

import re
from pathlib import Path

import duetime

# The public names the project's design contract promises (docs/api.md documents them).
DESIGN_NAMES = {
    "Scheduler", "FakeClock", "At", "After", "FixedRate", "FixedDelay", "Cron", "Poisson",
    "Window", "ExponentialBackoff", "FixedBackoff", "NoRetry", "TokenBucket", "Misfire",
    "Overlap", "JobState", "EventQueue", "InvalidArgument", "JobLookupError",
    "ConflictingIdError", "SchedulerShutdownError", "DuetimeError", "current_run", "Job", "Run",
    "JobAdded", "JobRescheduled", "JobCancelled", "JobPaused", "JobResumed", "JobStarted",
    "JobSucceeded", "JobFailed", "JobDead", "JobMissed", "JobSkipped", "JobDeferred",
    "SchedulerStarted", "SchedulerStopped",
}  # fmt: skip


def test_all_is_sorted_and_unique() -> None:
    assert duetime.__all__ == sorted(set(duetime.__all__))


def test_all_names_exist_and_nothing_else_is_public() -> None:
    for name in duetime.__all__:
        assert hasattr(duetime, name), name
    public = {n for n in vars(duetime) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(duetime, n)).__name__ == "module"}
    assert public - modules - {"annotations"} == set(duetime.__all__)


def test_design_names_are_exported() -> None:
    assert set(duetime.__all__) >= DESIGN_NAMES


def test_error_hierarchy() -> None:
    assert issubclass(duetime.InvalidArgument, ValueError)
    assert issubclass(duetime.JobLookupError, LookupError)
    assert issubclass(duetime.JobLookupError, KeyError)  # (as APScheduler's: migrating code)
    assert issubclass(duetime.ConflictingIdError, ValueError)
    assert issubclass(duetime.SchedulerShutdownError, RuntimeError)
    for name in ("InvalidArgument", "JobLookupError", "ConflictingIdError"):
        assert issubclass(getattr(duetime, name), duetime.DuetimeError)
    assert str(duetime.JobLookupError("x")) == "no job with id 'x'"


def test_version_matches_pyproject() -> None:
    text = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    match = re.search(r'^version = "([^"]+)"', text, re.M)
    assert match is not None and match.group(1) == duetime.__version__


def test_library_logger_has_a_null_handler() -> None:
    import logging

    handlers = logging.getLogger("duetime").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)
