"""Issue #14: records of a committed transaction silently dropped after a producer epoch bump.

The scenario, with unmodified clients: instance 1 of a transactional id commits a record to P;
instance 2 (a bumped epoch) registers P, aborts before its record left the client (only the ABORT
marker reaches P), then commits a record to P with sequence 0 of its epoch. That record was
answered as a duplicate of instance 1's and never written. Then the same at the raw-protocol level
for every way a marker of a new epoch can precede that epoch's first batch, with restarts between
the steps.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest

from .broker_process import BrokerProcess
from .txn_helpers import CLIENTS, Raw, consume, create_topics, txn_producer, values

TIMEOUT_MS = 600_000  # no transaction of these tests may time out by accident on a slow machine


@pytest.fixture
def raw(broker: BrokerProcess) -> Iterator[Raw]:
    client = Raw(broker.bootstrap)
    yield client
    client.close()


def wait_for_log_end(raw: Raw, topic: str, at_least: int) -> int:
    """The log end of partition 0 once it reached ``at_least`` (markers are written by the broker
    while the client's abort returns, so this normally holds at once)."""
    deadline = time.monotonic() + 30
    while True:
        end = raw.end_offsets(topic, [0], committed=False)[0]
        if end >= at_least or time.monotonic() > deadline:
            return end
        time.sleep(0.05)


@pytest.mark.parametrize("client", CLIENTS)
def test_abort_with_only_the_registration_then_commit_loses_nothing(
    broker: BrokerProcess, raw: Raw, topic_name: str, client: str
) -> None:
    create_topics(broker.bootstrap, {topic_name: 1})
    tid = f"{topic_name}-tid"
    one = txn_producer(client, broker.bootstrap, tid, TIMEOUT_MS)
    one.init()
    one.begin()
    one.send(topic_name, 0, b"instance-1")
    one.flush()
    one.commit()
    one.close()
    assert raw.end_offsets(topic_name, [0], committed=False)[0] == 2  # record + COMMIT marker

    # aiokafka's abort_transaction waits for what the producer holds to be sent, so it cannot
    # drop a lingering record: it runs the plain bump (record + ABORT marker) instead.
    linger_ms = 2 if client == "aiokafka" else 60_000
    two: Any = txn_producer(client, broker.bootstrap, tid, TIMEOUT_MS, linger_ms=linger_ms)
    two.init()
    two.begin()
    two.send(topic_name, 0, b"never-sent")  # lingers in the client until the abort drops it
    registered = _wait_registered(raw, tid)
    try:
        two.abort()
    except Exception as exc:  # noqa: BLE001 - some clients report the dropped record here
        if two.is_fenced(exc):
            raise
    _forget_dropped(two)
    end = wait_for_log_end(raw, topic_name, 3)
    # Only the ABORT marker of the new epoch reached the partition; aiokafka's abort_transaction
    # first sends what it holds (record + marker), which is the plain bump, also checked here.
    assert end == 3 or (client == "aiokafka" and end == 4), end
    two.begin()
    two.send(topic_name, 0, b"instance-2")
    two.flush()
    two.commit()
    two.close()

    sent_aborted = [b"never-sent"] if end == 4 else []
    for committed in (True, False):
        expected = [b"instance-1", *([] if committed else sent_aborted), b"instance-2"]
        seen = consume(
            "confluent-kafka", broker.bootstrap, [(topic_name, 0)], committed=committed, expected=len(expected)
        )
        assert values(seen)[(topic_name, 0)] == expected, (client, committed, registered)
    assert registered, f"{client} never registered the partition before aborting"


def _forget_dropped(producer: Any) -> None:
    """The aborted record's failure report (purged / aborted) is expected: drop it."""
    if producer.client == "confluent-kafka":
        producer.producer.poll(0.5)
        producer.errors.clear()
    else:
        for future in producer.futures:
            if hasattr(future, "cancelled") and not future.done():
                future.cancel()
        producer.futures = []


def _wait_registered(raw: Raw, tid: str) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        state = raw.describe_transaction(tid)
        if state.transaction_state == "Ongoing" and state.topics:
            return True
        time.sleep(0.02)
    return False


# -- raw protocol ----------------------------------------------------------------------------------


def init_pid(raw: Raw, tid: str, expected: tuple[int, int] = (-1, -1)) -> tuple[int, int, int]:
    """InitProducerId v4 with an optional expected (producer id, epoch): (error, pid, epoch)."""
    request = InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=TIMEOUT_MS, producer_id=expected[0], producer_epoch=expected[1]
    )
    response = raw.call(request, 4)
    return response.error_code, response.producer_id, response.producer_epoch


def init_until_ready(raw: Raw, tid: str, expected: tuple[int, int] = (-1, -1)) -> tuple[int, int, int]:
    for _ in range(200):
        error, pid, epoch = init_pid(raw, tid, expected)
        if error != Errors.CONCURRENT_TRANSACTIONS:
            return error, pid, epoch
        time.sleep(0.02)
    raise AssertionError("InitProducerId stayed CONCURRENT_TRANSACTIONS")


def one_txn(raw: Raw, tid: str, pid: int, epoch: int, topic: str, seq: int, value: bytes, commit: bool) -> int:
    assert raw.add_partitions(tid, pid, epoch, {topic: [0]}) == {Errors.NONE}
    error, offset = raw.produce(
        topic, 0, [value], pid=pid, epoch=epoch, seq=seq, transactional=True, transactional_id=tid
    )
    assert error == Errors.NONE, Errors(error)
    # A retry is a duplicate of this very batch: same offset, nothing written.
    retry = raw.produce(topic, 0, [value], pid=pid, epoch=epoch, seq=seq, transactional=True, transactional_id=tid)
    assert retry == (Errors.NONE, offset)
    assert raw.end_txn(tid, pid, epoch, commit) == Errors.NONE
    return offset


@pytest.mark.parametrize("restart", ["none", "kill", "clean"])
@pytest.mark.parametrize("bump", ["init", "kip360-ongoing", "kip360-complete"])
@pytest.mark.parametrize("first_commit", [True, False], ids=["commit", "abort"])
def test_marker_before_the_first_batch_of_an_epoch(
    broker: BrokerProcess, topic_name: str, restart: str, bump: str, first_commit: bool
) -> None:
    create_topics(broker.bootstrap, {topic_name: 1})
    tid = f"{topic_name}-tid"
    raw = Raw(broker.bootstrap)

    def bounce() -> None:
        nonlocal raw
        if restart == "none":
            return
        raw.close()
        port = broker.port
        if restart == "kill":
            broker.kill()
            broker.start(port or 0)
        else:
            broker.restart()
        raw = Raw(broker.bootstrap)

    try:
        error, pid, epoch = init_pid(raw, tid)
        assert error == Errors.NONE
        first_offset = one_txn(raw, tid, pid, epoch, topic_name, 0, b"first", first_commit)
        bounce()
        if bump == "init":
            # A new instance: registers P, ends before any batch (the marker carries the new epoch).
            error, pid, new_epoch = init_until_ready(raw, tid)
            assert (error, new_epoch) == (Errors.NONE, epoch + 1)
            assert raw.add_partitions(tid, pid, new_epoch, {topic_name: [0]}) == {Errors.NONE}
            assert raw.end_txn(tid, pid, new_epoch, False) == Errors.NONE
        elif bump == "kip360-ongoing":
            # The same instance asks for a bump (KIP-360) while its transaction is open: the broker
            # aborts under a fencing epoch and never hands that epoch out.
            assert raw.add_partitions(tid, pid, epoch, {topic_name: [0]}) == {Errors.NONE}
            assert init_pid(raw, tid, (pid, epoch))[0] == Errors.CONCURRENT_TRANSACTIONS
            assert init_until_ready(raw, tid, (pid, epoch))[0] == Errors.PRODUCER_FENCED
            error, pid, new_epoch = init_until_ready(raw, tid)
            assert (error, new_epoch) == (Errors.NONE, epoch + 2)
        else:
            # A marker of the old epoch with no batch, then a KIP-360 bump (and its retry).
            assert raw.add_partitions(tid, pid, epoch, {topic_name: [0]}) == {Errors.NONE}
            assert raw.end_txn(tid, pid, epoch, False) == Errors.NONE
            error, pid, new_epoch = init_until_ready(raw, tid, (pid, epoch))
            assert (error, new_epoch) == (Errors.NONE, epoch + 1)
            assert init_pid(raw, tid, (pid, epoch)) == (Errors.NONE, pid, new_epoch)  # retried
        bounce()
        second_offset = one_txn(raw, tid, pid, new_epoch, topic_name, 0, b"second", True)
        assert second_offset > first_offset
    finally:
        raw.close()
    expected = [b"first", b"second"] if first_commit else [b"second"]
    seen = consume("confluent-kafka", broker.bootstrap, [(topic_name, 0)], committed=True, expected=len(expected))
    assert values(seen)[(topic_name, 0)] == expected
