"""EndTxn (key 26), versions 0-3."""

from __future__ import annotations

from ..schema import (
    BOOL,
    INT16,
    INT32,
    INT64,
    STRING,
    Request,
    Response,
    kafka_message,
    kf,
)


@kafka_message(api_key=26, valid="0-3", flexible="3+")
class EndTxnRequest(Request):
    transactional_id: str = kf(STRING)
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT16)
    committed: bool = kf(BOOL)


@kafka_message(api_key=26, valid="0-3", flexible="3+")
class EndTxnResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
