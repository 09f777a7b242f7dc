"""``kproto verify-eos``: run the exactly-once workload against any Kafka-compatible broker and judge it."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import click

from rivven_kproto.verify.checker import check
from rivven_kproto.verify.clients import CLIENTS
from rivven_kproto.verify.faults import BrokerCommand, CuttingProxy
from rivven_kproto.verify.history import History
from rivven_kproto.verify.report import summary, table
from rivven_kproto.verify.workload import Means, Plan, run


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
    history_path: Path | None,
    replay: Path | None,
    as_json: bool,
) -> None:
    """Check a broker's exactly-once guarantees with real transactional clients under faults.

    Transactional producers (confluent-kafka, or kafka-python with --client) write self-describing records that commit or abort at
    random; producers are abandoned mid-transaction and re-initialised (a zombie then tries to
    commit); read_committed consumers (assign and subscribe) poll throughout; a
    consume-transform-produce stage (send_offsets_to_transaction) is killed and restarted; with --broker-cmd the
    broker is SIGKILLed and paused, with --proxy connections are cut. Then every record is read
    back and checked: lost writes, aborted reads, early reads, torn transactions, duplicates, wrong acks, order,
    non-monotonic reads, zombie writes, transform outputs, unexpected client errors. Exit 1 when any check fails.

    \b
    Example:
      kproto verify-eos --bootstrap 127.0.0.1:9092 --transactions 300
      kproto verify-eos --bootstrap 127.0.0.1:9999 \\
          --broker-cmd 'kproto serve --listen 127.0.0.1:9999 --data-dir /tmp/eos-data'
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
        )
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
            history = run(plan, Means(client_bootstrap, broker, proxy), lambda m: click.echo(f"verify-eos: {m}", err=True))
        finally:
            if proxy is not None:
                proxy.close()
            if broker is not None:
                broker.close()
        if history_path is not None:
            history.save(history_path)
    findings = check(history)
    doc = summary(history, findings, time.monotonic() - started)
    click.echo(json.dumps(doc, indent=2, sort_keys=True) if json_out else table(doc))
    sys.exit(0 if doc["passed"] else 1)
