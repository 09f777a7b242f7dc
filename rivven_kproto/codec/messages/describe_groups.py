"""DescribeGroups (key 15), versions 0-5."""

from __future__ import annotations

from ..schema import (
    BOOL,
    BYTES,
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


@kafka_message(api_key=15, valid="0-5", flexible="5+")
class DescribeGroupsRequest(Request):
    groups: list[str] = kf(Array(STRING))
    include_authorized_operations: bool = kf(BOOL, "3+")


@kafka_struct
class DescribedGroupMember(Struct):
    member_id: str = kf(STRING)
    group_instance_id: str | None = kf(STRING, "4+", nullable="4+", default=None, ignorable=True)
    client_id: str = kf(STRING)
    client_host: str = kf(STRING)
    member_metadata: bytes = kf(BYTES)
    member_assignment: bytes = kf(BYTES)


@kafka_struct
class DescribedGroup(Struct):
    error_code: int = kf(INT16)
    group_id: str = kf(STRING)
    group_state: str = kf(STRING)
    protocol_type: str = kf(STRING)
    protocol_data: str = kf(STRING)
    members: list[DescribedGroupMember] = kf(Array(DescribedGroupMember))
    # INT32_MIN means "not requested"
    authorized_operations: int = kf(INT32, "3+", default=-2147483648)


@kafka_message(api_key=15, valid="0-5", flexible="5+")
class DescribeGroupsResponse(Response):
    throttle_time_ms: int = kf(INT32, "1+", ignorable=True)
    groups: list[DescribedGroup] = kf(Array(DescribedGroup))
