"""Committed offsets: who may commit, what is stored and fetched, deletion and expiry."""

from __future__ import annotations

import pytest

from rivven_kproto.broker.groups import JoinResult, LeavingMember
from rivven_kproto.broker.groups.api import CommitPartition
from rivven_kproto.codec.errors import Errors, KafkaError

from .group_helpers import Harness, subscription


@pytest.fixture
def h() -> Harness:
    return Harness()


def commit(h: Harness, *parts: tuple[str, int, int], group: str = "g", generation: int = -1, member: str = "",
           instance: str | None = None, metadata: str | None = "m", version: int = 8,
           retention: int = -1) -> list[Errors]:
    partitions = [CommitPartition(t, p, o, 5, metadata) for t, p, o in parts]
    return h.c.commit_offsets(group, generation, member, instance, partitions, h.now, version=version,
                              retention_ms=retention)


def fetched(h: Harness, group: str = "g", topics: list[tuple[str, list[int]]] | None = None) -> dict:
    return {
        (topic, f.partition): None if f.committed is None else (f.committed.offset, f.committed.metadata)
        for topic, offsets in h.c.fetch_offsets(group, topics)
        for f in offsets
    }


def group_error(call) -> Errors:  # noqa: ANN001
    with pytest.raises(KafkaError) as info:
        call()
    return info.value.error


def test_standalone_commit_creates_a_simple_group(h: Harness) -> None:
    assert commit(h, ("t", 0, 10), ("t", 1, 20)) == [Errors.NONE, Errors.NONE]
    assert fetched(h) == {("t", 0): (10, "m"), ("t", 1): (20, "m")}
    listing = h.c.list_groups()
    assert [(g.group_id, g.protocol_type, g.state) for g in listing] == [("g", "", "Empty")]
    committed = h.c.offsets.get("g", "t", 0)
    assert committed is not None and committed.leader_epoch == 5 and committed.commit_timestamp == h.now


def test_fetch_unknown_partitions_and_groups(h: Harness) -> None:
    commit(h, ("t", 0, 10))
    assert fetched(h, topics=[("t", [0, 1]), ("u", [3])]) == {("t", 0): (10, "m"), ("t", 1): None, ("u", 3): None}
    assert fetched(h, group="nope", topics=[("t", [0])]) == {("t", 0): None}
    assert fetched(h, group="nope") == {}


def test_null_metadata_is_stored_as_empty_string(h: Harness) -> None:
    commit(h, ("t", 0, 1), metadata=None)
    assert fetched(h) == {("t", 0): (1, "")}


def test_metadata_size_limit_counts_java_chars(h: Harness) -> None:
    partitions = [
        CommitPartition("t", 0, 1, -1, "x" * 4096),
        CommitPartition("t", 1, 1, -1, "x" * 4097),
        CommitPartition("t", 2, 1, -1, "é" * 4096),  # 8192 UTF-8 bytes, 4096 Java chars: accepted
    ]
    errors = h.c.commit_offsets("g", -1, "", None, partitions, h.now, version=8)
    assert errors == [Errors.NONE, Errors.OFFSET_METADATA_TOO_LARGE, Errors.NONE]
    assert set(fetched(h)) == {("t", 0), ("t", 2)}


def test_commit_with_generation_to_unknown_group(h: Harness) -> None:
    assert group_error(lambda: commit(h, ("t", 0, 1), generation=1, member="m", version=8)) is Errors.ILLEGAL_GENERATION
    assert group_error(lambda: commit(h, ("t", 0, 1), generation=1, member="m", version=9)) is Errors.GROUP_ID_NOT_FOUND
    assert group_error(lambda: commit(h, ("t", 0, 1), group="")) is Errors.INVALID_GROUP_ID
    assert "g" not in h.c.groups


def test_member_commits_are_checked_against_the_generation(h: Harness) -> None:
    (a, b), gen = h.stable(2)
    assert commit(h, ("t", 0, 7), generation=gen, member=a) == [Errors.NONE]
    assert group_error(lambda: commit(h, ("t", 0, 8), generation=gen + 1, member=a)) is Errors.ILLEGAL_GENERATION
    assert group_error(lambda: commit(h, ("t", 0, 8), generation=gen, member="x")) is Errors.UNKNOWN_MEMBER_ID
    assert group_error(lambda: commit(h, ("t", 0, 8))) is Errors.UNKNOWN_MEMBER_ID  # standalone, but not Empty
    assert fetched(h) == {("t", 0): (7, "m")}


def test_commit_during_completing_rebalance_is_rebalance_in_progress(h: Harness) -> None:
    a, parked = h.new_member()
    h.advance()
    assert h.take(parked).generation_id == 1
    assert group_error(lambda: commit(h, ("t", 0, 1), generation=1, member=a)) is Errors.REBALANCE_IN_PROGRESS


def test_static_member_commit_fenced(h: Harness) -> None:
    parked = h.join(instance="i")
    h.advance()
    old = h.take(parked).member_id
    h.sync(old, 1, {old: b""})
    new = h.join(instance="i")
    assert isinstance(new, JoinResult)
    error = group_error(lambda: commit(h, ("t", 0, 1), generation=1, member=old, instance="i"))
    assert error is Errors.FENCED_INSTANCE_ID
    assert commit(h, ("t", 0, 1), generation=1, member=new.member_id, instance="i") == [Errors.NONE]


def test_commit_keeps_the_session_alive(h: Harness) -> None:
    (a,), gen = h.stable(1)
    for _ in range(3):
        h.advance(6_000)
        commit(h, ("t", 0, 1), generation=gen, member=a)
    assert [m.member_id for m in h.c.describe("g").members] == [a]


def test_offset_delete(h: Harness) -> None:
    assert group_error(lambda: h.c.delete_offsets("nope", [("t", [0])])) is Errors.GROUP_ID_NOT_FOUND
    assert group_error(lambda: h.c.delete_offsets("", [("t", [0])])) is Errors.INVALID_GROUP_ID
    (a,), gen = h.stable(1, protocols=(("range", subscription("t")),))
    commit(h, ("t", 0, 1), ("u", 0, 2), generation=gen, member=a)
    assert h.c.delete_offsets("g", [("t", [0]), ("u", [0, 9])]) == [
        ("t", [(0, Errors.GROUP_SUBSCRIBED_TO_TOPIC)]), ("u", [(0, Errors.NONE), (9, Errors.NONE)]),
    ]
    assert fetched(h) == {("t", 0): (1, "m")}
    h.c.leave("g", [LeavingMember(a, None)], h.now)
    assert h.c.delete_offsets("g", [("t", [0])]) == [("t", [(0, Errors.NONE)])]
    assert fetched(h) == {}


def test_offset_delete_on_an_active_non_consumer_group_is_non_empty(h: Harness) -> None:
    parked = h.join(protocol_type="connect", protocols=(("v1", b"worker"),), v4=False)
    h.advance()
    assert h.take(parked).error is Errors.NONE
    assert group_error(lambda: h.c.delete_offsets("g", [("t", [0])])) is Errors.NON_EMPTY_GROUP


def test_unparsable_subscription_counts_as_subscribed_to_everything(h: Harness) -> None:
    (a,), gen = h.stable(1, protocols=(("range", b"\x00\x00garbage"),))
    assert h.c.delete_offsets("g", [("any", [0])]) == [("any", [(0, Errors.GROUP_SUBSCRIBED_TO_TOPIC)])]


def test_delete_group_removes_its_offsets(h: Harness) -> None:
    commit(h, ("t", 0, 1), ("t", 1, 1))
    assert h.c.delete_groups(["g"]) == [("g", Errors.NONE)]
    assert fetched(h) == {} and "g" not in h.c.groups


def test_topic_deletion_removes_its_offsets(h: Harness) -> None:
    commit(h, ("t", 0, 1), ("u", 0, 1))
    commit(h, ("t", 3, 1), group="other")
    h.c.delete_topic("t")
    assert fetched(h) == {("u", 0): (1, "m")} and fetched(h, "other") == {}


def test_offsets_expire_from_when_the_group_emptied() -> None:
    h = Harness(offsets_retention_ms=100_000, offsets_retention_check_interval_ms=1_000)
    (a,), gen = h.stable(1, session=60_000)
    commit(h, ("t", 0, 1), generation=gen, member=a)
    h.advance(50_000)
    commit(h, ("t", 0, 2), generation=gen, member=a)
    h.c.leave("g", [LeavingMember(a, None)], h.now)  # Empty from now on
    h.advance(99_000)
    assert fetched(h) == {("t", 0): (2, "m")}
    h.advance(1_000)
    assert fetched(h) == {} and "g" not in h.c.groups  # an Empty group without offsets is removed


def test_simple_group_offsets_expire_per_commit_and_explicit_retention_wins() -> None:
    h = Harness(offsets_retention_ms=100_000, offsets_retention_check_interval_ms=1_000)
    commit(h, ("t", 0, 1))
    commit(h, ("t", 1, 1), retention=10_000, version=2)
    h.advance(60_000)
    commit(h, ("t", 2, 1))
    assert set(fetched(h)) == {("t", 0), ("t", 2)}
    h.advance(40_000)
    assert set(fetched(h)) == {("t", 2)}


def test_stable_group_offsets_do_not_expire() -> None:
    h = Harness(offsets_retention_ms=10_000, offsets_retention_check_interval_ms=1_000)
    (a,), gen = h.stable(1)
    commit(h, ("t", 0, 1), generation=gen, member=a)
    for _ in range(5):
        h.advance(5_000)
        h.heartbeat(a, gen)
    assert fetched(h) == {("t", 0): (1, "m")}
