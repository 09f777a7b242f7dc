"""OffsetFetch (key 9), versions 1-9."""

from __future__ import annotations

from ..schema import (
    BOOL,
    INT16,
    INT32,
    INT64,
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
class OffsetFetchRequestTopic(Struct):
    name: str = kf(STRING, "0-7")
    partition_indexes: list[int] = kf(Array(INT32), "0-7")


@kafka_struct
class OffsetFetchRequestTopics(Struct):
    name: str = kf(STRING, "8+")
    partition_indexes: list[int] = kf(Array(INT32), "8+")


@kafka_struct
class OffsetFetchRequestGroup(Struct):
    group_id: str = kf(STRING, "8+")
    member_id: str | None = kf(STRING, "9+", nullable="9+", default=None, ignorable=True)
    member_epoch: int = kf(INT32, "9+", default=-1, ignorable=True)
    topics: list[OffsetFetchRequestTopics] | None = kf(Array(OffsetFetchRequestTopics), "8+", nullable="8+")


@kafka_message(api_key=9, valid="1-9", flexible="6+")
class OffsetFetchRequest(Request):
    # v0-7 ask about one group; v8+ batch several groups in `groups` instead.
    group_id: str = kf(STRING, "0-7")
    topics: list[OffsetFetchRequestTopic] | None = kf(Array(OffsetFetchRequestTopic), "0-7", nullable="2-7")
    groups: list[OffsetFetchRequestGroup] = kf(Array(OffsetFetchRequestGroup), "8+")
    require_stable: bool = kf(BOOL, "7+", default=False)


@kafka_struct
class OffsetFetchResponsePartition(Struct):
    partition_index: int = kf(INT32, "0-7")
    committed_offset: int = kf(INT64, "0-7")
    committed_leader_epoch: int = kf(INT32, "5-7", default=-1, ignorable=True)
    metadata: str | None = kf(STRING, "0-7", nullable="0-7")
    error_code: int = kf(INT16, "0-7")


@kafka_struct
class OffsetFetchResponseTopic(Struct):
    name: str = kf(STRING, "0-7")
    partitions: list[OffsetFetchResponsePartition] = kf(Array(OffsetFetchResponsePartition), "0-7")


@kafka_struct
class OffsetFetchResponsePartitions(Struct):
    partition_index: int = kf(INT32, "8+")
    committed_offset: int = kf(INT64, "8+")
    committed_leader_epoch: int = kf(INT32, "8+", default=-1, ignorable=True)
    metadata: str | None = kf(STRING, "8+", nullable="8+")
    error_code: int = kf(INT16, "8+")


@kafka_struct
class OffsetFetchResponseTopics(Struct):
    name: str = kf(STRING, "8+")
    partitions: list[OffsetFetchResponsePartitions] = kf(Array(OffsetFetchResponsePartitions), "8+")


@kafka_struct
class OffsetFetchResponseGroup(Struct):
    group_id: str = kf(STRING, "8+")
    topics: list[OffsetFetchResponseTopics] = kf(Array(OffsetFetchResponseTopics), "8+")
    error_code: int = kf(INT16, "8+", default=0)


@kafka_message(api_key=9, valid="1-9", flexible="6+")
class OffsetFetchResponse(Response):
    throttle_time_ms: int = kf(INT32, "3+", ignorable=True)
    topics: list[OffsetFetchResponseTopic] = kf(Array(OffsetFetchResponseTopic), "0-7")
    error_code: int = kf(INT16, "2-7", default=0, ignorable=True)
    groups: list[OffsetFetchResponseGroup] = kf(Array(OffsetFetchResponseGroup), "8+")
