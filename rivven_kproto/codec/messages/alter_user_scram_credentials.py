"""AlterUserScramCredentials (key 51), version 0 (KIP-554)."""

from __future__ import annotations

from ..schema import (
    BYTES,
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
class ScramCredentialDeletion(Struct):
    name: str = kf(STRING)
    mechanism: int = kf(INT8)


@kafka_struct
class ScramCredentialUpsertion(Struct):
    name: str = kf(STRING)
    mechanism: int = kf(INT8)
    iterations: int = kf(INT32)
    salt: bytes = kf(BYTES)
    salted_password: bytes = kf(BYTES)


@kafka_message(api_key=51, valid="0", flexible="0+")
class AlterUserScramCredentialsRequest(Request):
    deletions: list[ScramCredentialDeletion] = kf(Array(ScramCredentialDeletion))
    upsertions: list[ScramCredentialUpsertion] = kf(Array(ScramCredentialUpsertion))


@kafka_struct
class AlterUserScramCredentialsResult(Struct):
    user: str = kf(STRING)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+")


@kafka_message(api_key=51, valid="0", flexible="0+")
class AlterUserScramCredentialsResponse(Response):
    throttle_time_ms: int = kf(INT32)
    results: list[AlterUserScramCredentialsResult] = kf(Array(AlterUserScramCredentialsResult))
