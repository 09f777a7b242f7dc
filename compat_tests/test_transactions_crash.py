"""Transactions across broker crashes: all of a transaction or nothing, never a part.

The broker is stopped hard at exact steps of the two-phase commit with ``KPROTO_FAULT`` (after
PrepareCommit/PrepareAbort is logged, after the first of three markers, after every marker but
before CompleteCommit/CompleteAbort is logged), then restarted without it on the same data
directory and port: recovery must finish what the coordinator decided. A transaction the broker
never got to end (SIGKILL while it was open) stays invisible and is aborted by its timeout after
the restart; and a SIGKILL while several transactional producers write leaves no partial
transaction visible to read_committed consumers.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from rivven_kproto.broker.faults import EXIT_CODE, FAULT_ENV

from .broker_process import BrokerProcess
from .txn_helpers import TIMEOUT_S, ConfluentTxn, Raw, consume, create_topics, values, wait_for

TOPIC = "txn-crash"
PARTITIONS = 3
PER_PARTITION = 4


MARKED_BEFORE_CRASH = {
    "txn-after-prepare": [0, 0, 0],
    "txn-after-marker-1": [1, 0, 0],  # markers go out in partition order
    "txn-before-complete": [1, 1, 1],
}


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", tmp_path / "broker.log")
    yield process
    process.kill()


def confluent(bootstrap: str, transactional_id: str, timeout_ms: int = 60_000) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": timeout_ms,
            "linger.ms": 2,
        }
    )


def write_batch(producer: Producer, tag: str) -> dict[tuple[str, int], list[bytes]]:
    sent: dict[tuple[str, int], list[bytes]] = {}
    for p in range(PARTITIONS):
        sent[(TOPIC, p)] = [f"{tag}-{p}-{i}".encode() for i in range(PER_PARTITION)]
        for value in sent[(TOPIC, p)]:
            producer.produce(TOPIC, value=value, partition=p)
    assert producer.flush(TIMEOUT_S) == 0  # every record is in the log before the end is asked for
    return sent


def end_offsets(broker: BrokerProcess, *, committed: bool) -> dict[int, int]:
    raw = Raw(broker.bootstrap)
    try:
        return raw.end_offsets(TOPIC, range(PARTITIONS), committed=committed)
    finally:
        raw.close()


def describe(broker: BrokerProcess, transactional_id: str) -> object:
    raw = Raw(broker.bootstrap)
    try:
        return raw.describe_transaction(transactional_id)
    finally:
        raw.close()


def read_committed(broker: BrokerProcess, expected: int) -> dict[tuple[str, int], list[bytes | None]]:
    partitions = [(TOPIC, p) for p in range(PARTITIONS)]
    return values(consume("confluent-kafka", broker.bootstrap, partitions, committed=True, expected=expected))


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("point", ["txn-after-prepare", "txn-after-marker-1", "txn-before-complete"])
def test_crash_during_end_txn_is_finished_by_recovery(
    own_broker: BrokerProcess, point: str, commit: bool
) -> None:
    own_broker.env = {FAULT_ENV: point}
    own_broker.start()
    port = own_broker.port
    create_topics(own_broker.bootstrap, {TOPIC: PARTITIONS})
    tid = f"crash-{point}"
    producer = confluent(own_broker.bootstrap, tid)
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    sent = write_batch(producer, "first")
    end = producer.commit_transaction if commit else producer.abort_transaction
    with pytest.raises(KafkaException):  # the broker dies before it can answer
        end(3)
    assert own_broker.wait(15) == EXIT_CODE, own_broker.log_text()[-3000:]
    assert f"fault point {point} reached" in own_broker.log_text()

    own_broker.env = {}
    own_broker.start(port or 0)
    state = describe(own_broker, tid)
    assert state.transaction_state == ("CompleteCommit" if commit else "CompleteAbort"), state
    # Every partition has its marker, nothing is held back by an open transaction. Recovery
    # rewrites every marker of the transaction (it cannot know which were written), so the
    # partitions marked before the crash have a second, harmless one, as in Kafka.
    hw = end_offsets(own_broker, committed=False)
    assert end_offsets(own_broker, committed=True) == hw
    assert hw == {p: PER_PARTITION + 1 + MARKED_BEFORE_CRASH[point][p] for p in range(PARTITIONS)}
    # The old producer retries its call: answered as done, by the completed transaction.
    end(TIMEOUT_S)

    expected = sent if commit else {}
    assert read_committed(own_broker, sum(map(len, expected.values()))) == expected

    del producer  # a new instance with the same id takes over and commits
    successor = ConfluentTxn(own_broker.bootstrap, tid)
    successor.init()
    successor.begin()
    successor.send(TOPIC, 1, b"next")
    successor.commit()
    successor.close()
    expected = {tp: list(v) for tp, v in expected.items()}
    expected.setdefault((TOPIC, 1), []).append(b"next")
    assert read_committed(own_broker, sum(map(len, expected.values()))) == expected
    assert describe(own_broker, tid).producer_epoch == 1


def test_transaction_open_at_sigkill_is_aborted_by_its_timeout(own_broker: BrokerProcess) -> None:
    own_broker.start()
    port = own_broker.port
    create_topics(own_broker.bootstrap, {TOPIC: PARTITIONS})
    plain = Producer({"bootstrap.servers": own_broker.bootstrap})
    for p in range(PARTITIONS):
        plain.produce(TOPIC, value=b"before", partition=p)
    assert plain.flush(TIMEOUT_S) == 0
    tid = "open-at-kill"
    producer = confluent(own_broker.bootstrap, tid, timeout_ms=4000)
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    write_batch(producer, "open")
    started = time.monotonic()
    own_broker.kill()
    del producer  # the client is gone too: nobody will end this transaction

    own_broker.start(port or 0)
    held = end_offsets(own_broker, committed=True)
    if time.monotonic() - started < 3.0:  # (the timeout may already have struck on a slow machine)
        assert held == dict.fromkeys(range(PARTITIONS), 1), "the open transaction must hold the LSO"
        assert describe(own_broker, tid).transaction_state == "Ongoing"
        raw = Raw(own_broker.bootstrap)
        try:  # the partitions' producer state (rebuilt after the crash) knows where it started
            for p in range(PARTITIONS):
                starts = [s.current_txn_start_offset for s in raw.describe_producers(TOPIC, p)]
                assert 1 in starts, (p, starts)
        finally:
            raw.close()
    assert wait_for(
        lambda: end_offsets(own_broker, committed=True) == end_offsets(own_broker, committed=False),
        timeout=15,
    ), "the timeout did not abort the transaction after the restart"
    state = describe(own_broker, tid)
    assert state.transaction_state == "CompleteAbort" and state.producer_epoch == 1, state
    assert end_offsets(own_broker, committed=False) == dict.fromkeys(range(PARTITIONS), 1 + PER_PARTITION + 1)
    assert read_committed(own_broker, PARTITIONS) == {(TOPIC, p): [b"before"] for p in range(PARTITIONS)}


PRODUCERS = 3
TXN_SIZE = 5  # records per partition per transaction


def test_sigkill_while_transactional_producers_write(own_broker: BrokerProcess) -> None:
    own_broker.start()
    port = own_broker.port
    create_topics(own_broker.bootstrap, {TOPIC: PARTITIONS})
    committed: list[tuple[int, int]] = []  # (producer, transaction) whose commit returned
    lock = threading.Lock()
    stop = threading.Event()
    producers = [confluent(own_broker.bootstrap, f"writer-{n}", timeout_ms=4000) for n in range(PRODUCERS)]
    for producer in producers:
        producer.init_transactions(TIMEOUT_S)

    def write(n: int) -> None:
        producer = producers[n]
        for t in range(10_000):
            if stop.is_set():
                return
            try:
                producer.begin_transaction()
                for p in range(PARTITIONS):  # one partition after the other: a kill can split them
                    for i in range(TXN_SIZE):
                        producer.produce(TOPIC, value=f"w{n}-t{t}-p{p}-{i}".encode(), partition=p)
                    if producer.flush(3):
                        return  # not delivered: the broker is gone
                producer.commit_transaction(3)
            except KafkaException:
                return  # the broker is gone
            with lock:
                committed.append((n, t))

    threads = [threading.Thread(target=write, args=(n,), daemon=True) for n in range(PRODUCERS)]
    for thread in threads:
        thread.start()
    assert wait_for(lambda: len(committed) >= 3 * PRODUCERS, timeout=TIMEOUT_S, interval=0.02)
    time.sleep(0.15)  # into the middle of the next transactions
    own_broker.kill()
    stop.set()
    for thread in threads:
        thread.join(15)
        assert not thread.is_alive()
    acknowledged = set(committed)
    producers.clear()  # destroy the clients: nobody will end their open transactions

    own_broker.start(port or 0)
    # Open transactions are aborted by their timeout (some may hold no record yet, so the offsets
    # alone do not show them); prepared ones were completed at start-up.
    raw = Raw(own_broker.bootstrap)
    try:

        def settled() -> bool:
            stable = raw.end_offsets(TOPIC, range(PARTITIONS), committed=True)
            open_txns = raw.list_transactions(["Ongoing", "PrepareCommit", "PrepareAbort"])
            return not open_txns and stable == raw.end_offsets(TOPIC, range(PARTITIONS), committed=False)

        assert wait_for(settled, timeout=20)
    finally:
        raw.close()
    stored = read_committed(own_broker, len(acknowledged) * TXN_SIZE * PARTITIONS)
    counts: dict[tuple[int, int], dict[int, int]] = defaultdict(lambda: dict.fromkeys(range(PARTITIONS), 0))
    for (_, p), records in stored.items():
        for value in records:
            assert value is not None
            writer, txn, _, _ = value.decode().split("-")
            counts[(int(writer[1:]), int(txn[1:]))][p] += 1
    partial = {key: c for key, c in counts.items() if set(c.values()) != {TXN_SIZE}}
    assert not partial, f"partially visible transactions: {partial}"
    missing = acknowledged - set(counts)
    assert not missing, f"acknowledged commits lost: {sorted(missing)}"
    for (_, p), records in stored.items():
        # Within a partition each writer's transactions appear whole and in order.
        for n in range(PRODUCERS):
            mine = [v for v in records if v is not None and v.startswith(f"w{n}-".encode())]
            txns = [int(v.decode().split("-")[1][1:]) for v in mine]
            assert txns == sorted(txns), (p, n)
