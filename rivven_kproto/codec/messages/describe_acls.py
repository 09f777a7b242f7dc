"""DescribeAcls (key 29), versions 1-3."""

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


@kafka_message(api_key=29, valid="1-3", flexible="2+")
class DescribeAclsRequest(Request):
    resource_type_filter: int = kf(INT8)
    resource_name_filter: str | None = kf(STRING, nullable="0+")
    pattern_type_filter: int = kf(INT8, "1+", default=3)
    principal_filter: str | None = kf(STRING, nullable="0+")
    host_filter: str | None = kf(STRING, nullable="0+")
    operation: int = kf(INT8)
    permission_type: int = kf(INT8)


@kafka_struct
class AclDescription(Struct):
    principal: str = kf(STRING)
    host: str = kf(STRING)
    operation: int = kf(INT8)
    permission_type: int = kf(INT8)


@kafka_struct
class DescribeAclsResource(Struct):
    resource_type: int = kf(INT8)
    resource_name: str = kf(STRING)
    pattern_type: int = kf(INT8, "1+", default=3)
    acls: list[AclDescription] = kf(Array(AclDescription))


@kafka_message(api_key=29, valid="1-3", flexible="2+")
class DescribeAclsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+")
    resources: list[DescribeAclsResource] = kf(Array(DescribeAclsResource))
