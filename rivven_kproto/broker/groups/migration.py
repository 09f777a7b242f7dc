"""KIP-848 online migration: a classic group converted to a consumer group and back (pure).

Kafka's ``ConsumerGroup.fromClassicGroup`` / ``ClassicGroup.fromConsumerGroup``, in our terms.
Upgrade: every classic member becomes a classic-protocol member of the consumer group, stable at
the classic generation (its member epoch) with the partitions of its last assignment, which is
also its target; the group and target epochs are that generation. Downgrade: the remaining
(classic-protocol) members become a classic group at the consumer group's epoch, each assigned
its target partitions; the coordinator then starts a rebalance so they rejoin. Both conversions
are records (``consumer-group`` replaces the classic group; ``consumer-group-delete`` plus a
``group`` record replace the consumer group), so replay rebuilds the converted group.
"""

from __future__ import annotations

from collections.abc import Iterable

from .consumer_group import ConsumerGroup, ConsumerMember, freeze
from .consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from .group import ClassicGroup, GroupState, Member
from .reconciliation import STABLE, MemberAssignment
from .records import ClassicMetadata, GroupRecord

__all__ = ["ConsumerProtocolError", "classic_to_consumer", "consumer_to_classic", "owned_partitions"]


def owned_partitions(items: Iterable[tuple[str, Iterable[int]]]) -> dict[str, frozenset[int]]:
    owned: dict[str, set[int]] = {}
    for topic, partitions in items:
        owned.setdefault(topic, set()).update(partitions)
    return {topic: frozenset(parts) for topic, parts in owned.items() if parts}


def _chosen_metadata(group: ClassicGroup, member: Member) -> bytes:
    """The subscription of the group's protocol, or (mid-rebalance, none chosen) the member's first."""
    if group.protocol_name is not None:
        return member.metadata(group.protocol_name)
    return member.protocols[0][1] if member.protocols else b""


def classic_to_consumer(group: ClassicGroup, now: int) -> ConsumerGroup:
    """The consumer group a classic one with members becomes; raises ConsumerProtocolError when a
    member's subscription or assignment is not the consumer protocol's."""
    epoch = group.generation_id
    converted = ConsumerGroup(group.group_id, group_epoch=epoch, target_epoch=epoch)
    for member in group.members.values():
        subscription = decode_subscription(_chosen_metadata(group, member))
        assigned = owned_partitions(decode_assignment(member.assignment).partitions) if member.assignment else {}
        converted.members[member.member_id] = ConsumerMember(
            member.member_id, member.instance_id, subscription.rack_id, member.client_id, member.client_host,
            member.rebalance_timeout_ms, tuple(sorted(set(subscription.topics))),
            current=MemberAssignment(STABLE, epoch, -1, assigned),
            classic=ClassicMetadata(member.session_timeout_ms, member.protocols),
        )
        converted.target[member.member_id] = assigned
        converted.deadlines[member.member_id] = now + member.session_timeout_ms
    return converted


def consumer_to_classic(group: ConsumerGroup, generation: int, now: int) -> GroupRecord:
    """The classic group's record for a consumer group whose members all speak the classic protocol;
    ``generation`` is the group epoch before the last consumer-protocol member left (Kafka's)."""
    classic = ClassicGroup(group.group_id, state=GroupState.STABLE, state_timestamp=now,
                           generation_id=generation, protocol_type=PROTOCOL_TYPE)
    for m in group.members.values():
        assert m.classic is not None, "only classic-protocol members can be part of a classic group"
        target = group.target.get(m.member_id, m.current.assigned)
        classic.add(Member(
            m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.classic.session_timeout_ms, PROTOCOL_TYPE, m.classic.protocols,
            encode_assignment(Assignment(freeze(target))),
        ))
    classic.protocol_name = classic.select_protocol() if classic.candidate_protocols() else None
    return classic.to_record()
