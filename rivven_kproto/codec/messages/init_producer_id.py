"""InitProducerId (key 22), versions 0-4."""

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


@kafka_message(api_key=22, valid="0-4", flexible="2+")
class InitProducerIdRequest(Request):
    transactional_id: str | None = kf(STRING, nullable="0+")
    transaction_timeout_ms: int = kf(INT32)
    producer_id: int = kf(INT64, "3+", default=-1)
    producer_epoch: int = kf(INT16, "3+", default=-1)


@kafka_message(api_key=22, valid="0-4", flexible="2+")
class InitProducerIdResponse(Response):
    throttle_time_ms: int = kf(INT32, ignorable=True)
    error_code: int = kf(INT16)
    producer_id: int = kf(INT64, default=-1)
    producer_epoch: int = kf(INT16)
