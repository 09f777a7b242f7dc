"""One classic consumer group and its members: state, protocol selection, subscriptions, timers.

Plain data plus the bookkeeping rules of Kafka's ``ClassicGroup``: the leader is the first member
(re-elected among rejoined members), the protocol is voted by members among those all of them
support, and the subscribed topics are computed at each generation from the consumer-protocol
metadata. Timers are deadlines (epoch ms) read by the coordinator's ``tick``; waiting requests
are tickets completed by the coordinator (see ``coordinator.py``).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from .consumer_protocol import PROTOCOL_TYPE, ConsumerProtocolError, subscription_topics
from .records import GroupRecord, MemberRecord

log = logging.getLogger(__name__)

Protocols = tuple[tuple[str, bytes], ...]


class GroupState(enum.Enum):
    """Kafka's classic group states; the value is the name DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_ticket: int | None = None  # a JoinGroup waiting for the join phase to complete
    sync_ticket: int | None = None  # a SyncGroup waiting for the leader's assignment
    is_new: bool = False  # joined but has not yet completed a join phase
    heartbeat_deadline: int | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_ticket is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_ticket is not None

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka: a parked join/sync keeps an established member alive; a new one may expire."""
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        return next(name for name, _ in self.protocols if name in candidates)

    def to_record(self) -> MemberRecord:
        return MemberRecord(
            self.member_id, self.instance_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
            self.session_timeout_ms, self.protocols, self.assignment,
        )


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.EMPTY
    state_timestamp: int = -1
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # insertion order: the join order
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # MEMBER_ID_REQUIRED ids -> deadline
    pending_sync: set[str] = field(default_factory=set)
    subscribed_topics: frozenset[str] | None = None  # None: unknown (not a parsable consumer group)
    # Timers (epoch ms), fired by the coordinator's tick.
    join_deadline: int | None = None
    initial_delay_ms: int = 0  # the initial rebalance's current delay and what is left of it
    initial_remaining_ms: int = 0
    new_member_added: bool = False
    sync_deadline: int | None = None
    sync_generation: int = -1
    # The last group record written (what a snapshot must keep; soft state in between is not).
    persisted: GroupRecord | None = None
    # Rebalances begun since this process loaded the group (for the metrics; not persisted).
    rebalances: int = field(default=0, compare=False)

    # -- states -------------------------------------------------------------------------------

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}")
        self.previous_state, self.state = self.state, state
        self.state_timestamp = now_ms
        if state is GroupState.PREPARING_REBALANCE:
            self.rebalances += 1

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- members ------------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.instance_id is not None:
            self.static_members.pop(member.instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> tuple[Member, Member]:
        """Give the static member a new id, in place (join order and leadership kept)."""
        old = self.members[old_id]
        new = Member(
            new_id, instance_id, old.client_id, old.client_host, old.rebalance_timeout_ms,
            old.session_timeout_ms, old.protocol_type, old.protocols, old.assignment,
        )
        self.members = {(new_id if key == old_id else key): (new if key == old_id else m) for key, m in self.members.items()}
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        self.pending_sync.discard(old_id)
        return old, new

    def has_all_members_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick the first member that did; False if none did."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is None:
            return False
        if leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                log.info("group %s: leader %s did not rejoin in time; %s leads now",
                         self.group_id, leader.member_id, member.member_id)
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols ----------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        names: set[str] | None = None
        for member in self.members.values():
            own = {name for name, _ in member.protocols}
            names = own if names is None else names & own
        return names or set()

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        candidates = self.candidate_protocols()
        return self.protocol_type == protocol_type and any(name in candidates for name in names)

    def select_protocol(self) -> str:
        """Each member votes for its preferred common protocol; most votes wins.

        Kafka breaks ties arbitrarily (hash order); we take the leader's preference among the tied.
        """
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        tied = {name for name, count in votes.items() if count == best}
        leader = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        return next((name for name, _ in leader.protocols if name in tied), sorted(tied)[0])

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(subscription_topics(member.metadata(self.protocol_name)))
        except ConsumerProtocolError as exc:
            log.warning("group %s: cannot parse a consumer subscription (%s); subscribed topics unknown",
                        self.group_id, exc)
            return None
        return frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        """Unknown subscriptions count as subscribed for consumer groups, as in Kafka."""
        if self.subscribed_topics is None:
            return self.protocol_type == PROTOCOL_TYPE
        return topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    # -- persistence --------------------------------------------------------------------------

    def to_record(self) -> GroupRecord:
        members = tuple(m.to_record() for m in self.members.values())
        return GroupRecord(
            self.group_id, self.protocol_type, self.generation_id, self.protocol_name, self.leader_id,
            self.state_timestamp, members,
        )

    @classmethod
    def from_record(cls, record: GroupRecord) -> ClassicGroup:
        """Kafka's load: a group with members comes back Stable, one without Empty."""
        group = cls(
            record.group_id,
            state=GroupState.STABLE if record.members else GroupState.EMPTY,
            state_timestamp=record.state_timestamp,
            generation_id=record.generation_id,
            protocol_type=record.protocol_type or None,
            protocol_name=record.protocol_name,
            persisted=record,
        )
        for m in record.members:
            group.add(Member(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, record.protocol_type or "", m.protocols, m.assignment,
            ))
        group.protocol_type = record.protocol_type or None
        group.leader_id = record.leader_id if record.leader_id in group.members else group.leader_id
        group.subscribed_topics = group.compute_subscribed_topics()
        return group

    def timers(self) -> Iterator[tuple[str, str, int]]:
        """Its deadlines, for the coordinator's ``tick``: (kind, member id, deadline)."""
        for member in self.members.values():
            if member.heartbeat_deadline is not None:
                yield "member", member.member_id, member.heartbeat_deadline
        for member_id, deadline in self.pending_members.items():
            yield "member", member_id, deadline
        if self.join_deadline is not None:
            yield "join", "", self.join_deadline
        if self.sync_deadline is not None:
            yield "sync", "", self.sync_deadline

    def still_due(self, kind: str, member_id: str, deadline: int) -> bool:
        """A timer fired earlier in the same tick may have moved or cancelled this one."""
        if kind == "member":
            member = self.members.get(member_id)
            if member is not None:
                return member.heartbeat_deadline == deadline
            return self.pending_members.get(member_id) == deadline
        if kind == "join":
            return self.join_deadline == deadline
        return self.sync_deadline == deadline
