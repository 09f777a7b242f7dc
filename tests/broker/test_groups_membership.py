"""The classic rebalance protocol as a state machine with injected time: every transition and error."""

from __future__ import annotations

import pytest

from rivven_kproto.broker.groups import Awaiting, JoinResult, LeavingMember
from rivven_kproto.broker.groups.api import JoinedMember, SyncResult
from rivven_kproto.broker.groups.group import GroupState
from rivven_kproto.codec.errors import Errors

from .group_helpers import RANGE, REBALANCE, SESSION, Harness, subscription


@pytest.fixture
def h() -> Harness:
    return Harness()


def state(h: Harness, group: str = "g") -> str:
    return h.c.describe(group).state


# -- JoinGroup ------------------------------------------------------------------------------------


def test_first_join_v4_requires_member_id_then_completes_after_initial_delay() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    first = h.join(client="cli")
    assert first == JoinResult(Errors.MEMBER_ID_REQUIRED, "cli-u1")
    assert state(h) == "Empty"
    parked = h.join("cli-u1", client="cli")
    assert isinstance(parked, Awaiting)
    assert state(h) == "PreparingRebalance"
    h.advance(2999)
    assert h.take(parked) is None
    h.advance(1)
    result = h.take(parked)
    assert result == JoinResult(
        Errors.NONE, "cli-u1", 1, "consumer", "range", "cli-u1", (JoinedMember("cli-u1", None, RANGE[0][1]),)
    )
    assert state(h) == "CompletingRebalance"


def test_join_v3_gets_member_id_in_the_join_response() -> None:
    h = Harness()
    parked = h.join(v4=False, client="old")
    h.advance()
    result = h.take(parked)
    assert result.error is Errors.NONE and result.member_id == "old-u1" and result.leader_id == "old-u1"


def test_initial_delay_extends_while_members_arrive_bounded_by_rebalance_timeout() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    _, p1 = h.new_member()
    h.advance(2000)
    _, p2 = h.new_member()  # arrives inside the first delay: one more delay
    h.advance(1000)
    assert state(h) == "PreparingRebalance"
    h.advance(2999)
    assert h.take(p1) is None
    h.advance(1)
    assert h.take(p1).generation_id == 1 and h.take(p2).generation_id == 1


def test_followers_get_no_member_list_and_leader_is_first_member(h: Harness) -> None:
    a, pa = h.new_member()
    b, pb = h.new_member()
    h.advance()
    leader, follower = h.take(pa), h.take(pb)
    assert leader.leader_id == follower.leader_id == a
    assert [m.member_id for m in leader.members] == [a, b]
    assert follower.members == ()


def test_protocol_selected_by_votes_among_common_protocols(h: Harness) -> None:
    x, y = subscription("t"), subscription("u")
    _, p1 = h.new_member(protocols=(("a", x), ("b", x), ("c", x)))
    _, p2 = h.new_member(protocols=(("b", y), ("a", y), ("c", y)))
    _, p3 = h.new_member(protocols=(("b", y), ("c", y)))  # "a" is not common: not a candidate
    h.advance()
    result = h.take(p1)
    assert result.protocol_name == "b"
    assert [m.metadata for m in result.members] == [x, y, y]


def test_protocol_vote_tie_goes_to_the_leaders_preference(h: Harness) -> None:
    _, p1 = h.new_member(protocols=(("a", b""), ("b", b"")))
    h.new_member(protocols=(("b", b""), ("a", b"")))
    h.advance()
    assert h.take(p1).protocol_name == "a"


def test_first_member_needs_a_protocol_type_and_protocols(h: Harness) -> None:
    assert h.join(protocol_type="").error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.join(protocols=()).error is Errors.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize(
    ("protocol_type", "protocols"), [("connect", RANGE), ("consumer", (("roundrobin", b""),))], ids=["type", "names"]
)
def test_inconsistent_group_protocol(h: Harness, protocol_type: str, protocols: tuple) -> None:
    (a,), _ = h.stable(1)
    assert h.join(protocol_type=protocol_type, protocols=protocols) == JoinResult(
        Errors.INCONSISTENT_GROUP_PROTOCOL, ""
    )
    assert h.join(a, protocol_type=protocol_type, protocols=protocols) == JoinResult(
        Errors.INCONSISTENT_GROUP_PROTOCOL, a
    )


def test_join_validation_errors(h: Harness) -> None:
    assert h.join(group="").error is Errors.INVALID_GROUP_ID
    assert h.join(session=5999).error is Errors.INVALID_SESSION_TIMEOUT
    assert h.join(session=1_800_001).error is Errors.INVALID_SESSION_TIMEOUT
    assert h.join("ghost", group="nope") == JoinResult(Errors.UNKNOWN_MEMBER_ID, "ghost")
    ids, _ = h.stable(1)
    assert h.join("ghost") == JoinResult(Errors.UNKNOWN_MEMBER_ID, "ghost")


def test_new_member_triggers_rebalance_and_everyone_rejoins(h: Harness) -> None:
    (a,), gen = h.stable(1)
    b, pb = h.new_member()
    assert isinstance(pb, Awaiting) and state(h) == "PreparingRebalance"
    assert h.heartbeat(a, gen) is Errors.REBALANCE_IN_PROGRESS
    ra = h.join(a)  # the last missing member: the join phase completes at once
    assert isinstance(ra, JoinResult) and ra.generation_id == gen + 1 and len(ra.members) == 2
    assert h.take(pb).generation_id == gen + 1
    assert state(h) == "CompletingRebalance"
    parked = h.sync(b, gen + 1)
    assert isinstance(parked, Awaiting) and h.take(parked) is None
    assert h.sync(a, gen + 1, {a: b"A", b: b"B"}).assignment == b"A"
    assert h.take(parked) == SyncResult(Errors.NONE, "consumer", "range", b"B")
    assert state(h) == "Stable"


def test_stable_follower_rejoin_with_same_metadata_gets_current_generation(h: Harness) -> None:
    (a, b), gen = h.stable(2)
    result = h.join(b)
    assert result == JoinResult(Errors.NONE, b, gen, "consumer", "range", a)
    assert state(h) == "Stable"


def test_stable_leader_rejoin_or_changed_metadata_rebalances(h: Harness) -> None:
    (a, b), gen = h.stable(2)
    assert isinstance(h.join(a), Awaiting)
    assert state(h) == "PreparingRebalance"
    result = h.join(b, protocols=(("range", subscription("t", "u")),))
    assert isinstance(result, JoinResult) and result.generation_id == gen + 1


def test_completing_rebalance_rejoin_same_metadata_returns_current_generation(h: Harness) -> None:
    a, pa = h.new_member()
    h.advance()
    first = h.take(pa)
    again = h.join(a)  # lost the response: same generation again, still the leader's view
    assert again == first
    changed = h.join(a, protocols=(("range", subscription("x")),))  # changed: a new rebalance
    assert isinstance(changed, JoinResult) and changed.generation_id == 2


def test_join_of_known_member_in_empty_group_is_unknown(h: Harness) -> None:
    (a,), _ = h.stable(1)
    h.c.leave("g", [LeavingMember(a, None)], h.now)
    assert state(h) == "Empty"
    assert h.join(a) == JoinResult(Errors.UNKNOWN_MEMBER_ID, a)


def test_retried_join_supersedes_the_parked_one(h: Harness) -> None:
    a, pa = h.new_member()
    h.join("", client="other")  # keep a pending member so the phase cannot complete
    again = h.join(a)
    assert h.take(pa) == JoinResult(Errors.REBALANCE_IN_PROGRESS, a)
    assert isinstance(again, Awaiting)


# -- SyncGroup ------------------------------------------------------------------------------------


def test_sync_errors(h: Harness) -> None:
    assert h.sync("x", 1, group="").error is Errors.INVALID_GROUP_ID
    assert h.sync("x", 1, group="nope").error is Errors.UNKNOWN_MEMBER_ID
    (a, b), gen = h.stable(2)
    assert h.sync("x", gen).error is Errors.UNKNOWN_MEMBER_ID
    assert h.sync(a, gen + 5).error is Errors.ILLEGAL_GENERATION
    assert h.sync(a, gen, protocol_type="connect").error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(a, gen, protocol_name="roundrobin").error is Errors.INCONSISTENT_GROUP_PROTOCOL
    assert h.sync(a, gen, protocol_type="consumer", protocol_name="range").assignment == b"a0"
    h.join(a)  # leader rejoin: PreparingRebalance
    assert h.sync(b, gen).error is Errors.REBALANCE_IN_PROGRESS


def test_parked_sync_answered_with_rebalance_in_progress_when_a_rebalance_starts(h: Harness) -> None:
    a, pa = h.new_member()
    b, pb = h.new_member()
    h.advance()
    parked = h.sync(b, 1)
    h.new_member(client="late")  # a third member: the group leaves CompletingRebalance
    assert h.take(parked) == SyncResult(Errors.REBALANCE_IN_PROGRESS)
    assert state(h) == "PreparingRebalance"


def test_missing_assignments_are_empty(h: Harness) -> None:
    a, _ = h.new_member()
    b, _ = h.new_member()
    h.advance()
    parked = h.sync(b, 1)
    h.sync(a, 1, {a: b"only-a"})
    assert h.take(parked).assignment == b""


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout(h: Harness) -> None:
    a, _ = h.new_member(session=60_000)
    b, _ = h.new_member(session=60_000)
    h.advance()
    h.sync(a, 1, {a: b"A", b: b"B"})  # b never sends SyncGroup
    assert state(h) == "Stable"
    h.advance(REBALANCE - 1)
    assert h.heartbeat(a, 1) is Errors.NONE
    h.advance(1)
    assert [m.member_id for m in h.c.describe("g").members] == [a]
    assert state(h) == "PreparingRebalance"
    assert h.heartbeat(b, 1) is Errors.UNKNOWN_MEMBER_ID


# -- Heartbeat, LeaveGroup, session expiry --------------------------------------------------------


def test_heartbeat_errors(h: Harness) -> None:
    assert h.heartbeat("x", 0, group="") is Errors.INVALID_GROUP_ID
    assert h.heartbeat("x", 0, group="nope") is Errors.UNKNOWN_MEMBER_ID
    (a,), gen = h.stable(1)
    assert h.heartbeat(a, gen) is Errors.NONE
    assert h.heartbeat(a, gen - 1) is Errors.ILLEGAL_GENERATION
    assert h.heartbeat("x", gen) is Errors.UNKNOWN_MEMBER_ID


def test_session_expiry_removes_member_and_rebalances(h: Harness) -> None:
    (a, b), gen = h.stable(2)
    for _ in range(3):
        h.advance(SESSION // 2)
        assert h.heartbeat(a, gen) is not Errors.UNKNOWN_MEMBER_ID
    assert [m.member_id for m in h.c.describe("g").members] == [a]
    assert state(h) == "PreparingRebalance"
    result = h.join(a)
    assert isinstance(result, JoinResult) and result.generation_id == gen + 1 and len(result.members) == 1


def test_rebalance_timeout_drops_members_that_do_not_rejoin(h: Harness) -> None:
    (a, b, c), gen = h.stable(3, session=60_000)
    parked = h.join(a)
    h.advance(REBALANCE // 3)
    h.join(b)
    h.advance(REBALANCE // 3)
    assert h.take(parked) is None
    assert h.heartbeat(c, gen) is Errors.REBALANCE_IN_PROGRESS  # alive, but it does not rejoin
    h.advance(REBALANCE // 3)
    result = h.take(parked)
    assert result.generation_id == gen + 1
    assert [m.member_id for m in result.members] == [a, b]


def test_pending_member_that_never_rejoins_expires(h: Harness) -> None:
    (a,), gen = h.stable(1)
    pending = h.join()
    assert pending.error is Errors.MEMBER_ID_REQUIRED
    h.advance(SESSION)
    assert h.join(pending.member_id) == JoinResult(Errors.UNKNOWN_MEMBER_ID, pending.member_id)


def test_new_member_that_never_completes_a_join_expires() -> None:
    h = Harness(new_member_join_timeout_ms=40_000)
    (a, b), gen = h.stable(2)
    c, pc = h.new_member(rebalance=300_000)  # waits for a and b, who heartbeat but never rejoin
    for _ in range(4):
        h.advance(9_000)
        assert h.heartbeat(a, gen) is h.heartbeat(b, gen) is Errors.REBALANCE_IN_PROGRESS
    assert h.take(pc) is None
    h.advance(4_000)
    assert h.take(pc) == JoinResult(Errors.UNKNOWN_MEMBER_ID, "")
    assert [m.member_id for m in h.c.describe("g").members] == [a, b]


def test_leave_group_batch_and_errors(h: Harness) -> None:
    assert h.c.leave("", [], h.now)[0] is Errors.INVALID_GROUP_ID
    error, results = h.c.leave("nope", [LeavingMember("x", None)], h.now)
    assert error is Errors.NONE and results == [(LeavingMember("x", None), Errors.UNKNOWN_MEMBER_ID)]
    (a, b, c), gen = h.stable(3)
    leaving = [LeavingMember(a, None), LeavingMember("ghost", None), LeavingMember(b, "wrong-instance")]
    error, results = h.c.leave("g", leaving, h.now)
    assert [e for _, e in results] == [Errors.NONE, Errors.UNKNOWN_MEMBER_ID, Errors.UNKNOWN_MEMBER_ID]
    assert state(h) == "PreparingRebalance"
    assert [m.member_id for m in h.c.describe("g").members] == [b, c]


def test_last_members_leaving_empties_the_group_with_a_new_generation(h: Harness) -> None:
    (a, b), gen = h.stable(2)
    h.c.leave("g", [LeavingMember(a, None), LeavingMember(b, None)], h.now)
    assert state(h) == "Empty"
    assert h.c.groups["g"].generation_id == gen + 1


def test_leave_answers_a_parked_join_of_the_leaving_member(h: Harness) -> None:
    a, pa = h.new_member()
    h.join()  # pending member keeps the phase open
    h.c.leave("g", [LeavingMember(a, None)], h.now)
    assert h.take(pa) == JoinResult(Errors.UNKNOWN_MEMBER_ID, "")


# -- static membership ----------------------------------------------------------------------------


def static_stable(h: Harness, session: int = SESSION) -> tuple[str, str, int]:
    pa = h.join(instance="i-a", client="ca", session=session)
    pb = h.join(instance="i-b", client="cb", session=session)
    h.advance()
    ra, rb = h.take(pa), h.take(pb)
    assert ra.member_id == "i-a-u1" and rb.member_id == "i-b-u2"  # no MEMBER_ID_REQUIRED round
    gen = ra.generation_id
    h.sync(ra.member_id, gen, {ra.member_id: b"A", rb.member_id: b"B"})
    assert h.sync(rb.member_id, gen, instance="i-b").assignment == b"B"
    return ra.member_id, rb.member_id, gen


def test_static_rejoin_while_stable_replaces_member_id_without_rebalance(h: Harness) -> None:
    a, b, gen = static_stable(h)
    result = h.join(instance="i-b", client="cb")
    assert result == JoinResult(Errors.NONE, "i-b-u3", gen, "consumer", "range", a)
    assert state(h) == "Stable"
    assert len(h.c.tickets) == 0  # nothing left parked
    assert h.heartbeat(b, gen, instance="i-b") is Errors.FENCED_INSTANCE_ID
    assert h.heartbeat("i-b-u3", gen, instance="i-b") is Errors.NONE
    assert h.sync("i-b-u3", gen, instance="i-b").assignment == b"B"
    assert h.c.groups["g"].persisted is not None
    assert [m.member_id for m in h.c.groups["g"].persisted.members] == [a, "i-b-u3"]


def test_static_leader_rejoin_is_told_the_old_leader_id(h: Harness) -> None:
    a, b, gen = static_stable(h)
    result = h.join(instance="i-a", client="ca")
    assert result.member_id == "i-a-u3" and result.leader_id == a and result.members == ()
    assert h.c.groups["g"].leader_id == "i-a-u3"
    assert h.sync("i-a-u3", gen, instance="i-a").assignment == b"A"


def test_static_rejoin_keeping_the_selected_protocol_does_not_rebalance(h: Harness) -> None:
    a, b, gen = static_stable(h)
    result = h.join(instance="i-b", protocols=(("roundrobin", b""), ("range", b"")))
    assert isinstance(result, JoinResult) and result.generation_id == gen  # "range" is still the only common one
    assert state(h) == "Stable"


def test_static_rejoin_changing_the_selected_protocol_rebalances(h: Harness) -> None:
    both = (("range", b""), ("roundrobin", b""))
    parked = h.join(instance="i-a", protocols=both)
    h.advance()
    a = h.take(parked).member_id
    h.sync(a, 1, {a: b"A"})
    result = h.join(instance="i-a", protocols=tuple(reversed(both)))  # now votes for roundrobin
    assert isinstance(result, JoinResult) and result.generation_id == 2 and result.protocol_name == "roundrobin"


def test_fenced_static_member_errors(h: Harness) -> None:
    a, b, gen = static_stable(h)
    assert h.join(a, instance="i-b").error is Errors.FENCED_INSTANCE_ID
    assert h.join("x", instance="i-zzz").error is Errors.UNKNOWN_MEMBER_ID
    assert h.sync(a, gen, instance="i-b").error is Errors.FENCED_INSTANCE_ID


def test_static_rejoin_during_completing_rebalance_rebalances_and_fences_old_sync(h: Harness) -> None:
    pa = h.join(instance="i-a")
    pb = h.join(instance="i-b")
    h.advance()
    b = h.take(pb).member_id
    h.take(pa)
    parked = h.sync(b, 1, instance="i-b")
    again = h.join(instance="i-b")
    assert h.take(parked) == SyncResult(Errors.FENCED_INSTANCE_ID)
    assert state(h) == "PreparingRebalance"
    assert isinstance(again, Awaiting)


def test_static_member_removed_by_instance_id_alone(h: Harness) -> None:
    a, b, gen = static_stable(h)
    error, results = h.c.leave("g", [LeavingMember("", "i-b"), LeavingMember("", "i-none")], h.now)
    assert [e for _, e in results] == [Errors.NONE, Errors.UNKNOWN_MEMBER_ID]
    assert [m.member_id for m in h.c.describe("g").members] == [a]


def test_static_member_that_does_not_rejoin_stays_until_its_session_expires(h: Harness) -> None:
    a, b, gen = static_stable(h, session=60_000)
    parked = h.join(a, instance="i-a", session=60_000, protocols=(("range", subscription("t", "v")),))
    h.advance(REBALANCE)  # the join phase ends; a dynamic member would be dropped here, not b
    result = h.take(parked)
    assert result.generation_id == gen + 1 and [m.member_id for m in result.members] == [a, b]
    h.sync(a, gen + 1, {a: b"A", b: b"B"})
    h.advance(60_000 - REBALANCE)  # b's session (from the end of the join phase) runs out
    assert [m.member_id for m in h.c.describe("g").members] == [a]
    assert state(h) == "PreparingRebalance"


# -- describe, list, delete -----------------------------------------------------------------------


def test_describe_and_list_report_kafka_state_names(h: Harness) -> None:
    assert h.c.describe("nope").state == "Dead"
    (a, b), gen = h.stable(2)
    described = h.c.describe("g")
    assert (described.state, described.protocol_type, described.protocol_data) == ("Stable", "consumer", "range")
    assert [(m.member_id, m.client_host, m.assignment) for m in described.members] == [
        (a, "/127.0.0.1", b"a0"), (b, "/127.0.0.1", b"a1"),
    ]
    assert described.members[0].metadata == RANGE[0][1]
    h.join(a)
    preparing = h.c.describe("g")
    assert preparing.state == "PreparingRebalance" and preparing.protocol_data == ""
    assert preparing.members[0].metadata == b""
    h.new_member(group="other")
    assert {(g.group_id, g.state) for g in h.c.list_groups()} == {
        ("g", "PreparingRebalance"), ("other", "PreparingRebalance"),
    }
    assert h.c.list_groups([" preparingrebalance"]) != [] and h.c.list_groups(["Stable"]) == []
    assert h.c.list_groups(["bogus"]) == []


def test_delete_groups(h: Harness) -> None:
    h.stable(1)
    assert h.c.delete_groups(["g", "nope"]) == [("g", Errors.NON_EMPTY_GROUP), ("nope", Errors.GROUP_ID_NOT_FOUND)]
    (a,) = [m.member_id for m in h.c.describe("g").members]
    h.c.leave("g", [LeavingMember(a, None)], h.now)
    assert h.c.delete_groups(["g"]) == [("g", Errors.NONE)]
    assert h.c.describe("g").state == "Dead" and "g" not in {g.group_id for g in h.c.list_groups()}


def test_group_states_enum_covers_kafka_names() -> None:
    assert [s.value for s in GroupState] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]
