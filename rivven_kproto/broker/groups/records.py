"""The group coordinator's log records and their payload encoding (pure: no I/O).

Like Kafka's ``__consumer_offsets`` records, each one is keyed and self-contained, so the state is
"the last record per key wins" and a snapshot is simply the current record of every key:

``offset``         (group, topic, partition) -> committed offset, leader epoch, metadata, commit and
                   expire timestamps
``offset-delete``  tombstone of one (group, topic, partition)
``group``          group id -> the group as of its last generation change or assignment: protocol
                   type and name, generation, leader, state timestamp and every member (ids,
                   timeouts, client id/host, supported protocols with metadata, assignment)
``group-delete``   tombstone of a group (its offsets are tombstoned first)
``txn-offset``     (group, producer id, topic, partition) -> a pending transactional offset
                   (TxnOffsetCommit): producer epoch, offset, leader epoch, metadata, commit
                   timestamp, and ``overtaken`` (snapshots only: a plain commit of the partition
                   was written after it, so committing the transaction will not install it)
``txn-end``        (group, producer id) -> the transaction ended: ``commit`` true moves that
                   producer's pending offsets of the group into the committed ones, false drops
                   them; with nothing pending it changes nothing, so a repeated one is harmless
``consumer-group`` group id -> a KIP-848 consumer group as of its last durable change: group
                   epoch, target assignment epoch, the subscribed topics' partition counts, and
                   every member (ids, client id/host, rebalance timeout, subscribed names and
                   regex, server assignor, reconciliation state, member and previous epochs,
                   assigned partitions, partitions pending revocation, target assignment, the
                   principal of its last heartbeat and, for a classic-protocol member, ``classic``:
                   its session timeout and protocols); it replaces a classic group of the same id
                   (an empty one, or the online upgrade of one with members: KIP-848 migration)
``consumer-group-delete``  tombstone of a consumer group (its offsets are tombstoned first when
                   the group is deleted; a conversion to a classic group keeps them: the online
                   downgrade is this tombstone and the classic ``group`` record in one entry)

A log entry carries the records of one operation, as a JSON array of objects with a ``"type"``
field; bytes are base64 text. The ``txn-end`` records of one transaction (one per group) are one
entry, written before the transaction coordinator logs CompleteCommit/CompleteAbort.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OffsetRecord:
    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1  # -1: the retention policy decides (OffsetCommit v2-4 may set one)


@dataclass(frozen=True)
class OffsetTombstone:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes


@dataclass(frozen=True)
class GroupRecord:
    group_id: str
    protocol_type: str | None
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp: int
    members: tuple[MemberRecord, ...] = ()


@dataclass(frozen=True)
class GroupTombstone:
    group_id: str


@dataclass(frozen=True)
class TxnOffsetRecord:
    group_id: str
    producer_id: int
    producer_epoch: int
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    overtaken: bool = False


@dataclass(frozen=True)
class TxnEndRecord:
    group_id: str
    producer_id: int
    commit: bool


Partitions = tuple[tuple[str, tuple[int, ...]], ...]  # (topic, sorted partitions), sorted by topic


@dataclass(frozen=True)
class ClassicMetadata:
    """What a classic-protocol member of a consumer group joined with (KIP-848 online migration):
    its session timeout and its protocols, which a downgrade back to a classic group needs."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class ConsumerMemberRecord:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_names: tuple[str, ...]
    regex: str | None
    server_assignor: str | None
    state: str
    member_epoch: int
    previous_epoch: int
    assigned: Partitions
    revoking: Partitions
    target: Partitions
    classic: ClassicMetadata | None = None  # set for a member that speaks the classic protocol
    principal: str = ""  # of the member's last heartbeat ("": a record from before it was kept)


@dataclass(frozen=True)
class ConsumerGroupRecord:
    group_id: str
    group_epoch: int
    target_epoch: int
    metadata: tuple[tuple[str, int], ...]  # (topic, partition count) of every subscribed topic
    members: tuple[ConsumerMemberRecord, ...] = ()


@dataclass(frozen=True)
class ConsumerGroupTombstone:
    group_id: str


Record = (OffsetRecord | OffsetTombstone | GroupRecord | GroupTombstone | TxnOffsetRecord | TxnEndRecord
          | ConsumerGroupRecord | ConsumerGroupTombstone)


class RecordError(ValueError):
    """A payload that passed its checksum but is not a list of records we know."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _member_json(member: MemberRecord) -> dict[str, Any]:
    return {
        "member_id": member.member_id,
        "instance_id": member.instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "session_timeout_ms": member.session_timeout_ms,
        "protocols": [[name, _b64(metadata)] for name, metadata in member.protocols],
        "assignment": _b64(member.assignment),
    }


def _consumer_member_json(m: ConsumerMemberRecord) -> dict[str, Any]:
    return {
        "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
        "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "subscribed_names": list(m.subscribed_names), "regex": m.regex, "server_assignor": m.server_assignor,
        "state": m.state, "member_epoch": m.member_epoch, "previous_epoch": m.previous_epoch,
        "assigned": _partitions_json(m.assigned), "revoking": _partitions_json(m.revoking),
        "target": _partitions_json(m.target), "principal": m.principal,
        **({} if m.classic is None else {"classic": {
            "session_timeout_ms": m.classic.session_timeout_ms,
            "protocols": [[name, _b64(metadata)] for name, metadata in m.classic.protocols]}}),
    }


def _partitions_json(partitions: Partitions) -> list[Any]:
    return [[topic, list(parts)] for topic, parts in partitions]


def _partitions(obj: list[Any]) -> Partitions:
    return tuple((str(topic), tuple(int(p) for p in parts)) for topic, parts in obj)


def _consumer_member(obj: dict[str, Any]) -> ConsumerMemberRecord:
    return ConsumerMemberRecord(
        str(obj["member_id"]), obj["instance_id"], obj["rack_id"], str(obj["client_id"]), str(obj["client_host"]),
        int(obj["rebalance_timeout_ms"]), tuple(str(t) for t in obj["subscribed_names"]), obj["regex"],
        obj["server_assignor"], str(obj["state"]), int(obj["member_epoch"]), int(obj["previous_epoch"]),
        _partitions(obj["assigned"]), _partitions(obj["revoking"]), _partitions(obj["target"]),
        _classic(obj.get("classic")),
        str(obj.get("principal", "")),
    )


def _classic(obj: dict[str, Any] | None) -> ClassicMetadata | None:
    if obj is None:
        return None
    return ClassicMetadata(int(obj["session_timeout_ms"]),
                           tuple((str(name), _unb64(metadata)) for name, metadata in obj["protocols"]))


def _to_json(record: Record) -> dict[str, Any]:
    if isinstance(record, ConsumerGroupRecord):
        return {
            "type": "consumer-group", "group": record.group_id, "group_epoch": record.group_epoch,
            "target_epoch": record.target_epoch, "metadata": [[t, n] for t, n in record.metadata],
            "members": [_consumer_member_json(m) for m in record.members],
        }
    if isinstance(record, ConsumerGroupTombstone):
        return {"type": "consumer-group-delete", "group": record.group_id}
    if isinstance(record, OffsetRecord):
        return {
            "type": "offset", "group": record.group_id, "topic": record.topic, "partition": record.partition,
            "offset": record.offset, "leader_epoch": record.leader_epoch, "metadata": record.metadata,
            "commit_timestamp": record.commit_timestamp, "expire_timestamp": record.expire_timestamp,
        }
    if isinstance(record, OffsetTombstone):
        return {"type": "offset-delete", "group": record.group_id, "topic": record.topic, "partition": record.partition}
    if isinstance(record, GroupRecord):
        return {
            "type": "group", "group": record.group_id, "protocol_type": record.protocol_type,
            "generation": record.generation_id, "protocol": record.protocol_name, "leader": record.leader_id,
            "state_timestamp": record.state_timestamp, "members": [_member_json(m) for m in record.members],
        }
    if isinstance(record, TxnOffsetRecord):
        return {
            "type": "txn-offset", "group": record.group_id, "producer_id": record.producer_id,
            "producer_epoch": record.producer_epoch, "topic": record.topic, "partition": record.partition,
            "offset": record.offset, "leader_epoch": record.leader_epoch, "metadata": record.metadata,
            "commit_timestamp": record.commit_timestamp, "overtaken": record.overtaken,
        }
    if isinstance(record, TxnEndRecord):
        return {"type": "txn-end", "group": record.group_id, "producer_id": record.producer_id,
                "commit": record.commit}
    return {"type": "group-delete", "group": record.group_id}


def _member(obj: dict[str, Any]) -> MemberRecord:
    return MemberRecord(
        member_id=str(obj["member_id"]),
        instance_id=obj["instance_id"],
        client_id=str(obj["client_id"]),
        client_host=str(obj["client_host"]),
        rebalance_timeout_ms=int(obj["rebalance_timeout_ms"]),
        session_timeout_ms=int(obj["session_timeout_ms"]),
        protocols=tuple((str(name), _unb64(metadata)) for name, metadata in obj["protocols"]),
        assignment=_unb64(obj["assignment"]),
    )


def _from_json(obj: dict[str, Any]) -> Record:
    kind = obj["type"]
    if kind == "offset":
        return OffsetRecord(
            str(obj["group"]), str(obj["topic"]), int(obj["partition"]), int(obj["offset"]),
            int(obj["leader_epoch"]), str(obj["metadata"]), int(obj["commit_timestamp"]),
            int(obj["expire_timestamp"]),
        )
    if kind == "offset-delete":
        return OffsetTombstone(str(obj["group"]), str(obj["topic"]), int(obj["partition"]))
    if kind == "group":
        return GroupRecord(
            str(obj["group"]), obj["protocol_type"], int(obj["generation"]), obj["protocol"], obj["leader"],
            int(obj["state_timestamp"]), tuple(_member(m) for m in obj["members"]),
        )
    if kind == "group-delete":
        return GroupTombstone(str(obj["group"]))
    if kind == "txn-offset":
        return TxnOffsetRecord(
            str(obj["group"]), int(obj["producer_id"]), int(obj["producer_epoch"]), str(obj["topic"]),
            int(obj["partition"]), int(obj["offset"]), int(obj["leader_epoch"]), str(obj["metadata"]),
            int(obj["commit_timestamp"]), bool(obj["overtaken"]),
        )
    if kind == "txn-end":
        return TxnEndRecord(str(obj["group"]), int(obj["producer_id"]), bool(obj["commit"]))
    if kind == "consumer-group":
        return ConsumerGroupRecord(
            str(obj["group"]), int(obj["group_epoch"]), int(obj["target_epoch"]),
            tuple((str(t), int(n)) for t, n in obj["metadata"]), tuple(_consumer_member(m) for m in obj["members"]),
        )
    if kind == "consumer-group-delete":
        return ConsumerGroupTombstone(str(obj["group"]))
    raise RecordError(f"unknown record type {kind!r}")


def encode_records(records: list[Record]) -> bytes:
    return json.dumps([_to_json(r) for r in records], separators=(",", ":"), ensure_ascii=False).encode()


def decode_records(payload: bytes) -> list[Record]:
    try:
        items = json.loads(payload)
        if not isinstance(items, list):
            raise RecordError("a log entry must be a JSON array")
        return [_from_json(item) for item in items]
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordError(f"undecodable log entry: {exc}") from None
