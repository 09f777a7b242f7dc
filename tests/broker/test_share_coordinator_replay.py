"""The share coordinator on the coordinator runtime: its log replays to the state it had live.

A seeded random run drives membership (join, heartbeat, leave, session expiry), share-partition
writes (acquire, acknowledge, lock expiry), admin operations and failing appends; after every
step a coordinator rebuilt from the log alone must hold the live one's durable state.
"""

from __future__ import annotations

import random

import pytest

from rivven_kproto.broker.share import coordinator as share_coordinator
from rivven_kproto.broker.share.coordinator import ShareCoordinator, ShareHeartbeat
from rivven_kproto.broker.share.partition import AckType, InvalidRecordState, LogSpan
from rivven_kproto.codec.errors import Errors, KafkaError

from .test_coordinator_runtime import NOW, MemoryLog

TOPICS = {"t": 2, "u": 1}


def coordinator(durable_log: MemoryLog) -> ShareCoordinator:
    share = ShareCoordinator(durable_log=durable_log)
    share.topic_view = lambda: TOPICS
    return share


def durable(share: ShareCoordinator) -> dict[str, object]:
    """What the log must keep: groups, their epochs, members and share-partitions' durable form."""
    return {
        group.group_id: (
            group.epoch,
            sorted((m.member_id, m.epoch, m.topics, m.client_id, m.client_host, m.rack_id)
                   for m in group.members.values()),
            sorted((key, sp.persisted()) for key, sp in group.partitions.items()),
        )
        for group in share.groups.values()
    }


def replayed(durable_log: MemoryLog) -> ShareCoordinator:
    fresh = coordinator(MemoryLog(durable_log.entries))
    fresh.load(NOW)
    return fresh


def share_fetch(share: ShareCoordinator, rng: random.Random, group_id: str, member: str, now: int) -> None:
    """Acquire some records of one partition and acknowledge some acquired ones (as ShareFetch)."""
    key = rng.choice([("t", 0), ("t", 1), ("u", 0)])
    staged = share.stage(group_id, *key, lambda: 0)
    end = staged.end
    staged.acquire_available(member, 5, now, 2_000)
    staged.acquire_new(member, [LogSpan(end, end + rng.randrange(1, 6), rng.random() < 0.9)], 10, 50, now, 2_000)
    for first in range(staged.start, staged.end, 2):
        try:
            staged.acknowledge(member, first, first, rng.choice(list(AckType)), 3, now, 2_000)
        except InvalidRecordState:
            continue
    share.commit(group_id, {key: staged})


@pytest.mark.parametrize("seed", range(6))
def test_replaying_the_share_log_gives_the_live_state_at_every_step(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(share_coordinator, "COMPACT_BYTES", 4_000)  # compactions happen in the run
    rng = random.Random(seed)
    durable_log = MemoryLog()
    share = coordinator(durable_log)
    epochs: dict[tuple[str, str], int] = {}
    now = NOW
    answers: set[Errors] = set()
    for _ in range(200):
        group_id, member = rng.choice(["g1", "g2"]), rng.choice(["m1", "m2", "m3"])
        epoch = epochs.get((group_id, member), 0)
        op = rng.randrange(10)
        durable_log.failing = rng.random() < 0.05  # a failed write must change nothing either
        try:
            if op in (0, 1, 2):
                topics = tuple(rng.sample(sorted(TOPICS), rng.randrange(1, 3))) if epoch == 0 or rng.random() < 0.2 else None
                result = share.heartbeat(ShareHeartbeat(group_id, member, epoch, rng.choice([None, "r1"]), topics,
                                                        "client", "host"), now)
                answers.add(result.error)
                if result.error is Errors.NONE:
                    epochs[(group_id, member)] = result.member_epoch
            elif op == 3:
                result = share.heartbeat(ShareHeartbeat(group_id, member, -1, None, None), now)
                answers.add(result.error)
                epochs.pop((group_id, member), None)
            elif op in (4, 5, 6) and (group_id, member) in epochs:
                share_fetch(share, rng, group_id, member, now)
            elif op == 7:
                answers.add(share.alter_offsets(group_id, {("t", rng.randrange(2)): rng.randrange(20)}))
            elif op == 8:
                answers.add(rng.choice([share.delete_group(group_id),
                                        share.delete_offsets(group_id, [rng.choice(sorted(TOPICS))])[0]]))
            else:
                now += rng.choice([500, 3_000, 50_000])  # locks expire, then member sessions
                share.tick(now)
                epochs = {k: e for k, e in epochs.items()
                          if (g := share.group(k[0])) is not None and k[1] in g.members}
        except KafkaError:
            pass  # refused: the log could not be written, and nothing changed
        assert durable(replayed(durable_log)) == durable(share)
    assert Errors.NONE in answers and len(answers) > 2  # the run went through more than one path
    assert any(group.partitions for group in share.groups.values()) or durable_log.entries


def test_the_share_coordinator_is_a_runtime_shard() -> None:
    """Its records go through the runtime: one entry per operation, applied by ``apply``."""
    durable_log = MemoryLog()
    share = coordinator(durable_log)
    applied: list[object] = []
    apply = share.apply

    def recording(record: object) -> None:
        applied.append(record)
        apply(record)  # type: ignore[arg-type]

    share.apply = recording  # type: ignore[method-assign]
    result = share.heartbeat(ShareHeartbeat("g", "m", 0, None, ("t",)), NOW)
    assert result.error is Errors.NONE and len(durable_log.entries) == 1
    assert [type(r).__name__ for r in applied] == ["ShareGroupRecord", "ShareMemberRecord"]
    assert share.runtime.replay(durable_log.open()) == 2


def test_an_expired_member_is_released_by_an_effect_after_its_tombstone_is_logged() -> None:
    """Session expiry logs the tombstone, then the runtime runs ``ReleaseMember``: the member's
    acquired records are available again. A failed append releases nothing (retried later)."""
    from rivven_kproto.broker.share.effects import ReleaseMember
    from rivven_kproto.broker.share.partition import RecordState

    durable_log = MemoryLog()
    share = coordinator(durable_log)
    assert share.heartbeat(ShareHeartbeat("g", "m", 0, None, ("t",)), NOW).error is Errors.NONE
    staged = share.stage("g", "t", 0, lambda: 0)
    staged.acquire_new("m", [LogSpan(0, 4, True)], 10, 50, NOW, 600_000)
    share.commit("g", {("t", 0): staged})
    seen: list[tuple[object, int]] = []
    run = share._release_member

    def recording(effect: ReleaseMember, now_ms: int) -> None:
        seen.append((effect, len(durable_log.entries)))
        run(effect, now_ms)

    share.runtime.on(ReleaseMember, recording)
    expired = NOW + share.config.session_timeout_ms
    durable_log.failing = True
    share.tick(expired)
    assert seen == [] and share.current("g", "t", 0).acquired_by("m") == 5  # type: ignore[union-attr]
    durable_log.failing = False
    entries = len(durable_log.entries)
    share.tick(expired + 1_000)
    assert seen == [(ReleaseMember("g", "m"), entries + 1)]  # after the tombstone's entry
    partition = share.current("g", "t", 0)
    assert partition is not None and partition.acquired_by("m") == 0
    assert {span.state for span in partition.spans} == {RecordState.AVAILABLE}
