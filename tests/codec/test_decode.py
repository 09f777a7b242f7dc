"""The compiled record decoder reads exactly what the pure-Python reference reads, and refuses
what it refuses (the reference then names the fault)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivven_kproto.codec.records import records as records_module
from rivven_kproto.codec.records.records import (
    Record,
    RecordFormatError,
    decode_records_python,
    encode_records_python,
)

from .test_encode import record_strategy

compiled = records_module._compiled_decode
needs_compiled = pytest.mark.skipif(compiled is None, reason="the C extension was not built here")


def test_the_extension_is_built_where_required() -> None:
    if os.environ.get("RIVVEN_REQUIRE_COMPILED") != "1":
        pytest.skip("RIVVEN_REQUIRE_COMPILED is not set (tox sets it)")
    assert records_module.DECODER_COMPILED


def python_answer(payload: bytes, count: int) -> list[Record] | type[Exception]:
    try:
        return decode_records_python(memoryview(payload), count)
    except RecordFormatError:
        return RecordFormatError


def compiled_answer(payload: bytes, count: int) -> list[Record] | type[Exception]:
    assert compiled is not None
    try:
        return [Record(*fields) for fields in compiled(payload, count)]
    except ValueError:
        return RecordFormatError


@needs_compiled
@given(st.lists(record_strategy, max_size=20))
def test_compiled_and_python_decoders_agree(records: list[Record]) -> None:
    payload = encode_records_python(records)
    assert compiled_answer(payload, len(records)) == python_answer(payload, len(records)) == records


@needs_compiled
@given(st.lists(record_strategy, min_size=1, max_size=5), st.data())
def test_they_agree_on_damaged_payloads(records: list[Record], data: st.DataObject) -> None:
    """Flipped bytes, cuts and wrong counts: both accept the same records or both refuse."""
    payload = bytearray(encode_records_python(records))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(payload) - 1))
        payload[at] = data.draw(st.integers(0, 255))
    cut = bytes(payload[: data.draw(st.integers(0, len(payload)))])
    count = len(records) + data.draw(st.integers(-1, 1))
    assert compiled_answer(cut, count) == python_answer(cut, count)


@needs_compiled
def test_edge_varints_and_bad_utf8() -> None:
    cases = [
        (b"\x0e\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x01\x01\x00", 1),  # varlong of 10 bytes
        (b"\x0e\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02\x00\x01\x01\x00", 1),  # beyond 64 bits
        (b"\x0c\x00\x00\x00\x01\x01\x02\x02\xff\x01\x00", 1),  # header key not UTF-8
        (b"\x0e\x00\x00\x00\x01\x01\x00" + b"\x00" * 7, 2),
    ]
    for payload, count in cases:
        assert compiled_answer(payload, count) == python_answer(payload, count), payload


def test_decode_batch_uses_either_and_names_faults() -> None:
    records = [Record(i, 0, None, b"v%d" % i, [("h", b"x")]) for i in range(3)]
    batch = records_module.build_batch(records, base_timestamp=1)
    assert records_module.decode_batch(batch).records == records
    with pytest.raises(RecordFormatError, match="bytes left after"):
        records_module._decode_records(memoryview(encode_records_python(records) + b"\x00"), 3)


def values_answer(batch: bytes, first: int) -> tuple[list[bytes | None], int] | type[Exception]:
    try:
        return records_module.decode_batch_values(batch, 0, first)
    except RecordFormatError:
        return RecordFormatError


def reference_values(batch: bytes, first: int) -> tuple[list[bytes | None], int] | type[Exception]:
    try:
        decoded = records_module.decode_batch(batch)
    except RecordFormatError:
        return RecordFormatError
    kept = [r for r in decoded.records if decoded.base_offset + r.offset_delta >= first]
    return [r.value for r in kept], max((decoded.base_offset + r.offset_delta for r in kept), default=-1)


batch_record = st.builds(
    Record,
    offset_delta=st.integers(-2, 20),
    timestamp_delta=st.integers(0, 10_000),
    key=st.none() | st.binary(max_size=20),
    value=st.none() | st.binary(max_size=50),
    headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
)


@given(st.lists(batch_record, max_size=12), st.integers(-3, 15), st.integers(0, 1000), st.data())
def test_batch_values_are_the_values_decode_batch_gives(records: list[Record], first_delta: int, base: int,
                                                        data: st.DataObject) -> None:
    """The bulk consume path (values only, compiled or not) reads and refuses what decode_batch does."""
    batch = bytearray(records_module.build_batch(records, base_offset=base, base_timestamp=1))
    if records and data.draw(st.booleans()):  # damaged inside the records, CRC fixed up
        at = data.draw(st.integers(61, len(batch) - 1))
        batch[at] = data.draw(st.integers(0, 255))
        batch[17:21] = records_module.compute_crc(batch, 0, len(batch)).to_bytes(4, "big")
    expected = reference_values(bytes(batch), base + first_delta)
    assert values_answer(bytes(batch), base + first_delta) == expected
    saved = records_module._compiled_decode_values
    records_module._compiled_decode_values = None
    try:
        assert values_answer(bytes(batch), base + first_delta) == expected
    finally:
        records_module._compiled_decode_values = saved


def test_the_last_offset_of_values_whose_deltas_are_all_negative() -> None:
    """Hypothesis found it: the compiled values path started its maximum at -1, so a batch whose
    kept records all had negative offset deltas reported base - 1 as its last offset."""
    batch = records_module.build_batch([Record(offset_delta=-2, timestamp_delta=0, key=None, value=None)],
                                       base_offset=0, base_timestamp=1)
    assert values_answer(batch, -2) == reference_values(batch, -2) == ([None], -2)
