"""ListTransactions (key 66), versions 0-1."""

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


@kafka_message(api_key=66, valid="0-1", flexible="0+")
class ListTransactionsRequest(Request):
    state_filters: list[str] = kf(Array(STRING))
    producer_id_filters: list[int] = kf(Array(INT64))
    duration_filter: int = kf(INT64, "1+", default=-1)


@kafka_struct
class TransactionState(Struct):
    transactional_id: str = kf(STRING)
    producer_id: int = kf(INT64)
    transaction_state: str = kf(STRING)


@kafka_message(api_key=66, valid="0-1", flexible="0+")
class ListTransactionsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    unknown_state_filters: list[str] = kf(Array(STRING))
    transaction_states: list[TransactionState] = kf(Array(TransactionState))
