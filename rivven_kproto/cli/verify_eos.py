"""``kproto verify-eos``: run the exactly-once workload against any Kafka-compatible broker and judge it.

With ``--cluster N`` it tests our own cluster instead: it starts N brokers on one throwaway
PostgreSQL database (``--standby``: with a synchronous standby to fail over to) and a seeded
nemesis kills, pauses (also beyond the brokers' 9 s session), cuts and restarts brokers and the
database while the workload runs (:mod:`rivven_kproto.verify.nemesis`). The long run, as the
issue asks for it (about 10 minutes of faults; a failure prints its seed, and ``--seed`` replays
the same fault schedule and workload; ``--work-dir`` keeps the brokers' and PostgreSQL's logs)::

    kproto verify-eos --cluster 3 --standby --postgres-bin /usr/lib/postgresql/15/bin \
        --transactions 5000 --duration 600 --seed 1 --every-fault \
        --work-dir /tmp/eos-cluster --history /tmp/eos-cluster/history.json
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import tempfile
import time
from pathlib import Path

import click

from rivven_kproto.verify.checker import STALL_BOUND_S, check, passed
from rivven_kproto.verify.clients import CLIENTS, retired_exit
from rivven_kproto.verify.cluster import Cluster
from rivven_kproto.verify.faults import BrokerCommand, CuttingProxy
from rivven_kproto.verify.history import History
from rivven_kproto.verify.nemesis import Nemesis, Rates, schedule_steps
from rivven_kproto.verify.report import summary, table
from rivven_kproto.verify.workload import Means, Plan, run

log = logging.getLogger(__name__)


@click.command("verify-eos")
@click.option("--bootstrap", "bootstrap_opt", metavar="HOST:PORT", help="Broker to test (default: the global --bootstrap).")
@click.option("--transactions", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS", help="Stop starting transactions after this long.")
@click.option("--producers", type=click.IntRange(min=1), default=3, show_default=True, help="Transactional ids.")
@click.option("--topics", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--partitions", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--client", type=click.Choice(CLIENTS), default=CLIENTS[0], show_default=True, help="Library of the transactional producers (consumers and the transform stage use confluent-kafka).")
@click.option("--seed", type=int, help="Replay a run (default: random, printed).")
@click.option("--broker-cmd", metavar="COMMAND", help="Command line that starts the broker: enables kills and pauses (SIGKILL/SIGSTOP of its process group).")
@click.option("--proxy", "proxy_listen", metavar="HOST:PORT", help="Run a TCP proxy here in front of the broker and cut its connections (the broker must advertise this address).")
@click.option("--kill-rate", type=click.FloatRange(0, 1), default=0.03, show_default=True, help="Chance of a broker kill at each step.")
@click.option("--pause-rate", type=click.FloatRange(0, 1), default=0.02, show_default=True)
@click.option("--cut-rate", type=click.FloatRange(0, 1), default=0.03, show_default=True)
@click.option("--cluster", "cluster_size", type=click.IntRange(min=1), metavar="N", help="Start N brokers of ours on one throwaway PostgreSQL database and run the nemesis against them (instead of --bootstrap/--broker-cmd/--proxy).")
@click.option("--postgres-bin", type=click.Path(exists=True, file_okay=False, path_type=Path), help="With --cluster: PostgreSQL's bin directory (default: found on PATH or under /usr/lib/postgresql).")
@click.option("--standby", is_flag=True, help="With --cluster: a synchronous streaming standby the nemesis fails over to once.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=Path), help="With --cluster: the brokers' and PostgreSQL's data and logs (default: a temporary directory, kept when the run fails).")
@click.option("--long-pause-rate", type=click.FloatRange(0, 1), default=0.004, show_default=True, help="With --cluster: chance of pausing a broker beyond its session timeout.")
@click.option("--postgres-restart-rate", type=click.FloatRange(0, 1), default=0.01, show_default=True, help="With --cluster: chance of pg_ctl restart (fast or immediate).")
@click.option("--failover-rate", type=click.FloatRange(0, 1), default=0.005, show_default=True, help="With --cluster --standby: chance of the (one) failover.")
@click.option("--every-fault", is_flag=True, help="With --cluster: force each enabled fault kind once in the first third of the run.")
@click.option("--idempotent/--no-idempotent", default=None, help="An idempotent producer on its own topic (default: with --cluster).")
@click.option("--stall-bound", type=click.FloatRange(min=0, min_open=True), default=STALL_BOUND_S, show_default=True, metavar="SECONDS", help="Liveness: the longest a healthy transactional producer may wait for its commit or abort.")
@click.option("--history", "history_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the run's history here (JSON).")
@click.option("--replay", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="Judge a saved history instead of running.")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON (also with the global --format json).")
@click.pass_context
def verify_eos(
    ctx: click.Context,
    bootstrap_opt: str | None,
    transactions: int,
    duration: float | None,
    producers: int,
    topics: int,
    partitions: int,
    client: str,
    seed: int | None,
    broker_cmd: str | None,
    proxy_listen: str | None,
    kill_rate: float,
    pause_rate: float,
    cut_rate: float,
    cluster_size: int | None,
    postgres_bin: Path | None,
    standby: bool,
    work_dir: Path | None,
    long_pause_rate: float,
    postgres_restart_rate: float,
    failover_rate: float,
    every_fault: bool,
    idempotent: bool | None,
    stall_bound: float,
    history_path: Path | None,
    replay: Path | None,
    as_json: bool,
) -> None:
    """Check a broker's exactly-once guarantees with real transactional clients under faults.

    Transactional producers (confluent-kafka, or kafka-python with --client) write self-describing records that commit or abort at
    random; producers are abandoned mid-transaction and re-initialised (a zombie then tries to
    commit); read_committed consumers (assign and subscribe) poll throughout; a
    consume-transform-produce stage (send_offsets_to_transaction) is killed and restarted; with --broker-cmd the
    broker is SIGKILLed and paused, with --proxy connections are cut. With --cluster N it starts N of our
    brokers on one PostgreSQL database (--standby: and a standby) and a seeded nemesis kills and pauses
    brokers (the controller, coordinators, leaders), cuts connections, restarts PostgreSQL and fails it
    over; an idempotent producer writes too. Then every record is read
    back and checked: lost writes, aborted reads, early reads, torn transactions, duplicates, wrong acks, order,
    non-monotonic reads, position jumps, lost idempotent writes, zombie writes, transform outputs, unexpected
    client errors, liveness (the longest wait for a commit, --stall-bound). Exit 1 when any check fails.

    \b
    Example:
      kproto verify-eos --bootstrap 127.0.0.1:9092 --transactions 300
      kproto verify-eos --bootstrap 127.0.0.1:9999 \\
          --broker-cmd 'kproto serve --listen 127.0.0.1:9999 --data-dir /tmp/eos-data'
      kproto verify-eos --cluster 3 --standby --duration 180 --seed 7
    """
    settings = ctx.find_root().obj
    bootstrap = str(bootstrap_opt or getattr(settings, "bootstrap", "localhost:9092"))
    json_out = as_json or getattr(settings, "output", "table") == "json"
    started = time.monotonic()
    if replay is not None:
        history = History.load(replay)
    else:
        try:
            import confluent_kafka  # noqa: F401

            if client == "kafka-python":
                import kafka  # noqa: F401
        except ImportError as exc:
            raise click.ClickException(f"verify-eos needs {exc.name}: pip install 'rivven_kproto[verify]'") from None
        plan = Plan(
            producers=producers, topics=topics, partitions=partitions, transactions=transactions,
            duration_s=duration, seed=seed if seed is not None else random.randrange(1 << 31),
            p_kill=kill_rate if broker_cmd else 0.0, p_pause=pause_rate if broker_cmd else 0.0,
            p_cut=cut_rate if proxy_listen else 0.0, client=client,
            idempotent=idempotent if idempotent is not None else cluster_size is not None,
            # A call still failing after the liveness bound has failed that check already: on a
            # cluster, give up then rather than after Plan's five minutes.
            retry_s=min(Plan.retry_s, stall_bound) if cluster_size is not None else Plan.retry_s,
        )
        if cluster_size is not None:
            if broker_cmd or proxy_listen:
                raise click.UsageError("--cluster starts its own brokers and proxies: no --broker-cmd or --proxy")
            rates = Rates(kill=kill_rate, pause=pause_rate, long_pause=long_pause_rate, cut=cut_rate,
                          postgres_restart=postgres_restart_rate, failover=failover_rate, every_kind=every_fault,
                          steps=schedule_steps(transactions, duration))
            history = _run_cluster(plan, rates, cluster_size, postgres_bin, standby, work_dir, stall_bound)
        else:
            history = _run_single(plan, bootstrap, broker_cmd, proxy_listen)
        if history_path is not None:
            history.save(history_path)
    findings = check(history, stall_bound)
    doc = summary(history, findings, time.monotonic() - started)
    click.echo(json.dumps(doc, indent=2, sort_keys=True) if json_out else table(doc))
    retired_exit(0 if doc["passed"] else 1)  # the clients' retired handles are never destroyed


def _progress(message: str) -> None:
    click.echo(f"verify-eos: {message}", err=True)


def _run_cluster(plan: Plan, rates: Rates, size: int, postgres_bin: Path | None, standby: bool,
                 work_dir: Path | None, stall_bound: float) -> History:
    """The workload against a cluster of ours under the nemesis; the work directory is removed
    after a passing run unless the caller named it."""
    base = work_dir or Path(tempfile.mkdtemp(prefix="verify-eos-cluster-"))
    cluster = Cluster(base, size, postgres_bin=postgres_bin, standby=standby)
    nemesis: Nemesis | None = None
    keep = True
    try:
        _progress(f"seed {plan.seed}; starting {size} brokers{' and a standby' if standby else ''} in {base}")
        cluster.start()
        nemesis = Nemesis(cluster, rates, plan.seed, _progress)
        history = run(plan, Means(cluster.bootstrap, nemesis=nemesis), _progress)
        keep = work_dir is not None or not passed(check(history, stall_bound))
        return history
    finally:
        if nemesis is not None:
            nemesis.close()
        cluster.close()
        if keep:
            _progress(f"brokers' and PostgreSQL's logs kept in {base}")
        else:
            cluster.remove_database_dir()
            shutil.rmtree(base, ignore_errors=True)


def _run_single(plan: Plan, bootstrap: str, broker_cmd: str | None, proxy_listen: str | None) -> History:
    """The workload against one broker (started from ``broker_cmd`` when given, behind a proxy)."""
    broker = BrokerCommand(broker_cmd, bootstrap) if broker_cmd else None
    proxy = None
    try:
        if broker is not None:
            broker.start()
        client_bootstrap = bootstrap
        if proxy_listen:
            proxy = CuttingProxy(proxy_listen, bootstrap)
            client_bootstrap = proxy.address
        click.echo(f"verify-eos: seed {plan.seed}", err=True)
        return run(plan, Means(client_bootstrap, broker, proxy), _progress)
    finally:
        if proxy is not None:
            proxy.close()
        if broker is not None:
            broker.close()
