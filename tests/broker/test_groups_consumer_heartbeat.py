"""The KIP-848 consumer group state machine through GroupCoordinator: joins, reconciliation across
members, fencing, static members, leaving, session expiry, regex subscriptions, offsets with
member epochs, classic groups side by side, and the durable state after a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rivven_kproto.broker.groups.api import CommitPartition, ConsumerHeartbeat, ConsumerHeartbeatResult
from rivven_kproto.codec.errors import Errors, KafkaError

from .group_helpers import Harness

TOPICS = {"t": 4, "u": 2}
SESSION = 45_000


def harness(directory: Path | None = None) -> Harness:
    h = Harness(directory)
    h.c.topic_view = lambda: dict(TOPICS)
    return h


def beat(h: Harness, member: str, epoch: int, *, owned: dict[str, set[int]] | None = None,
         topics: tuple[str, ...] | None = None, regex: str | None = None, instance: str | None = None,
         assignor: str | None = None, group: str = "g") -> ConsumerHeartbeatResult:
    if epoch == 0 and topics is None and regex is None:
        topics = ("t",)
    params = ConsumerHeartbeat(
        group, member, epoch, instance_id=instance, rebalance_timeout_ms=60_000 if epoch == 0 else -1,
        subscribed_topic_names=topics, subscribed_topic_regex=regex, server_assignor=assignor,
        owned=None if owned is None else {t: frozenset(ps) for t, ps in owned.items()},
    )
    return h.c.consumer_heartbeat(params, h.now)


def owned_of(result: ConsumerHeartbeatResult) -> dict[str, set[int]]:
    assert result.assignment is not None
    return {t: set(ps) for t, ps in result.assignment.items()}


def test_first_member_gets_everything_and_a_second_waits_for_revocation() -> None:
    h = harness()
    a = beat(h, "a", 0)
    assert (a.error, a.member_epoch, owned_of(a)) == (Errors.NONE, 1, {"t": {0, 1, 2, 3}})
    b = beat(h, "b", 0)
    assert (b.error, b.member_epoch, owned_of(b)) == (Errors.NONE, 2, {})  # a still owns them all
    a = beat(h, "a", 1, owned={"t": {0, 1, 2, 3}})
    assert a.member_epoch == 1 and sum(map(len, owned_of(a).values())) == 2  # revoke two, same epoch
    kept = owned_of(a)
    b = beat(h, "b", 2, owned={})
    assert b.assignment is None or owned_of(b) == {}  # still unreleased
    a = beat(h, "a", 1, owned=kept)
    assert a.member_epoch == 2
    b = beat(h, "b", 2, owned={})
    assert owned_of(b)["t"] == {0, 1, 2, 3} - kept["t"]
    group = h.c.consumer_group("g")
    assert group is not None and group.state == "Stable" and group.group_epoch == 2


def test_fencing_rules() -> None:
    h = harness()
    beat(h, "a", 0)
    assert beat(h, "a", 5).error is Errors.FENCED_MEMBER_EPOCH
    assert beat(h, "nobody", 1).error is Errors.UNKNOWN_MEMBER_ID
    beat(h, "b", 0)
    a = beat(h, "a", 1, owned={"t": {0, 1, 2, 3}})
    kept = owned_of(a)
    a = beat(h, "a", 1, owned=kept)
    assert a.member_epoch == 2
    # The previous epoch is tolerated while the member owns a subset of its assignment (a lost answer).
    assert beat(h, "a", 1, owned=kept).error is Errors.NONE
    assert beat(h, "a", 1, owned={"t": {0, 1, 2, 3}}).error is Errors.FENCED_MEMBER_EPOCH
    assert beat(h, "a", 1).error is Errors.FENCED_MEMBER_EPOCH  # owned not sent: no proof
    assert beat(h, "a", 0, owned={"t": {1}}).error is Errors.INVALID_REQUEST
    assert beat(h, "c", 0, assignor="sticky").error is Errors.UNSUPPORTED_ASSIGNOR
    assert beat(h, "c", 0, regex="(a)\\1").error is Errors.INVALID_REGULAR_EXPRESSION
    assert beat(h, "c", 0, regex="(?=x)t").error is Errors.INVALID_REGULAR_EXPRESSION


def test_leave_and_session_expiry_free_partitions() -> None:
    h = harness()
    beat(h, "a", 0)
    beat(h, "b", 0)
    left = beat(h, "a", -1)
    assert (left.error, left.member_epoch) == (Errors.NONE, -1)
    b = beat(h, "b", 2, owned={})
    assert owned_of(b) == {"t": {0, 1, 2, 3}} and b.member_epoch == 3
    h.advance(SESSION + 1)
    group = h.c.consumer_group("g")
    assert group is not None and not group.members and group.state == "Empty" and group.group_epoch == 4


def test_static_member_rejoins_in_place_and_an_active_one_is_unreleased() -> None:
    h = harness()
    first = beat(h, "a1", 0, instance="i1")
    assert beat(h, "a2", 0, instance="i1").error is Errors.UNRELEASED_INSTANCE_ID
    assert beat(h, "a1", -2, instance="i1").member_epoch == -2
    group = h.c.consumer_group("g")
    assert group is not None and group.group_epoch == 1  # a temporary leave is no rebalance
    again = beat(h, "a2", 0, instance="i1")
    assert (again.error, again.member_epoch, owned_of(again)) == (Errors.NONE, first.member_epoch, owned_of(first))
    group = h.c.consumer_group("g")
    assert group is not None and list(group.members) == ["a2"] and group.group_epoch == 1


def test_regex_subscription_follows_topic_creation() -> None:
    h = harness()
    a = beat(h, "a", 0, regex="t.*")
    assert owned_of(a) == {"t": {0, 1, 2, 3}}
    TOPICS["tnew"] = 1
    try:
        h.c.topics_changed()
        a = beat(h, "a", 1, owned={"t": {0, 1, 2, 3}})
        assert owned_of(a) == {"t": {0, 1, 2, 3}, "tnew": {0}} and a.member_epoch == 2
    finally:
        del TOPICS["tnew"]


def test_range_assignor_by_member_choice() -> None:
    h = harness()
    beat(h, "a", 0, assignor="range")
    b = beat(h, "b", 0, assignor="range")
    group = h.c.consumer_group("g")
    assert group is not None and group.target["a"] == {"t": frozenset({0, 1})} and b.error is Errors.NONE


def commit(h: Harness, member: str, epoch: int, *, version: int = 9) -> Errors:
    try:
        [error] = h.c.commit_offsets("g", epoch, member, None, [CommitPartition("t", 0, 5, -1, "")], h.now,
                                     version=version)
    except KafkaError as exc:
        return exc.error
    return error


def test_offsets_with_member_epochs() -> None:
    h = harness()
    beat(h, "a", 0)
    assert commit(h, "a", 1) is Errors.NONE
    assert commit(h, "a", 0) is Errors.STALE_MEMBER_EPOCH
    assert commit(h, "x", 1) is Errors.UNKNOWN_MEMBER_ID
    assert commit(h, "a", 1, version=8) is Errors.UNSUPPORTED_VERSION
    with pytest.raises(KafkaError) as stale:
        h.c.fetch_offsets("g", None, member_id="a", member_epoch=7)
    assert stale.value.error is Errors.STALE_MEMBER_EPOCH
    [(_, [fetched])] = h.c.fetch_offsets("g", [("t", [0])], member_id="a", member_epoch=1)
    assert fetched.committed is not None and fetched.committed.offset == 5
    with pytest.raises(KafkaError) as txn:
        h.c.commit_txn_offsets("g", 9, 0, 0, "a", None, [CommitPartition("t", 1, 1, -1, "")], h.now)
    assert txn.value.error is Errors.ILLEGAL_GENERATION
    assert h.c.commit_txn_offsets("g", 9, 0, 1, "a", None, [CommitPartition("t", 1, 1, -1, "")], h.now) == [Errors.NONE]


def test_classic_and_consumer_groups_side_by_side() -> None:
    h = harness()
    beat(h, "a", 0)
    joined = h.join(group="g", protocol_type="connect")
    assert getattr(joined, "error", None) is Errors.INCONSISTENT_GROUP_PROTOCOL
    joined = h.join(group="g")  # a classic consumer may join (online migration: test_groups_migration.py)
    assert getattr(joined, "error", None) is Errors.MEMBER_ID_REQUIRED
    h.join(group="classic")
    assert beat(h, "x", 0, group="classic").error is Errors.GROUP_ID_NOT_FOUND
    listed = {(g.group_id, g.group_type, g.protocol_type, g.state) for g in h.c.list_groups()}
    assert ("g", "consumer", "consumer", "Stable") in listed
    assert h.c.describe("g").state == "Dead"  # DescribeGroups knows classic groups only, as Kafka
    beat(h, "a", -1)
    assert h.c.delete_groups(["g"]) == [("g", Errors.NONE)]


def test_an_empty_classic_group_converts_and_keeps_its_offsets() -> None:
    h = harness()
    assert h.c.commit_offsets("g", -1, "", None, [CommitPartition("t", 0, 3, -1, "")], h.now, version=9) == [Errors.NONE]
    assert beat(h, "a", 0).error is Errors.NONE
    assert "g" not in h.c.groups and h.c.offsets.get("g", "t", 0) is not None


def test_state_survives_a_restart(tmp_path: Path) -> None:
    h = harness(tmp_path)
    beat(h, "a", 0, instance="i")
    beat(h, "b", 0)
    a = beat(h, "a", 1, owned={"t": {0, 1, 2, 3}})
    before = h.c.consumer_group("g")
    assert before is not None
    h.reopen()
    h.c.topic_view = lambda: dict(TOPICS)
    after = h.c.consumer_group("g")
    assert after is not None and after.to_record() == before.to_record()
    assert set(after.deadlines) == {"a", "b"}
    # The members carry on from where they were.
    a = beat(h, "a", 1, owned=owned_of(a))
    assert a.error is Errors.NONE and a.member_epoch == 2
    h.reopen()  # and a snapshot (compaction) keeps it too
    assert h.c.snapshot_records() and h.c.consumer_group("g") is not None


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_removed() -> None:
    h = harness()
    beat(h, "a", 0)  # rebalance timeout 60 s (see beat)
    beat(h, "b", 0)
    a = beat(h, "a", 1, owned={"t": {0, 1, 2, 3}})  # asked to revoke two partitions
    assert a.member_epoch == 1
    for _ in range(3):  # heartbeats keep its session alive, but it never revokes
        h.advance(20_000)
        beat(h, "a", 1, owned={"t": {0, 1, 2, 3}})
        beat(h, "b", 2, owned={})
    h.advance(1)
    group = h.c.consumer_group("g")
    assert group is not None and list(group.members) == ["b"]
    b = beat(h, "b", 2, owned={})
    assert owned_of(b) == {"t": {0, 1, 2, 3}}


class Client:
    """A consumer as librdkafka behaves: it owns what the last assignment said, reports it, and
    starts over (owning nothing) when fenced."""

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.owned: dict[str, set[int]] = {}

    def heartbeat(self, h: Harness) -> None:
        result = beat(h, self.member_id, self.epoch, owned=None if self.epoch == 0 else self.owned)
        if result.error in (Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID):
            self.epoch, self.owned = 0, {}
            return
        assert result.error is Errors.NONE, result
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = owned_of(result)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "beat", "beat", "beat"]), st.integers(0, 3)),
                max_size=40))
def test_clients_never_own_a_partition_twice_and_converge(script: list[tuple[str, int]]) -> None:
    h = harness()
    clients: dict[int, Client] = {}

    def check() -> None:
        seen: set[tuple[str, int]] = set()
        for client in clients.values():
            mine = {(t, p) for t, ps in client.owned.items() for p in ps}
            assert not mine & seen
            seen |= mine

    for action, n in script:
        if action == "join" and n not in clients:
            clients[n] = Client(f"m{n}")
            clients[n].heartbeat(h)
        elif action == "leave" and n in clients:
            beat(h, f"m{n}", -1)
            del clients[n]
        elif action == "beat" and n in clients:
            clients[n].heartbeat(h)
        check()
    for _ in range(6):
        for client in clients.values():
            client.heartbeat(h)
            check()
    if clients:
        owned = {(t, p) for c in clients.values() for t, ps in c.owned.items() for p in ps}
        assert owned == {("t", p) for p in range(TOPICS["t"])}
        group = h.c.consumer_group("g")
        assert group is not None and group.state == "Stable"
