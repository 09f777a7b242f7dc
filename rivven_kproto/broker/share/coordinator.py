"""The share coordinator: share groups, their members and share-partition states, in plain Python.

A shard of the coordinator runtime (``broker/coordinator_runtime.py``), like the group
coordinator: an operation validates, builds records, and ``runtime.append`` logs them to its
durable log (``broker/durable/log.py``, ``meta/share``) before its one :meth:`apply` changes the
state; ``load`` replays the same records through the same ``apply``. Share
partitions are edited on a copy (:meth:`stage`) and the copy's durable form is the record
(:meth:`commit`): a failed append leaves the state as it was. Acquisition (owner, lock deadline)
is soft state; see ``partition.py`` for why that loses nothing.

On one broker the group's coordinator also keeps its share partitions (Kafka splits them between
the share coordinator and the partition leader's SharePartitionManager).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rivven_kproto.codec.errors import Errors, KafkaError

from ..coordinator_log import append_or_refuse
from ..coordinator_runtime import CoordinatorRuntime, Result
from .config import ShareConfig
from .effects import ReleaseMember
from .group import ShareGroup, ShareMember, assign
from .partition import SharePartition
from .records import (
    ShareGroupRecord,
    ShareGroupTombstone,
    ShareMemberRecord,
    ShareMemberTombstone,
    SharePartitionRecord,
    SharePartitionTombstone,
    ShareRecord,
    decode_records,
    encode_records,
)
from .sessions import ShareSessions
from .stats import ShareStats

log = logging.getLogger(__name__)

SNAPSHOT_CHUNK = 500
COMPACT_BYTES = 16 * 1024 * 1024
PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed_topic_names: tuple[str, ...] | None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ShareHeartbeatResult:
    error: Errors
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[str, tuple[int, ...]] | None = None  # topic -> partitions; None: unchanged


class ShareCoordinator:
    def __init__(self, config: ShareConfig | None = None, durable_log: Any = None) -> None:
        self.config = config or ShareConfig()
        # A group's settings: its group configs over ``config`` (the broker sets it).
        self.config_of: Callable[[str], ShareConfig] = lambda group_id: self.config
        self.log = durable_log
        self.groups: dict[str, ShareGroup] = {}
        self.sessions = ShareSessions()
        # topic -> partition count; the broker sets it (the assignor needs the topics).
        self.topic_view: Callable[[], Mapping[str, int]] = dict
        # Is this group id a classic or consumer group? (one id is one kind of group at a time)
        self.other_kind: Callable[[str], bool] = lambda group_id: False
        self.changed = False  # records were released or appended since the server last looked
        self.stats: dict[str, ShareStats] = {}  # per group, since start (metrics)
        self._staged: tuple[str, Mapping[PartitionKey, SharePartition]] | None = None  # being committed
        self.runtime: CoordinatorRuntime[ShareRecord] = CoordinatorRuntime(self.log, self, write=self._append)
        self.runtime.on(ReleaseMember, self._release_member)

    # -- start-up and the log ---------------------------------------------------------------------

    def load(self, now_ms: int) -> None:
        """Replay the log; members get a fresh session, as Kafka does on load."""
        if self.log is None:
            return
        count = self.runtime.replay(self.log.open())
        for group in self.groups.values():
            for member in group.members.values():
                member.deadline = now_ms + self.config_of(group.group_id).session_timeout_ms
        log.info("share coordinator loaded %d share groups and %d share partitions from %d records",
                 len(self.groups), sum(len(g.partitions) for g in self.groups.values()), count)

    # -- the shard: one apply for live records and replay (``coordinator_runtime``) -------------

    def apply(self, record: ShareRecord) -> None:
        if isinstance(record, ShareGroupTombstone):
            self.groups.pop(record.group_id, None)
            return
        group = self.groups.setdefault(record.group_id, ShareGroup(record.group_id))
        if isinstance(record, ShareGroupRecord):
            group.epoch = record.epoch
        elif isinstance(record, ShareMemberRecord):
            member = group.members.get(record.member_id)
            if member is None:
                group.members[record.member_id] = ShareMember(
                    record.member_id, record.epoch, record.topics, record.client_id, record.client_host, record.rack_id)
            else:
                member.epoch, member.topics, member.rack_id = record.epoch, record.topics, record.rack_id
        elif isinstance(record, ShareMemberTombstone):
            group.members.pop(record.member_id, None)
        elif isinstance(record, SharePartitionTombstone):
            group.partitions.pop((record.topic, record.partition), None)
        else:
            group.partitions[(record.topic, record.partition)] = SharePartition.restore(
                record.start_offset, record.batches, self.config.delivery_count_limit)

    def encode(self, records: Sequence[ShareRecord]) -> bytes:
        return encode_records(list(records))

    def decode(self, payload: bytes) -> list[ShareRecord]:
        return decode_records(payload)

    def _append(self, payload: bytes) -> None:
        if self.log is not None:
            append_or_refuse(self.log, payload, "share")

    def appended(self, records: Sequence[ShareRecord]) -> None:
        """After an append: staged share-partitions are installed (before any compaction: its
        snapshot must hold them), then the log is compacted when due."""
        if self._staged is not None:
            group_id, staged = self._staged
            self._staged = None
            self.groups.setdefault(group_id, ShareGroup(group_id)).partitions.update(staged)
        self.changed = True
        if self._compaction_due():
            self._compact()

    def _write(self, records: list[ShareRecord], apply: bool = True) -> None:
        """Append first, then apply (``apply=False``: staged share-partitions the caller installs,
        acquisitions and all; replay applies their records); a failed append changes nothing."""
        self.runtime.append(records, apply=apply)

    def _compaction_due(self) -> bool:
        if self.log is None:
            return False
        size = self.log.snapshot_size + self.log.size
        return size >= COMPACT_BYTES and size >= 2 * self.log.snapshot_size

    def _compact(self) -> None:
        records = self.snapshot_records()
        chunks = [records[i : i + SNAPSHOT_CHUNK] for i in range(0, len(records), SNAPSHOT_CHUNK)]
        try:
            self.log.roll(encode_records(chunk) for chunk in chunks)
        except OSError as exc:
            log.error("could not compact the share coordinator log (%s)", exc)

    def snapshot_records(self) -> list[ShareRecord]:
        records: list[ShareRecord] = []
        for group in self.groups.values():
            records.append(ShareGroupRecord(group.group_id, group.epoch))
            records.extend(_member_record(group.group_id, m) for m in group.members.values())
            records.extend(_partition_record(group.group_id, key, sp) for key, sp in group.partitions.items())
        return records

    def close(self) -> None:
        if self.log is not None:
            self.log.close()

    # -- membership (ShareGroupHeartbeat) ----------------------------------------------------------

    def heartbeat(self, params: ShareHeartbeat, now_ms: int) -> ShareHeartbeatResult:
        if not params.group_id:
            return ShareHeartbeatResult(Errors.INVALID_REQUEST, "GroupId can't be empty.")
        if not params.member_id:
            return ShareHeartbeatResult(Errors.INVALID_REQUEST, "MemberId can't be empty.")
        if self.other_kind(params.group_id):
            return ShareHeartbeatResult(Errors.GROUP_ID_NOT_FOUND, f"Group {params.group_id} is not a share group.")
        try:
            if params.member_epoch == -1:
                return self._leave(params, now_ms)
            return self._heartbeat(params, now_ms)
        except KafkaError as exc:
            return ShareHeartbeatResult(exc.error, exc.message)

    def _heartbeat(self, params: ShareHeartbeat, now_ms: int) -> ShareHeartbeatResult:
        group = self.groups.get(params.group_id)
        member = group.members.get(params.member_id) if group is not None else None
        if params.member_epoch == 0:
            if not params.subscribed_topic_names:
                return ShareHeartbeatResult(Errors.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
            if member is None and group is not None and len(group.members) >= self.config.max_size:
                return ShareHeartbeatResult(Errors.GROUP_MAX_SIZE_REACHED,
                                            f"The share group has reached its maximum capacity of {self.config.max_size}.")
        elif member is None:
            return ShareHeartbeatResult(Errors.UNKNOWN_MEMBER_ID, f"Member {params.member_id} is not a member of the group.")
        elif params.member_epoch != member.epoch:
            return ShareHeartbeatResult(Errors.FENCED_MEMBER_EPOCH,
                                        f"The share group member has a member epoch {params.member_epoch} while "
                                        f"the coordinator has {member.epoch}.")
        topics = tuple(sorted(set(params.subscribed_topic_names))) if params.subscribed_topic_names else (
            member.topics if member is not None else ())
        epoch = group.epoch if group is not None else 0
        counts = {t: n for t, n in self.topic_view().items()}
        members = {m.member_id: m.topics for m in group.members.values()} if group is not None else {}
        members[params.member_id] = topics
        subscribed_counts = {t: counts[t] for t in {t for ts in members.values() for t in ts} if t in counts}
        changed = member is None or member.topics != topics or (group is not None and group.topic_counts != subscribed_counts)
        records: list[ShareRecord] = []
        if changed:
            epoch += 1
            records.append(ShareGroupRecord(params.group_id, epoch))
        if changed or member is None or member.epoch != epoch or params.rack_id != (member.rack_id if member else None):
            records.append(ShareMemberRecord(params.group_id, params.member_id, epoch, topics, params.client_id,
                                             params.client_host, params.rack_id))
        self._write(records)
        group = self.groups[params.group_id]
        group.topic_counts = subscribed_counts
        member = group.members[params.member_id]
        settings = self.config_of(params.group_id)
        member.deadline = now_ms + settings.session_timeout_ms
        assignment = assign(members, subscribed_counts)[params.member_id]
        send = assignment if (params.member_epoch == 0 or member.sent != assignment) else None
        member.sent = assignment
        return ShareHeartbeatResult(Errors.NONE, None, params.member_id, member.epoch,
                                    settings.heartbeat_interval_ms, send)

    def _leave(self, params: ShareHeartbeat, now_ms: int) -> ShareHeartbeatResult:
        group = self.groups.get(params.group_id)
        if group is None or params.member_id not in group.members:
            return ShareHeartbeatResult(Errors.UNKNOWN_MEMBER_ID, f"Member {params.member_id} is not a member of the group.")
        self.remove_member(group, params.member_id, release=False, now_ms=now_ms)
        return ShareHeartbeatResult(Errors.NONE, None, params.member_id, -1, 0)

    def remove_member(self, group: ShareGroup, member_id: str, *, release: bool, now_ms: int = 0) -> None:
        """The member left (its share session still commits its last acknowledgements, then closes
        and releases) or expired (``release``: the effect :class:`ReleaseMember`, run once the
        tombstone is logged)."""
        records: list[ShareRecord] = [ShareGroupRecord(group.group_id, group.epoch + 1),
                                      ShareMemberTombstone(group.group_id, member_id)]
        effects = [ReleaseMember(group.group_id, member_id)] if release else []
        self.runtime.run(Result(None, records, effects), now_ms)

    def _release_member(self, effect: ReleaseMember, now_ms: int) -> None:
        self.sessions.drop_member(effect.group_id, effect.member_id)
        self.release_session(effect.group_id, effect.member_id)

    def assignment(self, group: ShareGroup, member_id: str) -> dict[str, tuple[int, ...]]:
        members = {m.member_id: m.topics for m in group.members.values()}
        return assign(members, group.topic_counts).get(member_id, {})

    # -- share partitions ---------------------------------------------------------------------

    def group(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def stage(self, group_id: str, topic: str, partition: int, initial_offset: Callable[[], int]) -> SharePartition:
        """A copy of the share-partition's state to edit; a new one starts at ``initial_offset()``
        (share.auto.offset.reset), and is committed with that start by :meth:`commit`."""
        group = self.groups.get(group_id)
        current = group.partitions.get((topic, partition)) if group is not None else None
        return current.copy() if current is not None else SharePartition(initial_offset())

    def current(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        group = self.groups.get(group_id)
        return group.partitions.get((topic, partition)) if group is not None else None

    def commit(self, group_id: str, staged: Mapping[PartitionKey, SharePartition]) -> None:
        """Log the staged states (one entry) and then install them, acquisitions included."""
        if not staged:
            return
        records: list[ShareRecord] = [_partition_record(group_id, key, sp) for key, sp in staged.items()]
        self._staged = (group_id, staged)
        try:
            self._write(records, apply=False)  # ``appended`` installs them
        finally:
            self._staged = None

    def release_session(self, group_id: str, member_id: str) -> None:
        """A closed share session: the member's acquired records are available again (soft)."""
        group = self.groups.get(group_id)
        if group is None:
            return
        for sp in group.partitions.values():
            released, archived = sp.release_member(member_id, self.config.delivery_count_limit)
            if released:
                self.changed = True
                self.stats_of(group_id).archived += archived

    def drop_topic(self, topic: str) -> None:
        """A deleted topic: its share partitions go (soft until the next record of the group)."""
        for group in self.groups.values():
            for key in [k for k in group.partitions if k[0] == topic]:
                del group.partitions[key]

    # -- describe and list ----------------------------------------------------------------------

    def stats_of(self, group_id: str) -> ShareStats:
        stats = self.stats.get(group_id)
        if stats is None:
            stats = self.stats[group_id] = ShareStats()
        return stats

    def listing(self) -> list[tuple[str, str]]:
        return [(g.group_id, g.state) for g in self.groups.values()]

    def delete_group(self, group_id: str) -> Errors:
        group = self.groups.get(group_id)
        if group is None:
            return Errors.GROUP_ID_NOT_FOUND
        if group.members:
            return Errors.NON_EMPTY_GROUP
        self._write([ShareGroupTombstone(group_id)])
        self.stats.pop(group_id, None)
        return Errors.NONE

    # -- admin: share-group offsets (Describe/Alter/DeleteShareGroupOffsets) -------------------

    def alter_offsets(self, group_id: str, starts: Mapping[PartitionKey, int]) -> Errors:
        """Reset share-partitions to new start offsets, their in-flight records dropped (one log
        entry). As Kafka, only an empty group's, and an unknown id becomes an empty share group."""
        group = self.groups.get(group_id)
        if group is None and self.other_kind(group_id):
            return Errors.GROUP_ID_NOT_FOUND
        if group is not None and group.members:
            return Errors.NON_EMPTY_GROUP
        if group is None:
            self._write([ShareGroupRecord(group_id, 0)])
        self.commit(group_id, {key: SharePartition(start) for key, start in starts.items()})
        return Errors.NONE

    def delete_offsets(self, group_id: str, topics: Iterable[str]) -> tuple[Errors, dict[str, Errors]]:
        """Forget an empty group's share-partitions of ``topics`` (a topic it has none of answers
        UNKNOWN_TOPIC_OR_PARTITION); the next ShareFetch starts them from share.auto.offset.reset."""
        group = self.groups.get(group_id)
        if group is None:
            return Errors.GROUP_ID_NOT_FOUND, {}
        if group.members:
            return Errors.NON_EMPTY_GROUP, {}
        errors: dict[str, Errors] = {}
        records: list[ShareRecord] = []
        for topic in topics:
            keys = sorted(key for key in group.partitions if key[0] == topic)
            errors[topic] = Errors.NONE if keys else Errors.UNKNOWN_TOPIC_OR_PARTITION
            records.extend(SharePartitionTombstone(group_id, *key) for key in keys)
        self._write(records)
        return Errors.NONE, errors

    # -- timers -----------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Expire member sessions and acquisition locks."""
        limit = self.config.delivery_count_limit
        for group in list(self.groups.values()):
            for member in [m for m in group.members.values() if m.deadline <= now_ms]:
                log.info("share group %s: member %s session expired", group.group_id, member.member_id)
                try:
                    self.remove_member(group, member.member_id, release=True, now_ms=now_ms)
                except KafkaError:
                    member.deadline = now_ms + 1000  # the log refused: try again later
            expired: dict[PartitionKey, SharePartition] = {}
            for key, sp in group.partitions.items():
                deadline = sp.next_deadline()
                if deadline is not None and deadline <= now_ms:
                    staged = sp.copy()
                    released, archived = staged.expire(now_ms, limit)
                    expired[key] = staged
                    stats = self.stats_of(group.group_id)
                    stats.lock_expiries += released
                    stats.archived += archived
            if expired:
                try:
                    self.commit(group.group_id, expired)
                except KafkaError:
                    for key, staged in expired.items():  # still release them: only archiving waits
                        group.partitions[key] = staged

    def take_changed(self) -> bool:
        changed, self.changed = self.changed, False
        return changed


def _member_record(group_id: str, member: ShareMember) -> ShareMemberRecord:
    return ShareMemberRecord(group_id, member.member_id, member.epoch, member.topics, member.client_id,
                             member.client_host, member.rack_id)


def _partition_record(group_id: str, key: PartitionKey, sp: SharePartition) -> SharePartitionRecord:
    start, batches = sp.persisted()
    return SharePartitionRecord(group_id, key[0], key[1], start, tuple(batches))


def describe_members(group: ShareGroup) -> Iterable[ShareMember]:
    return sorted(group.members.values(), key=lambda m: m.member_id)
