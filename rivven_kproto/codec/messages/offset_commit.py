"""OffsetCommit (key 8), versions 2-9."""

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
class OffsetCommitRequestPartition(Struct):
    partition_index: int = kf(INT32)
    committed_offset: int = kf(INT64)
    committed_leader_epoch: int = kf(INT32, "6+", default=-1, ignorable=True)
    committed_metadata: str | None = kf(STRING, nullable="0+")


@kafka_struct
class OffsetCommitRequestTopic(Struct):
    name: str = kf(STRING)
    partitions: list[OffsetCommitRequestPartition] = kf(Array(OffsetCommitRequestPartition))


@kafka_message(api_key=8, valid="2-9", flexible="8+")
class OffsetCommitRequest(Request):
    group_id: str = kf(STRING)
    generation_id_or_member_epoch: int = kf(INT32, "1+", default=-1, ignorable=True)
    member_id: str = kf(STRING, "1+", ignorable=True)
    group_instance_id: str | None = kf(STRING, "7+", nullable="7+", default=None)
    retention_time_ms: int = kf(INT64, "2-4", default=-1, ignorable=True)
    topics: list[OffsetCommitRequestTopic] = kf(Array(OffsetCommitRequestTopic))


@kafka_struct
class OffsetCommitResponsePartition(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)


@kafka_struct
class OffsetCommitResponseTopic(Struct):
    name: str = kf(STRING)
    partitions: list[OffsetCommitResponsePartition] = kf(Array(OffsetCommitResponsePartition))


@kafka_message(api_key=8, valid="2-9", flexible="8+")
class OffsetCommitResponse(Response):
    throttle_time_ms: int = kf(INT32, "3+", ignorable=True)
    topics: list[OffsetCommitResponseTopic] = kf(Array(OffsetCommitResponseTopic))
