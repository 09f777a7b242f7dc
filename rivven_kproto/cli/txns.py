"""``kproto txns list|describe|abort|find-hanging`` and ``kproto producers describe`` (KIP-664).

The verbs of Kafka's ``kafka-transactions.sh``: the coordinators' view of transactional ids,
the partition leaders' view of active producers, and the way out of a hanging transaction (an
open transaction no coordinator will complete, which stops read_committed consumers at the
partition's last stable offset): find it, then abort it on the partition.
"""

from __future__ import annotations

import time
from typing import Any

import click

from rivven_kproto.client import ClientError, KafkaClient, UnsupportedApiError
from rivven_kproto.client import transactions as txn_admin
from rivven_kproto.client.transactions import ActiveProducer, OpenTransaction, TransactionDescription
from rivven_kproto.codec.errors import Errors

from .output import emit, run, table

# Kafka's default transaction.max.timeout.ms: an open transaction idle longer than any
# transaction may run is a candidate (kafka-transactions.sh's --max-transaction-timeout).
DEFAULT_MAX_AGE_MS = 15 * 60 * 1000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@click.group()
def txns() -> None:
    """List, describe and abort transactions; find hanging ones.

    \b
    Example:
      kproto txns find-hanging --topic orders --max-age-ms 60000
    """


@txns.command("list")
@click.option("--state", "states", multiple=True, type=click.Choice(txn_admin.STATES, case_sensitive=False), help="Only this state; repeatable.")
@click.option("--producer-id", "producer_ids", multiple=True, type=click.IntRange(min=0), metavar="ID", help="Only this producer id; repeatable.")
@click.option("--min-duration-ms", type=click.IntRange(min=0), metavar="MS", help="Only transactions ongoing for at least this long (ListTransactions v1).")
def list_(states: tuple[str, ...], producer_ids: tuple[int, ...], min_duration_ms: int | None) -> None:
    """Transactional ids known to the coordinators, with producer id and state.

    \b
    Example:
      kproto --format json txns list --state Ongoing --min-duration-ms 60000
    """

    async def operation(client: KafkaClient) -> list[txn_admin.ListedTransaction]:
        return await txn_admin.list_transactions(client, list(states), list(producer_ids), min_duration_ms)

    listed = run(operation)
    data = {
        "transactions": [
            {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "state": t.state, "coordinator": t.coordinator}
            for t in listed
        ]
    }
    rows = [[t.transactional_id, t.coordinator, t.producer_id, t.state] for t in listed]
    emit(data, lambda: table(None, ["transactional id", "coordinator", "producer id", "state"], rows))


def _description_json(d: TransactionDescription, now_ms: int) -> dict[str, Any]:
    return {
        "transactional_id": d.transactional_id,
        "coordinator": d.coordinator,
        "state": d.state,
        "producer_id": d.producer_id,
        "producer_epoch": d.producer_epoch,
        "timeout_ms": d.timeout_ms,
        "start_time_ms": d.start_time_ms,
        "duration_ms": None if d.start_time_ms is None else max(0, now_ms - d.start_time_ms),
        "partitions": [{"topic": t, "partition": p} for t, p in d.partitions],
    }


@txns.command()
@click.argument("transactional_ids", nargs=-1, required=True, metavar="TRANSACTIONAL_ID...")
def describe(transactional_ids: tuple[str, ...]) -> None:
    """State, producer id and epoch, timeout, start time and partitions of transactional ids.

    \b
    Example:
      kproto txns describe payments-writer-1
    """

    async def operation(client: KafkaClient) -> list[TransactionDescription]:
        return await txn_admin.describe_transactions(client, list(transactional_ids))

    described = run(operation)
    now_ms = _now_ms()
    data = {"transactions": [_description_json(d, now_ms) for d in described]}

    def render() -> Any:
        columns = ["transactional id", "coordinator", "producer id", "epoch", "state", "timeout ms", "start time ms", "duration ms", "partitions"]
        rows = []
        for item in data["transactions"]:
            partitions = ",".join(f"{p['topic']}-{p['partition']}" for p in item["partitions"])
            rows.append([item["transactional_id"], item["coordinator"], item["producer_id"], item["producer_epoch"], item["state"],
                         item["timeout_ms"], item["start_time_ms"], item["duration_ms"], partitions or "-"])
        return table(None, columns, rows)

    emit(data, render)


@txns.command()
@click.option("--topic", required=True, help="The partition's topic.")
@click.option("--partition", required=True, type=click.IntRange(min=0), help="The partition holding the open transaction.")
@click.option("--start-offset", type=click.IntRange(min=0), metavar="OFFSET", help="Abort the transaction that starts at this offset.")
@click.option("--producer-id", type=click.IntRange(min=0), metavar="ID", help="Abort this producer's transaction (with --producer-epoch).")
@click.option("--producer-epoch", type=click.IntRange(min=0, max=32767), metavar="EPOCH", help="The producer's current epoch.")
@click.option("--coordinator-epoch", type=click.IntRange(min=0), metavar="EPOCH", help="Default: the partition's record of it, else 0.")
def abort(
    topic: str,
    partition: int,
    start_offset: int | None,
    producer_id: int | None,
    producer_epoch: int | None,
    coordinator_epoch: int | None,
) -> None:
    """Abort an open transaction on one partition (a WriteTxnMarkers ABORT to its leader).

    With --start-offset the producer is found with DescribeProducers. Meant for hanging
    transactions: a live producer's coordinator still believes its transaction is open.

    \b
    Example:
      kproto txns abort --topic orders --partition 3 --start-offset 1200
    """
    by_producer = producer_id is not None or producer_epoch is not None
    if (start_offset is not None) == by_producer or (by_producer and (producer_id is None or producer_epoch is None)):
        raise click.UsageError("give either --start-offset, or --producer-id with --producer-epoch")

    async def operation(client: KafkaClient) -> tuple[int, int, int]:
        pid, epoch, coordinator = producer_id, producer_epoch, coordinator_epoch
        if start_offset is not None:
            found = await txn_admin.find_open_transaction(client, topic, partition, start_offset)
            pid, epoch = found.producer_id, found.producer_epoch
            if coordinator is None:
                coordinator = max(found.coordinator_epoch, 0)
        else:
            assert pid is not None
            known = await _open_producer(client, topic, partition, pid)
            if coordinator is None:
                coordinator = 0 if known is None else max(known.coordinator_epoch, 0)
        assert pid is not None and epoch is not None
        await txn_admin.abort_transaction(client, topic, partition, pid, epoch, coordinator)
        return pid, epoch, coordinator

    pid, epoch, coordinator = run(operation)
    data = {
        "topic": topic,
        "partition": partition,
        "producer_id": pid,
        "producer_epoch": epoch,
        "coordinator_epoch": coordinator,
        "start_offset": start_offset,
        "aborted": True,
    }
    emit(data, lambda: f"aborted the transaction of producer {pid} (epoch {epoch}) on {topic}-{partition}")


async def _open_producer(client: KafkaClient, topic: str, partition: int, producer_id: int) -> ActiveProducer | None:
    """The producer as DescribeProducers lists it (None if the broker lacks that API); fails when it
    has no open transaction there, since an ABORT marker would then end nothing."""
    try:
        listed = (await txn_admin.describe_producers(client, topic, [partition]))[partition]
    except UnsupportedApiError:
        return None
    found = next((p for p in listed if p.producer_id == producer_id), None)
    if found is None or found.current_txn_start_offset is None:
        raise ClientError(Errors.INVALID_TXN_STATE, f"producer {producer_id} has no open transaction on {topic}-{partition}")
    return found


def _open_json(item: OpenTransaction) -> dict[str, Any]:
    p = item.producer
    return {
        "topic": item.topic,
        "partition": item.partition,
        "producer_id": p.producer_id,
        "producer_epoch": p.producer_epoch,
        "coordinator_epoch": p.coordinator_epoch,
        "start_offset": p.current_txn_start_offset,
        "last_timestamp": p.last_timestamp,
        "age_ms": item.age_ms,
        "transactional_id": item.transactional_id,
        "hanging": item.hanging,
        "reason": item.reason,
    }


@txns.command("find-hanging")
@click.option("--topic", "topics", multiple=True, metavar="NAME", help="Search this topic; repeatable (default: every topic).")
@click.option("--max-age-ms", type=click.IntRange(min=0), metavar="MS",
              help=f"Only open transactions whose producer wrote nothing for this long (default {DEFAULT_MAX_AGE_MS}; 0 with --all).")
@click.option("--all", "show_all", is_flag=True, help="Every open transaction, also those their coordinator still tracks.")
def find_hanging(topics: tuple[str, ...], max_age_ms: int | None, show_all: bool) -> None:
    """Open transactions no coordinator will complete (DescribeProducers + the coordinators).

    An open transaction older than --max-age-ms is hanging when its producer id maps to no
    transactional id, or that id's transaction is not Ongoing, has another epoch, or lacks the
    partition. Abort what is found with 'kproto txns abort'.

    \b
    Example:
      kproto txns find-hanging --topic orders --max-age-ms 900000
    """

    if max_age_ms is None:
        max_age_ms = 0 if show_all else DEFAULT_MAX_AGE_MS

    async def operation(client: KafkaClient) -> list[OpenTransaction]:
        names = list(topics)
        if not names:
            metadata = await client.metadata(None)
            names = sorted(name for name, info in metadata.topics.items() if not info.internal and not info.error)
        return await txn_admin.find_hanging(client, names, max_age_ms, _now_ms())

    found = [item for item in run(operation) if show_all or item.hanging]
    data = {"max_age_ms": max_age_ms, "transactions": [_open_json(item) for item in found]}
    columns = ["topic", "partition", "producer id", "epoch", "start offset", "age ms", "transactional id", "hanging", "reason"]
    rows = [
        [i.topic, i.partition, i.producer.producer_id, i.producer.producer_epoch, i.producer.current_txn_start_offset, i.age_ms,
         i.transactional_id or "-", "yes" if i.hanging else "no", i.reason]
        for i in found
    ]
    emit(data, lambda: table("open transactions" if show_all else "hanging transactions", columns, rows))


def producer_json(p: ActiveProducer) -> dict[str, Any]:
    return {
        "producer_id": p.producer_id,
        "producer_epoch": p.producer_epoch,
        "last_sequence": p.last_sequence,
        "last_timestamp": p.last_timestamp,
        "coordinator_epoch": p.coordinator_epoch,
        "current_txn_start_offset": p.current_txn_start_offset,
    }


@click.group()
def producers() -> None:
    """Inspect the producers a partition knows (idempotent and transactional).

    \b
    Example:
      kproto producers describe orders 0
    """


@producers.command("describe")
@click.argument("topic")
@click.argument("partition", type=click.IntRange(min=0))
def describe_producers(topic: str, partition: int) -> None:
    """Active producers of a partition: id, epoch, last sequence and timestamp, open transaction start.

    \b
    Example:
      kproto --format json producers describe orders 0
    """

    async def operation(client: KafkaClient) -> list[ActiveProducer]:
        return (await txn_admin.describe_producers(client, topic, [partition]))[partition]

    listed = run(operation)
    data = {"topic": topic, "partition": partition, "producers": [producer_json(p) for p in listed]}
    columns = ["producer id", "epoch", "last sequence", "last timestamp", "coordinator epoch", "open txn start offset"]
    rows = [[p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp, p.coordinator_epoch,
             "-" if p.current_txn_start_offset is None else p.current_txn_start_offset]
            for p in listed]
    emit(data, lambda: table(f"{topic}-{partition}", columns, rows))


STATS = (("started", "rivven_transactions_started_total"), ("committed", "rivven_transactions_committed_total"),
         ("aborted", "rivven_transactions_aborted_total"), ("timed_out", "rivven_transactions_timed_out_total"),
         ("active", "rivven_transactions_active"))
ACTIVE_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")


@txns.command("stats")
@click.option("--metrics-url", metavar="URL", help="The broker's metrics endpoint (http://HOST:PORT[/metrics]); "
              "without it, the states ListTransactions reports (no counters).")
def stats(metrics_url: str | None) -> None:
    """The transaction coordinator's counters: started, committed, aborted, timed out, active.

    \b
    Example:
      kproto txns stats --metrics-url http://127.0.0.1:9404
    """
    if metrics_url:
        values = _scrape(metrics_url)
        data: dict[str, Any] = {"source": "metrics", **{key: int(values.get(name, 0)) for key, name in STATS}}
    else:

        async def operation(client: KafkaClient) -> list[txn_admin.ListedTransaction]:
            return await txn_admin.list_transactions(client, [], [], None)

        listed = run(operation)
        by_state: dict[str, int] = {}
        for transaction in listed:
            by_state[transaction.state] = by_state.get(transaction.state, 0) + 1
        data = {"source": "ListTransactions", **{key: None for key, _ in STATS},
                "active": sum(by_state.get(state, 0) for state in ACTIVE_STATES), "by_state": by_state}
    rows = [[key, "-" if data[key] is None else data[key]] for key, _ in STATS]
    emit(data, lambda: table(f"transactions (from {data['source']})", ["counter", "value"], rows))


def _scrape(url: str) -> dict[str, float]:
    """Sample values by name from a Prometheus endpoint (unlabelled samples only)."""
    import urllib.error
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    if not url.rstrip("/").endswith("/metrics"):
        url = url.rstrip("/") + "/metrics"
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            text = answer.read().decode()
    except (urllib.error.URLError, OSError) as exc:
        raise click.ClickException(f"cannot read {url}: {getattr(exc, 'reason', exc)}") from None
    return {sample.name: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if not sample.labels}
