"""DescribeCluster (key 60), versions 0-1."""

from __future__ import annotations

from ..schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    STRING,
    Array,
    Request,
    Response,
    Struct,
    kafka_message,
    kafka_struct,
    kf,
)


@kafka_message(api_key=60, valid="0-1", flexible="0+")
class DescribeClusterRequest(Request):
    include_cluster_authorized_operations: bool = kf(BOOL)
    endpoint_type: int = kf(INT8, "1+", default=1)


@kafka_struct
class DescribeClusterBroker(Struct):
    broker_id: int = kf(INT32)
    host: str = kf(STRING)
    port: int = kf(INT32)
    rack: str | None = kf(STRING, nullable="0+", default=None)


@kafka_message(api_key=60, valid="0-1", flexible="0+")
class DescribeClusterResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    endpoint_type: int = kf(INT8, "1+", default=1)
    cluster_id: str = kf(STRING)
    controller_id: int = kf(INT32, default=-1)
    brokers: list[DescribeClusterBroker] = kf(Array(DescribeClusterBroker))
    # INT32_MIN means "not requested"; it is not a bitfield value.
    cluster_authorized_operations: int = kf(INT32, default=-2147483648)
