"""The compiled record encoder writes exactly the bytes of the pure-Python reference."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivven_kproto.codec.records import records as records_module
from rivven_kproto.codec.records.records import Record, decode_batch, encode_records_python
from rivven_kproto.codec.records.scan import scan_python

compiled = records_module._compiled_encode
needs_compiled = pytest.mark.skipif(compiled is None, reason="the C extension was not built here")

record_strategy = st.builds(
    Record,
    offset_delta=st.integers(-(1 << 31), (1 << 31) - 1),
    timestamp_delta=st.integers(-(1 << 63), (1 << 63) - 1),
    key=st.none() | st.binary(max_size=200),
    value=st.none() | st.binary(max_size=200),
    headers=st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3),
    attributes=st.integers(-128, 127),
)


def test_the_extension_is_built_where_required() -> None:
    if os.environ.get("RIVVEN_REQUIRE_COMPILED") != "1":
        pytest.skip("RIVVEN_REQUIRE_COMPILED is not set (tox sets it)")
    assert records_module.ENCODER_COMPILED


@needs_compiled
@given(st.lists(record_strategy, max_size=20))
def test_compiled_and_python_encoders_agree(records: list[Record]) -> None:
    assert compiled is not None
    assert compiled(records) == encode_records_python(records)


@needs_compiled
def test_compiled_records_read_back_as_a_batch() -> None:
    assert compiled is not None
    records = [Record(i, i, b"k%d" % i if i % 2 else None, b"v" * i, [("h", b"x"), ("n", None)]) for i in range(50)]
    payload = compiled(records)
    assert scan_python(payload, 50, 0).code == 0
    batch = records_module.build_batch(records, base_timestamp=1_700_000_000_000)
    assert decode_batch(batch).records == records


@needs_compiled
@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (Record(0, 0, "text", None), TypeError),  # type: ignore[arg-type]
        (Record(0, 0, None, None, [("k", "v")]), TypeError),  # type: ignore[list-item]
        (Record(0, 0, None, None, [("only-key",)]), TypeError),  # type: ignore[list-item]
        (Record(1 << 40, 0, None, None), ValueError),
        (Record(0, 1 << 70, None, None), OverflowError),
        (Record(0, 0, None, None, attributes=300), ValueError),
    ],
)
def test_compiled_encoder_refuses_what_cannot_be_encoded(bad: Record, error: type[Exception]) -> None:
    assert compiled is not None
    with pytest.raises(error):
        compiled([bad])


@given(
    st.lists(st.none() | st.binary(max_size=300), max_size=30),
    st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3),
    st.booleans(),
)
def test_value_batches_are_the_batches_of_their_records(values: list[bytes | None], headers: list, txn: bool) -> None:
    """The producer's bulk path (no Record per value) writes the bytes build_batch writes."""
    records = [Record(i, 0, None, value, headers) for i, value in enumerate(values)]
    assert records_module.encode_values(values, headers) == encode_records_python(records)
    fenced = {"producer_id": 7, "producer_epoch": 2, "base_sequence": 40, "is_transactional": True} if txn else {}
    assert records_module.build_values_batch(values, headers, base_timestamp=1_700_000_000_000, **fenced) == (
        records_module.build_batch(records, base_timestamp=1_700_000_000_000, **fenced))
