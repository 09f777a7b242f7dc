"""ShareAcknowledge (key 79), versions 1-2 (KIP-932; v2 adds renew acks and the lock timeout, KIP-1222)."""

from __future__ import annotations

import uuid

from ..schema import (
    BOOL,
    INT16,
    INT32,
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


@kafka_struct(name="AcknowledgePartition")
class AcknowledgePartition(Struct):
    partition_index: int = kf(INT32)
    acknowledgement_batches: list[AcknowledgementBatch] = kf(Array(AcknowledgementBatch))


@kafka_struct(name="AcknowledgeTopic")
class AcknowledgeTopic(Struct):
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    partitions: list[AcknowledgePartition] = kf(Array(AcknowledgePartition))


@kafka_message(api_key=79, valid="1-2", flexible="0+")
class ShareAcknowledgeRequest(Request):
    group_id: str | None = kf(STRING, nullable="0+", default=None)
    member_id: str | None = kf(STRING, nullable="0+")
    share_session_epoch: int = kf(INT32)
    is_renew_ack: bool = kf(BOOL, "2+", default=False)
    topics: list[AcknowledgeTopic] = kf(Array(AcknowledgeTopic))


@kafka_struct(name="PartitionData")
class ShareAcknowledgePartitionData(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    current_leader: ShareLeaderIdAndEpoch = kf(ShareLeaderIdAndEpoch)


@kafka_struct(name="ShareAcknowledgeTopicResponse")
class ShareAcknowledgeTopicResponse(Struct):
    topic_id: uuid.UUID = kf(UUID, default=ZERO_UUID)
    partitions: list[ShareAcknowledgePartitionData] = kf(Array(ShareAcknowledgePartitionData))


@kafka_message(api_key=79, valid="1-2", flexible="0+")
class ShareAcknowledgeResponse(Response):
    throttle_time_ms: int = kf(INT32)
    error_code: int = kf(INT16)
    error_message: str | None = kf(STRING, nullable="0+", default=None)
    acquisition_lock_timeout_ms: int = kf(INT32, "2+", default=0, ignorable=True)
    responses: list[ShareAcknowledgeTopicResponse] = kf(Array(ShareAcknowledgeTopicResponse))
    node_endpoints: list[ShareNodeEndpoint] = kf(Array(ShareNodeEndpoint))
