"""The CI gate's memory: ``baseline.json`` lists the cells that passed in the committed run.

A cell in the baseline that no longer passes is a regression; a cell that passes but is not in the
baseline is progress, reported so that the baseline can be regenerated
(``python -m compat_tests.report --write-baseline``).
"""

from __future__ import annotations

import json
from pathlib import Path

from .model import PASS, Outcome
from .runner import Report

BASELINE = Path(__file__).with_name("baseline.json")


def load(path: Path = BASELINE) -> set[str]:
    return set(json.loads(path.read_text())["passing"])


def write(report: Report, path: Path = BASELINE) -> None:
    data = {
        "about": "cells (client/capability) that passed; compat_tests/test_matrix.py fails when one of them no "
        "longer passes. Regenerate with: python -m compat_tests.report --write-baseline",
        "generated_at": report.started_at,
        "clients": report.clients,
        "passing": report.passing(),
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def compare(report: Report, passing: set[str]) -> tuple[list[str], list[Outcome]]:
    """(regressions as ``client/capability: why``, newly passing outcomes)."""
    by_key = {o.key(): o for o in report.outcomes}
    regressions = []
    for key in sorted(passing):
        outcome = by_key.get(key)
        if outcome is None:
            regressions.append(f"{key}: not run (client or capability missing from the matrix)")
        elif outcome.status != PASS:
            regressions.append(f"{key}: {outcome.status}: {outcome.detail}")
    progress = [o for o in report.outcomes if o.status == PASS and o.key() not in passing]
    return regressions, progress
