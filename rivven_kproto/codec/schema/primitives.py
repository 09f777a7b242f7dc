"""Kafka's wire primitives as bounded ``construct`` classes.

construct's own ``VarInt`` is unbounded and its compiled parsers trust their input, so the
variable-length types that Kafka uses are written here as small ``Construct`` subclasses that
check every length against the bytes that remain *before* reading or allocating.
"""

from __future__ import annotations

import io
import threading
import uuid
from collections.abc import Callable
from typing import Any

from construct import (
    Construct,
    Flag,
    Float64b,
    Int8sb,
    Int16sb,
    Int16ub,
    Int32sb,
    Int32ub,
    Int64sb,
    SizeofError,
    StreamError,
    ValidationError,
    stream_read,
    stream_write,
)

from rivven_kproto.codec.splice import ExternalBytes
from rivven_kproto.codec.varint import encode_raw, unzigzag, zigzag

__all__ = [
    "Int8sb",
    "Int16sb",
    "Int16ub",
    "Int32sb",
    "Int32ub",
    "Int64sb",
    "Float64b",
    "Flag",
    "UVarInt",
    "VarInt",
    "UuidCon",
    "StringCon",
    "BytesCon",
    "ArrayCon",
    "CachedArray",
    "NullableStructCon",
    "remaining",
]

MAX_ARRAY_OF_EMPTY = 10_000


class _ElementBudget(threading.local):
    remaining: int | None = None


_budget = _ElementBudget()


class element_budget:  # noqa: N801 (used as ``with element_budget(limit):``, like a contextmanager)
    """Within this block (on this thread), decoding more than ``limit`` array elements in total fails.

    Every element costs Python work however small it is on the wire, so the server bounds the
    elements of one request instead of letting a few MiB of empty names cost minutes of CPU.
    A class rather than a generator context manager: it is entered for every request decoded.
    """

    __slots__ = ("_limit", "_previous")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._previous: int | None = None

    def __enter__(self) -> None:
        self._previous, _budget.remaining = _budget.remaining, self._limit

    def __exit__(self, *exc_info: object) -> None:
        _budget.remaining = self._previous


def remaining(stream: io.BytesIO) -> int:
    """Bytes left in the stream: the bound every length is checked against."""
    pos = stream.tell()
    end = stream.seek(0, io.SEEK_END)
    stream.seek(pos)
    return end - pos


class UVarInt(Construct):  # type: ignore[misc]
    """Unsigned LEB128 varint, at most ``max_bytes`` long (5 for int32, 10 for int64)."""

    def __init__(self, max_bytes: int = 5) -> None:
        super().__init__()
        self.max_bytes = max_bytes
        self.limit = 1 << (32 if max_bytes <= 5 else 64)

    def _parse(self, stream: io.BytesIO, context: Any, path: str) -> int:
        result = 0
        for shift in range(0, 7 * self.max_bytes, 7):
            raw = stream.read(1)
            if not raw:
                raise StreamError("truncated varint", path=path)
            byte = raw[0]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if result >= self.limit:
                    raise ValidationError("varint out of range", path=path)
                return result
        raise ValidationError(f"varint longer than {self.max_bytes} bytes", path=path)

    def _build(self, obj: int, stream: io.BytesIO, context: Any, path: str) -> int:
        if not isinstance(obj, int) or obj < 0 or obj >= self.limit:
            raise ValidationError(f"unsigned varint out of range: {obj!r}", path=path)
        out = encode_raw(obj)
        stream_write(stream, out, len(out), path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError("varint has no fixed size", path=path)


class VarInt(Construct):  # type: ignore[misc]
    """Zigzag-encoded signed varint (5 bytes) or varlong (10 bytes)."""

    def __init__(self, max_bytes: int = 5) -> None:
        super().__init__()
        self.raw = UVarInt(max_bytes)
        self.bits = 32 if max_bytes == 5 else 64

    def _parse(self, stream: io.BytesIO, context: Any, path: str) -> int:
        return unzigzag(self.raw._parse(stream, context, path))

    def _build(self, obj: int, stream: io.BytesIO, context: Any, path: str) -> int:
        bound = 1 << (self.bits - 1)
        if not isinstance(obj, int) or not -bound <= obj < bound:
            raise ValidationError(f"varint out of range: {obj!r}", path=path)
        self.raw._build(zigzag(obj, self.bits), stream, context, path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError("varint has no fixed size", path=path)


_UVARINT32 = UVarInt(5)


def _read_length(stream: io.BytesIO, compact: bool, wide: bool, path: str) -> int:
    """Length prefix: int16/int32 classic, or unsigned varint holding length + 1 when compact."""
    if compact:
        return int(_UVARINT32._parse(stream, None, path)) - 1
    if wide:
        return int(Int32sb._parse(stream, None, path))
    return int(Int16sb._parse(stream, None, path))


def _write_length(stream: io.BytesIO, length: int, compact: bool, wide: bool, path: str) -> None:
    if compact:
        _UVARINT32._build(length + 1, stream, None, path)
    elif wide:
        Int32sb._build(length, stream, None, path)
    else:
        Int16sb._build(length, stream, None, path)


def _checked_length(stream: io.BytesIO, length: int, nullable: bool, path: str) -> int | None:
    if length == -1 and nullable:
        return None
    if length < 0:
        raise ValidationError(f"negative length {length} for a non-nullable field", path=path)
    if length > remaining(stream):
        raise StreamError(f"length {length} runs past the end of the frame", path=path)
    return length


class StringCon(Construct):  # type: ignore[misc]
    """string / nullable string / compact (nullable) string, UTF-8."""

    def __init__(self, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.compact = compact
        self.nullable = nullable

    def _parse(self, stream: io.BytesIO, context: Any, path: str) -> str | None:
        length = _checked_length(stream, _read_length(stream, self.compact, False, path), self.nullable, path)
        if length is None:
            return None
        try:
            return stream_read(stream, length, path).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"invalid UTF-8 in string: {exc}", path=path) from None

    def _build(self, obj: str | None, stream: io.BytesIO, context: Any, path: str) -> str | None:
        if obj is None:
            if not self.nullable:
                raise ValidationError("null given for a non-nullable string", path=path)
            _write_length(stream, -1, self.compact, False, path)
            return obj
        if not isinstance(obj, str):
            raise ValidationError(f"expected str, got {type(obj).__name__}", path=path)
        data = obj.encode("utf-8")
        if not self.compact and len(data) > 0x7FFF:
            raise ValidationError("string longer than 32767 bytes", path=path)
        _write_length(stream, len(data), self.compact, False, path)
        stream_write(stream, data, len(data), path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError("strings have no fixed size", path=path)


class BytesCon(Construct):  # type: ignore[misc]
    """bytes / nullable bytes / records, classic int32 length or compact."""

    def __init__(self, compact: bool, nullable: bool) -> None:
        super().__init__()
        self.compact = compact
        self.nullable = nullable

    def _parse(self, stream: io.BytesIO, context: Any, path: str) -> bytes | None:
        length = _checked_length(stream, _read_length(stream, self.compact, True, path), self.nullable, path)
        if length is None:
            return None
        return stream_read(stream, length, path)

    def _build(self, obj: bytes | None, stream: io.BytesIO, context: Any, path: str) -> bytes | None:
        if obj is None:
            if not self.nullable:
                raise ValidationError("null given for non-nullable bytes", path=path)
            _write_length(stream, -1, self.compact, True, path)
            return obj
        if isinstance(obj, ExternalBytes):
            # Only the length is written here; the bytes go in when the frame is sent.
            splice = getattr(stream, "splice", None)
            if splice is None:
                raise ValidationError("external bytes need a splicing encoder (encode_response_frame)", path=path)
            _write_length(stream, obj.size, self.compact, True, path)
            splice(obj)
            return obj
        if not isinstance(obj, bytes | bytearray | memoryview):
            raise ValidationError(f"expected bytes, got {type(obj).__name__}", path=path)
        size = len(obj) if not isinstance(obj, memoryview) else obj.nbytes
        _write_length(stream, size, self.compact, True, path)
        stream.write(obj)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError("bytes have no fixed size", path=path)


class UuidCon(Construct):  # type: ignore[misc]
    """16 raw bytes as ``uuid.UUID``."""

    def _parse(self, stream: io.BytesIO, context: Any, path: str) -> uuid.UUID:
        return uuid.UUID(bytes=stream_read(stream, 16, path))

    def _build(self, obj: uuid.UUID, stream: io.BytesIO, context: Any, path: str) -> uuid.UUID:
        if not isinstance(obj, uuid.UUID):
            raise ValidationError(f"expected uuid.UUID, got {type(obj).__name__}", path=path)
        stream_write(stream, obj.bytes, 16, path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        return 16


class CachedArray:
    """An array value encoded once per structure (message version) and then written as bytes.

    For big arrays that a broker answers again and again unchanged (a topic's partitions in
    Metadata): building thousands of element objects and encoding them on every request is what
    made a 10,000-partition Metadata cost ~100 ms. ``items`` makes the elements when first needed.
    """

    __slots__ = ("_items", "_encodings")

    def __init__(self, items: Callable[[], list[Any]]) -> None:
        self._items = items
        self._encodings: dict[int, bytes] = {}

    def encoding(self, con: ArrayCon, context: Any, path: str) -> bytes:
        key = id(con)  # structures are cached per (version, flexible) for the life of the process
        data = self._encodings.get(key)
        if data is None:
            buffer = io.BytesIO()
            con._build(self._items(), buffer, context, path)
            data = self._encodings[key] = buffer.getvalue()
        return data


class ArrayCon(Construct):  # type: ignore[misc]
    """Classic (int32 count) or compact (uvarint count + 1) array, optionally nullable.

    The count is checked against the remaining bytes before any element is read, because every
    element occupies at least one byte; elements that can encode to zero bytes get a fixed cap.
    """

    def __init__(self, element: Construct, compact: bool, nullable: bool, zero_size_possible: bool) -> None:
        super().__init__()
        self.element = element
        self.compact = compact
        self.nullable = nullable
        self.zero_size_possible = zero_size_possible

    def _parse(self, stream: io.BytesIO, context: Any, path: str) -> list[Any] | None:
        count = _read_length(stream, self.compact, True, path)
        if count == -1 and self.nullable:
            return None
        if count < 0:
            raise ValidationError(f"negative array length {count}", path=path)
        bound = MAX_ARRAY_OF_EMPTY if self.zero_size_possible else remaining(stream)
        if count > bound:
            raise StreamError(f"array of {count} elements cannot fit in the frame", path=path)
        if _budget.remaining is not None:
            _budget.remaining -= count
            if _budget.remaining < 0:
                raise StreamError("more array elements than one request may carry", path=path)
        parse = self.element._parse
        return [parse(stream, context, path) for _ in range(count)]

    def _build(self, obj: list[Any] | CachedArray | None, stream: io.BytesIO, context: Any, path: str) -> Any:
        if isinstance(obj, CachedArray):
            stream.write(obj.encoding(self, context, path))
            return obj
        if obj is None:
            if not self.nullable:
                raise ValidationError("null given for a non-nullable array", path=path)
            _write_length(stream, -1, self.compact, True, path)
            return obj
        _write_length(stream, len(obj), self.compact, True, path)
        build = self.element._build
        for item in obj:
            build(item, stream, context, path)
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError("arrays have no fixed size", path=path)


class NullableStructCon(Construct):  # type: ignore[misc]
    """A struct field that may be null: Kafka writes an int8 first, -1 for null, 1 before the struct."""

    def __init__(self, struct: Construct) -> None:
        super().__init__()
        self.struct = struct

    def _parse(self, stream: io.BytesIO, context: Any, path: str) -> Any:
        present = stream_read(stream, 1, path)[0]
        if present >= 0x80:  # negative as an int8
            return None
        return self.struct._parse(stream, context, path)

    def _build(self, obj: Any, stream: io.BytesIO, context: Any, path: str) -> Any:
        if obj is None:
            stream_write(stream, b"\xff", 1, path)
            return obj
        stream_write(stream, b"\x01", 1, path)
        return self.struct._build(obj, stream, context, path)

    def _sizeof(self, context: Any, path: str) -> int:
        raise SizeofError("nullable structs have no fixed size", path=path)
