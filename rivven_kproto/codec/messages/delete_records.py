"""DeleteRecords (key 21), versions 0-2."""

from __future__ import annotations

from ..schema import (
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
class DeleteRecordsPartition(Struct):
    partition_index: int = kf(INT32)
    offset: int = kf(INT64)


@kafka_struct
class DeleteRecordsTopic(Struct):
    name: str = kf(STRING)
    partitions: list[DeleteRecordsPartition] = kf(Array(DeleteRecordsPartition))


@kafka_message(api_key=21, valid="0-2", flexible="2+")
class DeleteRecordsRequest(Request):
    topics: list[DeleteRecordsTopic] = kf(Array(DeleteRecordsTopic))
    timeout_ms: int = kf(INT32)


@kafka_struct
class DeleteRecordsPartitionResult(Struct):
    partition_index: int = kf(INT32)
    low_watermark: int = kf(INT64)
    error_code: int = kf(INT16)


@kafka_struct
class DeleteRecordsTopicResult(Struct):
    name: str = kf(STRING)
    partitions: list[DeleteRecordsPartitionResult] = kf(Array(DeleteRecordsPartitionResult))


@kafka_message(api_key=21, valid="0-2", flexible="2+")
class DeleteRecordsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    topics: list[DeleteRecordsTopicResult] = kf(Array(DeleteRecordsTopicResult))
