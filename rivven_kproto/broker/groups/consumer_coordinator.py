"""The KIP-848 half of the group coordinator: consumer groups beside the classic ones.

A mixin of ``GroupCoordinator`` (``coordinator.py``), which owns the log: every change is a
``consumer-group`` record (see ``records.py``) written by ``_write`` before the group is installed,
exactly as the classic records; the rules of the protocol are in ``consumer_membership.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from rivven_kproto.codec.errors import Errors, KafkaError

from .api import (
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    JoinParams,
    JoinResult,
    LeavingMember,
    SyncParams,
    SyncResult,
)
from .classic_members import ClassicMembers
from .config import GroupConfig
from .consumer_group import LEAVE_EPOCH, ConsumerGroup
from .consumer_membership import ConsumerMembership
from .consumer_protocol import PROTOCOL_TYPE
from .group import ClassicGroup, GroupState
from .membership import Membership, Tickets
from .migration import ConsumerProtocolError, classic_to_consumer, consumer_to_classic
from .offsets import BY_COMMIT_TIME, OffsetStore
from .records import ConsumerGroupTombstone, GroupTombstone, OffsetTombstone, Record

log = logging.getLogger(__name__)


class ConsumerGroups:
    if TYPE_CHECKING:  # provided by GroupCoordinator
        groups: dict[str, ClassicGroup]
        consumer_groups: dict[str, ConsumerGroup]
        consumer: ConsumerMembership
        classic_members: ClassicMembers
        membership: Membership
        tickets: Tickets
        config: GroupConfig
        offsets: OffsetStore
        topic_view: Callable[[], Mapping[str, int]]

        def _write(self, records: list[Record], *, replay: bool) -> None: ...

    def consumer_heartbeat(self, params: ConsumerHeartbeat, now_ms: int) -> ConsumerHeartbeatResult:
        """ConsumerGroupHeartbeat: the change is logged before it is installed and answered."""
        group = self.consumer_groups.get(params.group_id)
        classic = self.groups.get(params.group_id)
        upgraded = None
        if group is None and classic is not None and not _classic_convertible(classic, self.offsets.has_pending(classic.group_id)):
            try:
                group = upgraded = self._upgraded(classic, now_ms)
            except KafkaError as exc:
                return ConsumerHeartbeatResult(exc.error, message=exc.message)
        try:
            draft, result = self.consumer.heartbeat(group, params, now_ms)
            if draft is not None and group is not None and params.member_epoch == LEAVE_EPOCH \
                    and self._downgrade_due(group, draft):
                self._downgrade(draft, group.group_epoch, now_ms)
            elif draft is not None:
                self._install(group, draft)
        except KafkaError as exc:
            return ConsumerHeartbeatResult(exc.error, params.member_id, params.member_epoch,
                                           message=exc.message)
        if upgraded is not None and classic is not None:
            self._upgrade_done(classic)
        return result

    # -- online migration (KIP-848; see migration.py) ----------------------------------------------

    def _upgraded(self, classic: ClassicGroup, now_ms: int) -> ConsumerGroup:
        """The consumer group a classic group with members becomes (not yet logged), or Kafka's
        GROUP_ID_NOT_FOUND when group.consumer.migration.policy or the group forbids it."""
        not_consumer = KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Group {classic.group_id} is not a consumer group.")
        if not self.config.upgrade_enabled:
            log.info("group %s: not upgraded to a consumer group: the online upgrade is disabled", classic.group_id)
            raise not_consumer
        if classic.protocol_type != PROTOCOL_TYPE or classic.is_(GroupState.DEAD) or not classic.members:
            log.info("group %s: not upgraded: it does not use the consumer embedded protocol", classic.group_id)
            raise not_consumer
        try:
            converted = classic_to_consumer(classic, now_ms)
        except ConsumerProtocolError as exc:
            raise KafkaError(Errors.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {classic.group_id} to "
                                                        "consumer group because the embedded consumer protocol is "
                                                        f"malformed: {exc}.") from None
        converted.metadata = self.consumer.metadata_of(converted)
        return converted

    def _upgrade_done(self, classic: ClassicGroup) -> None:
        """The conversion is logged: parked classic joins and syncs rejoin the consumer group."""
        log.info("group %s: classic group upgraded online to a consumer group (%d classic members)",
                 classic.group_id, len(classic.members))
        for member in classic.members.values():
            self.tickets.complete(member.join_ticket, JoinResult(Errors.REBALANCE_IN_PROGRESS, member.member_id))
            self.tickets.complete(member.sync_ticket, SyncResult(Errors.REBALANCE_IN_PROGRESS))

    def _downgrade_due(self, before: ConsumerGroup, after: ConsumerGroup) -> bool:
        """The last consumer-protocol member left and classic members remain (Kafka's rule)."""
        return (self.config.downgrade_enabled and bool(after.members)
                and all(m.classic is not None for m in after.members.values())
                and any(m.classic is None for m in before.members.values()))

    def _downgrade(self, draft: ConsumerGroup, generation: int, now_ms: int) -> None:
        """Log the consumer group's tombstone and the classic group in one entry, then rebalance."""
        record = consumer_to_classic(draft, generation, now_ms)
        self._write([ConsumerGroupTombstone(draft.group_id), record], replay=True)
        classic = self.groups[draft.group_id]
        for member in classic.members.values():
            member.heartbeat_deadline = now_ms + member.session_timeout_ms
        log.info("group %s: consumer group downgraded online to a classic group (%d members)",
                 draft.group_id, len(classic.members))
        self.membership.prepare_rebalance(classic, now_ms, f"downgrade of group {draft.group_id} to classic")

    # -- classic-protocol members of a consumer group (see classic_members.py) --------------------

    def _classic_join(self, group: ConsumerGroup, params: JoinParams, now_ms: int) -> JoinResult:
        draft, result = self.classic_members.join(group, params, now_ms)
        if draft is not None:
            try:
                self._install(group, draft)
            except KafkaError as exc:
                return JoinResult(exc.error, params.member_id)
        return result

    def _classic_sync(self, group: ConsumerGroup, params: SyncParams, now_ms: int) -> SyncResult:
        return self.classic_members.sync(group, params, now_ms)

    def _classic_leave(self, group: ConsumerGroup, members: list[LeavingMember]
                       ) -> tuple[Errors, list[tuple[LeavingMember, Errors]]]:
        draft, results = self.classic_members.leave(group, members)
        if draft is not None:
            try:
                self._install(group, draft)
            except KafkaError as exc:
                return exc.error, []
        return Errors.NONE, results

    def _install(self, group: ConsumerGroup | None, draft: ConsumerGroup) -> None:
        """Log the draft's record if the durable state changed, then install it (timers too)."""
        record = draft.to_record()
        if group is None or record != group.persisted:
            self._write([record], replay=True)
            self.consumer_groups[draft.group_id].take_timers(draft)
        else:
            group.take_timers(draft)

    def topics_changed(self) -> None:
        """Topics were created, deleted or grown: groups subscribed to them get a new epoch (their
        regular expressions are evaluated again), and reassign at their members' next heartbeat."""
        for group in list(self.consumer_groups.values()):
            draft = self.consumer.refresh_metadata(group)
            if draft is not None:
                try:
                    self._install(group, draft)
                except KafkaError:
                    log.warning("group %s: could not log its new epoch; the next heartbeat retries", group.group_id)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        return self.consumer_groups.get(group_id)

    def _expire_consumer_members(self, now_ms: int) -> None:
        for consumer_group in list(self.consumer_groups.values()):
            draft = self.consumer.expire(consumer_group, now_ms)
            if draft is not None:
                try:
                    if self._downgrade_due(consumer_group, draft):
                        self._downgrade(draft, consumer_group.group_epoch, now_ms)
                    else:
                        self._install(consumer_group, draft)
                except KafkaError:
                    log.warning("group %s: could not log expired members; retried next tick", consumer_group.group_id)

    def _expire_consumer_offsets(self, now_ms: int, retention: int) -> None:
        """Offsets of an empty consumer group expire by commit time; the group with the last one."""
        for consumer_group in list(self.consumer_groups.values()):
            if consumer_group.members:
                continue
            group_id = consumer_group.group_id
            expired = self.offsets.expired(group_id, now_ms, retention, BY_COMMIT_TIME)
            tombstones: list[Record] = [OffsetTombstone(group_id, t, p) for t, p in expired]
            if len(expired) == len(self.offsets.of_group(group_id)) and not self.offsets.has_pending(group_id):
                tombstones += [ConsumerGroupTombstone(group_id), GroupTombstone(group_id)]
            try:
                self._write(tombstones, replay=True)
            except KafkaError:
                return

    def _delete_consumer_offsets(self, group: ConsumerGroup, topics: list[tuple[str, list[int]]]
                                 ) -> list[tuple[str, list[tuple[int, Errors]]]]:
        """OffsetDelete on a consumer group: refused per topic its members subscribe to."""
        subscribed = {topic for topic, _ in group.metadata}
        results, records = [], []
        for topic, partitions in topics:
            if topic in subscribed and group.members:
                results.append((topic, [(p, Errors.GROUP_SUBSCRIBED_TO_TOPIC) for p in partitions]))
                continue
            results.append((topic, [(p, Errors.NONE) for p in partitions]))
            records += [OffsetTombstone(group.group_id, topic, p) for p in partitions
                        if self.offsets.get(group.group_id, topic, p) is not None]
        self._write(list(records), replay=True)
        return results

    def _delete_consumer_group(self, group: ConsumerGroup) -> Errors:
        if group.members:
            return Errors.NON_EMPTY_GROUP
        records: list[Record] = [OffsetTombstone(group.group_id, t, p) for t, p in self.offsets.of_group(group.group_id)]
        records += [ConsumerGroupTombstone(group.group_id), GroupTombstone(group.group_id)]
        try:
            self._write(records, replay=True)
        except KafkaError as exc:
            return exc.error
        log.info("deleted consumer group %s and %d committed offsets", group.group_id, len(records) - 2)
        return Errors.NONE


def _classic_convertible(group: ClassicGroup, pending_offsets: bool) -> bool:
    """An empty classic group (nothing joining, no pending transactional offsets) may become a
    consumer group when a KIP-848 member joins, as in Kafka."""
    return group.is_(GroupState.EMPTY) and not group.pending_members and group.join_deadline is None \
        and not pending_offsets
