"""Checks and header rewrites applied to produced batches before they reach a segment.

Everything here works on the fixed 61-byte headers; records are never decoded. Validation runs
over every batch before anything is written, so a rejected append leaves the log untouched.
"""

from __future__ import annotations

import struct

from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.records.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    compute_crc,
    crc_ok,
    parse_header,
    patch_base_offset,
    patch_partition_leader_epoch,
)

MAX_TIMESTAMP_OFFSET = 35
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")

Batches = list[tuple[int, BatchHeader]]


def validate_batches(
    data: bytes | bytearray | memoryview, config: LogConfig, *, from_client: bool = True
) -> Batches:
    """Return (position, header) of every batch in ``data`` or raise the KafkaError Kafka answers.

    ``from_client`` applies the rules Kafka reserves for producer input (no control batches, no
    empty batches, a sequence for every idempotent batch); the broker's own writers (transaction
    markers, replication) pass False.
    """
    if len(data) == 0:
        raise KafkaError(Errors.INVALID_RECORD, "a produce request must carry at least one record batch")
    if len(data) > config.segment_bytes:
        raise KafkaError(
            Errors.RECORD_LIST_TOO_LARGE,
            f"{len(data)} bytes of record batches exceed segment.bytes={config.segment_bytes}",
        )
    batches: Batches = []
    pos = 0
    while pos < len(data):
        header = _checked_header(data, pos, config)
        _check_counts(header, pos, from_client)
        batches.append((pos, header))
        pos += header.size
    return batches


def _checked_header(data: bytes | bytearray | memoryview, pos: int, config: LogConfig) -> BatchHeader:
    remaining = len(data) - pos
    if remaining <= MAGIC_OFFSET:
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"truncated record batch at byte {pos}")
    magic = struct.unpack_from(">b", data, pos + MAGIC_OFFSET)[0]
    if magic in (0, 1):
        raise KafkaError(
            Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, f"record batch magic {magic} is not supported; use magic 2"
        )
    if magic != 2:
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"unknown record batch magic {magic} at byte {pos}")
    if remaining < HEADER_SIZE:
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"truncated record batch header at byte {pos}")
    header = parse_header(data, pos)
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or header.size > remaining:
        raise KafkaError(
            Errors.CORRUPT_MESSAGE, f"record batch at byte {pos} has an invalid length {header.batch_length}"
        )
    if header.size > config.max_message_bytes:
        raise KafkaError(
            Errors.MESSAGE_TOO_LARGE,
            f"record batch of {header.size} bytes exceeds max.message.bytes={config.max_message_bytes}",
        )
    if not crc_ok(data, pos, header):
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"record batch at byte {pos} fails its CRC")
    return header


def _check_counts(header: BatchHeader, pos: int, from_client: bool) -> None:
    if header.last_offset_delta < 0:
        raise KafkaError(Errors.INVALID_RECORD, f"record batch at byte {pos} has a negative offset range")
    count_ok = header.records_count == header.last_offset_delta + 1
    if from_client:
        if not count_ok:
            raise KafkaError(
                Errors.INVALID_RECORD,
                f"record count {header.records_count} does not match the offset range "
                f"{header.last_offset_delta + 1} of the batch at byte {pos}",
            )
        if header.is_control:
            raise KafkaError(Errors.INVALID_RECORD, "clients may not write control batches")
        if header.producer_id != NO_PRODUCER_ID and header.base_sequence < 0:
            raise KafkaError(Errors.INVALID_RECORD, "an idempotent batch must carry a base sequence")
    elif not count_ok and header.records_count != 0:
        raise KafkaError(Errors.INVALID_RECORD, f"record count mismatch in the batch at byte {pos}")


def check_offsets(batches: Batches, log_end_offset: int) -> None:
    """For appends that keep their offsets: each batch must start after the previous one ends."""
    expected = log_end_offset
    for pos, header in batches:
        if header.base_offset < expected:
            raise KafkaError(
                Errors.INVALID_RECORD,
                f"batch at byte {pos} starts at offset {header.base_offset}, below the next offset {expected}",
            )
        expected = header.next_offset


def stamp_batches(
    buf: bytearray,
    batches: Batches,
    first_offset: int,
    *,
    log_append_time_ms: int | None,
    leader_epoch: int = 0,
) -> Batches:
    """Give the batches in ``buf`` consecutive offsets from ``first_offset``; fix their timestamps.

    With ``log_append_time_ms`` each batch becomes LogAppendTime with that max timestamp, otherwise
    a stray LogAppendTime bit is cleared (the topic is CreateTime). Attributes and max timestamp are
    covered by the CRC, so it is recomputed whenever either changes. Returns the new headers.
    """
    stamped: Batches = []
    offset = first_offset
    for pos, header in batches:
        patch_base_offset(buf, pos, offset)
        patch_partition_leader_epoch(buf, pos, leader_epoch)
        new = header._replace(base_offset=offset, partition_leader_epoch=leader_epoch)
        if log_append_time_ms is not None:
            attributes, max_timestamp = header.attributes | TIMESTAMP_TYPE_MASK, log_append_time_ms
        else:
            attributes, max_timestamp = header.attributes & ~TIMESTAMP_TYPE_MASK, header.max_timestamp
        if (attributes, max_timestamp) != (header.attributes, header.max_timestamp):
            _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
            _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
            crc = compute_crc(buf, pos, header.size)
            _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
            new = new._replace(attributes=attributes, max_timestamp=max_timestamp, crc=crc)
        stamped.append((pos, new))
        offset = new.next_offset
    return stamped
