"""One KIP-848 consumer group: its members, epochs and target assignment, as plain data.

The group epoch moves whenever what the assignment depends on changes (a member joins or leaves,
a subscription or the server assignor changes, a subscribed topic appears, disappears or grows);
the target assignment carries the epoch it was computed at and is recomputed when the group
epoch moves past it. Each member reconciles towards its part of the target at its own pace (see
``reconciliation.py``). Everything but the members' timers (session and revocation deadlines) is
in the group's record;
``copy`` gives the draft an operation changes before its record is logged and applied.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from .assignors import Assignment
from .reconciliation import STABLE, MemberAssignment
from .records import ClassicMetadata, ConsumerGroupRecord, ConsumerMemberRecord, Partitions

PROTOCOL_TYPE = "consumer"  # what ListGroups and DescribeGroups report for these groups
GROUP_TYPE = "consumer"
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# Python's `re` accepts constructs RE2 (Kafka's regex engine for KIP-848, through RE2/J) does not:
# backreferences, lookaround, atomic groups, possessive quantifiers and conditionals. We refuse
# them so that a subscription means the same here as on Kafka.
_NOT_RE2 = re.compile(r"\\[1-9]|\(\?P=|\(\?[=!<>]|\(\?\(|[*+?}]\+")


class InvalidRegex(ValueError):
    pass


def compile_regex(pattern: str) -> re.Pattern[str]:
    if _NOT_RE2.search(pattern):
        raise InvalidRegex(f"{pattern!r} uses a construct RE2 does not support (backreference, lookaround, "
                           "atomic group, possessive quantifier or conditional)")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidRegex(f"{pattern!r} is not a valid regular expression: {exc}") from None


# (principal, client host, topic) -> whether the principal may Describe the topic; None: no authorizer.
Describable = Callable[[str, str, str], bool]


def freeze(assignment: Mapping[str, frozenset[int]]) -> Partitions:
    return tuple((topic, tuple(sorted(parts))) for topic, parts in sorted(assignment.items()) if parts)


def thaw(partitions: Partitions) -> Assignment:
    return {topic: frozenset(parts) for topic, parts in partitions}


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_names: tuple[str, ...] = ()
    regex: str | None = None
    server_assignor: str | None = None
    current: MemberAssignment = field(default_factory=MemberAssignment)
    classic: ClassicMetadata | None = None  # a classic-protocol member (online migration)
    principal: str = ""  # of its last heartbeat: its regex resolves to the topics this one may Describe

    @property
    def member_epoch(self) -> int:
        return self.current.member_epoch

    def subscribed(self, topics: Iterable[str], describable: Describable | None = None) -> frozenset[str]:
        """The existing topics this member subscribes to, by name or by its regex. As Kafka 4.0
        (KAFKA-18813), a regex matches only topics the member's principal may Describe; names were
        checked when the member sent them (ConsumerGroupHeartbeat refuses names it may not)."""
        names = set(self.subscribed_names)
        pattern = compile_regex(self.regex) if self.regex else None
        found = set()
        for t in topics:
            if t in names:
                found.add(t)
            elif pattern is not None and pattern.fullmatch(t) and (
                    describable is None or describable(self.principal, self.client_host, t)):
                found.add(t)
        return frozenset(found)

    def to_record(self, target: Assignment) -> ConsumerMemberRecord:
        c = self.current
        return ConsumerMemberRecord(
            self.member_id, self.instance_id, self.rack_id, self.client_id, self.client_host,
            self.rebalance_timeout_ms, self.subscribed_names, self.regex, self.server_assignor, c.state,
            c.member_epoch, c.previous_epoch, freeze(c.assigned), freeze(c.revoking), freeze(target), self.classic, self.principal,
        )


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    target_epoch: int = 0
    metadata: tuple[tuple[str, int], ...] = ()
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    # Soft state, not in the record (epoch ms): each member's session deadline, and the rebalance
    # timeout of a member asked to revoke partitions.
    deadlines: dict[str, int] = field(default_factory=dict)
    revoke_deadlines: dict[str, int] = field(default_factory=dict)
    persisted: ConsumerGroupRecord | None = None

    @property
    def state(self) -> str:
        """Kafka's consumer group states, as ListGroups and ConsumerGroupDescribe name them."""
        if not self.members:
            return "Empty"
        if self.group_epoch > self.target_epoch:
            return "Assigning"
        if any(m.current.state != STABLE or m.member_epoch != self.target_epoch for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def session_timeout_ms(self, member_id: str, default: int) -> int:
        """A classic-protocol member keeps the session timeout it joined with; others the broker's."""
        member = self.members.get(member_id)
        return member.classic.session_timeout_ms if member is not None and member.classic is not None else default

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def held_by_other(self, member_id: str) -> dict[tuple[str, int], str]:
        """(topic, partition) -> owner, for partitions other members hold (assigned or revoking)."""
        held: dict[tuple[str, int], str] = {}
        for other in self.members.values():
            if other.member_id == member_id:
                continue
            for assignment in (other.current.assigned, other.current.revoking):
                for topic, parts in assignment.items():
                    for p in parts:
                        held[(topic, p)] = other.member_id
        return held

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (Kafka's rule), else the broker's default."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        return max(sorted(counts), key=lambda name: counts[name])

    def replace_member(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member

    def rename_member(self, old_id: str, new: ConsumerMember) -> None:
        """A static member's new member id takes over the old one's place and target."""
        self.members = {(new.member_id if k == old_id else k): (new if k == old_id else m) for k, m in self.members.items()}
        if old_id in self.target:
            self.target[new.member_id] = self.target.pop(old_id)
        self.deadlines.pop(old_id, None)
        self.revoke_deadlines.pop(old_id, None)

    def remove_member(self, member_id: str) -> None:
        self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        self.deadlines.pop(member_id, None)
        self.revoke_deadlines.pop(member_id, None)

    def take_timers(self, other: ConsumerGroup) -> None:
        self.deadlines, self.revoke_deadlines = other.deadlines, other.revoke_deadlines

    def copy(self) -> ConsumerGroup:
        return replace(self, members=dict(self.members), target=dict(self.target), deadlines=dict(self.deadlines),
                       revoke_deadlines=dict(self.revoke_deadlines))

    def to_record(self) -> ConsumerGroupRecord:
        return ConsumerGroupRecord(
            self.group_id, self.group_epoch, self.target_epoch, self.metadata,
            tuple(m.to_record(self.target.get(m.member_id, {})) for m in self.members.values()),
        )

    @classmethod
    def from_record(cls, record: ConsumerGroupRecord) -> ConsumerGroup:
        group = cls(record.group_id, record.group_epoch, record.target_epoch, record.metadata, persisted=record)
        for m in record.members:
            current = MemberAssignment(m.state, m.member_epoch, m.previous_epoch, thaw(m.assigned), thaw(m.revoking))
            group.members[m.member_id] = ConsumerMember(
                m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.subscribed_names, m.regex, m.server_assignor, current, m.classic, m.principal,
            )
            group.target[m.member_id] = thaw(m.target)
        return group
