"""KIP-848 online migration in the coordinator: classic group -> consumer group -> classic group."""

from __future__ import annotations

from pathlib import Path

from rivven_kproto.broker.groups.api import CommitPartition, JoinResult, LeavingMember, SyncResult
from rivven_kproto.broker.groups.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from rivven_kproto.broker.groups.group import GroupState
from rivven_kproto.codec.errors import Errors

from .group_helpers import Harness
from .test_groups_consumer_heartbeat import TOPICS, beat, owned_of

EVERYTHING = encode_assignment(Assignment((("t", (0, 1, 2, 3)),)))


def classic_harness(directory: Path | None = None, **config: object) -> tuple[Harness, str, int]:
    """A Stable classic group "g" of one consumer owning every partition of t, with a commit."""
    h = Harness(directory, **config)  # type: ignore[arg-type]
    h.c.topic_view = lambda: dict(TOPICS)
    member_id, parked = h.new_member()
    h.advance()
    joined = h.take(parked)
    assert isinstance(joined, JoinResult) and joined.error is Errors.NONE
    assert h.sync(member_id, joined.generation_id, {member_id: EVERYTHING}) == SyncResult(
        Errors.NONE, "consumer", "range", EVERYTHING)
    commit = [CommitPartition("t", 0, 7, -1, "")]
    assert h.c.commit_offsets("g", joined.generation_id, member_id, None, commit, h.now, version=7) == [Errors.NONE]
    return h, member_id, joined.generation_id


def rejoin(h: Harness, member_id: str, owned: tuple[tuple[str, tuple[int, ...]], ...] = ()) -> JoinResult:
    metadata = encode_subscription(Subscription(("t",), owned_partitions=owned, version=1))
    result = h.join(member_id, protocols=(("range", metadata),))
    assert isinstance(result, JoinResult) and result.error is Errors.NONE, result
    assert result.leader_id == "" and result.members == ()  # nobody assigns: the coordinator did
    return result


def synced(h: Harness, member_id: str, generation: int) -> set[int]:
    result = h.sync(member_id, generation, protocol_type="consumer", protocol_name="range")
    assert isinstance(result, SyncResult) and result.error is Errors.NONE, result
    return {p for _, parts in decode_assignment(result.assignment).partitions for p in parts}


def test_migration_policy_disabled_gives_kafkas_error() -> None:
    h, _, _ = classic_harness(consumer_migration_policy="disabled")
    result = beat(h, "new", 0)
    assert (result.error, result.message) == (Errors.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")
    assert h.c.groups["g"].is_(GroupState.STABLE) and "g" not in h.c.consumer_groups


def test_classic_group_upgraded_then_downgraded_with_its_offsets(tmp_path: Path) -> None:
    h, old, generation = classic_harness(tmp_path)
    new = beat(h, "new", 0)
    assert new.error is Errors.NONE and new.assignment == {}  # waits for the classic member to release
    group = h.c.consumer_group("g")
    assert group is not None and "g" not in h.c.groups and group.members[old].classic is not None
    # The classic member must rejoin; an eager one revoked everything first.
    assert h.heartbeat(old, generation) is Errors.REBALANCE_IN_PROGRESS
    first = rejoin(h, old)
    assert h.heartbeat(old, first.generation_id) is Errors.REBALANCE_IN_PROGRESS  # still revoking
    second = rejoin(h, old)
    kept = synced(h, old, second.generation_id)
    assert h.heartbeat(old, second.generation_id) is Errors.NONE
    got = beat(h, "new", new.member_epoch, owned={})
    assert len(kept) == 2 and kept | set(owned_of(got)["t"]) == {0, 1, 2, 3} and not kept & owned_of(got)["t"]
    # A classic member commits with its generation (OffsetCommit < v9); a stale one is refused.
    commit = [CommitPartition("t", 1, 5, -1, "")]
    assert h.c.commit_offsets("g", second.generation_id, old, None, commit, h.now, version=7) == [Errors.NONE]
    before = h.c.consumer_group("g")
    assert before is not None
    group_record = before.to_record()

    h.reopen()  # the converted group is replayed
    h.c.topic_view = lambda: dict(TOPICS)
    replayed = h.c.consumer_group("g")
    assert replayed is not None and replayed.to_record() == group_record and "g" not in h.c.groups
    assert h.heartbeat(old, second.generation_id) is Errors.NONE

    assert beat(h, "new", got.member_epoch, owned=owned_of(got)).error is Errors.NONE
    assert beat(h, "new", -1).error is Errors.NONE  # the last consumer-protocol member leaves
    classic = h.c.groups.get("g")
    assert classic is not None and "g" not in h.c.consumer_groups
    assert classic.is_(GroupState.PREPARING_REBALANCE) and list(classic.members) == [old]
    assert h.heartbeat(old, classic.generation_id) is Errors.REBALANCE_IN_PROGRESS
    assert [h.c.offsets.get("g", "t", p).offset for p in (0, 1)] == [7, 5]  # type: ignore[union-attr]
    h.reopen()  # the downgrade is replayed too
    assert "g" in h.c.groups and "g" not in h.c.consumer_groups
    assert list(h.c.groups["g"].members) == [old]
    assert h.c.offsets.get("g", "t", 1).offset == 5  # type: ignore[union-attr]


def test_classic_members_leave_a_consumer_group() -> None:
    h, old, generation = classic_harness()
    beat(h, "new", 0)
    assert h.c.leave("g", [LeavingMember(old, None)], h.now) == (Errors.NONE, [(LeavingMember(old, None), Errors.NONE)])
    group = h.c.consumer_group("g")
    assert group is not None and list(group.members) == ["new"]
    assert h.heartbeat(old, generation) is Errors.UNKNOWN_MEMBER_ID


def test_cooperative_member_keeps_what_it_owns_while_it_revokes() -> None:
    h, old, generation = classic_harness()
    beat(h, "new", 0)
    first = rejoin(h, old, owned=(("t", (0, 1, 2, 3)),))  # cooperative: it still owns everything
    assert first.generation_id == generation
    kept = synced(h, old, first.generation_id)  # the partitions it keeps; it revokes the others
    assert len(kept) == 2
    assert h.heartbeat(old, first.generation_id) is Errors.REBALANCE_IN_PROGRESS
    second = rejoin(h, old, owned=(("t", tuple(sorted(kept))),))
    assert second.generation_id > generation and synced(h, old, second.generation_id) == kept
    assert h.heartbeat(old, second.generation_id) is Errors.NONE


def test_downgrade_when_the_consumer_member_expires_and_only_if_the_policy_allows() -> None:
    for policy, downgraded in (("bidirectional", True), ("upgrade", False)):
        h, old, _ = classic_harness(consumer_migration_policy=policy)
        beat(h, "new", 0)
        generation = rejoin(h, old).generation_id
        generation = rejoin(h, old).generation_id
        for _ in range(12):  # the consumer member stops heartbeating; the classic one goes on
            h.advance(5_000)
            group = h.c.consumer_group("g")
            if group is None:
                break
            generation = group.members[old].member_epoch
            assert h.heartbeat(old, generation) in (Errors.NONE, Errors.REBALANCE_IN_PROGRESS)
        assert ("g" in h.c.groups) is downgraded and (h.c.consumer_group("g") is None) is downgraded
        if not downgraded:
            group = h.c.consumer_group("g")
            assert group is not None and list(group.members) == [old]
