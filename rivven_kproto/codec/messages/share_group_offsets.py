"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92):
the admin view of share groups' start offsets (KIP-932), from the Kafka 4.2 schemas."""

from __future__ import annotations

import uuid

from ..schema import (
    INT16,
    INT32,
    INT64,
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

# -- DescribeShareGroupOffsets (90), v0-1 ------------------------------------------------------------


@kafka_struct(name="DescribeShareGroupOffsetsRequestTopic")
class DescribeShareOffsetsRequestTopic(Struct):
    topic_name: str = kf(STRING)
    partitions: list[int] = kf(Array(INT32))


@kafka_struct(name="DescribeShareGroupOffsetsRequestGroup")
class DescribeShareOffsetsRequestGroup(Struct):
    group_id: str = kf(STRING)
    topics: list[DescribeShareOffsetsRequestTopic] | None = kf(
        Array(DescribeShareOffsetsRequestTopic), nullable="0+", default=None)


@kafka_message(api_key=90, valid="0-1", flexible="0+")
class DescribeShareGroupOffsetsRequest(Request):
    groups: list[DescribeShareOffsetsRequestGroup] = kf(Array(DescribeShareOffsetsRequestGroup))


@kafka_struct(name="DescribeShareGroupOffsetsResponsePartition")
class DescribeShareOffsetsPartition(Struct):
    partition_index: int = kf(INT32)
    start_offset: int = kf(INT64)
    leader_epoch: int = kf(INT32)
    lag: int = kf(INT64, "1+", default=-1, ignorable=True)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)


@kafka_struct(name="DescribeShareGroupOffsetsResponseTopic")
class DescribeShareOffsetsTopic(Struct):
    topic_name: str = kf(STRING)
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    partitions: list[DescribeShareOffsetsPartition] = kf(Array(DescribeShareOffsetsPartition))


@kafka_struct(name="DescribeShareGroupOffsetsResponseGroup")
class DescribeShareOffsetsGroup(Struct):
    group_id: str = kf(STRING)
    topics: list[DescribeShareOffsetsTopic] = kf(Array(DescribeShareOffsetsTopic))
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)


@kafka_message(api_key=90, valid="0-1", flexible="0+")
class DescribeShareGroupOffsetsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    groups: list[DescribeShareOffsetsGroup] = kf(Array(DescribeShareOffsetsGroup))


# -- AlterShareGroupOffsets (91), v0 --------------------------------------------------------------------


@kafka_struct(name="AlterShareGroupOffsetsRequestPartition")
class AlterShareOffsetsRequestPartition(Struct):
    partition_index: int = kf(INT32)
    start_offset: int = kf(INT64)


@kafka_struct(name="AlterShareGroupOffsetsRequestTopic")
class AlterShareOffsetsRequestTopic(Struct):
    topic_name: str = kf(STRING)
    partitions: list[AlterShareOffsetsRequestPartition] = kf(Array(AlterShareOffsetsRequestPartition))


@kafka_message(api_key=91, valid="0", flexible="0+")
class AlterShareGroupOffsetsRequest(Request):
    group_id: str = kf(STRING)
    topics: list[AlterShareOffsetsRequestTopic] = kf(Array(AlterShareOffsetsRequestTopic))


@kafka_struct(name="AlterShareGroupOffsetsResponsePartition")
class AlterShareOffsetsPartition(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)


@kafka_struct(name="AlterShareGroupOffsetsResponseTopic")
class AlterShareOffsetsTopic(Struct):
    topic_name: str = kf(STRING)
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    partitions: list[AlterShareOffsetsPartition] = kf(Array(AlterShareOffsetsPartition))


@kafka_message(api_key=91, valid="0", flexible="0+")
class AlterShareGroupOffsetsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    responses: list[AlterShareOffsetsTopic] = kf(Array(AlterShareOffsetsTopic))


# -- DeleteShareGroupOffsets (92), v0 -------------------------------------------------------------------


@kafka_struct(name="DeleteShareGroupOffsetsRequestTopic")
class DeleteShareOffsetsRequestTopic(Struct):
    topic_name: str = kf(STRING)


@kafka_message(api_key=92, valid="0", flexible="0+")
class DeleteShareGroupOffsetsRequest(Request):
    group_id: str = kf(STRING)
    topics: list[DeleteShareOffsetsRequestTopic] = kf(Array(DeleteShareOffsetsRequestTopic))


@kafka_struct(name="DeleteShareGroupOffsetsResponseTopic")
class DeleteShareOffsetsTopic(Struct):
    topic_name: str = kf(STRING)
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)


@kafka_message(api_key=92, valid="0", flexible="0+")
class DeleteShareGroupOffsetsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    responses: list[DeleteShareOffsetsTopic] = kf(Array(DeleteShareOffsetsTopic))
