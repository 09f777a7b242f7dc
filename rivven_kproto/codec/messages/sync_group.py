"""SyncGroup (key 14), versions 0-5."""

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
class SyncGroupRequestAssignment(Struct):
    member_id: str = kf(STRING)
    assignment: bytes = kf(BYTES)


@kafka_message(api_key=14, valid="0-5", flexible="4+")
class SyncGroupRequest(Request):
    group_id: str = kf(STRING)
    generation_id: int = kf(INT32)
    member_id: str = kf(STRING)
    group_instance_id: str | None = kf(STRING, "3+", nullable="3+", default=None)
    protocol_type: str | None = kf(STRING, "5+", nullable="5+", default=None, ignorable=True)
    protocol_name: str | None = kf(STRING, "5+", nullable="5+", default=None, ignorable=True)
    assignments: list[SyncGroupRequestAssignment] = kf(Array(SyncGroupRequestAssignment))


@kafka_message(api_key=14, valid="0-5", flexible="4+")
class SyncGroupResponse(Response):
    throttle_time_ms: int = kf(INT32, "1+", ignorable=True)
    error_code: int = kf(INT16)
    protocol_type: str | None = kf(STRING, "5+", nullable="5+", default=None, ignorable=True)
    protocol_name: str | None = kf(STRING, "5+", nullable="5+", default=None, ignorable=True)
    assignment: bytes = kf(BYTES)
