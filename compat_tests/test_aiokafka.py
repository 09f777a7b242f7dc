"""aiokafka against a real broker process: admin create_topics, produce in every codec, read back exactly.

aiokafka is asyncio-based while this project's pytest runs ``trio_mode``, so every test is a plain
sync function that drives its own event loop with ``asyncio.run``; every await sits under one
overall deadline so a misbehaving broker fails the test instead of hanging it.

Consumer groups are not served yet, so the consumer uses ``group_id=None`` with manual
``assign()``; the producer is non-idempotent (aiokafka's default, stated explicitly).

Written against aiokafka 0.14.0.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from .broker_process import BrokerProcess

T = TypeVar("T")

PARTITIONS = 3
# Records per partition in the batched round, then a few sent one by one (separate batches).
BATCHED = 8
SINGLES = 2
OVERALL_TIMEOUT_S = 60.0
CLIENT_ID = "compat-aiokafka"

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Expected:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


def _record(partition: int, offset: int, base_ts: int) -> Expected:
    """A varied but deterministic record: null key, null value, empty value, duplicate/null/unicode headers."""
    i = offset
    key: bytes | None = None if i == 3 else f"key-{partition}-{i}".encode()
    value: bytes | None
    if i == 5:
        value = None  # tombstone
    elif i == 6:
        value = b""
    else:
        # Repetitive so that every codec actually shrinks it.
        value = (f"value-{partition}-{i} " * (10 + i)).encode()
    headers: Headers
    if i == 0:
        headers = []
    elif i == 2:
        headers = [("ключ", "значение".encode()), ("bin", bytes(range(256)))]
    elif i == 7:
        headers = [("null-header", None), ("h", b"")]
    else:
        headers = [("h", f"v{i}".encode()), ("dup", b"a"), ("dup", b"b")]
    # Timestamps are explicit and distinct; one lies a day in the past (out of order), which Kafka
    # accepts by default (log.message.timestamp.before.max.ms is unbounded).
    timestamp = base_ts - 86_400_000 if i == 4 else base_ts + partition * 1000 + i
    return Expected(partition, offset, key, value, headers, timestamp)


def _expected(base_ts: int) -> dict[int, list[Expected]]:
    return {p: [_record(p, i, base_ts) for i in range(BATCHED + SINGLES)] for p in range(PARTITIONS)}


def _run(body: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(body(), OVERALL_TIMEOUT_S)

    return asyncio.run(bounded())


async def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=CLIENT_ID, request_timeout_ms=10_000)
    await admin.start()
    try:
        response = await admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
        errors = [(entry[0], entry[1]) for entry in response.topic_errors]
        assert errors == [(topic, 0)], response
        described = await admin.describe_topics([topic])
        assert [t["topic"] for t in described] == [topic]
        assert described[0]["error_code"] == 0
        assert sorted(p["partition"] for p in described[0]["partitions"]) == list(range(PARTITIONS))
    finally:
        await admin.close()


async def _produce(bootstrap: str, topic: str, codec: str | None, expected: dict[int, list[Expected]]) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=CLIENT_ID,
        compression_type=codec,
        enable_idempotence=False,
        acks="all",
        linger_ms=200,  # the batched round must share one batch per partition
        request_timeout_ms=10_000,
    )
    await producer.start()
    try:
        assert set(await producer.partitions_for(topic)) == set(range(PARTITIONS))

        # Round 1: interleaved across partitions, all in flight together -> one batch per partition.
        pending: list[tuple[Expected, Any]] = []
        for i in range(BATCHED):
            for p in range(PARTITIONS):
                rec = expected[p][i]
                future = await producer.send(
                    topic, value=rec.value, key=rec.key, partition=p, timestamp_ms=rec.timestamp, headers=rec.headers
                )
                pending.append((rec, future))
        metadata = await asyncio.gather(*(future for _, future in pending))
        for (rec, _), meta in zip(pending, metadata, strict=True):
            assert (meta.topic, meta.partition, meta.offset) == (topic, rec.partition, rec.offset)
            assert meta.timestamp_type == 0  # the broker answered log_append_time -1: CreateTime
            # aiokafka 0.14 (BatchBuilder.done) reuses the first record's timestamp for every later
            # record of a batch when the broker answers -1, so only the first one is exact here;
            # the consumer below checks every record's stored timestamp.
            if rec.offset == 0:
                assert meta.timestamp == rec.timestamp

        # Round 2: one record per request, so the log holds several batches per partition.
        for i in range(BATCHED, BATCHED + SINGLES):
            for p in range(PARTITIONS):
                rec = expected[p][i]
                meta = await producer.send_and_wait(
                    topic, value=rec.value, key=rec.key, partition=p, timestamp_ms=rec.timestamp, headers=rec.headers
                )
                assert (meta.partition, meta.offset, meta.timestamp) == (p, i, rec.timestamp)
    finally:
        await producer.stop()


async def _consume(bootstrap: str, topic: str, per_partition: int) -> dict[int, list[Any]]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=CLIENT_ID,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="none",
        request_timeout_ms=10_000,
        fetch_max_wait_ms=100,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        assert await consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        assert await consumer.end_offsets(tps) == {tp: per_partition for tp in tps}
        await consumer.seek_to_beginning(*tps)

        got: dict[int, list[Any]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 30.0
        while any(len(records) < per_partition for records in got.values()):
            assert time.monotonic() < deadline, {p: len(r) for p, r in got.items()}
            batch = await consumer.getmany(timeout_ms=500)
            for tp, records in batch.items():
                assert tp.topic == topic
                got[tp.partition].extend(records)
        # Nothing beyond what was produced.
        extra = await consumer.getmany(timeout_ms=500)
        assert not any(extra.values()), extra
        for tp in tps:
            assert await consumer.position(tp) == per_partition
        return got
    finally:
        await consumer.stop()


CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS, ids=[c or "none" for c in CODECS])
def test_produce_consume_roundtrip(broker: BrokerProcess, topic_name: str, codec: str | None) -> None:
    expected = _expected(base_ts=int(time.time() * 1000) - 60_000)
    per_partition = BATCHED + SINGLES

    async def scenario() -> dict[int, list[Any]]:
        await _create_topic(broker.bootstrap, topic_name)
        await _produce(broker.bootstrap, topic_name, codec, expected)
        return await _consume(broker.bootstrap, topic_name, per_partition)

    try:
        got = _run(scenario)
    except BaseException:
        print(broker.log_text()[-3000:])
        raise

    for p in range(PARTITIONS):
        records = got[p]
        assert [r.offset for r in records] == list(range(per_partition))
        for rec, msg in zip(expected[p], records, strict=True):
            assert msg.topic == topic_name
            assert msg.partition == p
            assert msg.offset == rec.offset
            assert msg.key == rec.key
            assert msg.value == rec.value
            assert list(msg.headers) == rec.headers
            assert msg.timestamp == rec.timestamp
            assert msg.timestamp_type == 0  # CreateTime

