"""The README's quickstart must run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"


def test_quickstart_runs(capsys: pytest.CaptureFixture[str]) -> None:
    text = README.read_text()
    section = text.split("## Quickstart", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    exec(compile(code.group(1), "README-quickstart", "exec"), {})
    out = capsys.readouterr().out
    # The output the README shows under the code is exactly what the code prints.
    shown = re.search(r"```text\n(.*?)```", section, re.S)
    assert shown is not None
    assert out == shown.group(1)
    assert "09:00 Berlin, weekdays" in out and out.count("every 45 minutes") == 2


def test_the_quickstart_page_test_example_passes() -> None:
    text = (README.parent / "docs" / "quickstart.md").read_text()
    section = text.split("## Test it without waiting", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "quickstart-test-example", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_") and callable(f)]
    assert len(tests) == 1
    tests[0]()


def test_readme_has_exactly_two_setup_commands() -> None:
    text = README.read_text()
    commands = re.findall(r"```\n(python3 -m venv .*?)\n```", text)
    assert len(commands) == 2
    assert commands[0].endswith("python -m duetime demo")
    assert "pytest" in commands[1]
