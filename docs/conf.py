"""Sphinx configuration for duetime's documentation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "src"))

project = "duetime"
author = "duetime developers"
copyright = "2026, duetime developers"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "scripts"]
html_theme = "furo"
html_title = "duetime"
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # "Attributes:" as fields: no duplicate entries beside autodoc members
suppress_warnings = ["myst.xref_missing"]

# The Poisson-window figure is generated from a seeded simulation at build time, not committed.
_figure = HERE / "_generated" / "poisson_windows.png"
if not _figure.exists():
    subprocess.run(
        [sys.executable, str(HERE / "scripts" / "poisson_plot.py"), str(_figure)], check=True
    )
autodoc_preserve_defaults = True  # (the sentinels read as their names, not as object reprs)
