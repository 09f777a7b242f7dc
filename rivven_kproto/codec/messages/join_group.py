"""JoinGroup (key 11), versions 0-7."""

from __future__ import annotations

from ..schema import (
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


@kafka_struct
class JoinGroupRequestProtocol(Struct):
    name: str = kf(STRING)
    metadata: bytes = kf(BYTES)


@kafka_message(api_key=11, valid="0-7", flexible="6+")
class JoinGroupRequest(Request):
    group_id: str = kf(STRING)
    session_timeout_ms: int = kf(INT32)
    rebalance_timeout_ms: int = kf(INT32, "1+", default=-1, ignorable=True)
    member_id: str = kf(STRING)
    group_instance_id: str | None = kf(STRING, "5+", nullable="5+", default=None)
    protocol_type: str = kf(STRING)
    protocols: list[JoinGroupRequestProtocol] = kf(Array(JoinGroupRequestProtocol))


@kafka_struct
class JoinGroupResponseMember(Struct):
    member_id: str = kf(STRING)
    group_instance_id: str | None = kf(STRING, "5+", nullable="5+", default=None, ignorable=True)
    metadata: bytes = kf(BYTES)


@kafka_message(api_key=11, valid="0-7", flexible="6+")
class JoinGroupResponse(Response):
    throttle_time_ms: int = kf(INT32, "2+", ignorable=True)
    error_code: int = kf(INT16)
    generation_id: int = kf(INT32, default=-1)
    protocol_type: str | None = kf(STRING, "7+", nullable="7+", default=None, ignorable=True)
    # present since v0 but only nullable from v7 on
    protocol_name: str | None = kf(STRING, nullable="7+")
    leader: str = kf(STRING)
    member_id: str = kf(STRING)
    members: list[JoinGroupResponseMember] = kf(Array(JoinGroupResponseMember))
