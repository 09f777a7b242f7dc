"""CachedArray: an array encoded once per message version, byte-identical to the list it stands for."""

from __future__ import annotations

import uuid

from rivven_kproto.codec.messages.metadata import (
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from rivven_kproto.codec.schema import CachedArray


def _partitions(count: int) -> list[MetadataResponsePartition]:
    return [
        MetadataResponsePartition(error_code=0, partition_index=i, leader_id=3, leader_epoch=0, replica_nodes=[3],
                                  isr_nodes=[3], offline_replicas=[])
        for i in range(count)
    ]


def _response(partitions: object) -> MetadataResponse:
    topic = MetadataResponseTopic(error_code=0, name="t", topic_id=uuid.UUID(int=7), is_internal=False,
                                  partitions=partitions)  # type: ignore[arg-type]
    return MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id="c", controller_id=3, topics=[topic])


def test_every_version_encodes_the_same_bytes_as_the_list_and_builds_its_items_once_per_version() -> None:
    made: list[int] = []

    def items() -> list[MetadataResponsePartition]:
        made.append(1)
        return _partitions(50)

    cached = CachedArray(items)
    versions = list(MetadataResponse.VALID_VERSIONS)
    for version in versions:
        expected = _response(_partitions(50)).encode(version)
        assert _response(cached).encode(version) == expected
        assert _response(cached).encode(version) == expected  # the second time from the cache
        decoded = MetadataResponse.decode(expected, version)
        assert [p.partition_index for p in decoded.topics[0].partitions] == list(range(50))
    assert len(made) == len({MetadataResponse.structure(v) for v in versions})  # once per structure
