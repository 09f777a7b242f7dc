"""Small modules, one job each: no hand-written module of the package is over MAX_LINES lines.

A module that grows past it is split by what it does (as ``broker/broker.py`` gave its marker
writing, config descriptions and cluster following their own modules) rather than raised here.
"""

from __future__ import annotations

from pathlib import Path

import rivven_kproto

PACKAGE = Path(rivven_kproto.__file__).parent
MAX_LINES = 600


def test_no_module_is_over_the_limit() -> None:
    sizes = {path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for path in PACKAGE.rglob("*.py")}
    assert len(sizes) > 100  # the package itself was walked
    over = {name: lines for name, lines in sorted(sizes.items()) if lines > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them by job): {over}"
