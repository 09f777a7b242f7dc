"""AddPartitionsToTxn (key 24), versions 0-3 (the single-transaction shape; v4+ batches are not served)."""

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
class AddPartitionsToTxnTopic(Struct):
    name: str = kf(STRING)
    partitions: list[int] = kf(Array(INT32))


@kafka_message(api_key=24, valid="0-3", flexible="3+")
class AddPartitionsToTxnRequest(Request):
    v3_and_below_transactional_id: str = kf(STRING, "0-3")
    v3_and_below_producer_id: int = kf(INT64, "0-3")
    v3_and_below_producer_epoch: int = kf(INT16, "0-3")
    v3_and_below_topics: list[AddPartitionsToTxnTopic] = kf(Array(AddPartitionsToTxnTopic), "0-3")


@kafka_struct
class AddPartitionsToTxnPartitionResult(Struct):
    partition_index: int = kf(INT32)
    partition_error_code: int = kf(INT16)


@kafka_struct
class AddPartitionsToTxnTopicResult(Struct):
    name: str = kf(STRING)
    results_by_partition: list[AddPartitionsToTxnPartitionResult] = kf(Array(AddPartitionsToTxnPartitionResult))


@kafka_message(api_key=24, valid="0-3", flexible="3+")
class AddPartitionsToTxnResponse(Response):
    throttle_time_ms: int = kf(INT32)
    results_by_topic_v3_and_below: list[AddPartitionsToTxnTopicResult] = kf(
        Array(AddPartitionsToTxnTopicResult), "0-3"
    )
