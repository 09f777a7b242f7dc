"""DescribeShareGroupOffsets (90), v0-1: each share-partition's start offset and (v1, KIP-1226) lag.

Topics null: every share-partition the group has, less those of topics the caller may not Describe
(left out, as Kafka); named: each requested partition, TOPIC_AUTHORIZATION_FAILED on a refused
topic, UNKNOWN_TOPIC_OR_PARTITION on one that does not exist, start offset -1 (lag -1) on one
the group has not initialized yet. The lag is the records from the start offset to the end of
what may be delivered (the high watermark, or the last stable offset at read_committed) less
those in flight already acknowledged or archived. Checks come from the authorization table.
On PostgreSQL the state is read from the partitions' share-state logs (``server/share_offsets.py``).
"""

from __future__ import annotations

import uuid
from typing import Any

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.share import ShareCoordinator, SharePartition
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
from ..share_offsets import every_partition, kept_by_leaders, read_summary, stable_ends
from ._share_groups import share_coordinator

API_KEY = DescribeShareGroupOffsetsRequest.API_KEY
ROUTE = LOCAL
GROUP, TOPIC, LISTED = (rule(API_KEY).check(label) for label in ("group", "topic", "listed"))
UNINITIALIZED = -1
ZERO_ID = uuid.UUID(int=0)  # a refused or unknown topic's id
# The states, and the ends of partitions led elsewhere: committed ends, or last stable offsets at read_committed.
Summary = tuple[dict[tuple[str, int], SharePartition], dict[tuple[str, int], int]]


async def prepare(ctx: RequestContext, request: DescribeShareGroupOffsetsRequest, limiter: Any) -> None:
    """On PostgreSQL the partitions' leaders keep the state: the answer is read from their
    share-state logs here, on a worker thread (``server/share_offsets.py``)."""
    if not kept_by_leaders(ctx) or not ctx.broker.share_enabled:
        return
    groups = []
    for wanted in request.groups:
        checked = _checked(ctx, wanted)
        if isinstance(checked, DescribeShareOffsetsGroup):
            groups.append(checked)
            continue
        summary = await read_summary(ctx, wanted.group_id, _existing(ctx, wanted), limiter)
        if ctx.broker.group_configs.share(wanted.group_id).read_committed:  # the leaders' last stable offsets
            summary = (summary[0], await stable_ends(ctx, summary[0]))
        groups.append(_described(ctx, wanted, checked, summary))
    ctx.forwarded_answer = DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)


def handle(ctx: RequestContext, request: DescribeShareGroupOffsetsRequest,
           version: int) -> DescribeShareGroupOffsetsResponse:
    if isinstance(ctx.forwarded_answer, DescribeShareGroupOffsetsResponse):
        return ctx.forwarded_answer
    groups = []
    for wanted in request.groups:
        checked = _checked(ctx, wanted)
        groups.append(checked if isinstance(checked, DescribeShareOffsetsGroup) else _described(ctx, wanted, checked))
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)


def _error(group_id: str, error: Errors, message: str | None = None) -> DescribeShareOffsetsGroup:
    return DescribeShareOffsetsGroup(group_id=group_id, topics=[], error_code=error, error_message=message)


def _checked(ctx: RequestContext, wanted: DescribeShareOffsetsRequestGroup) -> DescribeShareOffsetsGroup | ShareCoordinator:
    """The group's coordinator here, or the group's error answer."""
    group_id = wanted.group_id
    if not ctx.broker.share_enabled:
        return _error(group_id, Errors.UNSUPPORTED_VERSION, "Share groups are not enabled on this broker.")
    if (refused := ctx.refusal(GROUP, group_id)) is not None:
        return _error(group_id, refused)
    coordinator = share_coordinator(ctx.broker, group_id)
    if coordinator is None:
        return _error(group_id, Errors.NOT_COORDINATOR)
    if coordinator.group(group_id) is None:
        return _error(group_id, Errors.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    return coordinator


def _existing(ctx: RequestContext, wanted: DescribeShareOffsetsRequestGroup) -> list[tuple[str, int]]:
    """The existing partitions a describe may show: those named, or every topic's."""
    topics = ctx.broker.topics
    if wanted.topics is None:
        return every_partition(ctx)
    return [(t.topic_name, index) for t in wanted.topics if t.topic_name in topics
            for index in t.partitions if 0 <= index < len(topics[t.topic_name].partitions)]


def _described(ctx: RequestContext, wanted: DescribeShareOffsetsRequestGroup, coordinator: ShareCoordinator,
               summary: Summary | None = None) -> DescribeShareOffsetsGroup:
    group_id = wanted.group_id
    group = coordinator.group(group_id)
    assert group is not None
    if wanted.topics is None:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(summary[0] if summary is not None else group.partitions):
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
            partitions=[_partition(ctx, coordinator, group_id, topic, index, refused, summary)
                        for index in partitions]))
    return DescribeShareOffsetsGroup(group_id=group_id, topics=topics, error_code=Errors.NONE)


def _partition(ctx: RequestContext, coordinator: ShareCoordinator, group_id: str, topic: str, index: int,
               refused: Errors | None, summary: Summary | None) -> DescribeShareOffsetsPartition:
    def error(code: Errors) -> DescribeShareOffsetsPartition:
        return DescribeShareOffsetsPartition(partition_index=index, start_offset=UNINITIALIZED, leader_epoch=-1,
                                             lag=UNINITIALIZED, error_code=code)
    if refused is not None:
        return error(refused)
    try:
        ctx.broker.check_partition_exists(topic, index)
    except KafkaError as exc:
        return error(exc.error)
    key = (topic, index)
    current = summary[0].get(key) if summary is not None else coordinator.current(group_id, topic, index)
    if current is None:
        return DescribeShareOffsetsPartition(partition_index=index, start_offset=UNINITIALIZED, leader_epoch=0,
                                             lag=UNINITIALIZED, error_code=Errors.NONE)
    read_committed = coordinator.config_of(group_id).read_committed
    try:
        log = ctx.broker.partition(topic, index)
        end: int | None = log.last_stable_offset if read_committed else log.high_watermark
    except KafkaError:  # led by another broker (PostgreSQL): the committed end, or its leader's last stable offset
        end = summary[1].get(key) if summary is not None else None
    lag = max(0, end - current.start - current.completed()) if end is not None else UNINITIALIZED
    return DescribeShareOffsetsPartition(partition_index=index, start_offset=current.start, leader_epoch=0, lag=lag,
                                         error_code=Errors.NONE)
