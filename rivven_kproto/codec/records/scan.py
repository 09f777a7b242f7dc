"""Walk every record of a produced batch the way Kafka's broker does, without building objects.

Kafka's LogValidator iterates every record of every produced batch (``DefaultRecord.readFrom``):
that is what stops a batch whose records are garbage, run past its end, or disagree with its
declared count from being acknowledged and then breaking every consumer. This module answers
"is this payload exactly ``count`` well-formed records?" plus what validation needs afterwards
(the largest timestamp, how many records have a null key).

Two implementations give identical answers: the compiled ``_scan`` extension (built by
``pip install``; it releases the GIL) and :func:`scan_python`, the fallback and the reference the
tests compare the extension with. Java's semantics are kept where they are odd: varints wrap
like Java ints, a negative key/value length means null, a record's fields may be read past its
declared size (the size check afterwards catches it), header keys are not checked as UTF-8.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

Buffer = bytes | bytearray | memoryview


class ScanCode(enum.IntEnum):
    """Why a payload is not ``count`` well-formed records (0: it is)."""

    OK = 0
    PREMATURE_EOF = 1  # fewer records than declared
    RECORD_SIZE = 2  # a record's size runs past the payload (a: size, b: bytes left)
    STRUCTURE = 3  # a field runs past the payload
    HEADER_COUNT = 4  # header count negative or larger than the bytes left (a: count)
    HEADER_KEY = 5  # negative header key length (a: length)
    SIZE_MISMATCH = 6  # fields do not fill the record's declared size (a: declared, b: read)
    OFFSET_DELTA = 7  # record i has an offset delta other than i (a: delta)
    REMAINING = 8  # bytes left after the declared records (a: bytes)
    BAD_VARINT = 9  # a record size varint longer than 5 bytes


class ScanResult(NamedTuple):
    code: int
    record: int  # the record at fault (the count when all were read)
    detail_a: int
    detail_b: int
    max_timestamp: int  # largest record timestamp, or -1 (Kafka's NO_TIMESTAMP floor)
    null_keys: int


class _Underflow(Exception):
    pass


class _TooLong(Exception):
    pass


_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) else value


def _read_var(buf: Buffer, pos: int, end: int, max_shift: int, mask: int, bits: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise _Underflow
        byte = buf[pos]
        pos += 1
        if not byte & 0x80:
            value = (value | (byte << shift)) & mask
            break
        value |= (byte & 0x7F) << shift
        shift += 7
        if shift > max_shift:
            raise _TooLong
    return _signed((value >> 1) ^ (-(value & 1) & mask), bits), pos


def _varint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    return _read_var(buf, pos, end, 28, _MASK32, 32)


def _varlong(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    return _read_var(buf, pos, end, 63, _MASK64, 64)


def _skip(pos: int, end: int, size: int) -> int:
    if size < 0:
        return pos
    if size > end - pos:
        raise _Underflow
    return pos + size


def scan_python(payload: Buffer, count: int, base_timestamp: int) -> ScanResult:
    """The reference walk; see the module docstring and :class:`ScanCode`."""
    end = len(payload)
    pos = 0
    max_timestamp = -1
    null_keys = 0
    for index in range(count):
        try:
            body_size, pos = _varint(payload, pos, end)
        except _Underflow:
            return ScanResult(ScanCode.PREMATURE_EOF, index, 0, 0, max_timestamp, null_keys)
        except _TooLong:
            return ScanResult(ScanCode.BAD_VARINT, index, 0, 0, max_timestamp, null_keys)
        if end - pos < body_size:
            return ScanResult(ScanCode.RECORD_SIZE, index, body_size, end - pos, max_timestamp, null_keys)
        start = pos
        try:
            if pos >= end:
                raise _Underflow
            pos += 1  # attributes
            timestamp_delta, pos = _varlong(payload, pos, end)
            offset_delta, pos = _varint(payload, pos, end)
            key_size, pos = _varint(payload, pos, end)
            pos = _skip(pos, end, key_size)
            value_size, pos = _varint(payload, pos, end)
            pos = _skip(pos, end, value_size)
            header_count, pos = _varint(payload, pos, end)
            if header_count < 0 or header_count > end - pos:
                return ScanResult(ScanCode.HEADER_COUNT, index, header_count, 0, max_timestamp, null_keys)
            for _ in range(header_count):
                key_length, pos = _varint(payload, pos, end)
                if key_length < 0:
                    return ScanResult(ScanCode.HEADER_KEY, index, key_length, 0, max_timestamp, null_keys)
                pos = _skip(pos, end, key_length)
                value_length, pos = _varint(payload, pos, end)
                pos = _skip(pos, end, value_length)
        except (_Underflow, _TooLong):
            return ScanResult(ScanCode.STRUCTURE, index, 0, 0, max_timestamp, null_keys)
        if pos - start != body_size:
            return ScanResult(ScanCode.SIZE_MISMATCH, index, body_size, pos - start, max_timestamp, null_keys)
        if offset_delta != index:
            return ScanResult(ScanCode.OFFSET_DELTA, index, offset_delta, 0, max_timestamp, null_keys)
        timestamp = _signed((base_timestamp + timestamp_delta) & _MASK64, 64)
        max_timestamp = max(max_timestamp, timestamp)
        null_keys += key_size < 0
    if pos != end:
        return ScanResult(ScanCode.REMAINING, count, end - pos, 0, max_timestamp, null_keys)
    return ScanResult(ScanCode.OK, count, 0, 0, max_timestamp, null_keys)


def null_key_indexes(payload: Buffer, count: int) -> list[int]:
    """Indexes of the null-key records of a payload that scanned OK (the rare error path)."""
    indexes = []
    end = len(payload)
    pos = 0
    for index in range(count):
        body_size, start = _varint(payload, pos, end)
        _, key_pos = _varlong(payload, start + 1, end)
        _, key_pos = _varint(payload, key_pos, end)
        key_size, _ = _varint(payload, key_pos, end)
        if key_size < 0:
            indexes.append(index)
        pos = start + body_size
    return indexes


try:
    from rivven_kproto.codec.records._scan import scan as _compiled_scan
except ImportError:  # no compiler at install time: the pure-Python walk gives the same answers
    _compiled_scan = None

COMPILED = _compiled_scan is not None


def scan(payload: Buffer, count: int, base_timestamp: int) -> ScanResult:
    """Walk ``count`` records of ``payload`` (compiled when available)."""
    if _compiled_scan is not None:
        return ScanResult(*_compiled_scan(payload, count, base_timestamp))
    return scan_python(payload, count, base_timestamp)
