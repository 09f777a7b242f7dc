"""Heartbeat (key 12), versions 0-4."""

from __future__ import annotations

from ..schema import INT16, INT32, STRING, Request, Response, kafka_message, kf


@kafka_message(api_key=12, valid="0-4", flexible="4+")
class HeartbeatRequest(Request):
    group_id: str = kf(STRING)
    generation_id: int = kf(INT32)
    member_id: str = kf(STRING)
    group_instance_id: str | None = kf(STRING, "3+", nullable="3+", default=None)


@kafka_message(api_key=12, valid="0-4", flexible="4+")
class HeartbeatResponse(Response):
    throttle_time_ms: int = kf(INT32, "1+", ignorable=True)
    error_code: int = kf(INT16)
