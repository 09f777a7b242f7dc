"""ListGroups (key 16), versions 0-5."""

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


@kafka_message(api_key=16, valid="0-5", flexible="3+")
class ListGroupsRequest(Request):
    states_filter: list[str] = kf(Array(STRING), "4+")
    types_filter: list[str] = kf(Array(STRING), "5+")


@kafka_struct
class ListedGroup(Struct):
    group_id: str = kf(STRING)
    protocol_type: str = kf(STRING)
    group_state: str = kf(STRING, "4+", ignorable=True)
    group_type: str = kf(STRING, "5+", ignorable=True)


@kafka_message(api_key=16, valid="0-5", flexible="3+")
class ListGroupsResponse(Response):
    throttle_time_ms: int = kf(INT32, "1+", ignorable=True)
    error_code: int = kf(INT16)
    groups: list[ListedGroup] = kf(Array(ListedGroup))
