"""Checks and header rewrites applied to produced batches before they reach a segment.

Header checks work on the fixed 61-byte headers; :func:`validate_records` then walks every record
of every client batch, decompressing where needed, as Kafka's LogValidator does (the walk is
compiled, and the server runs it off the event loop for large or compressed batches). Validation
runs over every batch before anything is written, so a rejected append leaves the log untouched.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.codec.compression import (
    Compression,
    CompressionError,
    UnsupportedCompressionError,
    codec_of,
    compress,
    decompress,
)
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.records.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    compute_crc,
    crc_ok,
    parse_header,
    patch_base_offset,
    patch_partition_leader_epoch,
)
from rivven_kproto.codec.records.records import assemble_batch
from rivven_kproto.codec.records.scan import ScanCode, null_key_indexes, scan

MAX_TIMESTAMP_OFFSET = 35
# A compressed batch may not decompress to more than this many times max.message.bytes (at least
# 1 MiB): bounds a decompression bomb while leaving room for well-compressible legitimate batches.
DECOMPRESSED_SIZE_FACTOR = 16
# The smallest a v2 record can be: a 1-byte length, then attributes, timestamp delta, offset delta,
# key length (-1), value length (-1) and header count, one byte each.
MIN_RECORD_BYTES = 7
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
        _check_declared_size(header, pos, config)
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
    if header.batch_length < MIN_BATCH_LENGTH or header.size > remaining:
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


def _check_declared_size(header: BatchHeader, pos: int, config: LogConfig) -> None:
    """A compressed batch declaring more records than its decompressed size limit can hold is
    refused from its header, before anything is decompressed or walked (issue #37 item 8).
    Uncompressed batches need no such check: their records are bounded by the batch's own size,
    which the walk checks as it goes."""
    if header.compression == Compression.NONE:
        return
    limit = decompressed_limit(config)
    if header.records_count > limit // MIN_RECORD_BYTES:
        raise KafkaError(
            Errors.MESSAGE_TOO_LARGE,
            f"record batch at byte {pos} declares {header.records_count} records: at {MIN_RECORD_BYTES} bytes "
            f"each at least, more than the {limit} bytes a batch may decompress to",
        )


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
    max_timestamps: tuple[int, ...] | None = None,
) -> Batches:
    """Give the batches in ``buf`` consecutive offsets from ``first_offset``; fix their timestamps.

    With ``log_append_time_ms`` each batch becomes LogAppendTime with that max timestamp, otherwise
    a stray LogAppendTime bit is cleared (the topic is CreateTime) and the max timestamp becomes the
    records' own (``max_timestamps``, from :func:`validate_records`). Attributes and max timestamp are
    covered by the CRC, so it is recomputed whenever either changes. Returns the new headers.
    """
    stamped: Batches = []
    offset = first_offset
    for index, (pos, header) in enumerate(batches):
        patch_base_offset(buf, pos, offset)
        patch_partition_leader_epoch(buf, pos, leader_epoch)
        new = header._replace(base_offset=offset, partition_leader_epoch=leader_epoch)
        if log_append_time_ms is not None:
            attributes, max_timestamp = header.attributes | TIMESTAMP_TYPE_MASK, log_append_time_ms
        else:
            max_timestamp = header.max_timestamp if max_timestamps is None else max_timestamps[index]
            attributes = header.attributes & ~TIMESTAMP_TYPE_MASK
        if (attributes, max_timestamp) != (header.attributes, header.max_timestamp):
            _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
            _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
            crc = compute_crc(buf, pos, header.size)
            _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
            new = new._replace(attributes=attributes, max_timestamp=max_timestamp, crc=crc)
        stamped.append((pos, new))
        offset = new.next_offset
    return stamped


class RecordValidationError(KafkaError):
    """Kafka's RecordValidationException: an error plus per-record errors (Produce v8+ record_errors)."""

    def __init__(self, error: Errors, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(error, message)
        self.record_errors = record_errors


class RecordCheck(NamedTuple):
    """Proof that every record of ``data`` passed :func:`validate_records` under ``config``.

    It may be computed off the event loop (see :func:`prepare_client_records`); the log trusts it
    only for exactly this ``data`` object and this ``config`` object.
    """

    data: bytes | bytearray
    max_timestamps: tuple[int, ...]
    config: LogConfig | None = None


def decompressed_limit(config: LogConfig) -> int:
    return max(config.max_message_bytes, 1 << 20) * DECOMPRESSED_SIZE_FACTOR


def batch_payload(data: bytes | bytearray | memoryview, pos: int, header: BatchHeader, config: LogConfig) -> bytes:
    """The batch's records section, decompressed (bounded by :func:`decompressed_limit`)."""
    raw = memoryview(data)[pos + HEADER_SIZE : pos + header.size]
    try:
        codec = codec_of(header.compression)
    except UnsupportedCompressionError as exc:
        raise KafkaError(Errors.INVALID_RECORD, f"record batch at byte {pos}: {exc}") from None
    if codec is Compression.NONE:
        return bytes(raw)
    try:
        return decompress(codec, raw, decompressed_limit(config))
    except UnsupportedCompressionError as exc:
        raise KafkaError(Errors.INVALID_RECORD, str(exc)) from None
    except CompressionError as exc:
        if "exceeds the limit" in str(exc):
            raise KafkaError(
                Errors.MESSAGE_TOO_LARGE,
                f"record batch at byte {pos} decompresses to more than {decompressed_limit(config)} bytes",
            ) from None
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"record batch at byte {pos}: {codec.name.lower()} payload: {exc}") from None


def validate_records(data: bytes | bytearray, batches: Batches, config: LogConfig, where: str = "") -> RecordCheck:
    """Walk every record of every client batch as Kafka's LogValidator; raise Kafka's answer.

    Returns each batch's largest record timestamp, which Kafka writes into the batch header
    (a producer's own max timestamp is not trusted).
    """
    max_timestamps, _payloads = _walk(data, batches, config, where)
    return RecordCheck(data, max_timestamps, config)


def _walk(data: bytes | bytearray, batches: Batches, config: LogConfig, where: str) -> tuple[tuple[int, ...], list[bytes]]:
    """The checks of :func:`validate_records`; also each batch's records section, decompressed."""
    max_timestamps = []
    payloads = []
    for index, (pos, header) in enumerate(batches):
        payload = batch_payload(data, pos, header, config)
        result = scan(payload, header.records_count, header.base_timestamp)
        if result.code != ScanCode.OK:
            raise KafkaError(Errors.INVALID_RECORD, f"record batch {index}{where}: {_describe(result)}")
        if header.timestamp_type == 1:
            message = "Invalid timestamp type in message. Producer should not set timestamp type to LogAppendTime."
            raise RecordValidationError(
                Errors.INVALID_TIMESTAMP,
                "One or more records have been rejected due to invalid timestamp",
                [(i, message) for i in range(header.records_count)],
            )
        if config.compact and result.null_keys:
            message = f"Compacted topic cannot accept message without key in topic partition{where}."
            raise RecordValidationError(
                Errors.INVALID_RECORD,
                "One or more records have been rejected",
                [(i, message) for i in null_key_indexes(payload, header.records_count)],
            )
        max_timestamps.append(result.max_timestamp)
        payloads.append(payload)
    return tuple(max_timestamps), payloads


def prepare_client_records(
    data: bytes | bytearray, config: LogConfig, target_compression: int | None, where: str = ""
) -> RecordCheck:
    """Everything a produced batch costs before the append: header and record checks, recompression.

    Pure and thread-safe (it reads only its arguments), so the server runs it on a worker thread
    for batches that are large, compressed or to be recompressed. ``target_compression`` is the
    topic's codec when ``compression.type`` is not ``producer``; the recompressed batch keeps the
    records' timestamps and must still fit ``max.message.bytes`` (checked again at the append).
    """
    batches = validate_batches(data, config)
    max_timestamps, payloads = _walk(data, batches, config, where)
    if target_compression is None or all(h.compression == target_compression for _, h in batches):
        return RecordCheck(data, max_timestamps, config)
    recompressed = b"".join(
        recompress(data, pos, header, payload, target_compression)
        for (pos, header), payload in zip(batches, payloads, strict=True)
    )
    if len(recompressed) > config.max_message_bytes:
        raise KafkaError(
            Errors.MESSAGE_TOO_LARGE,
            f"record batch{where} recompressed to {len(recompressed)} bytes exceeds "
            f"max.message.bytes={config.max_message_bytes}",
        )
    return RecordCheck(recompressed, max_timestamps, config)


def recompress(data: bytes | bytearray, pos: int, header: BatchHeader, payload: bytes, codec: int) -> bytes:
    """The batch at ``pos`` with its records section (``payload``, decompressed and walked) in
    another codec; every other header field kept. Works on bytes: the records are already
    checked, so they are not decoded into objects and encoded again (which cost seconds for a
    batch of a million records)."""
    try:
        compressed = compress(codec, payload)
        attributes = (header.attributes & ~COMPRESSION_MASK) | codec_of(codec)
        return assemble_batch(
            base_offset=header.base_offset, partition_leader_epoch=header.partition_leader_epoch,
            attributes=attributes, last_offset_delta=header.last_offset_delta,
            base_timestamp=header.base_timestamp, max_timestamp=header.max_timestamp,
            producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence, records_count=header.records_count, payload=compressed,
        )
    except (CompressionError, ValueError) as exc:
        raise KafkaError(Errors.CORRUPT_MESSAGE, f"record batch at byte {pos} cannot be recompressed: {exc}") from None


def _describe(result: tuple[int, int, int, int, int, int]) -> str:
    code, index, a, b = result[:4]
    texts = {
        ScanCode.PREMATURE_EOF: "Incorrect declared batch size, premature EOF reached",
        ScanCode.RECORD_SIZE: f"Invalid record size: expected {a} bytes in record payload, "
        f"but instead the buffer has only {b} remaining bytes.",
        ScanCode.STRUCTURE: "Found invalid record structure",
        ScanCode.HEADER_COUNT: f"Found invalid number of record headers {a}",
        ScanCode.HEADER_KEY: f"Invalid negative header key size {a}",
        ScanCode.SIZE_MISMATCH: f"Invalid record size: expected to read {a} bytes in record payload, "
        f"but instead read {b}",
        ScanCode.OFFSET_DELTA: f"record has offset delta {a}, expected {index}",
        ScanCode.REMAINING: "Incorrect declared batch size, records still remaining in file",
        ScanCode.BAD_VARINT: "Found invalid record structure (record size varint too long)",
    }
    return f"record {index}: {texts[ScanCode(code)]}"
