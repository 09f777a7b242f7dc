"""The compatibility matrix's "3 brokers on PostgreSQL" view (#19): its exactly-once, group and
admin rows against three ``kproto serve`` processes sharing one PostgreSQL database.

The cluster is test_cluster.py's (three brokers, node 1 holding the coordinator lease; partitions
led by different brokers); every client is given all three addresses. The cells are the matrix's
own scenarios (``run_matrix``), restricted to the rows the cluster must keep and to the clients
that start no JVM, so that it costs CI a few minutes rather than the whole matrix's twelve. A cell
that passes against the single broker (``matrix/baseline.json``) must pass here too, unless it is
listed in :data:`KNOWN_FAILURES` with the broker problem that makes it fail.

``python -m compat_tests.report --cluster`` runs the same cells and writes the table the docs include.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from .broker_process import BrokerProcess
from .matrix import baseline, render
from .matrix.model import NA, PASS
from .matrix.runner import Report, run_matrix
from .test_cluster import bootstrap, cluster  # noqa: F401 - cluster: the fixture, used by name

# The rows: idempotent produce; transactions (commit, abort, fencing, with a group's
# offsets); read_committed consume; consumer groups (classic and KIP-848); admin.
CLUSTER_CAPABILITIES = [
    "idempotent",
    "txn-commit",
    "txn-abort",
    "read-committed",
    "fencing",
    "group-rebalance",
    "commit-offsets",
    "send-offsets-txn",
    "group-rebalance-kip848",
    "send-offsets-txn-kip848",
    "admin-topics",
    "admin-configs",
    "list-describe-txn",
    # #42: explicit assignments naming other live brokers, Kafka 4.1's config sources and listing.
    "admin-replica-assignment",
    "config-sources-41",
    "list-config-resources",
    # #42: the online upgrade of a classic group to the consumer protocol and back (conversion records).
    "group-upgrade-kip848",
]
# Every column but PySpark (a JVM per cell: minutes for these rows alone).
CLUSTER_CLIENTS = ["confluent", "kafka_python", "aiokafka_client", "kafkajs", "kcat"]
CLUSTER_TARGET = "3 brokers on PostgreSQL"

# "client/capability" -> the broker problem it shows (reported, not worked around). Such a cell may
# pass or fail; the test prints which.
# Cells allowed to fail on the cluster, with the broker problem behind each: none now. (The admin
# cells of kafka-python, aiokafka and kafkajs were listed until a topic config change on a broker
# other than the controller was forwarded to it, and the catalog wait accepted any later version.)
KNOWN_FAILURES: dict[str, str] = {}


def run_on_cluster(brokers: dict[int, BrokerProcess], progress: Callable[[str], None] | None = None) -> Report:
    return run_matrix(
        bootstrap(brokers),
        target=f"{CLUSTER_TARGET} (``kproto serve --storage postgresql://... --node-id 1|2|3``)",
        modules=CLUSTER_CLIENTS,
        capabilities=CLUSTER_CAPABILITIES,
        jobs=2,
        progress=progress,
    )


def cluster_regressions(report: Report, passing: set[str]) -> list[str]:
    """Cells of the single broker's baseline that neither pass on the cluster nor are known failures."""
    out = []
    for outcome in report.outcomes:
        key = outcome.key()
        if key in passing and outcome.status != PASS and key not in KNOWN_FAILURES:
            out.append(f"{key}: {outcome.status}: {outcome.detail}")
    return out


@pytest.mark.slow
def test_cluster_column_keeps_the_baseline(cluster: dict[int, BrokerProcess], tmp_path: Path) -> None:  # noqa: F811
    report = run_on_cluster(cluster, progress=lambda line: print(line, flush=True))
    rst, js = render.write(report, tmp_path)
    print(render.to_rst(report))
    print(f"results: {rst} {js}")

    passing = baseline.load()
    ran = {o.key() for o in report.outcomes}
    assert ran == {f"{c}/{cap}" for c in report.clients for cap in CLUSTER_CAPABILITIES}
    for outcome in report.outcomes:
        # Not in the baseline: n/a by the client's own declaration (with its reason), never silently.
        if outcome.key() not in passing:
            assert outcome.status == NA and outcome.detail.strip(), outcome
    for key, reason in KNOWN_FAILURES.items():
        outcome = report.outcome(*key.split("/"))
        print(f"known failure {key}: {outcome.status} this time ({outcome.detail[:200]}); {reason}")
    regressions = cluster_regressions(report, passing)
    logs = "\n".join(f"--- broker {node} log tail:\n{b.log_text()[-2000:]}" for node, b in cluster.items())
    assert not regressions, "cells that pass on one broker fail on the cluster:\n" + "\n".join(regressions) + "\n" + logs
