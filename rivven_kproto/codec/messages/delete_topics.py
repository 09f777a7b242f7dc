"""DeleteTopics (key 20), versions 1-6."""

from __future__ import annotations

import uuid

from ..schema import (
    INT16,
    INT32,
    STRING,
    UUID,
    Array,
    Request,
    Response,
    Struct,
    kafka_message,
    kafka_struct,
    kf,
)


@kafka_struct
class DeleteTopicState(Struct):
    name: str | None = kf(STRING, "6+", nullable="6+", default=None)
    topic_id: uuid.UUID = kf(UUID, "6+")


@kafka_message(api_key=20, valid="1-6", flexible="4+")
class DeleteTopicsRequest(Request):
    # v6 replaces the list of names with (name, id) pairs; exactly one of the two is on the wire.
    topics: list[DeleteTopicState] = kf(Array(DeleteTopicState), "6+")
    topic_names: list[str] = kf(Array(STRING), "0-5", ignorable=True)
    timeout_ms: int = kf(INT32)


@kafka_struct
class DeletableTopicResult(Struct):
    name: str | None = kf(STRING, nullable="6+")
    topic_id: uuid.UUID = kf(UUID, "6+", ignorable=True)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, "5+", nullable="5+", default=None, ignorable=True)


@kafka_message(api_key=20, valid="1-6", flexible="4+")
class DeleteTopicsResponse(Response):
    throttle_time_ms: int = kf(INT32, "1+", ignorable=True)
    responses: list[DeletableTopicResult] = kf(Array(DeletableTopicResult))
