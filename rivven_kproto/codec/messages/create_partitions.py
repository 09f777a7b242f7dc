"""CreatePartitions (key 37), versions 0-3."""

from __future__ import annotations

from ..schema import (
    BOOL,
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
class CreatePartitionsAssignment(Struct):
    broker_ids: list[int] = kf(Array(INT32))


@kafka_struct
class CreatePartitionsTopic(Struct):
    name: str = kf(STRING)
    count: int = kf(INT32)
    # Null lets the controller place the new partitions itself.
    assignments: list[CreatePartitionsAssignment] | None = kf(
        Array(CreatePartitionsAssignment), nullable="0+"
    )


@kafka_message(api_key=37, valid="0-3", flexible="2+")
class CreatePartitionsRequest(Request):
    topics: list[CreatePartitionsTopic] = kf(Array(CreatePartitionsTopic))
    timeout_ms: int = kf(INT32)
    validate_only: bool = kf(BOOL)


@kafka_struct
class CreatePartitionsTopicResult(Struct):
    name: str = kf(STRING)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)


@kafka_message(api_key=37, valid="0-3", flexible="2+")
class CreatePartitionsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    results: list[CreatePartitionsTopicResult] = kf(Array(CreatePartitionsTopicResult))
