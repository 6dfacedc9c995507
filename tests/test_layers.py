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


def imports(path: Path) -> tuple[set[str], list[str]]:
    """The duetime modules a module imports (at any level, TYPE_CHECKING blocks included), and
    the ones it imports inside a function."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    hidden: list[str] = []
    package = name(path) if path.name == "__init__.py" else name(path).rpartition(".")[0]

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(
                        [*package.split(".")[: len(package.split(".")) - child.level + 1], base]
                    ).strip(".")
                # 'from duetime import policy' imports the module duetime.policy.
                targets = [f"{base}.{a.name}" for a in child.names] + [base]
            for target in targets:
                module = resolve(target)
                if module is not None and module != name(path):
                    found.add(module)
                    if inner:
                        hidden.append(
                            f"{name(path)}:{getattr(child, 'lineno', 0)} imports {module}"
                        )
            visit(child, inner)

    visit(tree, False)
    return found, hidden


def resolve(target: str) -> str | None:
    """The duetime module a dotted import target names, or None (not duetime's)."""
    while target:
        if target in NAMES:
            return target
        target = target.rpartition(".")[0]
    return None


NAMES = {name(p) for p in MODULES}


def test_no_duetime_import_hides_inside_a_function() -> None:
    hidden = [h for p in MODULES for h in imports(p)[1]]
    assert hidden == []


#: The parts the Scheduler composes, one responsibility each (docs/concepts.md).
FACADE_PARTS = (
    "duetime._replica",
    "duetime._stepping",
    "duetime._dead_letters",
    "duetime._manual",
    "duetime._options",
    "duetime._registry",
    "duetime._service",
)


def test_the_modules_form_a_one_way_stack() -> None:
    graph = {name(p): imports(p)[0] - {"duetime"} for p in MODULES if name(p) != "duetime"}
    # Depth-first search for a cycle; the package __init__ (which re-exports everything) is
    # the top and is left out.
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == 1:
                cycle = [*path[path.index(dep) :], dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    # The layers named in docs/concepts.md: the runners sit under the facade, never above it.
    assert "duetime.scheduler" not in graph["duetime.runner"]
    assert "duetime.scheduler" not in graph["duetime._aiorunner"]
    assert "duetime.scheduler" not in graph["duetime.job"]
    assert graph["duetime.policy"] <= {"duetime.job", "duetime.recurrence", "duetime.retry"}
    assert graph["duetime.core"] == set()
    # The worker command sits above the facade, reached only from the command line; the
    # @duetime.task declarations under everything (a tasks module imports nothing else).
    assert [m for m in sorted(graph) if "duetime._worker" in graph[m]] == ["duetime.__main__"]
    assert graph["duetime._declared"] <= {"duetime.errors"}
    # The facade's parts sit under the facade that composes them, and only the facade and its
    # parts use them: what a part uses of the facade is its own Host protocol, never an import
    # of the Scheduler.
    for part in FACADE_PARTS:
        assert "duetime.scheduler" not in graph[part]
        users = {m for m in graph if part in graph[m]}
        assert users <= {"duetime.scheduler", *FACADE_PARTS}, (part, users)
    assert graph["duetime._dead"] <= {"duetime.job"}
    # The replica's outcomes sit under it, and only it holds them.
    assert {m for m in graph if "duetime._outcomes" in graph[m]} == {"duetime._replica"}
