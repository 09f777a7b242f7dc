"""Coordinator shards (#19): the shard of a key, which broker is preferred for a shard, who owns
what, the routing of a transaction's group completion, and the PostgreSQL engine's shard count
and shard locks (legacy databases keep one shard under the old log names)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import xxhash

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.cluster import ClusterView, Node, ranked_for_shard, shard_of
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.coordinator_shards import GROUP_SHARD_TOPIC, GroupsPending, log_names
from rivven_kproto.broker.groups.api import CommitPartition
from rivven_kproto.broker.storage import CoordinationLost
from rivven_kproto.broker.storage.postgres.membership import PgMembership
from rivven_kproto.broker.storage.postgres.store import COORDINATOR_SHARDS, PostgresStorage

NOW = 1_700_000_000_000


def test_the_shard_of_a_key_is_a_stable_hash_not_pythons() -> None:
    # The same on every broker and every run (Python's str hash is salted per process).
    assert shard_of("orders", 16) == xxhash.xxh64_intdigest(b"orders") % 16
    assert shard_of("orders", 1) == 0 and shard_of("", 1) == 0
    counts = Counter(shard_of(f"group-{i}", 16) for i in range(1600))
    assert set(counts) == set(range(16)) and min(counts.values()) > 50  # spread over every shard


def test_a_shard_is_preferred_by_one_node_and_only_its_shards_move_when_nodes_change() -> None:
    three = [1, 2, 3]
    preferred = {shard: ranked_for_shard(three, shard)[0] for shard in range(64)}
    assert set(preferred.values()) == {1, 2, 3}  # every node is preferred for some
    assert preferred == {shard: ranked_for_shard([3, 1, 2], shard)[0] for shard in range(64)}  # order-free
    # Node 3 leaves: only its shards move; node 4 joins: it takes shards only from the others.
    without = {shard: ranked_for_shard([1, 2], shard)[0] for shard in range(64)}
    assert all(without[s] == preferred[s] for s in range(64) if preferred[s] != 3)
    joined = {shard: ranked_for_shard([1, 2, 3, 4], shard)[0] for shard in range(64)}
    assert all(joined[s] in (preferred[s], 4) for s in range(64)) and 4 in joined.values()


def test_the_view_answers_each_keys_owner_or_nobody() -> None:
    nodes = (Node(1, "h", 1), Node(2, "h", 2))
    key = next(f"g{i}" for i in range(100) if shard_of(f"g{i}", 4) == 2)
    view = ClusterView(1, nodes, 1, 4, {0: 1, 2: 2})
    assert view.key_owner(key) == 2 and view.shards_of(1) == [0] and view.shards_of(2) == [2]
    assert view.shard_owner(3) is None  # nobody holds it now: COORDINATOR_NOT_AVAILABLE
    alone = ClusterView.alone(7, "h", 9)
    assert alone.key_owner(key) == 7 and alone.shards_of(7) == [0]


def test_one_shard_keeps_the_old_log_names() -> None:
    assert log_names(0, 1) == ("groups", "txn")
    assert log_names(5, 16) == ("groups/5", "txn/5")


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    opened = Broker(BrokerConfig(data_dir=tmp_path), NOW)
    yield opened
    opened.close()


def test_the_native_log_is_one_shard_with_its_old_files(broker: Broker, tmp_path: Path) -> None:
    assert broker.shard_count == 1 and list(broker.shards) == [0]
    assert broker.groups is broker.shards[0].groups and broker.group_coordinator("any") is broker.groups
    assert broker.txn_coordinator("any") is broker.txn and broker.coordinates("x")
    assert broker.shards[0].txn.log.name == "txn" and (tmp_path / "meta").is_dir()


def test_a_groups_completion_goes_to_its_shards_holder_as_a_marker(broker: Broker) -> None:
    broker.shard_count = 4  # as if the store had four shards and this broker held shard 0 only
    local = next(f"g{i}" for i in range(100) if shard_of(f"g{i}", 4) == 0)
    remote = next(f"g{i}" for i in range(100) if shard_of(f"g{i}", 4) == 3)
    broker.markers.complete_groups(5, [local], True)  # completed here (nothing pending: nothing logged)
    with pytest.raises(GroupsPending):
        broker.markers.complete_groups(5, [local, remote], True)
    (marker,) = broker.markers.remote.take()
    assert (marker.topic, marker.partition, marker.producer_id, marker.commit) == (GROUP_SHARD_TOPIC, 3, 5, True)
    broker.markers.remote.finish(marker, True)  # the holder acknowledged it
    broker.markers.complete_groups(5, [local, remote], True)
    assert broker.group_coordinator(remote) is None and broker.group_coordinator(local) is not None


def test_a_new_database_records_its_shard_count_and_a_legacy_one_keeps_one(postgres_url: str) -> None:
    storage = PostgresStorage(postgres_url)
    try:
        assert storage.coordinator_shards == COORDINATOR_SHARDS
    finally:
        storage.close()
    again = PostgresStorage(postgres_url)
    try:
        assert again.coordinator_shards == COORDINATOR_SHARDS  # recorded: every broker agrees
    finally:
        again.close()


def test_a_database_of_the_single_coordinator_version_is_one_shard(postgres_url: str) -> None:
    first = PostgresStorage(postgres_url)
    first.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as the previous version left it
        conn.execute("DELETE FROM kproto_counters WHERE name = 'coordinator_shards'")
        conn.execute("INSERT INTO kproto_coordinator_log (name, seq, payload) VALUES ('groups', 0, 'x')")
    legacy = PostgresStorage(postgres_url)
    try:
        assert legacy.coordinator_shards == 1
    finally:
        legacy.close()


def owners(storage: PostgresStorage) -> dict[int, int]:
    with storage.pool.connection() as conn:
        return storage.leases.shard_owners(conn)


def test_a_shard_log_write_needs_the_shards_lock(postgres_url: str) -> None:
    storage = PostgresStorage(postgres_url, node=(1, "127.0.0.1", 1))
    other = PostgresStorage(postgres_url, node=(2, "127.0.0.1", 2))
    try:
        membership = PgMembership(storage)
        membership.heartbeat("127.0.0.1", 1)  # the first heartbeat takes the free shards it is preferred for
        assert storage.leases.shards_held and owners(storage) == {s: 1 for s in storage.leases.shards_held}
        held = min(storage.leases.shards_held)
        log_ = storage.coordinator_log(f"groups/{held}", None, held)  # type: ignore[arg-type]
        log_.append(b"entry")
        storage.commit([log_.begin_sync()])  # type: ignore[list-item]
        membership.release_shard(held)
        assert held not in owners(storage)
        log_.append(b"fenced")
        with pytest.raises(CoordinationLost):
            storage.commit([log_.begin_sync()])  # type: ignore[list-item]
    finally:
        other.close()
        storage.close()


def test_a_marker_on_a_group_shard_completes_its_offsets_here_or_asks_its_holder(broker: Broker) -> None:
    """Transactions V2: a group's shard is one of the transaction's "partitions" (``__consumer_offsets``)."""
    broker.shard_count = 4
    local = next(f"g{i}" for i in range(100) if shard_of(f"g{i}", 4) == 0)
    groups = broker.shards[0].groups
    groups.commit_txn_offsets(local, 5, 0, -1, "", None, [CommitPartition("t", 0, 42, -1, "")], NOW)
    assert groups.offsets.pending_producers(local) == {5}
    failed = broker.markers.write_markers(5, 0, True, [(GROUP_SHARD_TOPIC, 0), (GROUP_SHARD_TOPIC, 3)], NOW)
    assert failed == {(GROUP_SHARD_TOPIC, 3)}  # shard 3 is another broker's: asked for
    assert not groups.offsets.pending_producers(local) and groups.offsets.get(local, "t", 0) is not None
    (marker,) = broker.markers.remote.take()
    assert (marker.topic, marker.partition, marker.producer_epoch) == (GROUP_SHARD_TOPIC, 3, 0)
    broker.markers.remote.finish(marker, True)
    assert broker.markers.write_markers(5, 0, True, [(GROUP_SHARD_TOPIC, 3)], NOW) == set()


@contextlib.contextmanager
def holding_a_shard(postgres_url: str) -> Iterator[tuple[PostgresStorage, int]]:
    """Node 1 alone on the database, and a coordinator shard it took with its first heartbeat."""
    storage = PostgresStorage(postgres_url, node=(1, "127.0.0.1", 1))
    try:
        PgMembership(storage).heartbeat("127.0.0.1", 1)
        yield storage, min(storage.leases.shards_held)
    finally:
        storage.close()


def test_a_shard_log_read_ahead_opens_as_it_was_read(postgres_url: str) -> None:
    """``preload`` (a worker thread) reads the log; ``open`` (the loop) then replays that read,
    with the same sequence numbers and sizes, and does not read the database again."""
    with holding_a_shard(postgres_url) as (storage, held):
        writer = storage.coordinator_log(f"txn/{held}", None, held)  # type: ignore[arg-type]
        writer.open()
        for payload in (b"one", b"two"):
            writer.append(payload)
        storage.commit([writer.begin_sync()])  # type: ignore[list-item]
        fresh = storage.coordinator_log(f"txn/{held}", None, held)  # type: ignore[arg-type]
        direct = fresh.open()
        ahead = storage.coordinator_log(f"txn/{held}", None, held)  # type: ignore[arg-type]
        ahead.preload()
        writer.append(b"three")  # committed after the read ahead: not in what open replays
        storage.commit([writer.begin_sync()])  # type: ignore[list-item]
        assert ahead.open() == direct == [b"one", b"two"]
        assert (ahead.size, ahead._seq) == (fresh.size, fresh._seq) == (6, 2)  # noqa: SLF001
        assert storage.coordinator_log(f"txn/{held}", None, held).open() == [b"one", b"two", b"three"]  # type: ignore[arg-type]


def test_commit_decisions_go_with_the_coordinator_log(postgres_url: str) -> None:
    """Recorded in the round that commits the PrepareCommit entry, gone with CompleteCommit's."""
    with holding_a_shard(postgres_url) as (storage, held):
        txn_log = storage.coordinator_log(f"txn/{held}", None, held)  # type: ignore[arg-type]
        txn_log.open()
        txn_log.append(b"prepare-commit")
        txn_log.record_decision(7, 3)
        txn_log.record_decision(8, 0)
        assert storage.committed_decisions([7, 8, 9]) == {}  # nothing before the round commits
        storage.commit([txn_log.begin_sync()])  # type: ignore[list-item]
        assert storage.committed_decisions([7, 8, 9]) == {7: 3, 8: 0}
        txn_log.append(b"complete-commit")
        txn_log.record_decision(7, None)
        txn_log.append(b"prepare-and-complete-commit")
        txn_log.record_decision(9, 1)
        txn_log.record_decision(9, None)
        storage.commit([txn_log.begin_sync()])  # type: ignore[list-item]
        assert storage.committed_decisions([7, 8, 9]) == {8: 0}


@pytest.mark.parametrize("answered", ["before", "after"])
def test_an_acknowledgement_does_not_outlive_the_coordinators_tenure(broker: Broker, answered: str) -> None:
    """A group shard's marker is keyed by producer, outcome and shard only (every V1 transaction of
    a producer has the same key): an acknowledgement left over when the transaction's shard was
    handed over (answered before the hand-over but not yet taken, or answered after it) must not
    count for a later transaction of the producer once the shard is back here, else that one logs
    its completion with its offsets never completed (pending for good)."""
    broker.shard_count = 4
    remote = next(f"g{i}" for i in range(100) if shard_of(f"g{i}", 4) == 3)
    error, pid, _ = broker.shards[0].txn.init_producer_id("app", 60_000, -1, -1, NOW)
    assert error.name == "NONE"
    with pytest.raises(GroupsPending):
        broker.markers.complete_groups(pid, [remote], True)
    (marker,) = broker.markers.remote.take()
    if answered == "before":
        broker.markers.remote.finish(marker, True)
    dropped = broker.drop_shard(0)  # handed over before the transaction took the acknowledgement
    assert dropped is not None
    dropped.close()
    if answered == "after":
        broker.markers.remote.finish(marker, True)
    broker.shard_count = 1  # (the native log's names, to load it again)
    broker.load_shard(0, NOW)  # the shard comes back; the producer's next transaction commits
    broker.shard_count = 4
    with pytest.raises(GroupsPending):
        broker.markers.complete_groups(pid, [remote], True)
    assert broker.markers.remote.take() == [marker]  # asked for again, not taken as written
