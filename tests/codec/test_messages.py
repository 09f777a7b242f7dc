"""Round trips and edge rules of the schema layer that the kio oracle cannot show."""

from __future__ import annotations

import pytest

from rivven_kproto.codec.messages.api_versions import ApiVersionsResponse
from rivven_kproto.codec.messages.produce import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from rivven_kproto.codec.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from rivven_kproto.codec.schema import EncodeError, UnsupportedVersionError


def test_write_txn_markers_v0_is_v1_without_flexible_encoding() -> None:
    request = WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=7, producer_epoch=1, transaction_result=True,
                topics=[WritableTxnMarkerTopic(name="t", partition_indexes=[0, 2])], coordinator_epoch=3,
            )
        ]
    )
    v0 = request.encode(0)
    assert v0 == (
        b"\x00\x00\x00\x01" + (7).to_bytes(8, "big") + b"\x00\x01" + b"\x01"
        + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x00\x00\x02"
        + b"\x00\x00\x00\x03"
    )
    assert WriteTxnMarkersRequest.decode(v0, 0) == request


def test_unknown_tagged_fields_survive_a_round_trip() -> None:
    response = ApiVersionsResponse(api_keys=[], unknown_tagged_fields={9: b"future", 42: b""})
    encoded = response.encode(3)
    decoded = ApiVersionsResponse.decode(encoded, 3)
    assert decoded.unknown_tagged_fields == {9: b"future", 42: b""}
    assert decoded.encode(3) == encoded


def test_setting_a_field_absent_from_the_version_raises() -> None:
    partition = PartitionProduceResponse(index=0, record_errors=[], error_message=None)
    response = ProduceResponse(responses=[TopicProduceResponse(name="t", partition_responses=[partition])])
    response.encode(3)  # defaults are fine everywhere
    from rivven_kproto.codec.messages.metadata import MetadataRequest

    with pytest.raises(EncodeError, match="does not exist in version"):
        MetadataRequest(topics=None, allow_auto_topic_creation=False).encode(3)  # not ignorable, added in v4


def test_unknown_version_raises() -> None:
    with pytest.raises(UnsupportedVersionError):
        ApiVersionsResponse().encode(5)


def test_runs_of_fixed_size_fields_fail_as_field_by_field() -> None:
    """Consecutive fixed-size fields are read and written with one struct call; a short body or a
    bad value still fails at the field, with the errors of the field-by-field path."""
    from rivven_kproto.codec.messages.end_txn import EndTxnRequest
    from rivven_kproto.codec.schema.struct import DecodeError, EncodeError

    request = EndTxnRequest(transactional_id="t", producer_id=2**40, producer_epoch=7, committed=True)
    body = request.encode(1)
    assert EndTxnRequest.decode(body, 1) == request
    for cut in range(1, len(body)):
        with pytest.raises(DecodeError):
            EndTxnRequest.decode(body[:cut], 1)
    with pytest.raises(EncodeError, match="given value 40000"):
        EndTxnRequest(transactional_id="t", producer_id=1, producer_epoch=40_000, committed=True).encode(1)
    with pytest.raises(EncodeError):
        EndTxnRequest(transactional_id="t", producer_id="1", producer_epoch=1, committed=True).encode(1)  # type: ignore[arg-type]
