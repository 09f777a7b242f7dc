"""python -m tools.bench.scaling: throughput against the number of brokers sharing one PostgreSQL
database, beside our broker on the native log, in one run.

    python -m tools.bench.scaling                       # 3 rounds: about 6 minutes on 2 cores
    python -m tools.bench.scaling --rounds 1 --messages 20000 --transactions 30 --brokers 1,2

Each round starts, in turn and fresh: our broker on the native log (one broker, the reference),
then 1, 2 and 3 brokers (``kproto serve --storage ... --node-id N``; node 1 first, so it holds the
coordinator lease) on a fresh database of one throwaway PostgreSQL server, and waits until every
broker lists all of them. The clients are bootstrapped with every broker of the run. Three of
``python -m tools.bench``'s workloads run against each: ``produce-8p`` (idempotent, acks=all),
``consume-committed`` (read_committed, of what produce-8p wrote) and ``transactions`` (one
transactional producer on one partition, 10 messages a transaction, commit latencies; at most
``--transaction-seconds``, so a slow configuration runs fewer). Before producing, a created topic
is waited for until each broker's own Metadata describes it. A configuration or workload that
fails is recorded with its error and the brokers' log tails, and the run goes on.

Around each workload the tool reads the CPU time of every broker (summed), of the PostgreSQL
server (the postmaster and its backends) and of this process (the librdkafka clients), so the
table shows how many of the machine's cores the run kept busy, and what the PostgreSQL server did
(``pg_stats``: commits, statements, WAL bytes), so that a second table gives the cost per message
and per transaction (CPU of brokers + PostgreSQL, database work), which a busy machine distorts
less than rates. Prints both (medians of the rounds), writes every round to JSON (``--json``)
and ``scaling.png`` into ``--out``: throughput against brokers, the native log as a dashed
reference line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import brokers, pg_stats
from . import workloads as w
from .__main__ import machine
from .curves import chart
from .procstats import reset_peak, tree_cpu_s, usage
from .report import render_plain
from .runner import Settings, figures_of, workload

log = logging.getLogger("tools.bench.scaling")

WORKLOADS = ("produce-8p", "consume-committed", "transactions")
NATIVE = "native"
MEET_TIMEOUT_S = 30


def pg_name(count: int) -> str:
    return f"pg-{count}"


class Cluster:
    """Brokers started for one measurement: ``bootstrap`` lists all of them."""

    def __init__(self, targets: list[brokers.Target], round_: int) -> None:
        self.nodes: list[brokers.Running] = []
        self.secured: dict[str, dict[str, str]] = {}
        self.metrics_url: str | None = None
        try:
            for target in targets:  # in order: the first holds the coordinator lease
                self.nodes.append(brokers.Running(target, round_))
            self.bootstrap = ",".join(node.bootstrap for node in self.nodes)
            if len(self.nodes) > 1:
                self._wait_met()
        except BaseException as exc:
            exc.add_note(json.dumps(self.log_tails()))  # the brokers' logs go with the error
            self.stop()
            raise

    def _wait_met(self) -> None:
        expected = len(self.nodes)
        deadline = time.monotonic() + MEET_TIMEOUT_S
        while time.monotonic() < deadline:
            if all(len(w.described_by(node.bootstrap, None).brokers) == expected for node in self.nodes):
                return
            time.sleep(0.1)
        raise RuntimeError(f"the {expected} brokers did not all list each other within {MEET_TIMEOUT_S} s")

    @property
    def pids(self) -> list[int]:
        return [node.pid for node in self.nodes]

    def log_tails(self, size: int = 3000) -> dict[str, str]:
        """The end of each broker's log, with its exit status if it has exited."""
        return {f"{node.target.name} (pid {node.pid}, exit status {node.process.poll()})":
                node.log_path.read_bytes()[-size:].decode(errors="replace") for node in self.nodes}

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()


def client_cpu_s() -> float:
    """This process's CPU: the bench's own thread and librdkafka's client threads."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


class CpuSampler:
    """Every ``every_s``, the CPU seconds so far of the brokers (summed), PostgreSQL and this
    process, so the cores each kept busy can be read over a workload's timed part alone (its
    topic creation, warm-up and waits for the metadata excluded)."""

    def __init__(self, pids: list[int], postmaster: int | None, every_s: float = 0.1) -> None:
        self.pids, self.postmaster, self.every_s = pids, postmaster, every_s
        self.samples: list[tuple[float, float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        pg = tree_cpu_s(self.postmaster) if self.postmaster else 0.0
        brokers_ = sum(usage(pid).cpu_s for pid in self.pids)
        self.samples.append((time.perf_counter(), brokers_, pg, client_cpu_s()))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def __enter__(self) -> CpuSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sample()

    def cores(self, start: float, end: float) -> dict[str, float]:
        """Cores busy between ``start`` and ``end`` (perf_counter), from the nearest samples inside."""
        inside = [s for s in self.samples if start - self.every_s / 2 <= s[0] <= end + self.every_s / 2]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return {}
        first, last = inside[0], inside[-1]
        span = last[0] - first[0]
        parts = {name: (last[i] - first[i]) / span
                 for i, name in ((1, "cores_brokers"), (2, "cores_pg"), (3, "cores_client"))}
        return {**{k: round(v, 2) for k, v in parts.items()}, "cores_busy": round(sum(parts.values()), 2)}


def run_workload(name: str, cluster: Cluster, settings: Settings, txn_budget_s: float) -> w.Figures:
    if name == "transactions":  # the same workload, bounded in time: a slow configuration runs fewer
        return w.transactions(cluster.bootstrap, "bench-txn", settings.transactions, budget_s=txn_budget_s)
    return workload(name, cluster, settings)()


def measure(cluster: Cluster, name: str, settings: Settings, postmaster: int | None,
            txn_budget_s: float, server_url: str | None = None) -> dict[str, Any]:
    """One workload; its figures plus the CPU of brokers, PostgreSQL and clients: over the whole
    call (``*_cpu_s``, as ``python -m tools.bench`` counts) and as cores busy over its timed part."""
    exact_peak = all([reset_peak(pid) for pid in cluster.pids])
    before = [usage(pid).cpu_s for pid in cluster.pids]
    pg_before = tree_cpu_s(postmaster) if postmaster else 0.0
    client_before = client_cpu_s()
    stats_before = pg_stats.snapshot(server_url) if server_url else None
    with CpuSampler(cluster.pids, postmaster) as sampler:
        figures = run_workload(name, cluster, settings, txn_budget_s)
        end = time.perf_counter()
    client = client_cpu_s() - client_before
    pg = tree_cpu_s(postmaster) - pg_before if postmaster else 0.0
    after = [usage(pid) for pid in cluster.pids]
    per_broker = [a.cpu_s - b for a, b in zip(after, before, strict=True)]
    out = figures_of(figures, sum(per_broker), max(a.peak_rss_mib for a in after),
                     max(a.rss_mib for a in after), exact_peak)
    out.update(broker_cpu_s_each=[round(c, 3) for c in per_broker], pg_cpu_s=round(pg, 3),
               client_cpu_s=round(client, 3), **sampler.cores(end - figures.seconds, end))
    transactions = figures.extra.get("transactions")
    total_cpu = sum(per_broker) + pg
    out.update(cpu_ms_per_msg=round(total_cpu * 1000 / max(figures.messages, 1), 4))
    if transactions:
        out.update(cpu_ms_per_txn=round(total_cpu * 1000 / transactions, 3),
                   broker_cpu_ms_per_txn=round(sum(per_broker) * 1000 / transactions, 3),
                   pg_cpu_ms_per_txn=round(pg * 1000 / transactions, 3))
    if server_url and stats_before is not None:
        out.update(pg_stats.cost(stats_before, pg_stats.snapshot(server_url), figures.messages, transactions))
    if name == "transactions":  # a commit waits for markers on the partition's leader: which node is it?
        described = w.described_by(cluster.nodes[0].bootstrap, "bench-txn")
        out.update(partition_leader=described.topics[0].partitions[0].leader_id,
                   controller=described.controller_id)
    return out


def run_point(targets: list[brokers.Target], round_: int, settings: Settings, postmaster: int | None,
              txn_budget_s: float, server_url: str | None = None) -> dict[str, Any]:
    results: dict[str, Any] = {"brokers": len(targets)}
    try:
        cluster = Cluster(targets, round_)
    except Exception as exc:  # noqa: BLE001 - a cluster that did not start is a result (with the brokers' logs)
        log.warning("%d broker(s) did not start: %s", len(targets), exc)
        logs = json.loads(exc.__notes__[-1]) if getattr(exc, "__notes__", None) else {}
        return {**results, **{name: {"error": f"start: {type(exc).__name__}: {exc}"[:500], "logs": logs}
                              for name in WORKLOADS}}
    try:
        for name in WORKLOADS:
            try:
                results[name] = measure(cluster, name, settings, postmaster, txn_budget_s, server_url)
            except Exception as exc:  # noqa: BLE001 - a failed workload is a result (with the brokers' logs)
                log.warning("%s with %d broker(s): %s", name, len(targets), exc)
                results[name] = {"error": f"{type(exc).__name__}: {exc}"[:500], "logs": cluster.log_tails()}
                continue
            log.info("round %d, %d broker(s) %s: %.0f msg/s, brokers %.2f CPU-s, PostgreSQL %.2f CPU-s",
                     round_ + 1, len(targets), name, results[name]["msgs_per_s"], results[name]["broker_cpu_s"],
                     results[name]["pg_cpu_s"])
    finally:
        cluster.stop()
    return results


def run_all(counts: list[int], settings: Settings, txn_budget_s: float) -> dict[str, list[dict[str, Any]]]:
    """Round r: native, then 1, 2, 3 brokers on PostgreSQL (a fresh database each)."""
    from rivven_kproto.testing.postgres import create_database, temporary_postgres

    rounds: dict[str, list[dict[str, Any]]] = {NATIVE: [], **{pg_name(n): [] for n in counts}}
    with temporary_postgres() as server:
        pg_stats.enable(server)
        postmaster = server.postmaster_pid()
        for round_ in range(settings.rounds):
            log.info("round %d: native", round_ + 1)
            rounds[NATIVE].append(run_point([brokers.ours()], round_, settings, None, txn_budget_s))
            for count in counts:
                log.info("round %d: %d broker(s) on PostgreSQL", round_ + 1, count)
                url = create_database(server)
                targets = [brokers.cluster_node(url, node) for node in range(1, count + 1)]
                rounds[pg_name(count)].append(run_point(targets, round_, settings, postmaster, txn_budget_s,
                                                        server.url))
    return rounds


KEYS = ("msgs_per_s", "txn_per_s", "transactions", "p50_ms", "p99_ms", "broker_cpu_s", "pg_cpu_s", "client_cpu_s",
        "cores_brokers", "cores_pg", "cores_client", "cores_busy", "seconds", "cpu_ms_per_msg", "cpu_ms_per_txn",
        "broker_cpu_ms_per_txn", "pg_cpu_ms_per_txn", "db_commits_per_msg", "statements_per_msg",
        "wal_bytes_per_msg", "db_rows_per_msg", "db_commits_per_txn", "statements_per_txn", "wal_bytes_per_txn", "db_rows_per_txn")


def summarize(rounds: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per configuration and workload: the median of each figure over the rounds that ran it."""
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for config, runs in rounds.items():
        for name in WORKLOADS:
            figures = [run[name] for run in runs if "error" not in run.get(name, {"error": 1})]
            medians = {key: statistics.median(f[key] for f in figures) for key in KEYS
                       if figures and all(key in f for f in figures)}
            medians["rounds"] = len(figures)
            summary.setdefault(config, {})[name] = medians
    return summary


def table(summary: dict[str, dict[str, dict[str, float]]], rounds: int) -> list[list[str]]:
    """Medians; CPU-s over each whole workload call; cores busy over its timed part (brokers
    summed + PostgreSQL + clients = total)."""
    header = ["workload", "brokers", "msg/s", "txn/s", "p50 ms", "p99 ms", "broker CPU-s", "PG CPU-s",
              "client CPU-s", "cores: brokers+PG+clients=total", f"ok/{rounds}"]
    rows = [header]
    for name in WORKLOADS:
        for config, by_workload in summary.items():
            f = by_workload[name]
            label = "1 native" if config == NATIVE else f"{config.split('-')[1]} on PostgreSQL"
            cells = [_cell(f.get(k), d) for k, d in (("msgs_per_s", 0), ("txn_per_s", 0), ("p50_ms", 1),
                                                    ("p99_ms", 1), ("broker_cpu_s", 2), ("pg_cpu_s", 2),
                                                    ("client_cpu_s", 2))]
            cores = "+".join(_cell(f.get(k), 2) for k in ("cores_brokers", "cores_pg", "cores_client"))
            rows.append([name, label, *cells, f"{cores}={_cell(f.get('cores_busy'), 2)}", str(int(f["rounds"]))])
    return rows


def cost_table(summary: dict[str, dict[str, dict[str, float]]]) -> list[list[str]]:
    """Medians of the cost per unit of work: CPU (brokers + PostgreSQL) and the database's commits,
    statements and WAL bytes, per message (produce, consume) or per transaction."""
    rows = [["workload", "brokers", "unit", "CPU ms", "broker CPU ms", "PG CPU ms", "DB commits", "statements",
             "WAL bytes"]]
    for name in WORKLOADS:
        unit = "txn" if name == "transactions" else "msg"
        for config, by_workload in summary.items():
            f = by_workload[name]
            label = "1 native" if config == NATIVE else f"{config.split('-')[1]} on PostgreSQL"
            if unit == "txn":
                cpu = [f.get("cpu_ms_per_txn"), f.get("broker_cpu_ms_per_txn"), f.get("pg_cpu_ms_per_txn")]
            else:
                cpu = [f.get("cpu_ms_per_msg"), None, None]
            rows.append([name, label, unit, *(_cell(c, 4 if unit == "msg" else 2) for c in cpu),
                         _cell(f.get(f"db_commits_per_{unit}"), 3), _cell(f.get(f"statements_per_{unit}"), 2),
                         _cell(f.get(f"wal_bytes_per_{unit}"), 0)])
    return rows


def _cell(value: float | None, digits: int) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def plot(path: Path, summary: dict[str, dict[str, dict[str, float]]], counts: list[int]) -> None:
    metrics = [("produce", "produce 8 partitions, msg/s"), ("consume", "consume read_committed, msg/s"),
               ("transactions", "transactions/s (1 producer)"), ("cores", "cores busy during produce (of 2)")]

    def figures(config: str) -> dict[str, float | None]:
        f = summary.get(config, {})
        return {"produce": f.get("produce-8p", {}).get("msgs_per_s"),
                "consume": f.get("consume-committed", {}).get("msgs_per_s"),
                "transactions": f.get("transactions", {}).get("txn_per_s"),
                "cores": f.get("produce-8p", {}).get("cores_busy")}

    points = [figures(pg_name(n)) for n in counts]
    series = {"PostgreSQL engine": {key: [p[key] for p in points] for key, _ in metrics}}
    chart(path, "Brokers sharing one PostgreSQL database, all on one 2-core machine", "brokers", counts, series,
          metrics, log_x=False, references={"native log, 1 broker": figures(NATIVE)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.scaling", description=__doc__.splitlines()[0],
                                     epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="1,2,3", help="broker counts on PostgreSQL")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=200_000, help="produced, then consumed, per point")
    parser.add_argument("--transactions", type=int, default=300, help="of 10 messages each, per point")
    parser.add_argument("--transaction-seconds", type=float, default=20.0,
                        help="at most this long per transactions point (fewer transactions if slower)")
    parser.add_argument("--incompressible", action="store_true",
                        help="produce-8p sends random bytes (by default one repeated byte, which PostgreSQL compresses)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"), help="where scaling.png goes")
    parser.add_argument("--json", type=Path,
                        default=Path(f"benchmarks/results/{dt.date.today().isoformat()}-scaling.json"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    counts = [int(x) for x in args.brokers.split(",") if x]
    settings = Settings(messages=args.messages, transactions=args.transactions, rounds=args.rounds,
                        incompressible=args.incompressible)
    started, load_before = time.monotonic(), os.getloadavg()
    rounds = run_all(counts, settings, args.transaction_seconds)
    summary = summarize(rounds)
    args.out.mkdir(parents=True, exist_ok=True)
    plot(args.out / "scaling.png", summary, counts)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "rivven_kproto"], capture_output=True, text=True).stdout
    document = {"broker_code": f"{head}{' with uncommitted changes under rivven_kproto/' if dirty else ''}",
                "machine": {**machine(), "load_avg_before": load_before,
                            "load_avg_after": os.getloadavg()}, "settings": vars(settings),
                "workloads": list(WORKLOADS), "seconds": round(time.monotonic() - started), "rounds": rounds,
                "summary": summary}
    args.json.write_text(json.dumps(document, indent=1))
    print(render_plain(table(summary, settings.rounds)))
    print(render_plain(cost_table(summary)))
    failed = [(config, i + 1, name) for config, runs in rounds.items() for i, run in enumerate(runs)
              for name in WORKLOADS if "error" in run.get(name, {})]
    for config, round_, name in failed:
        print(f"FAILED {config} round {round_} {name}: {rounds[config][round_ - 1][name]['error']}")
    print(f"\nwrote {args.json} and {args.out / 'scaling.png'} in {document['seconds']} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
