"""Coordinator shards on three brokers sharing one PostgreSQL database (#19).

Group and transactional ids hash to coordinator shards, each held by one broker at a time (an
advisory lock in the database) and spread over the live brokers by rendezvous hashing: FindCoordinator
(the batched v4 form) answers coordinators on several brokers, and every broker answers the same.
Consumers in groups on different coordinators commit and read back offsets; a transaction whose
coordinator is on one broker commits the offsets of a group coordinated by another (the group's
completion travels as a WriteTxnMarkers on ``__consumer_offsets``), and a read_committed consumer
sees its records exactly once. Killing the transaction's coordinator with SIGKILL: another broker
takes its shard over, a new transaction commits, and nothing committed is lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.find_coordinator import FindCoordinatorRequest

from . import raw_client
from .broker_process import BrokerProcess
from .test_cluster import NODES, all_see, all_values, bootstrap, create, three_brokers
from .txn_helpers import TIMEOUT_S, wait_for

GROUP, TRANSACTION = 0, 1
KEYS = 48  # keys of each type asked about: with 16 shards, every broker coordinates some of them


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str) -> Iterator[dict[int, BrokerProcess]]:
    with three_brokers(tmp_path, postgres_url) as brokers:
        yield brokers


def coordinators(broker: BrokerProcess, key_type: int, keys: list[str]) -> dict[str, int | None]:
    """FindCoordinator v4 (batched) at one broker: the node coordinating each key (None: not available)."""
    try:
        with raw_client.connect(broker.bootstrap) as sock:
            response = raw_client.call(sock, FindCoordinatorRequest(key_type=key_type, coordinator_keys=keys), 4)
    except OSError:
        return dict.fromkeys(keys)
    return {c.key: c.node_id if c.error_code == Errors.NONE else None for c in response.coordinators}


def agreed(brokers: dict[int, BrokerProcess], key_type: int, keys: list[str]) -> dict[str, int] | None:
    """Every live broker names the same live coordinator for every key (None: not yet)."""
    live = {node for node, broker in brokers.items() if broker.alive()}
    answers = [coordinators(brokers[node], key_type, keys) for node in sorted(live)]
    first = answers[0]
    if any(answer != first for answer in answers) or any(owner not in live for owner in first.values()):
        return None
    return {key: owner for key, owner in first.items() if owner is not None}


def settled(brokers: dict[int, BrokerProcess], groups: list[str], txns: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """The coordinators once every broker agrees and at least two brokers coordinate keys of each type."""
    found: list[tuple[dict[str, int], dict[str, int]]] = []

    def check() -> bool:
        by_group, by_txn = agreed(brokers, GROUP, groups), agreed(brokers, TRANSACTION, txns)
        if by_group is None or by_txn is None or len(set(by_group.values())) < 2 or len(set(by_txn.values())) < 2:
            return False
        found.append((by_group, by_txn))
        return True

    assert wait_for(check, 2 * TIMEOUT_S, interval=0.2), (
        f"the coordinators never spread over the brokers: {coordinators(brokers[NODES[0]], GROUP, groups)}")
    return found[-1]


def committed_offsets(servers: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in range(partitions)],
                                                       timeout=TIMEOUT_S)]
    finally:
        consumer.close()


def commit_offsets(servers: str, group: str, topic: str, offsets: list[int]) -> None:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in enumerate(offsets)], asynchronous=False)
    finally:
        consumer.close()


def transaction(servers: str, transactional_id: str, group: str, name: str, offset: int) -> list[bytes]:
    """One committed transaction: 12 records to sh-out and ``group``'s offset ``offset`` on sh-in-0."""
    producer = Producer({"bootstrap.servers": servers, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 60_000})
    metadata = Consumer({"bootstrap.servers": servers, "group.id": group})
    try:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        batch = [f"{name}-{i}".encode() for i in range(12)]
        for i, value in enumerate(batch):
            producer.produce("sh-out", value, partition=i % 3)
        producer.flush(TIMEOUT_S)
        producer.send_offsets_to_transaction([TopicPartition("sh-in", 0, offset)], metadata.consumer_group_metadata(),
                                             TIMEOUT_S)
        producer.commit_transaction(TIMEOUT_S)
        return batch
    finally:
        metadata.close()


def test_coordinator_shards_spread_serve_and_move(cluster: dict[int, BrokerProcess]) -> None:
    groups = [f"sh-group-{i}" for i in range(KEYS)]
    txns = [f"sh-txn-{i}" for i in range(KEYS)]
    by_group, by_txn = settled(cluster, groups, txns)
    servers = bootstrap(cluster)
    # The operator's view: the 16 shards, each held by one broker, spread over all three.
    done = subprocess.run([sys.executable, "-m", "rivven_kproto", "--bootstrap", cluster[2].bootstrap, "--format",
                           "json", "cluster", "info"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    held = [shard for b in info["brokers"] for shard in b["coordinator_shards"]]
    assert info["coordinator_shards"] == 16 and sorted(held) == list(range(16)) and not info["coordinator_shards_unheld"]
    assert all(b["coordinator_shards"] for b in info["brokers"]), info["brokers"]
    create(servers, "sh-in", 3, 1)
    create(servers, "sh-out", 3, 1)
    assert wait_for(lambda: all_see(cluster, set(NODES), "sh-out"), TIMEOUT_S)

    # The transaction's coordinator X, a group coordinated by another broker Y, and a group on X.
    transactional_id = txns[0]
    x = by_txn[transactional_id]
    remote_group = next(g for g in groups if by_group[g] != x)
    local_group = next(g for g in groups if by_group[g] == x)
    other_group = next(g for g in groups if by_group[g] not in (x, by_group[remote_group]))

    # Plain offset commits in groups on every coordinator, read back through other brokers.
    for i, group in enumerate((local_group, remote_group, other_group)):
        commit_offsets(cluster[NODES[i]].bootstrap, group, "sh-in", [10 * i + 1, 10 * i + 2, 10 * i + 3])
    for i, group in enumerate((local_group, remote_group, other_group)):
        assert committed_offsets(cluster[NODES[(i + 1) % 3]].bootstrap, group, "sh-in", 3) == [
            10 * i + 1, 10 * i + 2, 10 * i + 3]

    # A transaction on X carrying the offsets of a group on Y.
    committed = transaction(servers, transactional_id, remote_group, "t0", 42)
    assert sorted(all_values(servers, "sh-out", 3, committed=True, expected=12)) == sorted(committed)
    assert committed_offsets(servers, remote_group, "sh-in", 1) == [42]

    # X dies: another broker takes its shards over and serves them.
    cluster[x].kill()
    assert wait_for(lambda: all_see(cluster, set(NODES) - {x}), TIMEOUT_S)

    def moved() -> bool:
        owners = agreed(cluster, TRANSACTION, [transactional_id])
        group_owners = agreed(cluster, GROUP, [local_group])
        return bool(owners and group_owners and owners[transactional_id] != x and group_owners[local_group] != x)

    assert wait_for(moved, 2 * TIMEOUT_S, interval=0.2), "nobody took the dead coordinator's shards over"
    servers = bootstrap(cluster)
    committed += transaction(servers, transactional_id, remote_group, "t1", 84)
    committed += transaction(servers, transactional_id, local_group, "t2", 7)
    seen = all_values(servers, "sh-out", 3, committed=True, expected=len(committed))
    assert sorted(seen) == sorted(committed)  # exactly once: nothing lost, nothing twice
    assert committed_offsets(servers, remote_group, "sh-in", 3) == [84, 12, 13]
    assert committed_offsets(servers, local_group, "sh-in", 3) == [7, 2, 3]  # loaded by the new coordinator
    assert committed_offsets(servers, other_group, "sh-in", 3) == [21, 22, 23]
