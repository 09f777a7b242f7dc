"""IncrementalAlterConfigs (key 44), versions 0-1."""

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


@kafka_struct
class AlterableConfig(Struct):
    name: str = kf(STRING)
    config_operation: int = kf(INT8)
    value: str | None = kf(STRING, nullable="0+")


@kafka_struct
class AlterConfigsResource(Struct):
    resource_type: int = kf(INT8)
    resource_name: str = kf(STRING)
    configs: list[AlterableConfig] = kf(Array(AlterableConfig))


@kafka_message(api_key=44, valid="0-1", flexible="1+")
class IncrementalAlterConfigsRequest(Request):
    resources: list[AlterConfigsResource] = kf(Array(AlterConfigsResource))
    validate_only: bool = kf(BOOL)


@kafka_struct
class AlterConfigsResourceResponse(Struct):
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+")
    resource_type: int = kf(INT8)
    resource_name: str = kf(STRING)


@kafka_message(api_key=44, valid="0-1", flexible="1+")
class IncrementalAlterConfigsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    responses: list[AlterConfigsResourceResponse] = kf(Array(AlterConfigsResourceResponse))
