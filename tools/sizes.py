"""Structure figures of the source: module, class and function sizes, and ``type: ignore``s.

Usage: ``python tools/sizes.py [SRC_DIR]`` (default ``src/duetime``). Prints the largest
modules, classes and functions, the counts over the limits the code keeps to (module 800
lines, class 600, function 80), and the ``type: ignore`` comments per file.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULE_MOST = 800
CLASS_MOST = 600
FUNCTION_MOST = 80


Definition = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def span(node: Definition) -> int:
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return (node.end_lineno or node.lineno) - start + 1


def reaches(tree: ast.AST, host: bool = True) -> int:
    """Reads and writes of another object's private attribute (``x._name``, x not self/cls);
    ``host=False`` leaves out a part's uses of its Host protocol (``self._s._name``)."""
    return sum(
        1
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and n.attr.startswith("_")
        and not n.attr.startswith("__")
        and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))
        and (host or not (isinstance(n.value, ast.Attribute) and n.value.attr == "_s"))
    )


def main(root: Path) -> None:
    modules: list[tuple[int, str]] = []
    classes: list[tuple[int, str]] = []
    functions: list[tuple[int, str]] = []
    ignores: list[tuple[int, str]] = []
    private: list[tuple[int, str]] = []
    private_no_host: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        rel = str(path.relative_to(root.parent))
        modules.append((len(text.splitlines()), rel))
        count = text.count("type: ignore")
        if count:
            ignores.append((count, rel))
        tree = ast.parse(text)
        private.append((reaches(tree), rel))
        private_no_host.append((reaches(tree, host=False), rel))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.append((span(node), f"{rel}:{node.name}"))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((span(node), f"{rel}:{node.lineno}:{node.name}"))
    for title, rows, most in (
        ("modules", modules, MODULE_MOST),
        ("classes", classes, CLASS_MOST),
        ("functions", functions, FUNCTION_MOST),
    ):
        rows.sort(reverse=True)
        over = [r for r in rows if r[0] > most]
        print(f"== {title}: largest {rows[0][0]} lines; {len(over)} over {most}")
        for size, label in over or rows[:3]:
            print(f"  {size:5d}  {label}")
    print(f"== type: ignore: {sum(c for c, _ in ignores)} in all")
    for count, rel in sorted(ignores, reverse=True):
        print(f"  {count:5d}  {rel}")
    print(f"== reaches into other objects' private attributes: {sum(c for c, _ in private)}")
    for count, rel in sorted(private, reverse=True)[:5]:
        print(f"  {count:5d}  {rel}")
    print(
        "   of which not through a part's Host protocol (self._s._x): "
        f"{sum(c for c, _ in private_no_host)}"
    )
    sched = (root / "scheduler.py").read_text()
    print(
        f"== scheduler.py: {sched.count('method-assign')} method-assign,"
        f" {sched.count('if self._durable') + sched.count('if not self._durable')}"
        " 'if self._durable' branches"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("src/duetime"))
