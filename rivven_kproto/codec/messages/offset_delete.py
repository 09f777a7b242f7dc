"""OffsetDelete (key 47), version 0."""

from __future__ import annotations

from ..schema import (
    INT16,
    INT32,
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
class OffsetDeleteRequestPartition(Struct):
    partition_index: int = kf(INT32)


@kafka_struct
class OffsetDeleteRequestTopic(Struct):
    name: str = kf(STRING)
    partitions: list[OffsetDeleteRequestPartition] = kf(Array(OffsetDeleteRequestPartition))


@kafka_message(api_key=47, valid="0", flexible="none")
class OffsetDeleteRequest(Request):
    group_id: str = kf(STRING)
    topics: list[OffsetDeleteRequestTopic] = kf(Array(OffsetDeleteRequestTopic))


@kafka_struct
class OffsetDeleteResponsePartition(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)


@kafka_struct
class OffsetDeleteResponseTopic(Struct):
    name: str = kf(STRING)
    partitions: list[OffsetDeleteResponsePartition] = kf(Array(OffsetDeleteResponsePartition))


@kafka_message(api_key=47, valid="0", flexible="none")
class OffsetDeleteResponse(Response):
    # unusually, the error code precedes the throttle time here
    error_code: int = kf(INT16)
    throttle_time_ms: int = kf(INT32, ignorable=True)
    topics: list[OffsetDeleteResponseTopic] = kf(Array(OffsetDeleteResponseTopic))
