"""Varint helpers: known encodings, round trips and bounds on hostile input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rivven_kproto.codec.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    UINT32_MAX,
    VarintError,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    unsigned_varint_size,
    varint_size,
    varlong_size,
)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03"), (63, b"\x7e"), (-64, b"\x7f"), (64, b"\x80\x01")],
)
def test_zigzag_known(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert encode_varlong(value) == encoded
    assert decode_varint(encoded) == (value, len(encoded))
    assert decode_varlong(encoded) == (value, len(encoded))


def test_extremes() -> None:
    assert encode_varint(INT32_MIN) == b"\xff\xff\xff\xff\x0f"
    assert decode_varint(encode_varint(INT32_MAX)) == (INT32_MAX, 5)
    assert len(encode_varlong(INT64_MIN)) == 10
    assert decode_varlong(encode_varlong(INT64_MAX)) == (INT64_MAX, 10)
    assert encode_unsigned_varint(300) == b"\xac\x02"
    assert decode_unsigned_varint(encode_unsigned_varint(UINT32_MAX)) == (UINT32_MAX, 5)


@settings(max_examples=200)
@given(st.integers(INT32_MIN, INT32_MAX), st.binary(max_size=3))
def test_varint_round_trip(value: int, prefix: bytes) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == varint_size(value)
    assert decode_varint(prefix + encoded + b"\x99", len(prefix)) == (value, len(prefix) + len(encoded))


@settings(max_examples=200)
@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) == varlong_size(value)
    assert decode_varlong(memoryview(encoded)) == (value, len(encoded))


@settings(max_examples=200)
@given(st.integers(0, UINT32_MAX))
def test_unsigned_round_trip(value: int) -> None:
    encoded = encode_unsigned_varint(value)
    assert len(encoded) == unsigned_varint_size(value)
    assert decode_unsigned_varint(bytearray(encoded)) == (value, len(encoded))


def test_bounds() -> None:
    with pytest.raises(VarintError, match="longer than 5"):
        decode_varint(b"\x80" * 5 + b"\x01")
    with pytest.raises(VarintError, match="longer than 10"):
        decode_varlong(b"\xff" * 10 + b"\x01")
    with pytest.raises(VarintError, match="out of range"):
        decode_varint(b"\xff\xff\xff\xff\x1f")  # 33 bits
    with pytest.raises(VarintError, match="out of range"):
        decode_varlong(b"\xff" * 9 + b"\x7f")  # 70 bits
    for truncated in (b"", b"\x80", b"\xff\xff"):
        with pytest.raises(VarintError, match="truncated"):
            decode_varint(truncated)
    with pytest.raises(VarintError):
        decode_varint(b"\x01", 1)
    for bad in (INT32_MAX + 1, INT32_MIN - 1):
        with pytest.raises(VarintError):
            encode_varint(bad)
    with pytest.raises(VarintError):
        encode_varlong(INT64_MAX + 1)
    with pytest.raises(VarintError):
        encode_unsigned_varint(-1)


@settings(max_examples=200)
@given(st.binary(max_size=16), st.integers(0, 16))
def test_garbage_only_raises_varint_error(data: bytes, pos: int) -> None:
    for decode in (decode_varint, decode_varlong, decode_unsigned_varint):
        try:
            _, end = decode(data, pos)
        except VarintError:
            continue
        assert pos < end <= len(data)
