"""KIP-890 across brokers (#19): a leader that does not coordinate asks the coordinator.

On three brokers sharing one PostgreSQL database (coordinator shards and partitions spread over
all three). Before a producer's first transactional batch on a
partition, its leader asks the coordinator (AddPartitionsToTxn v5, the broker-to-coordinator
form): with transactions V1 whether the partition is in the producer's ongoing transaction, with
V2 to add it. So a batch the coordinator knows nothing of is refused instead of opening a
transaction that never ends (which would hold the partition's last stable offset back for good),
and transactions V2 is offered on the cluster. Our own client sends the requests by hand where a
real client would not misbehave; the "late" batch is built before EndTxn and sent after: no
sleeps, no timing. Likewise a group coordinator asks the transaction's coordinator (on another
broker) to add its shard for a TxnOffsetCommit v5, which no client of the suite sends (Kafka 4's
Java client would): the request is ours, the offsets' fate (pending, then installed or dropped)
the group's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio

from rivven_kproto.client.admin import create_topic
from rivven_kproto.client.client import KafkaClient
from rivven_kproto.client.consumer import Consumer
from rivven_kproto.client.coordinator import KeyType, find_coordinator
from rivven_kproto.client.producer import Producer, ProducerRecord
from rivven_kproto.client.transactional import Transaction
from rivven_kproto.codec.enums import READ_COMMITTED
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
    OffsetFetchResponse,
)
from rivven_kproto.codec.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
)
from rivven_kproto.codec.records.records import Record, build_batch
from rivven_kproto.testing.postgres import create_database

from .broker_process import BrokerProcess
from .test_cluster import NODES, all_see, three_brokers
from .test_transactions_v2 import _late_produce
from .txn_helpers import TIMEOUT_S, wait_for

CONTROLLER = 1  # three_brokers() starts node 1 first: it holds the coordinator lease (the controller)
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, postgres_server: Any) -> Iterator[dict[int, BrokerProcess]]:
    """Three brokers on a fresh database, shared by this module's tests."""
    with three_brokers(tmp_path_factory.mktemp("cluster-txn"), create_database(postgres_server)) as brokers:
        yield brokers


async def _remote_partition(client: KafkaClient, topic: str, transactional_id: str) -> int:
    """A partition of ``topic`` led by a broker that does not coordinate ``transactional_id``."""
    info = await client.topic(topic)
    coordinator = await find_coordinator(client, KeyType.TRANSACTION, transactional_id)
    remote = [p for p in range(PARTITIONS) if info.partition(p).leader != coordinator]
    assert remote, f"node {coordinator} leads every partition"
    return remote[0]


async def _read_committed(client: KafkaClient, topic: str, partition: int) -> list[bytes | None]:
    consumer = Consumer(client, topic, isolation_level=READ_COMMITTED)
    await consumer.assign([partition], "earliest")
    seen: list[bytes | None] = []
    await consumer.run(lambda r: seen.append(r.value), stop_at_end=True)
    return seen


def _batch(txn: Transaction, topic: str, partition: int, value: bytes) -> bytes:
    return build_batch(
        [Record(0, 0, None, value, [])], producer_id=txn.producer_id, producer_epoch=txn.producer_epoch,
        base_sequence=txn.next_sequence(topic, partition, 1), is_transactional=True,
    )


def _create(cluster: dict[int, BrokerProcess], topic: str) -> None:
    async def run() -> None:
        async with KafkaClient(cluster[CONTROLLER].bootstrap, timeout=TIMEOUT_S) as client:
            await create_topic(client, topic, PARTITIONS, 1, {})
    trio.run(run)
    assert wait_for(lambda: all_see(cluster, set(NODES), topic), TIMEOUT_S)


def test_v1_a_batch_outside_the_transaction_is_refused_by_any_leader(cluster: dict[int, BrokerProcess]) -> None:
    topic = "cl-kip890-v1"
    _create(cluster, topic)

    async def run() -> tuple[int, int, list[bytes | None], list[bytes | None]]:
        async with KafkaClient(cluster[2].bootstrap, timeout=TIMEOUT_S) as client:
            partition = await _remote_partition(client, topic, f"{topic}-writer")
            txn = Transaction(client, f"{topic}-writer")
            await txn.init()
            txn.v2 = False  # speak V1 (AddPartitionsToTxn from the client) whatever the brokers offer
            # Produce v11 (V1) of a partition never added to the transaction: its leader asks the
            # coordinator, which has no such transaction open.
            refused = await _late_produce(client, txn, topic, _batch(txn, topic, partition, b"stray"), 11, partition)
            await txn.add_partitions(topic, [partition])
            accepted = await _late_produce(client, txn, topic, _batch(txn, topic, partition, b"in"), 11, partition)
            assert await txn.end(commit=True)
            committed = await _read_committed(client, topic, partition)
            # Nothing was left open: a later transaction on the partition commits and is read.
            txn.v2 = False
            await txn.add_partitions(topic, [partition])
            await _late_produce(client, txn, topic, _batch(txn, topic, partition, b"next"), 11, partition)
            assert await txn.end(commit=True)
            return refused, accepted, committed, await _read_committed(client, topic, partition)

    refused, accepted, committed, later = trio.run(run)
    assert refused == Errors.TRANSACTION_ABORTABLE  # Produce v11 knows the error (older: INVALID_TXN_STATE)
    assert accepted == Errors.NONE
    assert committed == [b"in"]
    assert later == [b"in", b"next"]


def test_v2_is_offered_and_the_leaders_add_partitions_for_the_producer(cluster: dict[int, BrokerProcess]) -> None:
    topic = "cl-kip890-v2"
    _create(cluster, topic)

    async def run() -> tuple[bool, int, list[int], dict[int, list[bytes | None]]]:
        async with KafkaClient(cluster[3].bootstrap, timeout=TIMEOUT_S) as client:
            partition = await _remote_partition(client, topic, f"{topic}-writer")
            txn = Transaction(client, f"{topic}-writer")
            await txn.init()
            v2 = txn.v2
            producer = Producer(client, topic, transaction=txn)
            epochs = [txn.producer_epoch]
            # Transaction N over all six partitions (no AddPartitionsToTxn: each leader adds its own).
            await producer.send([ProducerRecord(f"n-{p}".encode(), partition=p) for p in range(PARTITIONS)])
            late = _batch(txn, topic, partition, b"late")  # a batch of N held up in the network
            assert await txn.end(commit=True)
            epochs.append(txn.producer_epoch)
            await producer.send([ProducerRecord(f"aborted-{p}".encode(), partition=p) for p in range(PARTITIONS)])
            assert await txn.end(commit=False)
            epochs.append(txn.producer_epoch)
            await producer.send([ProducerRecord(f"n+2-{p}".encode(), partition=p) for p in range(PARTITIONS)])
            error = await _late_produce(client, txn, topic, late, 12, partition)  # delivered now
            assert await txn.end(commit=True)
            seen = {p: await _read_committed(client, topic, p) for p in range(PARTITIONS)}
            return v2, error, epochs, seen

    v2, error, epochs, seen = trio.run(run)
    assert v2, "the cluster should offer transactions V2"
    assert epochs[1] == epochs[0] + 1 and epochs[2] == epochs[0] + 2  # every EndTxn v5 bumps the epoch
    assert error == Errors.INVALID_PRODUCER_EPOCH  # fenced by the markers of N's bumped epoch
    assert seen == {p: [f"n-{p}".encode(), f"n+2-{p}".encode()] for p in range(PARTITIONS)}



async def _group_elsewhere(client: KafkaClient, prefix: str, avoid: int) -> tuple[str, int]:
    """A group id whose coordinator (the holder of its shard) is not node ``avoid``."""
    for n in range(200):
        node = await find_coordinator(client, KeyType.GROUP, f"{prefix}-{n}")
        if node != avoid:
            return f"{prefix}-{n}", node
    raise AssertionError(f"every group lands on node {avoid}")


async def _stable_offset(client: KafkaClient, node: int, group: str, topic: str) -> tuple[int, int]:
    """OffsetFetch v8 with require_stable at the group's coordinator: (offset, error) of partition 0."""
    def build(version: int) -> OffsetFetchRequest:
        return OffsetFetchRequest(groups=[OffsetFetchRequestGroup(
            group_id=group, topics=[OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])], require_stable=True)

    response = await client.call(OffsetFetchRequest, build, OffsetFetchResponse, node_id=node, min_version=8,
                                 max_version=8)
    (partition,) = response.groups[0].topics[0].partitions
    return partition.committed_offset, partition.error_code


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_v2_offsets_in_a_group_another_broker_coordinates(cluster: dict[int, BrokerProcess], commit: bool) -> None:
    """TxnOffsetCommit v5 (transactions V2: no AddOffsetsToTxn) at a group coordinator on another
    broker than the transaction's: it asks the transaction's coordinator to add the group's shard,
    the offsets stay pending (UNSTABLE_OFFSET_COMMIT to require_stable) until EndTxn, then the
    coordinator's marker to the group's broker installs them on commit, drops them on abort."""
    topic = f"cl-kip890-offsets-{'commit' if commit else 'abort'}"
    _create(cluster, topic)

    async def run() -> tuple[list[int], tuple[int, int], tuple[int, int], tuple[int, int]]:
        async with KafkaClient(cluster[2].bootstrap, timeout=TIMEOUT_S) as client:
            transactional_id = f"{topic}-writer"
            txn_node = await find_coordinator(client, KeyType.TRANSACTION, transactional_id)
            group, group_node = await _group_elsewhere(client, f"{topic}-group", txn_node)
            txn = Transaction(client, transactional_id)
            await txn.init()
            assert txn.v2
            await Producer(client, topic, transaction=txn).send([ProducerRecord(b"out", partition=0)])
            before = await _stable_offset(client, group_node, group, topic)

            def build(version: int) -> TxnOffsetCommitRequest:
                return TxnOffsetCommitRequest(
                    transactional_id=transactional_id, group_id=group, producer_id=txn.producer_id,
                    producer_epoch=txn.producer_epoch, generation_id=-1, member_id="", group_instance_id=None,
                    topics=[TxnOffsetCommitRequestTopic(name=topic, partitions=[TxnOffsetCommitRequestPartition(
                        partition_index=0, committed_offset=42, committed_leader_epoch=-1, committed_metadata="")])])

            response = await client.call(TxnOffsetCommitRequest, build, TxnOffsetCommitResponse, node_id=group_node,
                                         min_version=5, max_version=5)
            errors = [p.error_code for t in response.topics for p in t.partitions]
            pending = await _stable_offset(client, group_node, group, topic)
            assert await txn.end(commit=commit)
            after = pending
            for _ in range(100):  # EndTxn waits for the markers; a slow one is waited for here
                after = await _stable_offset(client, group_node, group, topic)
                if after[1] != Errors.UNSTABLE_OFFSET_COMMIT:
                    break
                await trio.sleep(0.1)
            return errors, before, pending, after

    errors, before, pending, after = trio.run(run)
    assert errors == [Errors.NONE]
    assert before == (-1, Errors.NONE)
    assert pending[1] == Errors.UNSTABLE_OFFSET_COMMIT
    assert after == ((42, Errors.NONE) if commit else (-1, Errors.NONE))
