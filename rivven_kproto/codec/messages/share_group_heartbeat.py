"""ShareGroupHeartbeat (key 76), version 1 (KIP-932 share groups, Kafka 4.1+; v0 was early access)."""

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


@kafka_message(api_key=76, valid="1", flexible="0+")
class ShareGroupHeartbeatRequest(Request):
    group_id: str = kf(STRING)
    member_id: str = kf(STRING)
    member_epoch: int = kf(INT32)
    rack_id: str | None = kf(STRING, nullable="0+", default=None)
    subscribed_topic_names: list[str] | None = kf(Array(STRING), nullable="0+", default=None)


@kafka_struct(name="TopicPartitions")
class ShareTopicPartitions(Struct):
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    partitions: list[int] = kf(Array(INT32))


@kafka_struct(name="Assignment")
class ShareHeartbeatAssignment(Struct):
    topic_partitions: list[ShareTopicPartitions] = kf(Array(ShareTopicPartitions))


@kafka_message(api_key=76, valid="1", flexible="0+")
class ShareGroupHeartbeatResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    member_id: str | None = kf(STRING, nullable="0+", default=None)
    member_epoch: int = kf(INT32)
    heartbeat_interval_ms: int = kf(INT32)
    assignment: ShareHeartbeatAssignment | None = kf(ShareHeartbeatAssignment, nullable="0+", default=None)
