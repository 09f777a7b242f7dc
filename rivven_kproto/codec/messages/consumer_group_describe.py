"""ConsumerGroupDescribe (key 69), versions 0-1 (KIP-848; v1 adds the member type, KIP-1099)."""

from __future__ import annotations

import uuid

from ..schema import (
    BOOL,
    INT8,
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


@kafka_message(api_key=69, valid="0-1", flexible="0+")
class ConsumerGroupDescribeRequest(Request):
    group_ids: list[str] = kf(Array(STRING))
    include_authorized_operations: bool = kf(BOOL)


@kafka_struct(name="TopicPartitions")
class DescribedTopicPartitions(Struct):
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    topic_name: str = kf(STRING)
    partitions: list[int] = kf(Array(INT32))


@kafka_struct(name="Assignment")
class DescribedAssignment(Struct):
    topic_partitions: list[DescribedTopicPartitions] = kf(Array(DescribedTopicPartitions))


@kafka_struct(name="Member")
class DescribedConsumerGroupMember(Struct):
    member_id: str = kf(STRING)
    instance_id: str | None = kf(STRING, nullable="0+", default=None)
    rack_id: str | None = kf(STRING, nullable="0+", default=None)
    member_epoch: int = kf(INT32)
    client_id: str = kf(STRING)
    client_host: str = kf(STRING)
    subscribed_topic_names: list[str] = kf(Array(STRING))
    subscribed_topic_regex: str | None = kf(STRING, nullable="0+", default=None)
    assignment: DescribedAssignment = kf(DescribedAssignment)
    target_assignment: DescribedAssignment = kf(DescribedAssignment)
    member_type: int = kf(INT8, "1+", default=-1, ignorable=True)


@kafka_struct(name="DescribedGroup")
class DescribedConsumerGroup(Struct):
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    group_id: str = kf(STRING)
    group_state: str = kf(STRING)
    group_epoch: int = kf(INT32)
    assignment_epoch: int = kf(INT32)
    assignor_name: str = kf(STRING)
    members: list[DescribedConsumerGroupMember] = kf(Array(DescribedConsumerGroupMember))
    authorized_operations: int = kf(INT32, default=-(2**31))


@kafka_message(api_key=69, valid="0-1", flexible="0+")
class ConsumerGroupDescribeResponse(Response):
    throttle_time_ms: int = kf(INT32)
    groups: list[DescribedConsumerGroup] = kf(Array(DescribedConsumerGroup))
