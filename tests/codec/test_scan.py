"""The record scanner: the compiled walk and the pure-Python reference give identical answers.

Each :class:`ScanCode` is produced by a hand-built payload; Hypothesis then compares both walks on
well-formed records, on truncations and on random byte flips of them, and on plain noise.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rivven_kproto.codec.records import scan as scan_module
from rivven_kproto.codec.records.records import Record, encode_record
from rivven_kproto.codec.records.scan import ScanCode, null_key_indexes, scan_python
from rivven_kproto.codec.varint import encode_varint, encode_varlong

compiled = scan_module._compiled_scan
needs_compiled = pytest.mark.skipif(compiled is None, reason="the C extension was not built here")
BASE_TS = 1_700_000_000_000


def payload_of(records: list[Record]) -> bytes:
    return b"".join(encode_record(r) for r in records)


def plain(count: int) -> list[Record]:
    return [Record(offset_delta=i, timestamp_delta=i * 10, key=b"k%d" % i, value=b"v" * i) for i in range(count)]


def body(*fields: bytes) -> bytes:
    """A record from raw field bytes, with a correct size prefix."""
    raw = b"".join(fields)
    return encode_varint(len(raw)) + raw


def test_the_compiled_scanner_is_built_where_ci_requires_it() -> None:
    if os.environ.get("RIVVEN_REQUIRE_COMPILED") != "1":
        pytest.skip("RIVVEN_REQUIRE_COMPILED is not set (tox sets it)")
    assert scan_module.COMPILED


def test_well_formed_records_scan_ok_with_their_max_timestamp_and_null_keys() -> None:
    records = plain(3) + [Record(offset_delta=3, timestamp_delta=5, key=None, value=None, headers=[("h", b"x")])]
    result = scan_python(payload_of(records), 4, BASE_TS)
    assert result.code == ScanCode.OK
    assert result.max_timestamp == BASE_TS + 20
    assert result.null_keys == 1
    assert null_key_indexes(payload_of(records), 4) == [3]


CASES = {
    ScanCode.PREMATURE_EOF: (payload_of(plain(2)), 3),
    ScanCode.RECORD_SIZE: (encode_varint(100) + b"\x00" * 10, 1),
    ScanCode.STRUCTURE: (body(b"\x00", encode_varlong(0), encode_varint(0), encode_varint(50)), 1),
    ScanCode.HEADER_COUNT: (
        body(b"\x00", encode_varlong(0), encode_varint(0), encode_varint(-1), encode_varint(-1), encode_varint(-2)),
        1,
    ),
    ScanCode.HEADER_KEY: (
        body(
            b"\x00", encode_varlong(0), encode_varint(0), encode_varint(-1), encode_varint(-1),
            encode_varint(1), encode_varint(-3), b"\x00" * 4,
        ),
        1,
    ),
    ScanCode.SIZE_MISMATCH: (encode_varint(9) + encode_record(plain(1)[0])[1:] + b"\x00" * 9, 1),
    ScanCode.OFFSET_DELTA: (payload_of([Record(offset_delta=0, timestamp_delta=0, key=None, value=b"a"),
                                       Record(offset_delta=5, timestamp_delta=0, key=None, value=b"b")]), 2),
    ScanCode.REMAINING: (payload_of(plain(2)) + b"\x00", 2),
    ScanCode.BAD_VARINT: (b"\xff" * 6, 1),
}


@pytest.mark.parametrize("code", list(CASES), ids=lambda c: c.name)
def test_every_scan_code_is_reached(code: ScanCode) -> None:
    payload, count = CASES[code]
    result = scan_python(payload, count, BASE_TS)
    assert result.code == code, result
    if compiled is not None:
        assert tuple(compiled(payload, count, BASE_TS)) == tuple(result)


def test_negative_offset_delta_and_inflated_count_are_caught() -> None:
    negative = payload_of([Record(offset_delta=-1, timestamp_delta=0, key=None, value=b"a")])
    assert scan_python(negative, 1, BASE_TS).code == ScanCode.OFFSET_DELTA
    # A count of 2**31-1 over two records ends at the payload's end without allocating anything.
    assert scan_python(payload_of(plain(2)), 2**31 - 1, BASE_TS).code == ScanCode.PREMATURE_EOF


records_strategy = st.lists(
    st.builds(
        Record,
        offset_delta=st.just(0),
        timestamp_delta=st.integers(-(2**40), 2**40),
        key=st.none() | st.binary(max_size=20),
        value=st.none() | st.binary(max_size=40),
        headers=st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3),
    ),
    min_size=0,
    max_size=8,
).map(lambda rs: [Record(i, r.timestamp_delta, r.key, r.value, r.headers) for i, r in enumerate(rs)])


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(records=records_strategy, data=st.data())
def test_compiled_equals_reference_on_records_and_their_mutations(records: list[Record], data: st.DataObject) -> None:
    payload = bytearray(payload_of(records))
    count = len(records)
    assert compiled is not None
    assert tuple(compiled(bytes(payload), count, BASE_TS)) == tuple(scan_python(payload, count, BASE_TS))
    assert scan_python(payload, count, BASE_TS).code == ScanCode.OK
    if payload:
        for _ in range(data.draw(st.integers(1, 4))):
            payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
        cut = data.draw(st.integers(0, len(payload)))
        mutated = bytes(payload[:cut]) if data.draw(st.booleans()) else bytes(payload)
    else:
        mutated = data.draw(st.binary(max_size=30))
    declared = data.draw(st.sampled_from([count, count + 1, max(count - 1, 0), 2**31 - 1]))
    base = data.draw(st.sampled_from([BASE_TS, 0, -1, 2**63 - 1]))
    assert tuple(compiled(mutated, declared, base)) == tuple(scan_python(mutated, declared, base))


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(noise=st.binary(max_size=200), count=st.integers(0, 50))
def test_compiled_equals_reference_on_noise(noise: bytes, count: int) -> None:
    assert compiled is not None
    assert tuple(compiled(noise, count, BASE_TS)) == tuple(scan_python(noise, count, BASE_TS))
