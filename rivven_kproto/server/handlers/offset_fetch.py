"""OffsetFetch (9), v1-9, including v8+'s batch of groups.

Null topics (v2+) ask for every partition the group committed. A partition without a committed
offset answers offset -1, leader epoch -1 and metadata "" with no error, whether the group or the
topic exists or not, as Kafka does; a null committed metadata was stored as "". ``require_stable``
is accepted: without transactional offsets (a later issue) every committed offset is stable.
v9's member id and epoch belong to the new consumer protocol (KIP-848) and are ignored for
classic groups, as Kafka ignores them.

Not implemented: authorization.
"""

from __future__ import annotations

from rivven_kproto.broker.groups.api import FetchedOffset
from rivven_kproto.codec.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)

from ..context import RequestContext

API_KEY = OffsetFetchRequest.API_KEY

Wanted = list[tuple[str, list[int]]] | None


def handle(ctx: RequestContext, request: OffsetFetchRequest, version: int) -> OffsetFetchResponse:
    coordinator = ctx.broker.groups
    if version >= 8:
        groups = []
        for group in request.groups:
            wanted: Wanted = None if group.topics is None else [(t.name, t.partition_indexes) for t in group.topics]
            fetched = coordinator.fetch_offsets(group.group_id, wanted)
            groups.append(OffsetFetchResponseGroup(
                group_id=group.group_id,
                error_code=0,
                topics=[
                    OffsetFetchResponseTopics(name=topic, partitions=[_partitions(o) for o in offsets])
                    for topic, offsets in fetched
                ],
            ))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    wanted = None if request.topics is None else [(t.name, t.partition_indexes) for t in request.topics]
    fetched = coordinator.fetch_offsets(request.group_id, wanted)
    return OffsetFetchResponse(
        throttle_time_ms=0,
        error_code=0,
        topics=[
            OffsetFetchResponseTopic(name=topic, partitions=[_partition(o) for o in offsets])
            for topic, offsets in fetched
        ],
    )


def _fields(fetched: FetchedOffset) -> dict[str, object]:
    committed = fetched.committed
    if committed is None:
        return {"committed_offset": -1, "committed_leader_epoch": -1, "metadata": ""}
    return {
        "committed_offset": committed.offset,
        "committed_leader_epoch": committed.leader_epoch,
        "metadata": committed.metadata,
    }


def _partition(fetched: FetchedOffset) -> OffsetFetchResponsePartition:
    return OffsetFetchResponsePartition(partition_index=fetched.partition, error_code=0, **_fields(fetched))  # type: ignore[arg-type]


def _partitions(fetched: FetchedOffset) -> OffsetFetchResponsePartitions:
    return OffsetFetchResponsePartitions(partition_index=fetched.partition, error_code=0, **_fields(fetched))  # type: ignore[arg-type]
