"""``kproto consume TOPIC``: print records from chosen positions, without a consumer group.

Each record is printed as it arrives: its value by default, ``--template`` for a line template
(``--format TEMPLATE`` still works when the value is not a global output format), or one JSON
object per line with the global ``--format json``. Like kafka-console-consumer and ``kcat -C`` it
follows the topic until interrupted; ``-e``/``--exit`` stops at the end of the partitions,
``-n`` after that many records, ``--idle-timeout`` after that long without a record. At the end
"Processed a total of N messages" goes to stderr, as Kafka's tool prints it. A null key or value
prints as ``null`` (as kafka-console-consumer); ``--print-binary hex|base64`` shows bytes exactly.
``--group`` makes it a member of that consumer group, as kafka-console-consumer's: the group's
members (of any Kafka client) share the topic's partitions and rebalance as members come and go;
each assigned partition starts at the group's committed offset (else where ``--from-beginning`` or
the end says), and what was printed is committed every few seconds, at each rebalance and at the
end (also at Ctrl-C), before the member leaves the group.
"""

from __future__ import annotations

import base64
import json
import signal
import sys
from collections.abc import Callable
from typing import Any, cast

import click
import trio

from rivven_kproto.client import KafkaClient
from rivven_kproto.client import groups as group_admin
from rivven_kproto.client.consumer import ConsumedRecord, Consumer, StartAt, ValueChunk
from rivven_kproto.client.membership import GroupMembership
from rivven_kproto.codec.enums import READ_COMMITTED, READ_UNCOMMITTED

from .kafka_spellings import topic_argument
from .output import run, settings, text

ISOLATION = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}
FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")


Render = Callable[[bytes | None], str | None]
BINARY: dict[str, Render] = {
    "text": text,
    "hex": lambda data: None if data is None else data.hex(),
    "base64": lambda data: None if data is None else base64.b64encode(data).decode(),
}
NULL = "null"  # kafka-console-consumer's rendering of a null key or value
AUTO_COMMIT_INTERVAL_S = 5.0  # Kafka's auto.commit.interval.ms


def record_json(record: ConsumedRecord, render: Render = text) -> dict[str, Any]:
    return {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": render(record.key),
        "value": render(record.value),
        "headers": [{"key": k, "value": render(v)} for k, v in record.headers],
    }


def format_record(template: str, record: ConsumedRecord, render: Render = text) -> str:
    """Fill ``template``'s {key} {value} {offset} {partition} {timestamp} {headers} {topic}."""
    headers = ",".join(f"{k}={_shown(render, v)}" for k, v in record.headers)
    return template.format(
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        timestamp=record.timestamp,
        key=_shown(render, record.key),
        value=_shown(render, record.value),
        headers=headers,
    )


NULL_BYTES = NULL.encode()


class _Output:
    """Records rendered since the last poll, written to stdout together.

    Plain values (the default text rendering) stay bytes and are decoded once per poll: decoding
    the joined values escapes undecodable bytes exactly as decoding each value would.
    """

    def __init__(self, raw_values: bool) -> None:
        self.raw_values = raw_values
        self.values: list[bytes | None] = []
        self.lines: list[str] = []

    def flush(self) -> int:
        """Write what is pending; how many records that was."""
        count = len(self.values) + len(self.lines)
        if not count:
            return 0
        if self.values:
            values: list[bytes] = (cast(list[bytes], self.values) if None not in self.values
                                   else [NULL_BYTES if v is None else v for v in self.values])
            text_out = b"\n".join(values).decode("utf-8", errors="backslashreplace")
            self.values.clear()
        else:
            text_out = "\n".join(self.lines)
            self.lines.clear()
        sys.stdout.write(text_out + "\n")
        sys.stdout.flush()
        return count


def _shown(render: Render, data: bytes | None) -> str:
    shown = render(data)
    return NULL if shown is None else shown


def check_template(template: str) -> str:
    """The template with ``\\t`` and ``\\n`` unescaped; a usage error if it names unknown fields."""
    template = template.replace("\\t", "\t").replace("\\n", "\n")
    try:
        format_record(template, ConsumedRecord("t", 0, 0, 0, b"", b"", []))
    except (KeyError, IndexError, ValueError) as exc:
        raise click.BadParameter(f"{exc} (fields: {', '.join('{' + f + '}' for f in FIELDS)})", param_hint="'--template'") from None
    return template


@click.command()
@topic_argument()
@click.option("--from-beginning", is_flag=True, help="Start at the log start (default: the end).")
@click.option("--offset", type=click.IntRange(min=0), help="Start at this offset in every chosen partition.")
@click.option("--partition", "partitions", type=click.IntRange(min=0), multiple=True, help="Read this partition (default all); repeatable.")
@click.option("--isolation", type=click.Choice(list(ISOLATION)), default="read_uncommitted", show_default=True)
@click.option("-n", "--count", "--max-messages", "count", type=click.IntRange(min=1),
              help="Exit after this many records (kafka-console-consumer's --max-messages).")
@click.option("-e", "--exit", "exit_at_end", is_flag=True, help="Exit at the end of the partitions (default: follow).")
@click.option("--template", metavar="TEMPLATE", help="Line template: {key} {value} {offset} {partition} {timestamp} {headers} {topic}.")
@click.option("--format", "old_template", metavar="TEMPLATE", hidden=True)
@click.option("--print-binary", "binary", type=click.Choice(list(BINARY)), default="text", show_default=True,
              help="How keys, values and header values are shown (text escapes undecodable bytes).")
@click.option("--idle-timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS", help="Exit when nothing arrives for this long.")
@click.option("--group", metavar="GROUP",
              help="Consume as a member of this consumer group: share its partitions, start at and commit its offsets.")
def consume(
    topic: str,
    from_beginning: bool,
    offset: int | None,
    partitions: tuple[int, ...],
    isolation: str,
    count: int | None,
    exit_at_end: bool,
    template: str | None,
    old_template: str | None,
    binary: str,
    idle_timeout: float | None,
    group: str | None,
) -> None:
    """Print records of a topic, following it until Ctrl-C (commits only with --group).

    \b
    Example:
      kproto consume demo --from-beginning -e --template '{offset} {key}={value} [{headers}]'
    """
    if from_beginning and offset is not None:
        raise click.UsageError("give at most one of --from-beginning and --offset")
    if template is not None and old_template is not None:
        raise click.UsageError("give at most one of --template and --format TEMPLATE")
    template = template if template is not None else old_template
    start: StartAt = offset if offset is not None else ("earliest" if from_beginning else "latest")
    offset_given = offset
    line_template = check_template(template) if template is not None else None
    as_json = settings().json
    render = BINARY[binary]
    delivered = 0
    consumed_to: dict[int, int] = {}  # the next offset after the last record shown, per partition
    # The bulk path (whole batches of values, see Consumer.run) prints plain values without -n.
    output = _Output(raw_values=line_template is None and not as_json and binary == "text" and count is None)

    def show(record: ConsumedRecord) -> None:
        if line_template is not None:
            output.lines.append(format_record(line_template, record, render))
        elif as_json:
            output.lines.append(json.dumps(record_json(record, render), sort_keys=True, separators=(",", ":")))
        else:
            output.lines.append(_shown(render, record.value))
        consumed_to[record.partition] = record.offset + 1

    def show_values(chunk: ValueChunk) -> None:
        """The bulk path (plain values): the consumer hands over a batch's values at a time."""
        partition, last_offset, values = chunk
        output.values.extend(values)
        consumed_to[partition] = last_offset + 1

    on_record: Callable[[Any], None] = show_values if output.raw_values else show

    def flush() -> None:
        """Print what the last poll delivered in one write (one syscall per fetch, not per record)."""
        nonlocal delivered
        delivered += output.flush()

    async def operation(client: KafkaClient) -> int:
        consumer = Consumer(client, topic, isolation_level=ISOLATION[isolation])
        await consumer.assign(list(partitions) or None, start)
        return await consumer.run(on_record, max_records=count, idle_timeout=idle_timeout, stop_at_end=exit_at_end,
                                  on_poll=flush, values=output.raw_values)

    async def as_member(client: KafkaClient) -> int:
        """Ctrl-C is taken as a signal, not a KeyboardInterrupt that could land inside the final
        commit: it cancels consuming, the member commits and leaves, then the command exits 130."""
        interrupted = False
        failure: Exception | None = None
        with trio.open_signal_receiver(signal.SIGINT) as interrupts:
            async with trio.open_nursery() as nursery:

                async def watch_interrupts() -> None:
                    nonlocal interrupted
                    async for _ in interrupts:
                        interrupted = True
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(watch_interrupts)
                try:
                    await _member_loop(client)
                except Exception as exc:  # noqa: BLE001 - re-raised below, outside the nursery's group
                    failure = exc
                nursery.cancel_scope.cancel()
        if failure is not None:
            raise failure
        if interrupted:
            raise KeyboardInterrupt
        return delivered

    async def _member_loop(client: KafkaClient) -> None:
        assert group is not None
        membership = GroupMembership(client, group, [topic])
        try:
            while count is None or delivered < count:
                generation = await membership.join()
                assigned = sorted(p for t, p in generation.partitions if t == topic)
                consumer = Consumer(client, topic, isolation_level=ISOLATION[isolation])
                await consumer.assign(assigned, start)
                committed = await group_admin.fetch_offsets(client, group, [(topic, p) for p in assigned])
                for (_, partition), position in committed.items():
                    if offset_given is None:
                        consumer.positions[partition] = position.offset
                consumed_to.clear()
                consumed_to.update(consumer.positions)
                if not await _consume_generation(consumer, membership):
                    break
        finally:
            with trio.CancelScope(shield=True):  # also at Ctrl-C: commit what was shown, then leave
                await membership.commit({(topic, p): o for p, o in consumed_to.items()})
                await membership.leave()

    async def _consume_generation(consumer: Consumer, membership: GroupMembership) -> bool:
        """Consume the assignment until a rebalance (True: rejoin) or the end (False)."""
        rebalanced = False
        async with trio.open_nursery() as nursery:

            async def heartbeat() -> None:
                nonlocal rebalanced
                await membership.heartbeat_until_rebalance()
                rebalanced = True
                nursery.cancel_scope.cancel()

            async def commit_periodically() -> None:
                last: dict[int, int] = {}
                while True:
                    await trio.sleep(AUTO_COMMIT_INTERVAL_S)
                    if consumed_to != last:
                        last = dict(consumed_to)
                        await membership.commit({(topic, p): o for p, o in last.items()})

            nursery.start_soon(heartbeat)
            nursery.start_soon(commit_periodically)
            if consumer.positions:
                remaining = None if count is None else count - delivered
                await consumer.run(on_record, max_records=remaining, idle_timeout=idle_timeout, stop_at_end=exit_at_end,
                                   on_poll=flush, values=output.raw_values)
            elif not exit_at_end:  # no partition for this member (more members than partitions): wait
                await trio.sleep_forever()
            nursery.cancel_scope.cancel()
        if rebalanced:
            await membership.commit({(topic, p): o for p, o in consumed_to.items()})
        return rebalanced

    try:
        run(operation if group is None else as_member)
    except KeyboardInterrupt:  # the usual way to stop following: still say how many
        click.echo(f"Processed a total of {delivered} messages", err=True)
        raise
    click.echo(f"Processed a total of {delivered} messages", err=True)
