"""A transaction's offsets through a failover of their group's coordinator (#36, finding D).

Three brokers on one PostgreSQL database; the transaction's coordinator and the group's are on
different brokers. The group's broker is killed (a test fault, ``os._exit``) while it logs a
TxnOffsetCommit (v3, as librdkafka sends it): the offsets never become durable and the producer's
request fails. Another broker takes the group's shard over and the producer retries there, as
librdkafka does after looking the coordinator up again:

* the transaction commits: the retry is taken (pending), the commit installs it;
* the producer was fenced meanwhile (a new instance's InitProducerId aborted the transaction and
  its marker reached the group's new broker), or its transaction timed out (aborted, fencing its
  epoch): the retry must be refused. Accepted, it would be a pending offset no marker ever
  resolves (the transaction is over), and OffsetFetch with ``require_stable`` would answer
  UNSTABLE_OFFSET_COMMIT for that partition forever.

Either way a ``require_stable`` OffsetFetch, and a read_committed confluent-kafka consumer's
``committed()``, must report the transaction's outcome within a bounded time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from rivven_kproto.broker.faults import EXIT_CODE, FAULT_ENV
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from rivven_kproto.codec.messages.describe_transactions import DescribeTransactionsRequest
from rivven_kproto.codec.messages.end_txn import EndTxnRequest
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest
from rivven_kproto.codec.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from rivven_kproto.codec.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)

from . import raw_client
from .broker_process import BrokerProcess
from .test_cluster import bootstrap, create, three_brokers
from .test_cluster_shards import GROUP, TRANSACTION, agreed, commit_offsets, coordinators
from .txn_helpers import TIMEOUT_S, wait_for

log = logging.getLogger(__name__)

DOOMED = 3  # the broker that dies while logging the transaction's offsets
TOPIC = "txo-in"
BEFORE, IN_TXN = 5, 42  # the group's committed offset before the transaction, and the transaction's
RETRIABLE = frozenset({Errors.NOT_COORDINATOR, Errors.COORDINATOR_NOT_AVAILABLE, Errors.COORDINATOR_LOAD_IN_PROGRESS,
                       Errors.CONCURRENT_TRANSACTIONS})
CANDIDATES = 64  # ids tried to find a group on DOOMED and a transactional id elsewhere
TXN_TIMEOUT_MS = {"commit": 120_000, "fenced": 120_000, "timed-out": 10_000}


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str) -> Iterator[dict[int, BrokerProcess]]:
    with three_brokers(tmp_path, postgres_url, env={DOOMED: {FAULT_ENV: "txn-offsets-logged"}}) as brokers:
        yield brokers


def _pick(broker: BrokerProcess, key_type: int, prefix: str, wanted: set[int]) -> tuple[str, int]:
    """An id with ``prefix`` whose coordinator is one of ``wanted``."""
    keys = [f"{prefix}-{i}" for i in range(CANDIDATES)]
    for key, node in coordinators(broker, key_type, keys).items():
        if node in wanted:
            return key, node
    raise AssertionError(f"no {prefix} id coordinated by {wanted}")


def _txn_offset_commit(broker: BrokerProcess, transactional_id: str, group: str, pid: int, epoch: int) -> int:
    """TxnOffsetCommit v3 (librdkafka's) of IN_TXN on partition 0; its error."""
    request = TxnOffsetCommitRequest(
        transactional_id=transactional_id, group_id=group, producer_id=pid, producer_epoch=epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=IN_TXN, committed_leader_epoch=-1, committed_metadata="")])])
    with raw_client.connect(broker.bootstrap) as sock:
        response = raw_client.call(sock, request, 3)
    return int(response.topics[0].partitions[0].error_code)


def _group_coordinator(brokers: dict[int, BrokerProcess], group: str) -> int | None:
    """The live broker every live broker names for the group (None: not agreed yet)."""
    owners = agreed(brokers, GROUP, [group])
    return owners.get(group) if owners is not None else None


def _retry_at_new_coordinator(brokers: dict[int, BrokerProcess], transactional_id: str, group: str, pid: int,
                              epoch: int) -> int:
    """The producer's TxnOffsetCommit again, at the group's coordinator once another broker holds
    its shard; retried on the errors a client retries. Its final error."""
    answers: list[int] = []

    def answered() -> bool:
        node = _group_coordinator(brokers, group)
        if node is None or node == DOOMED:
            return False
        try:
            error = _txn_offset_commit(brokers[node], transactional_id, group, pid, epoch)
        except OSError:
            return False
        answers.append(error)
        return error not in RETRIABLE

    assert wait_for(answered, 2 * TIMEOUT_S, interval=0.2), f"the retried TxnOffsetCommit kept failing: {answers}"
    return answers[-1]


def _stable_offset(brokers: dict[int, BrokerProcess], group: str) -> tuple[int, int] | None:
    """OffsetFetch v7 with require_stable of partition 0 at the group's coordinator: (offset, error)."""
    node = _group_coordinator(brokers, group)
    if node is None:
        return None
    request = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])],
                                 require_stable=True)
    try:
        with raw_client.connect(brokers[node].bootstrap) as sock:
            response = raw_client.call(sock, request, 7)
    except OSError:
        return None
    partition = response.topics[0].partitions[0]
    return int(partition.committed_offset), int(partition.error_code)


def _settles_at(brokers: dict[int, BrokerProcess], group: str, offset: int) -> tuple[bool, list[tuple[int, int] | None]]:
    """Whether require_stable reads ``offset`` (no UNSTABLE_OFFSET_COMMIT) within TIMEOUT_S; the reads."""
    seen: list[tuple[int, int] | None] = []

    def settled() -> bool:
        seen.append(_stable_offset(brokers, group))
        return seen[-1] == (offset, Errors.NONE)

    return wait_for(settled, TIMEOUT_S, interval=0.2), seen[-3:]


def _txn_state(broker: BrokerProcess, transactional_id: str) -> str:
    """DescribeTransactions at the transaction's coordinator: its state."""
    with raw_client.connect(broker.bootstrap) as sock:
        response = raw_client.call(sock, DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0)
    return str(response.transaction_states[0].transaction_state)


def _committed_read_committed(servers: str, group: str) -> int:
    """What a read_committed confluent-kafka consumer's committed() reports for partition 0."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        return int(consumer.committed([TopicPartition(TOPIC, 0)], timeout=TIMEOUT_S)[0].offset)
    finally:
        consumer.close()


@pytest.mark.parametrize("outcome", ["commit", "fenced", "timed-out"])
def test_txn_offsets_survive_their_group_coordinators_death(cluster: dict[int, BrokerProcess], outcome: str) -> None:
    create(bootstrap(cluster), TOPIC, 3, 1)
    group, _ = _pick(cluster[1], GROUP, f"txo-{outcome}-group", {DOOMED})
    transactional_id, txn_node = _pick(cluster[1], TRANSACTION, f"txo-{outcome}-txn", {1, 2})
    commit_offsets(bootstrap(cluster), group, TOPIC, [BEFORE])

    with raw_client.connect(cluster[txn_node].bootstrap) as sock:
        init = raw_client.call(sock, InitProducerIdRequest(transactional_id=transactional_id,
                                                           transaction_timeout_ms=TXN_TIMEOUT_MS[outcome]), 1)
        assert init.error_code == Errors.NONE
        pid, epoch = init.producer_id, init.producer_epoch
        added = raw_client.call(sock, AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=pid,
                                                             producer_epoch=epoch, group_id=group), 1)
        assert added.error_code == Errors.NONE

    # The group's broker dies while logging the offsets: the producer never gets an answer.
    with pytest.raises(OSError):
        _txn_offset_commit(cluster[DOOMED], transactional_id, group, pid, epoch)
    assert cluster[DOOMED].wait(TIMEOUT_S) == EXIT_CODE
    servers = bootstrap(cluster)

    if outcome == "commit":
        assert _retry_at_new_coordinator(cluster, transactional_id, group, pid, epoch) == Errors.NONE
        pending = _stable_offset(cluster, group)
        with raw_client.connect(cluster[txn_node].bootstrap) as sock:
            ended = raw_client.call(sock, EndTxnRequest(transactional_id=transactional_id, producer_id=pid,
                                                        producer_epoch=epoch, committed=True), 1)
        assert ended.error_code == Errors.NONE
        assert pending is not None and pending[1] == Errors.UNSTABLE_OFFSET_COMMIT
        expected = IN_TXN
    elif outcome == "fenced":
        # A new instance fences the producer: its open transaction is aborted, the group included.
        fencer = Producer({"bootstrap.servers": servers, "transactional.id": transactional_id})
        try:
            fencer.init_transactions(2 * TIMEOUT_S)
        except KafkaException as exc:  # reported with the broker's view below
            pytest.fail(f"the new instance could not fence the old one: {exc}")
        retried = _retry_at_new_coordinator(cluster, transactional_id, group, pid, epoch)
        expected = BEFORE
    else:
        # The coordinator aborts the transaction when it times out (fencing the producer's epoch).
        assert wait_for(lambda: _txn_state(cluster[txn_node], transactional_id) == "CompleteAbort",
                        TXN_TIMEOUT_MS[outcome] / 1000 + 2 * TIMEOUT_S, interval=0.2)
        retried = _retry_at_new_coordinator(cluster, transactional_id, group, pid, epoch)
        expected = BEFORE

    settled, reads = _settles_at(cluster, group, expected)
    assert settled, f"require_stable never read {expected}: last reads {reads}"
    assert _committed_read_committed(servers, group) == expected
    if outcome != "commit":  # the fenced producer's late offsets were refused, not left pending
        assert retried == Errors.PRODUCER_FENCED, Errors(retried).name
