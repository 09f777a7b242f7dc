"""Metadata (key 3), versions 0-12."""

from __future__ import annotations

import uuid

from ..schema import (
    BOOL,
    INT16,
    INT32,
    STRING,
    UUID,
    Array,
    Request,
    Response,
    Struct,
    kafka_message,
    kafka_struct,
    kf,
)


@kafka_struct
class MetadataRequestTopic(Struct):
    topic_id: uuid.UUID = kf(UUID, "10+", ignorable=True)
    name: str | None = kf(STRING, nullable="10+")


@kafka_message(api_key=3, valid="0-12", flexible="9+")
class MetadataRequest(Request):
    # v1+: null means every topic; v0 has no null, an empty array means every topic.
    topics: list[MetadataRequestTopic] | None = kf(Array(MetadataRequestTopic), nullable="1+")
    allow_auto_topic_creation: bool = kf(BOOL, "4+", default=True)
    include_cluster_authorized_operations: bool = kf(BOOL, "8-10")
    include_topic_authorized_operations: bool = kf(BOOL, "8+")


@kafka_struct
class MetadataResponseBroker(Struct):
    node_id: int = kf(INT32)
    host: str = kf(STRING)
    port: int = kf(INT32)
    rack: str | None = kf(STRING, "1+", nullable="1+", default=None, ignorable=True)


@kafka_struct
class MetadataResponsePartition(Struct):
    error_code: int = kf(INT16)
    partition_index: int = kf(INT32)
    leader_id: int = kf(INT32)
    leader_epoch: int = kf(INT32, "7+", default=-1, ignorable=True)
    replica_nodes: list[int] = kf(Array(INT32))
    isr_nodes: list[int] = kf(Array(INT32))
    offline_replicas: list[int] = kf(Array(INT32), "5+", ignorable=True)


@kafka_struct
class MetadataResponseTopic(Struct):
    error_code: int = kf(INT16)
    name: str | None = kf(STRING, nullable="12+")
    topic_id: uuid.UUID = kf(UUID, "10+", ignorable=True)
    is_internal: bool = kf(BOOL, "1+", default=False, ignorable=True)
    partitions: list[MetadataResponsePartition] = kf(Array(MetadataResponsePartition))
    topic_authorized_operations: int = kf(INT32, "8+", default=-2147483648)


@kafka_message(api_key=3, valid="0-12", flexible="9+")
class MetadataResponse(Response):
    throttle_time_ms: int = kf(INT32, "3+", ignorable=True)
    brokers: list[MetadataResponseBroker] = kf(Array(MetadataResponseBroker))
    cluster_id: str | None = kf(STRING, "2+", nullable="2+", default=None, ignorable=True)
    controller_id: int = kf(INT32, "1+", default=-1, ignorable=True)
    topics: list[MetadataResponseTopic] = kf(Array(MetadataResponseTopic))
    cluster_authorized_operations: int = kf(INT32, "8-10", default=-2147483648)
