"""KIP-848 incremental reconciliation of one member towards its target assignment (pure).

Kafka's CurrentAssignmentBuilder, rule for rule. A member first gives up what its target no longer
holds (state ``unrevoked_partitions``, its epoch unchanged) and gets nothing new until its
heartbeat's owned partitions show it revoked them; a partition its target holds is given only
once no other member owns it (assigned or pending revocation), meanwhile the member sits in
``unreleased_partitions`` at the new epoch; a member with nothing to revoke or wait for is
``stable`` at the target epoch. So no partition is ever owned by two members at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Assignment = Mapping[str, frozenset[int]]

STABLE = "stable"
UNREVOKED = "unrevoked_partitions"
UNRELEASED = "unreleased_partitions"


@dataclass(frozen=True)
class MemberAssignment:
    state: str = STABLE
    member_epoch: int = 0
    previous_epoch: int = -1
    assigned: Assignment = field(default_factory=dict)
    revoking: Assignment = field(default_factory=dict)


def owns_any(owned: Assignment, partitions: Assignment) -> bool:
    return any(owned.get(topic, frozenset()) & parts for topic, parts in partitions.items())


def is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    """Kafka's check for a member heartbeating with its previous epoch: None (not sent) is not."""
    if owned is None:
        return False
    return all(parts <= assigned.get(topic, frozenset()) for topic, parts in owned.items())


def reconcile(
    member: MemberAssignment,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    held_by_other: Callable[[str, int], bool],
) -> MemberAssignment:
    """The member's next state; ``owned`` is what its heartbeat says it holds (None: not sent)."""
    if member.state == STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, held_by_other)
    if member.state == UNREVOKED:
        if owned is None or owns_any(owned, member.revoking):
            return member  # still holds what it must give up
        return _next(member, member.member_epoch, min(member.member_epoch + 1, target_epoch), target, held_by_other)
    return _next(member, member.member_epoch, target_epoch, target, held_by_other)


def _next(
    member: MemberAssignment, epoch: int, target_epoch: int, target: Assignment,
    held_by_other: Callable[[str, int], bool],
) -> MemberAssignment:
    kept: dict[str, frozenset[int]] = {}
    revoke: dict[str, frozenset[int]] = {}
    unreleased = False
    for topic in sorted(set(target) | set(member.assigned)):
        current = member.assigned.get(topic, frozenset())
        wanted = target.get(topic, frozenset())
        free = frozenset(p for p in wanted - current if not held_by_other(topic, p))
        unreleased = unreleased or len(free) < len(wanted - current)
        if current - wanted:
            revoke[topic] = current - wanted
        if current & wanted or free:
            kept[topic] = (current & wanted) | free
    if revoke:
        stay = {t: member.assigned[t] & target.get(t, frozenset()) for t in member.assigned}
        return MemberAssignment(UNREVOKED, epoch, member.previous_epoch, {t: p for t, p in stay.items() if p}, revoke)
    previous = member.member_epoch if target_epoch != member.member_epoch else member.previous_epoch
    return MemberAssignment(UNRELEASED if unreleased else STABLE, target_epoch, previous, kept, {})
