"""FindCoordinator (key 10), versions 0-4."""

from __future__ import annotations

from ..schema import (
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


@kafka_message(api_key=10, valid="0-4", flexible="3+")
class FindCoordinatorRequest(Request):
    # v0-3 look up a single `key`; v4+ batch them in `coordinator_keys`.
    key: str = kf(STRING, "0-3")
    key_type: int = kf(INT8, "1+", default=0)
    coordinator_keys: list[str] = kf(Array(STRING), "4+")


@kafka_struct
class Coordinator(Struct):
    key: str = kf(STRING, "4+")
    node_id: int = kf(INT32, "4+")
    host: str = kf(STRING, "4+")
    port: int = kf(INT32, "4+")
    error_code: int = kf(INT16, "4+")
    error_message: str | None = kf(STRING, "4+", nullable="4+", ignorable=True)


@kafka_message(api_key=10, valid="0-4", flexible="3+")
class FindCoordinatorResponse(Response):
    throttle_time_ms: int = kf(INT32, "1+", ignorable=True)
    error_code: int = kf(INT16, "0-3")
    error_message: str | None = kf(STRING, "1-3", nullable="1-3", ignorable=True)
    node_id: int = kf(INT32, "0-3")
    host: str = kf(STRING, "0-3")
    port: int = kf(INT32, "0-3")
    coordinators: list[Coordinator] = kf(Array(Coordinator), "4+")
