"""An exactly-once consume-transform-produce application, run as a subprocess by ``test_eos.py``.

    python eos_app.py CLIENT BOOTSTRAP IN_TOPIC OUT_TOPIC GROUP TRANSACTIONAL_ID [BATCH]

CLIENT is ``confluent-kafka``, ``confluent-kafka-consumer-protocol`` (the same with
``group.protocol=consumer``, KIP-848: the broker sets session and heartbeat times) or
``kafka-python``. The application subscribes to IN_TOPIC with
consumer group GROUP (read_committed, no auto-commit) and, in transactions of up to BATCH records,
writes ``transform(value)`` of each record to the same partition of OUT_TOPIC and commits the
consumed offsets with ``send_offsets_to_transaction`` (TxnOffsetCommit with the consumer's group
metadata, KIP-447). It is written to be killed at any instruction: the test SIGKILLs it, restarts
it with the same transactional id (fencing the dead instance and aborting its open transaction),
and checks that every input record's transform is in the output exactly once.

An abortable error aborts the transaction and rewinds the consumer to the committed offsets; a
fatal one exits with status 3 (the test restarts the application). Progress goes to stdout as JSON
lines; SIGTERM stops it between transactions; it never runs longer than ``MAX_LIFETIME_S``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

MAX_LIFETIME_S = 300
TIMEOUT_S = 30
TXN_TIMEOUT_MS = 10_000
SESSION_TIMEOUT_MS = 3_000

stopping = False


def transform(value: bytes) -> bytes:
    return b"out-" + value


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "pid": os.getpid(), "t": round(time.time(), 3), **fields}), flush=True)


def _stop(signum: int, frame: Any) -> None:
    global stopping
    stopping = True


@contextlib.contextmanager
def watchdog(what: str, limit_s: float = 2 * TIMEOUT_S + 10) -> Iterator[None]:
    """A client call that outlives its own timeout by far is hung: exit, as a supervisor would
    restart a stuck application (the transaction stays open and is aborted by the next instance)."""
    def expire() -> None:
        emit("hung", call=what)
        os._exit(4)

    timer = threading.Timer(limit_s, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def run_confluent(bootstrap: str, in_topic: str, out_topic: str, group: str, txn_id: str, batch: int,
                  *, consumer_protocol: bool = False) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "transaction.timeout.ms": TXN_TIMEOUT_MS,
        "linger.ms": 5,
        # librdkafka 2.16 re-bootstraps when its only broker restarts and decommissions the old
        # broker handle, which may stay cached as the group coordinator: send_offsets_to_transaction
        # then hangs past its timeout (confluentinc/librdkafka#5511). Stay with the known broker.
        "metadata.recovery.strategy": "none",
        **({"debug": os.environ["EOS_DEBUG"]} if os.environ.get("EOS_DEBUG") else {}),
    })
    producer.init_transactions(TIMEOUT_S)  # fences the previous instance and aborts what it left open
    emit("initialized")
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        **({"group.protocol": "consumer"} if consumer_protocol
           else {"session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 300}),
        "metadata.recovery.strategy": "none",
    })
    consumer.subscribe([in_topic], on_assign=lambda c, ps: emit("assigned", partitions=[p.partition for p in ps]),
                       on_revoke=lambda c, ps: emit("revoked", partitions=[p.partition for p in ps]))

    def rewind() -> None:
        assignment = consumer.assignment()
        if not assignment:
            return
        for tp in consumer.committed(assignment, TIMEOUT_S):
            consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))

    deadline = time.monotonic() + MAX_LIFETIME_S
    while not stopping and time.monotonic() < deadline:
        messages = [m for m in consumer.consume(batch, 0.5) if m.error() is None]
        if not messages:
            continue
        positions: dict[int, int] = {}
        producer.begin_transaction()
        try:
            for m in messages:
                producer.produce(out_topic, key=m.key(), value=transform(m.value()), partition=m.partition())
                positions[m.partition()] = m.offset() + 1
            offsets = [TopicPartition(in_topic, p, o) for p, o in sorted(positions.items())]
            with watchdog("send_offsets_to_transaction"):
                producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), TIMEOUT_S)
            with watchdog("commit_transaction"):
                _commit_confluent(producer, KafkaException)
        except KafkaException as exc:
            error = exc.args[0]
            if error.fatal() or not error.txn_requires_abort():
                raise
            emit("abort", error=str(error))
            with watchdog("abort_transaction"):
                producer.abort_transaction(TIMEOUT_S)
            rewind()
            continue
        emit("committed", records=len(messages), offsets=positions)
    consumer.close()


def _commit_confluent(producer: Any, kafka_exception: type[Exception]) -> None:
    for _ in range(10):
        try:
            producer.commit_transaction(TIMEOUT_S)
            return
        except kafka_exception as exc:
            error = exc.args[0]
            if not error.retriable() or error.txn_requires_abort():
                raise
            emit("retry-commit", error=str(error))
    raise RuntimeError("commit_transaction kept failing with retriable errors")


def run_kafka_python(bootstrap: str, in_topic: str, out_topic: str, group: str, txn_id: str, batch: int) -> None:
    import kafka.errors
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    if os.environ.get("EOS_DEBUG"):
        import logging

        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id,
                             transaction_timeout_ms=TXN_TIMEOUT_MS, linger_ms=5)
    producer.init_transactions()
    emit("initialized")
    consumer = KafkaConsumer(
        in_topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
        auto_offset_reset="earliest", isolation_level="read_committed",
        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=300,
    )

    def rewind() -> None:
        for tp in consumer.assignment():
            committed = consumer.committed(tp)
            consumer.seek(tp, committed if committed is not None else 0)

    deadline = time.monotonic() + MAX_LIFETIME_S
    while not stopping and time.monotonic() < deadline:
        polled = consumer.poll(timeout_ms=500, max_records=batch)
        if not polled:
            continue
        positions: dict[int, int] = {}
        count = 0
        producer.begin_transaction()
        try:
            for tp, messages in polled.items():
                for m in messages:
                    producer.send(out_topic, key=m.key, value=transform(m.value), partition=tp.partition)
                    positions[tp.partition] = m.offset + 1
                    count += 1
            offsets = {TopicPartition(in_topic, p): OffsetAndMetadata(o, "", -1) for p, o in positions.items()}
            # kafka-python 3.0.12 waits without a timeout here, and its sender drops a transactional
            # request whose coordinator connection fails in await_ready (no retry is enqueued), so
            # a broker restart at the wrong moment leaves the call waiting for good: the watchdog
            # plays the supervisor that restarts a stuck application.
            with watchdog("send_offsets_to_transaction"):
                producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            with watchdog("commit_transaction"):
                producer.commit_transaction()
        except kafka.errors.KafkaError as exc:
            if isinstance(exc, kafka.errors.ProducerFencedError | kafka.errors.IllegalStateError):
                raise
            emit("abort", error=repr(exc))
            with watchdog("abort_transaction"):
                producer.abort_transaction()
            rewind()
            continue
        emit("committed", records=count, offsets=positions)
    consumer.close()


def main() -> int:
    client, bootstrap, in_topic, out_topic, group, txn_id = sys.argv[1:7]
    batch = int(sys.argv[7]) if len(sys.argv) > 7 else 100
    signal.signal(signal.SIGTERM, _stop)
    faulthandler.register(signal.SIGUSR1)  # the test dumps our stacks to stderr when we seem stuck
    run = {
        "confluent-kafka": run_confluent,
        "confluent-kafka-consumer-protocol": functools.partial(run_confluent, consumer_protocol=True),
        "kafka-python": run_kafka_python,
    }[client]
    emit("starting", client=client)
    try:
        run(bootstrap, in_topic, out_topic, group, txn_id, batch)
    except Exception as exc:  # noqa: BLE001 - reported, and the test restarts us
        emit("fatal", error=repr(exc))
        return 3
    emit("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
