"""CI gate for the compatibility matrix: no cell that passed in the committed baseline may fail.

Runs the whole matrix (the same code as ``python -m compat_tests.report``) against this module's
fresh broker. Cells that pass but are not in ``compat_tests/matrix/baseline.json`` are printed as
progress and do not fail the test; regenerate the baseline with
``python -m compat_tests.report --write-baseline`` to lock them in.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .broker_process import BrokerProcess
from .matrix import baseline, render, secured
from .matrix.model import CAPABILITIES
from .matrix.runner import run_matrix


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, dict[str, dict[str, str]]]]:
    """Our broker with the security rows' listeners, users and ACLs (see matrix/secured.py)."""
    broker, profiles = secured.start(tmp_path_factory.mktemp("matrix-secured"))
    try:
        yield broker, profiles
    finally:
        broker.stop()


@pytest.mark.slow
def test_no_baseline_cell_regresses(secured_broker: tuple[BrokerProcess, dict[str, dict[str, str]]], tmp_path: Path) -> None:
    broker, profiles = secured_broker
    report = run_matrix(
        broker.bootstrap,
        target="rivven_kproto (this test's broker)",
        jobs=2,
        progress=lambda line: print(line, flush=True),
        secured=profiles,
    )
    rst, js = render.write(report, tmp_path)
    print(render.to_rst(report))
    print(f"results: {rst} {js}")

    regressions, progress = baseline.compare(report, baseline.load())
    for outcome in progress:
        print(f"newly passing (not in the baseline yet): {outcome.key()}: {outcome.detail}")
    assert not regressions, (
        "cells that passed in the baseline now fail:\n"
        + "\n".join(regressions)
        + (f"\nbroker log tail:\n{broker.log_text()[-3000:]}")
    )


def test_every_cell_is_declared() -> None:
    """Each column serves every capability or says why not: nothing drops out of the table."""
    from .matrix.clients import column_modules, load

    for module in column_modules():
        client = load(module)  # raises on an undeclared capability
        for capability in CAPABILITIES:
            reason = client.not_offered.get(capability.id)
            assert reason is None or reason.strip(), (client.name, capability.id)


def test_baseline_names_existing_cells() -> None:
    from .matrix.clients import column_modules, load

    cells = {f"{load(m).name}/{c.id}" for m in column_modules() for c in CAPABILITIES}
    unknown = baseline.load() - cells
    assert not unknown, f"baseline cells not in the matrix: {sorted(unknown)}"


def test_compare_flags_regressions_and_reports_progress() -> None:
    from .matrix.model import FAIL, NA, PASS, Outcome
    from .matrix.runner import Report

    outcomes = [
        Outcome("a", "connect", PASS),
        Outcome("a", "metadata", FAIL, "broken"),
        Outcome("b", "connect", PASS),
        Outcome("b", "metadata", NA, "not offered"),
    ]
    report = Report("t", {}, outcomes, "now", 0.0, {})
    regressions, progress = baseline.compare(report, {"a/connect", "a/metadata", "b/metadata", "c/connect"})
    assert regressions == [
        "a/metadata: fail: broken",
        "b/metadata: n/a: not offered",
        "c/connect: not run (client or capability missing from the matrix)",
    ]
    assert [o.key() for o in progress] == ["b/connect"]
