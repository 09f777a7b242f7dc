"""The verdict of a run, for people (a table) and for scripts (JSON)."""

from __future__ import annotations

from typing import Any

from .checker import CHECKS, Finding, passed, stalls
from .history import COMMITTED, History


def summary(history: History, findings: dict[str, Finding], elapsed_s: float) -> dict[str, Any]:
    outcomes: dict[str, int] = {}
    for txn in history.transactions.values():
        outcomes[txn.outcome] = outcomes.get(txn.outcome, 0) + 1
    committed_records = sum(len(t.values) for t in history.transactions.values() if t.outcome == COMMITTED)
    longest = max(stalls(history), key=lambda pair: pair[1], default=None)
    return {
        "passed": passed(findings),
        "seed": history.seed,
        "bootstrap": history.bootstrap,
        "client": history.client,
        "seconds": round(elapsed_s, 1),
        "transactions": outcomes,
        "committed_records": committed_records,
        "reads_during_run": len(history.polls),
        "transformed_outputs": len(history.transform_output),
        "faults": history.faults,
        "fault_log": len(history.fault_log),
        "longest_stall": None if longest is None else {
            "seconds": round(longest[1], 1), "transaction": longest[0].key,
            "began_s": round(longest[0].began_at - history.started_at, 1),
        },
        "transform_longest_s": history.transform_stall[0],
        "idempotent_acknowledged": len(history.idempotent_acks),
        "client_errors": len(history.errors),
        "client_crashes": history.client_crashes,
        "checks": {name: {"count": f.count, "examples": f.examples} for name, f in findings.items()},
    }


def table(doc: dict[str, Any]) -> str:
    lines = [
        f"seed {doc['seed']} against {doc['bootstrap']} ({doc['client']} producers): {doc['seconds']} s, transactions {doc['transactions']}, "
        f"{doc['committed_records']} committed records, {doc['reads_during_run']} reads during the run, "
        f"{doc['transformed_outputs']} transformed outputs",
        f"faults: {', '.join(f'{k} {v}' for k, v in doc['faults'].items())}; client errors: {doc['client_errors']}",
        *(f"client crash (the client library's, not an anomaly): {crash}" for crash in doc.get("client_crashes", [])),
        f"longest stall: {_stall(doc.get('longest_stall'))}; idempotent records acknowledged: "
        f"{doc.get('idempotent_acknowledged', 0)}; transform stage's longest transaction: "
        f"{doc.get('transform_longest_s', 0)} s",
        "",
        f"{'check':<18} {'anomalies':>9}  meaning",
    ]
    for name, meaning in CHECKS:
        lines.append(f"{name:<18} {doc['checks'][name]['count']:>9}  {meaning}")
        for example in doc["checks"][name]["examples"]:
            lines.append(f"{'':<30}e.g. {example}")
    lines += ["", "PASS: exactly-once held" if doc["passed"] else "FAIL: exactly-once violated"]
    return "\n".join(lines)


def _stall(stall: dict[str, Any] | None) -> str:
    if not stall:
        return "none (no transaction completed)"
    return f"{stall['seconds']} s (transaction {stall['transaction']}, from {stall['began_s']} s into the run)"
