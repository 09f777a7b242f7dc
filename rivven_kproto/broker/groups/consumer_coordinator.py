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

from .api import ConsumerHeartbeat, ConsumerHeartbeatResult
from .consumer_group import ConsumerGroup
from .consumer_membership import ConsumerMembership
from .group import ClassicGroup, GroupState
from .offsets import BY_COMMIT_TIME, OffsetStore
from .records import ConsumerGroupTombstone, GroupTombstone, OffsetTombstone, Record

log = logging.getLogger(__name__)


class ConsumerGroups:
    if TYPE_CHECKING:  # provided by GroupCoordinator
        groups: dict[str, ClassicGroup]
        consumer_groups: dict[str, ConsumerGroup]
        consumer: ConsumerMembership
        offsets: OffsetStore
        topic_view: Callable[[], Mapping[str, int]]

        def _write(self, records: list[Record], *, replay: bool) -> None: ...

    def consumer_heartbeat(self, params: ConsumerHeartbeat, now_ms: int) -> ConsumerHeartbeatResult:
        """ConsumerGroupHeartbeat: the change is logged before it is installed and answered."""
        group = self.consumer_groups.get(params.group_id)
        classic = self.groups.get(params.group_id)
        if group is None and classic is not None and not _classic_convertible(classic, self.offsets.has_pending(classic.group_id)):
            return ConsumerHeartbeatResult(Errors.GROUP_ID_NOT_FOUND,
                                           message=f"Group {params.group_id} is not a consumer group.")
        try:
            draft, result = self.consumer.heartbeat(group, params, now_ms)
            if draft is not None:
                self._install(group, draft)
        except KafkaError as exc:
            return ConsumerHeartbeatResult(exc.error, params.member_id, params.member_epoch,
                                           message=exc.message)
        return result

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
            self._expire_consumer_group(consumer_group, now_ms)

    def _expire_consumer_group(self, consumer_group: ConsumerGroup, now_ms: int) -> None:
        draft = self.consumer.expire(consumer_group, now_ms)
        if draft is not None:
            try:
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
