"""The group coordinator: classic groups, committed offsets and their durable log, in plain Python.

Operations take ``now_ms`` and never block; the server layer decides when to wait. Offset
operations follow Kafka's CoordinatorShard pattern strictly: validate, build records, append them
to the durable log (see ``broker/durable/log.py``), then change state only by applying those records — the same
``apply`` that replays the log at start-up (both run by ``broker/coordinator_runtime.py``). Group records are the persisted projection of soft
membership state (see ``membership.py``). ``tick(now_ms)`` fires session, join and sync timers
and expires offsets (the server's flusher fsyncs the log). A parked JoinGroup/SyncGroup answered
by an operation or a timer is reported at once through ``wake`` (the group id), an effect the
server runs by waking that group's parked requests.

Transactional offsets (see ``offsets.py``): ``commit_txn_offsets`` logs them as pending per
(group, producer id) before answering; the transaction coordinator, once every marker of the
transaction is written and before it logs CompleteCommit/CompleteAbort, calls
``complete_transaction`` (its ``complete_groups``), which logs one entry of ``txn-end`` records
that installs or drops them. Recovery may call it again for the same transaction: by then nothing
is pending for that producer, so it writes nothing. When the transaction's coordinator is another
broker, the caller verifies the transaction with it first, under a guard (``txn_guards``) that a
marker for the producer voids: offsets verified before a marker are not logged after it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rivven_kproto.codec.errors import Errors, KafkaError

from ..coordinator_log import append_or_refuse
from ..coordinator_runtime import CoordinatorRuntime
from ..durable.log import DurableLog
from ..durable.work import BlockingWork
from .api import (
    Awaiting,
    CommitPartition,
    DescribedMember,
    FetchedOffset,
    GroupDescription,
    GroupListing,
    JoinParams,
    JoinResult,
    LeavingMember,
    Result,
    SyncParams,
    SyncResult,
)
from .classic_members import ClassicMembers
from .config import GroupConfig
from .consumer_coordinator import ConsumerGroups
from .consumer_group import GROUP_TYPE as CONSUMER_TYPE
from .consumer_group import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from .consumer_group import ConsumerGroup, Describable
from .consumer_membership import ConsumerMembership, validate_consumer_commit
from .consumer_protocol import PROTOCOL_TYPE
from .group import ClassicGroup, GroupState
from .membership import Membership, Tickets, validate_member
from .offsets import BY_COMMIT_TIME, OffsetStore, utf16_length
from .records import (
    ConsumerGroupRecord,
    ConsumerGroupTombstone,
    GroupRecord,
    GroupTombstone,
    OffsetRecord,
    OffsetTombstone,
    Record,
    TxnEndRecord,
    TxnOffsetRecord,
    decode_records,
    encode_records,
)
from .txn_guards import Guard, TxnOffsetGuards

log = logging.getLogger(__name__)

MAX_TIMER_ROUNDS = 16
SNAPSHOT_CHUNK = 1000  # records per snapshot entry: entries stay far below the log's size bound


class GroupCoordinator(ConsumerGroups):
    def __init__(
        self,
        directory: Path | None,
        config: GroupConfig | None = None,
        *,
        work: BlockingWork | None = None,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
        durable_log: Any = None,
    ) -> None:
        """``directory=None`` keeps everything in memory (unit tests of the state machine), unless
        ``durable_log`` (the storage engine's log) is given.

        The log's file work (compaction snapshots) goes to ``work``; its fsyncs are the server's
        flusher's (``log.begin_sync``), as the fsync policy says.
        """
        self.config = config or GroupConfig()
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        # Parked requests of a group may be answerable now (the server sets what runs it).
        self.wake: Callable[[str], None] = lambda group_id: None
        self.tickets = Tickets(lambda group_id: self.wake(group_id))
        self.membership = Membership(self.groups, self.config, self.tickets, self._store_group, new_id)
        # KIP-848 groups (see consumer_membership.py); one group id is one kind of group at a time.
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        # topic -> partition count; the broker sets it (the assignors need the topics).
        self.topic_view: Callable[[], Mapping[str, int]] = dict
        # (principal, client host, topic) -> may Describe; the broker sets it when it has an authorizer.
        self.topic_describable: Describable | None = None
        self.consumer = ConsumerMembership(self.config, lambda: self.topic_view(), lambda: self.topic_describable)
        self.classic_members = ClassicMembers(self.config, self.consumer)
        self.log: DurableLog | Any = (
            durable_log if durable_log is not None
            else DurableLog(directory, "groups", work) if directory is not None else None
        )
        self._last_expiry_ms = 0
        self._failed_size = 0
        self.txn_guards = TxnOffsetGuards()
        self.runtime: CoordinatorRuntime[Record] = CoordinatorRuntime(self.log, self, write=self._append)

    # -- start-up -----------------------------------------------------------------------------

    def load(self, now_ms: int) -> None:
        """Replay the log; loaded members get a fresh session, as Kafka does on load."""
        self._last_expiry_ms = now_ms
        if self.log is None:
            return
        count = self.runtime.replay(self.log.open())
        for group in self.groups.values():
            for member in group.members.values():
                member.heartbeat_deadline = now_ms + member.session_timeout_ms
        for consumer_group in self.consumer_groups.values():
            for member_id in consumer_group.members:
                consumer_group.deadlines[member_id] = now_ms + consumer_group.session_timeout_ms(
                    member_id, self.consumer.timeouts_of(consumer_group.group_id)[0])
        log.info("group coordinator loaded %d classic and %d consumer groups and %d committed offsets from %d records",
                 len(self.groups), len(self.consumer_groups), sum(1 for _ in self.offsets.records()), count)

    # -- the shard: one apply for live records and replay (``coordinator_runtime``) -------------

    def apply(self, record: Record) -> None:
        if isinstance(record, OffsetRecord | OffsetTombstone | TxnOffsetRecord | TxnEndRecord):
            if isinstance(record, OffsetRecord | TxnOffsetRecord) and record.group_id not in self.groups \
                    and record.group_id not in self.consumer_groups:
                # A commit to an unknown group creates a "simple" group, live and on replay alike.
                self.groups[record.group_id] = ClassicGroup(record.group_id, state_timestamp=record.commit_timestamp)
            self.offsets.apply(record)
        elif isinstance(record, GroupRecord):
            self.groups[record.group_id] = ClassicGroup.from_record(record)
        elif isinstance(record, ConsumerGroupRecord):
            self.groups.pop(record.group_id, None)  # an empty classic group converts
            self.consumer_groups[record.group_id] = ConsumerGroup.from_record(record)
        elif isinstance(record, ConsumerGroupTombstone):
            self.consumer_groups.pop(record.group_id, None)
        else:
            self.groups.pop(record.group_id, None)
            self.offsets.drop_group(record.group_id)

    # -- the log ------------------------------------------------------------------------------

    def encode(self, records: Sequence[Record]) -> bytes:
        return encode_records(list(records))

    def decode(self, payload: bytes) -> list[Record]:
        return decode_records(payload)

    def _append(self, payload: bytes) -> None:
        if self.log is not None:
            append_or_refuse(self.log, payload, "group")

    def _write(self, records: list[Record], *, replay: bool) -> None:
        """Append first, then (for replayable records) apply; a failed append changes nothing."""
        self.runtime.append(records, apply=replay)

    def appended(self, records: Sequence[Record]) -> None:
        for record in records:
            if isinstance(record, GroupRecord) and record.group_id in self.groups:
                # Before any compaction: the snapshot must include it.
                self.groups[record.group_id].persisted = record
        if self._compaction_due():
            self._compact()

    def _store_group(self, record: GroupRecord) -> bool:
        try:
            self._write([record], replay=False)
        except KafkaError:
            return False
        return True

    def _compaction_due(self) -> bool:
        """The snapshot plus the entries since has reached compact_bytes and twice the snapshot."""
        if self.log is None:
            return False
        size = self.log.snapshot_size + self.log.size
        return size >= self.config.compact_bytes and size >= 2 * max(self.log.snapshot_size, self._failed_size)

    def _compact(self) -> None:
        """Start a new log file from a snapshot of the current state (written off the loop)."""
        assert self.log is not None
        size = self.log.snapshot_size + self.log.size
        records = self.snapshot_records()
        chunks = [records[i : i + SNAPSHOT_CHUNK] for i in range(0, len(records), SNAPSHOT_CHUNK)]
        try:
            self.log.roll(encode_records(chunk) for chunk in chunks)
        except OSError as exc:
            log.error("could not compact the group coordinator log (%s); it keeps growing", exc)
            self._failed_size = size  # try again once it has doubled
            return
        log.info("compacted the group coordinator log from %d to %d bytes", size, self.log.snapshot_size)

    def snapshot_records(self) -> list[Record]:
        """The current record of every key: what replay needs to rebuild the durable state."""
        records: list[Record] = [g.persisted for g in self.groups.values() if g.persisted is not None]
        records.extend(g.persisted for g in self.consumer_groups.values() if g.persisted is not None)
        records.extend(self.offsets.records())
        records.extend(self.offsets.pending_records())  # after the committed ones (see offsets.py)
        return records

    def close(self) -> None:
        if self.log is not None:
            self.log.close()

    # -- membership (see membership.py) -------------------------------------------------------

    def join(self, params: JoinParams, now_ms: int) -> JoinResult | Awaiting:
        consumer_group = self.consumer_groups.get(params.group_id)
        if consumer_group is not None:
            if consumer_group.members:  # a classic member inside a consumer group (online migration)
                if not params.group_id:
                    return JoinResult(Errors.INVALID_GROUP_ID, params.member_id)
                return self._classic_join(consumer_group, params, now_ms)
            try:  # an empty consumer group converts to a classic one (its offsets stay)
                self._write([ConsumerGroupTombstone(params.group_id)], replay=True)
            except KafkaError as exc:
                return JoinResult(exc.error, params.member_id)
            log.info("group %s: empty consumer group converted to a classic group", params.group_id)
        return self.membership.join(params, now_ms)

    def sync(self, params: SyncParams, now_ms: int) -> SyncResult | Awaiting:
        consumer_group = self.consumer_groups.get(params.group_id)
        if consumer_group is not None:
            return self._classic_sync(consumer_group, params, now_ms)
        return self.membership.sync(params, now_ms)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
                  now_ms: int) -> Errors:
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            return self.classic_members.heartbeat(consumer_group, generation_id, member_id, instance_id, now_ms)
        return self.membership.heartbeat(group_id, generation_id, member_id, instance_id, now_ms)

    def leave(self, group_id: str, members: list[LeavingMember],
              now_ms: int) -> tuple[Errors, list[tuple[LeavingMember, Errors]]]:
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            return self._classic_leave(consumer_group, members)
        return self.membership.leave(group_id, members, now_ms)

    def take_result(self, ticket: int) -> Result | None:
        return self.tickets.take(ticket)

    def cancel(self, ticket: int) -> None:
        self.tickets.cancel(ticket)

    # -- timers -------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Fire every due timer in deadline order and expire offsets.

        A timer re-armed for ``now_ms`` or earlier (a zero initial rebalance delay) fires in the
        same tick; the rounds are bounded in case a bug re-arms one forever.
        """
        self._fire_due(list(self.groups), now_ms)
        self._expire_consumer_members(now_ms)
        if now_ms - self._last_expiry_ms >= self.config.offsets_retention_check_interval_ms:
            self._last_expiry_ms = now_ms
            self.expire_offsets(now_ms)

    def expire_due(self, group_id: str, now_ms: int) -> None:
        """Fire the timers of one group that are due by ``now_ms``: a request handled at or after
        a session deadline (DeleteGroups) sees the member gone however late the timer runs."""
        if group_id in self.groups:
            self._fire_due([group_id], now_ms)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            self._expire_consumer_group(consumer_group, now_ms)

    def next_deadline(self) -> int:
        """The earliest armed timer (session, join, sync, revocation, the offsets-expiry check):
        the server sleeps until it (a timer per deadline, not a periodic tick)."""
        earliest = self._last_expiry_ms + self.config.offsets_retention_check_interval_ms
        for group in self.groups.values():
            for _, _, deadline in group.timers():
                earliest = min(earliest, deadline)
        for consumer_group in self.consumer_groups.values():
            for deadline in (*consumer_group.deadlines.values(), *consumer_group.revoke_deadlines.values()):
                earliest = min(earliest, deadline)
        return earliest

    def _fire_due(self, group_ids: list[str], now_ms: int) -> None:
        for _ in range(MAX_TIMER_ROUNDS):
            due: list[tuple[int, int, str, str, str]] = []
            for group_id in group_ids:
                group = self.groups.get(group_id)
                for seq, (kind, member_id, deadline) in enumerate(group.timers() if group is not None else ()):
                    if deadline <= now_ms:
                        due.append((deadline, seq, group_id, kind, member_id))
            if not due:
                break
            for deadline, _, group_id, kind, member_id in sorted(due):
                target = self.groups.get(group_id)
                if target is not None and target.still_due(kind, member_id, deadline):
                    self._fire(target, kind, member_id, now_ms)

    def _fire(self, group: ClassicGroup, kind: str, member_id: str, now_ms: int) -> None:
        if kind == "member":
            self.membership.expire_member(group, member_id, now_ms)
        elif kind == "join":
            self.membership.fire_join_timer(group, now_ms)
        else:
            self.membership.fire_sync_timer(group, now_ms)

    # -- offsets ------------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        partitions: list[CommitPartition],
        now_ms: int,
        *,
        version: int,
        retention_ms: int = -1,
    ) -> list[Errors]:
        """One error per partition, in order; a group-level problem raises KafkaError."""
        if not group_id:
            raise KafkaError(Errors.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            validate_consumer_commit(consumer_group, generation_id, member_id, instance_id, version=version)
        elif group is None:
            if generation_id >= 0:
                raise KafkaError(Errors.GROUP_ID_NOT_FOUND if version >= 9 else Errors.ILLEGAL_GENERATION)
        else:
            self._validate_commit(group, generation_id, member_id, instance_id)
            if group.is_(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
                self.membership.keep_alive(group, member_id, now_ms)  # commits count as heartbeats
        expire = now_ms + retention_ms if retention_ms >= 0 else -1
        errors, records = [], []
        for p in partitions:
            metadata = p.metadata or ""
            if utf16_length(metadata) > self.config.offset_metadata_max_bytes:
                errors.append(Errors.OFFSET_METADATA_TOO_LARGE)
                continue
            errors.append(Errors.NONE)
            records.append(OffsetRecord(group_id, p.topic, p.partition, p.offset, p.leader_epoch, metadata,
                                        now_ms, expire))
        self._write(list(records), replay=True)
        return errors

    def _validate_commit(self, group: ClassicGroup, generation_id: int, member_id: str,
                         instance_id: str | None, *, transactional: bool = False) -> None:
        """Kafka's ``validateOffsetCommit``; transactional commits (TxnOffsetCommit v0-2 carry no
        member) are accepted without member while the group has members, and during a rebalance."""
        if group.is_(GroupState.DEAD):
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return  # a standalone ("simple") commit: no group management involved
        if generation_id >= 0 or member_id or instance_id is not None:
            error = validate_member(group, member_id, instance_id)
            if error is not Errors.NONE:
                raise KafkaError(error)
            if generation_id != group.generation_id:
                raise KafkaError(Errors.ILLEGAL_GENERATION)
        elif not transactional and not group.is_(GroupState.EMPTY):
            raise KafkaError(Errors.UNKNOWN_MEMBER_ID)
        if not transactional and group.is_(GroupState.COMPLETING_REBALANCE):
            raise KafkaError(Errors.REBALANCE_IN_PROGRESS)

    def commit_txn_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        partitions: list[CommitPartition],
        now_ms: int,
        guard: Guard | None = None,
    ) -> list[Errors]:
        """TxnOffsetCommit, after the caller verified the producer's transaction holds the group.

        Logs the offsets as pending for ``producer_id`` (one error per partition, in order); a
        group-level problem raises KafkaError. KIP-447: a request carrying the consumer's
        generation / member id / instance id is fenced like a plain commit (ILLEGAL_GENERATION,
        UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); generation -1 with no member skips the check.
        ``guard``: the verification was asked under it (``txn_guards``); a marker for the producer
        since then ended the transaction it verified: COORDINATOR_NOT_AVAILABLE, so the client
        retries and the transaction is verified again (a fenced producer then hears so).
        """
        if not group_id:
            raise KafkaError(Errors.INVALID_GROUP_ID)
        if guard is not None and not self.txn_guards.holds(producer_id, guard):
            raise KafkaError(Errors.COORDINATOR_NOT_AVAILABLE,
                             f"producer {producer_id}'s transaction ended while it was verified")
        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            validate_consumer_commit(consumer_group, generation_id, member_id, instance_id, transactional=True)
        elif group is None:
            if generation_id >= 0:
                raise KafkaError(Errors.ILLEGAL_GENERATION)
        else:
            self._validate_commit(group, generation_id, member_id, instance_id, transactional=True)
        errors: list[Errors] = []
        records: list[Record] = []
        for p in partitions:
            metadata = p.metadata or ""
            if utf16_length(metadata) > self.config.offset_metadata_max_bytes:
                errors.append(Errors.OFFSET_METADATA_TOO_LARGE)
                continue
            errors.append(Errors.NONE)
            records.append(TxnOffsetRecord(group_id, producer_id, producer_epoch, p.topic, p.partition, p.offset,
                                           p.leader_epoch, metadata, now_ms))
        self._write(records, replay=True)
        return errors

    def complete_transaction(self, producer_id: int, group_ids: Iterable[str], commit: bool) -> None:
        """The transaction coordinator's ``complete_groups``: install (commit) or drop (abort) the
        producer's pending offsets in every group, in one log entry.

        Idempotent: groups with nothing pending for the producer are skipped, so a second call
        (recovery after a crash before CompleteCommit/CompleteAbort was logged) writes nothing.
        Raises OSError when the log cannot be written, leaving everything pending: the caller
        then does not log its completion and retries. It is the producer's marker here: offsets
        verified before it are not logged after it (``txn_guards``).
        """
        self.txn_guards.end(producer_id)
        records = [
            TxnEndRecord(group_id, producer_id, commit)
            for group_id in sorted(set(group_ids))
            if producer_id in self.offsets.pending_producers(group_id)
        ]
        try:
            self._write(list(records), replay=True)
        except KafkaError as exc:
            raise OSError(f"could not log the end of producer {producer_id}'s transaction: {exc}") from exc
        if records:
            log.debug("producer %d: %s pending offsets of %s", producer_id, "committed" if commit else "dropped",
                      ", ".join(r.group_id for r in records))

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None, *, require_stable: bool = False,
        member_id: str | None = None, member_epoch: int = -1,
    ) -> list[tuple[str, list[FetchedOffset]]]:
        """Committed offsets of the asked partitions; ``topics=None`` means every committed one.

        With ``require_stable`` a partition with a pending transactional offset answers
        UNSTABLE_OFFSET_COMMIT (and no offset); without it, the last committed offset. A
        consumer group's member (OffsetFetch v9) must ask at its current epoch: UNKNOWN_MEMBER_ID,
        STALE_MEMBER_EPOCH (raised) otherwise.
        """
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None and not (member_id is None and member_epoch < 0):
            member = consumer_group.members.get(member_id or "")
            if member is None:
                raise KafkaError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
            if member.member_epoch != member_epoch:
                raise KafkaError(Errors.STALE_MEMBER_EPOCH, f"The received member epoch {member_epoch} does not "
                                                            f"match the expected member epoch {member.member_epoch}.")

        def fetched(topic: str, partition: int) -> FetchedOffset:
            if require_stable and self.offsets.has_pending(group_id, topic, partition):
                return FetchedOffset(partition, None, Errors.UNSTABLE_OFFSET_COMMIT)
            return FetchedOffset(partition, self.offsets.get(group_id, topic, partition))

        if topics is None:
            by_topic: dict[str, list[FetchedOffset]] = {}
            for topic, partition in sorted(self.offsets.of_group(group_id)):
                by_topic.setdefault(topic, []).append(fetched(topic, partition))
            return list(by_topic.items())
        return [(topic, [fetched(topic, p) for p in partitions]) for topic, partitions in topics]

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]) -> list[tuple[str, list[tuple[int, Errors]]]]:
        """OffsetDelete: refused per topic while a consumer group is subscribed to it."""
        if not group_id:
            raise KafkaError(Errors.INVALID_GROUP_ID)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            return self._delete_consumer_offsets(consumer_group, topics)
        found = self.groups.get(group_id)
        if found is None or found.is_(GroupState.DEAD):
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND)
        group = found
        if not group.is_(GroupState.EMPTY) and group.protocol_type != PROTOCOL_TYPE:
            raise KafkaError(Errors.NON_EMPTY_GROUP)
        results, records = [], []
        for topic, partitions in topics:
            if group.is_subscribed_to(topic):
                results.append((topic, [(p, Errors.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions]))
                continue
            results.append((topic, [(p, Errors.NONE) for p in partitions]))
            records += [OffsetTombstone(group_id, topic, p) for p in partitions
                        if self.offsets.get(group_id, topic, p) is not None]
        self._write(list(records), replay=True)
        return results

    def delete_topic(self, topic: str) -> None:
        """Offsets of a deleted topic go with it (Kafka's onPartitionsDeleted), pending ones too."""
        keys = set(self.offsets.of_topic(topic)) | self.offsets.pending_of_topic(topic)
        records: list[Record] = [OffsetTombstone(g, topic, p) for g, p in sorted(keys)]
        try:
            self._write(records, replay=True)
        except KafkaError:
            log.warning("could not delete the committed offsets of deleted topic %s", topic)

    def expire_offsets(self, now_ms: int) -> None:
        """Kafka's offset retention: Empty groups from when they emptied, simple groups per commit,
        empty consumer groups per commit (and the group with its last offset)."""
        retention = self.config.offsets_retention_ms
        self._expire_consumer_offsets(now_ms, retention)
        for group in list(self.groups.values()):
            since: int | None = None
            if group.protocol_type is None:
                since = BY_COMMIT_TIME
            elif group.is_(GroupState.EMPTY):
                since = group.state_timestamp if group.state_timestamp >= 0 else BY_COMMIT_TIME
            expired = self.offsets.expired(group.group_id, now_ms, retention, since)
            records: list[Record] = [OffsetTombstone(group.group_id, t, p) for t, p in expired]
            removes_all = len(expired) == len(self.offsets.of_group(group.group_id))
            if group.is_(GroupState.EMPTY) and removes_all and group.join_deadline is None \
                    and not group.pending_members and not self.offsets.has_pending(group.group_id):
                records.append(GroupTombstone(group.group_id))
            if records:
                try:
                    self._write(records, replay=True)
                except KafkaError:
                    return
                log.info("group %s: expired %d offsets%s", group.group_id, len(expired),
                         " and the group" if isinstance(records[-1], GroupTombstone) else "")

    # -- admin --------------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", ())
        stable = group.is_(GroupState.STABLE)
        members = tuple(
            DescribedMember(m.member_id, m.instance_id, m.client_id, m.client_host,
                            m.metadata(group.protocol_name) if stable else b"", m.assignment)
            for m in group.members.values()
        )
        protocol = (group.protocol_name or "") if stable else ""
        return GroupDescription(group_id, group.state.value, group.protocol_type or "", protocol, members)

    def list_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        wanted = {s.strip().lower() for s in states}
        listed = [
            GroupListing(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not wanted or g.state.value.lower() in wanted
        ]
        listed += [
            GroupListing(g.group_id, CONSUMER_PROTOCOL_TYPE, g.state, CONSUMER_TYPE)
            for g in self.consumer_groups.values()
            if not wanted or g.state.lower() in wanted
        ]
        return listed

    def delete_groups(self, group_ids: list[str]) -> list[tuple[str, Errors]]:
        results = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group_id in self.consumer_groups:
                error = self._delete_consumer_group(self.consumer_groups[group_id])
            elif group is None or group.is_(GroupState.DEAD):
                error = Errors.GROUP_ID_NOT_FOUND
            elif not group.is_(GroupState.EMPTY):
                error = Errors.NON_EMPTY_GROUP
            else:
                records: list[Record] = [OffsetTombstone(group_id, t, p) for t, p in self.offsets.of_group(group_id)]
                records.append(GroupTombstone(group_id))
                try:
                    self._write(records, replay=True)
                    error = Errors.NONE
                    log.info("deleted group %s and %d committed offsets", group_id, len(records) - 1)
                except KafkaError as exc:
                    error = exc.error
            results.append((group_id, error))
        return results
