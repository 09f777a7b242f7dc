"""DescribeUserScramCredentials (key 50), version 0 (KIP-554)."""

from __future__ import annotations

from ..schema import (
    INT8,
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
class UserName(Struct):
    name: str = kf(STRING)


@kafka_message(api_key=50, valid="0", flexible="0+")
class DescribeUserScramCredentialsRequest(Request):
    # Null or empty: every user with a credential.
    users: list[UserName] | None = kf(Array(UserName), nullable="0+")


@kafka_struct
class CredentialInfo(Struct):
    mechanism: int = kf(INT8)
    iterations: int = kf(INT32)


@kafka_struct
class DescribeUserScramCredentialsResult(Struct):
    user: str = kf(STRING)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+")
    credential_infos: list[CredentialInfo] = kf(Array(CredentialInfo))


@kafka_message(api_key=50, valid="0", flexible="0+")
class DescribeUserScramCredentialsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+")
    results: list[DescribeUserScramCredentialsResult] = kf(Array(DescribeUserScramCredentialsResult))
