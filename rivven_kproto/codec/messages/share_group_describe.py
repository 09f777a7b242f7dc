"""ShareGroupDescribe (key 77), version 1 (KIP-932 share groups)."""

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


@kafka_message(api_key=77, valid="1", flexible="0+")
class ShareGroupDescribeRequest(Request):
    group_ids: list[str] = kf(Array(STRING))
    include_authorized_operations: bool = kf(BOOL)


@kafka_struct(name="TopicPartitions")
class ShareDescribedTopicPartitions(Struct):
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    topic_name: str = kf(STRING)
    partitions: list[int] = kf(Array(INT32))


@kafka_struct(name="Assignment")
class ShareDescribedAssignment(Struct):
    topic_partitions: list[ShareDescribedTopicPartitions] = kf(Array(ShareDescribedTopicPartitions))


@kafka_struct(name="Member")
class ShareDescribedMember(Struct):
    member_id: str = kf(STRING)
    rack_id: str | None = kf(STRING, nullable="0+", default=None)
    member_epoch: int = kf(INT32)
    client_id: str = kf(STRING)
    client_host: str = kf(STRING)
    subscribed_topic_names: list[str] = kf(Array(STRING))
    assignment: ShareDescribedAssignment = kf(ShareDescribedAssignment)


@kafka_struct(name="DescribedGroup")
class ShareDescribedGroup(Struct):
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    group_id: str = kf(STRING)
    group_state: str = kf(STRING)
    group_epoch: int = kf(INT32)
    assignment_epoch: int = kf(INT32)
    assignor_name: str = kf(STRING)
    members: list[ShareDescribedMember] = kf(Array(ShareDescribedMember))
    authorized_operations: int = kf(INT32, default=-(2**31))


@kafka_message(api_key=77, valid="1", flexible="0+")
class ShareGroupDescribeResponse(Response):
    throttle_time_ms: int = kf(INT32)
    groups: list[ShareDescribedGroup] = kf(Array(ShareDescribedGroup))
