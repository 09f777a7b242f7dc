"""Header-only view of RecordBatch v2 (magic 2), for the broker's hot path.

The broker stores and serves batches as the producer's bytes; it only ever needs the 61-byte
header, read with one ``struct.unpack_from`` and never decoding the records.

Layout (big-endian, offsets from the start of the batch)::

    0  base_offset            int64
    8  batch_length           int32   bytes after this field (so total = 12 + batch_length)
   12  partition_leader_epoch int32
   16  magic                  int8    always 2
   17  crc                    uint32  CRC-32C of bytes [21, end)
   21  attributes             int16   bits 0-2 compression, 3 timestamp type,
                                      4 transactional, 5 control, 6 delete horizon
   23  last_offset_delta      int32
   27  base_timestamp         int64
   35  max_timestamp          int64
   43  producer_id            int64
   51  producer_epoch         int16
   53  base_sequence          int32
   57  records_count          int32
   61  records...

Neither ``base_offset`` nor ``partition_leader_epoch`` is covered by the CRC, which is why the
broker may patch them in place.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # base_offset + batch_length
MAGIC_V2 = 2
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
CRC_START = 21
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
PARTITION_LEADER_EPOCH_OFFSET = 12

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")


class BatchAttributes:
    """What the attribute bits and offset deltas mean; shared by the header view and full batches."""

    attributes: int
    base_offset: int
    last_offset_delta: int
    base_sequence: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


class _HeaderFields(NamedTuple):
    base_offset: int
    batch_length: int
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
    records_count: int


class BatchHeader(_HeaderFields, BatchAttributes):
    """The 61-byte header as a tuple (one ``struct.unpack_from``)."""

    __slots__ = ()

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return LOG_OVERHEAD + self.batch_length


class BatchFormatError(ValueError):
    """A batch whose header or checksum cannot be trusted."""


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Read the fixed header at ``pos``; raises BatchFormatError if fewer than 61 bytes remain."""
    if len(buf) - pos < HEADER_SIZE:
        raise BatchFormatError(f"truncated batch header at byte {pos}")
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of the checksummed part of the batch occupying ``buf[pos:pos+size]``."""
    return crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    return compute_crc(buf, pos, header.size) == header.crc


def header_problem(header: BatchHeader, available: int) -> str | None:
    """Why ``header`` cannot start a v2 batch within ``available`` bytes; None when it can.

    The one plausibility rule of every reader of stored or fetched batches (recovery, ``kproto
    log verify``, consumers); producer input gets Kafka's error codes from the broker's validation.
    """
    if header.magic != MAGIC_V2:
        return f"unsupported magic {header.magic} (expected {MAGIC_V2})"
    if header.batch_length < MIN_BATCH_LENGTH:
        return f"batch length {header.batch_length} below the minimum {MIN_BATCH_LENGTH}"
    if header.size > available:
        return f"torn batch: {header.size} bytes declared, {available} present"
    return None


def iter_headers(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch; stops silently at a partial tail.

    Fetch responses may legitimately end in a partial batch, so a short tail is not an error here;
    callers that need every byte accounted for compare the last position with ``len(buf)``.
    """
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        header = parse_header(buf, pos)
        if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _INT64.pack_into(buf, pos, base_offset)


def patch_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)
