"""Structure rules checked on the source: who may read real time, and which module imports which.

Only ``duetime.clock`` reads real time, so that a FakeClock governs everything; and the modules
form a one-way stack with no import circle and no duetime import hidden inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "src" / "duetime"
MODULES = sorted(PACKAGE.rglob("*.py"))

#: Calls that read the real clock.
REAL_TIME = {
    ("time", "time"), ("time", "monotonic"), ("time", "time_ns"), ("time", "monotonic_ns"),
    ("time", "perf_counter"), ("time", "sleep"), ("datetime", "now"), ("datetime", "utcnow"),
    ("datetime", "today"), ("date", "today"),
}  # fmt: skip


def name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_only_the_clock_module_reads_real_time() -> None:
    offenders = []
    for path in MODULES:
        if name(path) == "duetime.clock":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "time" for a in node.names):
                offenders.append(f"{name(path)}:{node.lineno} imports time")
            if isinstance(node, ast.ImportFrom) and node.module == "time":
                offenders.append(f"{name(path)}:{node.lineno} imports from time")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and (node.func.value.id, node.func.attr) in REAL_TIME
            ):
                offenders.append(f"{name(path)}:{node.lineno} calls {ast.unparse(node.func)}")
    assert offenders == []
