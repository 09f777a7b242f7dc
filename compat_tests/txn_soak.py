"""A randomized transactional soak with faults: every record of every committed transaction must
be readable, no aborted record may be, and no client may die of an error Kafka would not cause.

Several transactional ids, each driven by successive confluent-kafka producer instances (a restart
bumps the epoch; some instances linger long, so an abort drops records that never left the client
and only the ABORT marker of the new epoch reaches a partition — issue #14). Between and inside
transactions the broker is killed with SIGKILL and restarted on the same port and data directory.

Short in the test suite (``compat_tests/test_txn_soak.py``); long on demand::

    python -m compat_tests.txn_soak --transactions 5000 --seed 7
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .broker_process import BrokerProcess

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 60.0
TXN_TIMEOUT_MS = 600_000  # the soak aborts what it wants itself; nothing may time out by accident


class ClientFatal(AssertionError):
    """A client died of an error that Kafka would not cause (not fencing of a zombie we made)."""


@dataclass
class SoakPlan:
    transactions: int = 60
    transactional_ids: int = 3
    partitions: int = 3
    records_per_txn: tuple[int, int] = (1, 6)
    p_abort: float = 0.3
    p_restart_producer: float = 0.08
    p_kill_broker_between: float = 0.03
    p_kill_broker_inside: float = 0.02
    seed: int = 0


@dataclass
class SoakResult:
    committed: set[bytes] = field(default_factory=set)
    aborted: set[bytes] = field(default_factory=set)
    transactions_committed: int = 0
    transactions_aborted: int = 0
    producer_restarts: int = 0
    broker_kills: int = 0
    retries: int = 0
    lost_registrations: int = 0  # fatal INVALID_TXN_STATE after a kill ate AddPartitionsToTxn (as Kafka)


class _Instance:
    """One producer instance of a transactional id."""

    def __init__(self, bootstrap: str, tid: str, generation: int, linger_ms: int) -> None:
        self.tid, self.generation = tid, generation
        self.delivery_errors: list[KafkaError] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": tid,
                "transaction.timeout.ms": TXN_TIMEOUT_MS,
                "linger.ms": linger_ms,
                "message.timeout.ms": 300_000,
                "socket.timeout.ms": 30_000,
                "reconnect.backoff.max.ms": 500,
            }
        )

    def on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            self.delivery_errors.append(err)


def _retrying(result: SoakResult, what: str, call: Callable[[], None], deadline_s: float = 300.0) -> None:
    """Run a transactional call, retrying what librdkafka marks retriable; anything else raises."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            call()
            return
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if not error.fatal() and error.retriable() and time.monotonic() < deadline:
                result.retries += 1
                time.sleep(0.1)
                continue
            raise


def _lost_registration(error: KafkaError, killed_inside: bool) -> bool:
    """Kafka's own answer, fatal to librdkafka: the broker died before it processed the
    transaction's AddPartitionsToTxn, so EndTxn finds the transactional id Empty (Kafka 3.x
    TransactionCoordinator: Empty accepts neither commit nor abort, INVALID_TXN_STATE)."""
    return killed_inside and error.fatal() and error.code() == KafkaError.INVALID_TXN_STATE


def run(plan: SoakPlan, broker: BrokerProcess, topic: str) -> SoakResult:
    """Drive the workload against ``broker`` (restarted in place on kills) and return what happened."""
    rng = random.Random(plan.seed)
    result = SoakResult()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, plan.partitions, 1)]).values():
        future.result(CALL_TIMEOUT_S)
    generations = dict.fromkeys(range(plan.transactional_ids), 0)
    instances: dict[int, _Instance] = {}

    def kill_broker() -> None:
        log.info("killing the broker")
        port = broker.port
        broker.kill()
        broker.start(port or 0)
        result.broker_kills += 1

    def instance(index: int) -> _Instance:
        if index not in instances:
            generations[index] += 1
            linger = rng.choice([5, 5, 60_000])
            made = _Instance(broker.bootstrap, f"{topic}-tid-{index}", generations[index], linger)
            log.info("new instance %s/%d, linger.ms=%d", made.tid, made.generation, linger)
            try:
                _retrying(result, "init_transactions", lambda: made.producer.init_transactions(CALL_TIMEOUT_S))
            except KafkaException as exc:
                raise ClientFatal(f"init_transactions of {made.tid}: {exc.args[0]}") from exc
            instances[index] = made
        return instances[index]

    for number in range(plan.transactions):
        index = rng.randrange(plan.transactional_ids)
        if index in instances and rng.random() < plan.p_restart_producer:
            instances.pop(index).producer = None  # the next instance fences it
            result.producer_restarts += 1
        if rng.random() < plan.p_kill_broker_between:
            kill_broker()
        current = instance(index)
        producer = current.producer
        producer.begin_transaction()
        values = [
            f"{current.tid}:{current.generation}:{number}:{i}".encode()
            for i in range(rng.randint(*plan.records_per_txn))
        ]
        for value in values:
            producer.produce(topic, value=value, partition=rng.randrange(plan.partitions), on_delivery=current.on_delivery)
            producer.poll(0)
        killed_inside = rng.random() < plan.p_kill_broker_inside
        if killed_inside:
            kill_broker()
        commit = rng.random() >= plan.p_abort
        log.info("transaction %d of %s/%d: %d records, %s", number, current.tid, current.generation, len(values),
                 "commit" if commit else "abort")
        try:
            if commit:
                _retrying(result, "commit_transaction", partial(producer.commit_transaction, CALL_TIMEOUT_S))
            else:
                _retrying(result, "abort_transaction", partial(producer.abort_transaction, CALL_TIMEOUT_S))
        except KafkaException as exc:
            error = exc.args[0]
            if _lost_registration(error, killed_inside):
                log.info("transaction %d: %s; a new instance takes over", number, error)
                result.lost_registrations += 1
                instances.pop(index).producer = None
                commit = False
            elif error.txn_requires_abort():
                log.info("transaction %d must abort: %s", number, error)
                try:
                    _retrying(result, "abort_transaction", partial(producer.abort_transaction, CALL_TIMEOUT_S))
                except KafkaException as again:
                    raise ClientFatal(f"transaction {number}: abort failed: {again.args[0]}") from again
                commit = False
            else:
                raise ClientFatal(f"transaction {number}: {error}") from exc
        if index in instances:
            producer.poll(0)
        if commit:
            fatal = [e for e in current.delivery_errors if e.fatal()]
            if fatal:
                raise ClientFatal(f"transaction {number}: delivery failed fatally: {fatal[0]}")
            result.committed.update(values)
            result.transactions_committed += 1
        else:
            result.aborted.update(values)
            result.transactions_aborted += 1
        current.delivery_errors.clear()
    for made in instances.values():
        made.producer = None
    return result


def read_all(bootstrap: str, topic: str, partitions: int, *, committed: bool) -> list[bytes]:
    """Every record of the topic up to the end (the last stable offset under read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "soak-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    found: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise AssertionError(f"reading {topic} did not reach the end of {partitions - len(at_end)} partitions")
            for msg in consumer.consume(1000, 0.5):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                        continue
                    raise AssertionError(f"consumer error: {error}")
                at_end.discard(msg.partition())
                value = msg.value()
                assert value is not None
                found.append(value)
    finally:
        consumer.close()
    return found


def check(result: SoakResult, bootstrap: str, topic: str, partitions: int) -> None:
    """Every committed record readable exactly once under read_committed and readable under
    read_uncommitted; no aborted record under read_committed."""
    committed_reads = read_all(bootstrap, topic, partitions, committed=True)
    seen = set(committed_reads)
    assert len(seen) == len(committed_reads), "a record was read twice under read_committed"
    missing = result.committed - seen
    assert not missing, f"{len(missing)} records of committed transactions are lost, e.g. {sorted(missing)[:5]}"
    leaked = seen & result.aborted
    assert not leaked, f"{len(leaked)} aborted records visible to read_committed, e.g. {sorted(leaked)[:5]}"
    assert seen == result.committed
    uncommitted = set(read_all(bootstrap, topic, partitions, committed=False))
    assert result.committed <= uncommitted, "committed records missing from read_uncommitted"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transactions", type=int, default=2000)
    parser.add_argument("--transactional-ids", type=int, default=4)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    plan = SoakPlan(transactions=args.transactions, transactional_ids=args.transactional_ids, seed=args.seed)
    with tempfile.TemporaryDirectory() as base:
        broker = BrokerProcess(Path(base) / "data", Path(base) / "broker.log").start()
        try:
            started = time.monotonic()
            result = run(plan, broker, "soak")
            check(result, broker.bootstrap, "soak", plan.partitions)
        finally:
            broker.kill()
    sys.stderr.write(
        f"seed {plan.seed}: {result.transactions_committed} committed, {result.transactions_aborted} aborted "
        f"transactions, {len(result.committed)} committed records all readable; "
        f"{result.producer_restarts} producer restarts, {result.broker_kills} broker kills, "
        f"{result.retries} retried calls, {result.lost_registrations} registrations lost in a kill, "
        f"{time.monotonic() - started:.0f} s\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
