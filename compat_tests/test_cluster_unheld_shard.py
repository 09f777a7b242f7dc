"""A group whose coordinator shard has no holder for a while: FindCoordinator waits for one (#36).

On the cluster a coordinator shard has no holder from its holder's death until another broker
takes it, a few heartbeats later. librdkafka spends its three FindCoordinator attempts within a
third of a second; answered COORDINATOR_NOT_AVAILABLE each time, its coordinator request then
waits for a broker's state to change, and a transactional producer's
``send_offsets_to_transaction`` outlived its own timeout (97 s in verify-eos seed 47). The broker
now holds such an answer (a delayed response, woken by each heartbeat) until a holder is known.

Deterministic here: the test holds the group's shard lock in PostgreSQL itself (a session that is
no broker) before the broker starts, so the broker cannot take that shard; it lets go while the
producer's call runs, and the broker takes the shard at its next heartbeat.
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, Producer, TopicPartition

from rivven_kproto.broker.cluster import shard_of
from rivven_kproto.broker.storage.postgres.leases import SHARD_LOCK_CLASS
from rivven_kproto.broker.storage.postgres.store import COORDINATOR_SHARDS

from .broker_process import BrokerProcess
from .test_cluster import create
from .test_cluster_killed_coordinator import in_background
from .test_cluster_shards import GROUP, coordinators
from .test_eos import BROKER_ENV
from .txn_helpers import TIMEOUT_S, wait_for

CALL_TIMEOUT_S = 20.0
HUNG_AFTER_S = CALL_TIMEOUT_S + 30.0  # a call still running then is hung (its own timeout is not kept)
UNHELD_FOR_S = 1.5  # how long the shard stays unheld after the call started


def _keys() -> tuple[str, str]:
    """A group id and a transactional id on different shards."""
    group = "uh-group"
    transactional_id = next(f"uh-txn-{i}" for i in range(100)
                            if shard_of(f"uh-txn-{i}", COORDINATOR_SHARDS) != shard_of(group, COORDINATOR_SHARDS))
    return group, transactional_id


def test_offsets_reach_a_group_whose_shard_was_unheld(tmp_path: Path, postgres_url: str) -> None:
    group, transactional_id = _keys()
    shard = shard_of(group, COORDINATOR_SHARDS)
    with psycopg.connect(postgres_url, autocommit=True) as squatter:
        squatter.execute("SELECT pg_advisory_lock(%s, %s)", (SHARD_LOCK_CLASS, shard))
        broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", postgres_url, "--node-id", "1"],
                               env=BROKER_ENV).start()
        try:
            servers = broker.bootstrap
            assert wait_for(lambda: coordinators(broker, GROUP, [transactional_id])[transactional_id] == 1, TIMEOUT_S)
            assert coordinators(broker, GROUP, [group]) == {group: None}  # held by the test: nobody coordinates it
            create(servers, "uh-in", 1, 1)
            create(servers, "uh-out", 1, 1)
            producer = Producer({"bootstrap.servers": servers, "transactional.id": transactional_id})
            consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False})
            producer.init_transactions(TIMEOUT_S)
            producer.begin_transaction()
            producer.produce("uh-out", b"one")
            sent = in_background(lambda: producer.send_offsets_to_transaction(
                [TopicPartition("uh-in", 0, 1)], consumer.consumer_group_metadata(), CALL_TIMEOUT_S))
            time.sleep(UNHELD_FOR_S)
            squatter.execute("SELECT pg_advisory_unlock(%s, %s)", (SHARD_LOCK_CLASS, shard))
            outcome = sent(HUNG_AFTER_S)
            assert outcome, f"send_offsets_to_transaction still running {HUNG_AFTER_S:.0f} s after its {CALL_TIMEOUT_S:.0f} s timeout"
            assert outcome[0] is None, f"send_offsets_to_transaction failed: {outcome[0]}"
            producer.commit_transaction(TIMEOUT_S)
            consumer.close()
            committed = Consumer({"bootstrap.servers": servers, "group.id": group})
            try:
                assert committed.committed([TopicPartition("uh-in", 0)], TIMEOUT_S)[0].offset == 1
            finally:
                committed.close()
        finally:
            broker.kill()
