"""Run the matrix against one bootstrap address: set-up, one subprocess per cell, bounded in time.

Cells run ``jobs`` at a time (default 2, this project's core count); each has its capability's
timeout, after which its whole process group is killed and the cell fails with "timed out".
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import fixtures
from .cell import MARKER
from .clients import column_modules, load
from .model import BY_ID, CAPABILITIES, FAIL, NA, Capability, Client, Outcome, describe_error

ROOT = Path(__file__).resolve().parents[2]
STARTUP_GRACE_S = 10.0  # interpreter + client imports, on top of the scenario's own budget
# Clients that start a JVM (PySpark: a Spark session) need far longer on a busy 2-core machine
# than the scenario itself; a loaded CI run took more than 55 s just to get a session. Their
# cells run one after the other in one process (one session), within the sum of their budgets.
JVM_CLIENTS = {"pyspark"}
JVM_FACTOR = 4.0


def cell_budget(cell: Cell) -> float:
    """Seconds a cell may legitimately take on the slowest machine the suite runs on."""
    factor = JVM_FACTOR if cell.client.name in JVM_CLIENTS else 1.0
    return cell.capability.timeout_s * factor


@dataclass
class Cell:
    module: str
    client: Client
    capability: Capability
    topics: list[str] = field(default_factory=list)
    unique: str = field(default_factory=lambda: uuid.uuid4().hex[:8])


@dataclass
class Report:
    target: str
    clients: dict[str, dict[str, str]]
    outcomes: list[Outcome]
    started_at: str
    duration_s: float
    environment: dict[str, str]

    def outcome(self, client: str, capability: str) -> Outcome:
        for o in self.outcomes:
            if o.client == client and o.capability == capability:
                return o
        raise KeyError((client, capability))

    def passing(self) -> list[str]:
        return sorted(o.key() for o in self.outcomes if o.status == "pass")

    def as_json(self) -> dict[str, Any]:
        return {
            "generated_at": self.started_at,
            "target": self.target,
            "duration_s": round(self.duration_s, 1),
            "environment": self.environment,
            "clients": self.clients,
            "capabilities": [{"id": c.id, "title": c.title} for c in CAPABILITIES],
            "cells": [o.as_json() for o in self.outcomes],
        }


def _versions(client: Client) -> dict[str, str]:
    try:
        return client.version()
    except Exception as exc:  # noqa: BLE001 - a missing client still gets a column
        return {"version": f"unavailable ({describe_error(exc)})"}


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _spec(bootstrap: str, cell: Cell, secured: dict[str, dict[str, str]]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "client": cell.module,
        "capability": cell.capability.id,
        "bootstrap": bootstrap,
        "topics": cell.topics,
        "unique": cell.unique,
        "timeout_s": cell_budget(cell),
    }
    if cell.capability.secured:
        profile = dict(secured[cell.capability.secured])
        spec.update(bootstrap=profile.pop("bootstrap.servers"), security=profile, plain_bootstrap=bootstrap)
    return spec


def _run_process(args: list[str], limit: float) -> tuple[bytes, bytes, int | None, bool]:
    """Run a cell process (its own process group, killed at the end); stdout, stderr, exit code,
    and whether it ran out of time."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "compat_tests.matrix.cell", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=limit)
        return out, err, process.returncode, False
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        out, err = process.communicate()
        return out, err, process.returncode, True
    finally:
        _kill_group(process.pid)  # the cell's children (kcat, node) go with it


def _results(out: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[len(MARKER) :]) for line in out.decode(errors="replace").splitlines() if line.startswith(MARKER)
    ]


def _missing(cell: Cell, err: bytes, returncode: int | None, timed_out: bool, limit: float, elapsed: float) -> Outcome:
    """The outcome of a cell whose process gave no result."""
    lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    if timed_out:
        detail = f"timed out after {limit:.0f} s" + (f"; last output: {lines[-1][:200]}" if lines else "")
    else:
        detail = f"cell process exited {returncode} without a result: {' | '.join(lines[-3:])[:300]}"
    return Outcome(cell.client.name, cell.capability.id, FAIL, detail, elapsed)


def _run_cell(bootstrap: str, cell: Cell, secured: dict[str, dict[str, str]]) -> list[Outcome]:
    started = time.monotonic()
    limit = cell_budget(cell) + STARTUP_GRACE_S
    out, err, returncode, timed_out = _run_process([json.dumps(_spec(bootstrap, cell, secured))], limit)
    results = _results(out)
    if timed_out or not results:
        return [_missing(cell, err, returncode, timed_out, limit, time.monotonic() - started)]
    result = results[-1]
    return [Outcome(cell.client.name, cell.capability.id, result["status"], result["detail"], result["duration_s"])]


def _run_batch(bootstrap: str, cells: list[Cell], secured: dict[str, dict[str, str]]) -> list[Outcome]:
    """A JVM client's cells one after the other in one process (one Spark session for all);
    cells the process did not reach fail with its timeout or exit."""
    started = time.monotonic()
    limit = sum(cell_budget(cell) for cell in cells) + STARTUP_GRACE_S
    specs = [_spec(bootstrap, cell, secured) for cell in cells]
    out, err, returncode, timed_out = _run_process(["--batch", json.dumps(specs)], limit)
    by_index = {result["index"]: result for result in _results(out)}
    outcomes = []
    for index, cell in enumerate(cells):
        result = by_index.get(index)
        if result is None:
            outcomes.append(_missing(cell, err, returncode, timed_out, limit, time.monotonic() - started))
        else:
            outcomes.append(Outcome(cell.client.name, cell.capability.id, result["status"], result["detail"],
                                    result["duration_s"]))
    return outcomes


def plan(
    modules: list[str] | None = None, capabilities: list[str] | None = None
) -> tuple[list[Client], list[Cell], list[Outcome]]:
    """Columns, the cells to run, and the n/a outcomes (decided without running anything)."""
    clients, cells, skipped = [], [], []
    for module in modules or column_modules():
        client = load(module)
        clients.append(client)
        for capability in CAPABILITIES:
            if capabilities and capability.id not in capabilities:
                continue
            if capability.id in client.not_offered:
                skipped.append(Outcome(client.name, capability.id, NA, client.not_offered[capability.id]))
            else:
                cells.append(Cell(module, client, capability))
    unknown = set(capabilities or ()) - set(BY_ID)
    if unknown:
        raise ValueError(f"unknown capabilities {sorted(unknown)}; known: {sorted(BY_ID)}")
    return clients, cells, skipped


def run_matrix(
    bootstrap: str,
    *,
    target: str | None = None,
    modules: list[str] | None = None,
    capabilities: list[str] | None = None,
    jobs: int = 2,
    progress: Callable[[str], None] | None = None,
    secured: dict[str, dict[str, str]] | None = None,
) -> Report:
    """``secured``: for each secured profile of :data:`model.SECURED_PROFILES`, the client
    properties (with ``bootstrap.servers``) of a listener and identity on the same broker; without
    it the secured rows are n/a (a foreign broker's security set-up is not known)."""
    started_at = datetime.now(UTC).replace(microsecond=0).isoformat()
    started = time.monotonic()
    clients, cells, outcomes = plan(modules, capabilities)
    secured = secured or {}
    unsecured = [cell for cell in cells if cell.capability.secured and cell.capability.secured not in secured]
    for cell in unsecured:
        cells.remove(cell)
        outcomes.append(Outcome(cell.client.name, cell.capability.id, NA,
                                "not run: the target broker was given without secured listeners for this row"))
    for cell in cells:
        cell.topics = [
            f"matrix-{cell.unique}-{cell.capability.id}-{i}" for i in range(cell.capability.topics)
        ]
    fixtures.create_topics(bootstrap, [t for cell in cells for t in cell.topics])

    done = 0

    def run(job: Callable[[], list[Outcome]]) -> list[Outcome]:
        nonlocal done
        finished = job()
        for outcome in finished:
            done += 1
            if progress:
                progress(
                    f"[{done:3d}/{len(cells)}] {outcome.client} / {outcome.capability}: {outcome.status} "
                    f"({outcome.duration_s:.1f}s){'' if outcome.status == 'pass' else ' ' + outcome.detail[:160]}"
                )
        return finished

    # A JVM client's cells are one job (started first: it is the longest), the others one job
    # per cell, longest first, so the slow group rows do not end up alone at the tail.
    batched = [cell for cell in cells if cell.client.name in JVM_CLIENTS]
    single = sorted((cell for cell in cells if cell.client.name not in JVM_CLIENTS),
                    key=lambda c: -c.capability.timeout_s)
    jobs_list: list[Callable[[], list[Outcome]]] = []
    for name in sorted({cell.client.name for cell in batched}):
        mine = [cell for cell in batched if cell.client.name == name]
        jobs_list.append(lambda mine=mine: _run_batch(bootstrap, mine, secured))
    jobs_list += [lambda cell=cell: _run_cell(bootstrap, cell, secured) for cell in single]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for finished in pool.map(run, jobs_list):
            outcomes += finished

    order = {(c.name, cap.id): (i, j) for i, c in enumerate(clients) for j, cap in enumerate(CAPABILITIES)}
    outcomes.sort(key=lambda o: order[(o.client, o.capability)])
    return Report(
        target=target or bootstrap,
        clients={c.name: _versions(c) for c in clients},
        outcomes=outcomes,
        started_at=started_at,
        duration_s=time.monotonic() - started,
        environment={
            "python": platform.python_version(),
            "platform": platform.platform(terse=True),
            "jobs": str(jobs),
        },
    )
