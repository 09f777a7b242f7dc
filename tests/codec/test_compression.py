"""Compression codecs: round trips, xerial framing, bomb guard, hostile input, kafka-python oracle."""

from __future__ import annotations

import gzip
import struct
import types

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rivven_kproto.codec.compression import (
    XERIAL_MAGIC,
    Compression,
    CompressionError,
    UnsupportedCompressionError,
    compress,
    decompress,
)

CODECS = list(Compression)
_payloads = st.one_of(
    st.binary(max_size=4096),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=16), st.integers(1, 5000)),
)


@settings(max_examples=150, deadline=None)
@given(codec=st.sampled_from(CODECS), data=_payloads)
def test_round_trip(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_large(codec: Compression) -> None:
    data = bytes(range(256)) * 2000 + b"tail"  # spans several xerial blocks
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(codec, compress(codec, b"")) == b""


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(UnsupportedCompressionError, match=f"codec id {codec}"):
        compress(codec, b"x")
    with pytest.raises(UnsupportedCompressionError):
        decompress(codec, b"x")
    assert issubclass(UnsupportedCompressionError, ValueError)


def _xerial(*blocks: bytes, version: int = 1, compat: int = 1) -> bytes:
    out = XERIAL_MAGIC + struct.pack(">ii", version, compat)
    for block in blocks:
        raw = bytes(cramjam.snappy.compress_raw(block))
        out += struct.pack(">i", len(raw)) + raw
    return out


def test_xerial_hand_built_frame() -> None:
    frame = _xerial(b"hello ", b"xerial ", b"world" * 100)
    assert decompress(Compression.SNAPPY, frame) == b"hello xerial " + b"world" * 100


def test_snappy_emits_xerial_and_accepts_raw() -> None:
    out = compress(Compression.SNAPPY, b"abc" * 50000)
    assert out.startswith(XERIAL_MAGIC)
    assert struct.unpack_from(">ii", out, 8) == (1, 1)
    raw = bytes(cramjam.snappy.compress_raw(b"plain raw snappy"))
    assert decompress(Compression.SNAPPY, raw) == b"plain raw snappy"


def test_xerial_corrupt_frames() -> None:
    good = _xerial(b"payload" * 10)
    for bad in (
        good[:10],  # truncated header
        good[:18],  # truncated block length
        good[:-1],  # block shorter than its length
        XERIAL_MAGIC + struct.pack(">iii", 1, 1, -5),  # negative length
        XERIAL_MAGIC + struct.pack(">iii", 1, 1, 2**31 - 1) + b"x",  # length overruns
        XERIAL_MAGIC + struct.pack(">iii", 1, 1, 3) + b"\xff\xff\xff",  # corrupt block
    ):
        with pytest.raises(CompressionError):
            decompress(Compression.SNAPPY, bad)


def test_bomb_guard_streaming_codecs() -> None:
    data = bytes(4 * 1024 * 1024)
    for codec in (Compression.GZIP, Compression.LZ4, Compression.ZSTD, Compression.NONE):
        packed = compress(codec, data)
        assert decompress(codec, packed, max_size=len(data)) == data
        with pytest.raises(CompressionError, match="exceeds the limit"):
            decompress(codec, packed, max_size=len(data) - 1)


def test_bomb_guard_snappy() -> None:
    # A raw block whose preamble claims ~4 GiB: rejected before anything is allocated.
    with pytest.raises(CompressionError, match="exceeds the limit"):
        decompress(Compression.SNAPPY, b"\xff\xff\xff\xff\x0f" + b"\x00" * 8)
    # Xerial blocks each under the limit but together over it.
    frame = _xerial(*([bytes(1000)] * 5))
    assert len(decompress(Compression.SNAPPY, frame, max_size=5000)) == 5000
    with pytest.raises(CompressionError, match="exceeds the limit"):
        decompress(Compression.SNAPPY, frame, max_size=4999)


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(CODECS[1:]), data=st.binary(max_size=512))
def test_garbage_only_raises_compression_error(codec: Compression, data: bytes) -> None:
    try:
        decompress(codec, data, max_size=1 << 20)
    except CompressionError:
        pass


@settings(max_examples=100, deadline=None)
@given(codec=st.sampled_from(CODECS[1:]), data=st.binary(min_size=1, max_size=2048), cut=st.data())
def test_truncated_or_flipped_only_raises_compression_error(codec: Compression, data: bytes, cut: st.DataObject) -> None:
    packed = compress(codec, data)
    pos = cut.draw(st.integers(0, len(packed) - 1))
    for bad in (packed[:pos], packed[:pos] + bytes([packed[pos] ^ 0xFF]) + packed[pos + 1 :]):
        try:
            decompress(codec, bad, max_size=1 << 20)
        except CompressionError:
            pass


# --- kafka-python as an independent oracle (only for codecs whose optional libs are installed) ---

def _kafka_codec(has: str) -> types.ModuleType:
    """kafka.codec if kafka-python and the optional library behind ``has`` are installed, else skip."""
    module = pytest.importorskip("kafka.codec")
    if not getattr(module, has)():
        pytest.skip(f"kafka-python codec support missing ({has} is False)")
    return module


def test_kafka_python_gzip() -> None:
    kafka_codec = _kafka_codec("has_gzip")
    data = b"kafka gzip cross-check " * 1000
    assert kafka_codec.gzip_decode(compress(Compression.GZIP, data)) == data
    assert decompress(Compression.GZIP, kafka_codec.gzip_encode(data)) == data
    # Concatenated gzip members decode as one stream, as Java's GZIPInputStream does.
    assert decompress(Compression.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def test_kafka_python_snappy_xerial() -> None:
    kafka_codec = _kafka_codec("has_snappy")
    data = b"kafka snappy cross-check " * 5000
    assert kafka_codec.snappy_decode(compress(Compression.SNAPPY, data)) == data
    assert decompress(Compression.SNAPPY, kafka_codec.snappy_encode(data, xerial_compatible=True)) == data
    assert decompress(Compression.SNAPPY, kafka_codec.snappy_encode(data, xerial_compatible=False)) == data


def test_kafka_python_lz4() -> None:
    kafka_codec = _kafka_codec("has_lz4")
    data = b"kafka lz4 cross-check " * 5000
    assert kafka_codec.lz4_decode(compress(Compression.LZ4, data)) == data
    assert decompress(Compression.LZ4, kafka_codec.lz4_encode(data)) == data


def test_kafka_python_zstd() -> None:
    kafka_codec = _kafka_codec("has_zstd")
    data = b"kafka zstd cross-check " * 5000
    assert kafka_codec.zstd_decode(compress(Compression.ZSTD, data)) == data
    assert decompress(Compression.ZSTD, kafka_codec.zstd_encode(data)) == data
