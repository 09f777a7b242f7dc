"""``kproto produce TOPIC``: one record per stdin line, acks=all, optionally in one transaction.

Stdin is read in chunks as they become available (a pipe gives large chunks, a terminal one line
at a time), and each chunk's complete lines are sent before the next read, so interactive use
sees each line acknowledged and a large file is sent in big batches.

With ``--transactional-id`` every line goes into one transaction, committed at the end of input
(or aborted with ``--abort``, when a send fails, at Ctrl-C, which exits 130, or at SIGTERM, 143). The summary goes
to stderr (stdout stays clean for pipes), or to stdout as JSON with ``--format json``. The hidden ``--exit-without-end-txn`` leaves
the transaction open, as a producer that vanished mid-transaction would: the tests use it to
make a transaction that blocks read_committed consumers until it times out or is aborted.
"""

from __future__ import annotations

import os
import select
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO

import click
import trio
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from rivven_kproto.client import ClientError, KafkaClient
from rivven_kproto.client.producer import Producer, ProducerRecord
from rivven_kproto.client.transactional import DEFAULT_TRANSACTION_TIMEOUT_MS, Transaction
from rivven_kproto.codec.compression import Compression
from rivven_kproto.codec.errors import Errors

from .kafka_spellings import topic_argument
from .output import emit_json, error_console, parse_assignments, plural, run, settings, table

READ_CHUNK = 1 << 20
COMPRESSIONS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY, "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


def split_lines(pending: bytes, data: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines (without ``\\n``) from ``pending + data``, and the incomplete rest."""
    *lines, rest = (pending + data).split(b"\n")
    return lines, rest


def parse_line(line: bytes, key_sep: bytes | None) -> tuple[bytes | None, bytes]:
    """(key, value) of one line; ValueError when a key separator is expected but missing."""
    line = line.removesuffix(b"\r")
    if key_sep is None:
        return None, line
    key, sep, value = line.partition(key_sep)
    if not sep:
        raise ValueError("no key separator")
    return key, value


@dataclass
class PartitionTotals:
    first_offset: int
    last_offset: int
    records: int


def _read_some(stream: BinaryIO) -> bytes:
    """Unbuffered read of what is available: a thread abandoned in it at Ctrl-C holds no buffer lock
    (a buffered read would abort the interpreter at exit: "_enter_buffered_busy").

    A pipe hands over at most its buffer (64 KiB) a read: what is already waiting is read on, up
    to READ_CHUNK, so a piped file is sent in large batches rather than one request per 64 KiB.
    """
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests pass BytesIO)
        read1 = getattr(stream, "read1", None)
        return read1(READ_CHUNK) if read1 is not None else stream.read(READ_CHUNK)
    data = os.read(descriptor, READ_CHUNK)
    if not data:
        return data
    chunks, size = [data], len(data)
    while size < READ_CHUNK and select.select([descriptor], [], [], 0)[0]:
        more = os.read(descriptor, READ_CHUNK - size)
        if not more:
            break  # end of input: the next read says so
        chunks.append(more)
        size += len(more)
    return b"".join(chunks) if len(chunks) > 1 else data


@click.command()
@topic_argument()
@click.option("--key-sep", metavar="SEP", help="Split each line at the first SEP into key and value.")
@click.option("--header", "header_items", multiple=True, metavar="KEY=VALUE", help="Header on every record; repeatable.")
@click.option("--partition", type=click.IntRange(min=0), help="Write to this partition (default: by key, else one per chunk).")
@click.option("--compression", type=click.Choice(list(COMPRESSIONS)), default="none", show_default=True)
@click.option("--acks", type=click.Choice(["0", "1", "all", "-1"]), default="all", show_default=True,
              help="Kafka's acks: 0 (no answer, offsets unknown), 1 or all.")
@click.option("--transactional-id", metavar="ID", help="Write every line in one transaction of this transactional id.")
@click.option("--transaction-timeout-ms", type=click.IntRange(min=1), default=DEFAULT_TRANSACTION_TIMEOUT_MS, show_default=True,
              metavar="MS", help="With --transactional-id: abort the transaction if it is not ended within this time.")
@click.option("--abort", "abort_txn", is_flag=True, help="With --transactional-id: abort the transaction instead of committing it.")
@click.option("--exit-without-end-txn", "leave_open", is_flag=True, hidden=True)
def produce(
    topic: str,
    key_sep: str | None,
    header_items: tuple[str, ...],
    partition: int | None,
    compression: str,
    acks: str,
    transactional_id: str | None,
    transaction_timeout_ms: int,
    abort_txn: bool,
    leave_open: bool,
) -> None:
    """Send each line of stdin as a record (acks=all), optionally as one transaction.

    \b
    Example:
      printf 'k1:hello\\nk2:world\\n' | kproto produce demo --key-sep : --header source=cli
      printf 'a\\nb\\n' | kproto produce demo --transactional-id demo-writer
    """
    if key_sep == "":
        raise click.BadParameter("must not be empty", param_hint="'--key-sep'")
    if transactional_id == "":
        raise click.BadParameter("must not be empty", param_hint="'--transactional-id'")
    if (abort_txn or leave_open) and transactional_id is None:
        raise click.UsageError(f"{'--abort' if abort_txn else '--exit-without-end-txn'} needs --transactional-id")
    if transactional_id is not None and acks != "all" and acks != "-1":
        raise click.UsageError("--transactional-id needs --acks all (as Kafka's transactional producers)")
    if abort_txn and leave_open:
        raise click.UsageError("give at most one of --abort and --exit-without-end-txn")
    headers: list[tuple[str, bytes | None]] = [
        (k, v.encode()) for k, v in parse_assignments(header_items, "'--header'").items()
    ]
    separator = key_sep.encode() if key_sep is not None else None
    stdin = sys.stdin.buffer

    transaction: Transaction | None = None
    outcome: str | None = None
    written_with: tuple[int, int, bool] | None = None  # the records' producer id and epoch, V2 or not

    async def operation(client: KafkaClient) -> dict[int, PartitionTotals]:
        nonlocal transaction, outcome, written_with
        if transactional_id is not None:
            transaction = Transaction(client, transactional_id, transaction_timeout_ms)
            await transaction.init()
        producer = Producer(
            client, topic, compression=COMPRESSIONS[compression], transaction=transaction,
            acks=-1 if acks in ("all", "-1") else int(acks),
        )
        totals: dict[int, PartitionTotals] = {}
        interrupted: int | None = None  # the signal that stopped the send
        failure: Exception | None = None
        # Ctrl-C and SIGTERM (a service manager, ``timeout``, ``kill``) are taken as signals here,
        # not as a KeyboardInterrupt that could land anywhere (even inside the abort below): they
        # cancel the send, the transaction is aborted, exit 130 (Ctrl-C) or 143 (128 + SIGTERM).
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as interrupts:
            async with trio.open_nursery() as nursery:

                async def watch_interrupts() -> None:
                    nonlocal interrupted
                    async for signum in interrupts:
                        interrupted = signum
                        nursery.cancel_scope.cancel()
                        return

                nursery.start_soon(watch_interrupts)
                try:
                    with _progress(stdin) as on_sent:
                        totals = await _send_stdin(producer, stdin, separator, key_sep, headers, partition, on_sent)
                except Exception as exc:  # noqa: BLE001 - re-raised below, outside the nursery's group
                    failure = exc
                nursery.cancel_scope.cancel()
        # A failed send or Ctrl-C (also when input ended at that moment): abort, never commit.
        if (failure is not None or interrupted is not None) and transaction is not None and not leave_open:
            await _abort(transaction)
        if failure is not None:
            raise failure
        if interrupted == signal.SIGTERM:
            sys.exit(128 + signal.SIGTERM)
        if interrupted is not None:
            raise KeyboardInterrupt
        if transaction is not None:
            if leave_open:
                outcome = "open"
            else:
                written_with = (transaction.producer_id, transaction.producer_epoch, transaction.v2)
                ended = await transaction.end(commit=not abort_txn)
                outcome = ("aborted" if abort_txn else "committed") if ended else "empty"
        return totals

    totals = run(operation)
    count = sum(t.records for t in totals.values())
    txn_json = None
    if transaction is not None:
        # The producer id and epoch the records were written with: with transactions V2 the end
        # bumped the epoch (KIP-890 part 2); "next_producer_epoch" is the one a next transaction
        # of this session would have used.
        pid, epoch, v2 = written_with or (transaction.producer_id, transaction.producer_epoch, transaction.v2)
        txn_json = {
            "transactional_id": transaction.transactional_id,
            "producer_id": pid,
            "producer_epoch": epoch,
            "result": outcome,
            "transaction_version": 2 if v2 else 1,
            "next_producer_id": transaction.producer_id,
            "next_producer_epoch": transaction.producer_epoch,
        }
    data = {
        "topic": topic,
        "records": count,
        "partitions": [
            {"partition": p, "first_offset": t.first_offset, "last_offset": t.last_offset, "records": t.records}
            for p, t in sorted(totals.items())
        ],
        "transaction": txn_json,
    }
    rows = [[p, t.records, t.first_offset, t.last_offset] for p, t in sorted(totals.items())]
    title = f"{plural(count, 'record')} to {topic}"
    if txn_json is not None:
        title += f" (transaction {transactional_id}: {outcome})"
    if settings().json:
        emit_json(data)
    else:  # stdout stays clean for pipes, as with kafka-console-producer: the summary goes to stderr
        error_console().print(table(title, ["partition", "records", "first offset", "last offset"], rows))


@contextmanager
def _progress(stdin: BinaryIO) -> Iterator[Callable[[int], None]]:
    """A live count of records sent on a terminal's stderr while a file or pipe is sent; nothing otherwise."""
    if not sys.stderr.isatty() or _is_terminal(stdin):
        yield lambda count: None
        return
    columns = (SpinnerColumn(), TextColumn("{task.completed:,.0f} records sent"), TimeElapsedColumn())
    with Progress(*columns, console=error_console(), transient=True) as progress:
        task = progress.add_task("produce", total=None)
        yield lambda count: progress.advance(task, count)


def _is_terminal(stream: BinaryIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


async def _abort(transaction: Transaction) -> None:
    with trio.CancelScope(shield=True):
        try:
            await transaction.end(commit=False)
        except ClientError:
            pass  # the coordinator aborts it at its timeout


async def _send_stdin(
    producer: Producer,
    stdin: BinaryIO,
    separator: bytes | None,
    key_sep: str | None,
    headers: list[tuple[str, bytes | None]],
    partition: int | None,
    on_sent: Callable[[int], None] = lambda count: None,
) -> dict[int, PartitionTotals]:
    """Send stdin's lines until end of input; per-partition totals of what was written."""
    totals: dict[int, PartitionTotals] = {}
    pending = b""
    line_number = 0
    while True:
        data = await trio.to_thread.run_sync(_read_some, stdin, abandon_on_cancel=True)
        carriage_returns = b"\r" in data or b"\r" in pending  # (CRLF lines: rare, so looked for once)
        if data:
            lines, pending = split_lines(pending, data)
        else:
            lines, pending = ([pending] if pending else []), b""
        if separator is None:  # the bulk path: values only, no per-line objects beyond the Record
            values = [line.removesuffix(b"\r") for line in lines] if carriage_returns else lines
            line_number += len(values)
            results = await producer.send_values(values, headers, partition)
        else:
            records = []
            for line in lines:
                line_number += 1
                try:
                    key, value = parse_line(line, separator)
                except ValueError:
                    raise ClientError(Errors.INVALID_RECORD, f"line {line_number} has no key separator {key_sep!r}") from None
                records.append(ProducerRecord(value, key=key, headers=headers, partition=partition))
            results = await producer.send(records)
        on_sent(len(lines))
        for result in results:
            seen = totals.get(result.partition)
            if seen is None:
                totals[result.partition] = PartitionTotals(result.base_offset, result.last_offset, result.count)
            else:
                seen.last_offset = max(seen.last_offset, result.last_offset)
                seen.records += result.count
        if not data:
            return totals
