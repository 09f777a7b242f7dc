"""CreateAcls (key 30), versions 1-3."""

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


@kafka_struct
class AclCreation(Struct):
    resource_type: int = kf(INT8)
    resource_name: str = kf(STRING)
    resource_pattern_type: int = kf(INT8, "1+", default=3)
    principal: str = kf(STRING)
    host: str = kf(STRING)
    operation: int = kf(INT8)
    permission_type: int = kf(INT8)


@kafka_message(api_key=30, valid="1-3", flexible="2+")
class CreateAclsRequest(Request):
    creations: list[AclCreation] = kf(Array(AclCreation))


@kafka_struct
class AclCreationResult(Struct):
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+")


@kafka_message(api_key=30, valid="1-3", flexible="2+")
class CreateAclsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    results: list[AclCreationResult] = kf(Array(AclCreationResult))
