"""Committed offsets: (group, topic, partition) -> offset and metadata, changed only by records.

The store is the replay target of every offset record, live and at start-up alike. Beside the
committed offsets it keeps the pending transactional ones (TxnOffsetCommit, KIP-98/KIP-447) per
group and producer id, until a ``txn-end`` record moves them into the committed ones (commit) or
drops them (abort); a ``require_stable`` fetch reports a partition with any pending offset as
UNSTABLE_OFFSET_COMMIT meanwhile.

As in Kafka, the later write wins when a transaction commits: a pending offset replaces the
committed one only if the committed one was written before it. Kafka compares log offsets; here a
pending offset carries the order it was applied in (``seq``, among pending offsets) and a flag
``overtaken``, set when the partition's committed offset is replaced by a later write. A snapshot
writes the committed offsets first, then the pending ones in ``seq`` order with their flag, so
replay rebuilds the same decisions. A plain tombstone of a partition (OffsetDelete, topic
deletion) also drops its pending offsets; expiry leaves partitions with pending offsets alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .records import OffsetRecord, OffsetTombstone, TxnEndRecord, TxnOffsetRecord

TopicPartition = tuple[str, int]
BY_COMMIT_TIME = -1


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass
class PendingOffset:
    value: CommittedOffset
    producer_epoch: int
    seq: int
    overtaken: bool


class OffsetStore:
    def __init__(self) -> None:
        self._committed: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        # group -> producer id -> partition -> pending transactional offset
        self._pending: dict[str, dict[int, dict[TopicPartition, PendingOffset]]] = {}
        self._seq = 0

    def apply(self, record: OffsetRecord | OffsetTombstone | TxnOffsetRecord | TxnEndRecord) -> None:
        if isinstance(record, TxnOffsetRecord):
            self._apply_pending(record)
            return
        if isinstance(record, TxnEndRecord):
            self._apply_end(record)
            return
        key = (record.topic, record.partition)
        if isinstance(record, OffsetRecord):
            self._committed.setdefault(record.group_id, {})[key] = CommittedOffset(
                record.offset, record.leader_epoch, record.metadata, record.commit_timestamp,
                record.expire_timestamp,
            )
            for entry in self._pending_of(record.group_id, key):
                entry.overtaken = True
            return
        offsets = self._committed.get(record.group_id)
        if offsets is not None:
            offsets.pop(key, None)
            if not offsets:
                del self._committed[record.group_id]
        by_producer = self._pending.get(record.group_id, {})
        for producer_id, pending in list(by_producer.items()):
            pending.pop(key, None)
            if not pending:
                del by_producer[producer_id]
        if not by_producer:
            self._pending.pop(record.group_id, None)

    def _apply_pending(self, record: TxnOffsetRecord) -> None:
        self._seq += 1
        value = CommittedOffset(record.offset, record.leader_epoch, record.metadata, record.commit_timestamp)
        by_producer = self._pending.setdefault(record.group_id, {})
        by_producer.setdefault(record.producer_id, {})[(record.topic, record.partition)] = PendingOffset(
            value, record.producer_epoch, self._seq, record.overtaken
        )

    def _apply_end(self, record: TxnEndRecord) -> None:
        by_producer = self._pending.get(record.group_id, {})
        pending = by_producer.pop(record.producer_id, {})
        if not by_producer:
            self._pending.pop(record.group_id, None)
        if not record.commit:
            return
        for key, entry in sorted(pending.items(), key=lambda item: item[1].seq):
            if entry.overtaken:
                continue  # a plain commit written after it wins, as in Kafka
            self._committed.setdefault(record.group_id, {})[key] = entry.value
            for other in self._pending_of(record.group_id, key):
                other.overtaken = other.seq < entry.seq

    def _pending_of(self, group_id: str, key: TopicPartition) -> Iterator[PendingOffset]:
        for pending in self._pending.get(group_id, {}).values():
            entry = pending.get(key)
            if entry is not None:
                yield entry

    def has_pending(self, group_id: str, topic: str | None = None, partition: int = -1) -> bool:
        """Any pending transactional offset of the group (or of one of its partitions)."""
        if topic is None:
            return group_id in self._pending
        return any(True for _ in self._pending_of(group_id, (topic, partition)))

    def pending_group_ids(self) -> list[str]:
        """Groups with pending transactional offsets."""
        return list(self._pending)

    def pending_producers(self, group_id: str) -> set[int]:
        return set(self._pending.get(group_id, {}))

    def pending(self, group_id: str, producer_id: int) -> dict[TopicPartition, PendingOffset]:
        """A copy of one producer's pending offsets in the group."""
        return dict(self._pending.get(group_id, {}).get(producer_id, {}))

    def drop_group(self, group_id: str) -> None:
        """The group is gone (its tombstone): so are its pending offsets."""
        self._pending.pop(group_id, None)

    def get(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._committed.get(group_id, {}).get((topic, partition))

    def of_group(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        """A copy: callers iterate while records change the store."""
        return dict(self._committed.get(group_id, {}))

    def group_ids(self) -> list[str]:
        return list(self._committed)

    def of_topic(self, topic: str) -> Iterator[tuple[str, int]]:
        """(group, partition) of every offset committed for ``topic`` (topic deletion)."""
        for group_id, offsets in self._committed.items():
            for name, partition in offsets:
                if name == topic:
                    yield group_id, partition

    def pending_of_topic(self, topic: str) -> set[tuple[str, int]]:
        """(group, partition) of every pending offset of ``topic`` (topic deletion)."""
        return {
            (group_id, partition)
            for group_id, by_producer in self._pending.items()
            for pending in by_producer.values()
            for name, partition in pending
            if name == topic
        }

    def records(self) -> Iterator[OffsetRecord]:
        """The current record of every key, for a snapshot."""
        for group_id, offsets in self._committed.items():
            for (topic, partition), value in offsets.items():
                yield OffsetRecord(
                    group_id, topic, partition, value.offset, value.leader_epoch, value.metadata,
                    value.commit_timestamp, value.expire_timestamp,
                )

    def pending_records(self) -> list[TxnOffsetRecord]:
        """Every pending offset in the order it was written, for a snapshot (after ``records``)."""
        found = [
            (entry.seq, TxnOffsetRecord(
                group_id, producer_id, entry.producer_epoch, topic, partition, entry.value.offset,
                entry.value.leader_epoch, entry.value.metadata, entry.value.commit_timestamp, entry.overtaken,
            ))
            for group_id, by_producer in self._pending.items()
            for producer_id, pending in by_producer.items()
            for (topic, partition), entry in pending.items()
        ]
        return [record for _, record in sorted(found, key=lambda item: item[0])]

    def expired(self, group_id: str, now_ms: int, retention_ms: int, since_ms: int | None) -> list[TopicPartition]:
        """Kafka's rule: an explicit expire timestamp wins, else the base time plus retention.

        The base is ``since_ms`` (when an Empty group emptied) or, when it is ``BY_COMMIT_TIME``,
        each offset's commit time; ``None`` expires only offsets with an explicit timestamp.
        """
        out = []
        for key, value in self._committed.get(group_id, {}).items():
            if any(True for _ in self._pending_of(group_id, key)):
                continue  # Kafka keeps offsets a transaction may still replace
            if value.expire_timestamp >= 0:
                if now_ms >= value.expire_timestamp:
                    out.append(key)
            elif since_ms is not None:
                base = value.commit_timestamp if since_ms == BY_COMMIT_TIME else since_ms
                if now_ms - base >= retention_ms:
                    out.append(key)
        return out


def utf16_length(text: str) -> int:
    """Java's ``String.length()``, which Kafka compares with offset.metadata.max.bytes."""
    return len(text.encode("utf-16-le")) // 2
