"""RecordBatch v2 decoding/building: round trips, kafka-python as an oracle, hostile bytes."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rivven_kproto.codec.compression import Compression, CompressionError, compress
from rivven_kproto.codec.records import (
    HEADER_SIZE,
    Record,
    RecordBatch,
    RecordFormatError,
    build_batch,
    crc_ok,
    decode_batch,
    decode_batches,
    encode_batch,
    parse_header,
    recompress_batch,
)
from rivven_kproto.codec.varint import encode_varint

CODECS = list(Compression)
TYPED_ERRORS = (RecordFormatError, CompressionError)

_headers = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=3
)
_records = st.lists(
    st.builds(
        Record,
        offset_delta=st.integers(0, 2**31 - 1),
        timestamp_delta=st.integers(-(2**40), 2**40),
        key=st.one_of(st.none(), st.binary(max_size=32)),
        value=st.one_of(st.none(), st.binary(max_size=64)),
        headers=_headers,
        attributes=st.integers(-128, 127),
    ),
    max_size=12,
)


def _sample_records(n: int = 5) -> list[Record]:
    return [
        Record(i, i * 10, None if i == 2 else b"key-%d" % i, b"value " * (i + 1), [("h", b"x"), ("n", None)])
        for i in range(n)
    ]


def _assert_decodes_or_typed_error(buf: bytes, **kwargs: Any) -> None:
    try:
        decode_batch(buf, **kwargs)
    except TYPED_ERRORS:
        pass
    try:
        decode_batches(buf, **kwargs)
    except TYPED_ERRORS:
        pass


# --- round trips ---------------------------------------------------------------------------------


@settings(max_examples=120, deadline=None)
@given(
    records=_records,
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    base_timestamp=st.integers(0, 2**50),
    producer=st.tuples(st.integers(-1, 2**62), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1)),
    flags=st.tuples(st.booleans(), st.booleans(), st.integers(0, 1)),
    partition_leader_epoch=st.integers(-1, 2**31 - 1),
)
def test_round_trip(
    records: list[Record],
    codec: Compression,
    base_offset: int,
    base_timestamp: int,
    producer: tuple[int, int, int],
    flags: tuple[bool, bool, int],
    partition_leader_epoch: int,
) -> None:
    producer_id, producer_epoch, base_sequence = producer
    transactional, control, timestamp_type = flags
    buf = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        base_timestamp=base_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
        is_control=control,
        partition_leader_epoch=partition_leader_epoch,
        timestamp_type=timestamp_type,
    )
    header = parse_header(buf)
    assert header.size == len(buf)
    assert crc_ok(buf, 0, header)
    assert header.records_count == len(records)
    batch = decode_batch(buf)
    assert batch.records == records
    assert batch.compression is codec
    assert (batch.base_offset, batch.base_timestamp, batch.partition_leader_epoch) == (
        base_offset,
        base_timestamp,
        partition_leader_epoch,
    )
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert (batch.is_transactional, batch.is_control, batch.timestamp_type) == flags
    assert batch.last_offset_delta == max((r.offset_delta for r in records), default=0)
    if timestamp_type == 0:
        expected_max = max((base_timestamp + r.timestamp_delta for r in records), default=base_timestamp)
        assert batch.max_timestamp == expected_max
    # Re-encoding the decoded batch reproduces the bytes exactly, for the uncompressed case.
    if codec is Compression.NONE:
        assert encode_batch(batch) == buf


def test_absolute_offsets_and_timestamps() -> None:
    buf = build_batch(_sample_records(), base_offset=100, base_timestamp=5000)
    batch = decode_batch(buf)
    assert [(o, t) for o, t, _ in batch.iter_absolute()] == [(100 + i, 5000 + 10 * i) for i in range(5)]
    assert batch.max_timestamp == 5040
    assert (batch.last_offset, batch.next_offset) == (104, 105)
    log_append = decode_batch(build_batch(_sample_records(), base_timestamp=7777, timestamp_type=1))
    assert {log_append.timestamp_of(r) for r in log_append.records} == {7777}


def test_base_timestamp_defaults_to_now() -> None:
    assert decode_batch(build_batch(_sample_records(1))).base_timestamp > 1_600_000_000_000


def test_decode_batches_ignores_partial_tail() -> None:
    first = build_batch(_sample_records(3), base_offset=0, base_timestamp=1)
    second = build_batch(_sample_records(2), base_offset=3, base_timestamp=2, compression=Compression.GZIP)
    third = build_batch(_sample_records(4), base_offset=5, base_timestamp=3)
    stream = first + second + third
    assert [b.base_offset for b in decode_batches(stream)] == [0, 3, 5]
    for cut in (len(first) + len(second) + 1, len(stream) - 1, len(first) + len(second) + HEADER_SIZE + 3):
        assert [b.base_offset for b in decode_batches(stream[:cut])] == [0, 3]
    assert decode_batches(b"") == []
    assert decode_batches(memoryview(stream)[: HEADER_SIZE - 1]) == []


@pytest.mark.parametrize("codec", CODECS)
def test_recompress_keeps_fields(codec: Compression) -> None:
    original = build_batch(
        _sample_records(),
        base_offset=42,
        base_timestamp=1234,
        producer_id=9,
        producer_epoch=2,
        base_sequence=17,
        is_transactional=True,
        partition_leader_epoch=5,
        compression=Compression.GZIP,
    )
    out = recompress_batch(original, codec)
    before, after = decode_batch(original), decode_batch(out)
    assert after.compression is codec
    assert after.records == before.records
    for name in (
        "base_offset",
        "partition_leader_epoch",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "is_transactional",
        "is_control",
    ):
        assert getattr(after, name) == getattr(before, name), name


def test_encode_preserves_compacted_header_fields() -> None:
    """A compacted batch may have fewer records than its offset range; re-encoding keeps that."""
    batch = decode_batch(build_batch(_sample_records(), base_timestamp=10))
    batch.records = [batch.records[1], batch.records[4]]
    again = decode_batch(encode_batch(batch, Compression.ZSTD))
    assert again.last_offset_delta == 4
    assert again.max_timestamp == 50
    assert [r.offset_delta for r in again.records] == [1, 4]


def test_crc_mismatch_detected() -> None:
    buf = bytearray(build_batch(_sample_records(), base_timestamp=1))
    buf[-1] ^= 0x01
    with pytest.raises(RecordFormatError, match="CRC"):
        decode_batch(buf)
    decode_batch(buf, verify_crc=False)  # the flipped byte is inside a value
    patched = bytearray(build_batch(_sample_records(), base_timestamp=1))
    struct.pack_into(">q", patched, 0, 999)  # base_offset is outside the CRC
    assert decode_batch(patched).base_offset == 999


def test_encode_rejects_out_of_range_fields() -> None:
    with pytest.raises(ValueError):
        build_batch(_sample_records(1), base_timestamp=1, producer_epoch=2**15)
    with pytest.raises(ValueError):
        build_batch([Record(2**31, 0, None, None)], base_timestamp=1)


# --- kafka-python as an independent oracle -------------------------------------------------------


def _kafka_python_codecs() -> list[Compression]:
    codec = pytest.importorskip("kafka.codec")
    available = {
        Compression.NONE: True,
        Compression.GZIP: codec.has_gzip(),
        Compression.SNAPPY: codec.has_snappy(),
        Compression.LZ4: codec.has_lz4(),
        Compression.ZSTD: codec.has_zstd(),
    }
    return [c for c, ok in available.items() if ok]


def _skip_unless_kafka_python_has(codec: Compression) -> None:
    if codec not in _kafka_python_codecs():
        pytest.skip(f"kafka-python cannot handle {codec.name} here (optional library missing)")


_oracle_records = st.lists(
    st.tuples(
        st.integers(0, 2**40),
        st.one_of(st.none(), st.binary(max_size=32)),
        st.one_of(st.none(), st.binary(max_size=64)),
        _headers,
    ),
    min_size=1,
    max_size=10,
)


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=60, deadline=None)
@given(rows=_oracle_records)
def test_kafka_python_builds_we_decode(codec: Compression, rows: list[Any]) -> None:
    _skip_unless_kafka_python_has(codec)
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for offset, (timestamp, key, value, headers) in enumerate(rows):
        assert builder.append(offset, timestamp, key, value, headers) is not None
    buf = bytes(builder.build())
    batch = decode_batch(buf)
    assert batch.compression in (codec, Compression.NONE)  # kafka-python skips useless compression
    assert [(o, t, r.key, r.value, r.headers) for o, t, r in batch.iter_absolute()] == [
        (offset, ts, key, value, headers) for offset, (ts, key, value, headers) in enumerate(rows)
    ]
    assert batch.max_timestamp == max(row[0] for row in rows)
    assert batch.last_offset_delta == len(rows) - 1


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_compressed_batch(codec: Compression) -> None:
    """Compressible values, so kafka-python really compresses; our decoder must agree."""
    _skip_unless_kafka_python_has(codec)
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 30)
    for i in range(50):
        builder.append(i, 1_700_000_000_000 + i, b"key", b"abcdef" * 100, [("trace", b"1")])
    batch = decode_batch(bytes(builder.build()))
    assert batch.compression is codec
    assert len(batch.records) == 50
    assert all(r.value == b"abcdef" * 100 for r in batch.records)


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=60, deadline=None)
@given(records=_records, base_offset=st.integers(0, 2**40), base_timestamp=st.integers(0, 2**45))
def test_we_build_kafka_python_decodes(
    codec: Compression, records: list[Record], base_offset: int, base_timestamp: int
) -> None:
    _skip_unless_kafka_python_has(codec)
    from kafka.record.default_records import DefaultRecordBatch

    # Record attributes are unused by Kafka (always 0); kafka-python cannot parse other values.
    records = [dataclasses.replace(r, attributes=0) for r in records]
    buf = build_batch(
        records,
        compression=codec,
        base_offset=base_offset,
        base_timestamp=base_timestamp,
        producer_id=5,
        producer_epoch=1,
        base_sequence=0,
    )
    theirs = DefaultRecordBatch(bytearray(buf))
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.compression_type, theirs.producer_id) == (base_offset, codec, 5)
    assert theirs.records_count == len(records)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
    assert got == [
        (base_offset + r.offset_delta, base_timestamp + r.timestamp_delta, r.key, r.value, r.headers)
        for r in records
    ]


# --- hostile bytes ---------------------------------------------------------------------------------


def _frame(records_payload: bytes, *, count: int, attributes: int = 0) -> bytes:
    """A batch with a correct header (length and CRC) around arbitrary record bytes."""
    batch = RecordBatch(0, -1, 2, 0, 0, max(count - 1, 0), 0, 0, -1, -1, -1, [])
    header = bytearray(encode_batch(batch))
    struct.pack_into(">h", header, 21, attributes)
    struct.pack_into(">i", header, 57, count)
    return _fix_length_and_crc(bytes(header) + records_payload)


def _fix_length_and_crc(buf: bytes) -> bytes:
    import crc32c

    out = bytearray(buf)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_garbage_only_raises_typed_errors(data: bytes) -> None:
    _assert_decodes_or_typed_error(data)
    _assert_decodes_or_typed_error(data, verify_crc=False)


@settings(max_examples=200, deadline=None)
@given(payload=st.binary(max_size=200), count=st.integers(-5, 2**31 - 1), attributes=st.integers(0, 0x7F))
def test_garbage_records_behind_valid_header(payload: bytes, count: int, attributes: int) -> None:
    _assert_decodes_or_typed_error(_frame(payload, count=count, attributes=attributes))


@settings(max_examples=200, deadline=None)
@given(records=_records, codec=st.sampled_from(CODECS), data=st.data())
def test_mutated_batches_only_raise_typed_errors(records: list[Record], codec: Compression, data: st.DataObject) -> None:
    buf = bytearray(build_batch(records, compression=codec, base_timestamp=0))
    pos = data.draw(st.integers(0, len(buf) - 1))
    buf[pos] = data.draw(st.integers(0, 255))
    _assert_decodes_or_typed_error(bytes(buf), verify_crc=False)
    cut = data.draw(st.integers(0, len(buf) - 1))
    with pytest.raises(RecordFormatError):
        decode_batch(bytes(buf[:cut]))


def test_truncated_batches() -> None:
    buf = build_batch(_sample_records(), base_timestamp=1, compression=Compression.LZ4)
    for cut in range(len(buf)):
        with pytest.raises(RecordFormatError):
            decode_batch(buf[:cut])
        assert decode_batches(buf[:cut]) == []


def _rec(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


# Record bodies below: attributes, timestamp delta, offset delta, key length, value length, headers.
@pytest.mark.parametrize(
    ("payload", "count", "match"),
    [
        (b"\xff" * 10 + b"\x01", 1, "varint"),  # an 11-byte varint as the record length
        (encode_varint(2**31 - 1) + b"\x00" * 10, 1, "overruns"),  # huge record length
        (encode_varint(-7) + b"\x00" * 10, 1, "overruns"),  # negative record length
        (b"\x00" * 14, 2**31 - 1, "impossible"),  # record count far beyond the bytes present
        (b"\x00" * 14, -1, "negative record count"),
        (_rec(b"\x00\x00\x00" + encode_varint(2**31 - 1) + b"\x00\x00"), 1, "field length"),  # huge key
        (_rec(b"\x00\x00\x00" + encode_varint(-2) + b"\x00\x00"), 1, "field length"),
        (_rec(b"\x00\x00\x00\x01\x01" + encode_varint(2**30)), 1, "header count"),
        (_rec(b"\x00\x00\x00\x01\x01" + encode_varint(-1) + b"\x00\x00"), 1, "header count"),
        (_rec(b"\x00\x00\x00\x01\x01\x00\x00"), 1, "unread"),
        (_rec(b"\x00\x00\x00\x01\x01\x00") + b"\x00" * 3, 1, "left after"),
        (encode_varint(0) + b"\x00" * 6, 1, "empty record"),
        (_rec(b"\x00\x00\x00\x01\x01" + encode_varint(1) + encode_varint(1) + b"\xff\x01"), 1, "UTF-8"),
        (_rec(b"\x00\x00\x00\x01\x01" + encode_varint(1) + encode_varint(-1) + b"\x00"), 1, "header key"),
        (_rec(b"\x00\x00\x00\x01\x01" + encode_varint(1) + encode_varint(50) + b"\x00"), 1, "header key"),
        (_rec(b"\x00" + b"\x80" * 5), 1, "varint"),  # truncated inside the record
        (_rec(b"\x00" + b"\xff" * 10 + b"\x01" + b"\x00" * 4), 1, "varint"),  # 11-byte varlong
    ],
)
def test_hostile_record_fields(payload: bytes, count: int, match: str) -> None:
    with pytest.raises(RecordFormatError, match=match):
        decode_batch(_frame(payload, count=count))


def test_hostile_header_fields() -> None:
    good = build_batch(_sample_records(2), base_timestamp=1)
    bad_magic = bytearray(good)
    bad_magic[16] = 1
    with pytest.raises(RecordFormatError, match="magic"):
        decode_batch(bytes(bad_magic))
    short = bytearray(good)
    struct.pack_into(">i", short, 8, 10)
    with pytest.raises(RecordFormatError, match="minimum"):
        decode_batch(bytes(short))
    with pytest.raises(RecordFormatError, match="minimum"):
        decode_batches(bytes(short))
    huge = bytearray(good)
    struct.pack_into(">i", huge, 8, 2**31 - 1)
    with pytest.raises(RecordFormatError, match="truncated"):
        decode_batch(bytes(huge))
    with pytest.raises(RecordFormatError):
        decode_batch(good, pos=-1)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_in_batch(codec_id: int) -> None:
    with pytest.raises(CompressionError, match="codec id"):
        decode_batch(_frame(b"", count=0, attributes=codec_id))


def test_corrupt_and_oversized_compressed_payload() -> None:
    with pytest.raises(CompressionError):
        decode_batch(_frame(b"not zstd at all", count=1, attributes=int(Compression.ZSTD)))
    records_bytes = b"".join(
        encode_varint(len(b)) + b
        for b in [b"\x00\x00\x00\x01" + encode_varint(100_000) + bytes(100_000) + b"\x00"]
    )
    bomb = _frame(compress(Compression.ZSTD, records_bytes), count=1, attributes=int(Compression.ZSTD))
    assert len(decode_batch(bomb).records[0].value or b"") == 100_000
    with pytest.raises(CompressionError, match="exceeds the limit"):
        decode_batch(bomb, max_decompressed_size=50_000)
