"""ListOffsets (key 2), versions 1-7: find offsets by timestamp, or the log's bounds.

Timestamps: -1 latest (the high watermark, or the last stable offset for read_committed from v2),
-2 earliest (the log start offset), -3 (v7) the batch holding the largest timestamp, >= 0 the
first batch whose max timestamp reaches it. As in Kafka, a lookup that finds nothing (or only
offsets past what the isolation level may see) answers offset -1, timestamp -1, leader epoch -1;
the same partition named twice answers INVALID_REQUEST for both.

Not implemented: v0's ``old_style_offsets`` (not served), v8+'s -4/-5 (tiered storage). Timestamp
lookups work at batch granularity: the offset is the found batch's base offset (or the log start
offset), as the log does not decode records.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator

import trio

from rivven_kproto.broker.log.partition import LEADER_EPOCH, Partition, check_leader_epoch
from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.codec.enums import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    IsolationLevel,
)
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    ListOffsetsTopicResponse,
)
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.txn_decisions import learn_decisions

from ..routes import Leader, Shape

log = logging.getLogger(__name__)

API_KEY = ListOffsetsRequest.API_KEY
TOPIC = rule(API_KEY).check("topic")

UNKNOWN = -1


async def prepare(ctx: RequestContext, request: ListOffsetsRequest, limiter: trio.CapacityLimiter) -> None:
    """Timestamp lookups an engine cannot answer from memory (PostgreSQL) run on a worker thread;
    at read_committed, the commit decisions the partitions wait for are learnt first."""
    planned: list[tuple[tuple[str, int], Callable[[], tuple[int, int] | None]]] = []
    readable = [topic for topic in request.topics if ctx.permits(TOPIC, topic.name)]
    if request.isolation_level == READ_COMMITTED:  # (v0-1 decode it as 0: read_uncommitted)
        await learn_decisions(ctx.broker, _partitions(ctx, readable), limiter)
    for topic in readable:
        for wanted in topic.partitions:
            if wanted.timestamp < 0 and wanted.timestamp != MAX_TIMESTAMP:
                continue
            try:
                plan = ctx.broker.partition(topic.name, wanted.partition_index).plan_offset_lookup(wanted.timestamp)
            except (KafkaError, ValueError):
                continue  # answered by ``handle``
            if plan is not None:
                planned.append(((topic.name, wanted.partition_index), plan))
    if not planned:
        return

    def look_up_all() -> list[tuple[int, int] | None | OSError]:
        results: list[tuple[int, int] | None | OSError] = []
        for _, plan in planned:
            try:
                results.append(plan())
            except OSError as exc:
                results.append(exc)
        return results

    results = await trio.to_thread.run_sync(look_up_all, limiter=limiter)
    ctx.looked_up.update((key, result) for (key, _), result in zip(planned, results, strict=True))


def _partitions(ctx: RequestContext, topics: list[ListOffsetsTopic]) -> Iterator[tuple[Partition, int]]:
    for topic in topics:
        for wanted in topic.partitions:
            try:
                yield ctx.broker.partition(topic.name, wanted.partition_index), 0
            except KafkaError:
                continue  # answered by ``handle``


def handle(ctx: RequestContext, request: ListOffsetsRequest, version: int) -> ListOffsetsResponse:
    counts = Counter((topic.name, p.partition_index) for topic in request.topics for p in topic.partitions)
    committed = version >= 2 and request.isolation_level == READ_COMMITTED
    isolation = READ_COMMITTED if committed else READ_UNCOMMITTED
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            if counts[(topic.name, wanted.partition_index)] > 1:
                partitions.append(error_partition(wanted.partition_index, Errors.INVALID_REQUEST))
            else:
                partitions.append(_list_offset(ctx, topic.name, wanted, isolation, version))
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _list_offset(
    ctx: RequestContext, topic: str, wanted: ListOffsetsPartition, isolation: IsolationLevel, version: int
) -> ListOffsetsPartitionResponse:
    try:
        if (refused := ctx.refusal(TOPIC, topic)) is not None:
            raise KafkaError(refused)
        partition = ctx.broker.partition(topic, wanted.partition_index)
        check_leader_epoch(wanted.current_leader_epoch)
        fetchable = partition.visible_end(isolation)
        found: tuple[int, int] | None
        if wanted.timestamp == LATEST:
            found = fetchable, UNKNOWN
        elif wanted.timestamp == EARLIEST:
            found = partition.log_start_offset, UNKNOWN
        else:
            key = (topic, wanted.partition_index)
            if key in ctx.looked_up:
                looked_up = ctx.looked_up[key]
                if isinstance(looked_up, OSError):
                    raise looked_up
                found = looked_up
            elif wanted.timestamp == MAX_TIMESTAMP:
                found = partition.max_timestamp_offset()
            else:
                found = partition.offset_for_timestamp(wanted.timestamp)
            # Kafka hides what a consumer of this isolation level could not fetch yet.
            if found is not None and found[0] >= fetchable:
                found = None
    except KafkaError as exc:
        log.debug("list offsets %s-%d: %s", topic, wanted.partition_index, exc)
        return error_partition(wanted.partition_index, exc.error)
    except OSError as exc:  # the log (or its database) could not be read: retriable, as Kafka's storage errors
        log.warning("list offsets %s-%d: %s", topic, wanted.partition_index, exc)
        return error_partition(wanted.partition_index, Errors.KAFKA_STORAGE_ERROR)
    if found is None:
        return error_partition(wanted.partition_index, Errors.NONE)
    offset, timestamp = found
    return ListOffsetsPartitionResponse(
        partition_index=wanted.partition_index,
        error_code=Errors.NONE,
        timestamp=timestamp,
        offset=offset,
        leader_epoch=LEADER_EPOCH if version >= 4 else -1,
    )


def error_partition(index: int, error: Errors) -> ListOffsetsPartitionResponse:
    return ListOffsetsPartitionResponse(
        partition_index=index, error_code=error, timestamp=UNKNOWN, offset=UNKNOWN, leader_epoch=-1
    )


ROUTE = Leader(Shape(  # partitions another broker leads go to it (a client with a stale view)
    "topics", "name", "partitions", "partition_index", ListOffsetsResponse, "topics", "name", "partitions",
    "partition_index", lambda name, parts: ListOffsetsTopicResponse(name=name, partitions=parts), error_partition,
    TOPIC))
