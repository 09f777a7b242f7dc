"""Partitioning like Kafka's Java client, and batch splitting."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivven_kproto.client.producer import (
    RECORD_FRAMING_BOUND,
    ProducerRecord,
    murmur2,
    partition_for_key,
    size_bound,
    split_batches,
    split_values,
)
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
    records = [ProducerRecord(value=b"x" * 100) for _ in range(10)]
    size = size_bound(records[0])
    batches = split_batches(records, 3 * size)
    assert [len(b) for b in batches] == [3, 3, 3, 1]
    assert [r for b in batches for r in b] == records
    huge = [ProducerRecord(value=b"x" * 1000)]
    assert split_batches(huge, 10) == [huge]  # an oversized record still goes, alone
    assert split_batches([], 10) == []


@given(
    key=st.none() | st.binary(max_size=300),
    value=st.none() | st.binary(max_size=300),
    headers=st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=50)), max_size=4),
    timestamp_delta=st.integers(-(1 << 62), 1 << 62),
    offset_delta=st.integers(0, (1 << 31) - 1),
)
def test_size_bound_is_never_below_the_encoded_size(
    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]], timestamp_delta: int, offset_delta: int
) -> None:
    record = ProducerRecord(value=value, key=key, headers=headers)
    encoded = encode_record(Record(offset_delta, timestamp_delta, key, value, headers))
    assert len(encoded) <= size_bound(record)


@given(st.lists(st.binary(max_size=40), max_size=60), st.integers(1, 200))
def test_split_values_cuts_where_split_batches_does(values: list[bytes], max_batch_bytes: int) -> None:
    """The bulk path's batch boundaries (running sums) are split_batches' for the same records."""
    records = [ProducerRecord(value) for value in values]
    expected = [len(batch) for batch in split_batches(records, max_batch_bytes)]
    runs = split_values(values, RECORD_FRAMING_BOUND, max_batch_bytes)
    assert [end - start for start, end in runs] == expected
    assert [start for start, _ in runs[1:]] == [end for _, end in runs[:-1]]
