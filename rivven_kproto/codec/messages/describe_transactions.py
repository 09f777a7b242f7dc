"""DescribeTransactions (key 65), version 0."""

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


@kafka_message(api_key=65, valid="0", flexible="0+")
class DescribeTransactionsRequest(Request):
    transactional_ids: list[str] = kf(Array(STRING))


@kafka_struct
class TopicData(Struct):
    topic: str = kf(STRING)
    partitions: list[int] = kf(Array(INT32))


@kafka_struct
class TransactionState(Struct):
    error_code: int = kf(INT16)
    transactional_id: str = kf(STRING)
    transaction_state: str = kf(STRING)
    transaction_timeout_ms: int = kf(INT32)
    transaction_start_time_ms: int = kf(INT64)
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT16)
    topics: list[TopicData] = kf(Array(TopicData))


@kafka_message(api_key=65, valid="0", flexible="0+")
class DescribeTransactionsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    transaction_states: list[TransactionState] = kf(Array(TransactionState))
