"""``kproto topics list|describe|create|delete|add-partitions``."""

from __future__ import annotations

from typing import Any

import click

from rivven_kproto.client import KafkaClient, admin

from .kafka_spellings import topic_argument, topics_argument
from .output import emit, parse_assignments, plural, run, table


@click.group()
def topics() -> None:
    """List, describe, create, delete and grow topics.

    \b
    Example:
      kproto topics create demo --partitions 3 --config retention.ms=86400000
    """


@topics.command("list")
def list_() -> None:
    """Every topic with its partition count.

    \b
    Example:
      kproto --format json topics list
    """
    result = run(admin.list_topics)
    data = {
        "topics": [
            {"name": t.name, "partitions": len(t.partitions), "internal": t.internal, "topic_id": t.topic_id}
            for t in result
        ]
    }
    emit(data, lambda: table(None, ["topic", "partitions", "internal"], [[t.name, len(t.partitions), t.internal] for t in result]))


def _partition_json(partition: Any, offsets: admin.PartitionOffsets) -> dict[str, Any]:
    return {
        "partition": partition.partition,
        "leader": partition.leader,
        "leader_epoch": partition.leader_epoch,
        "replicas": partition.replicas,
        "isr": partition.isr,
        "offline_replicas": partition.offline_replicas,
        "log_start_offset": offsets.log_start_offset,
        "high_watermark": offsets.high_watermark,
        "last_stable_offset": offsets.last_stable_offset,
        "size_bytes": offsets.size_bytes,
    }


@topics.command()
@topics_argument()
def describe(names: tuple[str, ...]) -> None:
    """Partitions with leader, replicas, ISR and offsets (log start, high watermark, last stable).

    Size is the partition's bytes on disk (DescribeLogDirs; n/a without Describe on the cluster).

    \b
    Example:
      kproto topics describe demo
    """

    async def operation(client: KafkaClient) -> list[admin.TopicDescription]:
        return await admin.describe_topics(client, list(names))

    result = run(operation)
    data = {
        "topics": [
            {
                "name": d.topic.name,
                "topic_id": d.topic.topic_id,
                "internal": d.topic.internal,
                "partitions": [
                    _partition_json(p, d.offsets.get(p.partition, admin.PartitionOffsets())) for p in d.topic.partitions
                ],
            }
            for d in result
        ]
    }

    def render() -> list[Any]:
        columns = ["partition", "leader", "replicas", "isr", "log start", "high watermark", "last stable", "size"]
        tables = []
        for d in result:
            rows = []
            for p in d.topic.partitions:
                o = d.offsets.get(p.partition, admin.PartitionOffsets())
                rows.append(
                    [p.partition, p.leader, _ids(p.replicas), _ids(p.isr), o.log_start_offset, o.high_watermark, o.last_stable_offset, o.size_bytes]
                )
            tables.append(table(f"{d.topic.name} ({plural(len(d.topic.partitions), 'partition')})", columns, rows))
        return tables

    emit(data, render)


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


@topics.command()
@topic_argument("name")
@click.option("--partitions", type=click.IntRange(min=1), default=None, help="Partition count (default: the broker's num.partitions).")
@click.option("--replication-factor", type=click.IntRange(min=1), default=None, help="Replicas per partition (default: the broker's).")
@click.option("--config", "config_items", multiple=True, metavar="KEY=VALUE", help="Topic config; repeatable.")
def create(name: str, partitions: int | None, replication_factor: int | None, config_items: tuple[str, ...]) -> None:
    """Create a topic.

    \b
    Example:
      kproto topics create demo --partitions 3 --replication-factor 1 --config cleanup.policy=compact
    """
    configs = parse_assignments(config_items, "'--config'")

    async def operation(client: KafkaClient) -> admin.CreatedTopic:
        count = -1 if partitions is None else partitions
        factor = -1 if replication_factor is None else replication_factor
        return await admin.create_topic(client, name, count, factor, configs)

    created = run(operation)
    data = {
        "topic": created.name,
        "topic_id": created.topic_id,
        "partitions": created.partitions,
        "replication_factor": created.replication_factor,
        "configs": configs,
    }
    emit(data, lambda: f"created topic {created.name} ({plural(created.partitions, 'partition')}, replication factor {created.replication_factor})")


@topics.command()
@topics_argument()
def delete(names: tuple[str, ...]) -> None:
    """Delete topics and their data.

    \b
    Example:
      kproto topics delete demo old-demo
    """

    async def operation(client: KafkaClient) -> list[str]:
        return await admin.delete_topics(client, list(names))

    deleted = run(operation)
    emit({"deleted": deleted}, lambda: "deleted " + ", ".join(deleted))


@topics.command("add-partitions")
@topic_argument("name")
@click.option("--total", "--partitions", "total", type=click.IntRange(min=1), help="The new partition count (kafka-topics' --partitions).")
@click.option("--add", "extra", type=click.IntRange(min=1), help="How many partitions to add.")
def add_partitions(name: str, total: int | None, extra: int | None) -> None:
    """Grow a topic to more partitions (existing keys may then map elsewhere).

    \b
    Example:
      kproto topics add-partitions demo --total 6
    """
    if (total is None) == (extra is None):
        raise click.UsageError("give exactly one of --total and --add")

    async def operation(client: KafkaClient) -> int:
        target = total
        if target is None:
            assert extra is not None
            target = len((await client.topic(name)).partitions) + extra
        return await admin.create_partitions(client, name, target)

    count = run(operation)
    emit({"topic": name, "partitions": count}, lambda: f"topic {name} now has {plural(count, 'partition')}")
