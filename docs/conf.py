"""Sphinx configuration of the documentation site (Read the Docs builds it as ``tox -e docs`` does)."""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path[:0] = [str(DOCS / "_ext"), str(DOCS.parent)]  # our extensions; tools.bench.report for the tables

project = "rivven_kproto"
author = "the rivven_kproto authors"
copyright = "2026, the rivven_kproto authors"  # noqa: A001 (Sphinx's name for it)

extensions = ["kproto_cli", "bench_tables", "authorization_table"]
exclude_patterns = ["_build", "**/_build"]
html_theme = "alabaster"
html_title = "rivven_kproto"
html_theme_options = {"page_width": "1200px", "body_max_width": "auto"}
highlight_language = "none"
nitpicky = True
