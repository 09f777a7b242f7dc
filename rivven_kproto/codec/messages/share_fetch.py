"""ShareFetch (key 78), versions 1-2 (KIP-932; v2 adds the acquire mode and renew acks, KIP-1206/1222)."""

from __future__ import annotations

import uuid

from ..schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    ZERO_UUID,
    Array,
    Request,
    Response,
    Struct,
    kafka_message,
    kafka_struct,
    kf,
)
from .share_common import AcknowledgementBatch, ShareLeaderIdAndEpoch, ShareNodeEndpoint


@kafka_struct(name="FetchPartition")
class ShareFetchPartition(Struct):
    partition_index: int = kf(INT32)
    partition_max_bytes: int = kf(INT32, "0", default=0)
    acknowledgement_batches: list[AcknowledgementBatch] = kf(Array(AcknowledgementBatch))


@kafka_struct(name="FetchTopic")
class ShareFetchTopic(Struct):
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    partitions: list[ShareFetchPartition] = kf(Array(ShareFetchPartition))


@kafka_struct(name="ForgottenTopic")
class ShareForgottenTopic(Struct):
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    partitions: list[int] = kf(Array(INT32))


@kafka_message(api_key=78, valid="1-2", flexible="0+")
class ShareFetchRequest(Request):
    group_id: str | None = kf(STRING, nullable="0+", default=None)
    member_id: str | None = kf(STRING, nullable="0+")
    share_session_epoch: int = kf(INT32)
    max_wait_ms: int = kf(INT32)
    min_bytes: int = kf(INT32)
    max_bytes: int = kf(INT32, default=0x7FFFFFFF)
    max_records: int = kf(INT32, "1+")
    batch_size: int = kf(INT32, "1+")
    share_acquire_mode: int = kf(INT8, "2+", default=0, ignorable=True)
    is_renew_ack: bool = kf(BOOL, "2+", default=False)
    topics: list[ShareFetchTopic] = kf(Array(ShareFetchTopic))
    forgotten_topics_data: list[ShareForgottenTopic] = kf(Array(ShareForgottenTopic))


@kafka_struct(name="AcquiredRecords")
class AcquiredRecords(Struct):
    first_offset: int = kf(INT64)
    last_offset: int = kf(INT64)
    delivery_count: int = kf(INT16)


@kafka_struct(name="PartitionData")
class ShareFetchPartitionData(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    acknowledge_error_code: int = kf(INT16)
    acknowledge_error_message: str | None = kf(STRING, nullable="0+", default=None)
    current_leader: ShareLeaderIdAndEpoch = kf(ShareLeaderIdAndEpoch)
    records: bytes | None = kf(RECORDS, nullable="0")
    acquired_records: list[AcquiredRecords] = kf(Array(AcquiredRecords))


@kafka_struct(name="ShareFetchableTopicResponse")
class ShareFetchableTopicResponse(Struct):
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    partitions: list[ShareFetchPartitionData] = kf(Array(ShareFetchPartitionData))


@kafka_message(api_key=78, valid="1-2", flexible="0+")
class ShareFetchResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    acquisition_lock_timeout_ms: int = kf(INT32, "1+")
    responses: list[ShareFetchableTopicResponse] = kf(Array(ShareFetchableTopicResponse))
    node_endpoints: list[ShareNodeEndpoint] = kf(Array(ShareNodeEndpoint))
