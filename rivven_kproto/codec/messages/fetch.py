"""Fetch (key 1), versions 4-12."""

from __future__ import annotations

from ..schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    Array,
    Request,
    Response,
    Struct,
    kafka_message,
    kafka_struct,
    kf,
)
from ..splice import ExternalBytes


@kafka_struct
class FetchPartition(Struct):
    partition: int = kf(INT32)
    current_leader_epoch: int = kf(INT32, "9+", default=-1, ignorable=True)
    fetch_offset: int = kf(INT64)
    last_fetched_epoch: int = kf(INT32, "12+", default=-1)
    log_start_offset: int = kf(INT64, "5+", default=-1, ignorable=True)
    partition_max_bytes: int = kf(INT32)


@kafka_struct
class FetchTopic(Struct):
    topic: str = kf(STRING, "0-12", ignorable=True)
    partitions: list[FetchPartition] = kf(Array(FetchPartition))


@kafka_struct
class ForgottenTopic(Struct):
    topic: str = kf(STRING, "7-12", ignorable=True)
    partitions: list[int] = kf(Array(INT32), "7+")


@kafka_message(api_key=1, valid="4-12", flexible="12+")
class FetchRequest(Request):
    # Tagged and first in the spec, so it goes in the trailing tagged-field section, not up front.
    cluster_id: str | None = kf(STRING, "12+", nullable="12+", default=None, tag=0, tagged="12+", ignorable=True)
    replica_id: int = kf(INT32, "0-14", default=-1)
    max_wait_ms: int = kf(INT32)
    min_bytes: int = kf(INT32)
    max_bytes: int = kf(INT32, "3+", default=0x7FFFFFFF, ignorable=True)
    isolation_level: int = kf(INT8, "4+", default=0, ignorable=True)
    session_id: int = kf(INT32, "7+", default=0, ignorable=True)
    session_epoch: int = kf(INT32, "7+", default=-1, ignorable=True)
    topics: list[FetchTopic] = kf(Array(FetchTopic))
    forgotten_topics_data: list[ForgottenTopic] = kf(Array(ForgottenTopic), "7+")
    rack_id: str = kf(STRING, "11+", default="", ignorable=True)


@kafka_struct
class EpochEndOffset(Struct):
    epoch: int = kf(INT32, "12+", default=-1)
    end_offset: int = kf(INT64, "12+", default=-1)


@kafka_struct
class LeaderIdAndEpoch(Struct):
    leader_id: int = kf(INT32, "12+", default=-1)
    leader_epoch: int = kf(INT32, "12+", default=-1)


@kafka_struct
class SnapshotId(Struct):
    end_offset: int = kf(INT64, default=-1)
    epoch: int = kf(INT32, default=-1)


@kafka_struct
class AbortedTransaction(Struct):
    producer_id: int = kf(INT64, "4+")
    first_offset: int = kf(INT64, "4+")


@kafka_struct
class PartitionData(Struct):
    partition_index: int = kf(INT32)
    error_code: int = kf(INT16)
    high_watermark: int = kf(INT64)
    last_stable_offset: int = kf(INT64, "4+", default=-1, ignorable=True)
    log_start_offset: int = kf(INT64, "5+", default=-1, ignorable=True)
    diverging_epoch: EpochEndOffset = kf(EpochEndOffset, "12+", tag=0, tagged="12+")
    current_leader: LeaderIdAndEpoch = kf(LeaderIdAndEpoch, "12+", tag=1, tagged="12+")
    snapshot_id: SnapshotId = kf(SnapshotId, "12+", tag=2, tagged="12+")
    aborted_transactions: list[AbortedTransaction] | None = kf(
        Array(AbortedTransaction), "4+", nullable="4+", ignorable=True
    )
    preferred_read_replica: int = kf(INT32, "11+", default=-1)
    # An ExternalBytes (a file region) only in a response encoded by encode_response_frame.
    records: bytes | ExternalBytes | None = kf(RECORDS, nullable="0+")

    def record_bytes(self) -> bytes:
        """The records of a decoded response (b"" for null): decoding never yields a region."""
        if isinstance(self.records, ExternalBytes):
            raise TypeError("the records are a region of an encoder-side response, not bytes")
        return self.records or b""


@kafka_struct
class FetchableTopicResponse(Struct):
    topic: str = kf(STRING, "0-12", ignorable=True)
    partitions: list[PartitionData] = kf(Array(PartitionData))


@kafka_message(api_key=1, valid="4-12", flexible="12+")
class FetchResponse(Response):
    throttle_time_ms: int = kf(INT32, "1+", ignorable=True)
    error_code: int = kf(INT16, "7+", ignorable=True)
    session_id: int = kf(INT32, "7+", default=0)
    responses: list[FetchableTopicResponse] = kf(Array(FetchableTopicResponse))
