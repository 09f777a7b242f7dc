"""Share groups and their members (KIP-932), and the share assignor (Kafka's SimpleAssignor).

A share group has no revocation phase: every member may read every partition, so a member's
epoch jumps to the group epoch at its next heartbeat together with its new assignment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .partition import SharePartition

ASSIGNOR = "simple"


@dataclass
class ShareMember:
    member_id: str
    epoch: int
    topics: tuple[str, ...]
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    deadline: int = 0  # session expiry (soft state)
    sent: dict[str, tuple[int, ...]] | None = None  # the assignment last answered (soft state)


@dataclass
class ShareGroup:
    group_id: str
    epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    partitions: dict[tuple[str, int], SharePartition] = field(default_factory=dict)
    topic_counts: dict[str, int] = field(default_factory=dict)  # partitions per subscribed topic, as last assigned

    @property
    def state(self) -> str:
        """Kafka's ShareGroupState names: Empty or Stable (no rebalances to wait for)."""
        return "Stable" if self.members else "Empty"

    def subscribed(self) -> set[str]:
        return {topic for member in self.members.values() for topic in member.topics}


def assign(members: Mapping[str, tuple[str, ...]], topics: Mapping[str, int]) -> dict[str, dict[str, tuple[int, ...]]]:
    """Per member, per topic, its partitions: with at least as many members as partitions, each
    partition goes to one or more members (member i gets partition i mod n); with more partitions,
    each member gets a disjoint share (partition j goes to member j mod m). Deterministic."""
    result: dict[str, dict[str, tuple[int, ...]]] = {member: {} for member in members}
    for topic, count in sorted(topics.items()):
        subscribers = sorted(m for m, subscribed in members.items() if topic in subscribed)
        if not subscribers or count <= 0:
            continue
        chosen: dict[str, list[int]] = {m: [] for m in subscribers}
        if len(subscribers) >= count:
            for i, member in enumerate(subscribers):
                chosen[member].append(i % count)
        else:
            for partition in range(count):
                chosen[subscribers[partition % len(subscribers)]].append(partition)
        for member, partitions in chosen.items():
            if partitions:
                result[member][topic] = tuple(sorted(partitions))
    return result
