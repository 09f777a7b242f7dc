"""Control batches (transaction markers): layout, parsing, malformed records, kafka-python oracle."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rivven_kproto.codec.compression import Compression
from rivven_kproto.codec.records import (
    ControlType,
    Record,
    RecordFormatError,
    build_control_batch,
    control_type,
    crc_ok,
    decode_batch,
    parse_control_record,
    parse_header,
)


@settings(max_examples=100, deadline=None)
@given(
    kind=st.sampled_from([ControlType.ABORT, ControlType.COMMIT]),
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(0, 2**15 - 1),
    coordinator_epoch=st.integers(-(2**31), 2**31 - 1),
    base_offset=st.integers(0, 2**62),
    timestamp=st.integers(0, 2**50),
)
def test_build_and_parse(
    kind: ControlType, producer_id: int, producer_epoch: int, coordinator_epoch: int, base_offset: int, timestamp: int
) -> None:
    buf = build_control_batch(
        kind,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        coordinator_epoch=coordinator_epoch,
        base_offset=base_offset,
        timestamp=timestamp,
    )
    header = parse_header(buf)
    assert crc_ok(buf, 0, header)
    assert header.is_control and header.is_transactional
    assert header.compression == Compression.NONE
    assert header.records_count == 1
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (producer_id, producer_epoch, -1)
    assert (header.base_offset, header.last_offset_delta) == (base_offset, 0)
    assert header.base_timestamp == header.max_timestamp == timestamp
    batch = decode_batch(buf)
    (record,) = batch.records
    assert record.key == struct.pack(">hh", 0, kind)
    assert record.value == struct.pack(">hi", 0, coordinator_epoch)
    assert parse_control_record(record) == (kind, coordinator_epoch)
    assert control_type(record) == kind


def test_newer_versions_with_extra_bytes_are_accepted() -> None:
    record = Record(0, 0, struct.pack(">hh", 3, 0) + b"future", struct.pack(">hi", 2, 7) + b"more")
    assert parse_control_record(record) == (ControlType.ABORT, 7)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        (None, struct.pack(">hi", 0, 1), "key shorter"),
        (b"\x00\x00\x00", struct.pack(">hi", 0, 1), "key shorter"),
        (struct.pack(">hh", -1, 1), struct.pack(">hi", 0, 1), "key version"),
        (struct.pack(">hh", 0, 2), struct.pack(">hi", 0, 1), "not a transaction marker"),
        (struct.pack(">hh", 0, 1), None, "value shorter"),
        (struct.pack(">hh", 0, 1), b"\x00\x00\x00\x00\x00", "value shorter"),
        (struct.pack(">hh", 0, 0), struct.pack(">hi", -3, 1), "marker version"),
    ],
)
def test_malformed_control_records(key: bytes | None, value: bytes | None, match: str) -> None:
    with pytest.raises(RecordFormatError, match=match):
        parse_control_record(Record(0, 0, key, value))


def test_only_markers_can_be_built() -> None:
    with pytest.raises(ValueError):
        build_control_batch(
            ControlType.LEADER_CHANGE, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=0
        )
    assert control_type(Record(0, 0, struct.pack(">hh", 0, 2), None)) == ControlType.LEADER_CHANGE


@pytest.mark.parametrize("kind", [ControlType.ABORT, ControlType.COMMIT])
def test_kafka_python_reads_our_marker(kind: ControlType) -> None:
    default_records = pytest.importorskip("kafka.record.default_records")
    buf = build_control_batch(
        kind, producer_id=77, producer_epoch=3, coordinator_epoch=12, base_offset=500, timestamp=1_700_000_000_000
    )
    theirs = default_records.DefaultRecordBatch(bytearray(buf))
    assert theirs.validate_crc()
    assert theirs.is_control_batch and theirs.is_transactional
    (record,) = list(theirs)
    assert isinstance(record, default_records.ControlRecord)
    assert (record.offset, record.version, record.type) == (500, 0, int(kind))
    assert record.commit is (kind is ControlType.COMMIT)
