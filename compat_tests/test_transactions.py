"""Transactions with real clients against a real broker: exactly the committed records, in order.

Each scenario runs once per client library (confluent-kafka, kafka-python, aiokafka), with that
library's transactional producer, a plain producer of the same library writing to the same
partitions, and that library's assign-only consumers: read_committed sees committed and
non-transactional records only, stops at the last stable offset while a transaction is open, and
read_uncommitted sees every data record. Then fencing by a second instance, the broker's timeout
abort, and a hanging transaction left by a client that vanished, cleared with WriteTxnMarkers
through our codec (what ``kafka-transactions.sh abort`` does).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from rivven_kproto.codec.messages.list_transactions import ListTransactionsRequest

from .broker_process import BrokerProcess
from .txn_helpers import (
    CLIENTS,
    TP,
    AssignedConsumer,
    PlainProducer,
    Raw,
    consume,
    create_topics,
    txn_producer,
    values,
    wait_for,
)

ROUNDS = 6
ABORTED_ROUNDS = {1, 4}


def layout(base: str) -> dict[str, int]:
    return {f"{base}-a": 2, f"{base}-b": 3, f"{base}-c": 2}


def all_partitions(topics: dict[str, int]) -> list[TP]:
    return [(t, p) for t, count in topics.items() for p in range(count)]


@pytest.mark.parametrize("client", CLIENTS)
def test_committed_and_aborted_transactions_interleaved(
    broker: BrokerProcess, topic_name: str, client: str
) -> None:
    topics = layout(topic_name)
    create_topics(broker.bootstrap, topics)
    partitions = all_partitions(topics)
    committed: dict[TP, list[bytes | None]] = {tp: [] for tp in partitions}
    everything: dict[TP, list[bytes | None]] = {tp: [] for tp in partitions}
    markers = dict.fromkeys(partitions, 0)

    txn = txn_producer(client, broker.bootstrap, f"{topic_name}-txn")
    plain = PlainProducer(client, broker.bootstrap)
    try:
        txn.init()
        for r in range(ROUNDS):
            commit = r not in ABORTED_ROUNDS
            # Odd rounds touch only some partitions: the others must not get their markers.
            touched = (
                partitions if r % 2 == 0 else [tp for tp in partitions if tp[0].endswith("-a") or tp[1] == 0]
            )
            txn.begin()
            first = {tp: [f"r{r}-{tp[0][-1]}{tp[1]}-t1-{i}".encode() for i in range(3)] for tp in touched}
            second = {tp: [f"r{r}-{tp[0][-1]}{tp[1]}-t2-{i}".encode() for i in range(2)] for tp in touched}
            between = {
                tp: [f"r{r}-{tp[0][-1]}{tp[1]}-plain-{i}".encode() for i in range(2)] for tp in partitions
            }
            for tp, vals in first.items():
                for v in vals:
                    txn.send(*tp, v)
            txn.flush()  # the transaction's first records are in the log before the plain ones
            for tp, vals in between.items():
                for v in vals:
                    plain.send(*tp, v)
            plain.flush()
            for tp, vals in second.items():
                for v in vals:
                    txn.send(*tp, v)
            txn.flush()  # aborted records really reach the broker
            if commit:
                txn.commit()
            else:
                txn.abort()
            for tp in partitions:
                mine = first.get(tp, []) + between[tp] + second.get(tp, [])
                everything[tp] += mine
                committed[tp] += mine if commit else between[tp]
                markers[tp] += tp in touched
    finally:
        txn.close()
        plain.close()

    raw = Raw(broker.bootstrap)
    try:
        for topic, count in topics.items():
            hw = raw.end_offsets(topic, range(count), committed=False)
            lso = raw.end_offsets(topic, range(count), committed=True)
            assert lso == hw, "no transaction is open: the last stable offset is the high watermark"
            for p in range(count):
                # Exactly one marker per transaction that touched the partition, nothing else.
                assert hw[p] == len(everything[(topic, p)]) + markers[(topic, p)], (topic, p)
    finally:
        raw.close()

    total_committed = sum(map(len, committed.values()))
    seen = values(consume(client, broker.bootstrap, partitions, committed=True, expected=total_committed))
    assert seen == committed  # no aborted record, no control record, offset order
    total = sum(map(len, everything.values()))
    assert (
        values(consume(client, broker.bootstrap, partitions, committed=False, expected=total)) == everything
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_read_committed_stops_at_the_lso_until_commit(
    broker: BrokerProcess, topic_name: str, client: str
) -> None:
    create_topics(broker.bootstrap, {topic_name: 2})
    p0, p1 = (topic_name, 0), (topic_name, 1)
    before = [f"before-{i}".encode() for i in range(5)]
    inside = [f"inside-{i}".encode() for i in range(3)]
    after = [f"after-{i}".encode() for i in range(3)]
    plain = PlainProducer(client, broker.bootstrap)
    txn = txn_producer(client, broker.bootstrap, f"{topic_name}-txn")
    reader = AssignedConsumer(client, broker.bootstrap, [p0, p1], committed=True)
    raw = Raw(broker.bootstrap)
    try:
        for v in before:
            plain.send(*p0, v)
            plain.send(*p1, v)
        plain.flush()
        txn.init()
        txn.begin()
        for v in inside:
            txn.send(*p0, v)
        txn.flush()
        for v in after:
            plain.send(*p0, v)
            plain.send(*p1, v)
        plain.flush()

        assert raw.end_offsets(topic_name, [0, 1], committed=True) == {0: 5, 1: 8}  # p0 held at the txn
        assert raw.end_offsets(topic_name, [0, 1], committed=False) == {0: 11, 1: 8}
        reader.poll_until(13, idle_s=1.5)
        assert values(reader.seen) == {p0: before, p1: before + after}

        txn.commit()
        assert raw.end_offsets(topic_name, [0], committed=True) == {0: 12}
        reader.poll_until(13 + 6)
        assert values(reader.seen) == {p0: before + inside + after, p1: before + after}
        assert [offset for offset, _ in reader.seen[p0]] == list(range(11))  # the marker is at 11
    finally:
        reader.close()
        txn.close()
        plain.close()
        raw.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_second_producer_fences_the_first(broker: BrokerProcess, topic_name: str, client: str) -> None:
    create_topics(broker.bootstrap, {topic_name: 2})
    tid = f"{topic_name}-txn"
    first = txn_producer(client, broker.bootstrap, tid)
    second = txn_producer(client, broker.bootstrap, tid)
    try:
        first.init()
        first.begin()
        first.send(topic_name, 0, b"first-a")
        first.send(topic_name, 1, b"first-a")
        first.flush()
        second.init()  # fences the first instance and aborts its open transaction
        second.begin()
        second.send(topic_name, 0, b"second-a")
        second.flush()
        second.commit()

        failures: list[BaseException] = []
        for step in (
            lambda: first.send(topic_name, 0, b"first-b"),
            first.flush,
            first.commit,
        ):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - examined below
                failures.append(exc)
                break
        assert failures, "the fenced producer could still write and commit"
        assert first.is_fenced(failures[0]), repr(failures[0])

        def commit_says_fenced() -> bool:
            try:
                first.commit()
            except Exception as exc:  # noqa: BLE001 - examined here
                return first.is_fenced(exc)
            return False

        # kafka-python first tries to bump its epoch (KIP-360), which the coordinator refuses.
        assert wait_for(commit_says_fenced, timeout=10, interval=0.5)

        second.begin()  # the new instance carries on
        second.send(topic_name, 1, b"second-b")
        second.commit()
    finally:
        first.close()
        second.close()

    partitions = [(topic_name, 0), (topic_name, 1)]
    seen = values(consume(client, broker.bootstrap, partitions, committed=True, expected=2))
    assert seen == {(topic_name, 0): [b"second-a"], (topic_name, 1): [b"second-b"]}
    everything = values(consume(client, broker.bootstrap, partitions, committed=False, expected=4))
    assert everything == {
        (topic_name, 0): [b"first-a", b"second-a"],
        (topic_name, 1): [b"first-a", b"second-b"],
    }


@pytest.mark.parametrize("client", CLIENTS)
def test_timed_out_transaction_is_aborted_by_the_broker(
    broker: BrokerProcess, topic_name: str, client: str
) -> None:
    create_topics(broker.bootstrap, {topic_name: 2})
    tid = f"{topic_name}-txn"
    txn = txn_producer(client, broker.bootstrap, tid, timeout_ms=3000)
    plain = PlainProducer(client, broker.bootstrap)
    raw = Raw(broker.bootstrap)
    try:
        txn.init()
        txn.begin()
        for i in range(3):
            txn.send(topic_name, 0, f"silent-{i}".encode())
            txn.send(topic_name, 1, f"silent-{i}".encode())
        txn.flush()
        plain.send(topic_name, 0, b"after")
        plain.flush()
        state = raw.describe_transaction(tid)
        assert state.error_code == Errors.NONE and state.transaction_state == "Ongoing", state
        assert state.transaction_timeout_ms == 3000
        epoch = state.producer_epoch
        assert tid in raw.list_transactions(["Ongoing"])
        assert raw.end_offsets(topic_name, [0], committed=True) == {0: 0}
        reader = AssignedConsumer(
            client, broker.bootstrap, [(topic_name, 0), (topic_name, 1)], committed=True
        )
        try:
            assert reader.poll_for(0.5) == 0  # held at offset 0 by the silent transaction
            # The producer stays silent; the broker aborts at 3 s (its tick runs every 200 ms) and
            # the consumer moves past the aborted records to what follows them.
            reader.poll_until(1, idle_s=0.5, timeout=15)
            assert values(reader.seen) == {(topic_name, 0): [b"after"]}
        finally:
            reader.close()
        assert raw.end_offsets(topic_name, [0, 1], committed=True) == {0: 5, 1: 4}
        state = raw.describe_transaction(tid)
        assert state.transaction_state == "CompleteAbort" and state.producer_epoch == epoch + 1, state
        assert tid in raw.list_transactions(["CompleteAbort"]) and tid not in raw.list_transactions(
            ["Ongoing"]
        )

        with pytest.raises(Exception) as info:  # noqa: B017 - each library has its own class
            txn.commit()
        assert txn.is_fenced(info.value), repr(info.value)
    finally:
        txn.close()
        plain.close()
        raw.close()


def test_long_poll_wakes_when_a_timeout_abort_moves_the_lso(broker: BrokerProcess, topic_name: str) -> None:
    """A read_committed fetch parked behind an open transaction is answered as soon as the
    broker's timeout abort writes the marker, not at the end of the consumer's fetch wait."""
    create_topics(broker.bootstrap, {topic_name: 1})
    txn = txn_producer("confluent-kafka", broker.bootstrap, f"{topic_name}-txn", timeout_ms=2000)
    plain = PlainProducer("confluent-kafka", broker.bootstrap)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused-with-assign",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10_000,
        }
    )
    raw = Raw(broker.bootstrap)
    try:
        txn.init()
        txn.begin()
        txn.send(topic_name, 0, b"silent")
        txn.flush()
        plain.send(topic_name, 0, b"after")
        plain.flush()
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        moved_at = None
        deadline = time.monotonic() + 20
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.1)
            if moved_at is None and raw.end_offsets(topic_name, [0], committed=True) == {0: 3}:
                moved_at = time.monotonic()
        assert message is not None and message.error() is None and message.value() == b"after"
        assert moved_at is not None
        assert time.monotonic() - moved_at < 2.0, "the parked fetch waited for its fetch.wait.max.ms"
    finally:
        consumer.close()
        txn.close()
        plain.close()
        raw.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_compressed_transactions_recompressed_by_the_topic(
    broker: BrokerProcess, topic_name: str, client: str
) -> None:
    """The topic's compression.type makes the broker re-encode each batch: the transactional bit
    and producer fields must survive, or aborted records would show under read_committed."""
    create_topics(broker.bootstrap, {topic_name: 2}, {"compression.type": "gzip"})
    txn = txn_producer(client, broker.bootstrap, f"{topic_name}-txn", compression_type="lz4")
    try:
        txn.init()
        for r, commit in enumerate([True, False, True]):
            txn.begin()
            for i in range(20):
                txn.send(topic_name, i % 2, f"r{r}-{i}".encode() * 10)
            txn.flush()
            if commit:
                txn.commit()
            else:
                txn.abort()
    finally:
        txn.close()
    partitions = [(topic_name, 0), (topic_name, 1)]
    expected = {
        (topic_name, p): [f"r{r}-{i}".encode() * 10 for r in (0, 2) for i in range(20) if i % 2 == p]
        for p in range(2)
    }
    assert values(consume(client, broker.bootstrap, partitions, committed=True, expected=40)) == expected
    assert (
        len(
            values(consume(client, broker.bootstrap, partitions, committed=False, expected=60))[partitions[0]]
        )
        == 30
    )


def test_hanging_transaction_cleared_with_write_txn_markers(broker: BrokerProcess, topic_name: str) -> None:
    create_topics(broker.bootstrap, {topic_name: 2})
    tid = f"{topic_name}-hang"
    plain = PlainProducer("confluent-kafka", broker.bootstrap)
    for i in range(2):
        plain.send(topic_name, 0, f"before-{i}".encode())
    plain.flush()

    vanishing = Raw(broker.bootstrap)
    vanishing.init_producer_id(tid, 600_000)
    pid, epoch = vanishing.init_producer_id(tid, 600_000)  # epoch 1: an older one exists to refuse
    assert epoch == 1
    assert vanishing.add_partitions(tid, pid, epoch, {topic_name: [0]}) == {Errors.NONE}
    error, base = vanishing.produce(
        topic_name,
        0,
        [b"hang-0", b"hang-1"],
        pid=pid,
        epoch=epoch,
        seq=0,
        transactional=True,
        transactional_id=tid,
    )
    assert (error, base) == (Errors.NONE, 2)
    # Not in the transaction: refused (KIP-890 part 1), nothing written.
    assert (
        vanishing.produce(
            topic_name, 1, [b"stray"], pid=pid, epoch=epoch, seq=0, transactional=True, transactional_id=tid
        )[0]
        == Errors.INVALID_TXN_STATE
    )
    vanishing.close()  # gone, without EndTxn
    for i in range(3):
        plain.send(topic_name, 0, f"after-{i}".encode())
    plain.flush()

    raw = Raw(broker.bootstrap)
    try:
        listed = raw.list_transactions()
        assert listed[tid].transaction_state == "Ongoing" and listed[tid].producer_id == pid
        assert tid in raw.list_transactions(["Ongoing"], [pid])
        assert tid not in raw.list_transactions(["Ongoing"], [pid + 12345])
        assert tid in raw.list_transactions(["Ongoing"], duration_ms=0)
        assert tid not in raw.list_transactions(["Ongoing"], duration_ms=3_600_000)  # not that old
        state = raw.describe_transaction(tid)
        assert state.transaction_state == "Ongoing" and state.transaction_timeout_ms == 600_000
        assert state.transaction_start_time_ms > 0 and (state.producer_id, state.producer_epoch) == (
            pid,
            epoch,
        )
        assert [(t.topic, list(t.partitions)) for t in state.topics] == [(topic_name, [0])]
        (producer,) = [p for p in raw.describe_producers(topic_name, 0) if p.producer_id == pid]
        assert producer.current_txn_start_offset == 2 and producer.producer_epoch == epoch
        assert producer.last_sequence == 1
        assert raw.end_offsets(topic_name, [0], committed=True) == {0: 2}
        assert raw.end_offsets(topic_name, [0], committed=False) == {0: 7}

        reader = AssignedConsumer("confluent-kafka", broker.bootstrap, [(topic_name, 0)], committed=True)
        try:
            reader.poll_until(2, idle_s=1.5)
            assert values(reader.seen) == {(topic_name, 0): [b"before-0", b"before-1"]}

            # What an operator does: abort with the epoch DescribeProducers reports.
            stale = raw.write_txn_markers(pid, producer.producer_epoch - 1, False, {topic_name: [0]})
            assert stale == {(topic_name, 0): Errors.INVALID_PRODUCER_EPOCH}
            assert raw.end_offsets(topic_name, [0], committed=True) == {0: 2}
            done = raw.write_txn_markers(pid, producer.producer_epoch, False, {topic_name: [0]})
            assert done == {(topic_name, 0): Errors.NONE}
            assert (
                raw.end_offsets(topic_name, [0], committed=True)
                == raw.end_offsets(topic_name, [0], committed=False)
                == {0: 8}
            )
            (producer,) = [p for p in raw.describe_producers(topic_name, 0) if p.producer_id == pid]
            assert producer.current_txn_start_offset == -1

            reader.poll_until(5)
            after = [f"after-{i}".encode() for i in range(3)]
            assert values(reader.seen) == {(topic_name, 0): [b"before-0", b"before-1", *after]}
        finally:
            reader.close()
        unknown = raw.write_txn_markers(pid, epoch, False, {"no-such-topic": [0]})
        assert unknown == {("no-such-topic", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
        assert raw.describe_transaction("never-seen").error_code == Errors.TRANSACTIONAL_ID_NOT_FOUND
    finally:
        raw.close()
        plain.close()


def test_list_transactions_filters(broker: BrokerProcess, topic_name: str) -> None:
    create_topics(broker.bootstrap, {topic_name: 1})
    raw = Raw(broker.bootstrap)
    try:
        ids = [f"{topic_name}-{i}" for i in range(3)]
        pids = [raw.init_producer_id(tid, 60_000)[0] for tid in ids]
        assert raw.add_partitions(ids[1], pids[1], 0, {topic_name: [0]}) == {Errors.NONE}
        assert raw.end_txn(ids[1], pids[1], 0, True) == Errors.NONE
        assert raw.end_txn(ids[1], pids[1], 0, True) == Errors.NONE  # a retry
        # An abort now is of a next transaction that has nothing here: NONE (Kafka: INVALID_TXN_STATE).
        assert raw.end_txn(ids[1], pids[1], 0, False) == Errors.NONE
        assert raw.end_txn(ids[1], pids[1], 0, True) == Errors.NONE  # the commit's state stays
        listed = raw.list_transactions(producer_ids=pids)
        assert {t: s.transaction_state for t, s in listed.items()} == {
            ids[0]: "Empty",
            ids[1]: "CompleteCommit",
            ids[2]: "Empty",
        }
        response = raw.call(
            ListTransactionsRequest(state_filters=["Empty", "Bogus"], producer_id_filters=pids), 1
        )
        assert response.unknown_state_filters == ["Bogus"]
        assert {t.transactional_id for t in response.transaction_states} == {ids[0], ids[2]}
    finally:
        raw.close()


def test_transactions_api_errors_by_hand(broker: BrokerProcess, topic_name: str) -> None:
    create_topics(broker.bootstrap, {topic_name: 1})
    raw = Raw(broker.bootstrap)
    tid = f"{topic_name}-txn"
    try:
        pid, epoch = raw.init_producer_id(tid, 60_000)
        assert raw.add_partitions(tid, pid + 1, epoch, {topic_name: [0]}) == {
            Errors.INVALID_PRODUCER_ID_MAPPING
        }
        assert raw.add_partitions(tid, pid, epoch + 1, {topic_name: [0]}) == {Errors.PRODUCER_FENCED}
        assert raw.add_partitions(tid, pid, epoch, {"nope": [0], topic_name: [0]}) == {
            Errors.UNKNOWN_TOPIC_OR_PARTITION,
            Errors.OPERATION_NOT_ATTEMPTED,
        }
        assert raw.end_txn(tid, pid, epoch, True) == Errors.INVALID_TXN_STATE  # nothing begun
        # A transactional batch before AddPartitionsToTxn is refused.
        assert raw.produce(topic_name, 0, [b"x"], pid=pid, epoch=epoch, seq=0, transactional=True,
                           transactional_id=tid)[0] == Errors.INVALID_TXN_STATE
        assert raw.add_partitions(tid, pid, epoch, {topic_name: [0]}) == {Errors.NONE}
        assert (
            raw.produce(topic_name, 0, [b"x"], pid=pid, epoch=epoch, seq=0, transactional=True, transactional_id=tid)[0]
            == Errors.NONE
        )
        assert raw.end_txn(tid, pid, epoch, False) == Errors.NONE
        assert raw.end_offsets(topic_name, [0], committed=True) == {0: 2}
    finally:
        raw.close()


def test_kip_360_epoch_bump_by_hand(broker: BrokerProcess, topic_name: str) -> None:
    """InitProducerId with the producer's own id and epoch (v3+) bumps the epoch after an abort;
    the old epoch is fenced on the partitions, a stale one is PRODUCER_FENCED (v4) or
    INVALID_PRODUCER_EPOCH (v3, before KIP-588)."""
    create_topics(broker.bootstrap, {topic_name: 1})
    raw = Raw(broker.bootstrap)
    tid = f"{topic_name}-txn"
    try:
        pid, epoch = raw.init_producer_id(tid, 60_000)
        assert raw.add_partitions(tid, pid, epoch, {topic_name: [0]}) == {Errors.NONE}
        assert (
            raw.produce(topic_name, 0, [b"a"], pid=pid, epoch=epoch, seq=0, transactional=True, transactional_id=tid)[0]
            == Errors.NONE
        )
        assert raw.end_txn(tid, pid, epoch, False) == Errors.NONE

        def bump(expected_epoch: int, version: int) -> InitProducerIdResponse:
            request = InitProducerIdRequest(
                transactional_id=tid,
                transaction_timeout_ms=60_000,
                producer_id=pid,
                producer_epoch=expected_epoch,
            )
            return raw.call(request, version)

        bumped = bump(epoch, 4)
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (Errors.NONE, pid, epoch + 1)
        again = bump(epoch, 4)  # the same request retried: same answer, no second bump
        assert (again.error_code, again.producer_epoch) == (Errors.NONE, epoch + 1)
        assert bump(epoch + 5, 4).error_code == Errors.PRODUCER_FENCED
        assert bump(epoch + 5, 3).error_code == Errors.INVALID_PRODUCER_EPOCH

        assert raw.add_partitions(tid, pid, epoch + 1, {topic_name: [0]}) == {Errors.NONE}
        # The new epoch starts its sequence at 0; the old epoch can no longer write.
        assert raw.produce(topic_name, 0, [b"b"], pid=pid, epoch=epoch + 1, seq=0, transactional=True,
                           transactional_id=tid)[0] == (
            Errors.NONE
        )
        assert raw.produce(topic_name, 0, [b"c"], pid=pid, epoch=epoch, seq=1, transactional=True,
                           transactional_id=tid)[0] == (
            Errors.INVALID_PRODUCER_EPOCH
        )
        assert raw.end_txn(tid, pid, epoch, True) == Errors.PRODUCER_FENCED
        assert raw.end_txn(tid, pid, epoch + 1, True) == Errors.NONE
    finally:
        raw.close()
    seen = values(consume("confluent-kafka", broker.bootstrap, [(topic_name, 0)], committed=True, expected=1))
    assert seen == {(topic_name, 0): [b"b"]}
