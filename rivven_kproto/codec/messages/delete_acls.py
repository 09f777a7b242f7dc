"""DeleteAcls (key 31), versions 1-3."""

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
class DeleteAclsFilter(Struct):
    resource_type_filter: int = kf(INT8)
    resource_name_filter: str | None = kf(STRING, nullable="0+")
    pattern_type_filter: int = kf(INT8, "1+", default=3)
    principal_filter: str | None = kf(STRING, nullable="0+")
    host_filter: str | None = kf(STRING, nullable="0+")
    operation: int = kf(INT8)
    permission_type: int = kf(INT8)


@kafka_message(api_key=31, valid="1-3", flexible="2+")
class DeleteAclsRequest(Request):
    filters: list[DeleteAclsFilter] = kf(Array(DeleteAclsFilter))


@kafka_struct
class DeleteAclsMatchingAcl(Struct):
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+")
    resource_type: int = kf(INT8)
    resource_name: str = kf(STRING)
    pattern_type: int = kf(INT8, "1+", default=3)
    principal: str = kf(STRING)
    host: str = kf(STRING)
    operation: int = kf(INT8)
    permission_type: int = kf(INT8)


@kafka_struct
class DeleteAclsFilterResult(Struct):
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+")
    matching_acls: list[DeleteAclsMatchingAcl] = kf(Array(DeleteAclsMatchingAcl))


@kafka_message(api_key=31, valid="1-3", flexible="2+")
class DeleteAclsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    filter_results: list[DeleteAclsFilterResult] = kf(Array(DeleteAclsFilterResult))
