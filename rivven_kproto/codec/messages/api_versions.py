"""ApiVersions (key 18), versions 0-4."""

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


@kafka_message(api_key=18, valid="0-4", flexible="3+")
class ApiVersionsRequest(Request):
    client_software_name: str = kf(STRING, "3+", ignorable=True)
    client_software_version: str = kf(STRING, "3+", ignorable=True)


@kafka_struct
class ApiVersion(Struct):
    api_key: int = kf(INT16)
    min_version: int = kf(INT16)
    max_version: int = kf(INT16)


@kafka_struct
class SupportedFeatureKey(Struct):
    name: str = kf(STRING, "3+")
    min_version: int = kf(INT16, "3+")
    max_version: int = kf(INT16, "3+")


@kafka_struct
class FinalizedFeatureKey(Struct):
    name: str = kf(STRING, "3+")
    max_version_level: int = kf(INT16, "3+")
    min_version_level: int = kf(INT16, "3+")


@kafka_message(api_key=18, valid="0-4", flexible="3+")
class ApiVersionsResponse(Response):
    error_code: int = kf(INT16)
    api_keys: list[ApiVersion] = kf(Array(ApiVersion))
    throttle_time_ms: int = kf(INT32, "1+", ignorable=True)
    supported_features: list[SupportedFeatureKey] = kf(
        Array(SupportedFeatureKey), "3+", tag=0, tagged="3+", ignorable=True
    )
    finalized_features_epoch: int = kf(INT64, "3+", tag=1, tagged="3+", default=-1, ignorable=True)
    finalized_features: list[FinalizedFeatureKey] = kf(
        Array(FinalizedFeatureKey), "3+", tag=2, tagged="3+", ignorable=True
    )
    zk_migration_ready: bool = kf(BOOL, "3+", tag=3, tagged="3+", default=False, ignorable=True)
