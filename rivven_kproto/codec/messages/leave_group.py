"""LeaveGroup (key 13), versions 0-5."""

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


@kafka_struct
class MemberIdentity(Struct):
    member_id: str = kf(STRING, "3+")
    group_instance_id: str | None = kf(STRING, "3+", nullable="3+", default=None)
    reason: str | None = kf(STRING, "5+", nullable="5+", default=None, ignorable=True)


@kafka_message(api_key=13, valid="0-5", flexible="4+")
class LeaveGroupRequest(Request):
    group_id: str = kf(STRING)
    # v0-2 leave a single member; v3+ batch them in `members`
    member_id: str = kf(STRING, "0-2")
    members: list[MemberIdentity] = kf(Array(MemberIdentity), "3+")


@kafka_struct
class MemberResponse(Struct):
    member_id: str = kf(STRING, "3+")
    group_instance_id: str | None = kf(STRING, "3+", nullable="3+")
    error_code: int = kf(INT16, "3+")


@kafka_message(api_key=13, valid="0-5", flexible="4+")
class LeaveGroupResponse(Response):
    throttle_time_ms: int = kf(INT32, "1+", ignorable=True)
    error_code: int = kf(INT16)
    members: list[MemberResponse] = kf(Array(MemberResponse), "3+")
