"""DescribeShareGroupOffsets (90), v0-1: each share-partition's start offset and (v1, KIP-1226) lag.

Topics null: every share-partition the group has, less those of topics the caller may not Describe
(left out, as Kafka); named: each requested partition, TOPIC_AUTHORIZATION_FAILED on a refused
topic, UNKNOWN_TOPIC_OR_PARTITION on one that does not exist, start offset -1 (lag -1) on one
the group has not initialized yet. The lag is the records from the start offset to the end of
what may be delivered (the high watermark, or the last stable offset at read_committed) less
those in flight already acknowledged or archived. Checks come from the authorization table.
"""

from __future__ import annotations

import uuid

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.share import ShareCoordinator
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    DescribeShareOffsetsGroup,
    DescribeShareOffsetsPartition,
    DescribeShareOffsetsRequestGroup,
    DescribeShareOffsetsTopic,
)

from ..context import RequestContext
from ..routes import LOCAL
from ._share_groups import offsets_unserved, share_coordinator

API_KEY = DescribeShareGroupOffsetsRequest.API_KEY
ROUTE = LOCAL
GROUP, TOPIC, LISTED = (rule(API_KEY).check(label) for label in ("group", "topic", "listed"))
UNINITIALIZED = -1
ZERO_ID = uuid.UUID(int=0)  # a refused or unknown topic's id


def handle(ctx: RequestContext, request: DescribeShareGroupOffsetsRequest,
           version: int) -> DescribeShareGroupOffsetsResponse:
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=[_group(ctx, g) for g in request.groups])


def _error(group_id: str, error: Errors, message: str | None = None) -> DescribeShareOffsetsGroup:
    return DescribeShareOffsetsGroup(group_id=group_id, topics=[], error_code=error, error_message=message)


def _group(ctx: RequestContext, wanted: DescribeShareOffsetsRequestGroup) -> DescribeShareOffsetsGroup:
    group_id = wanted.group_id
    if (unserved := offsets_unserved(ctx.broker)) is not None:
        return _error(group_id, Errors.UNSUPPORTED_VERSION, unserved)
    if (refused := ctx.refusal(GROUP, group_id)) is not None:
        return _error(group_id, refused)
    coordinator = share_coordinator(ctx.broker, group_id)
    if coordinator is None:
        return _error(group_id, Errors.NOT_COORDINATOR)
    group = coordinator.group(group_id)
    if group is None:
        return _error(group_id, Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    if wanted.topics is None:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(group.partitions):
            if ctx.permits(LISTED, topic):
                by_topic.setdefault(topic, []).append(index)
    else:
        by_topic = {}
        for requested in wanted.topics:
            by_topic.setdefault(requested.topic_name, []).extend(requested.partitions)
    topics = []
    for topic, partitions in by_topic.items():
        refused = ctx.refusal(TOPIC, topic) if wanted.topics is not None else None
        meta = ctx.broker.topics.get(topic)
        topics.append(DescribeShareOffsetsTopic(
            topic_name=topic, topic_id=meta.meta.topic_id if meta is not None and refused is None else ZERO_ID,
            partitions=[_partition(ctx, coordinator, group_id, topic, index, refused) for index in partitions]))
    return DescribeShareOffsetsGroup(group_id=group_id, topics=topics, error_code=Errors.NONE)


def _partition(ctx: RequestContext, coordinator: ShareCoordinator, group_id: str, topic: str, index: int,
               refused: Errors | None) -> DescribeShareOffsetsPartition:
    def error(code: Errors) -> DescribeShareOffsetsPartition:
        return DescribeShareOffsetsPartition(partition_index=index, start_offset=UNINITIALIZED, leader_epoch=-1,
                                             lag=UNINITIALIZED, error_code=code)
    if refused is not None:
        return error(refused)
    try:
        log = ctx.broker.partition(topic, index)
    except KafkaError as exc:
        return error(exc.error)
    current = coordinator.current(group_id, topic, index)
    if current is None:
        return DescribeShareOffsetsPartition(partition_index=index, start_offset=UNINITIALIZED, leader_epoch=0,
                                             lag=UNINITIALIZED, error_code=Errors.NONE)
    end = log.last_stable_offset if coordinator.config.read_committed else log.high_watermark
    lag = max(0, end - current.start - current.completed())
    return DescribeShareOffsetsPartition(partition_index=index, start_offset=current.start, leader_epoch=0, lag=lag,
                                         error_code=Errors.NONE)
