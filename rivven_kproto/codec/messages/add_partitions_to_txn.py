"""AddPartitionsToTxn (key 24), versions 0-5: v0-3 are the client form (one transaction), v4+ the
broker-to-coordinator form (KIP-890 part 1: several transactions, ``verify_only``); v5 adds
TRANSACTION_ABORTABLE."""

from __future__ import annotations

from ..schema import (
    BOOL,
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


@kafka_struct
class AddPartitionsToTxnTransaction(Struct):
    transactional_id: str = kf(STRING, "4+")
    producer_id: int = kf(INT64, "4+")
    producer_epoch: int = kf(INT16, "4+")
    verify_only: bool = kf(BOOL, "4+", default=False)
    topics: list[AddPartitionsToTxnTopic] = kf(Array(AddPartitionsToTxnTopic), "4+")


@kafka_message(api_key=24, valid="0-5", flexible="3+")
class AddPartitionsToTxnRequest(Request):
    transactions: list[AddPartitionsToTxnTransaction] = kf(Array(AddPartitionsToTxnTransaction), "4+")
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


@kafka_struct
class AddPartitionsToTxnResult(Struct):
    transactional_id: str = kf(STRING, "4+")
    topic_results: list[AddPartitionsToTxnTopicResult] = kf(Array(AddPartitionsToTxnTopicResult), "4+")


@kafka_message(api_key=24, valid="0-5", flexible="3+")
class AddPartitionsToTxnResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16, "4+", default=0, ignorable=True)
    results_by_transaction: list[AddPartitionsToTxnResult] = kf(Array(AddPartitionsToTxnResult), "4+")
    results_by_topic_v3_and_below: list[AddPartitionsToTxnTopicResult] = kf(
        Array(AddPartitionsToTxnTopicResult), "0-3"
    )
