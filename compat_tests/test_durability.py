"""Nothing acknowledged is lost: clean restart, SIGKILL mid-stream, garbage at the tail of a segment."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .broker_process import BrokerProcess

TIMEOUT_S = 30


@pytest.fixture
def own_broker(tmp_path: Path):  # noqa: ANN201 - fixture
    process = BrokerProcess(tmp_path / "data", tmp_path / "broker.log").start()
    yield process
    process.kill()


def create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT_S)


def read_values(broker: BrokerProcess, topic: str, partitions: int, expected: int) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    offsets: dict[int, list[int]] = {p: [] for p in range(partitions)}
    count, deadline, idle_since = 0, time.monotonic() + TIMEOUT_S, time.monotonic()
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.3)
            if msg is None:
                if count >= expected and time.monotonic() - idle_since > 1.5:
                    break
                continue
            assert msg.error() is None, msg.error()
            idle_since = time.monotonic()
            values[msg.partition()].append(msg.value())
            offsets[msg.partition()].append(msg.offset())
            count += 1
    finally:
        consumer.close()
    for partition, seen in offsets.items():
        assert seen == list(range(len(seen))), f"offsets of partition {partition} are not contiguous"
    return values


def test_restart_keeps_everything(own_broker: BrokerProcess) -> None:
    create(own_broker, "restart", 2)
    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "acks": "all", "linger.ms": 2})
    for i in range(500):
        producer.produce("restart", value=f"m{i}".encode(), partition=i % 2)
    assert producer.flush(TIMEOUT_S) == 0
    assert own_broker.stop() == 0
    assert "shut down cleanly" in own_broker.log_text()
    own_broker.start()
    values = read_values(own_broker, "restart", 2, 500)
    assert values[0] == [f"m{i}".encode() for i in range(0, 500, 2)]
    assert values[1] == [f"m{i}".encode() for i in range(1, 500, 2)]


def test_sigkill_mid_stream_loses_nothing_acknowledged(own_broker: BrokerProcess) -> None:
    create(own_broker, "crash", 3)
    acked: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    lock = threading.Lock()

    def on_delivery(err, msg) -> None:  # noqa: ANN001
        if err is None:
            with lock:
                acked[msg.partition()].append(msg.value())

    # No retries: a message is either acknowledged once or reported failed, never written twice.
    producer = Producer(
        {
            "bootstrap.servers": own_broker.bootstrap,
            "acks": "all",
            "linger.ms": 1,
            "retries": 0,
            "message.timeout.ms": 5000,
            "enable.idempotence": False,
        }
    )
    stop = threading.Event()

    def produce_loop() -> None:
        i = 0
        while not stop.is_set() and i < 200_000:
            try:
                producer.produce("crash", value=f"n{i:07d}".encode(), partition=i % 3, on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
        producer.flush(10)

    thread = threading.Thread(target=produce_loop)
    thread.start()
    deadline = time.monotonic() + TIMEOUT_S
    while sum(map(len, acked.values())) < 3000 and time.monotonic() < deadline:
        time.sleep(0.05)
    own_broker.kill()
    stop.set()
    thread.join(30)
    total_acked = sum(map(len, acked.values()))
    assert total_acked >= 3000

    own_broker.start()
    stored = read_values(own_broker, "crash", 3, total_acked)
    for partition in range(3):
        values = stored[partition]
        assert len(values) == len(set(values)), "a message was stored twice"
        assert values == sorted(values), "order within the partition changed"
        missing = set(acked[partition]) - set(values)
        assert not missing, f"{len(missing)} acknowledged messages lost on partition {partition}"


def test_garbage_after_crash_is_truncated(own_broker: BrokerProcess) -> None:
    create(own_broker, "torn", 1)
    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce("torn", value=f"t{i}".encode(), partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    own_broker.kill()
    segment = max((own_broker.data_dir / "torn-0").glob("*.log"))
    size_before = segment.stat().st_size
    with segment.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x64\x00\x00\x01\x00" + b"\xde\xad\xbe\xef" * 40)

    own_broker.start()
    assert read_values(own_broker, "torn", 1, 100)[0] == [f"t{i}".encode() for i in range(100)]
    assert segment.stat().st_size == size_before
    producer = Producer({"bootstrap.servers": own_broker.bootstrap, "acks": "all"})
    producer.produce("torn", value=b"after", partition=0)
    assert producer.flush(TIMEOUT_S) == 0
    values = read_values(own_broker, "torn", 1, 101)[0]
    assert values[-1] == b"after" and len(values) == 101
