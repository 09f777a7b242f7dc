"""Committed offsets: (group, topic, partition) -> offset and metadata, changed only by records.

The store is the replay target of ``offset`` / ``offset-delete`` records, live and at start-up
alike. Transactional offsets (TxnOffsetCommit, KIP-98/KIP-447) are left to the transactions
issue; they fit beside ``_committed`` as a map of pending offsets per producer id, moved into
``_committed`` by the transaction's commit marker and reported as UNSTABLE_OFFSET_COMMIT by a
``require_stable`` fetch meanwhile, without changing what is here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .records import OffsetRecord, OffsetTombstone

TopicPartition = tuple[str, int]
BY_COMMIT_TIME = -1


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


class OffsetStore:
    def __init__(self) -> None:
        self._committed: dict[str, dict[TopicPartition, CommittedOffset]] = {}

    def apply(self, record: OffsetRecord | OffsetTombstone) -> None:
        key = (record.topic, record.partition)
        if isinstance(record, OffsetRecord):
            self._committed.setdefault(record.group_id, {})[key] = CommittedOffset(
                record.offset, record.leader_epoch, record.metadata, record.commit_timestamp,
                record.expire_timestamp,
            )
            return
        offsets = self._committed.get(record.group_id)
        if offsets is not None:
            offsets.pop(key, None)
            if not offsets:
                del self._committed[record.group_id]

    def get(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._committed.get(group_id, {}).get((topic, partition))

    def of_group(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        """A copy: callers iterate while records change the store."""
        return dict(self._committed.get(group_id, {}))

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._committed.get(group_id))

    def group_ids(self) -> list[str]:
        return list(self._committed)

    def of_topic(self, topic: str) -> Iterator[tuple[str, int]]:
        """(group, partition) of every offset committed for ``topic`` (topic deletion)."""
        for group_id, offsets in self._committed.items():
            for name, partition in offsets:
                if name == topic:
                    yield group_id, partition

    def records(self) -> Iterator[OffsetRecord]:
        """The current record of every key, for a snapshot."""
        for group_id, offsets in self._committed.items():
            for (topic, partition), value in offsets.items():
                yield OffsetRecord(
                    group_id, topic, partition, value.offset, value.leader_epoch, value.metadata,
                    value.commit_timestamp, value.expire_timestamp,
                )

    def expired(self, group_id: str, now_ms: int, retention_ms: int, since_ms: int | None) -> list[TopicPartition]:
        """Kafka's rule: an explicit expire timestamp wins, else the base time plus retention.

        The base is ``since_ms`` (when an Empty group emptied) or, when it is ``BY_COMMIT_TIME``,
        each offset's commit time; ``None`` expires only offsets with an explicit timestamp.
        """
        out = []
        for key, value in self._committed.get(group_id, {}).items():
            if value.expire_timestamp >= 0:
                if now_ms >= value.expire_timestamp:
                    out.append(key)
            elif since_ms is not None:
                base = value.commit_timestamp if since_ms == BY_COMMIT_TIME else since_ms
                if now_ms - base >= retention_ms:
                    out.append(key)
        return out
