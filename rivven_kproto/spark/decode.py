"""Fetch response records -> Arrow columns, in bulk, with read_committed filtering.

The Spark source turns every Fetch answer for one partition into one ``pyarrow.RecordBatch`` in
Spark's Kafka schema. Doing that record by record in Python costs microseconds per record, so the
work is split in two:

1. A Python pass over the batch *headers* (61 bytes each, one ``struct`` call): CRC check, the
   transaction filter (control batches are dropped; under read_committed, transactional batches of
   a producer are dropped between the first offset of one of its aborted transactions, as listed in
   the response, and its ABORT marker -- exactly Kafka's Java consumer), decompression, and a tight
   loop that only follows each record's length varint to find where records start.
2. Vectorised Arrow compute kernels over all records at once for every field: the timestamp and
   offset deltas and the key/value/header-count varints (two ``take`` calls and a lookup table
   for varints of up to two bytes), headers one header slot at a time, then key and value columns
   cut out of the decompressed bytes without a Python-level copy per record.

Every field position is checked against its record's bounds; a record that does not parse exactly
to its length (or any other inconsistency) sends the batch through the reference decoder
(:func:`rivven_kproto.codec.records.records.decode_batch`), so hostile bytes fail with the codec's
:class:`RecordFormatError`, never with an index error, and the fast path never has to be trusted
for correctness of malformed input.
"""

from __future__ import annotations

import array
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from rivven_kproto.codec.compression import Compression, codec_of, decompress
from rivven_kproto.codec.records.batch import HEADER_SIZE, BatchHeader, compute_crc
from rivven_kproto.codec.records.control import is_abort_marker
from rivven_kproto.codec.records.records import (
    MAGIC_V2,
    RecordBatch,
    RecordFormatError,
    decode_batch,
    iter_batch_positions,
)
from rivven_kproto.codec.records.visibility import Visibility
from rivven_kproto.codec.varint import VarintError, decode_varint

from .vectors import (
    ONE,
    PADDING,
    ZERO,
    FastPathError,
    all_true,
    check_lengths,
    cut,
    patterns,
    scan_records,
    varints,
)

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
_MAX_MS = ((1 << 63) - 1) // 1000  # timestamps in microseconds must fit an int64
_MIN_MS = -_MAX_MS


def kafka_arrow_schema(include_headers: bool) -> pa.Schema:
    """Spark's Kafka source schema, as Arrow (every field nullable, timestamps in UTC)."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


def select_batches(
    buf: bytes | memoryview, aborted: Iterable[tuple[int, int]] | None, read_committed: bool, *, verify_crc: bool = True
) -> tuple[list[tuple[int, BatchHeader]], int, int]:
    """(position, header) of the data batches a consumer may see, the next fetch offset, batches seen.

    A partial batch at the end (Fetch may cut one) is ignored; the next offset then stays at it.
    """
    view = memoryview(buf)
    visibility = Visibility(aborted, read_committed)
    shown: list[tuple[int, BatchHeader]] = []
    next_offset = -1
    seen = 0
    for pos, header in iter_batch_positions(view):
        if header.magic != MAGIC_V2:
            raise RecordFormatError(f"unsupported record batch magic {header.magic} at offset {header.base_offset}")
        if verify_crc and compute_crc(view, pos, header.size) != header.crc:
            raise RecordFormatError(f"CRC mismatch in the batch at offset {header.base_offset}")
        if header.last_offset_delta < 0 or header.records_count < 0:
            raise RecordFormatError(f"batch at offset {header.base_offset} has a negative offset delta or count")
        seen += 1
        next_offset = max(next_offset, header.next_offset)
        if visibility.shows(header, lambda: is_abort_marker(decode_batch(view, pos))):  # noqa: B023 - called at once
            shown.append((pos, header))
    return shown, next_offset, seen


def _headers_column(data: bytes, after_count: list[int], ends: list[int], counts: list[int]) -> pa.Array:
    """The headers of every record, parsed in Python (only records that have some cost anything)."""
    rows: list[list[dict[str, object]]] = []
    view = memoryview(data)
    try:
        for pos, stop, count in zip(after_count, ends, counts, strict=True):
            headers: list[dict[str, object]] = []
            for _ in range(count):
                key_length, pos = decode_varint(view, pos)
                if key_length < 0 or pos + key_length > stop:
                    raise FastPathError("bad header key")
                key = str(view[pos : pos + key_length], "utf-8")
                pos += key_length
                value_length, pos = decode_varint(view, pos)
                if value_length < -1 or pos + max(value_length, 0) > stop:
                    raise FastPathError("bad header value")
                value = None if value_length < 0 else bytes(view[pos : pos + value_length])
                pos += max(value_length, 0)
                headers.append({"key": key, "value": value})
            if pos != stop:
                raise FastPathError("bytes left after the headers")
            rows.append(headers)
    except (VarintError, UnicodeDecodeError):
        raise FastPathError("bad header") from None
    return pa.array(rows, HEADERS_TYPE)


MAX_VECTOR_HEADERS = 64  # more headers in one record: walk them in Python instead


def _walk_headers(
    data_array: pa.Array,
    data_buffer: pa.Buffer,
    limit: int,
    after_count: pa.Array,
    header_count: pa.Array,
    stop: pa.Array,
    build: bool,
) -> pa.Array | None:
    """Check every record's headers end exactly at the record's end, vectorised per header slot.

    Slot h holds the h-th header of every record that has more than h headers; those records are
    a subset of slot h-1's, so positions carry over with ``filter`` (Arrow has no scatter). With
    ``build`` the headers column is assembled too, ordered by (record, slot).
    """
    most = pc.max(header_count).as_py()
    records = pc.indices_nonzero(pc.greater(header_count, 0))
    position = pc.take(after_count, records)
    counts = pc.take(header_count, records)
    ends = pc.take(stop, records)
    pieces: list[tuple[pa.Array, pa.Array, pa.Array, pa.Array, pa.Array]] = []
    for slot in range(most):
        key_length, position = varints(data_array, position, 5)
        check_lengths(key_length, limit)
        if pc.min(key_length).as_py() < 0:
            raise FastPathError("null header key")
        key_begin = position
        position = pc.add(position, pc.cast(key_length, pa.int32()))
        value_length, position = varints(data_array, position, 5)
        check_lengths(value_length, limit)
        value_begin = position
        position = pc.add(position, pc.cast(pc.max_element_wise(value_length, 0), pa.int32()))
        if pc.any(pc.greater(position, ends)).as_py():
            raise FastPathError("header overruns its record")
        if build:
            key = pc.add(pc.multiply(pc.cast(records, pa.int64()), most), slot)
            pieces.append((key, key_begin, pc.cast(key_length, pa.int32()), value_begin,
                           pc.cast(value_length, pa.int32())))
        done = pc.equal(counts, slot + 1)
        if not all_true(pc.equal(pc.filter(position, done), pc.filter(ends, done))):
            raise FastPathError("bytes left after the headers")
        going = pc.invert(done)
        records, position, counts, ends = (pc.filter(a, going) for a in (records, position, counts, ends))
    if not build:
        return None
    order = pc.sort_indices(pa.concat_arrays([piece[0] for piece in pieces]))
    key_begin, key_length, value_begin, value_length = (
        pc.take(pa.concat_arrays([piece[i] for piece in pieces]), order) for i in range(1, 5)
    )
    total = len(order)
    patterns.grow(total)
    try:
        keys = pc.cast(cut(data_buffer, total, key_begin, key_length), pa.string())
    except pa.ArrowInvalid:
        raise FastPathError("header key is not UTF-8") from None
    values = cut(data_buffer, total, value_begin, value_length)
    entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), pc.cumulative_sum(pc.cast(header_count, pa.int32()))])
    return pa.ListArray.from_arrays(offsets, entries, type=HEADERS_TYPE)


def _empty_headers(n: int) -> pa.Array:
    offsets = pa.repeat(pa.scalar(0, pa.int32()), n + 1)
    return pa.ListArray.from_arrays(offsets, pa.array([], HEADERS_TYPE.value_type))


def _batch_payload(view: memoryview, pos: int, header: BatchHeader, max_decompressed: int) -> bytes | memoryview:
    payload = view[pos + HEADER_SIZE : pos + header.size]
    codec = codec_of(header.compression)
    if codec is Compression.NONE:
        return payload
    return decompress(codec, payload, max_decompressed)


@dataclass
class _Records:
    """Every record of the chosen batches, decoded into int32/int64 arrays (n records)."""

    data: bytes  # the records of every batch, concatenated (decompressed) and padded
    data_array: pa.Array  # ``data`` as uint8
    size: int  # bytes of records in ``data``, without the padding
    ends: list[int]
    stop: pa.Array  # end of each record
    ts_delta: pa.Array
    offset_delta: pa.Array
    key_begin: pa.Array
    key_length: pa.Array
    value_begin: pa.Array
    value_length: pa.Array
    header_count: pa.Array
    after_count: pa.Array  # where each record's headers start

    @property
    def n(self) -> int:
        return len(self.ends)


def _concat_payloads(
    view: memoryview, chosen: list[tuple[int, BatchHeader]], max_decompressed: int
) -> tuple[bytes, list[tuple[int, int, int]], int]:
    """The (decompressed) records of each batch in one padded buffer, with (start, end, count) each."""
    parts: list[bytes | memoryview] = []
    payloads: list[tuple[int, int, int]] = []
    at = 0
    for pos, header in chosen:
        payload = _batch_payload(view, pos, header, max_decompressed)
        parts.append(payload)
        payloads.append((at, at + len(payload), header.records_count))
        at += len(payload)
    if at >= 1 << 31:
        raise FastPathError("more than 2 GiB of records in one answer")
    parts.append(PADDING)
    return b"".join(parts), payloads, at


def _decode_records(data: bytes, payloads: list[tuple[int, int, int]], size: int) -> _Records:
    """Follow the record lengths, then decode every field of every record at once, with checks."""
    ends = scan_records(data, payloads)
    n = len(ends)
    patterns.grow(n)
    data_array = pa.Array.from_buffers(pa.uint8(), len(data), [None, pa.py_buffer(data)])
    stop = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(array.array("i", ends))])
    first = pa.concat_arrays([pa.array([0], pa.int32()), stop.slice(0, n - 1)])
    record_length, begin = varints(data_array, first, 5)
    if pc.min(record_length).as_py() <= 0 or not all_true(pc.equal(pc.add(begin, pc.cast(record_length, pa.int32())), stop)):
        raise FastPathError("bad record length")
    ts_delta, p = varints(data_array, pc.add(begin, ONE), 10)  # after the attributes byte
    offset_delta, p = varints(data_array, p, 5)
    key_length, key_begin = varints(data_array, p, 5)
    check_lengths(key_length, size)
    p = pc.add(key_begin, pc.cast(pc.max_element_wise(key_length, 0), pa.int32()))
    if pc.any(pc.greater(p, stop)).as_py():
        raise FastPathError("key overruns its record")
    value_length, value_begin = varints(data_array, p, 5)
    check_lengths(value_length, size)
    p = pc.add(value_begin, pc.cast(pc.max_element_wise(value_length, 0), pa.int32()))
    if pc.any(pc.greater(p, stop)).as_py():
        raise FastPathError("value overruns its record")
    header_count, p = varints(data_array, p, 5)
    if pc.min(header_count).as_py() < 0:
        raise FastPathError("negative header count")
    no_headers = pc.equal(header_count, 0)
    if not all_true(pc.equal(pc.filter(p, no_headers), pc.filter(stop, no_headers))):
        raise FastPathError("record length mismatch")
    return _Records(
        data, data_array, size, ends, stop, ts_delta, offset_delta, key_begin,
        pc.cast(key_length, pa.int32()), value_begin, pc.cast(value_length, pa.int32()), header_count, p,
    )


def _headers(records: _Records, build: bool) -> pa.Array | None:
    """The headers column (``build``), after checking every record's headers end at its end."""
    count = records.header_count
    most = pc.max(count).as_py()
    if most == 0:
        return _empty_headers(records.n) if build else None
    if most > MAX_VECTOR_HEADERS:
        return _headers_column(records.data, records.after_count.to_pylist(), records.ends, count.to_pylist())
    return _walk_headers(records.data_array, pa.py_buffer(records.data), records.size, records.after_count, count,
                         records.stop, build)


def decode_fast(
    buf: bytes | memoryview,
    shown: list[tuple[int, BatchHeader]],
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
    max_decompressed: int = 256 * 1024 * 1024,
) -> pa.RecordBatch | None:
    """Columns for every record of ``shown`` with start <= offset < end (None when there are none).

    Raises ``FastPathError`` for anything it does not handle; :func:`decode_rows` then falls
    back to :func:`decode_reference`.
    """
    chosen = [(p, h) for p, h in shown if h.last_offset >= start and h.base_offset < end and h.records_count > 0]
    if not chosen:
        return None
    records = _decode_records(*_concat_payloads(memoryview(buf), chosen, max_decompressed))
    headers = _headers(records, include_headers)
    n = records.n
    run_ends = pa.array(list(itertools.accumulate(h.records_count for _, h in chosen)), pa.int32())

    def per_record(values: list[int], kind: pa.DataType) -> pa.Array:
        """A batch-level value repeated for each record of its batch."""
        return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(run_ends, pa.array(values, kind)))

    if pc.min(records.offset_delta).as_py() < 0 or pc.any(
        pc.greater(records.offset_delta, per_record([h.last_offset_delta for _, h in chosen], pa.int64()))
    ).as_py():
        raise FastPathError("offset delta outside the batch")
    offsets = pc.add(per_record([h.base_offset for _, h in chosen], pa.int64()), records.offset_delta)
    timestamps = pc.add(per_record([h.base_timestamp for _, h in chosen], pa.int64()), records.ts_delta)
    ts_types = [h.timestamp_type for _, h in chosen]
    if any(ts_types):  # LogAppendTime: every record carries its batch's max_timestamp
        log_append = pc.equal(per_record(ts_types, pa.int32()), ONE)
        timestamps = pc.if_else(log_append, per_record([h.max_timestamp for _, h in chosen], pa.int64()), timestamps)
        ts_type_column = per_record(ts_types, pa.int32())
    else:
        ts_type_column = pa.repeat(ZERO, n)
    try:
        micros = pc.cast(pc.multiply_checked(timestamps, 1000), pa.timestamp("us", tz="UTC"))
    except pa.ArrowInvalid:
        raise FastPathError("timestamp out of range") from None
    data_buffer = pa.py_buffer(records.data)
    columns = [
        cut(data_buffer, n, records.key_begin, records.key_length),
        cut(data_buffer, n, records.value_begin, records.value_length),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        offsets,
        micros,
        ts_type_column,
    ]
    if include_headers:
        columns.append(headers)
    rows = pa.RecordBatch.from_arrays(columns, schema=kafka_arrow_schema(include_headers))
    if chosen[0][1].base_offset < start or chosen[-1][1].last_offset >= end:
        rows = rows.filter(pc.and_(pc.greater_equal(offsets, start), pc.less(offsets, end)))
    return rows if rows.num_rows else None


def decode_reference(
    buf: bytes | memoryview,
    shown: list[tuple[int, BatchHeader]],
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    """The same columns through the codec's record-by-record decoder (slow, strict)."""
    view = memoryview(buf)
    columns: dict[str, list[object]] = {name: [] for name in kafka_arrow_schema(include_headers).names}
    for pos, _ in shown:
        batch: RecordBatch = decode_batch(view, pos)
        for offset, timestamp, record in batch.iter_absolute():
            if not start <= offset < end:
                continue
            columns["key"].append(record.key)
            columns["value"].append(record.value)
            columns["topic"].append(topic)
            columns["partition"].append(partition)
            columns["offset"].append(offset)
            if not _MIN_MS <= timestamp <= _MAX_MS:
                raise RecordFormatError(f"timestamp {timestamp} of offset {offset} is out of range")
            columns["timestamp"].append(timestamp * 1000)
            columns["timestampType"].append(batch.timestamp_type)
            if include_headers:
                columns["headers"].append([{"key": k, "value": v} for k, v in record.headers])
    if not columns["offset"]:
        return None
    schema = kafka_arrow_schema(include_headers)
    return pa.RecordBatch.from_arrays(
        [pa.array(columns[f.name], f.type) for f in schema], schema=schema
    )


def decode_rows(
    buf: bytes | memoryview,
    shown: list[tuple[int, BatchHeader]],
    *,
    topic: str,
    partition: int,
    start: int,
    end: int,
    include_headers: bool,
) -> pa.RecordBatch | None:
    """Rows of the batches :func:`select_batches` chose, with start <= offset < end."""
    kwargs = dict(topic=topic, partition=partition, start=start, end=end, include_headers=include_headers)
    try:
        return decode_fast(buf, shown, **kwargs)  # type: ignore[arg-type]
    except FastPathError:
        return decode_reference(buf, shown, **kwargs)  # type: ignore[arg-type]
