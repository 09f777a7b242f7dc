"""OffsetFetch (9), v1-9, including v8+'s batch of groups.

Null topics (v2+) ask for every partition the group committed. A partition without a committed
offset answers offset -1, leader epoch -1 and metadata "" with no error, whether the group or the
topic exists or not, as Kafka does; a null committed metadata was stored as "". With
``require_stable`` (v7+) a partition holding a pending transactional offset (TxnOffsetCommit of a
transaction not yet ended) answers UNSTABLE_OFFSET_COMMIT with offset -1, a partition-level error
as in Kafka; without it the last committed offset is returned.
v9's member id and epoch belong to the new consumer protocol (KIP-848): for a consumer group a
member must ask at its current epoch (else the group answers UNKNOWN_MEMBER_ID or
STALE_MEMBER_EPOCH); no member id and epoch -1 (admin clients) skip the check; classic groups
ignore them, as Kafka does.

Not implemented: authorization.
"""

from __future__ import annotations

from typing import Any

from rivven_kproto.broker.groups.api import FetchedOffset
from rivven_kproto.broker.security.acls import Operation, ResourceType
from rivven_kproto.codec.errors import Errors, KafkaError
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
    if version >= 8:
        groups = []
        for group in request.groups:
            if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, group.group_id):
                groups.append(OffsetFetchResponseGroup(
                    group_id=group.group_id, error_code=Errors.GROUP_AUTHORIZATION_FAILED, topics=[]
                ))
                continue
            wanted: Wanted = None if group.topics is None else [(t.name, t.partition_indexes) for t in group.topics]
            try:
                fetched = _describable(ctx, ctx.groups_for(group.group_id).fetch_offsets(
                    group.group_id, wanted, require_stable=request.require_stable,
                    member_id=group.member_id if version >= 9 else None,
                    member_epoch=group.member_epoch if version >= 9 else -1))
            except KafkaError as exc:
                groups.append(OffsetFetchResponseGroup(group_id=group.group_id, error_code=exc.error, topics=[]))
                continue
            groups.append(OffsetFetchResponseGroup(
                group_id=group.group_id,
                error_code=0,
                topics=[
                    OffsetFetchResponseTopics(name=topic, partitions=[_partitions(o) for o in offsets])
                    for topic, offsets in fetched
                ],
            ))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    if not ctx.allowed(Operation.DESCRIBE, ResourceType.GROUP, request.group_id):
        return OffsetFetchResponse(throttle_time_ms=0, error_code=Errors.GROUP_AUTHORIZATION_FAILED, topics=[])
    if not ctx.broker.coordinates(request.group_id):  # another broker's shard (v0-1: see server/cluster.py)
        return OffsetFetchResponse(throttle_time_ms=0, error_code=Errors.NOT_COORDINATOR, topics=[])
    wanted = None if request.topics is None else [(t.name, t.partition_indexes) for t in request.topics]
    stable = version >= 7 and request.require_stable
    fetched = _describable(ctx, ctx.groups_for(request.group_id).fetch_offsets(request.group_id, wanted, require_stable=stable))
    return OffsetFetchResponse(
        throttle_time_ms=0,
        error_code=0,
        topics=[
            OffsetFetchResponseTopic(name=topic, partitions=[_partition(o) for o in offsets])
            for topic, offsets in fetched
        ],
    )


def _describable(ctx: RequestContext, fetched: Any) -> Any:
    """Topics the client may not Describe are left out of the answer (Kafka filters them)."""
    return [(topic, offsets) for topic, offsets in fetched if ctx.allowed(Operation.DESCRIBE, ResourceType.TOPIC, topic)]


def _fields(fetched: FetchedOffset) -> tuple[int, int, str]:
    """(offset, leader epoch, metadata); nothing committed (or unstable) is -1, -1, ""."""
    committed = fetched.committed
    if committed is None:
        return -1, -1, ""
    return committed.offset, committed.leader_epoch, committed.metadata


def _partition(fetched: FetchedOffset) -> OffsetFetchResponsePartition:
    offset, epoch, metadata = _fields(fetched)
    return OffsetFetchResponsePartition(partition_index=fetched.partition, committed_offset=offset,
                                        committed_leader_epoch=epoch, metadata=metadata, error_code=fetched.error)


def _partitions(fetched: FetchedOffset) -> OffsetFetchResponsePartitions:
    offset, epoch, metadata = _fields(fetched)
    return OffsetFetchResponsePartitions(partition_index=fetched.partition, committed_offset=offset,
                                         committed_leader_epoch=epoch, metadata=metadata, error_code=fetched.error)
