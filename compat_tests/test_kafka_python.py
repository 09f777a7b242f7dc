"""kafka-python against a real broker: admin operations and errors, produce/consume in every codec."""

from __future__ import annotations

import time

import kafka
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import InvalidReplicationFactorError, InvalidTopicError, TopicAlreadyExistsError

from .broker_process import BrokerProcess

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
TIMEOUT_S = 30


def admin(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)


def read_all(broker: BrokerProcess, topic: str, partitions: int, expected: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        got: list = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(records)
        return got
    finally:
        consumer.close()


def test_client_version() -> None:
    assert kafka.__version__


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_produce_consume_every_codec(broker: BrokerProcess, topic_name: str, codec: str | None) -> None:
    client = admin(broker)
    client.create_topics([NewTopic(topic_name, 3, 1)])
    client.close()
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, compression_type=codec, enable_idempotence=False, acks="all", linger_ms=5
    )
    sent = []
    for i in range(45):
        key = None if i % 6 == 0 else f"k{i}".encode()
        value = None if i % 4 == 2 and key is not None else f"value {i} ".encode() * (1 + i % 3)
        headers = [("idx", str(i).encode()), ("empty", b"")] if i % 2 else []
        partition, ts = i % 3, 1_700_000_000_000 + i
        producer.send(topic_name, key=key, value=value, headers=headers, partition=partition, timestamp_ms=ts)
        sent.append((partition, key, value, headers, ts))
    producer.flush(TIMEOUT_S)
    producer.close()

    got = read_all(broker, topic_name, 3, len(sent))
    assert len(got) == len(sent)
    for partition in range(3):
        expected = [s for s in sent if s[0] == partition]
        records = sorted((r for r in got if r.partition == partition), key=lambda r: r.offset)
        assert [r.offset for r in records] == list(range(len(expected)))
        assert [(r.key, r.value, list(r.headers), r.timestamp) for r in records] == [
            (key, value, headers, ts) for _, key, value, headers, ts in expected
        ]


def test_admin_operations(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker)
    try:
        client.create_topics([NewTopic(topic_name, 2, 1, topic_configs={"cleanup.policy": "delete"})])
        assert topic_name in client.list_topics()
        (described,) = client.describe_topics([topic_name])
        assert described["error_code"] == 0
        assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1]

        client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name, configs={"retention.ms": "60000"})])
        described_configs = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
        (by_name,) = described_configs.values()
        entries = by_name[topic_name]
        assert entries["retention.ms"]["value"] == "60000", entries
        assert entries["cleanup.policy"]["value"] == "delete"

        client.create_partitions({topic_name: NewPartitions(total_count=5)})
        (described,) = client.describe_topics([topic_name])
        assert len(described["partitions"]) == 5

        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        producer.send(topic_name, b"sized", partition=3).get(timeout=TIMEOUT_S)
        producer.close()
        (node,) = client.describe_log_dirs({topic_name: [3, 4, 99]})  # 99: not held, left out
        (log_dir,) = node["log_dirs"]
        assert (log_dir["error_code"], log_dir["log_dir"]) == (0, str(broker.data_dir.resolve()))
        assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
        (topic,) = log_dir["topics"]
        sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
        assert sizes[4] == 0 and sizes[3] > len(b"sized") and sorted(sizes) == [3, 4]
        client.delete_topics([topic_name])
        assert topic_name not in client.list_topics()
    finally:
        client.close()


def test_describe_topic_partitions_pages_with_a_cursor(broker: BrokerProcess, topic_name: str) -> None:
    """KIP-966 (DescribeTopicPartitions, API 75) through kafka-python's admin client."""
    client = admin(broker)
    try:
        client.create_topics([NewTopic(topic_name, 5, 1)])
        seen, cursor = [], None
        for _ in range(5):
            page = client.describe_topic_partitions([topic_name], response_partition_limit=2, cursor=cursor)
            (topic,) = page["topics"]
            assert topic["error_code"] == 0 and topic["name"] == topic_name
            seen += [(p["partition_index"], p["leader_id"], p["replica_nodes"]) for p in topic["partitions"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
            assert cursor["topic_name"] == topic_name
        assert seen == [(index, 0, [0]) for index in range(5)]  # node 0, the default node.id
        missing = client.describe_topic_partitions([topic_name + "-missing"])
        assert [t["error_code"] for t in missing["topics"]] == [3] and missing["next_cursor"] is None
    finally:
        client.close()


def test_admin_errors(broker: BrokerProcess, topic_name: str) -> None:
    client = admin(broker)
    try:
        client.create_topics([NewTopic(topic_name, 1, 1)])
        with pytest.raises(TopicAlreadyExistsError):
            client.create_topics([NewTopic(topic_name, 1, 1)])
        with pytest.raises(InvalidTopicError):
            client.create_topics([NewTopic("illegal name!", 1, 1)])
        with pytest.raises(InvalidReplicationFactorError):
            client.create_topics([NewTopic(topic_name + "-rf3", 1, 3)])
    finally:
        client.close()


def test_list_config_resources(broker: BrokerProcess, topic_name: str) -> None:
    """ListConfigResources (API 74, KIP-1142, Kafka 4.1) through kafka-python's admin client: every
    topic and the broker by default, one type when asked; v0's client-metrics listing is empty."""
    client = admin(broker)
    try:
        client.create_topics([NewTopic(topic_name, 1, 1)])
        listed = client.list_config_resources()
        assert topic_name in listed["topic"] and listed["broker"] == ["0"], listed
        assert set(listed) <= {"topic", "broker", "broker_logger", "group", "client_metrics"}, listed
        only_topics = client.list_config_resources(["TOPIC"])
        assert set(only_topics) == {"topic"} and topic_name in only_topics["topic"]
        assert client.list_config_resources(["CLIENT_METRICS"]) == {}
    finally:
        client.close()
