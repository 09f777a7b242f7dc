"""KIP-848 assignors and reconciliation, pure: balance, stickiness, and the ownership invariants
(no partition ever owned by two members; every subscribed partition owned once members heartbeat)."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from rivven_kproto.broker.groups.assignors import RANGE, UNIFORM, assign
from rivven_kproto.broker.groups.reconciliation import (
    STABLE,
    UNRELEASED,
    UNREVOKED,
    MemberAssignment,
    reconcile,
)

Owned = dict[str, frozenset[int]]


def flat(assignment: Mapping[str, frozenset[int]]) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def test_uniform_balances_and_covers() -> None:
    subs = {m: frozenset({"a", "b"}) for m in ("m1", "m2", "m3")}
    target = assign(UNIFORM, subs, {"a": 4, "b": 3})
    counts = sorted(len(flat(a)) for a in target.values())
    assert counts == [2, 2, 3]
    assert set().union(*(flat(a) for a in target.values())) == {("a", p) for p in range(4)} | {("b", p) for p in range(3)}


def test_uniform_is_sticky_when_a_member_joins() -> None:
    subs = {"m1": frozenset({"a"}), "m2": frozenset({"a"})}
    first = assign(UNIFORM, subs, {"a": 6})
    second = assign(UNIFORM, {**subs, "m3": frozenset({"a"})}, {"a": 6}, first)
    assert len(flat(second["m3"])) == 2
    for member in ("m1", "m2"):
        assert flat(second[member]) <= flat(first[member])  # only moves to the newcomer


def test_uniform_heterogeneous_subscriptions() -> None:
    subs = {"m1": frozenset({"a"}), "m2": frozenset({"a", "b"})}
    target = assign(UNIFORM, subs, {"a": 2, "b": 2})
    assert flat(target["m1"]) == {("a", 0), ("a", 1)}
    assert flat(target["m2"]) == {("b", 0), ("b", 1)}


def test_range_gives_contiguous_ranges_per_topic() -> None:
    subs = {"m1": frozenset({"a", "b"}), "m2": frozenset({"a", "b"})}
    target = assign(RANGE, subs, {"a": 5, "b": 2})
    assert target["m1"] == {"a": frozenset({0, 1, 2}), "b": frozenset({0})}
    assert target["m2"] == {"a": frozenset({3, 4}), "b": frozenset({1})}


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    a = MemberAssignment(STABLE, 1, 0, {"t": frozenset({0, 1})})
    b = MemberAssignment(STABLE, 0, -1)
    target = {"a": {"t": frozenset({0})}, "b": {"t": frozenset({1})}}
    a = reconcile(a, 2, target["a"], {"t": frozenset({0, 1})}, lambda t, p: False)
    assert (a.state, a.member_epoch, a.assigned, a.revoking) == (UNREVOKED, 1, {"t": frozenset({0})}, {"t": frozenset({1})})
    b = reconcile(b, 2, target["b"], {}, lambda t, p: (t, p) in flat(a.assigned) | flat(a.revoking))
    assert (b.state, b.member_epoch, b.assigned) == (UNRELEASED, 2, {})
    a = reconcile(a, 2, target["a"], {"t": frozenset({0, 1})}, lambda t, p: False)  # still holds 1
    assert a.state == UNREVOKED
    a = reconcile(a, 2, target["a"], {"t": frozenset({0})}, lambda t, p: False)  # revoked
    assert (a.state, a.member_epoch, a.previous_epoch) == (STABLE, 2, 1)
    b = reconcile(b, 2, target["b"], {}, lambda t, p: (t, p) in flat(a.assigned) | flat(a.revoking))
    assert (b.state, b.assigned) == (STABLE, {"t": frozenset({1})})


class Sim:
    """Members that heartbeat in an arbitrary order, each reporting what it holds."""

    def __init__(self, partitions: dict[str, int]) -> None:
        self.partitions = partitions
        self.members: dict[str, MemberAssignment] = {}
        self.client: dict[str, Owned] = {}  # what each client believes it owns
        self.subs: dict[str, frozenset[str]] = {}
        self.target: dict[str, dict[str, frozenset[int]]] = {}
        self.epoch = 0

    def rebalance(self) -> None:
        self.epoch += 1
        self.target = assign(UNIFORM, self.subs, self.partitions, self.target)

    def join(self, member: str, topics: frozenset[str]) -> None:
        self.members[member] = MemberAssignment()
        self.client[member] = {}
        self.subs[member] = topics
        self.rebalance()

    def leave(self, member: str) -> None:
        for d in (self.members, self.client, self.subs, self.target):
            d.pop(member, None)
        self.rebalance()

    def heartbeat(self, member: str) -> None:
        held = {(t, p) for m, s in self.members.items() if m != member
                for t, p in flat(s.assigned) | flat(s.revoking)}
        state = reconcile(self.members[member], self.epoch, self.target.get(member, {}), self.client[member],
                          lambda t, p: (t, p) in held)
        self.members[member] = state
        self.client[member] = dict(state.assigned)  # the client revokes and takes what it is told

    def check_no_double_ownership(self) -> None:
        seen: set[tuple[str, int]] = set()
        for member, state in self.members.items():
            mine = flat(state.assigned) | flat(state.revoking) | flat(self.client[member])
            assert not mine & seen, f"{mine & seen} owned twice"
            seen |= mine


@settings(max_examples=150, deadline=None)
@given(
    partitions=st.dictionaries(st.sampled_from("abc"), st.integers(1, 6), min_size=1),
    script=st.lists(st.tuples(st.sampled_from(["join", "leave", "beat", "beat", "beat"]),
                              st.sampled_from(["m1", "m2", "m3", "m4"]),
                              st.frozensets(st.sampled_from("abc"), min_size=1)), max_size=40),
)
def test_no_partition_owned_twice_and_all_owned_eventually(
    partitions: dict[str, int], script: list[tuple[str, str, frozenset[str]]]
) -> None:
    sim = Sim(partitions)
    for action, member, topics in script:
        if action == "join" and member not in sim.members:
            sim.join(member, frozenset(t for t in topics if t in partitions) or frozenset(partitions))
        elif action == "leave" and member in sim.members:
            sim.leave(member)
        elif action == "beat" and member in sim.members:
            sim.heartbeat(member)
        sim.check_no_double_ownership()
    for _ in range(4):  # everyone heartbeats a few rounds: the group converges
        for member in sorted(sim.members):
            sim.heartbeat(member)
            sim.check_no_double_ownership()
    if sim.members:
        subscribed = {(t, p) for t in set().union(*sim.subs.values()) for p in range(partitions[t])}
        owned = set().union(*(flat(s.assigned) for s in sim.members.values()))
        assert owned == subscribed
        assert all(s.state == STABLE and s.member_epoch == sim.epoch for s in sim.members.values())
