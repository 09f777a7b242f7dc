"""Full RecordBatch v2 decoding and building, for tests, the CLI and recompression.

Produce and Fetch never come here: they move batches as bytes using :mod:`.batch`. This module
decodes the records themselves. Each record, after the 61-byte batch header (and after
decompression of everything following that header)::

    length          varint   bytes of the record after this field
    attributes      int8     unused, 0
    timestamp_delta varlong  relative to the batch's base_timestamp
    offset_delta    varint   relative to the batch's base_offset
    key_length      varint   -1 = null
    key             bytes
    value_length    varint   -1 = null
    value           bytes
    header_count    varint
    headers         header_key_length varint, header_key utf-8,
                    header_value_length varint (-1 = null), header_value bytes

Varints are zigzag-encoded (:mod:`rivven_kproto.codec.varint`). Decoding is meant for hostile
input: every length and count is checked against the bytes that remain before anything is sliced or
allocated, and every failure surfaces as :class:`RecordFormatError` (or
:class:`~rivven_kproto.codec.compression.CompressionError` from the codec).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import starmap

import crc32c

from ..compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, codec_of, compress, decompress
from ..varint import VarintError, decode_varint, decode_varlong, encode_varint, encode_varlong
from .batch import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchAttributes,
    BatchFormatError,
    BatchHeader,
    compute_crc,
    parse_header,
)

# length, attributes, timestamp delta, offset delta, key length, value length, header count
MIN_RECORD_SIZE = 7
MIN_HEADER_SIZE = 2

# base_offset, batch_length, partition_leader_epoch, magic, crc: the part the CRC does not cover.
_PREFIX = struct.Struct(">qiibI")
# attributes .. records_count: the rest of the header, covered by the CRC with the records.
_CHECKSUMMED = struct.Struct(">hiqqqhii")
_INT8 = struct.Struct(">b")


class RecordFormatError(BatchFormatError):
    """Record-batch bytes that cannot be decoded (a ValueError, and a BatchFormatError)."""


Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Record:
    """One record; offsets and timestamps are deltas against its batch (slots: producers make many)."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)
    attributes: int = 0


@dataclass
class RecordBatch(BatchAttributes):
    """A decoded batch: the header fields in wire order, then the records."""

    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Record]

    @property
    def compression(self) -> Compression:  # type: ignore[override]
        return codec_of(self.attributes & COMPRESSION_MASK)

    def offset_of(self, record: Record) -> int:
        return self.base_offset + record.offset_delta

    def timestamp_of(self, record: Record) -> int:
        """A record's timestamp; with LogAppendTime every record carries the batch's max_timestamp."""
        if self.timestamp_type == 1:
            return self.max_timestamp
        return self.base_timestamp + record.timestamp_delta

    def iter_absolute(self) -> Iterator[tuple[int, int, Record]]:
        """Yield (offset, timestamp, record) for each record (as offset_of and timestamp_of say,
        with the batch's fields read once: consumers call this for every record they fetch)."""
        base_offset = self.base_offset
        if self.timestamp_type == 1:
            timestamp = self.max_timestamp
            return ((base_offset + r.offset_delta, timestamp, r) for r in self.records)
        base_timestamp = self.base_timestamp
        return ((base_offset + r.offset_delta, base_timestamp + r.timestamp_delta, r) for r in self.records)


# --- decoding -------------------------------------------------------------------------------------


def decode_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> RecordBatch:
    """Decode the complete batch at ``pos``, decompressing its records as its attributes say."""
    header, payload = _checked_payload(buf, pos, verify_crc, max_decompressed_size)
    records = _decode_records(payload, header.records_count)
    return RecordBatch(
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        magic=header.magic,
        crc=header.crc,
        attributes=header.attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records=records,
    )


RecordTuple = tuple[int, int, bytes | None, bytes | None, list[Header], int]


def decode_batch_tuples(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> tuple[BatchHeader, list[RecordTuple]]:
    """:func:`decode_batch` with its records as tuples (offset_delta, timestamp_delta, key, value,
    headers, attributes), the fields of :class:`Record`: a consumer of a large fetch then makes no
    Record object per record. Same checks, same errors."""
    header, payload = _checked_payload(buf, pos, verify_crc, max_decompressed_size)
    count = header.records_count
    if _compiled_decode is not None:
        try:
            return header, _compiled_decode(payload, count)
        except ValueError:
            pass
    records = _decode_records(payload, count)  # raises the precise error
    return header, [(r.offset_delta, r.timestamp_delta, r.key, r.value, r.headers, r.attributes) for r in records]


def decode_batch_values(
    buf: bytes | bytearray | memoryview,
    pos: int,
    first_offset: int,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> tuple[list[bytes | None], int]:
    """The values of the batch at ``pos`` from ``first_offset`` on, and the offset of the last one
    (-1: none): :func:`decode_batch` checked the same, for a reader that prints values only (no
    object per key, header or record)."""
    header, payload = _checked_payload(buf, pos, verify_crc, max_decompressed_size)
    first_delta = first_offset - header.base_offset
    count = header.records_count
    if _compiled_decode_values is not None:
        try:
            values, last_delta = _compiled_decode_values(payload, count, min(max(first_delta, -(1 << 63)), (1 << 63) - 1))
            return values, header.base_offset + last_delta if values else -1
        except ValueError:
            pass
    records = _decode_records(payload, count)  # raises the precise error
    kept = [r for r in records if r.offset_delta >= first_delta]
    return [r.value for r in kept], max((header.base_offset + r.offset_delta for r in kept), default=-1)


def iter_batch_positions(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of every complete batch in ``buf``, as :func:`decode_batches` walks them
    (a partial trailing batch is ignored, a too-short batch length refused)."""
    pos = 0
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        header = parse_header(buf, pos)
        if header.batch_length < MIN_BATCH_LENGTH:
            raise RecordFormatError(f"batch length {header.batch_length} below the minimum at byte {pos}")
        if pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def _checked_payload(
    buf: bytes | bytearray | memoryview, pos: int, verify_crc: bool, max_decompressed_size: int
) -> tuple[BatchHeader, memoryview]:
    """The header and (decompressed) records section of the complete batch at ``pos``, checked."""
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise RecordFormatError(f"truncated batch header at byte {pos}")
    header = parse_header(buf, pos)
    if header.magic != MAGIC_V2:
        raise RecordFormatError(f"unsupported record batch magic {header.magic} at byte {pos}")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise RecordFormatError(f"batch length {header.batch_length} below the minimum at byte {pos}")
    if pos + header.size > len(buf):
        raise RecordFormatError(f"truncated batch at byte {pos}: {header.size} bytes declared")
    if verify_crc and compute_crc(buf, pos, header.size) != header.crc:
        raise RecordFormatError(f"CRC mismatch in batch at byte {pos}")
    if header.records_count < 0:
        raise RecordFormatError(f"negative record count {header.records_count}")
    payload = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    codec = codec_of(header.compression)
    if codec is not Compression.NONE:
        payload = memoryview(decompress(codec, payload, max_decompressed_size))
    return header, payload


def decode_batches(
    buf: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> list[RecordBatch]:
    """Decode every complete batch in ``buf``; a partial trailing batch is ignored, as in Fetch."""
    return [
        decode_batch(buf, pos, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size)
        for pos, _ in iter_batch_positions(buf)
    ]


try:  # the compiled twin (setup.py builds it when a C compiler is present); identical records
    from rivven_kproto.codec.records._decode import decode as _compiled_decode
except ImportError:  # pragma: no cover - depends on the build
    _compiled_decode = None

try:
    from rivven_kproto.codec.records._decode import decode_values as _compiled_decode_values
except ImportError:  # pragma: no cover - depends on the build
    _compiled_decode_values = None

DECODER_COMPILED = _compiled_decode is not None


def _decode_records(data: memoryview, count: int) -> list[Record]:
    """The records of a payload: compiled when available (a large fetch then does no per-field
    Python work); on malformed input the Python decoder runs to name the fault."""
    if _compiled_decode is not None:
        try:
            return list(starmap(Record, _compiled_decode(data, count)))
        except ValueError:
            pass
    records = decode_records_python(data, count)
    if _compiled_decode is not None:  # the twins disagree: never guess which one is right
        raise RecordFormatError("malformed records (the compiled decoder refused them)")
    return records


def decode_records_python(data: memoryview, count: int) -> list[Record]:
    """The records of a payload, decoded in Python (the reference of the compiled twin)."""
    if count > len(data) // MIN_RECORD_SIZE:
        raise RecordFormatError(f"record count {count} impossible in {len(data)} bytes")
    records = []
    pos = 0
    try:
        for _ in range(count):
            length, pos = decode_varint(data, pos)
            if length < 0 or length > len(data) - pos:
                raise RecordFormatError(f"record length {length} overruns the batch at byte {pos}")
            records.append(_decode_record(data[pos : pos + length]))
            pos += length
    except VarintError as exc:
        raise RecordFormatError(f"bad varint in records: {exc}") from None
    if pos != len(data):
        raise RecordFormatError(f"{len(data) - pos} bytes left after {count} records")
    return records


def _decode_record(body: memoryview) -> Record:
    """Decode one record body (after its length); it must consume ``body`` exactly."""
    if not body:
        raise RecordFormatError("empty record")
    (attributes,) = _INT8.unpack_from(body, 0)
    timestamp_delta, pos = decode_varlong(body, 1)
    offset_delta, pos = decode_varint(body, pos)
    key, pos = _read_nullable_bytes(body, pos)
    value, pos = _read_nullable_bytes(body, pos)
    count, pos = decode_varint(body, pos)
    if count < 0 or count > (len(body) - pos) // MIN_HEADER_SIZE:
        raise RecordFormatError(f"header count {count} impossible in the record")
    headers: list[Header] = []
    for _ in range(count):
        key_length, pos = decode_varint(body, pos)
        if key_length < 0 or key_length > len(body) - pos:
            raise RecordFormatError(f"header key length {key_length} invalid")
        try:
            header_key = str(body[pos : pos + key_length], "utf-8")
        except UnicodeDecodeError:
            raise RecordFormatError("header key is not valid UTF-8") from None
        header_value, pos = _read_nullable_bytes(body, pos + key_length)
        headers.append((header_key, header_value))
    if pos != len(body):
        raise RecordFormatError(f"record has {len(body) - pos} unread bytes")
    return Record(offset_delta, timestamp_delta, key, value, headers, attributes)


def _read_nullable_bytes(body: memoryview, pos: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(body, pos)
    if length == -1:
        return None, pos
    if length < -1 or length > len(body) - pos:
        raise RecordFormatError(f"field length {length} invalid with {len(body) - pos} bytes left")
    return bytes(body[pos : pos + length]), pos + length


# --- encoding -------------------------------------------------------------------------------------


def encode_record(record: Record) -> bytes:
    """One record with its length prefix."""
    body = bytearray(_INT8.pack(record.attributes))
    body += encode_varlong(record.timestamp_delta)
    body += encode_varint(record.offset_delta)
    _put_nullable_bytes(body, record.key)
    _put_nullable_bytes(body, record.value)
    body += encode_varint(len(record.headers))
    for header_key, header_value in record.headers:
        raw_key = header_key.encode("utf-8")
        body += encode_varint(len(raw_key))
        body += raw_key
        _put_nullable_bytes(body, header_value)
    return encode_varint(len(body)) + bytes(body)


def encode_records_python(records: Sequence[Record]) -> bytes:
    """The records section of a batch: each record with its length prefix (the reference)."""
    return b"".join(encode_record(r) for r in records)


try:  # the compiled twin (setup.py builds it when a C compiler is present); identical bytes
    from rivven_kproto.codec.records._encode import encode as _compiled_encode
except ImportError:  # pragma: no cover - depends on the build
    _compiled_encode = None

ENCODER_COMPILED = _compiled_encode is not None


def encode_records(records: Sequence[Record]) -> bytes:
    """The records section of a batch, compiled when available (no per-record Python work)."""
    if _compiled_encode is not None:
        return bytes(_compiled_encode(records))
    return encode_records_python(records)


try:
    from rivven_kproto.codec.records._encode import encode_values as _compiled_encode_values
except ImportError:  # pragma: no cover - depends on the build
    _compiled_encode_values = None


def encode_values(values: Sequence[bytes | None], headers: Sequence[Header] = ()) -> bytes:
    """The records section of unkeyed records numbered from 0 (timestamp delta 0) with these values
    and each these headers: the bytes of :func:`encode_records` of those Records, without them."""
    if _compiled_encode_values is not None:
        return bytes(_compiled_encode_values(values, headers))
    header_list = list(headers)
    return encode_records_python([Record(i, 0, None, value, header_list) for i, value in enumerate(values)])


def build_values_batch(
    values: Sequence[bytes | None],
    headers: Sequence[Header] = (),
    *,
    compression: int = Compression.NONE,
    base_timestamp: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
) -> bytes:
    """:func:`build_batch` of unkeyed records with these values (offset deltas 0.., timestamp delta 0)."""
    attributes = int(codec_of(compression)) | (TRANSACTIONAL_MASK if is_transactional else 0)
    payload = encode_values(values, headers)
    codec = codec_of(compression)
    if codec is not Compression.NONE:
        payload = compress(codec, payload)
    return assemble_batch(
        base_offset=0, partition_leader_epoch=-1, attributes=attributes, last_offset_delta=max(len(values) - 1, 0),
        base_timestamp=base_timestamp, max_timestamp=base_timestamp, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, records_count=len(values), payload=payload,
    )


def _put_nullable_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += encode_varint(-1)
    else:
        out += encode_varint(len(data))
        out += data


def encode_batch(batch: RecordBatch, compression: int | None = None) -> bytes:
    """Encode ``batch`` as is (header fields verbatim), recomputing length and CRC.

    ``compression`` replaces the codec bits of ``batch.attributes`` when given.
    """
    attributes = batch.attributes
    if compression is not None:
        attributes = (attributes & ~COMPRESSION_MASK) | codec_of(compression)
    payload = encode_records(batch.records)
    codec = codec_of(attributes & COMPRESSION_MASK)
    if codec is not Compression.NONE:
        payload = compress(codec, payload)
    return assemble_batch(
        base_offset=batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=batch.last_offset_delta,
        base_timestamp=batch.base_timestamp,
        max_timestamp=batch.max_timestamp,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        records_count=len(batch.records),
        payload=payload,
    )


def assemble_batch(
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
    payload: bytes,
) -> bytes:
    """A v2 batch around an already encoded (maybe compressed) records section, with length and CRC.

    The fields are taken as given, consistent or not: tests and the fuzz harness build hostile
    batches with it.
    """
    try:
        checksummed = _CHECKSUMMED.pack(
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            records_count,
        )
        checksummed += payload
        batch_length = len(checksummed) + _PREFIX.size - LOG_OVERHEAD
        prefix = _PREFIX.pack(
            base_offset, batch_length, partition_leader_epoch, MAGIC_V2, crc32c.crc32c(checksummed)
        )
    except struct.error as exc:
        raise ValueError(f"batch field out of range: {exc}") from None
    return prefix + checksummed


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = Compression.NONE,
    base_timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = 0,
) -> bytes:
    """Build a v2 batch from records, computing max_timestamp, last_offset_delta, length and CRC.

    ``base_timestamp`` defaults to the current wall-clock time in milliseconds. With
    ``timestamp_type=1`` (LogAppendTime) it is taken as the append time and becomes max_timestamp.
    """
    if base_timestamp is None:
        base_timestamp = time.time_ns() // 1_000_000
    attributes = int(codec_of(compression))
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if timestamp_type:
        max_timestamp = base_timestamp
    else:
        max_timestamp = base_timestamp + max((r.timestamp_delta for r in records), default=0)
    batch = RecordBatch(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        magic=MAGIC_V2,
        crc=0,
        attributes=attributes,
        last_offset_delta=max((r.offset_delta for r in records), default=0),
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records=list(records),
    )
    return encode_batch(batch)


def recompress_batch(
    buf: bytes | bytearray | memoryview,
    compression: int,
    *,
    verify_crc: bool = True,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Re-encode the batch in ``buf`` with another codec, keeping every other header field."""
    batch = decode_batch(buf, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size)
    return encode_batch(batch, compression)
