"""Structs ShareFetch and ShareAcknowledge share (KIP-932): acknowledgement batches, leaders, nodes."""

from __future__ import annotations

from ..schema import INT8, INT32, INT64, STRING, Array, Struct, kafka_struct, kf

# AcknowledgeTypes values (KIP-932; Renew is KIP-1222, v2).
ACK_GAP, ACK_ACCEPT, ACK_RELEASE, ACK_REJECT, ACK_RENEW = 0, 1, 2, 3, 4


@kafka_struct(name="AcknowledgementBatch")
class AcknowledgementBatch(Struct):
    first_offset: int = kf(INT64)
    last_offset: int = kf(INT64)
    acknowledge_types: list[int] = kf(Array(INT8))


@kafka_struct(name="LeaderIdAndEpoch")
class ShareLeaderIdAndEpoch(Struct):
    leader_id: int = kf(INT32)
    leader_epoch: int = kf(INT32)


@kafka_struct(name="NodeEndpoint")
class ShareNodeEndpoint(Struct):
    node_id: int = kf(INT32)
    host: str = kf(STRING)
    port: int = kf(INT32)
    rack: str | None = kf(STRING, nullable="0+", default=None)
