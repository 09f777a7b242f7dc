"""Fuzz targets: each takes bytes and returns whether the input was accepted, or raises for a bug.

A bug is any exception other than the documented refusal (``ProtocolError`` for frames and
requests, ``KafkaError`` for batches), a request whose re-encoding is not stable, or a batch the
validator accepts that an independent decoder (kio's record field readers, which follow Java's
DefaultRecord: int8 attributes, header keys as bytes) cannot read as ``count`` records with offset
deltas 0..count-1 filling the records section exactly, or whose max timestamp differs.
(kafka-python's parser is not used: it reads the attributes byte as a varint and insists on UTF-8
header keys, so it rejects records Kafka accepts; kio's nullable-bytes helper refuses lengths below
-1, which Java reads as null, so lengths are read here with kio's varint reader and Java's rule.) The compiled
record scan is also compared with the pure-Python reference on every batch.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable

from kio.serial.readers import read_int8, read_signed_varint, read_signed_varlong

import rivven_kproto.codec.messages  # noqa: F401 - registers every request declaration
from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.validation import batch_payload, validate_batches, validate_records
from rivven_kproto.codec.compression import Compression, compress
from rivven_kproto.codec.connection import ProtocolError, ServerConnection, decode_request, encode_request
from rivven_kproto.codec.errors import KafkaError
from rivven_kproto.codec.headers import RequestHeader, request_header_version
from rivven_kproto.codec.records import scan as scan_module
from rivven_kproto.codec.records.batch import parse_header
from rivven_kproto.codec.records.records import assemble_batch
from rivven_kproto.codec.records.scan import scan_python
from rivven_kproto.codec.schema import REQUESTS, Request

MAX_FRAME = 1 << 20
BASE_TIMESTAMP = 1_700_000_000_000
CODECS = (Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD)
_LOG_CONFIG = LogConfig()
_BATCH_FIELDS = struct.Struct(">Bii")  # codec selector, records_count, last_offset_delta


class Finding(AssertionError):
    """A fuzz input exposed a bug; the message says which property broke."""


def request_choices() -> list[tuple[type[Request], int]]:
    return [
        (cls, version)
        for _, cls in sorted(REQUESTS.items())
        for version in range(cls.VALID_VERSIONS.low, cls.VALID_VERSIONS.high + 1)
    ]


REQUEST_CHOICES = request_choices()


def frame_target(data: bytes) -> bool:
    """Raw bytes from a socket: frames are cut and decoded, or the connection is refused."""
    connection = ServerConnection(MAX_FRAME)
    connection.receive_data(data)
    decoded = False
    try:
        while connection.next_event() is not None:
            decoded = True
    except ProtocolError:
        return False
    return decoded


def request_header(cls: type[Request], version: int) -> bytes:
    stream = io.BytesIO()
    header = RequestHeader(request_api_key=cls.API_KEY, request_api_version=version, correlation_id=7, client_id="fuzz")
    header.encode_into(stream, request_header_version(cls, version))
    return stream.getvalue()


def request_target(data: bytes) -> bool:
    """Two selector bytes pick a (request, version); the rest is its body."""
    if len(data) < 2:
        return False
    cls, version = REQUEST_CHOICES[int.from_bytes(data[:2], "big") % len(REQUEST_CHOICES)]
    try:
        event = decode_request(request_header(cls, version) + data[2:])
    except ProtocolError:
        return False
    if event.request is None:
        return False
    once = encode_request(event.header, event.request)
    try:
        again = encode_request(event.header, decode_request(once[4:]).request)  # type: ignore[arg-type]
    except ProtocolError as exc:
        raise Finding(f"{cls.__name__} v{version}: our own encoding of a decoded request does not decode: {exc}") from exc
    if again != once:
        raise Finding(f"{cls.__name__} v{version}: decode/encode is not stable")
    return True


def batch_from(data: bytes) -> bytes | None:
    """Fuzz bytes -> a batch with a correct length and CRC, so the record walk itself is exercised.

    The first byte picks how the rest becomes the records section: 0-4 compress it with that codec
    (the decompressed records are fuzzed), 5-9 take it as already compressed bytes of codec 0-4,
    10 sets the codec bits to 5-7; then int32 records_count and last_offset_delta.
    """
    if len(data) < _BATCH_FIELDS.size:
        return None
    selector, count, last_offset_delta = _BATCH_FIELDS.unpack_from(data)
    payload = data[_BATCH_FIELDS.size :]
    mode = selector % 11
    if mode < 5:
        attributes, payload = int(CODECS[mode]), compress(CODECS[mode], payload)
    elif mode < 10:
        attributes = int(CODECS[mode - 5])
    else:
        attributes = 5 + selector % 3
    return assemble_batch(
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=attributes | (selector & 0x10),  # sometimes the transactional bit
        last_offset_delta=last_offset_delta,
        base_timestamp=BASE_TIMESTAMP,
        max_timestamp=BASE_TIMESTAMP,
        producer_id=-1 if not selector & 0x10 else 1,
        producer_epoch=-1 if not selector & 0x10 else 0,
        base_sequence=-1 if not selector & 0x10 else 0,
        records_count=count,
        payload=payload,
    )


def batch_target(data: bytes) -> bool:
    batch = batch_from(data)
    if batch is None:
        return False
    try:
        batches = validate_batches(batch, _LOG_CONFIG)
        _compare_scans(batch)
        check = validate_records(batch, batches, _LOG_CONFIG)
    except KafkaError:
        return False
    header = parse_header(batch)
    payload = batch_payload(batch, 0, header, _LOG_CONFIG)
    try:
        timestamps = kio_record_timestamps(payload, header.records_count, header.base_timestamp)
    except Exception as exc:  # noqa: BLE001 - any failure of the independent decoder is the finding
        raise Finding(f"accepted a batch kio's readers cannot read: {exc!r}") from exc
    if check.max_timestamps[0] != max(timestamps, default=-1):
        raise Finding(f"max timestamp {check.max_timestamps[0]}, kio's readers say {max(timestamps, default=-1)}")
    return True


def kio_record_timestamps(payload: bytes, count: int, base_timestamp: int) -> list[int]:
    """Read ``count`` records with kio's field readers; raise unless they are exactly well formed."""
    view = memoryview(payload)
    position = 0
    timestamps = []
    for index in range(count):
        length, size = read_signed_varint(view, position)
        start = position = position + size
        if length < 0 or start + length > len(payload):
            raise ValueError(f"record {index}: length {length}")
        _, size = read_int8(view, position)
        position += size
        delta, size = read_signed_varlong(view, position)
        position += size
        offset_delta, size = read_signed_varint(view, position)
        position += size
        if offset_delta != index:
            raise ValueError(f"record {index}: offset delta {offset_delta}")
        for _ in range(2):  # key, value
            position = _skip_bytes(view, position)
        header_count, size = read_signed_varint(view, position)
        position += size
        if header_count < 0:
            raise ValueError(f"record {index}: {header_count} headers")
        for _ in range(header_count):
            key_length, _ = read_signed_varint(view, position)
            if key_length < 0:
                raise ValueError(f"record {index}: header key length {key_length}")
            position = _skip_bytes(view, _skip_bytes(view, position))
        if position != start + length:
            raise ValueError(f"record {index}: read {position - start} of {length} bytes")
        timestamps.append(((base_timestamp + delta + (1 << 63)) % (1 << 64)) - (1 << 63))
    if position != len(payload):
        raise ValueError(f"{len(payload) - position} bytes after the last record")
    return timestamps


def _skip_bytes(view: memoryview, position: int) -> int:
    """A varint length and that many bytes; a negative length is null (Java's DefaultRecord)."""
    length, size = read_signed_varint(view, position)
    position += size
    if length < 0:
        return position
    if position + length > len(view):
        raise ValueError(f"{length} bytes past the end")
    return position + length


def _compare_scans(batch: bytes) -> None:
    compiled = scan_module._compiled_scan
    if compiled is None:
        return
    header = parse_header(batch)
    payload = batch_payload(batch, 0, header, _LOG_CONFIG)
    ours = tuple(compiled(payload, header.records_count, header.base_timestamp))
    reference = tuple(scan_python(payload, header.records_count, header.base_timestamp))
    if ours != reference:
        raise Finding(f"compiled scan {ours} != reference {reference}")


TARGETS: dict[str, Callable[[bytes], bool]] = {
    "frame": frame_target,
    "request": request_target,
    "batch": batch_target,
}
