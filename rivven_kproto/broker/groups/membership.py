"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

Kafka's ``GroupMetadataManager`` (classic part), decision for decision: MEMBER_ID_REQUIRED for a
first v4+ join, the initial rebalance delay for a group leaving Empty, completion of the join
phase once every member has rejoined (or at the rebalance timeout, dropping dynamic members that
did not), pending-sync expiry, session expiry, static members replaced in place without a
rebalance while Stable. As in Kafka, membership between generations is soft state: a group record
is written when a group becomes Empty, when the leader's assignment arrives and when a static
member is replaced, and is not replayed on the live path (the memory already holds the state).

JoinGroup and SyncGroup may have to wait. Instead of futures, a parked request holds a ticket;
completing the ticket stores its result and marks the group changed, and the server layer, told
which groups changed, collects the results (see ``server/delayed.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rivven_kproto.codec.errors import Errors

from .api import Awaiting, JoinedMember, JoinParams, JoinResult, LeavingMember, Result, SyncParams, SyncResult
from .config import GroupConfig
from .group import ClassicGroup, GroupState, Member
from .records import GroupRecord

log = logging.getLogger(__name__)

# A parked request's safety-net deadline lies this far past the coordinator's own timers.
WAIT_SLACK_MS = 10_000

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
EMPTY = GroupState.EMPTY
DEAD = GroupState.DEAD


class Tickets:
    """Parked JoinGroup/SyncGroup requests: one ticket each, completed at most once. A completion
    is reported at once through ``wake`` (the group id): the effect that lets the server answer the
    group's parked requests, instead of asking every coordinator after every request."""

    def __init__(self, wake: Callable[[str], None] | None = None) -> None:
        self._next = 1
        self._open: dict[int, str] = {}  # ticket -> group id
        self._done: dict[int, Result] = {}
        self.wake: Callable[[str], None] = wake or (lambda group_id: None)

    def issue(self, group_id: str) -> int:
        ticket, self._next = self._next, self._next + 1
        self._open[ticket] = group_id
        return ticket

    def complete(self, ticket: int | None, result: Result) -> None:
        group_id = self._open.pop(ticket, None) if ticket is not None else None
        if group_id is not None:
            self._done[ticket] = result  # type: ignore[index]
            self.wake(group_id)

    def take(self, ticket: int) -> Result | None:
        return self._done.pop(ticket, None)

    def cancel(self, ticket: int) -> None:
        """The waiter gave up (deadline, disconnect, shutdown): forget the ticket and any result."""
        self._open.pop(ticket, None)
        self._done.pop(ticket, None)

    def __len__(self) -> int:
        return len(self._open) + len(self._done)


class Membership:
    def __init__(
        self,
        groups: dict[str, ClassicGroup],
        config: GroupConfig,
        tickets: Tickets,
        store: Callable[[GroupRecord], bool],
        new_id: Callable[[], str],
    ) -> None:
        self.groups = groups
        self.config = config
        self.tickets = tickets
        self._store = store  # write a group record; False if the write failed
        self._new_id = new_id

    # -- JoinGroup ----------------------------------------------------------------------------

    def join(self, p: JoinParams, now: int) -> JoinResult | Awaiting:
        if not p.group_id:
            return JoinResult(Errors.INVALID_GROUP_ID, p.member_id)
        if not self.config.min_session_timeout_ms <= p.session_timeout_ms <= self.config.max_session_timeout_ms:
            return JoinResult(Errors.INVALID_SESSION_TIMEOUT, p.member_id)
        group = self.groups.get(p.group_id)
        if group is None:
            if p.member_id:
                return JoinResult(Errors.UNKNOWN_MEMBER_ID, p.member_id)
            group = self.groups[p.group_id] = ClassicGroup(p.group_id, state_timestamp=now)
        if p.member_id:
            return self._join_known(group, p, now)
        return self._join_new(group, p, now)

    def _join_new(self, group: ClassicGroup, p: JoinParams, now: int) -> JoinResult | Awaiting:
        if group.is_(DEAD):
            return JoinResult(Errors.COORDINATOR_NOT_AVAILABLE, "")
        if not group.supports_protocols(p.protocol_type, [name for name, _ in p.protocols]):
            return JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, "")
        new_id = f"{p.instance_id if p.instance_id is not None else p.client_id}-{self._new_id()}"
        if p.instance_id is not None:
            existing = group.static_members.get(p.instance_id)
            if existing is not None:
                log.info("group %s: static member %s rejoins as %s (was %s) in state %s",
                         group.group_id, p.instance_id, new_id, existing, group.state.value)
                return self._replace_static_member(group, p, existing, new_id, now)
            return self._add_member(group, p, new_id, now)
        if p.require_known_member_id:
            group.pending_members[new_id] = now + p.session_timeout_ms
            return JoinResult(Errors.MEMBER_ID_REQUIRED, new_id)
        return self._add_member(group, p, new_id, now)

    def _join_known(self, group: ClassicGroup, p: JoinParams, now: int) -> JoinResult | Awaiting:
        member_id = p.member_id
        if group.is_(DEAD):
            return JoinResult(Errors.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(p.protocol_type, [name for name, _ in p.protocols]):
            return JoinResult(Errors.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if member_id in group.pending_members:
            return self._add_member(group, p, member_id, now)
        error = validate_member(group, member_id, p.instance_id)
        if error is not Errors.NONE:
            return JoinResult(error, member_id)
        member = group.members[member_id]
        if group.is_(PREPARING):
            return self._update_member_and_rebalance(group, member, p, now)
        if group.is_(COMPLETING):
            if member.protocols == p.protocols:  # a retry of a join whose response was lost
                return self._current_join_result(group, member_id)
            return self._update_member_and_rebalance(group, member, p, now)
        if group.is_(STABLE):
            if group.leader_id == member_id or member.protocols != p.protocols:
                # The leader rejoining forces a rebalance (e.g. the topics it watches changed).
                return self._update_member_and_rebalance(group, member, p, now)
            return self._current_join_result(group, member_id)
        log.warning("group %s: member %s rejoins an %s group", group.group_id, member_id, group.state.value)
        return JoinResult(Errors.UNKNOWN_MEMBER_ID, member_id)

    def _add_member(self, group: ClassicGroup, p: JoinParams, member_id: str, now: int) -> JoinResult | Awaiting:
        member = Member(
            member_id, p.instance_id, p.client_id, p.client_host, p.rebalance_timeout_ms, p.session_timeout_ms,
            p.protocol_type, p.protocols, is_new=True,
        )
        if group.is_(PREPARING) and group.previous_state is EMPTY:
            group.new_member_added = True  # lets the initial rebalance wait a little longer
        group.add(member)
        self._park_join(group, member)
        # A new member cannot heartbeat yet; it expires if it never completes a join phase.
        member.heartbeat_deadline = now + self.config.new_member_join_timeout_ms
        log.info("group %s: member %s (instance %s, client %s) joins in state %s",
                 group.group_id, member_id, p.instance_id, p.client_id, group.state.value)
        return self._after_join(group, member, now)

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, p: JoinParams, now: int
    ) -> JoinResult | Awaiting:
        self._update_member(group, member, p)
        return self._after_join(group, member, now)

    def _update_member(self, group: ClassicGroup, member: Member, p: JoinParams) -> None:
        member.protocols = p.protocols
        member.rebalance_timeout_ms = p.rebalance_timeout_ms
        member.session_timeout_ms = p.session_timeout_ms
        self._park_join(group, member)

    def _after_join(self, group: ClassicGroup, member: Member, now: int) -> JoinResult | Awaiting:
        ticket = member.join_ticket
        assert ticket is not None
        self._maybe_prepare_rebalance_or_complete_join(group, now)
        return self._result_or_wait(group, ticket, now)

    def _park_join(self, group: ClassicGroup, member: Member) -> None:
        if member.join_ticket is not None:  # superseded by a retry on another connection
            self.tickets.complete(member.join_ticket, JoinResult(Errors.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_ticket = self.tickets.issue(group.group_id)

    def _result_or_wait(self, group: ClassicGroup, ticket: int, now: int) -> JoinResult | Awaiting:
        result = self.tickets.take(ticket)
        if result is not None:
            assert isinstance(result, JoinResult)
            return result
        return self._awaiting(group, ticket, now)

    def _awaiting(self, group: ClassicGroup, ticket: int, now: int) -> Awaiting:
        wait = max(group.rebalance_timeout_ms(), self.config.initial_rebalance_delay_ms)
        return Awaiting(group.group_id, ticket, now + wait + WAIT_SLACK_MS)

    def _current_join_result(self, group: ClassicGroup, member_id: str) -> JoinResult:
        is_leader = group.leader_id == member_id
        return JoinResult(
            Errors.NONE, member_id, group.generation_id, group.protocol_type, group.protocol_name,
            group.leader_id or "", _joined_members(group) if is_leader else (),
        )

    def _replace_static_member(
        self, group: ClassicGroup, p: JoinParams, old_id: str, new_id: str, now: int
    ) -> JoinResult | Awaiting:
        assert p.instance_id is not None
        current_leader = group.leader_id
        old, new = group.replace_static_member(p.instance_id, old_id, new_id)
        # Fence whatever the old incarnation still has parked.
        self.tickets.complete(old.join_ticket, JoinResult(Errors.FENCED_INSTANCE_ID, old_id))
        self.tickets.complete(old.sync_ticket, SyncResult(Errors.FENCED_INSTANCE_ID))
        new.heartbeat_deadline = now + new.session_timeout_ms
        self._update_member(group, new, p)
        ticket = new.join_ticket
        assert ticket is not None
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                if not self._store(group.to_record()):
                    log.warning("group %s: could not persist static member %s; rebalancing instead",
                                group.group_id, new_id)
                    self._prepare_rebalance(group, now, "static member update not persisted")
                    return self._result_or_wait(group, ticket, now)
                log.info("group %s: static member %s replaced without a rebalance", group.group_id, p.instance_id)
                # Kafka (JoinGroup < v9): the old leader id is returned, so a replaced leader acts as
                # a follower and fetches its assignment with SyncGroup instead of reassigning.
                self.tickets.cancel(ticket)  # answered right here, not through the ticket
                new.join_ticket = None
                return JoinResult(
                    Errors.NONE, new_id, group.generation_id, group.protocol_type, group.protocol_name,
                    current_leader or "",
                )
            self._maybe_prepare_rebalance_or_complete_join(group, now)
        elif group.is_(COMPLETING):
            # The leader may be assigning to the old id: rebalance so the new id gets its share.
            self._prepare_rebalance(group, now, f"static member {p.instance_id} rejoined during the sync phase")
        else:
            self._maybe_complete_join_phase(group, now)
        return self._result_or_wait(group, ticket, now)

    # -- the join phase -----------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, now: int, reason: str = "") -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now, reason or "membership changed")
        else:
            self._maybe_complete_join_phase(group, now)

    def _maybe_complete_join_phase(self, group: ClassicGroup, now: int) -> None:
        if group.is_(PREPARING) and group.previous_state is not EMPTY and group.has_all_members_joined():
            self.complete_join(group, now)

    def prepare_rebalance(self, group: ClassicGroup, now: int, reason: str) -> None:
        """A rebalance the coordinator starts (a consumer group downgraded to this classic one)."""
        self._maybe_prepare_rebalance_or_complete_join(group, now, reason)

    def _prepare_rebalance(self, group: ClassicGroup, now: int, reason: str) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate(group, Errors.REBALANCE_IN_PROGRESS, now)
        group.pending_sync.clear()
        group.sync_deadline = None
        initial = group.is_(EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_delay_ms = delay
            group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_deadline = now + delay
        group.transition(PREPARING, now)
        log.info("group %s: preparing to rebalance from generation %d (%s)", group.group_id, group.generation_id, reason)
        if not initial:
            if group.has_all_members_joined():
                self.complete_join(group, now)
            else:
                group.join_deadline = now + group.rebalance_timeout_ms()

    def fire_join_timer(self, group: ClassicGroup, now: int) -> None:
        """The join deadline passed: extend the initial delay if members keep arriving, else complete."""
        group.join_deadline = None
        if group.previous_state is EMPTY and group.is_(PREPARING) and group.new_member_added \
                and group.initial_remaining_ms != 0:
            group.new_member_added = False
            delay = group.initial_delay_ms
            group.initial_delay_ms = min(self.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms = max(group.initial_remaining_ms - delay, 0)
            group.join_deadline = now + group.initial_delay_ms
            return
        self.complete_join(group, now)

    def complete_join(self, group: ClassicGroup, now: int) -> None:
        group.join_deadline = None
        missing = [m for m in group.members.values() if not m.awaiting_join and m.instance_id is None]
        for member in missing:
            group.remove(member.member_id)
        if missing:
            log.info("group %s: removed members that did not rejoin: %s",
                     group.group_id, [m.member_id for m in missing])
        if group.is_(DEAD):
            return
        if not group.maybe_elect_joined_leader() and group.members:
            log.error("group %s: no member rejoined; waiting another rebalance timeout", group.group_id)
            group.join_deadline = now + group.rebalance_timeout_ms()
            return
        group.init_next_generation(now)
        if group.is_(EMPTY):
            log.info("group %s: generation %d is empty", group.group_id, group.generation_id)
            self._store(group.to_record())
            return
        log.info("group %s: generation %d with %d members, protocol %s, leader %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name, group.leader_id)
        leader_view = _joined_members(group)
        for member in group.members.values():
            members = leader_view if member.member_id == group.leader_id else ()
            self.tickets.complete(member.join_ticket, JoinResult(
                Errors.NONE, member.member_id, group.generation_id, group.protocol_type, group.protocol_name,
                group.leader_id or "", members,
            ))
            member.join_ticket = None
            member.heartbeat_deadline = now + member.session_timeout_ms
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_deadline = now + group.rebalance_timeout_ms()
        group.sync_generation = group.generation_id

    # -- SyncGroup ----------------------------------------------------------------------------

    def sync(self, p: SyncParams, now: int) -> SyncResult | Awaiting:
        if not p.group_id:
            return SyncResult(Errors.INVALID_GROUP_ID)
        group = self.groups.get(p.group_id)
        if group is None or group.is_(EMPTY):
            return SyncResult(Errors.UNKNOWN_MEMBER_ID)
        error = self._validate_sync(group, p)
        if error is not Errors.NONE:
            return SyncResult(error)
        if group.is_(PREPARING):
            return SyncResult(Errors.REBALANCE_IN_PROGRESS)
        member = group.members[p.member_id]
        if group.is_(STABLE):
            self._sync_received(group, p.member_id)
            return SyncResult(Errors.NONE, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: park until the leader's assignment is stored.
        if member.sync_ticket is not None:
            self.tickets.complete(member.sync_ticket, SyncResult(Errors.REBALANCE_IN_PROGRESS))
        ticket = member.sync_ticket = self.tickets.issue(group.group_id)
        self._sync_received(group, p.member_id)
        if group.leader_id == p.member_id:
            self._apply_leader_assignment(group, dict(p.assignments), now)
        result = self.tickets.take(ticket)
        if result is not None:
            assert isinstance(result, SyncResult)
            return result
        return self._awaiting(group, ticket, now)

    def _validate_sync(self, group: ClassicGroup, p: SyncParams) -> Errors:
        if group.is_(DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = validate_member(group, p.member_id, p.instance_id)
        if error is not Errors.NONE:
            return error
        if p.generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        if _inconsistent(p.protocol_type, group.protocol_type) or _inconsistent(p.protocol_name, group.protocol_name):
            return Errors.INCONSISTENT_GROUP_PROTOCOL
        return Errors.NONE

    def _sync_received(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline = None

    def _apply_leader_assignment(self, group: ClassicGroup, assignment: dict[str, bytes], now: int) -> None:
        log.info("group %s: assignment received from leader %s for generation %d",
                 group.group_id, group.leader_id, group.generation_id)
        previous = {member_id: m.assignment for member_id, m in group.members.items()}
        for member_id, member in group.members.items():
            member.assignment = assignment.get(member_id, b"")
        if not self._store(group.to_record()):
            for member_id, member in group.members.items():
                member.assignment = previous[member_id]
            self._reset_and_propagate(group, Errors.NOT_COORDINATOR, now)
            self._maybe_prepare_rebalance_or_complete_join(group, now, "the assignment could not be stored")
            return
        self._propagate(group, Errors.NONE, now)
        group.transition(STABLE, now)

    def _reset_and_propagate(self, group: ClassicGroup, error: Errors, now: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate(group, error, now)

    def _propagate(self, group: ClassicGroup, error: Errors, now: int) -> None:
        for member in group.members.values():
            if member.sync_ticket is None:
                continue
            if error is Errors.NONE:
                result = SyncResult(error, group.protocol_type, group.protocol_name, member.assignment)
            else:
                result = SyncResult(error)
            self.tickets.complete(member.sync_ticket, result)
            member.sync_ticket = None
            # Expiry was suspended while the member waited; count its session from now.
            member.heartbeat_deadline = now + member.session_timeout_ms

    def fire_sync_timer(self, group: ClassicGroup, now: int) -> None:
        """Members that never sent SyncGroup for this generation are removed, then a rebalance."""
        group.sync_deadline = None
        if group.sync_generation != group.generation_id or not group.is_(COMPLETING, STABLE):
            return
        if not group.pending_sync:
            return
        late = sorted(group.pending_sync)
        for member_id in late:
            group.remove(member_id)
        log.info("group %s: removed members that never synced: %s", group.group_id, late)
        self._prepare_rebalance(group, now, f"members {late} did not sync")

    # -- Heartbeat and LeaveGroup -------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None, now: int) -> Errors:
        if not group_id:
            return Errors.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return Errors.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE
        error = validate_member(group, member_id, instance_id)
        if error is not Errors.NONE:
            return error
        if generation_id != group.generation_id:
            return Errors.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return Errors.UNKNOWN_MEMBER_ID
        self.keep_alive(group, member_id, now)
        return Errors.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else Errors.NONE

    def keep_alive(self, group: ClassicGroup, member_id: str, now: int) -> None:
        member = group.members.get(member_id)
        if member is not None:
            member.heartbeat_deadline = now + member.session_timeout_ms

    def leave(
        self, group_id: str, leaving: list[LeavingMember], now: int
    ) -> tuple[Errors, list[tuple[LeavingMember, Errors]]]:
        if not group_id:
            return Errors.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:
            return Errors.NONE, [(m, Errors.UNKNOWN_MEMBER_ID) for m in leaving]
        if group.is_(DEAD):
            return Errors.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for m in leaving:
            results.append((m, self._leave_one(group, m)))
        if any(error is Errors.NONE for _, error in results):
            if group.is_(STABLE, COMPLETING):
                self._maybe_prepare_rebalance_or_complete_join(group, now, "members left")
            elif group.is_(PREPARING):
                self._maybe_complete_join_phase(group, now)
        return Errors.NONE, results

    def _leave_one(self, group: ClassicGroup, m: LeavingMember) -> Errors:
        if not m.member_id:  # an admin removing a static member by instance id
            existing = group.static_members.get(m.instance_id) if m.instance_id is not None else None
            if existing is None:
                return Errors.UNKNOWN_MEMBER_ID
            self._remove_member(group, existing, "left (by instance id)")
            return Errors.NONE
        if m.member_id in group.pending_members:
            del group.pending_members[m.member_id]
            log.info("group %s: pending member %s left", group.group_id, m.member_id)
            return Errors.NONE
        error = validate_member(group, m.member_id, m.instance_id)
        if error is Errors.NONE:
            self._remove_member(group, m.member_id, "left")
        return error

    def _remove_member(self, group: ClassicGroup, member_id: str, why: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        log.info("group %s: member %s %s", group.group_id, member_id, why)
        # A parked join or sync of a removed member must still be answered.
        self.tickets.complete(member.join_ticket, JoinResult(Errors.UNKNOWN_MEMBER_ID, ""))
        self.tickets.complete(member.sync_ticket, SyncResult(Errors.UNKNOWN_MEMBER_ID))

    def expire_member(self, group: ClassicGroup, member_id: str, now: int) -> None:
        """A session (or a pending member's wait) ran out."""
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            log.info("group %s: pending member %s expired", group.group_id, member_id)
            if group.is_(PREPARING) and group.has_all_members_joined():
                self.complete_join(group, now)
            return
        member = group.members.get(member_id)
        if member is None:
            return
        member.heartbeat_deadline = None
        if member.has_satisfied_heartbeat():
            return
        self._remove_member(group, member_id, "failed its session timeout")
        if group.is_(STABLE, COMPLETING):
            self._maybe_prepare_rebalance_or_complete_join(group, now, f"member {member_id} expired")
        elif group.is_(PREPARING) and group.has_all_members_joined():
            self.complete_join(group, now)


def validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> Errors:
    """Kafka's ``validateMember``: static identity first (FENCED_INSTANCE_ID), then the member id."""
    if instance_id is not None:
        existing = group.static_members.get(instance_id)
        if existing is None:
            return Errors.UNKNOWN_MEMBER_ID
        if existing != member_id:
            log.info("group %s: member %s is fenced by %s for instance %s",
                     group.group_id, member_id, existing, instance_id)
            return Errors.FENCED_INSTANCE_ID
    return Errors.NONE if member_id in group.members else Errors.UNKNOWN_MEMBER_ID


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def _joined_members(group: ClassicGroup) -> tuple[JoinedMember, ...]:
    return tuple(
        JoinedMember(m.member_id, m.instance_id, m.metadata(group.protocol_name)) for m in group.members.values()
    )
