"""Fetch (key 1), versions 4-12: read record batches for consumers, by topic name.

``fetch`` answers once from what the logs hold now; ``handle`` answers at once when that is
enough (``min_bytes`` arrived, an error, no wait asked), else returns a :class:`Pending` woken by
every append (:data:`APPENDED`) that answers once ``min_bytes`` arrive or ``max_wait_ms`` passes
(the long-poll, parked by the server's delayed responses like any other wait). Batches travel as the
bytes on disk (never decoded). Size limits follow Kafka: each partition reads at most
``partition_max_bytes`` and the response at most ``max_bytes``, except that the first partition
with data returns its first batch whole, so a consumer always makes progress.

Not implemented: fetch sessions (we answer session id 0 with full responses every time, and
FETCH_SESSION_ID_NOT_FOUND to an incremental request, as Kafka does for an unknown session),
follower fetches and diverging-epoch detection (one node, one leader epoch), topic ids (v13+),
rack-aware preferred read replicas (always -1).

read_committed: data only below the last stable offset, with the aborted transactions that
overlap the returned range (producer id, first offset), so clients drop aborted records. On a
shared database, ``prepare`` first reads the commit decisions of the open transactions that hold a
partition back (``learn_decisions``), so a commit shows on every partition at once.

Zero-copy: on a client connection (``ctx.zero_copy``) a partition's batches may come back as a
:class:`BatchRegion` instead of bytes (``Partition.read_region``): the encoder leaves a hole of
its size and the server fills it with ``os.sendfile`` (plaintext) or reads it a chunk at a time
(TLS), never holding the whole response in memory. The batches, budgets, upper bounds and
aborted transactions are those of the bytes path; only where the bytes come from differs. A
response that is not sent (a long-poll that goes on waiting) releases its regions.

Cold and large reads: ``prepare`` reads on a worker thread the partitions whose fetch offset lies
in a sealed segment, or that may copy 256 KiB or more (``Partition.plan_cold_read``), so a
consumer catching up never makes the event loop wait for the disk or a big copy; ``fetch`` then
cuts those reads to the response's budget. Small reads of the active segment (the tail, where
consumers that keep up read) stay on the loop.
"""

from __future__ import annotations

import logging

import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.log.partition import ColdReadPlan, Partition, check_leader_epoch
from rivven_kproto.broker.log.region import BatchRegion
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.enums import IsolationLevel
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.fetch import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    PartitionData,
)
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.delayed import APPENDED, Pending, after_claims_checked
from rivven_kproto.server.txn_decisions import learn_decisions

from ..routes import Leader, Shape

log = logging.getLogger(__name__)

API_KEY = FetchRequest.API_KEY
TOPIC, FOLLOWER = rule(API_KEY).check("topic"), rule(API_KEY).check("follower")


def may_read(ctx: RequestContext, request: FetchRequest, topic: str) -> bool:
    """Kafka's rule: a follower's fetch (replica id >= 0) needs ClusterAction, a consumer's Read on the topic."""
    if request.replica_id >= 0:
        return ctx.permits(FOLLOWER)
    return ctx.permits(TOPIC, topic)

# Fetch session epochs meaning "full request, no incremental session" (Kafka's FetchMetadata).
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


async def prepare(ctx: RequestContext, request: FetchRequest, limiter: trio.CapacityLimiter) -> None:
    """Read the partitions that start in a sealed segment on a worker thread (into ``ctx.prefetched``);
    at read_committed, first learn the commit decisions the partitions wait for (``learn_decisions``)."""
    isolation = _isolation(request)
    budget = min(max(request.max_bytes, 0), ctx.config.fetch_max_bytes)
    reads: list[tuple[str, FetchPartition, Partition]] = []
    for topic in request.topics:
        if not may_read(ctx, request, topic.topic):
            continue
        for wanted in topic.partitions:
            try:
                reads.append((topic.topic, wanted, ctx.broker.partition(topic.topic, wanted.partition)))
            except KafkaError:
                continue  # answered by ``fetch`` with the partition's error
    if isolation == IsolationLevel.READ_COMMITTED:
        await learn_decisions(ctx.broker, ((partition, wanted.fetch_offset) for _, wanted, partition in reads),
                              limiter)
    planned: list[tuple[tuple[str, int], ColdReadPlan]] = []
    try:
        for name, wanted, partition in reads:
            try:
                plan = partition.plan_cold_read(
                    wanted.fetch_offset, min(max(wanted.partition_max_bytes, 0), budget), isolation,
                    zero_copy=ctx.zero_copy)
            except (KafkaError, OSError, ValueError):
                continue  # answered by ``fetch`` with the partition's error
            if plan is not None:
                planned.append(((name, wanted.partition), plan))
    except BaseException:
        for _, plan in planned:
            plan.release()
        raise
    if not planned:
        return

    def read_all() -> list[bytes | BatchRegion | None]:
        results: list[bytes | BatchRegion | None] = []
        for (topic, index), plan in planned:
            try:
                results.append(plan.run())
            except OSError:
                log.exception("fetch %s-%d: reading the log failed", topic, index)
                results.append(None)  # read again (and answered) by ``fetch``
        return results

    results = await trio.to_thread.run_sync(read_all, limiter=limiter)
    for ((key, plan), data) in zip(planned, results, strict=True):
        if data is not None:
            ctx.prefetched[key] = (plan.offset, data)


def _isolation(request: FetchRequest) -> IsolationLevel:
    committed = request.isolation_level == IsolationLevel.READ_COMMITTED
    return IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED


def handle(ctx: RequestContext, request: FetchRequest, version: int) -> FetchResponse | Pending:
    doubts: list[tuple[str, int]] = []
    response, size, has_error = fetch(ctx, request, version, doubts)
    if doubts:
        release_regions(response)
        return _checked_first(ctx, request, version, doubts)
    if size >= request.min_bytes or has_error or request.max_wait_ms <= 0:
        return response
    release_regions(response)

    def complete(now_ms: int) -> FetchResponse | None:
        response, size, has_error = fetch(ctx, request, version)
        if size >= request.min_bytes or has_error:
            return response
        release_regions(response)
        return None

    def expire(now_ms: int) -> FetchResponse:
        return fetch(ctx, request, version)[0]

    return Pending(APPENDED, ctx.now_ms + request.max_wait_ms, complete, expire)


def _checked_first(ctx: RequestContext, request: FetchRequest, version: int, doubts: list[tuple[str, int]]) -> Pending:
    """A fetch past a partition's end on a cluster: another broker may have claimed the partition
    (and written past this log's end) before this one's heartbeat let go of it. OFFSET_OUT_OF_RANGE
    from such a stale leader sends a consumer back to its reset offset (verify-eos seed 49: a group
    re-read 27 committed records from 0), so the answer waits until a heartbeat that started after
    the request checked these partitions' claims in the store (a lost one answers
    NOT_LEADER_OR_FOLLOWER), or ``HEARTBEAT_HOLD_MS``."""
    return after_claims_checked(ctx.broker, doubts, ctx.now_ms, lambda now_ms: fetch(ctx, request, version)[0])


def fetch(ctx: RequestContext, request: FetchRequest, version: int,
          doubts: list[tuple[str, int]] | None = None) -> tuple[FetchResponse, int, bool]:
    """One pass over the requested partitions: (response, record bytes returned, any error).
    ``doubts``, when given, collects the partitions fetched past their end on a cluster."""
    if request.session_epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        # An incremental fetch names a session we never created (we always answer session id 0).
        log.debug("fetch session %d epoch %d not found", request.session_id, request.session_epoch)
        response = FetchResponse(
            throttle_time_ms=0, error_code=Errors.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[]
        )
        return response, 0, True
    isolation = _isolation(request)
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
            if readable.setdefault(topic.topic, may_read(ctx, request, topic.topic)):
                prefetched = ctx.prefetched.pop((topic.topic, wanted.partition), None)
                data = _read_partition(ctx.broker, topic.topic, wanted, max_bytes, isolation, min_one_batch=min_one_batch,
                                       prefetched=prefetched, zero_copy=ctx.zero_copy)
            else:
                data = error_partition(wanted.partition, Errors.TOPIC_AUTHORIZATION_FAILED)  # both checks' error
            size = len(data.records or b"")
            if size:
                min_one_batch = False
                remaining = max(remaining - size, 0)
                total += size
            has_error = has_error or data.error_code != Errors.NONE
            if (doubts is not None and data.error_code == Errors.OFFSET_OUT_OF_RANGE and ctx.broker.claims.bound_s is not None
                    and wanted.fetch_offset > data.high_watermark >= 0):
                doubts.append((topic.topic, wanted.partition))
            partitions.append(data)
        responses.append(FetchableTopicResponse(topic=topic.topic, partitions=partitions))
    for _, unused in ctx.prefetched.values():  # partitions not read after all (no longer readable)
        if isinstance(unused, BatchRegion):
            unused.release()
    ctx.prefetched.clear()
    response = FetchResponse(throttle_time_ms=0, error_code=Errors.NONE, session_id=0, responses=responses)
    return response, total, has_error


def _read_partition(
    broker: Broker,
    topic: str,
    wanted: FetchPartition,
    max_bytes: int,
    isolation: IsolationLevel,
    *,
    min_one_batch: bool,
    prefetched: tuple[int, bytes | BatchRegion] | None = None,
    zero_copy: bool = False,
) -> PartitionData:
    """Read one partition; every failure becomes the partition's error code, never an exception."""
    partition: Partition | None = None
    cold = prefetched[1] if prefetched is not None and prefetched[0] == wanted.fetch_offset else None
    if prefetched is not None and cold is None and isinstance(prefetched[1], BatchRegion):
        prefetched[1].release()
    try:
        partition = broker.partition(topic, wanted.partition)
        check_leader_epoch(wanted.current_leader_epoch)
        fetched = partition.fetch(wanted.fetch_offset, max_bytes, isolation, min_one_batch=min_one_batch,
                                  prefetched=cold, zero_copy=zero_copy)
    except KafkaError as exc:
        if isinstance(cold, BatchRegion):
            cold.release()  # (idempotent: ``fetch`` releases what it was handed, if it got that far)
        log.debug("fetch %s-%d at %d: %s", topic, wanted.partition, wanted.fetch_offset, exc)
        data = error_partition(wanted.partition, exc.error)
        if exc.error == Errors.OFFSET_OUT_OF_RANGE and partition is not None:
            # Kafka sends -1 here; the real bounds help anyone debugging a reset and harm nobody.
            data.high_watermark = data.last_stable_offset = partition.high_watermark
            data.log_start_offset = partition.log_start_offset
        return data
    except OSError:
        if isinstance(cold, BatchRegion):
            cold.release()
        log.exception("fetch %s-%d: reading the log failed", topic, wanted.partition)
        return error_partition(wanted.partition, Errors.KAFKA_STORAGE_ERROR)
    # Kafka: a list (empty without aborted transactions) for read_committed, null otherwise.
    aborted = None if fetched.aborted is None else [
        AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset) for a in fetched.aborted
    ]
    return PartitionData(
        partition_index=wanted.partition,
        error_code=Errors.NONE,
        high_watermark=fetched.high_watermark,
        last_stable_offset=fetched.last_stable_offset,
        log_start_offset=fetched.log_start_offset,
        aborted_transactions=aborted,
        preferred_read_replica=-1,
        records=fetched.data,
    )


def release_regions(response: FetchResponse) -> None:
    """Let go of the file regions of a response that will not be sent."""
    for topic in response.responses:
        for partition in topic.partitions:
            if isinstance(partition.records, BatchRegion):
                partition.records.release()


def error_partition(index: int, error: Errors) -> PartitionData:
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


ROUTE = Leader(Shape(  # partitions another broker leads go to it (a client with a stale view)
    "topics", "topic", "partitions", "partition", FetchResponse, "responses", "topic", "partitions",
    "partition_index", lambda name, parts: FetchableTopicResponse(topic=name, partitions=parts), error_partition,
    TOPIC))
