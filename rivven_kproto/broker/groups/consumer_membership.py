"""KIP-848 ConsumerGroupHeartbeat: joins, leaves, fencing, epochs, assignment and session expiry.

Kafka's GroupMetadataManager (consumer part), decision for decision where it matters to clients:
epoch 0 joins (a static member whose previous incarnation left with epoch -2 takes its place,
assignment and epoch; one still active answers UNRELEASED_INSTANCE_ID), -1 leaves, -2 leaves
temporarily (static members: the assignment is kept until the session expires); any other epoch
must be the member's (or its previous one while it owns a subset of its assignment: a lost
response) else FENCED_MEMBER_EPOCH. Each operation works on a draft of the group and returns it;
the coordinator logs the draft's record and installs it only once the log took it.

A member asked to revoke partitions that has not done so within its rebalance timeout is removed,
as a member whose session expired is. Classic-protocol members inside a consumer group (online
migration) are served by ``classic_members.py`` with the same drafts. Not implemented:
rack-aware assignment and the group size limit.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace

from rivven_kproto.codec.errors import Errors, KafkaError

from .api import ConsumerHeartbeat, ConsumerHeartbeatResult
from .assignors import ASSIGNORS, UNIFORM, assign
from .config import GroupConfig
from .consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    Describable,
    InvalidRegex,
    compile_regex,
)
from .reconciliation import UNREVOKED, MemberAssignment, is_subset, reconcile

log = logging.getLogger(__name__)

TopicView = Callable[[], Mapping[str, int]]  # topic -> partition count


def _fail(error: Errors, message: str) -> KafkaError:
    return KafkaError(error, message)


def validate(p: ConsumerHeartbeat) -> None:
    """The request-level checks Kafka makes before looking at the group (INVALID_REQUEST, ...)."""
    if not p.group_id:
        raise _fail(Errors.INVALID_REQUEST, "GroupId can't be empty.")
    if p.instance_id == "":
        raise _fail(Errors.INVALID_REQUEST, "InstanceId can't be empty.")
    if p.member_epoch == 0:
        if not p.member_id and p.version >= 1:
            raise _fail(Errors.INVALID_REQUEST, "MemberId can't be empty.")
        if p.rebalance_timeout_ms == -1:
            raise _fail(Errors.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        if p.owned:
            raise _fail(Errors.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        if p.subscribed_topic_names is None and p.subscribed_topic_regex is None:
            raise _fail(Errors.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif p.member_epoch < STATIC_LEAVE_EPOCH:
        raise _fail(Errors.INVALID_REQUEST, f"MemberEpoch {p.member_epoch} is invalid.")
    elif not p.member_id:
        raise _fail(Errors.INVALID_REQUEST, "MemberId can't be empty.")
    elif p.member_epoch == STATIC_LEAVE_EPOCH and p.instance_id is None:
        raise _fail(Errors.INVALID_REQUEST, "InstanceId can't be null when MemberEpoch is -2.")
    if p.server_assignor is not None and p.server_assignor not in ASSIGNORS:
        raise _fail(Errors.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {p.server_assignor} is not supported. "
                                                  f"Supported assignors: {', '.join(ASSIGNORS)}.")
    if p.subscribed_topic_regex:
        try:
            compile_regex(p.subscribed_topic_regex)
        except InvalidRegex as exc:
            raise _fail(Errors.INVALID_REGULAR_EXPRESSION, str(exc)) from None


class ConsumerMembership:
    def __init__(self, config: GroupConfig, topics: TopicView, describable: Callable[[], Describable | None] | None = None) -> None:
        self.config = config
        self.topics = topics
        # A group's (session timeout, heartbeat interval): its group configs over the broker's.
        self.timeouts_of: Callable[[str], tuple[int, int]] = lambda group_id: (
            config.consumer_session_timeout_ms, config.consumer_heartbeat_interval_ms)
        # The authorizer's Describe decision on topics (None: every topic may be described).
        self.describable = describable or (lambda: None)

    def heartbeat(self, group: ConsumerGroup | None, p: ConsumerHeartbeat,
                  now: int) -> tuple[ConsumerGroup | None, ConsumerHeartbeatResult]:
        """(the draft to log and install, or None if nothing changed; the answer). Raises KafkaError."""
        validate(p)
        if p.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, p)
        if group is None:
            if p.member_epoch != 0:
                raise _fail(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {p.group_id} not found.")
            draft = ConsumerGroup(p.group_id)
        else:
            draft = group.copy()
        member_id = p.member_id or str(uuid.uuid4())
        bump = False
        if p.member_epoch == 0:
            member, bump = self._join(draft, p, member_id)
        else:
            found = draft.members.get(member_id)
            if found is None:
                raise _fail(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {p.group_id}.")
            _check_epoch(found, p)
            member = found
        before = member
        member, changed = _updated(member, p)
        bump = bump or changed
        metadata = self._metadata(draft, member)
        if metadata != draft.metadata:
            draft.metadata = metadata
            bump = True
        if bump:
            draft.group_epoch += 1
            log.info("group %s: epoch %d (member %s)", draft.group_id, draft.group_epoch, member.member_id)
        draft.replace_member(member)
        if draft.group_epoch > draft.target_epoch:
            self._compute_target(draft)
        member = self._reconcile(draft, member, p.owned)
        session_ms, heartbeat_ms = self.timeouts_of(draft.group_id)
        draft.deadlines[member.member_id] = now + session_ms
        if member.current.state == UNREVOKED:
            draft.revoke_deadlines.setdefault(member.member_id, now + member.rebalance_timeout_ms)
        else:
            draft.revoke_deadlines.pop(member.member_id, None)
        send = (p.member_epoch == 0 or member.current.assigned != before.current.assigned
                or member.member_epoch != before.member_epoch
                or (p.owned is not None and dict(p.owned) != dict(member.current.assigned)))
        result = ConsumerHeartbeatResult(
            Errors.NONE, member.member_id, member.member_epoch, heartbeat_ms,
            dict(member.current.assigned) if send else None,
        )
        return draft, result

    # -- joining and leaving ------------------------------------------------------------------

    def _join(self, draft: ConsumerGroup, p: ConsumerHeartbeat, member_id: str) -> tuple[ConsumerMember, bool]:
        if p.instance_id is not None:
            previous = draft.static_member(p.instance_id)
            if previous is not None and previous.member_id != member_id:
                if previous.member_epoch != STATIC_LEAVE_EPOCH:
                    raise _fail(Errors.UNRELEASED_INSTANCE_ID,
                                f"Static member {previous.member_id} with instance id {p.instance_id} is "
                                "not released yet.")
                # The new incarnation takes over the old one's assignment and epoch.
                current = replace(previous.current, member_epoch=previous.current.previous_epoch
                                  if previous.current.previous_epoch >= 0 else 0)
                joined = replace(previous, member_id=member_id, current=current)
                draft.rename_member(previous.member_id, joined)
                log.info("group %s: static member %s rejoins as %s (was %s)", draft.group_id, p.instance_id,
                         member_id, previous.member_id)
                return joined, False
        existing = draft.members.get(member_id)
        if existing is not None:
            # A member rejoining with its id owns nothing (its request said so): start it afresh.
            return replace(existing, current=MemberAssignment()), False
        log.info("group %s: member %s (instance %s, client %s) joins", draft.group_id, member_id, p.instance_id,
                 p.client_id)
        return ConsumerMember(member_id, p.instance_id, p.rack_id, p.client_id, p.client_host,
                              principal=p.principal), True

    def _leave(self, group: ConsumerGroup | None,
               p: ConsumerHeartbeat) -> tuple[ConsumerGroup | None, ConsumerHeartbeatResult]:
        if group is None:
            raise _fail(Errors.GROUP_ID_NOT_FOUND, f"Consumer group {p.group_id} not found.")
        member = group.members.get(p.member_id)
        if member is None and p.instance_id is not None:
            member = group.static_member(p.instance_id)
        if member is None:
            raise _fail(Errors.UNKNOWN_MEMBER_ID, f"Member {p.member_id} is not a member of group {p.group_id}.")
        draft = group.copy()
        if p.member_epoch == STATIC_LEAVE_EPOCH:
            # Kept (with its assignment) until it rejoins or its session expires; no new epoch.
            previous = member.member_epoch if member.member_epoch >= 0 else member.current.previous_epoch
            left = replace(member, current=replace(member.current, member_epoch=STATIC_LEAVE_EPOCH,
                                                   previous_epoch=previous))
            draft.replace_member(left)
            log.info("group %s: static member %s (%s) leaves temporarily", group.group_id, p.instance_id,
                     member.member_id)
        else:
            self.remove(draft, member.member_id, "left the group")
        return draft, ConsumerHeartbeatResult(Errors.NONE, p.member_id, p.member_epoch,
                                              self.timeouts_of(group.group_id)[1])

    def remove(self, draft: ConsumerGroup, member_id: str, why: str) -> None:
        """The member is gone (left, expired): its partitions are free, the group epoch moves."""
        draft.remove_member(member_id)
        draft.group_epoch += 1
        draft.metadata = self._metadata(draft, None)
        log.info("group %s: member %s %s; epoch %d", draft.group_id, member_id, why, draft.group_epoch)

    # -- assignment ---------------------------------------------------------------------------

    def metadata_of(self, draft: ConsumerGroup, member: ConsumerMember | None = None) -> tuple[tuple[str, int], ...]:
        return self._metadata(draft, member)

    def assign_and_reconcile(self, draft: ConsumerGroup, member: ConsumerMember,
                             owned: Mapping[str, frozenset[int]] | None) -> ConsumerMember:
        """Compute the target if the group epoch moved past it, then move the member towards it."""
        if draft.group_epoch > draft.target_epoch:
            self._compute_target(draft)
        return self._reconcile(draft, member, owned)

    def _metadata(self, draft: ConsumerGroup, member: ConsumerMember | None) -> tuple[tuple[str, int], ...]:
        """(topic, partition count) of every existing topic some member subscribes to."""
        topics = self.topics()
        members = dict(draft.members)
        if member is not None:
            members[member.member_id] = member
        subscribed: set[str] = set()
        describable = self.describable()
        for m in members.values():
            subscribed |= m.subscribed(topics, describable)
        return tuple((t, topics[t]) for t in sorted(subscribed))

    def _compute_target(self, draft: ConsumerGroup) -> None:
        counts = dict(draft.metadata)
        describable = self.describable()
        subscriptions = {m.member_id: m.subscribed(counts, describable) for m in draft.members.values()}
        name = draft.preferred_assignor(UNIFORM)
        draft.target = dict(assign(name, subscriptions, counts, draft.target))
        draft.target_epoch = draft.group_epoch
        log.info("group %s: target assignment at epoch %d by %s", draft.group_id, draft.target_epoch, name)

    def _reconcile(self, draft: ConsumerGroup, member: ConsumerMember,
                   owned: Mapping[str, frozenset[int]] | None) -> ConsumerMember:
        if member.member_epoch == STATIC_LEAVE_EPOCH:
            return member
        held = draft.held_by_other(member.member_id)
        current = reconcile(member.current, draft.target_epoch, draft.target.get(member.member_id, {}), owned,
                            lambda topic, p: (topic, p) in held)
        if current == member.current:
            return member
        updated = replace(member, current=current)
        draft.replace_member(updated)
        return updated

    # -- timers -------------------------------------------------------------------------------

    def expire(self, group: ConsumerGroup, now: int) -> ConsumerGroup | None:
        """A draft without the members whose session expired or who did not revoke partitions
        within their rebalance timeout, or None if there are none."""
        expired = {m: "expired (no heartbeat within the session timeout)"
                   for m, deadline in group.deadlines.items() if deadline <= now}
        expired |= {m: "is fenced: it did not revoke its partitions within the rebalance timeout"
                    for m, deadline in group.revoke_deadlines.items() if deadline <= now and m not in expired}
        if not expired:
            return None
        draft = group.copy()
        for member_id, why in expired.items():
            if member_id in draft.members:
                self.remove(draft, member_id, why)
            draft.deadlines.pop(member_id, None)
            draft.revoke_deadlines.pop(member_id, None)
        return draft

    def refresh_metadata(self, group: ConsumerGroup) -> ConsumerGroup | None:
        """A draft with a new epoch when the subscribed topics changed (created, deleted, grown)."""
        metadata = self._metadata(group, None)
        if metadata == group.metadata or not group.members:
            return None
        draft = group.copy()
        draft.metadata = metadata
        draft.group_epoch += 1
        log.info("group %s: subscribed topics changed; epoch %d", draft.group_id, draft.group_epoch)
        return draft


def _check_epoch(member: ConsumerMember, p: ConsumerHeartbeat) -> None:
    if p.instance_id is not None and member.instance_id is not None and p.instance_id != member.instance_id:
        raise _fail(Errors.FENCED_INSTANCE_ID, f"Member {member.member_id} has instance id {member.instance_id}.")
    epoch = member.member_epoch
    if p.member_epoch > epoch:
        raise _fail(Errors.FENCED_MEMBER_EPOCH, f"The member epoch {p.member_epoch} is greater than the "
                                                f"coordinator's ({epoch}); the member must rejoin.")
    if p.member_epoch < epoch and (p.member_epoch != member.current.previous_epoch
                                   or not is_subset(p.owned, member.current.assigned)):
        raise _fail(Errors.FENCED_MEMBER_EPOCH, f"The member epoch {p.member_epoch} is smaller than the "
                                                f"coordinator's ({epoch}); the member must rejoin.")


def _updated(member: ConsumerMember, p: ConsumerHeartbeat) -> tuple[ConsumerMember, bool]:
    """Apply the request's non-null fields; True if the assignment depends on what changed."""
    changes: dict[str, object] = {}
    if p.instance_id is not None:
        changes["instance_id"] = p.instance_id
    if p.rack_id is not None:
        changes["rack_id"] = p.rack_id
    if p.rebalance_timeout_ms > 0:
        changes["rebalance_timeout_ms"] = p.rebalance_timeout_ms
    if p.client_id:
        changes["client_id"] = p.client_id
    if p.client_host:
        changes["client_host"] = p.client_host
    if p.principal:
        changes["principal"] = p.principal
    if p.subscribed_topic_names is not None:
        changes["subscribed_names"] = tuple(sorted(set(p.subscribed_topic_names)))
    if p.subscribed_topic_regex is not None:
        changes["regex"] = p.subscribed_topic_regex or None
    if p.server_assignor is not None:
        changes["server_assignor"] = p.server_assignor
    updated = replace(member, **changes)  # type: ignore[arg-type]
    bump = (updated.subscribed_names, updated.regex, updated.server_assignor) != (
        member.subscribed_names, member.regex, member.server_assignor)
    return updated, bump


def validate_consumer_commit(group: ConsumerGroup, member_epoch: int, member_id: str, instance_id: str | None,
                              *, version: int = 9, transactional: bool = False) -> None:
    """Kafka's ConsumerGroup.validateOffsetCommit: an empty group takes commits without a member;
    a member must commit at its current epoch (STALE_MEMBER_EPOCH, which TxnOffsetCommit reports
    as ILLEGAL_GENERATION since it has no such code) with OffsetCommit v9 or later."""
    if member_epoch < 0 and not group.members:
        return
    if transactional and member_epoch < 0 and not member_id and instance_id is None:
        return
    member = group.members.get(member_id)
    if member is None:
        raise KafkaError(Errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}.")
    classic = member.classic is not None  # a classic-protocol member commits as in a classic group
    if not transactional and not classic and version < 9:
        raise KafkaError(Errors.UNSUPPORTED_VERSION,
                         "OffsetCommit version 9 or above must be used by members using the consumer group protocol")
    if member_epoch != member.member_epoch:
        raise KafkaError(Errors.ILLEGAL_GENERATION if transactional or classic else Errors.STALE_MEMBER_EPOCH,
                         f"The received member epoch {member_epoch} does not match the expected member epoch "
                         f"{member.member_epoch}.")
