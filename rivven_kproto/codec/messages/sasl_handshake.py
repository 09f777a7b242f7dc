"""SaslHandshake (key 17), versions 0-1."""

from __future__ import annotations

from ..schema import INT16, STRING, Array, Request, Response, kafka_message, kf


@kafka_message(api_key=17, valid="0-1", flexible="none")
class SaslHandshakeRequest(Request):
    mechanism: str = kf(STRING)


@kafka_message(api_key=17, valid="0-1", flexible="none")
class SaslHandshakeResponse(Response):
    error_code: int = kf(INT16)
    mechanisms: list[str] = kf(Array(STRING))
