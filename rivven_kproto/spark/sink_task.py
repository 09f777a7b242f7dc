"""Executor side of the Kafka sink: one Spark task's rows to Kafka with confluent-kafka.

At least once (the default): an idempotent producer sends the task's rows and flushes; a failed
delivery fails the task, and Spark's retry sends every row of the task again.

Exactly once (``exactlyOnce=true``): the task's rows go out in one Kafka transaction whose
transactional id names the query (or batch job) and the Spark partition, so every attempt of the
same task shares it and ``init_transactions`` fences (aborts) the transaction of any earlier
attempt. In the same transaction the task commits, for the consumer group named like its
transactional id, offset ``batch id + 1`` on partition 0 of the topic it wrote (the metadata names
the batch): the record that this (micro-)batch of this task is done, atomic with the data. An
attempt first reads that group's committed offsets with ``require_stable`` (after its own
``init_transactions`` has ended any earlier attempt's transaction); when they already cover its
batch, a replay of a batch whose transaction committed, it writes nothing. A task with no rows
(an empty micro-batch) writes and commits nothing: a replay of it has nothing to duplicate, and
its target topic need not exist yet (the first rows auto-create it, as Kafka's producer does).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .sink_options import NULL_TOPIC, Columns, SinkOptions

log = logging.getLogger(__name__)

Headers = list[tuple[str, bytes | None]]
Record = tuple[str, bytes | None, bytes | None, int, Headers | None]
PARTITION_ANY = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner chooses
STABLE_RETRIES = 50  # OffsetFetch answers UNSTABLE_OFFSET_COMMIT while a transaction is ending
STABLE_BACKOFF_S = 0.1
CALL_RETRIES = 10  # transactional calls failing with a retriable error (coordinator moving, ...)


@dataclass(frozen=True)
class TaskScope:
    """Who is writing: the transactional id (also the marker's group) and the batch id."""

    transactional_id: str
    batch_id: int


@dataclass
class TaskResult:
    rows: int
    skipped: bool = False  # exactly once: this batch of this task had committed before


def _bytes(value: Any, is_string: bool) -> bytes | None:
    if value is None:
        return None
    if is_string:
        return str(value).encode()
    return bytes(value)


def _headers(value: Any) -> Headers | None:
    if not value:
        return None
    out: Headers = []
    for header in value:
        key, data = (header["key"], header["value"])
        out.append((key, None if data is None else bytes(data)))
    return out


def records(batches: Iterable[Any], cols: Columns, topic: str | None) -> Iterator[Record]:
    """Kafka records from Arrow record batches or Spark rows (whichever the writer is given)."""
    for batch in batches:
        if hasattr(batch, "num_columns"):  # pyarrow.RecordBatch: column at a time
            columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
            rows: Iterable[Any] = zip(*columns, strict=True) if columns else ()
        else:
            rows = (batch,)
        for row in rows:
            to = topic if topic is not None else (row[cols.topic] if cols.topic is not None else None)
            if to is None:
                raise ValueError(NULL_TOPIC)
            partition = row[cols.partition] if cols.partition is not None else None
            yield (
                to,
                _bytes(row[cols.key], cols.key_is_string) if cols.key is not None else None,
                _bytes(row[cols.value], cols.value_is_string),
                PARTITION_ANY if partition is None else partition,
                _headers(row[cols.headers]) if cols.headers is not None else None,
            )


class _Failures:
    """Delivery reports of failed records (only those: ``delivery.report.only.error``)."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")

    def check(self) -> None:
        if self.errors:
            raise RuntimeError(f"{len(self.errors)} record(s) failed to be delivered, first: {self.errors[0]}")


def _producer(options: SinkOptions, failures: _Failures, extra: dict[str, str]) -> Any:
    from confluent_kafka import Producer

    config: dict[str, Any] = {**options.producer_config(), **extra}
    config.update({"delivery.report.only.error": True, "on_delivery": failures})
    return Producer(config)


def _send(producer: Any, rows: Iterator[Record], failures: _Failures) -> tuple[int, str | None]:
    """Produce every record; returns how many and the first record's topic."""
    count = 0
    first_topic = None
    for topic, key, value, partition, headers in rows:
        if first_topic is None:
            first_topic = topic
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, headers=headers)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.05)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
            failures.check()
    return count, first_topic


def write_at_least_once(options: SinkOptions, rows: Iterator[Record]) -> TaskResult:
    failures = _Failures()
    producer = _producer(options, failures, {})
    count, _ = _send(producer, rows, failures)
    remaining = producer.flush(options.timeout_s)
    failures.check()
    if remaining:
        raise TimeoutError(f"{remaining} record(s) not delivered within {options.timeout_s} s (kafka.max.block.ms)")
    return TaskResult(count)


def _client_config(options: SinkOptions) -> dict[str, str]:
    """The connection settings of the producer, for the admin and consumer helpers."""
    return {k: v for k, v in options.producer_config().items()
            if k.startswith(("bootstrap.", "security.", "sasl.", "ssl.", "client.id"))}


def committed_batches(options: SinkOptions, group: str) -> int:
    """How many batches of this task are recorded as committed (0 when none): the largest offset
    the group holds, read stable (Kafka withholds offsets of a transaction still ending)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**_client_config(options), "log_level": 4})  # no notice of its teardown
    for _ in range(STABLE_RETRIES):
        future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], require_stable=True,
                                                   request_timeout=options.timeout_s)[group]
        try:
            answer = future.result()
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
                return 0
            if exc.args[0].retriable():
                time.sleep(STABLE_BACKOFF_S)
                continue
            raise
        partitions = answer.topic_partitions or []
        unstable = [tp for tp in partitions if tp.error is not None
                    and tp.error.code() == KafkaError.UNSTABLE_OFFSET_COMMIT]
        if not unstable:
            for tp in partitions:
                if tp.error is not None:
                    raise KafkaException(tp.error)
            return max((tp.offset for tp in partitions if tp.offset >= 0), default=0)
        time.sleep(STABLE_BACKOFF_S)
    raise TimeoutError(f"group {group}: offsets still unstable after {STABLE_RETRIES} reads")


def _retrying(call: Any, *args: Any) -> Any:
    """``call(*args)``, again while it fails with an error Kafka calls retriable (librdkafka's
    transactional API asks its caller to retry those)."""
    from confluent_kafka import KafkaException

    for attempt in range(CALL_RETRIES):
        try:
            return call(*args)
        except KafkaException as exc:
            error = exc.args[0]
            if not error.retriable() or attempt == CALL_RETRIES - 1:
                raise
            log.info("retrying %s after %s", getattr(call, "__name__", call), error)
            time.sleep(STABLE_BACKOFF_S * (attempt + 1))
    raise AssertionError("unreachable")


def _group_metadata(options: SinkOptions, group: str) -> Any:
    from confluent_kafka import Consumer

    consumer = Consumer({**_client_config(options), "group.id": group, "enable.auto.commit": False})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def _delivered(producer: Any, options: SinkOptions, failures: _Failures) -> None:
    """Flush the transaction's rows: a topic that did not exist is auto-created by the producer's
    Metadata request (as Kafka's producer does) while its rows wait, and the marker committed next
    on its partition 0 needs it to exist (Kafka answers UNKNOWN_TOPIC_OR_PARTITION otherwise)."""
    remaining = producer.flush(options.timeout_s)
    failures.check()
    if remaining:
        raise TimeoutError(f"{remaining} record(s) not delivered within {options.timeout_s} s (kafka.max.block.ms)")


def write_exactly_once(options: SinkOptions, scope: TaskScope, rows: Iterator[Record]) -> TaskResult:
    from confluent_kafka import TopicPartition

    failures = _Failures()
    producer = _producer(options, failures, {"transactional.id": scope.transactional_id,
                                             "enable.idempotence": "true"})
    _retrying(producer.init_transactions, options.timeout_s)  # fences earlier attempts
    group = scope.transactional_id
    done = committed_batches(options, group)
    if done > scope.batch_id:
        skipped = sum(1 for _ in rows)  # consume the input: the JVM side is still sending it
        log.info("%s: batch %d committed before (recorded %d); %d rows not written again",
                 group, scope.batch_id, done - 1, skipped)
        return TaskResult(0, skipped=True)
    producer.begin_transaction()
    try:
        count, topic = _send(producer, rows, failures)
        if count == 0 or topic is None:  # no rows: nothing to write, nothing a replay could duplicate
            producer.abort_transaction(options.timeout_s)
            return TaskResult(0)
        marker_topic = options.topic or topic
        _delivered(producer, options, failures)  # the marker's topic exists (auto-created) before its commit
        metadata = json.dumps({"batch": scope.batch_id, "rows": count})
        _retrying(producer.send_offsets_to_transaction,
                  [TopicPartition(marker_topic, 0, scope.batch_id + 1, metadata)], _group_metadata(options, group),
                  options.timeout_s)
        _retrying(producer.commit_transaction, options.timeout_s)
        failures.check()
    except BaseException:
        try:
            producer.abort_transaction(options.timeout_s)
        except Exception:  # noqa: BLE001 - the next attempt's init_transactions aborts it anyway
            log.warning("%s: abort after a failed batch %d failed", group, scope.batch_id, exc_info=True)
        raise
    return TaskResult(count)
