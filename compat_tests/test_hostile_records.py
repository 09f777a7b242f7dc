"""Issue #15: every record of every produced batch is checked, as Kafka's LogValidator does.

Hand-built batches (valid length and CRC, bad records inside) go over the wire to a real broker.
Each must get Kafka's error code, nothing may be appended, and the broker must keep serving;
then a real client's well-formed batches of every codec still land at offset 0 onwards.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from rivven_kproto.codec.compression import Compression, compress
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest
from rivven_kproto.codec.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from rivven_kproto.codec.records.records import Record, assemble_batch, encode_record

from . import raw_client
from .broker_process import BrokerProcess
from .txn_helpers import Raw, create_topics

TIMESTAMP = 1_700_000_000_000
LOG_APPEND_TIME = 0x08


def records_payload(count: int, *, deltas: list[int] | None = None, key: bytes | None = b"k") -> bytes:
    deltas = list(range(count)) if deltas is None else deltas
    return b"".join(
        encode_record(Record(offset_delta=d, timestamp_delta=i, key=key, value=b"value-%d" % i))
        for i, d in enumerate(deltas)
    )


def batch(payload: bytes, count: int, *, attributes: int = 0, last_offset_delta: int | None = None) -> bytes:
    return assemble_batch(
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=attributes,
        last_offset_delta=count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp=TIMESTAMP,
        max_timestamp=TIMESTAMP,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=count,
        payload=payload,
    )


def compressed(codec: Compression, payload: bytes, count: int, mangle: Callable[[bytes], bytes]) -> bytes:
    return batch(mangle(compress(codec, payload)), count, attributes=int(codec))


def truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def flipped(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + b"\x00\x13\x37" + data[middle + 1 :]


GARBAGE = random.Random(15).randbytes(300)
HOSTILE: dict[str, tuple[bytes, set[int]]] = {
    "records run past the batch end": (batch(records_payload(2), 3), {Errors.INVALID_RECORD}),
    "more records than the count": (batch(records_payload(3), 2), {Errors.INVALID_RECORD}),
    "three records declared as one (duplicate offsets)": (batch(records_payload(3), 1), {Errors.INVALID_RECORD}),
    "count of 2**31-1": (batch(records_payload(2), 2**31 - 1), {Errors.INVALID_RECORD}),
    "garbage records": (batch(GARBAGE, 5), {Errors.INVALID_RECORD}),
    "negative offset deltas": (batch(records_payload(2, deltas=[-1, -2]), 2), {Errors.INVALID_RECORD}),
    "offset deltas out of order": (batch(records_payload(3, deltas=[0, 2, 1]), 3), {Errors.INVALID_RECORD}),
    "codec id 5": (batch(records_payload(1), 1, attributes=5), {Errors.INVALID_RECORD}),
    "codec id 7": (batch(records_payload(1), 1, attributes=7), {Errors.INVALID_RECORD}),
    # A corrupt payload that happens to decode to wrong records is INVALID_RECORD in Kafka too.
    **{
        f"{how} {codec.name.lower()} payload": (
            compressed(codec, records_payload(20), 20, mangle),
            {Errors.CORRUPT_MESSAGE, Errors.INVALID_RECORD},
        )
        for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD)
        for how, mangle in (("truncated", truncated), ("corrupt", flipped))
    },
}


def produce(bootstrap: str, topic: str, data: bytes, version: int = 9) -> object:
    sock = raw_client.connect(bootstrap)
    try:
        request = ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=5000,
            topic_data=[TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=data)])],
        )
        return raw_client.call(sock, request, version).responses[0].partition_responses[0]
    finally:
        sock.close()


def end_offset(bootstrap: str, topic: str) -> int:
    raw = Raw(bootstrap)
    try:
        return raw.end_offsets(topic, [0], committed=False)[0]
    finally:
        raw.close()


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_batch_with_bad_records_is_refused_and_nothing_is_appended(broker: BrokerProcess, case: str) -> None:
    topic = "hostile-" + "".join(c if c.isalnum() else "-" for c in case)
    create_topics(broker.bootstrap, {topic: 1})
    data, expected = HOSTILE[case]
    response = produce(broker.bootstrap, topic, data)
    assert response.error_code in expected, (case, response)
    assert response.base_offset == -1
    assert end_offset(broker.bootstrap, topic) == 0
    assert produce(broker.bootstrap, topic, batch(records_payload(2), 2)).error_code == Errors.NONE
    assert end_offset(broker.bootstrap, topic) == 2


def test_log_append_time_from_a_producer_is_invalid_timestamp_with_record_errors(broker: BrokerProcess) -> None:
    create_topics(broker.bootstrap, {"stamped-by-client": 1})
    response = produce(broker.bootstrap, "stamped-by-client", batch(records_payload(3), 3, attributes=LOG_APPEND_TIME))
    assert response.error_code == Errors.INVALID_TIMESTAMP
    assert [e.batch_index for e in response.record_errors] == [0, 1, 2]
    assert all("LogAppendTime" in (e.batch_index_error_message or "") for e in response.record_errors)
    assert end_offset(broker.bootstrap, "stamped-by-client") == 0


def test_a_decompression_bomb_is_refused_and_the_broker_keeps_serving(broker: BrokerProcess) -> None:
    create_topics(broker.bootstrap, {"bomb": 1})
    record = encode_record(Record(offset_delta=0, timestamp_delta=0, key=b"k", value=bytes(64 << 20)))
    bomb = compressed(Compression.ZSTD, record, 1, lambda data: data)
    assert len(bomb) < 100_000  # 64 MiB of zeros, a few KB on the wire
    bystander = raw_client.connect(broker.bootstrap)
    try:
        assert produce(broker.bootstrap, "bomb", bomb).error_code == Errors.MESSAGE_TOO_LARGE
        assert raw_client.call(bystander, ApiVersionsRequest(), 2).error_code == Errors.NONE
    finally:
        bystander.close()
    assert end_offset(broker.bootstrap, "bomb") == 0


def test_null_keys_on_a_compacted_topic_are_refused_for_a_real_client(broker: BrokerProcess) -> None:
    create_topics(broker.bootstrap, {"compacted": 1}, {"cleanup.policy": "compact"})
    raw = produce(broker.bootstrap, "compacted", batch(records_payload(2, key=None), 2))
    assert raw.error_code == Errors.INVALID_RECORD
    assert [e.batch_index for e in raw.record_errors] == [0, 1]
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce("compacted", value=b"no key", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    producer.produce("compacted", key=b"k", value=b"keyed", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0
    assert len(errors) == 2 and errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    assert errors[1] is None
    assert end_offset(broker.bootstrap, "compacted") == 1


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_well_formed_batches_of_every_codec_still_land(broker: BrokerProcess, codec: str) -> None:
    topic = f"fine-{codec}"
    create_topics(broker.bootstrap, {topic: 1})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5})
    for i in range(200):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i * 10, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"g-{codec}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen: list[bytes] = []
    try:
        for _ in range(300):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen.append(message.key())
            if len(seen) == 200:
                break
    finally:
        consumer.close()
    assert seen == [b"k%d" % i for i in range(200)]
