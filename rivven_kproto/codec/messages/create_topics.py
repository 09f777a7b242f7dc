"""CreateTopics (key 19), versions 2-7."""

from __future__ import annotations

import uuid

from ..schema import (
    BOOL,
    INT8,
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
class CreatableReplicaAssignment(Struct):
    partition_index: int = kf(INT32)
    broker_ids: list[int] = kf(Array(INT32))


@kafka_struct
class CreatableTopicConfig(Struct):
    name: str = kf(STRING)
    value: str | None = kf(STRING, nullable="0+")


@kafka_struct
class CreatableTopic(Struct):
    name: str = kf(STRING)
    num_partitions: int = kf(INT32)
    replication_factor: int = kf(INT16)
    assignments: list[CreatableReplicaAssignment] = kf(Array(CreatableReplicaAssignment))
    configs: list[CreatableTopicConfig] = kf(Array(CreatableTopicConfig))


@kafka_message(api_key=19, valid="2-7", flexible="5+")
class CreateTopicsRequest(Request):
    topics: list[CreatableTopic] = kf(Array(CreatableTopic))
    # The spec spells these two in lowerCamelCase; the wire is unaffected.
    timeout_ms: int = kf(INT32, default=60000)
    validate_only: bool = kf(BOOL, "1+", default=False)


@kafka_struct
class CreatableTopicConfigs(Struct):
    name: str = kf(STRING, "5+")
    value: str | None = kf(STRING, "5+", nullable="5+")
    read_only: bool = kf(BOOL, "5+")
    config_source: int = kf(INT8, "5+", default=-1, ignorable=True)
    is_sensitive: bool = kf(BOOL, "5+")


@kafka_struct
class CreatableTopicResult(Struct):
    name: str = kf(STRING)
    topic_id: uuid.UUID = kf(UUID, "7+", ignorable=True)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, "1+", nullable="0+", ignorable=True)
    topic_config_error_code: int = kf(INT16, "5+", tag=0, tagged="5+", ignorable=True)
    num_partitions: int = kf(INT32, "5+", default=-1, ignorable=True)
    replication_factor: int = kf(INT16, "5+", default=-1, ignorable=True)
    # Null when the configs are not returned (e.g. not authorized to describe them).
    configs: list[CreatableTopicConfigs] | None = kf(
        Array(CreatableTopicConfigs), "5+", nullable="5+", ignorable=True
    )


@kafka_message(api_key=19, valid="2-7", flexible="5+")
class CreateTopicsResponse(Response):
    throttle_time_ms: int = kf(INT32, "2+", ignorable=True)
    topics: list[CreatableTopicResult] = kf(Array(CreatableTopicResult))
