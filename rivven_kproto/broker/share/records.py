"""The share coordinator's log records and their payload encoding (pure: no I/O).

Keyed and self-contained like the group coordinator's (``broker/groups/records.py``): the state
is "the last record per key wins", and a snapshot is the current record of every key.

``share-group``         group id -> group epoch (bumped by every membership or metadata change)
``share-member``        (group, member id) -> member epoch, subscribed topics, client id/host, rack
``share-member-delete`` tombstone of a member (it left or its session expired)
``share-group-delete``  tombstone of a group and everything under it
``share-partition``     (group, topic, partition) -> the share-partition's durable state: start
                        offset and the in-flight batches ``[first, last, state, delivery count]``
                        (acquired records are written as available: see ``partition.py``), the
                        state epoch (bumped when the state is re-initialized) and leader epoch
``share-partition-delete`` tombstone of a share-partition (DeleteShareGroupOffsets: the next
                        ShareFetch initializes it again from share.auto.offset.reset)

A log entry holds the records of one operation as a JSON array of objects with a ``"type"``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ShareGroupRecord:
    group_id: str
    epoch: int


@dataclass(frozen=True)
class ShareMemberRecord:
    group_id: str
    member_id: str
    epoch: int
    topics: tuple[str, ...]
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None


@dataclass(frozen=True)
class ShareMemberTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True)
class ShareGroupTombstone:
    group_id: str


@dataclass(frozen=True)
class SharePartitionRecord:
    group_id: str
    topic: str
    partition: int
    start_offset: int
    batches: tuple[tuple[int, int, int, int], ...]
    state_epoch: int = 0
    leader_epoch: int = 0


@dataclass(frozen=True)
class SharePartitionTombstone:
    group_id: str
    topic: str
    partition: int


ShareRecord = (ShareGroupRecord | ShareMemberRecord | ShareMemberTombstone | ShareGroupTombstone | SharePartitionRecord
               | SharePartitionTombstone)

_TYPES: dict[str, type[Any]] = {
    "share-group": ShareGroupRecord,
    "share-member": ShareMemberRecord,
    "share-member-delete": ShareMemberTombstone,
    "share-group-delete": ShareGroupTombstone,
    "share-partition": SharePartitionRecord,
    "share-partition-delete": SharePartitionTombstone,
}
_NAMES = {cls: name for name, cls in _TYPES.items()}


def encode_records(records: list[ShareRecord]) -> bytes:
    return json.dumps([{"type": _NAMES[type(r)], **asdict(r)} for r in records],
                      separators=(",", ":")).encode()


def decode_records(payload: bytes) -> list[ShareRecord]:
    out: list[ShareRecord] = []
    for item in json.loads(payload):
        cls = _TYPES[item.pop("type")]
        if cls is ShareMemberRecord:
            item["topics"] = tuple(item["topics"])
        elif cls is SharePartitionRecord:
            item["batches"] = tuple(tuple(b) for b in item["batches"])
        out.append(cls(**item))
    return out
