"""ListOffsets (key 2), versions 1-7."""

from __future__ import annotations

from ..schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    Array,
    Request,
    Response,
    Struct,
    kafka_message,
    kafka_struct,
    kf,
)


@kafka_struct
class ListOffsetsPartition(Struct):
    partition_index: int = kf(INT32)
    current_leader_epoch: int = kf(INT32, "4+", default=-1, ignorable=True)
    timestamp: int = kf(INT64)


@kafka_struct
class ListOffsetsTopic(Struct):
    name: str = kf(STRING)
    partitions: list[ListOffsetsPartition] = kf(Array(ListOffsetsPartition))


@kafka_message(api_key=2, valid="1-7", flexible="6+")
class ListOffsetsRequest(Request):
    replica_id: int = kf(INT32)
    isolation_level: int = kf(INT8, "2+")
    topics: list[ListOffsetsTopic] = kf(Array(ListOffsetsTopic))


@kafka_struct
class ListOffsetsPartitionResponse(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)
    timestamp: int = kf(INT64, "1+", default=-1)
    offset: int = kf(INT64, "1+", default=-1)
    leader_epoch: int = kf(INT32, "4+", default=-1)


@kafka_struct
class ListOffsetsTopicResponse(Struct):
    name: str = kf(STRING)
    partitions: list[ListOffsetsPartitionResponse] = kf(Array(ListOffsetsPartitionResponse))


@kafka_message(api_key=2, valid="1-7", flexible="6+")
class ListOffsetsResponse(Response):
    throttle_time_ms: int = kf(INT32, "2+", ignorable=True)
    topics: list[ListOffsetsTopicResponse] = kf(Array(ListOffsetsTopicResponse))
