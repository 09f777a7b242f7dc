"""ShareFetch (78), v1-2: records acquired for a share-group member, with piggy-backed
acknowledgements, over a share session (KIP-932; see ``_share.py`` and ``broker/share``).

Order, as in Kafka: the session fields are applied (epoch 0 opens, -1 closes, else the next
epoch), then the acknowledgements, then records are acquired from the session's partitions (at
most MaxRecords, batch-aligned) and answered as Fetch-style record batches with their
AcquiredRecords ranges. Nothing acquired and MaxWaitMs > 0: the request waits (woken by appends
and released records) and acquires again; the acknowledgements are not applied twice. Closing a
session releases what the member still holds.

Authorization (the table, ``broker/security/authorization_rules.py``): Read on the group, Read on
each topic (TOPIC_AUTHORIZATION_FAILED per partition).
MinBytes: with fewer bytes acquired the request waits, acquiring more as records arrive, until
MinBytes or MaxWaitMs (what it holds is answered then); MaxRecords and MaxBytes bound the whole
answer. v2's record-limit acquire mode (KIP-1206) never acquires more than MaxRecords, taking
part of a batch; batch-optimized (the default) acquires whole batches.
Not implemented: NodeEndpoints (one broker leads everything here).
"""

from __future__ import annotations

import uuid
from typing import Any

from rivven_kproto.broker.security.authorization_rules import rule
from rivven_kproto.broker.share.sessions import INITIAL_EPOCH
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.share_common import ShareLeaderIdAndEpoch
from rivven_kproto.codec.messages.share_fetch import (
    AcquiredRecords,
    ShareFetchableTopicResponse,
    ShareFetchPartitionData,
    ShareFetchRequest,
    ShareFetchResponse,
)

from ..context import RequestContext
from ..delayed import Pending
from ..routes import LOCAL
from ..share_disconnect import opened_by_connection
from ..share_loading import read_ahead, requested
from ._share import Delivery, Key, acknowledge, acquire, topic_names
from ._share_groups import member_coordinator
from .fetch import APPENDED

API_KEY = ShareFetchRequest.API_KEY
ROUTE = LOCAL
GROUP, TOPIC = rule(API_KEY).check("group"), rule(API_KEY).check("topic")
FINAL_EPOCH = -1
RECORD_LIMIT = 1  # ShareAcquireMode: 0 batch-optimized, 1 record-limit (KIP-1206)


def _error(error: Errors, message: str | None = None, lock_ms: int = 0) -> ShareFetchResponse:
    return ShareFetchResponse(throttle_time_ms=0, error_code=error, error_message=message,
                              acquisition_lock_timeout_ms=lock_ms, responses=[], node_endpoints=[])


async def prepare(ctx: RequestContext, request: ShareFetchRequest, limiter: Any) -> None:
    """On PostgreSQL: the share state of partitions this leader serves for the first time is read
    on a worker thread first (``server/share_loading.py``), for a client that may read the group."""
    if ctx.refusal(GROUP, request.group_id or "") is not None:
        return
    keys = requested(ctx, request.topics)
    shares = ctx.broker.leader_shares
    session = shares.sessions.sessions.get((request.group_id or "", request.member_id or "")) if shares else None
    if session is not None:  # an incremental fetch names only the partitions it adds
        keys += sorted(session.partitions)
    await read_ahead(ctx, keys, limiter)


def handle(ctx: RequestContext, request: ShareFetchRequest, version: int) -> ShareFetchResponse | Pending:
    group_id, member_id = request.group_id or "", request.member_id or ""  # (empty: INVALID_REQUEST)
    coordinator = member_coordinator(ctx, group_id, member_id, GROUP)
    if isinstance(coordinator, tuple):
        return _error(*coordinator)
    lock_ms = coordinator.config_of(group_id).record_lock_duration_ms
    names = topic_names(ctx)
    ids = {name: topic_id for topic_id, name in names.items()}
    unknown: list[tuple[uuid.UUID, int]] = []
    added: list[Key] = []
    acks = []
    for topic in request.topics:
        name = names.get(topic.topic_id)
        for wanted in topic.partitions:
            if name is None:
                unknown.append((topic.topic_id, wanted.partition_index))
                continue
            added.append((name, wanted.partition_index))
            if wanted.acknowledgement_batches:
                acks.append((name, wanted.partition_index, wanted.acknowledgement_batches))
    forgotten = [(names[t.topic_id], p) for t in request.forgotten_topics_data if t.topic_id in names for p in t.partitions]
    error, session = coordinator.sessions.update(group_id, member_id, request.share_session_epoch, added, forgotten)
    if error is not Errors.NONE:
        return _error(error, lock_ms=lock_ms)
    ack_errors = acknowledge(ctx, coordinator, group_id, member_id, acks, TOPIC)
    if session is None:  # closed: the member's acquired records go back
        coordinator.release_session(group_id, member_id)
        ctx.appended = True
        return _respond(ids, ack_errors, {}, unknown, ctx.config.node_id, lock_ms)
    if request.share_session_epoch == INITIAL_EPOCH:
        opened_by_connection(ctx, session, group_id, member_id)
    wanted_partitions = sorted(session.partitions)
    exact = version >= 2 and request.share_acquire_mode == RECORD_LIMIT
    min_bytes = max(request.min_bytes, 1)
    deliveries: dict[Key, Delivery] = {}

    def attempt(now_ms: int) -> None:
        """Acquire within what is left of MaxRecords and MaxBytes, adding to ``deliveries``."""
        records = request.max_records - sum(a.last - a.first + 1 for d in deliveries.values() for a in d.acquired)
        room = request.max_bytes - _bytes(deliveries)
        if deliveries and (records <= 0 or room <= 0):
            return
        got = acquire(ctx, coordinator, group_id, member_id, wanted_partitions, records, room, now_ms, TOPIC, exact)
        if not deliveries:  # the first attempt (usually the only one): its answer as it is
            deliveries.update(got)
            return
        for key, delivery in got.items():
            _merge(deliveries.setdefault(key, Delivery()), delivery)

    attempt(ctx.now_ms)
    if _enough(deliveries, min_bytes) or request.max_wait_ms <= 0 or not wanted_partitions:
        return _respond(ids, ack_errors, deliveries, unknown, ctx.config.node_id, lock_ms)

    def complete(now_ms: int) -> ShareFetchResponse | None:
        if coordinator.sessions.sessions.get((group_id, member_id)) is not session:  # session replaced
            return _respond(ids, ack_errors, deliveries, unknown, ctx.config.node_id, lock_ms)
        attempt(now_ms)
        return _respond(ids, ack_errors, deliveries, unknown, ctx.config.node_id, lock_ms) if _enough(
            deliveries, min_bytes) else None

    def expire(now_ms: int) -> ShareFetchResponse:
        return _respond(ids, ack_errors, deliveries, unknown, ctx.config.node_id, lock_ms)

    return Pending(APPENDED, ctx.now_ms + request.max_wait_ms, complete, expire)


def _enough(deliveries: dict[Key, Delivery], min_bytes: int) -> bool:
    """Answer now: an error, or records acquired and at least MinBytes of them (as a Fetch waits)."""
    if any(d.error is not Errors.NONE for d in deliveries.values()):
        return True
    return any(d.acquired for d in deliveries.values()) and _bytes(deliveries) >= min_bytes


def _bytes(deliveries: dict[Key, Delivery]) -> int:
    return sum(len(chunk) for d in deliveries.values() for chunk in d.records)


def _merge(into: Delivery, more: Delivery) -> None:
    """A later attempt's acquisitions added to a partition's answer: ranges and batches in offset
    order (released records come back below newer ones), each batch once."""
    if more.error is not Errors.NONE:
        into.error = more.error
    into.acquired = sorted([*into.acquired, *more.acquired], key=lambda a: a.first)
    chunks = {_base_offset(chunk): chunk for chunk in [*into.records, *more.records]}
    into.records = [chunks[k] for k in sorted(chunks)]


def _base_offset(chunk: bytes) -> int:
    return int.from_bytes(chunk[:8], "big", signed=True)


def _respond(ids: dict[str, uuid.UUID], ack_errors: dict[Key, Errors], deliveries: dict[Key, Delivery],
             unknown: list[tuple[uuid.UUID, int]], node_id: int, lock_ms: int) -> ShareFetchResponse:
    by_topic: dict[uuid.UUID, list[ShareFetchPartitionData]] = {}
    for key in sorted(set(ack_errors) | set(deliveries)):
        delivery = deliveries.get(key, Delivery())
        by_topic.setdefault(ids[key[0]], []).append(ShareFetchPartitionData(
            partition_index=key[1], error_code=delivery.error, acknowledge_error_code=ack_errors.get(key, Errors.NONE),
            current_leader=ShareLeaderIdAndEpoch(leader_id=node_id, leader_epoch=0),
            records=b"".join(delivery.records),
            acquired_records=[AcquiredRecords(first_offset=a.first, last_offset=a.last, delivery_count=a.count)
                              for a in delivery.acquired],
        ))
    for topic_id, index in unknown:
        by_topic.setdefault(topic_id, []).append(ShareFetchPartitionData(
            partition_index=index, error_code=Errors.UNKNOWN_TOPIC_ID, acknowledge_error_code=Errors.NONE,
            current_leader=ShareLeaderIdAndEpoch(leader_id=-1, leader_epoch=-1), records=b"", acquired_records=[]))
    return ShareFetchResponse(
        throttle_time_ms=0, error_code=Errors.NONE, acquisition_lock_timeout_ms=lock_ms,
        responses=[ShareFetchableTopicResponse(topic_id=t, partitions=p) for t, p in by_topic.items()],
        node_endpoints=[],
    )
