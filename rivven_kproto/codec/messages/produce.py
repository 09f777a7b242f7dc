"""Produce (key 0), versions 0-12. v0-2 are decoded only to answer UNSUPPORTED_VERSION; v12 (Kafka 4.0)
is v11's wire format (KIP-890 part 2: inside a transaction it also adds the partition to it)."""

from __future__ import annotations

from ..schema import (
    INT16,
    INT32,
    INT64,
    RECORDS,
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
class PartitionProduceData(Struct):
    index: int = kf(INT32)
    records: bytes | None = kf(RECORDS, nullable="0+")


@kafka_struct
class TopicProduceData(Struct):
    name: str = kf(STRING)
    partition_data: list[PartitionProduceData] = kf(Array(PartitionProduceData))


@kafka_message(api_key=0, valid="0-12", flexible="9+")
class ProduceRequest(Request):
    transactional_id: str | None = kf(STRING, "3+", nullable="3+", default=None)
    acks: int = kf(INT16)
    timeout_ms: int = kf(INT32)
    topic_data: list[TopicProduceData] = kf(Array(TopicProduceData))


@kafka_struct
class BatchIndexAndErrorMessage(Struct):
    batch_index: int = kf(INT32, "8+")
    batch_index_error_message: str | None = kf(STRING, "8+", nullable="8+", default=None)


@kafka_struct
class LeaderIdAndEpoch(Struct):
    leader_id: int = kf(INT32, "10+", default=-1)
    leader_epoch: int = kf(INT32, "10+", default=-1)


@kafka_struct
class PartitionProduceResponse(Struct):
    index: int = kf(INT32)
    error_code: int = kf(INT16)
    base_offset: int = kf(INT64)
    log_append_time_ms: int = kf(INT64, "2+", default=-1, ignorable=True)
    log_start_offset: int = kf(INT64, "5+", default=-1, ignorable=True)
    record_errors: list[BatchIndexAndErrorMessage] = kf(Array(BatchIndexAndErrorMessage), "8+", ignorable=True)
    error_message: str | None = kf(STRING, "8+", nullable="8+", default=None, ignorable=True)
    current_leader: LeaderIdAndEpoch = kf(LeaderIdAndEpoch, "10+", tag=0, tagged="10+")


@kafka_struct
class TopicProduceResponse(Struct):
    name: str = kf(STRING)
    partition_responses: list[PartitionProduceResponse] = kf(Array(PartitionProduceResponse))


@kafka_struct
class NodeEndpoint(Struct):
    node_id: int = kf(INT32, "10+")
    host: str = kf(STRING, "10+")
    port: int = kf(INT32, "10+")
    rack: str | None = kf(STRING, "10+", nullable="10+", default=None)


@kafka_message(api_key=0, valid="0-12", flexible="9+")
class ProduceResponse(Response):
    responses: list[TopicProduceResponse] = kf(Array(TopicProduceResponse))
    throttle_time_ms: int = kf(INT32, "1+", default=0, ignorable=True)
    node_endpoints: list[NodeEndpoint] = kf(Array(NodeEndpoint), "10+", tag=0, tagged="10+")
