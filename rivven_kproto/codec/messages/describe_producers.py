"""DescribeProducers (key 61), version 0."""

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
class TopicRequest(Struct):
    name: str = kf(STRING)
    partition_indexes: list[int] = kf(Array(INT32))


@kafka_message(api_key=61, valid="0", flexible="0+")
class DescribeProducersRequest(Request):
    topics: list[TopicRequest] = kf(Array(TopicRequest))


@kafka_struct
class ProducerState(Struct):
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT32)  # int32 here, unlike the int16 epoch elsewhere
    last_sequence: int = kf(INT32, default=-1)
    last_timestamp: int = kf(INT64, default=-1)
    coordinator_epoch: int = kf(INT32)
    current_txn_start_offset: int = kf(INT64, default=-1)


@kafka_struct
class PartitionResponse(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    active_producers: list[ProducerState] = kf(Array(ProducerState))


@kafka_struct
class TopicResponse(Struct):
    name: str = kf(STRING)
    partitions: list[PartitionResponse] = kf(Array(PartitionResponse))


@kafka_message(api_key=61, valid="0", flexible="0+")
class DescribeProducersResponse(Response):
    throttle_time_ms: int = kf(INT32)
    topics: list[TopicResponse] = kf(Array(TopicResponse))
