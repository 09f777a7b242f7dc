"""Issue #22: a topic of 10,000 partitions on a broker whose open-files limit is 4,096.

Partitions hold no descriptors of their own: segment files share a cache of an eighth of the
limit (``broker/log/descriptor_cache.py``), indexes live in memory until a flush writes them. The
broker must accept the topic, take one acknowledged message on every partition from
confluent-kafka, serve all of them back, and serve them again after a restart (every partition
flushed, its file synced by path when the cache had closed it, and loaded again from its
indexes), never holding more segment files open than the cache and a flush's duplicates of its
files allow. Recovery after ``kill -9`` with files the cache closed is covered by
``tests/broker/test_descriptor_cache.py`` and ``test_durability.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .broker_process import BrokerProcess

PARTITIONS = 10_000
OPEN_FILES_LIMIT = 4096
# The cache's capacity (descriptors.LOG_FILES_FRACTION: an eighth) and the duplicates a flush
# round in progress holds of those files (as many again).
LOG_FILES_ALLOWED = 2 * (OPEN_FILES_LIMIT // 8)
TOPIC = "wide"
DELIVERY_TIMEOUT_S = 300.0
CREATE_TIMEOUT_S = 300.0
RESTART_TIMEOUT_S = 600.0  # a few fsyncs per partition at shutdown and start, on a shared disk  # 10,000 directories and files on a disk other test runs share
POLLS = 600  # consume() calls of at most 1 s each while reading everything back


def open_segment_files(broker: BrokerProcess) -> int:
    """How many ``.log`` segment files the broker process holds open now."""
    assert broker.process is not None
    fd_dir = Path(f"/proc/{broker.process.pid}/fd")
    count = 0
    for entry in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / entry)
        except FileNotFoundError:
            continue
        if target.startswith(str(broker.data_dir)) and target.endswith(".log") and "/meta/" not in target:
            count += 1
    return count


def create_wide_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(CREATE_TIMEOUT_S * 1000)})
    futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)], request_timeout=CREATE_TIMEOUT_S,
                                  operation_timeout=CREATE_TIMEOUT_S)
    futures[TOPIC].result(CREATE_TIMEOUT_S)


def produce_one_each(bootstrap: str) -> None:
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            errors.append(error)

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 50,
        "queue.buffering.max.messages": PARTITIONS * 2, "message.timeout.ms": int(DELIVERY_TIMEOUT_S * 1000),
    })
    for partition in range(PARTITIONS):
        producer.produce(TOPIC, value=b"v%d" % partition, partition=partition, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(DELIVERY_TIMEOUT_S) == 0
    assert errors == []


def read_all(bootstrap: str) -> dict[int, list[tuple[int, bytes]]]:
    """Every partition's (offset, value) pairs, read from offset 0 by assignment."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
        "enable.partition.eof": False,
    })
    got: dict[int, list[tuple[int, bytes]]] = {}
    total = 0
    try:
        consumer.assign([TopicPartition(TOPIC, partition, 0) for partition in range(PARTITIONS)])
        for _ in range(POLLS):
            for message in consumer.consume(num_messages=2000, timeout=1.0):
                assert message.error() is None, message.error()
                got.setdefault(message.partition(), []).append((message.offset(), message.value()))
                total += 1
            if total >= PARTITIONS:
                break
    finally:
        consumer.close()
    return got


def expected() -> dict[int, list[tuple[int, bytes]]]:
    return {partition: [(0, b"v%d" % partition)] for partition in range(PARTITIONS)}


def test_ten_thousand_partitions_under_an_open_files_limit_of_4096(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", open_files_limit=OPEN_FILES_LIMIT)
    broker.start()
    try:
        create_wide_topic(broker.bootstrap)
        assert len(list((tmp_path / "data").glob(f"{TOPIC}-*"))) == PARTITIONS
        assert 0 < open_segment_files(broker) <= LOG_FILES_ALLOWED
        produce_one_each(broker.bootstrap)
        assert open_segment_files(broker) <= LOG_FILES_ALLOWED
        assert read_all(broker.bootstrap) == expected()
        port = broker.port
        assert broker.stop(RESTART_TIMEOUT_S) == 0  # clean: every partition flushes, writes its indexes
        broker.start(port or 0, timeout=RESTART_TIMEOUT_S)  # and loads from them
        assert read_all(broker.bootstrap) == expected()
        assert open_segment_files(broker) <= LOG_FILES_ALLOWED
        text = broker.log_text()
        assert "Traceback" not in text and "rebuilding the indexes" not in text
        assert "out of descriptors" not in text
    finally:
        if broker.alive():
            broker.kill()
