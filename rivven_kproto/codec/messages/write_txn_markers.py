"""WriteTxnMarkers (key 27), versions 0-1."""

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
class WritableTxnMarkerTopic(Struct):
    name: str = kf(STRING)
    partition_indexes: list[int] = kf(Array(INT32))


@kafka_struct
class WritableTxnMarker(Struct):
    producer_id: int = kf(INT64)
    producer_epoch: int = kf(INT16)
    transaction_result: bool = kf(BOOL)  # false = ABORT, true = COMMIT
    topics: list[WritableTxnMarkerTopic] = kf(Array(WritableTxnMarkerTopic))
    coordinator_epoch: int = kf(INT32)


@kafka_message(api_key=27, valid="0-1", flexible="1+")
class WriteTxnMarkersRequest(Request):
    markers: list[WritableTxnMarker] = kf(Array(WritableTxnMarker))


@kafka_struct
class WritableTxnMarkerPartitionResult(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)


@kafka_struct
class WritableTxnMarkerTopicResult(Struct):
    name: str = kf(STRING)
    partitions: list[WritableTxnMarkerPartitionResult] = kf(Array(WritableTxnMarkerPartitionResult))


@kafka_struct
class WritableTxnMarkerResult(Struct):
    producer_id: int = kf(INT64)
    topics: list[WritableTxnMarkerTopicResult] = kf(Array(WritableTxnMarkerTopicResult))


@kafka_message(api_key=27, valid="0-1", flexible="1+")
class WriteTxnMarkersResponse(Response):
    markers: list[WritableTxnMarkerResult] = kf(Array(WritableTxnMarkerResult))
