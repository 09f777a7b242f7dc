"""``kproto consume TOPIC``: print records from chosen positions, without a consumer group.

Each record is printed as it arrives: its value by default, ``--format`` for a template, or one
JSON object per line with the global ``--format json``. The command ends after ``-n`` records or
once nothing new has arrived for ``--idle-timeout`` seconds.
"""

from __future__ import annotations

import json
from typing import Any

import click

from rivven_kproto.client import KafkaClient
from rivven_kproto.client.admin import READ_COMMITTED, READ_UNCOMMITTED
from rivven_kproto.client.consumer import ConsumedRecord, Consumer, StartAt

from .output import run, settings, text

ISOLATION = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")


def record_json(record: ConsumedRecord) -> dict[str, Any]:
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": text(record.key),
        "value": text(record.value),
        "headers": [{"key": k, "value": text(v)} for k, v in record.headers],
    }


def format_record(template: str, record: ConsumedRecord) -> str:
    """Fill ``template``'s {key} {value} {offset} {partition} {timestamp} {headers} {topic}."""
    headers = ",".join(f"{k}={text(v) if v is not None else ''}" for k, v in record.headers)
    return template.format(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        timestamp=record.timestamp,
        key=text(record.key) or "",
        value=text(record.value) or "",
        headers=headers,
    )


def check_template(template: str) -> str:
    """The template with ``\\t`` and ``\\n`` unescaped; a usage error if it names unknown fields."""
    template = template.replace("\\t", "\t").replace("\\n", "\n")
    try:
        format_record(template, ConsumedRecord("t", 0, 0, 0, b"", b"", []))
    except (KeyError, IndexError, ValueError) as exc:
        raise click.BadParameter(f"{exc} (fields: {', '.join('{' + f + '}' for f in FIELDS)})", param_hint="'--format'") from None
    return template


@click.command()
@click.argument("topic")
@click.option("--from-beginning", is_flag=True, help="Start at the log start (default: the end).")
@click.option("--offset", type=click.IntRange(min=0), help="Start at this offset in every chosen partition.")
@click.option("--partition", "partitions", type=click.IntRange(min=0), multiple=True, help="Read this partition (default all); repeatable.")
@click.option("--isolation", type=click.Choice(list(ISOLATION)), default="read_uncommitted", show_default=True)
@click.option("-n", "--count", type=click.IntRange(min=1), help="Exit after this many records.")
@click.option("--format", "template", metavar="TEMPLATE", help="Line template: {key} {value} {offset} {partition} {timestamp} {headers} {topic}.")
@click.option("--idle-timeout", type=click.FloatRange(min=0), default=5.0, show_default=True, metavar="SECONDS", help="Exit when nothing arrives for this long.")
def consume(
    topic: str,
    from_beginning: bool,
    offset: int | None,
    partitions: tuple[int, ...],
    isolation: str,
    count: int | None,
    template: str | None,
    idle_timeout: float,
) -> None:
    """Print records of a topic (no consumer group; nothing is committed).

    \b
    Example:
      kproto consume demo --from-beginning -n 10 --format '{offset} {key}={value} [{headers}]'
    """
    if from_beginning and offset is not None:
        raise click.UsageError("give at most one of --from-beginning and --offset")
    start: StartAt = offset if offset is not None else ("earliest" if from_beginning else "latest")
    line_template = check_template(template) if template is not None else None
    as_json = settings().json

    def show(record: ConsumedRecord) -> None:
        if line_template is not None:
            click.echo(format_record(line_template, record))
        elif as_json:
            click.echo(json.dumps(record_json(record), sort_keys=True, separators=(",", ":")))
        else:
            click.echo(text(record.value) or "")

    async def operation(client: KafkaClient) -> int:
        consumer = Consumer(client, topic, isolation_level=ISOLATION[isolation])
        await consumer.assign(list(partitions) or None, start)
        return await consumer.run(show, max_records=count, idle_timeout=idle_timeout)

    run(operation)
