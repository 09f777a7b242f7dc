"""ListConfigResources (key 74), versions 0-1 (v0 was ListClientMetricsResources, KIP-1000;
v1 adds the resource types, KIP-1142, Kafka 4.1)."""

from __future__ import annotations

from ..enums import ConfigResourceType
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

# The type v0 lists (and ConfigResource's default below v1); a plain int, as decoded values are.
CLIENT_METRICS = int(ConfigResourceType.CLIENT_METRICS)


@kafka_message(api_key=74, valid="0-1", flexible="0+")
class ListConfigResourcesRequest(Request):
    resource_types: list[int] = kf(Array(INT8), "1+")


@kafka_struct
class ConfigResource(Struct):
    resource_name: str = kf(STRING)
    resource_type: int = kf(INT8, "1+", default=CLIENT_METRICS, ignorable=True)


@kafka_message(api_key=74, valid="0-1", flexible="0+")
class ListConfigResourcesResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    config_resources: list[ConfigResource] = kf(Array(ConfigResource))
