"""DescribeTopicPartitions (key 75), version 0 (KIP-966): topics' partitions, paginated.

As Kafka's handler: an empty topic list asks for every topic the client may Describe (others are
left out); named topics are answered in name order, from the cursor's topic and partition on,
until ``min(response_partition_limit, 2000)`` partitions are listed; ``next_cursor`` then names
the first partition left out (or the next topic, at index 0, when the limit ended exactly at a
topic's end). A cursor whose topic is not among the named topics is INVALID_REQUEST. Unknown
topics get UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name); topics the
client may not Describe get TOPIC_AUTHORIZATION_FAILED with a zero id, after the others. Every
listed topic carries its authorized operations. One node: each partition is led by this broker
(leader epoch 0), which is its only replica and ISR; no eligible leader replicas.
"""

from __future__ import annotations

from rivven_kproto.broker.log.partition import LEADER_EPOCH
from rivven_kproto.broker.security.acls import ResourceType
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.topics import INTERNAL_TOPICS, validate_topic_name
from rivven_kproto.codec.acls import TOPIC_OPERATIONS
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from rivven_kproto.codec.schema import ZERO_UUID

from ..context import RequestContext
from ..routes import LOCAL

API_KEY = DescribeTopicPartitionsRequest.API_KEY
ROUTE = LOCAL
TOPIC = rule(API_KEY).check("topic")
LISTED = rule(API_KEY).check("listed")
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default


def handle(ctx: RequestContext, request: DescribeTopicPartitionsRequest, version: int) -> DescribeTopicPartitionsResponse:
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not request.topics
    if fetch_all:
        names = {name for name in ctx.broker.topics if name >= cursor_topic}
    else:
        names = {topic.name for topic in request.topics if topic.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[
                _error_topic(Errors.INVALID_REQUEST, topic.name) for topic in request.topics
            ])
    check = LISTED if fetch_all else TOPIC  # all topics: the others are left out; named: refused
    allowed = {name for name in names if ctx.permits(check, name)}
    refused = [_error_topic(check.error, name) for name in sorted(names - allowed)] if check.error else []
    first_index = cursor.partition_index if cursor is not None and cursor_topic in allowed else 0
    limit = min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit)
    topics, next_cursor = _page(ctx, sorted(allowed), cursor_topic, first_index, limit, fetch_all)
    for entry in topics:
        entry.topic_authorized_operations = ctx.authorized_operations(ResourceType.TOPIC, entry.name or "",
                                                                      TOPIC_OPERATIONS)
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics + refused, next_cursor=next_cursor)


def _page(
    ctx: RequestContext, names: list[str], cursor_topic: str, first_index: int, limit: int, fetch_all: bool,
) -> tuple[list[DescribeTopicPartitionsResponseTopic], Cursor | None]:
    """The topics (name order) with at most ``limit`` partitions in all, and where to go on."""
    remaining = limit
    topics: list[DescribeTopicPartitionsResponseTopic] = []
    for name in names:
        if remaining <= 0:
            if remaining == 0:
                return topics, Cursor(topic_name=name, partition_index=0)
            break
        topic = ctx.broker.topics.get(name)
        if topic is None:
            if not fetch_all:
                topics.append(_error_topic(_unknown_topic_error(name), name))
            continue
        count = len(topic.partitions)
        start = first_index if name == cursor_topic else 0
        upper = min(count, start + remaining)
        cluster, topic_id, factor = ctx.broker.cluster, topic.meta.topic_id, topic.meta.replication_factor
        partitions = []
        for index in range(start, upper):
            replicas = cluster.replicas(topic_id, index, factor, topic.meta.assigned(index))
            partitions.append(DescribeTopicPartitionsResponsePartition(
                error_code=Errors.NONE, partition_index=index, leader_id=replicas[0], leader_epoch=LEADER_EPOCH,
                replica_nodes=replicas, isr_nodes=replicas, eligible_leader_replicas=[], last_known_elr=[],
                offline_replicas=[],
            ))
        topics.append(DescribeTopicPartitionsResponseTopic(
            error_code=Errors.NONE, name=name, topic_id=topic.meta.topic_id, is_internal=name in INTERNAL_TOPICS,
            partitions=partitions,
        ))
        if upper < count:
            return topics, Cursor(topic_name=name, partition_index=upper)
        remaining -= len(partitions)
    return topics, None


def _unknown_topic_error(name: str) -> Errors:
    try:
        validate_topic_name(name)
    except KafkaError:
        return Errors.INVALID_TOPIC_EXCEPTION
    return Errors.UNKNOWN_TOPIC_OR_PARTITION


def _error_topic(error: Errors, name: str) -> DescribeTopicPartitionsResponseTopic:
    return DescribeTopicPartitionsResponseTopic(
        error_code=error, name=name, topic_id=ZERO_UUID, is_internal=name in INTERNAL_TOPICS, partitions=[],
    )
