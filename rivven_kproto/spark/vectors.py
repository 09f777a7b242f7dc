"""Vectorised primitives over a buffer of record bytes, with Arrow compute kernels.

Positions are int32 arrays into one padded ``uint8`` array; every function checks what it reads
against the buffer and raises :class:`FastPathError` for anything it will not decide itself, so
that the caller can fall back to the codec's reference decoder.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from rivven_kproto.codec.varint import VarintError, decode_varint

_MAX_SAFE = 1 << 62
PADDING = b"\0" * 16  # appended to the buffer: reading a varint's second byte never indexes past the end


def _zigzag(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)


def _build_tables() -> tuple[list[int], pa.Array, pa.Array]:
    """Lookups for one- and two-byte varints.

    ``lengths[raw]``: the zigzag-decoded value of a raw varint below 2**14 (a Python list, for the
    record scan). ``values``/``sizes`` (Arrow arrays) are indexed by the two little-endian bytes
    ``lo | hi << 8`` found at a varint's position: its decoded value and its size in bytes
    (0 = longer than two bytes).
    """
    lengths = [_zigzag(raw) for raw in range(1 << 14)]
    values = []
    sizes = []
    for index in range(1 << 16):
        lo, hi = index & 0xFF, index >> 8
        if lo < 0x80:
            values.append(lengths[lo])
            sizes.append(1)
        elif hi < 0x80:
            values.append(lengths[(lo & 0x7F) | (hi << 7)])
            sizes.append(2)
        else:
            values.append(0)
            sizes.append(0)
    return lengths, pa.array(values, pa.int32()), pa.array(sizes, pa.int32())


class _Patterns:
    """Cached index arrays, sliced (zero-copy) to the length asked for."""

    def __init__(self) -> None:
        self.size = 0
        self.tables: tuple[list[int], pa.Array, pa.Array] | None = None

    def grow(self, n: int) -> None:
        if n <= self.size:
            return
        size = max(n, 2 * self.size, 4096)
        one = pa.scalar(1, pa.int32())
        arange = pc.subtract(pc.cumulative_sum(pa.repeat(one, 2 * size)), one)  # 0 .. 2*size-1
        self.half = pc.shift_right(arange, one)  # 0 0 1 1 2 2 ...
        self.odd = pc.bit_wise_and(arange, one)  # 0 1 0 1 ...
        self.even = pc.shift_left(arange.slice(0, size), one)  # 0 2 4 ...
        self.size = size

    def lookup(self) -> tuple[list[int], pa.Array, pa.Array]:
        if self.tables is None:
            self.tables = _build_tables()
        return self.tables


patterns = _Patterns()
ONE = pa.scalar(1, pa.int32())
ZERO = pa.scalar(0, pa.int32())


def all_true(mask: pa.Array) -> bool:
    """True when every element is true (also for an empty array, where Arrow's ``all`` is null)."""
    value = pc.all(mask).as_py()
    return value is None or bool(value)


class FastPathError(Exception):
    """The vectorised decoder met something it does not handle; use the reference decoder."""


def varints(data: pa.Array, pos: pa.Array, max_bytes: int) -> tuple[pa.Array, pa.Array]:
    """Zigzag varints starting at every position: (values as int64, positions after them as int32)."""
    _, value2, size2 = patterns.lookup()
    try:
        lo = pc.cast(pc.take(data, pos), pa.int32())
        hi = pc.cast(pc.take(data, pc.add(pos, ONE)), pa.int32())
    except (pa.ArrowIndexError, IndexError):
        raise FastPathError("varint beyond the data") from None
    index = pc.bit_wise_or(lo, pc.shift_left(hi, pa.scalar(8, pa.int32())))
    size = pc.take(size2, index)
    if pc.min(size).as_py() > 0:
        return pc.cast(pc.take(value2, index), pa.int64()), pc.add(pos, size)
    return _long_varints(data, pos, max_bytes)


def _long_varints(data: pa.Array, pos: pa.Array, max_bytes: int) -> tuple[pa.Array, pa.Array]:
    """The general case: any length up to ``max_bytes``, one ``take`` per byte position."""
    pos64 = pc.cast(pos, pa.int64())
    limit = len(data) - 1
    byte = pc.take(data, pos64)
    raw = pc.cast(pc.bit_wise_and(byte, 0x7F), pa.int64())
    going = pc.greater_equal(byte, 0x80)
    after = pc.add(pos64, 1)
    for k in range(1, max_bytes + 1):
        if not pc.any(going).as_py():
            break
        if k == max_bytes:
            raise FastPathError("varint too long")
        index = pc.if_else(going, pc.add(pos64, k), 0)
        if pc.max(index).as_py() > limit:
            raise FastPathError("varint beyond the data")
        byte = pc.take(data, index)
        part = pc.shift_left(pc.cast(pc.bit_wise_and(byte, 0x7F), pa.int64()), 7 * k)
        raw = pc.if_else(going, pc.bit_wise_or(raw, part), raw)
        after = pc.if_else(going, pc.add(pos64, k + 1), after)
        going = pc.and_(going, pc.greater_equal(byte, 0x80))
    limit_raw = 0xFFFFFFFF if max_bytes <= 5 else _MAX_SAFE - 1
    if pc.max(raw).as_py() > limit_raw or pc.min(raw).as_py() < 0:
        raise FastPathError("varint out of the fast path's range")
    value = pc.bit_wise_xor(pc.shift_right(raw, 1), pc.negate(pc.bit_wise_and(raw, 1)))
    return value, pc.cast(after, pa.int32())


def scan_records(data: bytes, payloads: list[tuple[int, int, int]]) -> list[int]:
    """End of every record, following only the length varints (the one sequential step).

    ``payloads`` holds (start, end, record count) of each batch's records in ``data``; they are
    contiguous, so a record starts where the previous one ended. Lengths are checked afterwards,
    vectorised (positive, and each batch's records must end exactly at the batch's end).
    """
    lengths, _, _ = patterns.lookup()
    ends: list[int] = []
    add = ends.append
    try:
        for pos, stop, count in payloads:
            for _ in range(count):
                b = data[pos]
                if b < 0x80:
                    pos += 1 + lengths[b]
                else:
                    c = data[pos + 1]
                    if c < 0x80:
                        pos += 2 + lengths[(b & 0x7F) | (c << 7)]
                    else:
                        length, pos = decode_varint(data, pos)
                        pos += length
                add(pos)
            if pos != stop:
                raise FastPathError("records do not fill their batch")
    except (IndexError, VarintError):
        raise FastPathError("bad record length") from None
    return ends


def check_lengths(lengths: pa.Array, limit: int) -> None:
    low, high = pc.min_max(lengths).values()
    if low.as_py() < -1 or high.as_py() > limit:
        raise FastPathError("key or value length out of range")


def cut(data_buffer: pa.Buffer, n: int, begin: pa.Array, length: pa.Array) -> pa.Array:
    """Binary column of data[begin_i : begin_i + length_i], null where length_i == -1."""
    if pc.max(length).as_py() < 0:  # all null (records without keys)
        return pa.nulls(n, pa.binary())
    size = pc.max_element_wise(length, ZERO)
    half = patterns.half.slice(0, 2 * n)
    # Offsets b0 s0 b1 s1 ... (s = b + size) are monotone: even elements are the values, odd ones
    # the bytes between them; one take of the even elements compacts the values.
    spread_offsets = pc.add(pc.take(begin, half), pc.multiply(pc.take(size, half), patterns.odd.slice(0, 2 * n)))
    last = pc.add(begin.slice(n - 1, 1), size.slice(n - 1, 1))
    offsets = pa.concat_arrays([spread_offsets, pc.cast(last, pa.int32())])
    spread = pa.Array.from_buffers(pa.binary(), 2 * n, [None, offsets.buffers()[1], data_buffer])
    values = pc.take(spread, patterns.even.slice(0, n))
    if pc.min(length).as_py() >= 0:
        return values
    valid = pc.not_equal(length, -1)
    null_count = n - pc.sum(pc.cast(valid, pa.int32())).as_py()
    buffers = values.buffers()
    return pa.Array.from_buffers(pa.binary(), n, [valid.buffers()[1], buffers[1], buffers[2]], null_count)
