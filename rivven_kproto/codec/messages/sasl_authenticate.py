"""SaslAuthenticate (key 36), versions 0-2."""

from __future__ import annotations

from ..schema import BYTES, INT16, INT64, STRING, Request, Response, kafka_message, kf


@kafka_message(api_key=36, valid="0-2", flexible="2+")
class SaslAuthenticateRequest(Request):
    auth_bytes: bytes = kf(BYTES)


@kafka_message(api_key=36, valid="0-2", flexible="2+")
class SaslAuthenticateResponse(Response):
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+")
    auth_bytes: bytes = kf(BYTES)
    session_lifetime_ms: int = kf(INT64, "1+", default=0, ignorable=True)
