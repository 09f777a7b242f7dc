"""Record-batch compression codecs (attribute bits 0-2 of a v2 batch), on top of ``cramjam``.

Wire formats, as Kafka's clients produce them:

* GZIP: one or more gzip members (RFC 1952).
* SNAPPY: Java clients (snappy-java) and librdkafka wrap raw snappy in the *xerial* framing::

      magic b"\\x82SNAPPY\\x00" | int32 version | int32 compatible version
      then blocks of: int32 big-endian compressed length | raw snappy block

  Some producers send a single raw snappy block instead, so decompression accepts both; compression
  emits the xerial framing, like the Java client (librdkafka reads it).
* LZ4: the LZ4 *frame* format with independent blocks (Java rejects linked blocks; cramjam's
  default frame settings qualify).
* ZSTD: a standard zstd frame.

Decompression is bounded by ``max_size``: the output is written into a buffer that grows up to
``max_size`` and the codec stops as soon as it would overflow, so a small hostile payload cannot
balloon into gigabytes (a decompression bomb) before we notice.
"""

from __future__ import annotations

import enum
import struct

import cramjam

DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16
XERIAL_VERSION = 1
XERIAL_COMPATIBLE_VERSION = 1
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size

_XERIAL_HEADER = struct.Struct(">8sii")
_INT32 = struct.Struct(">i")

_INITIAL_GUESS_FACTOR = 8
_MIN_INITIAL_BUFFER = 64 * 1024
# cramjam reports "the output did not fit" with this phrase; anything else means corrupt input.
_BUFFER_FULL_HINT = "whole buffer"
_CRAMJAM_ERRORS = (cramjam.DecompressionError, OSError, ValueError)


class Compression(enum.IntEnum):
    """Codec ids as stored in the low three bits of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class CompressionError(ValueError):
    """Compressed data that is corrupt, or that would decompress to more than allowed."""


class UnsupportedCompressionError(CompressionError):
    """A codec id outside 0-4 (ids 5-7 are unassigned in Kafka).

    A CompressionError too, so code decoding hostile batches has one codec error to catch; handlers
    that answer UNSUPPORTED_COMPRESSION_TYPE rather than CORRUPT_MESSAGE catch this one first.
    """


def codec_of(codec: int) -> Compression:
    """Validate a raw codec id, raising UnsupportedCompressionError for unknown ids."""
    try:
        return Compression(codec)
    except ValueError:
        raise UnsupportedCompressionError(
            f"unsupported compression codec id {codec} (Kafka defines 0=none, 1=gzip, 2=snappy, 3=lz4, 4=zstd)"
        ) from None


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress ``data`` in the framing Kafka clients expect for ``codec``."""
    kind = codec_of(codec)
    if kind is Compression.NONE:
        return bytes(data)
    if kind is Compression.SNAPPY:
        return _xerial_compress(data)
    module = _MODULES[kind]
    return bytes(module.compress(bytes(data), level=level))


def decompress(
    codec: int, data: bytes | bytearray | memoryview, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytes:
    """Decompress ``data``; CompressionError if corrupt or larger than ``max_size`` bytes."""
    kind = codec_of(codec)
    data = bytes(data)
    if kind is Compression.NONE:
        _check_size(len(data), max_size)
        return data
    if kind is Compression.SNAPPY:
        if data.startswith(XERIAL_MAGIC):
            return _xerial_decompress(data, max_size)
        return _snappy_raw_decompress(data, max_size)
    return _bounded_decompress(kind, data, max_size)


def _check_size(size: int, max_size: int) -> None:
    if size > max_size:
        raise CompressionError(f"decompressed size exceeds the limit of {max_size} bytes")


def _bounded_decompress(kind: Compression, data: bytes, max_size: int) -> bytes:
    """Decompress into a growing buffer capped at ``max_size``; cramjam stops when it is full."""
    module = _MODULES[kind]
    size = min(max_size, max(_MIN_INITIAL_BUFFER, len(data) * _INITIAL_GUESS_FACTOR))
    while True:
        out = bytearray(size)
        try:
            written = module.decompress_into(data, out)
        except _CRAMJAM_ERRORS as exc:
            if _BUFFER_FULL_HINT not in str(exc):
                raise CompressionError(f"corrupt {kind.name.lower()} data: {exc}") from None
            if size >= max_size:
                raise CompressionError(f"decompressed size exceeds the limit of {max_size} bytes") from None
            size = min(max_size, size * 2)
            continue
        del out[written:]
        return bytes(out)


def _snappy_raw_decompress(data: bytes, max_size: int) -> bytes:
    """One raw snappy block; its preamble states the output size, checked before decoding."""
    try:
        size = cramjam.snappy.decompress_raw_len(data)
    except _CRAMJAM_ERRORS as exc:
        raise CompressionError(f"corrupt snappy data: {exc}") from None
    _check_size(size, max_size)
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except _CRAMJAM_ERRORS as exc:
        raise CompressionError(f"corrupt snappy data: {exc}") from None


def _xerial_decompress(data: bytes, max_size: int) -> bytes:
    """Concatenate the raw snappy blocks of a xerial stream, bounding the running total."""
    if len(data) < XERIAL_HEADER_SIZE:
        raise CompressionError("truncated xerial snappy header")
    pos = XERIAL_HEADER_SIZE
    end = len(data)
    parts: list[bytes] = []
    total = 0
    while pos < end:
        if end - pos < 4:
            raise CompressionError(f"truncated xerial snappy block length at byte {pos}")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise CompressionError(f"xerial snappy block length {length} overruns the data at byte {pos}")
        block = data[pos : pos + length]
        pos += length
        part = _snappy_raw_decompress(block, max_size - total)
        total += len(part)
        parts.append(part)
    return b"".join(parts)


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    out = [_XERIAL_HEADER.pack(XERIAL_MAGIC, XERIAL_VERSION, XERIAL_COMPATIBLE_VERSION)]
    # Empty input still gets one (empty) block: some readers reject a header-only stream.
    for start in range(0, max(len(view), 1), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(bytes(view[start : start + XERIAL_BLOCK_SIZE])))
        out.append(_INT32.pack(len(block)))
        out.append(block)
    return b"".join(out)


_MODULES = {
    Compression.GZIP: cramjam.gzip,
    Compression.LZ4: cramjam.lz4,
    Compression.ZSTD: cramjam.zstd,
}
