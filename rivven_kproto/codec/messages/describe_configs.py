"""DescribeConfigs (key 32), versions 1-4."""

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
class DescribeConfigsResource(Struct):
    resource_type: int = kf(INT8)
    resource_name: str = kf(STRING)
    # Null asks for every configuration key of the resource.
    configuration_keys: list[str] | None = kf(Array(STRING), nullable="0+")


@kafka_message(api_key=32, valid="1-4", flexible="4+")
class DescribeConfigsRequest(Request):
    resources: list[DescribeConfigsResource] = kf(Array(DescribeConfigsResource))
    include_synonyms: bool = kf(BOOL, "1+", default=False)
    include_documentation: bool = kf(BOOL, "3+", default=False)


@kafka_struct
class DescribeConfigsSynonym(Struct):
    name: str = kf(STRING, "1+")
    value: str | None = kf(STRING, "1+", nullable="0+")
    source: int = kf(INT8, "1+")


@kafka_struct
class DescribeConfigsResourceResult(Struct):
    # The spec's v0-only IsDefault (between read_only and config_source) is outside our range.
    name: str = kf(STRING)
    value: str | None = kf(STRING, nullable="0+")
    read_only: bool = kf(BOOL)
    config_source: int = kf(INT8, "1+", default=-1, ignorable=True)
    is_sensitive: bool = kf(BOOL)
    synonyms: list[DescribeConfigsSynonym] = kf(Array(DescribeConfigsSynonym), "1+", ignorable=True)
    config_type: int = kf(INT8, "3+", default=0, ignorable=True)
    documentation: str | None = kf(STRING, "3+", nullable="0+", ignorable=True)


@kafka_struct
class DescribeConfigsResult(Struct):
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+")
    resource_type: int = kf(INT8)
    resource_name: str = kf(STRING)
    configs: list[DescribeConfigsResourceResult] = kf(Array(DescribeConfigsResourceResult))


@kafka_message(api_key=32, valid="1-4", flexible="4+")
class DescribeConfigsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    results: list[DescribeConfigsResult] = kf(Array(DescribeConfigsResult))
