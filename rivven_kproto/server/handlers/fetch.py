"""Fetch (key 1), versions 4-12: read record batches for consumers, by topic name.

``fetch`` answers once from what the logs hold now; the server's long-poll loop calls it again
until ``min_bytes`` arrive, an error shows up or ``max_wait_ms`` passes. Batches travel as the
bytes on disk (never decoded). Size limits follow Kafka: each partition reads at most
``partition_max_bytes`` and the response at most ``max_bytes``, except that the first partition
with data returns its first batch whole, so a consumer always makes progress.

Not implemented: fetch sessions (we answer session id 0 with full responses every time, and
FETCH_SESSION_ID_NOT_FOUND to an incremental request, as Kafka does for an unknown session),
follower fetches and diverging-epoch detection (one node, one leader epoch), topic ids (v13+),
rack-aware preferred read replicas (always -1).

read_committed: data only below the last stable offset, with the aborted transactions that
overlap the returned range (producer id, first offset), so clients drop aborted records.
"""

from __future__ import annotations

import logging

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.log.partition_log import LEADER_EPOCH, PartitionLog
from rivven_kproto.broker.security.acls import Operation, ResourceType
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from rivven_kproto.codec.records.batch import iter_headers
from rivven_kproto.server.context import RequestContext

log = logging.getLogger(__name__)

API_KEY = FetchRequest.API_KEY

READ_COMMITTED = 1
# Fetch session epochs meaning "full request, no incremental session" (Kafka's FetchMetadata).
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
NO_LEADER_EPOCH = -1


def high_watermark(partition: PartitionLog) -> int:
    """One node, nothing to replicate: everything appended is committed."""
    return partition.log_end_offset


def last_stable_offset(partition: PartitionLog) -> int:
    """The first offset of the earliest open transaction, or the high watermark."""
    return partition.last_stable_offset


def check_leader_epoch(current_leader_epoch: int) -> None:
    """Kafka's fencing check on a client's idea of the leader epoch (-1: the client has none)."""
    if current_leader_epoch == NO_LEADER_EPOCH:
        return
    if current_leader_epoch < LEADER_EPOCH:
        raise KafkaError(Errors.FENCED_LEADER_EPOCH, f"leader epoch {current_leader_epoch} is older than ours")
    if current_leader_epoch > LEADER_EPOCH:
        raise KafkaError(Errors.UNKNOWN_LEADER_EPOCH, f"leader epoch {current_leader_epoch} is newer than ours")


def handle(ctx: RequestContext, request: FetchRequest, version: int) -> FetchResponse:
    return fetch(ctx, request, version)[0]


def fetch(ctx: RequestContext, request: FetchRequest, version: int) -> tuple[FetchResponse, int, bool]:
    """One pass over the requested partitions: (response, record bytes returned, any error)."""
    if request.session_epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        # An incremental fetch names a session we never created (we always answer session id 0).
        log.debug("fetch session %d epoch %d not found", request.session_id, request.session_epoch)
        response = FetchResponse(
            throttle_time_ms=0, error_code=Errors.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[]
        )
        return response, 0, True
    read_committed = request.isolation_level == READ_COMMITTED
    # The broker's fetch.max.bytes caps what a client may ask for (Kafka: min of the two); the
    # first batch is still returned whole when it is larger, so a consumer can always progress.
    remaining = min(max(request.max_bytes, 0), ctx.config.fetch_max_bytes)
    min_one_batch = True
    total, has_error = 0, False
    responses: list[FetchableTopicResponse] = []
    readable: dict[str, bool] = {}
    for topic in request.topics:
        partitions: list[PartitionData] = []
        for wanted in topic.partitions:
            max_bytes = min(max(wanted.partition_max_bytes, 0), remaining)
            if readable.setdefault(topic.topic, ctx.allowed(Operation.READ, ResourceType.TOPIC, topic.topic)):
                data = _read_partition(
                    ctx.broker, topic.topic, wanted, max_bytes, read_committed=read_committed, min_one_batch=min_one_batch
                )
            else:
                data = _error_partition(wanted.partition, Errors.TOPIC_AUTHORIZATION_FAILED)
            size = len(data.records or b"")
            if size:
                min_one_batch = False
                remaining = max(remaining - size, 0)
                total += size
            has_error = has_error or data.error_code != Errors.NONE
            partitions.append(data)
        responses.append(FetchableTopicResponse(topic=topic.topic, partitions=partitions))
    response = FetchResponse(throttle_time_ms=0, error_code=Errors.NONE, session_id=0, responses=responses)
    return response, total, has_error


def _read_partition(
    broker: Broker,
    topic: str,
    wanted: FetchPartition,
    max_bytes: int,
    *,
    read_committed: bool,
    min_one_batch: bool,
) -> PartitionData:
    """Read one partition; every failure becomes the partition's error code, never an exception."""
    partition: PartitionLog | None = None
    try:
        partition = broker.partition(topic, wanted.partition)
        check_leader_epoch(wanted.current_leader_epoch)
        hw = high_watermark(partition)
        lso = last_stable_offset(partition)
        result = partition.read(
            wanted.fetch_offset, max_bytes, upper_bound=lso if read_committed else hw, min_one_batch=min_one_batch
        )
    except KafkaError as exc:
        log.debug("fetch %s-%d at %d: %s", topic, wanted.partition, wanted.fetch_offset, exc)
        data = _error_partition(wanted.partition, exc.error)
        if exc.error == Errors.OFFSET_OUT_OF_RANGE and partition is not None:
            # Kafka sends -1 here; the real bounds help anyone debugging a reset and harm nobody.
            data.high_watermark = data.last_stable_offset = high_watermark(partition)
            data.log_start_offset = partition.log_start_offset
        return data
    except OSError:
        log.exception("fetch %s-%d: reading the log failed", topic, wanted.partition)
        return _error_partition(wanted.partition, Errors.KAFKA_STORAGE_ERROR)
    return PartitionData(
        partition_index=wanted.partition,
        error_code=Errors.NONE,
        high_watermark=hw,
        last_stable_offset=lso,
        log_start_offset=result.log_start_offset,
        # Kafka: a list (empty without aborted transactions) for read_committed, null otherwise.
        aborted_transactions=_aborted(partition, wanted.fetch_offset, result.data) if read_committed else None,
        preferred_read_replica=-1,
        records=result.data,
    )


def _aborted(partition: PartitionLog, fetch_offset: int, data: bytes) -> list[AbortedTransaction]:
    """Aborted transactions overlapping [fetch_offset, the offset after the returned batches)."""
    end = fetch_offset
    for _, header in iter_headers(data):
        end = header.next_offset
    return [
        AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
        for a in partition.producers.aborted_between(fetch_offset, end)
    ]


def _error_partition(index: int, error: Errors) -> PartitionData:
    # records is b"", never null: librdkafka rejects a null record set.
    return PartitionData(
        partition_index=index,
        error_code=error,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"",
    )
