"""The transactional producers verify-eos drives: confluent-kafka or kafka-python, one shape.

The workload asks the same few things of either client (init, begin, send with an
acknowledgement, commit, abort) and needs the same facts about a failure (Kafka's error name, and
whether it is fatal, retriable or abortable), so that its decisions and the history it records do
not depend on which client ran.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

CLIENTS = ("confluent-kafka", "kafka-python")
CLOSE_TIMEOUT_S = 5.0  # kafka-python: a closing producer's unsent records get this long


class ClientFailure(Exception):
    """A client call or a delivery failed, as the workload judges it; ``client_bug`` names a
    known bug of the client that explains it (the broker is then not to blame)."""

    def __init__(
        self, name: str, *, fatal: bool = False, retriable: bool = False, abortable: bool = False,
        client_bug: str = "",
    ) -> None:
        super().__init__(name)
        self.name, self.fatal, self.retriable, self.abortable = name, fatal, retriable, abortable
        self.client_bug = client_bug


# kafka-python 3.0 (Sender._maybe_send_pending_request): when the coordinator's connection fails
# between the readiness check and the send, the request is neither sent nor queued again, so the
# call waiting for it never returns. Real Kafka triggers it the same way; see FINDINGS.rst.
KAFKA_PYTHON_DROPPED_REQUEST = "kafka-python dropped a transactional request whose send failed on a cut connection"


class TxnClient(Protocol):
    acks: dict[str, tuple[str, int, int]]  # value -> (topic, partition, offset) as acknowledged
    delivery_errors: list[ClientFailure]

    def init(self, timeout_s: float) -> None: ...

    def begin(self) -> None: ...

    def send(self, topic: str, partition: int, value: str) -> None: ...

    def flush(self, timeout_s: float) -> None: ...

    def commit(self, timeout_s: float) -> None: ...

    def abort(self, timeout_s: float) -> None: ...

    def close(self) -> None: ...


def open_client(name: str, config: dict[str, Any]) -> TxnClient:
    """``config``: bootstrap, transactional_id, transaction_timeout_ms, linger_ms."""
    if name == "confluent-kafka":
        return ConfluentClient(**config)
    if name == "kafka-python":
        return KafkaPythonClient(**config)
    raise ValueError(f"unknown client {name!r}: one of {', '.join(CLIENTS)}")


# librdkafka handles dropped by the workload (fenced zombies, replaced instances): kept, never
# destroyed. Destroying a fenced transactional producer has corrupted the heap of the verify-eos
# process ("double free or corruption", "unaligned tcache chunk", SIGABRT; issue #41), so they stay
# alive, idle, until the command ends with os._exit (``retired_exit``) and no destructor runs.
_RETIRED: list[Any] = []


def retire(handle: Any) -> None:
    """Drop a client handle without destroying it (see ``_RETIRED``)."""
    if handle is not None:
        _RETIRED.append(handle)


def retired_exit(code: int) -> None:
    """End the process without running the retired handles' destructors (output flushed first)."""
    import logging
    import os
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


@dataclass
class _Settings:
    """What both clients are opened with, and what they collect from deliveries."""

    bootstrap: str
    transactional_id: str
    transaction_timeout_ms: int
    linger_ms: int
    acks: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    delivery_errors: list[ClientFailure] = field(default_factory=list)


@dataclass
class ConfluentClient(_Settings):
    def __post_init__(self) -> None:
        from confluent_kafka import Producer

        self.producer: Any = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": self.transaction_timeout_ms,
                "linger.ms": self.linger_ms,
                "message.timeout.ms": 300_000,
                "reconnect.backoff.max.ms": 500,
            }
        )

    @staticmethod
    def _failure(error: Any) -> ClientFailure:
        return ClientFailure(error.name(), fatal=error.fatal(), retriable=error.retriable(),
                             abortable=error.txn_requires_abort())

    def _call(self, method: str, *args: Any) -> None:
        from confluent_kafka import KafkaException

        try:
            getattr(self.producer, method)(*args)
        except KafkaException as exc:
            raise self._failure(exc.args[0]) from exc

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.delivery_errors.append(self._failure(err))
        else:
            self.acks[msg.value().decode()] = (msg.topic(), msg.partition(), msg.offset())

    def init(self, timeout_s: float) -> None:
        self._call("init_transactions", timeout_s)

    def begin(self) -> None:
        self._call("begin_transaction")

    def send(self, topic: str, partition: int, value: str) -> None:
        self.producer.produce(topic, value=value.encode(), partition=partition, on_delivery=self._on_delivery)
        self.producer.poll(0)

    def flush(self, timeout_s: float) -> None:
        self.producer.flush(timeout_s)

    def commit(self, timeout_s: float) -> None:
        self._call("commit_transaction", timeout_s)

    def abort(self, timeout_s: float) -> None:
        self._call("abort_transaction", timeout_s)

    def close(self) -> None:
        retire(self.producer)
        self.producer = None


@dataclass
class KafkaPythonClient(_Settings):
    """kafka-python's transactional producer; its errors are classified by the state its
    transaction manager is left in (fatal or abortable), as its own API does."""

    def __post_init__(self) -> None:
        from kafka import KafkaProducer

        self.producer: Any = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            linger_ms=self.linger_ms,
            delivery_timeout_ms=300_000,
            request_timeout_ms=30_000,
            reconnect_backoff_max_ms=500,
        )

    def _failure(self, exc: BaseException) -> ClientFailure:
        manager = getattr(self.producer, "_transaction_manager", None)
        cause = exc
        if manager is not None and manager.has_error() and getattr(manager, "_last_error", None) is not None:
            cause = manager._last_error  # "in an error state": the error that put it there
        name = getattr(cause, "message", None) or type(cause).__name__
        return ClientFailure(
            str(name),
            fatal=manager is not None and manager.has_fatal_error(),
            retriable=bool(getattr(exc, "retriable", False)),
            abortable=manager is not None and manager.has_abortable_error(),
        )

    def _call(self, method: str, timeout_s: float | None = None) -> None:
        """kafka-python's transactional calls take no timeout: each runs on a thread of its own,
        and one that has not returned in ``timeout_s`` (twice the workload's call timeout) is a
        fatal TIMED_OUT failure, reported rather than waited for forever."""
        from kafka.errors import KafkaError

        outcome: list[BaseException | None] = []

        def call() -> None:
            try:
                getattr(self.producer, method)()
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                outcome.append(exc)

        worker = threading.Thread(target=call, name=f"kafka-python-{method}", daemon=True)
        worker.start()
        worker.join(None if timeout_s is None else 2 * timeout_s)
        if not outcome:
            raise ClientFailure(f"TIMED_OUT ({method} did not return in {2 * (timeout_s or 0):.0f} s)", fatal=True,
                                client_bug=KAFKA_PYTHON_DROPPED_REQUEST if self._dropped_a_request() else "")
        error = outcome[0]
        if isinstance(error, (KafkaError, AssertionError)):  # a state error is an AssertionError in some versions
            raise self._failure(error) from error
        if error is not None:
            raise error

    def _dropped_a_request(self) -> bool:
        """A call is waiting, yet nothing can complete it: no request in flight, and either
        partitions still waiting to be added with no AddPartitionsToTxn queued (their batches,
        and the EndTxn queued behind them, wait forever) or nothing queued at all."""
        manager = getattr(self.producer, "_transaction_manager", None)
        if manager is None or manager.has_error() or manager.has_in_flight_transactional_request():
            return False
        # Read without its lock: a stuck thread may hold it, and this is a diagnosis, not a decision
        # that must be exact (the call has been waiting for twice its timeout already).
        queued = [type(handler).__name__ for _, _, handler in list(manager._pending_requests)]
        if manager._pending_partitions_in_transaction and "AddPartitionsToTxnHandler" not in queued:
            return True
        return not queued

    def init(self, timeout_s: float) -> None:
        self._call("init_transactions", timeout_s)

    def begin(self) -> None:
        self._call("begin_transaction")

    def send(self, topic: str, partition: int, value: str) -> None:
        from kafka.errors import KafkaError

        try:
            future = self.producer.send(topic, value=value.encode(), partition=partition)
        except KafkaError as exc:
            self.delivery_errors.append(self._failure(exc))
            return
        future.add_callback(self._acked, value)
        future.add_errback(lambda exc: self.delivery_errors.append(self._failure(exc)))

    def flush(self, timeout_s: float) -> None:
        from kafka.errors import KafkaError

        try:
            self.producer.flush(timeout=timeout_s)
        except KafkaError as exc:
            self.delivery_errors.append(self._failure(exc))

    def _acked(self, value: str, metadata: Any) -> None:
        self.acks[value] = (metadata.topic, metadata.partition, metadata.offset)

    def commit(self, timeout_s: float) -> None:
        self._call("commit_transaction", timeout_s)

    def abort(self, timeout_s: float) -> None:
        self._call("abort_transaction", timeout_s)

    def close(self) -> None:
        from kafka.errors import KafkaError

        producer, self.producer = self.producer, None
        if producer is None:
            return
        try:
            producer.close(timeout=CLOSE_TIMEOUT_S)
        except KafkaError:
            # close() raises when its flush times out, before it stops the sender (and __del__
            # would try again): stop it here, as close() itself does after a join times out.
            producer._sender.force_close()
            producer._closed = True
