"""Our codec against the bytes real clients send: every recorded request decodes, batches decode exactly."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition

from rivven_kproto.codec.compression import Compression
from rivven_kproto.codec.connection import decode_request
from rivven_kproto.codec.messages.produce import ProduceRequest
from rivven_kproto.codec.records.records import decode_batches

from .broker_process import BrokerProcess
from .recording_proxy import RecordingProxy

CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
          "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
MESSAGES = [
    (b"k1", b"v1", [("h", b"1")]),
    (None, b"no key", []),
    (b"k3", None, [("null", None), ("dup", b"a"), ("dup", b"b")]),
    (b"k4", b"x" * 3000, []),
]


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - fixture
    """A broker that advertises the proxy, so every connection of the client passes through it."""
    recorder = RecordingProxy()
    base = tmp_path_factory.mktemp("proxied")
    broker = BrokerProcess(
        base / "data", base / "broker.log", ["--advertised-listener", f"127.0.0.1:{recorder.port}"]
    ).start()
    recorder.upstream_port = broker.port
    yield recorder
    recorder.close()
    broker.stop()


@pytest.fixture
def proxy(proxied: RecordingProxy) -> RecordingProxy:
    proxied.frames.clear()
    return proxied


def decoded(proxy: RecordingProxy) -> list:
    """Every recorded frame must decode; returns the request events."""
    return [decode_request(frame) for frame in list(proxy.frames)]


def produced_batches(events: list, topic: str) -> list:
    batches = []
    for event in events:
        if isinstance(event.request, ProduceRequest):
            for topic_data in event.request.topic_data:
                if topic_data.name == topic:
                    for partition in topic_data.partition_data:
                        batches += decode_batches(partition.records or b"")
    return batches


def records_of(batches: list) -> list:
    return [(r.key, r.value, [(k, v) for k, v in r.headers]) for b in batches for r in b.records]


@pytest.mark.parametrize("codec", list(CODECS))
def test_confluent_kafka_produce_bytes(proxy: RecordingProxy, topic_name: str, codec: str) -> None:
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "compression.type": codec, "linger.ms": 50})
    for key, value, headers in MESSAGES:
        producer.produce(topic_name, key=key, value=value, headers=headers or None, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": proxy.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    got, deadline = [], time.monotonic() + 30
    while len(got) < len(MESSAGES) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg)
    consumer.close()
    assert len(got) == len(MESSAGES)

    events = decoded(proxy)
    apis = {event.api_key for event in events}
    assert {18, 3, 0, 1} <= apis, apis  # ApiVersions, Metadata, Produce, Fetch all decoded
    batches = produced_batches(events, topic_name)
    assert {b.compression for b in batches} == {CODECS[codec]}
    assert records_of(batches) == [(k, v, h) for k, v, h in MESSAGES]


def test_kafka_python_bytes(proxy: RecordingProxy, topic_name: str) -> None:
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, enable_idempotence=False, compression_type="gzip")
    for key, value, headers in MESSAGES:
        producer.send(topic_name, key=key, value=value, headers=[(k, v or b"") for k, v in headers], partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=proxy.bootstrap, group_id=None)
    consumer.assign([KafkaPythonPartition(topic_name, 0)])
    consumer.seek_to_beginning()
    got, deadline = [], time.monotonic() + 30
    while len(got) < len(MESSAGES) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += records
    consumer.close()
    assert len(got) == len(MESSAGES)
    events = decoded(proxy)
    assert {18, 3, 0, 1, 2} <= {e.api_key for e in events}
    batches = produced_batches(events, topic_name)
    # kafka-python may send a lone small record uncompressed when gzip would not shrink it.
    assert Compression.GZIP in {b.compression for b in batches}
    assert records_of(batches) == [(k, v, [(hk, hv or b"") for hk, hv in h]) for k, v, h in MESSAGES]


def test_aiokafka_bytes(proxy: RecordingProxy, topic_name: str) -> None:
    async def scenario() -> int:
        producer = AIOKafkaProducer(bootstrap_servers=proxy.bootstrap, compression_type="lz4")
        await producer.start()
        try:
            for key, value, headers in MESSAGES:
                await producer.send_and_wait(
                    topic_name, key=key, value=value, headers=[(k, v or b"") for k, v in headers], partition=0
                )
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=proxy.bootstrap, group_id=None)
        await consumer.start()
        try:
            partition = AioPartition(topic_name, 0)
            consumer.assign([partition])
            await consumer.seek_to_beginning(partition)
            batch = await consumer.getmany(partition, timeout_ms=10_000, max_records=len(MESSAGES))
            return sum(len(v) for v in batch.values())
        finally:
            await consumer.stop()

    assert asyncio.run(scenario()) == len(MESSAGES)
    events = decoded(proxy)
    assert {18, 3, 0, 1} <= {e.api_key for e in events}
    batches = produced_batches(events, topic_name)
    assert {b.compression for b in batches} == {Compression.LZ4}
    assert records_of(batches) == [(k, v, [(hk, hv or b"") for hk, hv in h]) for k, v, h in MESSAGES]
