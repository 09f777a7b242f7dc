"""Partitioning like Kafka's Java client, and batch splitting."""

from __future__ import annotations

import pytest

from rivven_kproto.client.producer import murmur2, partition_for_key, split_batches
from rivven_kproto.codec.records.records import Record, encode_record

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), sorted(KAFKA_MURMUR2.items()))
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_keys_map_to_partitions_like_the_java_client() -> None:
    # toPositive(murmur2(key)) % n; -973932308 & 0x7fffffff = 1173551340
    assert partition_for_key(b"21", 7) == 1173551340 % 7
    assert {partition_for_key(b"same", 12) for _ in range(3)} == {partition_for_key(b"same", 12)}
    assert partition_for_key(b"", 3) == (murmur2(b"") & 0x7FFFFFFF) % 3


def test_split_batches_respects_the_size_limit() -> None:
    records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=b"x" * 100) for i in range(10)]
    size = len(encode_record(records[0]))
    batches = split_batches(records, 3 * size)
    assert [len(b) for b in batches] == [3, 3, 3, 1]
    assert [r for b in batches for r in b] == records
    huge = [Record(offset_delta=0, timestamp_delta=0, key=None, value=b"x" * 1000)]
    assert split_batches(huge, 10) == [huge]  # an oversized record still goes, alone
    assert split_batches([], 10) == []
