"""Classic-protocol members inside a KIP-848 consumer group (online migration).

Kafka's GroupMetadataManager answers a classic member's JoinGroup, SyncGroup and Heartbeat from
the consumer group's state, and so do we: JoinGroup updates the member's subscription (a new one
bumps the group epoch), computes the target if needed, reconciles the member with the partitions
its subscription says it still owns, and answers at once with its member epoch as the generation
and no leader (nobody assigns: SyncGroup returns the member's assigned partitions). Heartbeat and
SyncGroup answer REBALANCE_IN_PROGRESS when the member must rejoin to move on: the group epoch is
past its own (unless it is revoking), it must revoke partitions, or partitions it waits for were
released. Each operation returns the draft to log (or None) and the answer, as in
``consumer_membership.py``. Not implemented: the join and sync timeouts Kafka arms for these
members (their session timeout and the revocation deadline still remove them).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

from rivven_kproto.codec.errors import Errors

from .api import JoinParams, JoinResult, LeavingMember, SyncParams, SyncResult
from .config import GroupConfig
from .consumer_group import ConsumerGroup, ConsumerMember, freeze
from .consumer_membership import ConsumerMembership
from .consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
)
from .migration import owned_partitions
from .reconciliation import UNRELEASED, UNREVOKED, MemberAssignment
from .records import ClassicMetadata

log = logging.getLogger(__name__)


class ClassicMembers:
    def __init__(self, config: GroupConfig, consumer: ConsumerMembership) -> None:
        self.config = config
        self.consumer = consumer

    def join(self, group: ConsumerGroup, p: JoinParams, now: int) -> tuple[ConsumerGroup | None, JoinResult]:
        if not self.config.min_session_timeout_ms <= p.session_timeout_ms <= self.config.max_session_timeout_ms:
            return None, JoinResult(Errors.INVALID_SESSION_TIMEOUT, p.member_id)
        if p.protocol_type != PROTOCOL_TYPE or not p.protocols:
            return None, JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, p.member_id)
        try:
            subscription = decode_subscription(p.protocols[0][1])
        except ConsumerProtocolError:
            return None, JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, p.member_id)
        member_id = p.member_id
        if not member_id:
            member_id = str(uuid.uuid4())
            if p.require_known_member_id and p.instance_id is None:
                return None, JoinResult(Errors.MEMBER_ID_REQUIRED, member_id)
        draft = group.copy()
        existing = draft.members.get(member_id)
        if existing is None and p.instance_id is not None:
            previous = draft.static_member(p.instance_id)
            if previous is not None:  # the static member's new incarnation takes its place
                existing = replace(previous, member_id=member_id)
                draft.rename_member(previous.member_id, existing)
        if existing is not None and existing.classic is None:
            return None, JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, p.member_id)
        before = existing or ConsumerMember(member_id, current=MemberAssignment(member_epoch=0))
        member = replace(
            before, instance_id=p.instance_id, rack_id=subscription.rack_id or before.rack_id,
            client_id=p.client_id, client_host=p.client_host, rebalance_timeout_ms=p.rebalance_timeout_ms,
            subscribed_names=tuple(sorted(set(subscription.topics))),
            classic=ClassicMetadata(p.session_timeout_ms, p.protocols),
        )
        draft.replace_member(member)
        bump = existing is None or member.subscribed_names != before.subscribed_names
        metadata = self.consumer.metadata_of(draft)
        if bump or metadata != draft.metadata:
            draft.metadata = metadata
            draft.group_epoch += 1
            log.info("group %s: epoch %d (classic member %s joins)", draft.group_id, draft.group_epoch, member_id)
        member = self.consumer.assign_and_reconcile(draft, member, owned_partitions(subscription.owned_partitions))
        log.info("group %s: classic member %s (re)joins: epoch %d, %s, %d partitions", draft.group_id, member_id,
                 member.member_epoch, member.current.state, sum(len(ps) for ps in member.current.assigned.values()))
        draft.deadlines[member_id] = now + p.session_timeout_ms
        if member.current.state == UNREVOKED:
            draft.revoke_deadlines.setdefault(member_id, now + member.rebalance_timeout_ms)
        else:
            draft.revoke_deadlines.pop(member_id, None)
        return draft, JoinResult(Errors.NONE, member_id, member.member_epoch, PROTOCOL_TYPE, p.protocols[0][0])

    def sync(self, group: ConsumerGroup, p: SyncParams, now: int) -> SyncResult:
        member, error = _validate(group, p.member_id, p.instance_id, p.generation_id)
        if member is None:
            return SyncResult(error)
        assert member.classic is not None
        names = [name for name, _ in member.classic.protocols]
        if (p.protocol_type is not None and p.protocol_type != PROTOCOL_TYPE) or \
                (p.protocol_name is not None and p.protocol_name not in names):
            return SyncResult(Errors.INCONSISTENT_GROUP_PROTOCOL)
        group.deadlines[member.member_id] = now + member.classic.session_timeout_ms
        if group.group_epoch > member.member_epoch and member.current.state != UNREVOKED:
            return SyncResult(Errors.REBALANCE_IN_PROGRESS)
        assignment = encode_assignment(Assignment(freeze(member.current.assigned)))
        return SyncResult(Errors.NONE, PROTOCOL_TYPE, p.protocol_name or names[0], assignment)

    def heartbeat(self, group: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None,
                  now: int) -> Errors:
        member, error = _validate(group, member_id, instance_id, generation_id)
        if member is None:
            return error
        assert member.classic is not None
        group.deadlines[member_id] = now + member.classic.session_timeout_ms
        state = member.current.state
        if member.member_epoch < group.group_epoch or state == UNREVOKED or \
                (state == UNRELEASED and _released(group, member)):
            return Errors.REBALANCE_IN_PROGRESS
        return Errors.NONE

    def leave(self, group: ConsumerGroup, leaving: list[LeavingMember]
              ) -> tuple[ConsumerGroup | None, list[tuple[LeavingMember, Errors]]]:
        draft = group.copy()
        results = []
        for m in leaving:
            member = draft.members.get(m.member_id) if m.member_id else None
            if member is None and m.instance_id is not None:
                member = draft.static_member(m.instance_id)
            if member is None or (m.member_id and member.member_id != m.member_id):
                results.append((m, Errors.UNKNOWN_MEMBER_ID))
                continue
            if m.instance_id is not None and member.instance_id != m.instance_id:
                results.append((m, Errors.FENCED_INSTANCE_ID))
                continue
            self.consumer.remove(draft, member.member_id, "left the group (classic LeaveGroup)")
            results.append((m, Errors.NONE))
        changed = any(error is Errors.NONE for _, error in results)
        return (draft if changed else None), results


def _validate(group: ConsumerGroup, member_id: str, instance_id: str | None,
              generation_id: int) -> tuple[ConsumerMember | None, Errors]:
    member = group.members.get(member_id)
    if instance_id is not None:
        static = group.static_member(instance_id)
        if static is None:
            return None, Errors.UNKNOWN_MEMBER_ID
        if static.member_id != member_id:
            return None, Errors.FENCED_INSTANCE_ID
    if member is None or member.classic is None:
        return None, Errors.UNKNOWN_MEMBER_ID
    if generation_id != member.member_epoch:
        return None, Errors.ILLEGAL_GENERATION
    return member, Errors.NONE


def _released(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Some partition of the member's target that it waits for is no longer held by another."""
    held = group.held_by_other(member.member_id)
    target = group.target.get(member.member_id, {})
    return any((topic, p) not in held for topic, parts in target.items()
               for p in parts - member.current.assigned.get(topic, frozenset()))
