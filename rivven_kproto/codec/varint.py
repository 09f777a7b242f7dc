"""Kafka's variable-length integers (protobuf-style base-128, little-endian groups of 7 bits).

* unsigned varint: uint32, at most 5 bytes (compact lengths and tagged fields in flexible messages);
* varint: int32, zigzag-mapped then as unsigned (record fields: lengths, offset delta);
* varlong: int64, zigzag-mapped, at most 10 bytes (record timestamp delta).

Decoders take ``(buf, pos)`` and return ``(value, new_pos)``. Input is untrusted, so they stop after
the maximum number of bytes for the type, reject values that do not fit it, and raise
``VarintError`` (never IndexError) when the buffer ends mid-number.
"""

from __future__ import annotations

Buffer = bytes | bytearray | memoryview

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1
UINT64_MAX = (1 << 64) - 1
MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10


class VarintError(ValueError):
    """A truncated, over-long or out-of-range variable-length integer."""


def _decode(buf: Buffer, pos: int, max_bytes: int, max_value: int) -> tuple[int, int]:
    end = len(buf)
    if pos >= end:
        raise VarintError(f"truncated varint at byte {pos}")
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    value = byte & 0x7F
    shift = 7
    start = pos
    pos += 1
    while True:
        if pos >= end:
            raise VarintError(f"truncated varint at byte {start}")
        if pos - start >= max_bytes:
            raise VarintError(f"varint longer than {max_bytes} bytes at byte {start}")
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            break
        shift += 7
    if value > max_value:
        raise VarintError(f"varint value {value} out of range at byte {start}")
    return value, pos


def zigzag(value: int, bits: int) -> int:
    """The unsigned form a signed ``bits``-wide value travels as."""
    return ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)


def unzigzag(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)


def encode_raw(value: int) -> bytes:
    """Base-128 groups of a non-negative value the caller has range-checked."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_unsigned_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Unsigned 32-bit varint at ``pos``."""
    return _decode(buf, pos, MAX_VARINT_BYTES, UINT32_MAX)


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Zigzag-encoded signed 32-bit varint at ``pos``."""
    raw, pos = _decode(buf, pos, MAX_VARINT_BYTES, UINT32_MAX)
    return unzigzag(raw), pos


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Zigzag-encoded signed 64-bit varlong at ``pos``."""
    raw, pos = _decode(buf, pos, MAX_VARLONG_BYTES, UINT64_MAX)
    return unzigzag(raw), pos


def encode_unsigned_varint(value: int) -> bytes:
    if not 0 <= value <= UINT32_MAX:
        raise VarintError(f"unsigned varint out of range: {value}")
    return encode_raw(value)


def encode_varint(value: int) -> bytes:
    if not INT32_MIN <= value <= INT32_MAX:
        raise VarintError(f"varint out of int32 range: {value}")
    return encode_raw(zigzag(value, 32))


def encode_varlong(value: int) -> bytes:
    if not INT64_MIN <= value <= INT64_MAX:
        raise VarintError(f"varlong out of int64 range: {value}")
    return encode_raw(zigzag(value, 64))


def unsigned_varint_size(value: int) -> int:
    """Bytes ``encode_unsigned_varint(value)`` would produce (for size prefixes)."""
    size = 1
    while value > 0x7F:
        value >>= 7
        size += 1
    return size


def varint_size(value: int) -> int:
    return unsigned_varint_size(zigzag(value, 32))


def varlong_size(value: int) -> int:
    return unsigned_varint_size(zigzag(value, 64))
