"""What ShareFetch and ShareAcknowledge share: applying acknowledgements and acquiring records.

Acquisition reads the log once from the share-partition's end, looks only at the batch headers
(never at records) to decide which batches are deliverable, and acquires whole batches: a busy
partition costs one read and one span per batch, not a loop over records. At read_committed the
log is read below the last stable offset only, and batches of aborted transactions (and control
batches, always) are archived as they are passed, so they are never delivered. Records released
for redelivery are read again from their first offset.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.broker.log.producer_state import AbortedTxn
from rivven_kproto.broker.security.authorization_rules import Check
from rivven_kproto.broker.share import (
    AckType,
    Acquired,
    InvalidRecordState,
    LogSpan,
    ShareConfig,
    SharePartition,
    SharePartitions,
)
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.messages.share_common import AcknowledgementBatch
from rivven_kproto.codec.records.batch import BatchHeader, iter_headers

from ..context import RequestContext

log = logging.getLogger(__name__)

READ_CHUNK = 1024 * 1024  # bytes read per step when re-reading released records
MAX_READ_STEPS = 64  # bound on the re-read loop of one range

Key = tuple[str, int]


@dataclass
class Delivery:
    """One partition's share of a ShareFetch response."""

    error: Errors = Errors.NONE
    records: list[bytes] = field(default_factory=list)
    acquired: list[Acquired] = field(default_factory=list)


def topic_names(ctx: RequestContext) -> dict[uuid.UUID, str]:
    return {t.meta.topic_id: name for name, t in ctx.broker.topics.items()}


def acknowledge(ctx: RequestContext, coordinator: SharePartitions, group_id: str, member_id: str,
                acks: Iterable[tuple[str, int, list[AcknowledgementBatch]]], topic_check: Check) -> dict[Key, Errors]:
    """Apply acknowledgement batches per partition (all of a partition's or none); one log entry.
    ``topic_check`` is the calling API's topic row of the authorization table."""
    limit = coordinator.config.delivery_count_limit
    lock_ms = coordinator.config_of(group_id).record_lock_duration_ms
    errors: dict[Key, Errors] = {}
    staged: dict[Key, SharePartition] = {}
    tallies: dict[Key, tuple[dict[AckType, int], int]] = {}  # per partition: records by type, archived
    released = False
    for topic, index, batches in acks:
        key = (topic, index)
        if not batches:
            continue
        refused = ctx.refusal(topic_check, topic)
        if refused is not None:
            errors[key] = refused
            continue
        try:
            current = staged.get(key) or coordinator.current(group_id, topic, index)
        except KafkaError as exc:  # the partition's leader keeps its share state: not this broker
            errors[key] = exc.error
            continue
        if current is None:
            errors[key] = Errors.INVALID_RECORD_STATE
            continue
        edited = current.copy()
        by_type: dict[AckType, int] = {}
        archived = 0
        try:
            for batch in batches:
                archived += _apply_batch(edited, member_id, batch, limit, ctx.now_ms, lock_ms, by_type)
            released = AckType.RELEASE in by_type or released
        except InvalidRecordState as exc:
            log.debug("share group %s %s-%d: %s", group_id, topic, index, exc)
            errors[key] = Errors.INVALID_RECORD_STATE
            continue
        except ValueError as exc:
            log.debug("share group %s %s-%d: %s", group_id, topic, index, exc)
            errors[key] = Errors.INVALID_REQUEST
            continue
        staged[key] = edited
        tallies[key] = (by_type, archived)
        errors[key] = Errors.NONE
    if staged:
        try:
            coordinator.commit(group_id, staged)
        except KafkaError as exc:
            for key in staged:
                errors[key] = exc.error
            return errors
        _note_shares(ctx, staged)
    stats = coordinator.stats_of(group_id)
    for by_type, archived in tallies.values():
        stats.note_acknowledged(by_type, archived)
    if released:
        ctx.appended = True  # released records may be acquired by a parked ShareFetch
    return errors


def _apply_batch(sp: SharePartition, member_id: str, batch: AcknowledgementBatch, limit: int, now_ms: int,
                 lock_ms: int, by_type: dict[AckType, int]) -> int:
    """One AcknowledgementBatch: one type for the range, or one type per offset; its records are
    counted by type into ``by_type``. The records archived."""
    first, last, types = batch.first_offset, batch.last_offset, batch.acknowledge_types
    if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
        raise ValueError(f"bad acknowledgement batch {first}-{last} with {len(types)} types")
    if any(t not in AckType._value2member_map_ for t in types):
        raise ValueError(f"unknown acknowledge type in {types}")
    sp.check_acknowledge(member_id, first, last)
    runs: list[tuple[int, int, AckType]] = []
    if len(types) == 1:
        runs.append((first, last, AckType(types[0])))
    else:
        start = first
        for i in range(1, len(types) + 1):  # runs of one type: one span operation each
            if i == len(types) or types[i] != types[i - 1]:
                runs.append((start, first + i - 1, AckType(types[i - 1])))
                start = first + i
    archived = 0
    for run_first, run_last, ack in runs:
        archived += sp.acknowledge(member_id, run_first, run_last, ack, limit, now_ms, lock_ms)
        by_type[ack] = by_type.get(ack, 0) + run_last - run_first + 1
    return archived


def acquire(ctx: RequestContext, coordinator: SharePartitions, group_id: str, member_id: str,
            partitions: Iterable[Key], max_records: int, max_bytes: int, now_ms: int,
            topic_check: Check, exact: bool = False) -> dict[Key, Delivery]:
    """Acquire up to ``max_records`` over the partitions (batch alignment may exceed it, unless
    ``exact``: the record-limit acquire mode) and read them; a partition of a topic
    ``topic_check`` refuses answers its error."""
    deliveries: dict[Key, Delivery] = {}
    staged: dict[Key, SharePartition] = {}
    budget = max(max_records, 1)
    byte_budget = max(min(max_bytes, ctx.config.fetch_max_bytes), 1)
    for topic, index in partitions:
        delivery = deliveries[(topic, index)] = Delivery()
        refused = ctx.refusal(topic_check, topic)
        if refused is not None:
            delivery.error = refused
            continue
        if budget <= 0 or byte_budget <= 0:
            continue
        try:
            partition = ctx.broker.partition(topic, index)
            edited, data = _acquire_partition(coordinator, group_id, member_id, topic, index, partition, budget,
                                              byte_budget, now_ms, delivery, exact)
        except KafkaError as exc:
            delivery.error = exc.error
            continue
        except OSError:
            log.exception("share fetch %s-%d: reading the log failed", topic, index)
            delivery.error = Errors.KAFKA_STORAGE_ERROR
            continue
        if edited is not None:
            staged[(topic, index)] = edited
        taken = sum(a.last - a.first + 1 for a in delivery.acquired)
        budget -= taken
        byte_budget -= sum(len(d) for d in data)
        delivery.records = data
    if staged:
        try:
            coordinator.commit(group_id, staged)
        except KafkaError as exc:
            for key in staged:
                deliveries[key] = Delivery(error=exc.error)
        else:
            _note_shares(ctx, staged)
    stats = coordinator.stats_of(group_id)
    for delivery in deliveries.values():
        stats.note_acquired(delivery.acquired)
    return deliveries


def _acquire_partition(coordinator: SharePartitions, group_id: str, member_id: str, topic: str, index: int,
                       partition: Partition, budget: int, byte_budget: int, now_ms: int,
                       delivery: Delivery, exact: bool) -> tuple[SharePartition | None, list[bytes]]:
    config = coordinator.config_of(group_id)
    current = coordinator.current(group_id, topic, index)
    if current is None:
        staged = SharePartition(_start_offset(config, partition, now_ms))
    else:
        staged = current.copy()
    if staged.end < partition.log_start_offset:  # retention removed what was never delivered
        staged = SharePartition(partition.log_start_offset)
    lock_ms = config.record_lock_duration_ms
    again = staged.acquire_available(member_id, budget, now_ms, lock_ms)
    budget -= sum(a.last - a.first + 1 for a in again)
    data: dict[int, bytes] = {}
    for taken in again:
        for header, chunk in _read_range(partition, taken.first, taken.last):
            data.setdefault(header.base_offset, chunk)
    fresh: list[Acquired] = []
    upper = partition.last_stable_offset if config.read_committed else partition.high_watermark
    if budget > 0 and staged.end < upper and staged.room(config.partition_max_record_locks) > 0:
        offset = staged.end
        read = partition.read(offset, byte_budget, upper_bound=upper, min_one_batch=True).data
        batches = [(pos, h) for pos, h in iter_headers(read) if h.last_offset >= offset]
        aborted = (partition.producers.aborted_between(offset, batches[-1][1].next_offset)
                   if batches and config.read_committed else [])
        spans = [LogSpan(h.base_offset, h.last_offset, _deliverable(h, aborted, config.read_committed))
                 for _, h in batches]
        fresh = staged.acquire_new(member_id, spans, budget, config.partition_max_record_locks, now_ms, lock_ms, exact)
        for pos, h in batches:
            if any(a.first <= h.last_offset and h.base_offset <= a.last for a in fresh):
                data.setdefault(h.base_offset, bytes(read[pos : pos + h.size]))
    delivery.acquired = [*again, *fresh]
    changed = current is None or staged.persisted() != current.persisted() or bool(delivery.acquired)
    return (staged if changed else None), [data[k] for k in sorted(data)]


def _note_shares(ctx: RequestContext, staged: Mapping[Key, SharePartition]) -> None:
    """The partitions whose share state this request changed: if a partition's share-state write
    is refused (it moved to another leader during the round), the request fails instead of
    answering an acknowledgement that the new leader never sees."""
    for topic, index in staged:
        try:
            ctx.shares_touched.append(ctx.broker.partition(topic, index))
        except KafkaError:
            continue


def _start_offset(config: ShareConfig, partition: Partition, now_ms: int) -> int:
    """Where a new share-partition starts (share.auto.offset.reset): the log start, the log end,
    or (by_duration) the first record stamped at or after now minus the duration, found as
    ListOffsets by timestamp finds it, and the log end when no record is that recent (Kafka 4.2).
    The lookup runs inline: the native log's time indexes make it cheap (share groups are not
    served on the PostgreSQL engine yet)."""
    if config.auto_offset_reset == "earliest":
        return partition.log_start_offset
    duration = config.reset_duration_ms
    if duration is not None:
        found = partition.offset_for_timestamp(now_ms - duration)
        if found is not None and found[0] < partition.high_watermark:
            return max(found[0], partition.log_start_offset)
    return partition.high_watermark


def _deliverable(header: BatchHeader, aborted: list[AbortedTxn], read_committed: bool) -> bool:
    if header.is_control:
        return False
    if not read_committed or not header.is_transactional:
        return True
    return not any(a.producer_id == header.producer_id and a.first_offset <= header.base_offset <= a.last_offset
                   for a in aborted)


def _read_range(partition: Partition, first: int, last: int) -> list[tuple[BatchHeader, bytes]]:
    """The batches holding offsets [first, last] (whole, as stored)."""
    out: list[tuple[BatchHeader, bytes]] = []
    offset = first
    for _ in range(MAX_READ_STEPS):
        if offset > last:
            break
        read = partition.read(offset, READ_CHUNK, upper_bound=last + 1, min_one_batch=True).data
        progressed = False
        for pos, header in iter_headers(read):
            if header.base_offset > last:
                break
            if header.last_offset >= offset:
                out.append((header, bytes(read[pos : pos + header.size])))
                offset = header.next_offset
                progressed = True
        if not progressed:
            break
    return out
