"""EndTxn (key 26), versions 0-5 (v4: TRANSACTION_ABORTABLE; v5: transactions V2, the
response carries the producer id and epoch the coordinator bumped, KIP-890 part 2)."""

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


@kafka_message(api_key=26, valid="0-5", flexible="3+")
class EndTxnRequest(Request):
    transactional_id: str = kf(STRING)
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT16)
    committed: bool = kf(BOOL)


@kafka_message(api_key=26, valid="0-5", flexible="3+")
class EndTxnResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    producer_id: int = kf(INT64, "5+", default=-1, ignorable=True)
    producer_epoch: int = kf(INT16, "5+", default=-1, ignorable=True)
