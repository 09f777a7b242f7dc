"""A transaction whose AddPartitionsToTxn never reached the coordinator can still be aborted.

librdkafka counts an AddPartitionsToTxn that failed in any way (a cut connection, NOT_COORDINATOR
after the coordinator moved, CONCURRENT_TRANSACTIONS) as possibly registered, and so sends
EndTxn(abort) when the application aborts. The coordinator still holds the previous transaction's
state (CompleteCommit). Kafka answers INVALID_TXN_STATE there, which librdkafka treats as fatal: a
healthy producer died this way in the cluster fault test (seed 46, after a coordinator handover).
The broker answers NONE (nothing to abort) and the producer goes on, with nothing of the aborted
transaction visible.

The same file holds the other lost request of an abort: a Produce in flight when the abort begins,
whose connection then dies with its broker. librdkafka puts that batch back in its queue and does not
send it while aborting, so the abort call can only time out; the retried call purges it (the verify
workload aborts with a short, retried timeout for this reason). The broker, restarted, must then
abort the batch it wrote before it died.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .broker_process import BrokerProcess
from .fault_proxy import FaultProxy

ADD_PARTITIONS_TO_TXN = 24
RETRIED_ABORT_S = 2.0  # the abort's own timeout, retried (a short one, as the verify workload uses)
TIMEOUT_S = 60


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[FaultProxy, BrokerProcess]]:
    with FaultProxy() as proxy:
        broker = BrokerProcess(
            tmp_path / "data", tmp_path / "broker.log", ["--advertised-listener", f"127.0.0.1:{proxy.port}"]
        )
        broker.start()
        proxy.upstream_port = broker.port
        try:
            yield proxy, broker
        finally:
            if broker.alive():
                assert broker.stop() == 0, broker.log_text()[-4000:]


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def committed_values(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "auto.offset.reset": "earliest",
        "isolation.level": "read_committed", "enable.auto.commit": False,
    })
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        # Anything aborted would sit between the two commits: poll a little past the last one.
        for _ in range(4):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def _committed_first(proxy: FaultProxy, topic_name: str, config: dict[str, object]) -> Producer:
    """A one-partition topic and a transactional producer (``config`` added) that committed "first"."""
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(TIMEOUT_S)
    producer = Producer({
        "bootstrap.servers": proxy.bootstrap, "transactional.id": f"{topic_name}-tx", "linger.ms": 0, **config,
    })
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic_name, b"first")
    producer.commit_transaction(TIMEOUT_S)
    return producer


def test_abort_after_a_lost_add_partitions_is_not_fatal(proxied: tuple[FaultProxy, BrokerProcess], topic_name: str) -> None:
    proxy, broker = proxied
    producer = _committed_first(proxy, topic_name, {"retry.backoff.ms": 100})

    # Every AddPartitionsToTxn of the next transaction dies with its connection before the broker
    # sees it; the application gives up on the transaction and aborts.
    proxy.swallow_api = ADD_PARTITIONS_TO_TXN
    producer.begin_transaction()
    producer.produce(topic_name, b"aborted")
    wait_until(lambda: proxy.counters["swallowed"] >= 1, "the AddPartitionsToTxn to be swallowed")
    outcome: list[BaseException | None] = []
    aborting = threading.Thread(target=lambda: outcome.append(_abort(producer)), daemon=True)
    aborting.start()
    aborting.join(TIMEOUT_S + 10)
    proxy.swallow_api = None
    assert outcome, "abort_transaction did not return"
    assert outcome[0] is None, f"abort_transaction failed: {outcome[0]!r}\n{broker.log_text()[-3000:]}"

    producer.begin_transaction()
    producer.produce(topic_name, b"second")
    producer.commit_transaction(TIMEOUT_S)
    assert committed_values(proxy.bootstrap, topic_name) == [b"first", b"second"]


def _abort(producer: Producer, timeout_s: float = TIMEOUT_S) -> BaseException | None:
    try:
        producer.abort_transaction(timeout_s)
    except KafkaException as error:
        return error
    return None


def test_an_abort_whose_in_flight_produce_dies_with_the_broker_ends_on_a_retried_call(
    proxied: tuple[FaultProxy, BrokerProcess], topic_name: str
) -> None:
    proxy, broker = proxied
    producer = _committed_first(proxy, topic_name, {"reconnect.backoff.max.ms": 500})

    # The broker writes the next batch but its answer never comes back: the batch is in flight.
    producer.begin_transaction()
    proxy.withhold_produce_responses = True
    producer.produce(topic_name, b"aborted")
    producer.poll(0)
    wait_until(lambda: proxy.counters["withheld"] >= 1, "the broker to answer the Produce")
    outcome: list[BaseException | None] = []
    first_call = threading.Thread(
        target=lambda: outcome.append(_abort(producer, RETRIED_ABORT_S)), daemon=True)
    first_call.start()
    time.sleep(0.5)  # the abort has begun (it waits for the batch in flight); then the broker dies
    broker.kill()
    proxy.withhold_produce_responses = False
    broker.start(broker.port)
    first_call.join(TIMEOUT_S + 10)
    assert outcome, "abort_transaction did not return"
    # Whatever the first call said (librdkafka: a timeout, the batch re-queued and never sent while
    # aborting), a retried call with a short timeout ends the abort.
    attempts = 0
    while outcome[-1] is not None:
        error = outcome[-1].args[0]
        assert error.retriable() and not error.fatal(), f"abort failed for good: {error}\n{broker.log_text()[-3000:]}"
        attempts += 1
        assert attempts <= TIMEOUT_S / RETRIED_ABORT_S, f"the retried abort never ended: {error}"
        outcome.append(_abort(producer, RETRIED_ABORT_S))

    producer.begin_transaction()
    producer.produce(topic_name, b"second")
    producer.commit_transaction(TIMEOUT_S)
    # The batch the killed broker wrote is aborted by the restarted one: never visible.
    assert committed_values(proxy.bootstrap, topic_name) == [b"first", b"second"]
