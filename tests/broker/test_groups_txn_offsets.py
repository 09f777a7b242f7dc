"""Transactional offsets (TxnOffsetCommit): pending until their transaction ends, durable at each step.

The first part drives the group coordinator alone (``complete_transaction`` called as the
transaction coordinator would); the second a real Broker, whose transaction coordinator calls it,
crashed (dropped without closing, as kill -9 leaves the files) at each step of a transaction that
holds offsets: pending written, commit/abort decision logged, offsets completed but the
transaction not yet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.groups import GroupConfig, JoinResult
from rivven_kproto.broker.groups.api import CommitPartition
from rivven_kproto.broker.groups.records import (
    TxnEndRecord,
    TxnOffsetRecord,
    decode_records,
    encode_records,
)
from rivven_kproto.broker.txn import coordinator as txn_module
from rivven_kproto.broker.txn.state import TxnState
from rivven_kproto.codec.errors import Errors, KafkaError

from .group_helpers import NOW, Harness

PID, OTHER = 1000, 2000


def commit(h: Harness, *parts: tuple[str, int, int], group: str = "g") -> None:
    partitions = [CommitPartition(t, p, o, -1, f"plain-{o}") for t, p, o in parts]
    assert h.c.commit_offsets(group, -1, "", None, partitions, h.now, version=8) == [Errors.NONE] * len(parts)


def txn_commit(h: Harness, *parts: tuple[str, int, int], pid: int = PID, group: str = "g", generation: int = -1,
               member: str = "", instance: str | None = None, metadata: str | None = None) -> list[Errors]:
    partitions = [CommitPartition(t, p, o, 3, f"txn-{o}" if metadata is None else metadata) for t, p, o in parts]
    return h.c.commit_txn_offsets(group, pid, 0, generation, member, instance, partitions, h.now)


def fetched(h: Harness, *, stable: bool = False, group: str = "g",
            topics: list[tuple[str, list[int]]] | None = None) -> dict[tuple[str, int], object]:
    """offset per partition; "unstable" for UNSTABLE_OFFSET_COMMIT, None for nothing committed."""
    out: dict[tuple[str, int], object] = {}
    for topic, offsets in h.c.fetch_offsets(group, topics or [("t", [0, 1])], require_stable=stable):
        for f in offsets:
            if f.error is Errors.UNSTABLE_OFFSET_COMMIT:
                out[(topic, f.partition)] = "unstable"
            else:
                out[(topic, f.partition)] = None if f.committed is None else f.committed.offset
    return out


def group_error(call) -> Errors:  # noqa: ANN001
    with pytest.raises(KafkaError) as info:
        call()
    return info.value.error


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path / "groups")


# -- pending, commit, abort -------------------------------------------------------------------------


def test_pending_offsets_become_committed_at_commit(h: Harness) -> None:
    commit(h, ("t", 0, 5))
    assert txn_commit(h, ("t", 0, 10), ("t", 1, 20)) == [Errors.NONE, Errors.NONE]
    assert fetched(h) == {("t", 0): 5, ("t", 1): None}  # without require_stable: the last committed
    assert fetched(h, stable=True) == {("t", 0): "unstable", ("t", 1): "unstable"}
    assert fetched(h, stable=True, topics=[("u", [0])]) == {("u", 0): None}  # other partitions: stable
    h.c.complete_transaction(PID, frozenset({"g"}), True)
    assert fetched(h, stable=True) == {("t", 0): 10, ("t", 1): 20}
    value = h.c.offsets.get("g", "t", 1)
    assert value is not None and (value.leader_epoch, value.metadata, value.commit_timestamp) == (3, "txn-20", NOW)
    assert not h.c.offsets.has_pending("g")


def test_abort_drops_pending_offsets(h: Harness) -> None:
    commit(h, ("t", 0, 5))
    txn_commit(h, ("t", 0, 10), ("t", 1, 20))
    h.c.complete_transaction(PID, frozenset({"g"}), False)
    assert fetched(h, stable=True) == {("t", 0): 5, ("t", 1): None}
    assert not h.c.offsets.has_pending("g")


def test_offsets_verified_before_a_marker_are_not_logged_after_it(h: Harness) -> None:
    """The verification guard: the transaction's coordinator on another broker said "ongoing", but
    its marker (here: an abort) landed before the offsets were logged. Logged, they would stay
    pending for good; the request is answered retriable instead, and verified again."""
    commit(h, ("t", 0, 5))
    parts = [CommitPartition("t", 0, 10, 3, "")]
    guard = h.c.txn_guards.start(PID)
    assert h.c.txn_guards.start(PID) is guard  # concurrent requests of one producer share it
    other = h.c.txn_guards.start(OTHER)
    h.c.complete_transaction(PID, frozenset({"g"}), False)  # nothing pending: still the producer's marker
    assert group_error(lambda: h.c.commit_txn_offsets("g", PID, 0, -1, "", None, parts, h.now, guard=guard)) \
        == Errors.COORDINATOR_NOT_AVAILABLE
    assert not h.c.offsets.has_pending("g")
    # Another producer's guard holds; a guard taken after the marker holds too.
    assert h.c.commit_txn_offsets("g", OTHER, 0, -1, "", None, parts, h.now, guard=other) == [Errors.NONE]
    again = h.c.txn_guards.start(PID)
    assert h.c.commit_txn_offsets("g", PID, 0, -1, "", None, parts, h.now, guard=again) == [Errors.NONE]
    assert h.c.offsets.pending_producers("g") == {PID, OTHER}
    assert fetched(h, stable=True)[("t", 0)] == "unstable"


def test_require_stable_all_partitions_lists_committed_ones(h: Harness) -> None:
    commit(h, ("t", 0, 5))
    txn_commit(h, ("t", 0, 6), ("t", 1, 7))
    every = {(t, f.partition): f.error for t, fs in h.c.fetch_offsets("g", None, require_stable=True) for f in fs}
    assert every == {("t", 0): Errors.UNSTABLE_OFFSET_COMMIT}  # as Kafka: the committed partitions only


def test_a_later_txn_commit_of_the_same_producer_replaces_the_pending_offset(h: Harness) -> None:
    txn_commit(h, ("t", 0, 10))
    txn_commit(h, ("t", 0, 11))
    h.c.complete_transaction(PID, ["g"], True)
    assert fetched(h) == {("t", 0): 11, ("t", 1): None}


def test_completion_covers_every_group_and_only_that_producer(h: Harness) -> None:
    txn_commit(h, ("t", 0, 1), group="g")
    txn_commit(h, ("t", 0, 2), group="h")
    txn_commit(h, ("t", 1, 3), group="g", pid=OTHER)
    size = h.c.log.size  # type: ignore[union-attr]
    h.c.complete_transaction(PID, ["g", "h", "never-used"], True)
    assert fetched(h, stable=True) == {("t", 0): 1, ("t", 1): "unstable"}
    assert fetched(h, stable=True, group="h") == {("t", 0): 2, ("t", 1): None}
    entries = h.c.log.size - size  # type: ignore[union-attr]
    h.c.complete_transaction(PID, ["g", "h"], True)  # idempotent: nothing pending, nothing written
    assert h.c.log.size - size == entries  # type: ignore[union-attr]
    h.c.complete_transaction(OTHER, ["g"], False)
    assert fetched(h, stable=True) == {("t", 0): 1, ("t", 1): None}


def test_plain_commit_written_after_the_txn_offset_wins(h: Harness) -> None:
    """Kafka installs a transaction's offset only if it is newer than the committed one."""
    txn_commit(h, ("t", 0, 10), ("t", 1, 10))
    commit(h, ("t", 0, 50))
    assert fetched(h, stable=True) == {("t", 0): "unstable", ("t", 1): "unstable"}
    h.reopen()  # the order survives replay...
    h.c._compact()  # ...and a snapshot
    h.reopen()
    h.c.complete_transaction(PID, ["g"], True)
    assert fetched(h) == {("t", 0): 50, ("t", 1): 10}


def test_two_producers_on_one_partition_the_later_write_wins(h: Harness) -> None:
    txn_commit(h, ("t", 0, 10), pid=PID)
    txn_commit(h, ("t", 0, 20), pid=OTHER)
    h.c.complete_transaction(OTHER, ["g"], True)
    h.c.complete_transaction(PID, ["g"], True)  # written earlier: does not replace 20
    assert fetched(h) == {("t", 0): 20, ("t", 1): None}
    txn_commit(h, ("t", 0, 30), pid=PID)
    txn_commit(h, ("t", 0, 40), pid=OTHER)
    h.c._compact()
    h.reopen()
    h.c.complete_transaction(PID, ["g"], True)  # written before OTHER's: installed, OTHER still newer
    assert fetched(h, stable=True) == {("t", 0): "unstable", ("t", 1): None}
    h.c.complete_transaction(OTHER, ["g"], True)
    assert fetched(h) == {("t", 0): 40, ("t", 1): None}


# -- who may commit (KIP-447) -----------------------------------------------------------------------


def test_generation_member_and_instance_are_checked_when_given(h: Harness) -> None:
    (member, _), generation = h.stable(2)
    assert txn_commit(h, ("t", 0, 1), generation=generation, member=member) == [Errors.NONE]
    assert group_error(lambda: txn_commit(h, ("t", 0, 1), generation=generation + 1, member=member)) \
        is Errors.ILLEGAL_GENERATION
    assert group_error(lambda: txn_commit(h, ("t", 0, 1), generation=generation, member="gone")) \
        is Errors.UNKNOWN_MEMBER_ID
    assert group_error(lambda: txn_commit(h, ("t", 0, 1), generation=generation, member=member, instance="i")) \
        is Errors.UNKNOWN_MEMBER_ID
    # v0-2 carry no member: accepted although the group has members (unlike a plain commit).
    assert txn_commit(h, ("t", 0, 2)) == [Errors.NONE]
    assert group_error(lambda: txn_commit(h, ("t", 0, 1), group="")) is Errors.INVALID_GROUP_ID


def test_static_member_fencing(h: Harness) -> None:
    outcome = h.join(instance="i-1")
    h.advance()
    result = h.take(outcome)
    member, generation = result.member_id, result.generation_id
    assert h.sync(member, generation, {member: b"a"}, instance="i-1").error is Errors.NONE
    assert txn_commit(h, ("t", 0, 1), generation=generation, member=member, instance="i-1") == [Errors.NONE]
    assert group_error(lambda: txn_commit(h, ("t", 0, 1), generation=generation, member="zombie", instance="i-1")) \
        is Errors.FENCED_INSTANCE_ID


def test_commit_allowed_during_a_rebalance(h: Harness) -> None:
    (member,), _ = h.stable(1)
    joined = h.join(member)  # the only member rejoins: CompletingRebalance at the next generation
    assert isinstance(joined, JoinResult) and h.c.groups["g"].state.value == "CompletingRebalance"
    generation = joined.generation_id
    assert txn_commit(h, ("t", 0, 1), generation=generation, member=member) == [Errors.NONE]
    plain = [CommitPartition("t", 0, 1, -1, "")]
    assert group_error(lambda: h.c.commit_offsets("g", generation, member, None, plain, h.now, version=8)) \
        is Errors.REBALANCE_IN_PROGRESS


def test_unknown_group_is_created_only_without_generation(h: Harness) -> None:
    assert group_error(lambda: txn_commit(h, ("t", 0, 1), group="new", generation=3, member="m")) \
        is Errors.ILLEGAL_GENERATION
    assert "new" not in h.c.groups
    assert txn_commit(h, ("t", 0, 1), group="new") == [Errors.NONE]
    assert h.c.groups["new"].state.value == "Empty"


def test_metadata_too_large_per_partition(h: Harness) -> None:
    parts = [CommitPartition("t", 0, 1, -1, "x" * 4097), CommitPartition("t", 1, 1, -1, "ok")]
    assert h.c.commit_txn_offsets("g", PID, 0, -1, "", None, parts, h.now) == [
        Errors.OFFSET_METADATA_TOO_LARGE, Errors.NONE,
    ]
    assert fetched(h, stable=True) == {("t", 0): None, ("t", 1): "unstable"}


# -- deletion, expiry, durability of the store ------------------------------------------------------


def test_offset_delete_and_topic_deletion_drop_pending_offsets(h: Harness) -> None:
    commit(h, ("t", 0, 0))
    txn_commit(h, ("t", 0, 1), ("t", 1, 1), ("u", 0, 1))
    h.c.delete_offsets("g", [("t", [0])])  # the committed offset's tombstone takes the pending one along
    h.c.delete_topic("u")
    assert fetched(h, stable=True, topics=[("t", [0, 1]), ("u", [0])]) == {
        ("t", 0): None, ("t", 1): "unstable", ("u", 0): None,
    }
    h.c.complete_transaction(PID, ["g"], True)
    assert fetched(h, topics=[("t", [0, 1]), ("u", [0])]) == {("t", 0): None, ("t", 1): 1, ("u", 0): None}


def test_expiry_keeps_partitions_and_groups_with_pending_offsets(tmp_path: Path) -> None:
    h = Harness(tmp_path, offsets_retention_ms=1000, offsets_retention_check_interval_ms=1)
    commit(h, ("t", 0, 5), ("t", 1, 5))
    txn_commit(h, ("t", 0, 6))
    txn_commit(h, ("t", 0, 1), group="only-pending")
    h.advance(2000)
    assert fetched(h) == {("t", 0): 5, ("t", 1): None}  # t-1 expired, t-0 kept for the transaction
    assert "only-pending" in h.c.groups
    h.c.complete_transaction(PID, ["g", "only-pending"], False)
    h.advance(2000)
    assert fetched(h) == {("t", 0): None, ("t", 1): None} and "only-pending" not in h.c.groups


def test_pending_offsets_survive_restart_and_compaction(h: Harness) -> None:
    commit(h, ("t", 0, 5))
    txn_commit(h, ("t", 0, 10))
    h.reopen()
    assert fetched(h, stable=True) == {("t", 0): "unstable", ("t", 1): None}
    h.c._compact()
    h.reopen()
    assert [r for r in h.c.snapshot_records() if isinstance(r, TxnOffsetRecord)] == [
        TxnOffsetRecord("g", PID, 0, "t", 0, 10, 3, "txn-10", NOW),
    ]
    h.c.complete_transaction(PID, ["g"], True)
    h.reopen()
    assert fetched(h, stable=True) == {("t", 0): 10, ("t", 1): None}


def test_group_deletion_drops_its_pending_offsets(h: Harness) -> None:
    txn_commit(h, ("t", 0, 10))
    assert h.c.delete_groups(["g"]) == [("g", Errors.NONE)]
    h.c.complete_transaction(PID, ["g"], True)
    assert fetched(h) == {("t", 0): None, ("t", 1): None} and "g" not in h.c.groups


def test_failed_completion_write_raises_and_keeps_them_pending(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    txn_commit(h, ("t", 0, 10))

    def broken(payload: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(h.c.log, "append", broken)
    with pytest.raises(OSError):
        h.c.complete_transaction(PID, ["g"], True)
    monkeypatch.undo()
    assert fetched(h, stable=True) == {("t", 0): "unstable", ("t", 1): None}
    h.c.complete_transaction(PID, ["g"], True)
    assert fetched(h, stable=True) == {("t", 0): 10, ("t", 1): None}


def test_new_records_round_trip() -> None:
    records = [TxnOffsetRecord("g", 7, 2, "t", 1, 99, -1, "ünï", NOW, True), TxnEndRecord("g", 7, False)]
    assert decode_records(encode_records(records)) == records  # type: ignore[arg-type]


# -- with the transaction coordinator, in a real Broker ---------------------------------------------


class Crash(Exception):
    """Stands for kill -9 at a fault point."""


class Node:
    """A Broker over one data directory; ``crash()`` drops it unclosed and opens a new one."""

    def __init__(self, path: Path) -> None:
        self.config = BrokerConfig(data_dir=path, groups=GroupConfig(initial_rebalance_delay_ms=0))
        self.now = NOW
        self.broker = Broker(self.config, self.now)
        self.broker.create_topic("in", 2, 1, {}, self.now)
        self.broker.create_topic("out", 1, 1, {}, self.now)

    def crash(self) -> Broker:
        for partition in self.broker.all_partitions():
            for segment in partition.engine._segments:
                segment.close()
        self.broker.lock.release()  # the kernel drops the lock of a killed process
        self.broker = Broker(self.config, self.now)
        return self.broker

    def begin(self, tid: str = "app", offsets: tuple[int, int] = (10, 20), group: str = "g",
              timeout_ms: int = 60_000) -> tuple[int, int]:
        txn = self.broker.txn
        error, pid, epoch = txn.init_producer_id(tid, timeout_ms, -1, -1, self.now)
        assert error is Errors.NONE
        assert txn.add_partitions(tid, pid, epoch, [("out", 0)], self.now) is Errors.NONE
        assert txn.verify_offsets(tid, pid, epoch, group) is Errors.INVALID_TXN_STATE  # not added yet
        assert txn.add_offsets(tid, pid, epoch, group, self.now) is Errors.NONE
        assert txn.verify_offsets(tid, pid, epoch, group) is Errors.NONE
        parts = [CommitPartition("in", p, o, -1, "") for p, o in enumerate(offsets)]
        assert self.broker.groups.commit_txn_offsets(group, pid, epoch, -1, "", None, parts, self.now) \
            == [Errors.NONE, Errors.NONE]
        return pid, epoch

    def offsets(self, group: str = "g", *, stable: bool = True) -> list[object]:
        found = self.broker.groups.fetch_offsets(group, [("in", [0, 1])], require_stable=stable)
        return ["unstable" if f.error is Errors.UNSTABLE_OFFSET_COMMIT else None if f.committed is None
                else f.committed.offset for f in found[0][1]]

    def state(self, tid: str = "app") -> TxnState:
        return self.broker.txn.txns[tid].state


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path / "data")
    yield n
    n.broker.close()


@pytest.fixture
def fault(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    armed = {"at": ""}

    def point(name: str) -> None:
        if name == armed["at"]:
            armed["at"] = ""
            raise Crash(name)

    monkeypatch.setattr(txn_module, "fault_point", point)
    return armed


def test_broker_wires_the_group_coordinator(node: Node) -> None:
    assert node.broker.txn.complete_groups == node.broker.markers.complete_groups  # routed by the groups' shard


@pytest.mark.parametrize("commit_it", [True, False])
def test_end_txn_completes_the_offsets(node: Node, commit_it: bool) -> None:
    pid, epoch = node.begin()
    assert node.offsets() == ["unstable", "unstable"] and node.offsets(stable=False) == [None, None]
    assert node.broker.txn.end_txn("app", pid, epoch, commit_it, node.now) is Errors.NONE
    assert node.offsets() == ([10, 20] if commit_it else [None, None])
    assert node.broker.txn.verify_offsets("app", pid, epoch, "g") is Errors.INVALID_TXN_STATE  # ended


def test_verification_errors(node: Node) -> None:
    pid, epoch = node.begin()
    txn = node.broker.txn
    assert txn.verify_offsets("app", pid, epoch - 1, "g") is Errors.PRODUCER_FENCED
    assert txn.verify_offsets("app", pid + 1, epoch, "g") is Errors.INVALID_PRODUCER_ID_MAPPING
    assert txn.verify_offsets("nobody", pid, epoch, "g") is Errors.INVALID_PRODUCER_ID_MAPPING
    assert txn.verify_offsets("app", pid, epoch, "other-group") is Errors.INVALID_TXN_STATE


def test_timeout_abort_drops_the_offsets(node: Node) -> None:
    node.broker.groups.commit_offsets("g", -1, "", None, [CommitPartition("in", 0, 3, -1, "")], node.now, version=8)
    node.begin(timeout_ms=5_000)
    node.broker.txn.tick(node.now + 5_001)
    assert node.state() is TxnState.COMPLETE_ABORT
    assert node.offsets() == [3, None]


def test_fencing_init_producer_id_drops_the_offsets(node: Node) -> None:
    pid, epoch = node.begin()
    assert node.broker.txn.init_producer_id("app", 60_000, -1, -1, node.now)[0] is Errors.CONCURRENT_TRANSACTIONS
    assert node.offsets() == [None, None]
    assert node.broker.txn.verify_offsets("app", pid, epoch, "g") is Errors.PRODUCER_FENCED


def test_crash_with_offsets_pending(node: Node) -> None:
    pid, epoch = node.begin(timeout_ms=5_000)
    node.crash()
    assert node.state() is TxnState.ONGOING and node.offsets() == ["unstable", "unstable"]
    assert node.broker.txn.end_txn("app", pid, epoch, True, node.now) is Errors.NONE
    assert node.offsets() == [10, 20]


def test_crash_with_offsets_pending_then_timeout(node: Node) -> None:
    node.begin(timeout_ms=5_000)
    node.crash()
    node.broker.txn.tick(node.now + 5_001)
    assert node.offsets() == [None, None]
    node.crash()
    assert node.offsets() == [None, None]


@pytest.mark.parametrize("commit_it", [True, False])
def test_crash_after_the_decision_is_logged(node: Node, fault: dict[str, str], commit_it: bool) -> None:
    pid, epoch = node.begin()
    fault["at"] = "txn-after-prepare"
    with pytest.raises(Crash):
        node.broker.txn.end_txn("app", pid, epoch, commit_it, node.now)
    assert node.offsets() == ["unstable", "unstable"]  # the groups have not heard yet
    node.crash()  # recovery writes the markers and completes the offsets, then the transaction
    assert node.state() is (TxnState.COMPLETE_COMMIT if commit_it else TxnState.COMPLETE_ABORT)
    assert node.offsets() == ([10, 20] if commit_it else [None, None])


@pytest.mark.parametrize("commit_it", [True, False])
def test_crash_after_offsets_completed_before_the_transaction(node: Node, fault: dict[str, str],
                                                               commit_it: bool) -> None:
    pid, epoch = node.begin()
    fault["at"] = "txn-before-complete"
    with pytest.raises(Crash):
        node.broker.txn.end_txn("app", pid, epoch, commit_it, node.now)
    expected = [10, 20] if commit_it else [None, None]
    assert node.offsets() == expected and node.state().is_prepare
    size = (node.config.data_dir / "meta" / "groups" / "groups-0000000000.log").stat().st_size
    node.crash()  # recovery calls complete_groups again: nothing pending, nothing written
    assert node.state() is (TxnState.COMPLETE_COMMIT if commit_it else TxnState.COMPLETE_ABORT)
    assert node.offsets() == expected
    assert (node.config.data_dir / "meta" / "groups" / "groups-0000000000.log").stat().st_size == size
    node.crash()
    assert node.offsets() == expected


def test_next_transaction_after_recovery(node: Node, fault: dict[str, str]) -> None:
    pid, epoch = node.begin()
    fault["at"] = "txn-before-complete"
    with pytest.raises(Crash):
        node.broker.txn.end_txn("app", pid, epoch, True, node.now)
    node.crash()
    pid2, epoch2 = node.begin(offsets=(30, 40))  # the same transactional id, bumped
    assert (pid2, epoch2) == (pid, epoch + 1)
    assert node.offsets() == ["unstable", "unstable"] and node.offsets(stable=False) == [10, 20]
    node.broker.txn.end_txn("app", pid2, epoch2, False, node.now)
    assert node.offsets() == [10, 20]


def test_failed_group_write_leaves_the_transaction_prepared(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    pid, epoch = node.begin()
    log = node.broker.groups.log
    assert log is not None

    def broken(payload: bytes) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(log, "append", broken)
    assert node.broker.txn.end_txn("app", pid, epoch, True, node.now) is Errors.COORDINATOR_NOT_AVAILABLE
    assert node.state() is TxnState.PREPARE_COMMIT and node.offsets() == ["unstable", "unstable"]
    monkeypatch.undo()
    node.broker.txn.tick(node.now + 1)  # retried: markers again (harmless), then the offsets
    assert node.state() is TxnState.COMPLETE_COMMIT and node.offsets() == [10, 20]
