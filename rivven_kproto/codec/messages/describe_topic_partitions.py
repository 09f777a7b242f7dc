"""DescribeTopicPartitions (key 75), version 0 (KIP-966): topics' partitions, paginated by a cursor."""

from __future__ import annotations

import uuid

from ..schema import (
    BOOL,
    INT16,
    INT32,
    STRING,
    UUID,
    ZERO_UUID,
    Array,
    Request,
    Response,
    Struct,
    kafka_message,
    kafka_struct,
    kf,
)


@kafka_struct
class TopicRequest(Struct):
    name: str = kf(STRING)


@kafka_struct
class Cursor(Struct):
    topic_name: str = kf(STRING)
    partition_index: int = kf(INT32)


@kafka_message(api_key=75, valid="0", flexible="0+")
class DescribeTopicPartitionsRequest(Request):
    topics: list[TopicRequest] = kf(Array(TopicRequest))
    response_partition_limit: int = kf(INT32, default=2000)
    cursor: Cursor | None = kf(Cursor, nullable="0+", default=None)


@kafka_struct
class DescribeTopicPartitionsResponsePartition(Struct):
    error_code: int = kf(INT16)
    partition_index: int = kf(INT32)
    leader_id: int = kf(INT32)
    leader_epoch: int = kf(INT32, default=-1, ignorable=True)
    replica_nodes: list[int] = kf(Array(INT32))
    isr_nodes: list[int] = kf(Array(INT32))
    eligible_leader_replicas: list[int] | None = kf(Array(INT32), nullable="0+", default=None)
    last_known_elr: list[int] | None = kf(Array(INT32), nullable="0+", default=None)
    offline_replicas: list[int] = kf(Array(INT32), ignorable=True)


@kafka_struct
class DescribeTopicPartitionsResponseTopic(Struct):
    error_code: int = kf(INT16)
    name: str | None = kf(STRING, nullable="0+")
    topic_id: uuid.UUID = kf(UUID, ignorable=True, default=ZERO_UUID)
    is_internal: bool = kf(BOOL, default=False, ignorable=True)
    partitions: list[DescribeTopicPartitionsResponsePartition] = kf(Array(DescribeTopicPartitionsResponsePartition))
    topic_authorized_operations: int = kf(INT32, default=-2147483648)


@kafka_message(api_key=75, valid="0", flexible="0+")
class DescribeTopicPartitionsResponse(Response):
    throttle_time_ms: int = kf(INT32, ignorable=True)
    topics: list[DescribeTopicPartitionsResponseTopic] = kf(Array(DescribeTopicPartitionsResponseTopic))
    next_cursor: Cursor | None = kf(Cursor, nullable="0+", default=None)

