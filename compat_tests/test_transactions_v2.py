"""Transactions V2 (KIP-890 part 2) against a real broker process, through our own client.

One broker runs with the default ``transaction.version=2``, one with ``transaction.version=1``
(in its ``--config`` file). Our client reads the finalized feature from ApiVersions and speaks V2
(Produce v12 without AddPartitionsToTxn, EndTxn v5 returning the bumped epoch) or V1 accordingly.

The attack KIP-890 defends against: a Produce of transaction N, delayed in the network, arrives
after transaction N+1 began. With V1 semantics the epoch is the same in both transactions, the
partition is in transaction N+1, so the late batch is written and committed with N+1. With V2 the
epoch was bumped by N's EndTxn (and the markers fenced it in the partition), so it is rejected
with INVALID_PRODUCER_EPOCH. The "delay" is a request built before EndTxn and sent after: no
sleeps, no timing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from rivven_kproto.client.admin import create_topic
from rivven_kproto.client.client import KafkaClient
from rivven_kproto.client.consumer import Consumer
from rivven_kproto.client.producer import Producer, ProducerRecord
from rivven_kproto.client.transactional import TRANSACTION_VERSION_FEATURE, Transaction
from rivven_kproto.codec.enums import READ_COMMITTED
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from rivven_kproto.codec.records.records import Record, build_batch

from .broker_process import BrokerProcess


def _start(base: Path, level: int | None) -> BrokerProcess:
    args: list[str] = []
    if level is not None:
        config = base / "server.properties"
        config.write_text(f"transaction.version={level}\n")
        args = ["--config", str(config)]
    return BrokerProcess(base / "data", base / "broker.log", extra_args=args).start()


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, BrokerProcess]]:
    started: dict[int, BrokerProcess] = {}
    try:
        started[2] = _start(tmp_path_factory.mktemp("tv2"), None)  # the default
        started[1] = _start(tmp_path_factory.mktemp("tv1"), 1)
        yield started
    finally:
        for process in started.values():
            if process.alive():
                assert process.stop() == 0, process.log_text()[-4000:]


async def _late_produce(
    client: KafkaClient, txn: Transaction, topic: str, batch: bytes, version: int, partition: int = 0
) -> int:
    """Send a batch that was built earlier, at exactly ``version``, to the partition's leader; its error code."""

    def build(_: int) -> ProduceRequest:
        return ProduceRequest(
            transactional_id=txn.transactional_id, acks=-1, timeout_ms=10_000,
            topic_data=[TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)])],
        )

    leader = (await client.topic(topic)).partition(partition).leader
    response = await client.call(ProduceRequest, build, ProduceResponse, node_id=leader, min_version=version, max_version=version)
    return response.responses[0].partition_responses[0].error_code


async def _committed_values(client: KafkaClient, topic: str) -> list[bytes | None]:
    consumer = Consumer(client, topic, isolation_level=READ_COMMITTED)
    await consumer.assign([0], "earliest")
    seen: list[bytes | None] = []
    await consumer.run(lambda r: seen.append(r.value), stop_at_end=True)
    return seen


async def _attack(bootstrap: str, topic: str) -> tuple[Transaction, int, list[int], list[bytes | None]]:
    """Transaction N writes "n", a delayed batch "late" of N, transaction N+1 writes "n+1".
    Returns (transaction, late batch error code, epochs of N and N+1, committed values)."""
    async with KafkaClient(bootstrap, timeout=20) as client:
        await create_topic(client, topic, 1, 1, {})
        txn = Transaction(client, f"{topic}-writer")
        await txn.init()
        producer = Producer(client, topic, transaction=txn)
        epochs = [txn.producer_epoch]
        await producer.send([ProducerRecord(b"n", partition=0)])
        # The next batch of N is sent but held up in the network: built now, delivered later.
        late = build_batch(
            [Record(0, 0, None, b"late", [])], producer_id=txn.producer_id, producer_epoch=txn.producer_epoch,
            base_sequence=txn.next_sequence(topic, 0, 1), is_transactional=True,
        )
        late_version = txn.produce_versions[1] or 12
        assert await txn.end(commit=True)
        epochs.append(txn.producer_epoch)
        await txn.add_partitions(topic, [0])  # transaction N+1 begins (V1: AddPartitionsToTxn)
        if txn.v2:
            await producer.send([ProducerRecord(b"n+1", partition=0)])  # V2: this Produce adds it
            error = await _late_produce(client, txn, topic, late, late_version)
        else:
            error = await _late_produce(client, txn, topic, late, late_version)
            await producer.send([ProducerRecord(b"n+1", partition=0)])
        assert await txn.end(commit=True)
        return txn, error, epochs, await _committed_values(client, topic)


def test_the_feature_is_advertised_at_the_configured_level(brokers: dict[int, BrokerProcess]) -> None:
    async def level(bootstrap: str) -> tuple[int, int]:
        async with KafkaClient(bootstrap, timeout=20) as client:
            versions = await client.versions()
            return versions.feature_level(TRANSACTION_VERSION_FEATURE), versions.apis[26].broker_max

    # Both advertise EndTxn v5, as Kafka does; the finalized level decides which protocol clients use.
    assert trio.run(level, brokers[2].bootstrap) == (2, 5)
    assert trio.run(level, brokers[1].bootstrap) == (1, 5)


def test_v2_rejects_the_delayed_produce_of_the_previous_transaction(
    brokers: dict[int, BrokerProcess], topic_name: str
) -> None:
    txn, error, epochs, committed = trio.run(_attack, brokers[2].bootstrap, topic_name)
    assert txn.v2
    assert epochs[1] == epochs[0] + 1 and txn.producer_epoch == epochs[0] + 2  # bumped by every EndTxn v5
    assert error == Errors.INVALID_PRODUCER_EPOCH
    assert committed == [b"n", b"n+1"]


def test_v1_semantics_admit_the_delayed_produce(brokers: dict[int, BrokerProcess], topic_name: str) -> None:
    """What V2 fixes: on the transaction.version=1 broker the late batch of N joins N+1."""
    txn, error, epochs, committed = trio.run(_attack, brokers[1].bootstrap, topic_name)
    assert not txn.v2
    assert epochs[1] == epochs[0] == txn.producer_epoch
    assert error == Errors.NONE
    assert committed == [b"n", b"late", b"n+1"]
