"""Pages whose every code block must run as written (on a FakeClock: they take no real time)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).parents[1] / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks(page: str) -> list[tuple[int, str]]:
    text = (DOCS / page).read_text()
    return [(text[: m.start()].count("\n") + 2, m.group(1)) for m in BLOCK.finditer(text)]


MIGRATING = blocks("migrating.md")


def test_the_migration_page_has_its_examples() -> None:
    assert len(MIGRATING) >= 15


@pytest.mark.parametrize(("line", "code"), MIGRATING, ids=[f"line {n}" for n, _ in MIGRATING])
def test_every_snippet_of_the_migration_page_runs(line: int, code: str) -> None:
    # Each block is a complete program; a fresh namespace proves it needs nothing from another.
    assert "FakeClock" in code or "Scheduler(" not in code, "a snippet must not wait for real time"
    exec(compile("\n" * (line - 1) + code, "docs/migrating.md", "exec"), {"__name__": "snippet"})
