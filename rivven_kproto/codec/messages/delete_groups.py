"""DeleteGroups (key 42), versions 0-2."""

from __future__ import annotations

from ..schema import (
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


@kafka_message(api_key=42, valid="0-2", flexible="2+")
class DeleteGroupsRequest(Request):
    groups_names: list[str] = kf(Array(STRING))


@kafka_struct
class DeletableGroupResult(Struct):
    group_id: str = kf(STRING)
    error_code: int = kf(INT16)


@kafka_message(api_key=42, valid="0-2", flexible="2+")
class DeleteGroupsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    results: list[DeletableGroupResult] = kf(Array(DeletableGroupResult))
