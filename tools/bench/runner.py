"""Rounds of workloads against each broker, alternating brokers round by round (A B A B ...)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from . import share
from . import workloads as w
from .brokers import Running, Target
from .procstats import reset_peak, usage

log = logging.getLogger(__name__)

WORKLOADS = (
    "produce-1p", "produce-8p", "consume-uncommitted", "consume-committed", "transactions", "transactions-16p",
    "transactions-offsets", "latency", "connections", "produce-8p-tls", "consume-tls", "produce-8p-sasl-ssl", "consume-sasl-ssl", "produce-8p-scraped",
    "produce-8p-contended", "transactions-contended", "consume-group", "share-consume",
)
# Over our broker's SSL and SASL_SSL (PLAIN) listeners; brokers started without them skip these.
SECURED_WORKLOADS = {"produce-8p-tls": "SSL", "consume-tls": "SSL", "produce-8p-sasl-ssl": "SASL_SSL",
                     "consume-sasl-ssl": "SASL_SSL"}
LIMIT_WORKLOADS = {
    "produce-1p", "produce-8p", "consume-uncommitted", "consume-committed", "transactions", "transactions-16p",
}
CONSUMED_TOPIC, CONSUMED_PARTITIONS = "bench-8p", 8
# A classic group and a share group read one topic of its own, produced untimed (issue #39: 100k
# records of 100 B); only brokers serving share groups run them.
SHARE_WORKLOADS = ("consume-group", "share-consume")
SHARE_TOPIC, SHARE_MAX_MESSAGES = "bench-share", 100_000


@dataclass(frozen=True)
class Settings:
    messages: int = 500_000
    transactions: int = 2_000
    latency_rate: int = 5_000
    latency_seconds: float = 10.0
    connections: int = 200
    rounds: int = 3
    incompressible: bool = False  # produce-8p: random bytes per message (tools.bench.scaling --incompressible)


class Serving(Protocol):
    """What a workload needs of the broker(s) under test: a ``Running`` broker, or a cluster
    (``tools.bench.scaling``) whose bootstrap lists all of its brokers."""

    bootstrap: str
    secured: dict[str, dict[str, str]]
    metrics_url: str | None


def workload(name: str, running: Serving, s: Settings) -> Callable[[], w.Figures]:
    n, bootstrap = s.messages, running.bootstrap
    tls, sasl = running.secured.get("SSL"), running.secured.get("SASL_SSL")
    table: dict[str, Callable[[], w.Figures]] = {
        "produce-1p": lambda: w.produce(bootstrap, "bench-1p", n, 1),
        "produce-8p": lambda: w.produce(bootstrap, CONSUMED_TOPIC, n, CONSUMED_PARTITIONS,
                                        incompressible=s.incompressible),
        # The produce workload wrote n messages plus one warm-up message per partition.
        "consume-uncommitted": lambda: w.consume(bootstrap, CONSUMED_TOPIC, n + CONSUMED_PARTITIONS,
                                                 CONSUMED_PARTITIONS, "read_uncommitted"),
        "consume-committed": lambda: w.consume(bootstrap, CONSUMED_TOPIC, n + CONSUMED_PARTITIONS,
                                               CONSUMED_PARTITIONS, "read_committed"),
        "transactions": lambda: w.transactions(bootstrap, "bench-txn", s.transactions),
        "transactions-16p": lambda: w.concurrent_transactions(bootstrap, "bench-txn16", s.transactions),
        "transactions-offsets": lambda: w.transactions_with_offsets(bootstrap, "bench-txn-offsets",
                                                                    s.transactions // 2),
        "latency": lambda: w.end_to_end(bootstrap, "bench-latency", s.latency_rate, s.latency_seconds),
        "connections": lambda: w.with_idle_connections(
            bootstrap, s.connections, lambda: w.produce(bootstrap, "bench-conn", n, CONSUMED_PARTITIONS)),
        # The same produce and read_uncommitted consume, through TLS and through TLS + SASL.
        "produce-8p-tls": lambda: w.produce(bootstrap, "bench-tls", n, CONSUMED_PARTITIONS, client=tls),
        "consume-tls": lambda: w.consume(bootstrap, "bench-tls", n + CONSUMED_PARTITIONS, CONSUMED_PARTITIONS,
                                         "read_uncommitted", client=tls),
        "produce-8p-sasl-ssl": lambda: w.produce(bootstrap, "bench-sasl-ssl", n, CONSUMED_PARTITIONS, client=sasl),
        "consume-sasl-ssl": lambda: w.consume(bootstrap, "bench-sasl-ssl", n + CONSUMED_PARTITIONS,
                                              CONSUMED_PARTITIONS, "read_uncommitted", client=sasl),
        # The 8-partition produce while /metrics is scraped every 100 ms (compare with produce-8p).
        "produce-8p-scraped": lambda: w.while_scraped(
            running.metrics_url, lambda: w.produce(bootstrap, "bench-scraped", n, CONSUMED_PARTITIONS)),
        # The same produce and single-producer transactions with a busy process on one core.
        "produce-8p-contended": lambda: w.under_cpu_hog(
            lambda: w.produce(bootstrap, "bench-contended", n, CONSUMED_PARTITIONS)),
        "transactions-contended": lambda: w.under_cpu_hog(
            lambda: w.transactions(bootstrap, "bench-txn-contended", s.transactions)),
        # The produce workload's warm-up adds one record per partition.
        "consume-group": lambda: share.consume_group(bootstrap, SHARE_TOPIC, share_count(s) + CONSUMED_PARTITIONS),
        "share-consume": lambda: share.share_consume(bootstrap, SHARE_TOPIC, share_count(s) + CONSUMED_PARTITIONS,
                                                     CONSUMED_PARTITIONS),
    }
    return table[name]


def share_count(s: Settings) -> int:
    return min(s.messages, SHARE_MAX_MESSAGES)


def run_round(target: Target, round_: int, selected: list[str], settings: Settings) -> dict[str, dict[str, Any]]:
    """Start ``target`` fresh, run the selected workloads in order, stop it; figures per workload."""
    running = Running(target, round_)
    results: dict[str, dict[str, Any]] = {}
    try:
        time.sleep(0.5)
        idle = usage(running.pid)
        results["idle"] = {"rss_mib": round(idle.rss_mib, 1), **running.notes}
        names = [name for name in selected if not target.limit_only or name in LIMIT_WORKLOADS]
        names = [name for name in names if name not in SECURED_WORKLOADS or target.secured]
        names = [name for name in names if name != "produce-8p-scraped" or running.metrics_url]
        names = [name for name in names if name not in SHARE_WORKLOADS or target.shares]
        for name, produced_by in (("consume-tls", "produce-8p-tls"), ("consume-sasl-ssl", "produce-8p-sasl-ssl")):
            if name in names and produced_by not in names:
                workload(produced_by, running, settings)()  # untimed: what the consume workload reads
        if any(name.startswith("consume") and name not in SHARE_WORKLOADS for name in names) and "produce-8p" not in names:
            w.produce(running.bootstrap, CONSUMED_TOPIC, settings.messages, CONSUMED_PARTITIONS)  # untimed
        if any(name in SHARE_WORKLOADS for name in names):
            w.produce(running.bootstrap, SHARE_TOPIC, share_count(settings), CONSUMED_PARTITIONS)  # untimed
        for name in names:
            exact_peak = reset_peak(running.pid)
            before = usage(running.pid)
            figures = workload(name, running, settings)()
            after = usage(running.pid)
            results[name] = figures_of(figures, after.cpu_s - before.cpu_s, after.peak_rss_mib, after.rss_mib,
                                     exact_peak)
            log.info("%s round %d %s: %.0f msg/s, %.2f CPU-s", target.name, round_, name,
                     figures.msgs_per_s, after.cpu_s - before.cpu_s)
        share.per_record(results)
    finally:
        running.stop()
    return results


def figures_of(f: w.Figures, cpu_s: float, peak_rss: float, rss: float, exact_peak: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messages": f.messages, "seconds": round(f.seconds, 3), "msgs_per_s": round(f.msgs_per_s),
        "mb_per_s": round(f.mb_per_s, 2), "broker_cpu_s": round(cpu_s, 3), "peak_rss_mib": round(peak_rss, 1),
        "rss_mib": round(rss, 1), "peak_is_workload_only": exact_peak, **f.extra,
    }
    if f.latencies_ms:
        out.update(p50_ms=round(f.percentile(0.50), 3), p99_ms=round(f.percentile(0.99), 3),
                   p999_ms=round(f.percentile(0.999), 3))
    return out


def run_all(targets: list[Target], selected: list[str], settings: Settings) -> dict[str, list[dict[str, Any]]]:
    """Round r runs every target once, in the same order: A B A B ..."""
    rounds: dict[str, list[dict[str, Any]]] = {t.name: [] for t in targets}
    for round_ in range(settings.rounds):
        for target in targets:
            log.info("round %d: %s", round_ + 1, target.name)
            rounds[target.name].append(run_round(target, round_, selected, settings))
    return rounds
