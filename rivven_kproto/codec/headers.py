"""Request and response headers (RequestHeader v0-2, ResponseHeader v0-1).

The header version follows from the body: a request at a flexible version of its API uses header
v2 (tagged fields), otherwise v1; responses likewise use v1 or v0. ApiVersions responses always use
header v0, whatever the request version (KIP-511), so that clients can read the error even when
the broker does not know their version.
"""

from __future__ import annotations

from .schema import INT16, INT32, STRING, Header, Request, kafka_message, kf

API_VERSIONS_KEY = 18


@kafka_message(api_key=-1, valid="0-2", flexible="2+")
class RequestHeader(Header):
    request_api_key: int = kf(INT16)
    request_api_version: int = kf(INT16)
    correlation_id: int = kf(INT32)
    # Always the classic int16 length, even in flexible versions, so old brokers can read it.
    client_id: str | None = kf(STRING, "1+", nullable="1+", ignorable=True, flexible="none")


@kafka_message(api_key=-1, valid="0-1", flexible="1+")
class ResponseHeader(Header):
    correlation_id: int = kf(INT32)


def request_header_version(request_cls: type[Request], version: int) -> int:
    return 2 if request_cls.is_flexible(version) else 1


def response_header_version(request_cls: type[Request], version: int) -> int:
    if request_cls.API_KEY == API_VERSIONS_KEY:
        return 0
    return 1 if request_cls.is_flexible(version) else 0
