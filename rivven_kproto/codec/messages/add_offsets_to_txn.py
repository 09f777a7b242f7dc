"""AddOffsetsToTxn (key 25), versions 0-4 (v4: TRANSACTION_ABORTABLE, KIP-890)."""

from __future__ import annotations

from ..schema import (
    INT16,
    INT32,
    INT64,
    STRING,
    Request,
    Response,
    kafka_message,
    kf,
)


@kafka_message(api_key=25, valid="0-4", flexible="3+")
class AddOffsetsToTxnRequest(Request):
    transactional_id: str = kf(STRING)
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT16)
    group_id: str = kf(STRING)


@kafka_message(api_key=25, valid="0-4", flexible="3+")
class AddOffsetsToTxnResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
