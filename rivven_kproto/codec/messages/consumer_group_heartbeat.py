"""ConsumerGroupHeartbeat (key 68), versions 0-1 (KIP-848; v1 adds the topic regex)."""

from __future__ import annotations

import uuid

from ..schema import (
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


@kafka_struct(name="TopicPartitions")
class HeartbeatTopicPartitions(Struct):
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    partitions: list[int] = kf(Array(INT32))


@kafka_message(api_key=68, valid="0-1", flexible="0+")
class ConsumerGroupHeartbeatRequest(Request):
    group_id: str = kf(STRING)
    member_id: str = kf(STRING)
    member_epoch: int = kf(INT32)
    instance_id: str | None = kf(STRING, nullable="0+", default=None)
    rack_id: str | None = kf(STRING, nullable="0+", default=None)
    rebalance_timeout_ms: int = kf(INT32, default=-1)
    subscribed_topic_names: list[str] | None = kf(Array(STRING), nullable="0+", default=None)
    subscribed_topic_regex: str | None = kf(STRING, "1+", nullable="1+", default=None)
    server_assignor: str | None = kf(STRING, nullable="0+", default=None)
    topic_partitions: list[HeartbeatTopicPartitions] | None = kf(
        Array(HeartbeatTopicPartitions), nullable="0+", default=None)


@kafka_struct(name="Assignment")
class HeartbeatAssignment(Struct):
    topic_partitions: list[HeartbeatTopicPartitions] = kf(Array(HeartbeatTopicPartitions))


@kafka_message(api_key=68, valid="0-1", flexible="0+")
class ConsumerGroupHeartbeatResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    member_id: str | None = kf(STRING, nullable="0+", default=None)
    member_epoch: int = kf(INT32)
    heartbeat_interval_ms: int = kf(INT32)
    assignment: HeartbeatAssignment | None = kf(HeartbeatAssignment, nullable="0+", default=None)
