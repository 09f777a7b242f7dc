"""ApiVersions negotiation: min(our max, broker max), never below either side's minimum."""

from __future__ import annotations

import pytest

from rivven_kproto.codec.messages.api_versions import ApiVersion
from rivven_kproto.codec.messages.fetch import FetchRequest
from rivven_kproto.codec.messages.list_offsets import ListOffsetsRequest
from rivven_kproto.codec.messages.metadata import MetadataRequest
from rivven_kproto.codec.messages.produce import ProduceRequest
from rivven_kproto.net.errors import UnsupportedApiError
from rivven_kproto.net.versions import NegotiatedVersions, api_name, negotiate


@pytest.mark.parametrize(
    ("ours", "theirs", "expected"),
    [
        ((0, 12), (0, 13), 12),  # a newer broker: our max
        ((0, 12), (0, 9), 9),  # an older broker: its max
        ((4, 12), (0, 3), None),  # no overlap: broker too old
        ((0, 3), (4, 17), None),  # no overlap: broker dropped our versions (Kafka 4 removals)
        ((3, 11), (3, 3), 3),
    ],
)
def test_negotiate(ours: tuple[int, int], theirs: tuple[int, int], expected: int | None) -> None:
    assert negotiate(*ours, *theirs) == expected


def test_negotiated_versions_per_api() -> None:
    versions = NegotiatedVersions(
        [
            ApiVersion(api_key=0, min_version=3, max_version=12),  # Produce: newer than our codec
            ApiVersion(api_key=1, min_version=4, max_version=17),
            ApiVersion(api_key=2, min_version=1, max_version=1),
            ApiVersion(api_key=9999, min_version=0, max_version=2),  # an API we do not know
        ]
    )
    assert versions.version_for(ProduceRequest) == ProduceRequest.VALID_VERSIONS.high
    assert versions.version_for(FetchRequest) == 12
    assert versions.version_for(ListOffsetsRequest) == 1
    assert versions.supports(ListOffsetsRequest)
    assert not versions.supports(ListOffsetsRequest, min_version=2)
    with pytest.raises(UnsupportedApiError, match="ListOffsets v1-1; this client needs v2-7") as info:
        versions.version_for(ListOffsetsRequest, min_version=2)
    assert info.value.name == "UNSUPPORTED_VERSION"
    with pytest.raises(UnsupportedApiError, match="does not serve Metadata"):
        versions.version_for(MetadataRequest)
    unknown = versions.apis[9999]
    assert (unknown.name, unknown.negotiated, unknown.client_max) == ("api-9999", None, None)


def test_api_names_come_from_the_codec() -> None:
    assert api_name(3) == "Metadata"
    assert api_name(44) == "IncrementalAlterConfigs"


def test_a_feature_the_caller_does_not_use_caps_the_version() -> None:
    """Transactions V1 on a Kafka 4 broker: Produce at most v11, EndTxn at most v4 (KIP-890 part 2)."""
    from rivven_kproto.codec.messages.end_txn import EndTxnRequest

    versions = NegotiatedVersions(
        [ApiVersion(api_key=0, min_version=3, max_version=13), ApiVersion(api_key=26, min_version=4, max_version=5)],
        {"transaction.version": 2},
    )
    assert versions.feature_level("transaction.version") == 2 and versions.feature_level("group.version") == 0
    assert versions.version_for(ProduceRequest) == 12
    assert versions.version_for(ProduceRequest, max_version=11) == 11
    assert versions.version_for(ProduceRequest, min_version=12) == 12
    assert versions.version_for(EndTxnRequest, max_version=4) == 4
    with pytest.raises(UnsupportedApiError, match="this client needs v0-3"):
        versions.version_for(EndTxnRequest, max_version=3)  # below the broker's minimum
