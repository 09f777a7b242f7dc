"""Operational behaviour through real clients: fsync=always, idle connections, topic-level
recompression, ListOffsets by time, DeleteRecords and DescribeCluster."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rivven_kproto.codec.compression import Compression
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest
from rivven_kproto.codec.records.records import decode_batches

from . import raw_client
from .broker_process import BrokerProcess

TIMEOUT_S = 30


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - fixture
    """fsync=always and a short idle timeout, set through a server.properties file."""
    base = tmp_path_factory.mktemp("strict")
    props = base / "server.properties"
    props.write_text("connections.max.idle.ms=1000\nnum.partitions=2\n")
    broker = BrokerProcess(base / "data", base / "broker.log", ["--fsync", "always", "--config", str(props)]).start()
    yield broker
    broker.stop()


def create(broker: BrokerProcess, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    client.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(TIMEOUT_S)


def produce(broker: BrokerProcess, topic: str, values: list[bytes], timestamps: list[int] | None = None) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 20})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=0, timestamp=timestamps[i] if timestamps else 0)
    assert producer.flush(TIMEOUT_S) == 0


def test_fsync_always_acknowledges_after_flush(strict_broker: BrokerProcess, topic_name: str) -> None:
    create(strict_broker, topic_name)
    produce(strict_broker, topic_name, [f"d{i}".encode() for i in range(300)])
    # Acknowledged => fsynced: the partition's recovery point (written after each fsync) covers all.
    recovery_point = (strict_broker.data_dir / f"{topic_name}-0" / "recovery-point").read_text().split()
    assert int(recovery_point[-1]) == 300


def test_fsync_always_transactions_and_group_offsets_are_durable_when_answered(tmp_path: Path) -> None:
    """Under fsync=always a committed transaction is answered once its markers are fsynced (its
    partition's recovery point covers them) and its offsets survive kill -9 of the broker."""
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--fsync", "always"]).start()
    try:
        create(broker, "always-out")
        create(broker, "in")
        group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "always-group"})
        producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "always-txn", "linger.ms": 5})
        producer.init_transactions(TIMEOUT_S)
        for round_ in range(3):
            producer.begin_transaction()
            for index in range(5):
                producer.produce("always-out", f"r{round_}-{index}".encode(), partition=0)
            producer.send_offsets_to_transaction([TopicPartition("in", 0, 10 * (round_ + 1))],
                                                 group.consumer_group_metadata(), TIMEOUT_S)
            producer.commit_transaction(TIMEOUT_S)
            recovery_point = (broker.data_dir / "always-out-0" / "recovery-point").read_text().split()
            assert int(recovery_point[-1]) == 6 * (round_ + 1)  # 5 records and the COMMIT marker
        group.close()
        port = broker.port
        broker.kill()
        broker.start(port or 0)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "always-check",
                             "isolation.level": "read_committed", "enable.auto.commit": False})
        consumer.assign([TopicPartition("always-out", 0, 0)])
        got, deadline = [], time.monotonic() + TIMEOUT_S
        while len(got) < 15 and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, 1.0) if m.error() is None]
        committed = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "always-group"}).committed(
            [TopicPartition("in", 0)], TIMEOUT_S)
        consumer.close()
        assert got == [f"r{r}-{i}".encode() for r in range(3) for i in range(5)]
        assert committed[0].offset == 30
    finally:
        if broker.alive():
            broker.stop()


def test_idle_connections_are_closed(strict_broker: BrokerProcess) -> None:
    sock = raw_client.connect(strict_broker.bootstrap)
    assert raw_client.call(sock, ApiVersionsRequest(), 0).error_code == 0
    started = time.monotonic()
    assert raw_client.closed_by_peer(sock, timeout=10)
    assert time.monotonic() - started < 5
    assert "closing idle connection" in strict_broker.log_text()


def test_config_file_default_partitions(strict_broker: BrokerProcess, topic_name: str) -> None:
    client = AdminClient({"bootstrap.servers": strict_broker.bootstrap})
    client.create_topics([NewTopic(topic_name)])[topic_name].result(TIMEOUT_S)  # -1 partitions: the default
    assert len(client.list_topics(topic_name, timeout=TIMEOUT_S).topics[topic_name].partitions) == 2


def test_topic_compression_type_recompresses(broker: BrokerProcess, topic_name: str) -> None:
    create(broker, topic_name, config={"compression.type": "zstd"})
    values = [f"value-{i}".encode() * 20 for i in range(50)]
    produce(broker, topic_name, values)
    stored = b"".join(p.read_bytes() for p in sorted((broker.data_dir / f"{topic_name}-0").glob("*.log")))
    batches = decode_batches(stored)
    assert batches and {b.compression for b in batches} == {Compression.ZSTD}
    assert [r.value for b in batches for r in b.records] == values
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    got, deadline = [], time.monotonic() + TIMEOUT_S
    while len(got) < len(values) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == values


def test_list_offsets_by_time_and_bounds(broker: BrokerProcess, topic_name: str) -> None:
    create(broker, topic_name)
    base = 1_700_000_000_000
    produce(broker, topic_name, [f"t{i}".encode() for i in range(10)], [base + 1000 * i for i in range(10)])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        found = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 5500)], timeout=TIMEOUT_S)
        assert found[0].offset == 6  # the first record stamped at or after the time, inside one batch
        found = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 99_000)], timeout=TIMEOUT_S)
        assert found[0].offset == -1  # none: the end
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=TIMEOUT_S) == (0, 10)
    finally:
        consumer.close()


def test_delete_records_moves_log_start(broker: BrokerProcess, topic_name: str) -> None:
    create(broker, topic_name)
    produce(broker, topic_name, [f"r{i}".encode() for i in range(20)])
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = client.delete_records([TopicPartition(topic_name, 0, 7)], request_timeout=TIMEOUT_S)
    result = next(iter(futures.values())).result(TIMEOUT_S)
    assert result.low_watermark == 7
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=TIMEOUT_S) == (7, 20)
    finally:
        consumer.close()


def test_describe_cluster(broker: BrokerProcess) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    cluster = client.describe_cluster(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
    assert cluster.cluster_id
    assert [node.id for node in cluster.nodes] == [0]
    assert cluster.controller.id == 0
    # The cluster id is created once and kept in the data directory.
    assert cluster.cluster_id in (Path(broker.data_dir) / "meta" / "cluster.json").read_text()
