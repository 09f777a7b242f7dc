"""confluent-kafka (librdkafka) against a real broker: admin, produce/consume in every codec, long-poll."""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from rivven_kproto.broker.log.native_engine import DELETED_SUFFIX
from rivven_kproto.codec.errors import Errors

from .broker_process import BrokerProcess
from .txn_helpers import wait_for

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TIMEOUT_S = 30


def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(broker: BrokerProcess, name: str, partitions: int = 3, config: dict[str, str] | None = None) -> None:
    client = admin(broker)  # keep the handle alive until the future resolves
    futures = client.create_topics([NewTopic(name, partitions, 1, config=config or {})], request_timeout=TIMEOUT_S)
    futures[name].result(TIMEOUT_S)


def produce(broker: BrokerProcess, topic: str, messages: list[dict], **config: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **config})
    errors: list[str] = []

    def on_delivery(err, msg) -> None:  # noqa: ANN001 - librdkafka callback
        if err is not None:
            errors.append(str(err))

    for message in messages:
        producer.produce(topic, on_delivery=on_delivery, **message)
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == []


def consume_all(broker: BrokerProcess, topic: str, partitions: int, expected: int, **config: str) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused-with-assign",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **config,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
    finally:
        consumer.close()
    return got


def make_messages(count: int, partitions: int) -> list[dict]:
    base_ts = 1_700_000_000_000
    messages = []
    for i in range(count):
        messages.append(
            {
                "key": None if i % 7 == 0 else f"key-{i}".encode(),
                "value": None if i % 5 == 0 else f"value-{i}-".encode() * (i % 4 + 1),
                "partition": i % partitions,
                "headers": [("h1", f"v{i}".encode()), ("empty", b""), ("nullval", None)] if i % 3 else None,
                "timestamp": base_ts + i,
            }
        )
    return messages


def test_version_reported() -> None:
    version, _ = confluent_kafka.libversion()
    assert version


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(broker: BrokerProcess, topic_name: str, codec: str) -> None:
    create_topic(broker, topic_name, partitions=3)
    messages = make_messages(60, 3)
    produce(broker, topic_name, messages, **{"compression.type": codec})
    got = consume_all(broker, topic_name, 3, len(messages))
    assert len(got) == len(messages)
    by_partition: dict[int, list] = {0: [], 1: [], 2: []}
    for msg in got:
        by_partition[msg.partition()].append(msg)
    for partition, msgs in by_partition.items():
        sent = [m for m in messages if m["partition"] == partition]
        assert [m.offset() for m in msgs] == list(range(len(sent)))
        for want, msg in zip(sent, msgs, strict=True):
            assert msg.key() == want["key"]
            assert msg.value() == want["value"]
            assert msg.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, want["timestamp"])
            expected_headers = want["headers"]
            assert msg.headers() == (list(expected_headers) if expected_headers else None)


def test_admin_create_describe_alter_partitions_delete(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker)
    create_topic(broker, topic_name, partitions=2, config={"retention.ms": "3600000"})
    metadata = client.list_topics(timeout=TIMEOUT_S)
    assert topic_name in metadata.topics
    assert sorted(metadata.topics[topic_name].partitions) == [0, 1]
    assert metadata.topics[topic_name].partitions[0].leader == 0

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    configs = client.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"

    altered = ConfigResource(ConfigResource.Type.TOPIC, topic_name, set_config={"retention.ms": "7200000"})
    client.alter_configs([altered])[altered].result(TIMEOUT_S)
    configs = client.describe_configs([resource])[resource].result(TIMEOUT_S)
    assert configs["retention.ms"].value == "7200000"

    client.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(TIMEOUT_S)
    assert len(client.list_topics(topic_name, timeout=TIMEOUT_S).topics[topic_name].partitions) == 4

    client.delete_topics([topic_name], operation_timeout=TIMEOUT_S)[topic_name].result(TIMEOUT_S)
    assert topic_name not in client.list_topics(timeout=TIMEOUT_S).topics


def _admin_error(broker: BrokerProcess, topic: NewTopic) -> int:
    client = admin(broker)
    future = client.create_topics([topic], request_timeout=TIMEOUT_S)[topic.topic]
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT_S)
    return info.value.args[0].code()


def test_admin_errors(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker, topic_name, partitions=1)
    assert _admin_error(broker, NewTopic(topic_name, 1, 1)) == Errors.TOPIC_ALREADY_EXISTS
    assert _admin_error(broker, NewTopic("bad/name", 1, 1)) == Errors.INVALID_TOPIC_EXCEPTION
    assert _admin_error(broker, NewTopic(topic_name + "-rf3", 1, 3)) == Errors.INVALID_REPLICATION_FACTOR
    assert _admin_error(broker, NewTopic(topic_name + "-p0", 0, 1)) == Errors.INVALID_PARTITIONS


def test_long_poll_wakes_on_produce(broker: BrokerProcess, topic_name: str) -> None:
    """A consumer blocked in Fetch receives a message produced 1 s later well within fetch.wait.max.ms."""
    create_topic(broker, topic_name, partitions=1)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "fetch.wait.max.ms": 10_000,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    try:
        assert consumer.poll(1.0) is None  # nothing yet; the fetch is now parked at the broker
        produced_at = time.monotonic()
        produce(broker, topic_name, [{"value": b"wake up", "partition": 0}])
        msg = None
        while msg is None and time.monotonic() - produced_at < 8:
            msg = consumer.poll(0.2)
        latency = time.monotonic() - produced_at
    finally:
        consumer.close()
    assert msg is not None and msg.value() == b"wake up"
    assert latency < 3.0, f"long-poll answered after {latency:.2f}s, fetch.wait.max.ms is 10s"


def test_incremental_alter_configs_reports_kafka_41_sources(broker: BrokerProcess, topic_name: str) -> None:
    """confluent-kafka's own test_incremental_alter_configs against Kafka 4.1 (#42): the non-default
    entries of a topic include the cluster-level min.insync.replicas Kafka 4.1's controller writes
    (KIP-966), sourced DYNAMIC_DEFAULT_BROKER_CONFIG with its synonyms."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    first, second = f"{topic_name}-1", f"{topic_name}-2"
    futures = admin.create_topics([NewTopic(t, 2, 1, config={"compression.type": "gzip"}) for t in (first, second)])
    for future in futures.values():
        future.result(TIMEOUT_S)
    res1 = ConfigResource("TOPIC", first, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("retention.ms", "10000", incremental_operation=AlterConfigOpType.SET)])
    res2 = ConfigResource("TOPIC", second, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT),
        ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([res1, res2]).values():
        assert future.result(TIMEOUT_S) is None
    described = {res.name: future.result(TIMEOUT_S) for res, future in admin.describe_configs([res1, res2]).items()}
    changed = {name: sorted(str(e) for e in entries.values() if not e.is_default) for name, entries in described.items()}
    assert changed == {
        first: ['cleanup.policy="delete,compact"', 'compression.type="gzip"', 'min.insync.replicas="1"',
                'retention.ms="10000"'],
        second: ['cleanup.policy=""', 'compression.type="gzip"', 'min.insync.replicas="1"', 'retention.ms="5000"'],
    }
    entry = described[first]["min.insync.replicas"]
    assert entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert list(entry.synonyms) == ["min.insync.replicas"]  # (keyed by name: the chain's names)


def test_delete_records_then_delete_topic_at_once_logs_no_error(broker: BrokerProcess, topic_name: str) -> None:
    """DeleteRecords followed within milliseconds by DeleteTopics (#42, as confluent-kafka's
    test_delete_records does it): the log-start checkpoints of the deleted partitions are dropped
    quietly, no ERROR or traceback in the broker's log."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(TIMEOUT_S)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(30):
        producer.produce(topic_name, f"v{i}".encode(), partition=i % 3)
    assert producer.flush(TIMEOUT_S) == 0
    logged_before = len(broker.log_text())
    for _ in range(3):  # the race is the point: repeat it
        for future in admin.delete_records([TopicPartition(topic_name, p, 5) for p in range(3)]).values():
            future.result(TIMEOUT_S)
        admin.delete_topics([topic_name])[topic_name].result(TIMEOUT_S)
        assert wait_for(lambda: topic_name not in admin.list_topics(timeout=TIMEOUT_S).topics, TIMEOUT_S)
        admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(TIMEOUT_S)
        for i in range(30):
            producer.produce(topic_name, f"v{i}".encode(), partition=i % 3)
        assert producer.flush(TIMEOUT_S) == 0
    # The deleted directories are removed by the same queue after the deleted partitions' jobs.
    assert wait_for(lambda: not any(p.name.endswith(DELETED_SUFFIX) for p in broker.data_dir.iterdir()), TIMEOUT_S)
    logged = broker.log_text()[logged_before:]
    assert "Traceback" not in logged and " ERROR " not in logged, logged[-3000:]
