"""TxnOffsetCommit (key 28), versions 0-5 (v4: TRANSACTION_ABORTABLE; v5: transactions V2, KIP-890)."""

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
class TxnOffsetCommitRequestPartition(Struct):
    partition_index: int = kf(INT32)
    committed_offset: int = kf(INT64)
    committed_leader_epoch: int = kf(INT32, "2+", default=-1, ignorable=True)
    committed_metadata: str | None = kf(STRING, nullable="0+")


@kafka_struct
class TxnOffsetCommitRequestTopic(Struct):
    name: str = kf(STRING)
    partitions: list[TxnOffsetCommitRequestPartition] = kf(Array(TxnOffsetCommitRequestPartition))


@kafka_message(api_key=28, valid="0-5", flexible="3+")
class TxnOffsetCommitRequest(Request):
    transactional_id: str = kf(STRING)
    group_id: str = kf(STRING)
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT16)
    generation_id: int = kf(INT32, "3+", default=-1)
    member_id: str = kf(STRING, "3+", default="")
    group_instance_id: str | None = kf(STRING, "3+", nullable="3+", default=None)
    topics: list[TxnOffsetCommitRequestTopic] = kf(Array(TxnOffsetCommitRequestTopic))


@kafka_struct
class TxnOffsetCommitResponsePartition(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)


@kafka_struct
class TxnOffsetCommitResponseTopic(Struct):
    name: str = kf(STRING)
    partitions: list[TxnOffsetCommitResponsePartition] = kf(Array(TxnOffsetCommitResponsePartition))


@kafka_message(api_key=28, valid="0-5", flexible="3+")
class TxnOffsetCommitResponse(Response):
    throttle_time_ms: int = kf(INT32)
    topics: list[TxnOffsetCommitResponseTopic] = kf(Array(TxnOffsetCommitResponseTopic))
