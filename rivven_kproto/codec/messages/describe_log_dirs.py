"""DescribeLogDirs (key 35), versions 0-4."""

from __future__ import annotations

from ..schema import (
    BOOL,
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
class DescribableLogDirTopic(Struct):
    topic: str = kf(STRING)
    partitions: list[int] = kf(Array(INT32))


@kafka_message(api_key=35, valid="0-4", flexible="2+")
class DescribeLogDirsRequest(Request):
    # Null asks for every topic.
    topics: list[DescribableLogDirTopic] | None = kf(Array(DescribableLogDirTopic), nullable="0+")


@kafka_struct
class DescribeLogDirsPartition(Struct):
    partition_index: int = kf(INT32)
    partition_size: int = kf(INT64)
    offset_lag: int = kf(INT64)
    is_future_key: bool = kf(BOOL)


@kafka_struct
class DescribeLogDirsTopic(Struct):
    name: str = kf(STRING)
    partitions: list[DescribeLogDirsPartition] = kf(Array(DescribeLogDirsPartition))


@kafka_struct
class DescribeLogDirsResult(Struct):
    error_code: int = kf(INT16)
    log_dir: str = kf(STRING)
    topics: list[DescribeLogDirsTopic] = kf(Array(DescribeLogDirsTopic))
    total_bytes: int = kf(INT64, "4+", default=-1, ignorable=True)
    usable_bytes: int = kf(INT64, "4+", default=-1, ignorable=True)


@kafka_message(api_key=35, valid="0-4", flexible="2+")
class DescribeLogDirsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16, "3+", default=0, ignorable=True)
    results: list[DescribeLogDirsResult] = kf(Array(DescribeLogDirsResult))
