"""InitProducerId (key 22), versions 0-6 (v5: TRANSACTION_ABORTABLE, KIP-890; v6: KIP-939
two-phase commit fields, unstable in Kafka 4.x and not advertised by our broker)."""

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


@kafka_message(api_key=22, valid="0-6", flexible="2+")
class InitProducerIdRequest(Request):
    transactional_id: str | None = kf(STRING, nullable="0+")
    transaction_timeout_ms: int = kf(INT32)
    producer_id: int = kf(INT64, "3+", default=-1)
    producer_epoch: int = kf(INT16, "3+", default=-1)
    enable2_pc: bool = kf(BOOL, "6+", default=False)
    keep_prepared_txn: bool = kf(BOOL, "6+", default=False)


@kafka_message(api_key=22, valid="0-6", flexible="2+")
class InitProducerIdResponse(Response):
    throttle_time_ms: int = kf(INT32, ignorable=True)
    error_code: int = kf(INT16)
    producer_id: int = kf(INT64, default=-1)
    producer_epoch: int = kf(INT16)
    ongoing_txn_producer_id: int = kf(INT64, "6+", default=-1)
    ongoing_txn_producer_epoch: int = kf(INT16, "6+", default=-1)
