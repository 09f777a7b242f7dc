"""The idempotent producer of verify-eos: every record it was acknowledged must be in the log once.

A confluent-kafka producer with ``enable.idempotence`` (acks=all) writes ``idem/<generation>/<n>``
to random partitions of its own topic at each workload step; the acknowledgements (and any
delivery error) go into the history. Kafka's promise for it is narrower than a transaction's but
as strict: no acknowledged record lost, none written twice, and a partition's records in send
order. A fatal error (which Kafka's idempotent producer raises only when the broker broke that
promise, e.g. OUT_OF_ORDER_SEQUENCE_NUMBER) is recorded as unexpected and a new producer takes over.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from .clients import retire
from .history import ClientError, History, idempotent_value

log = logging.getLogger(__name__)

PRODUCER = -1  # its ClientError.producer
MESSAGE_TIMEOUT_MS = 300_000


class IdempotentWriter:
    def __init__(self, bootstrap: str, topic: str, partitions: int, history: History, seed: int) -> None:
        self.bootstrap, self.topic, self.partitions, self.history = bootstrap, topic, partitions, history
        self.rng = random.Random(f"idempotent-{seed}")  # its own: the transactional workload's draws stay the seed's
        self.generation = 0
        self.number = 0
        self.producer: Any = None
        self.failed = False
        self._open()

    def _open(self) -> None:
        from confluent_kafka import Producer

        self.generation += 1
        self.failed = False
        self.producer = Producer({
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            "reconnect.backoff.max.ms": 500,
            "error_cb": self._on_error,
        })

    def _on_error(self, err: Any) -> None:
        """librdkafka's client-level errors: a fatal one (the producer is then unusable) is the
        broker breaking the idempotence contract; the others are transient and logged only."""
        if err.fatal():
            self._fatal(err)
        else:
            log.debug("idempotent producer: %s", err)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        value = msg.value().decode()
        if err is None:
            self.history.idempotent_acks[value] = (msg.topic(), msg.partition(), msg.offset())
            return
        self.history.errors.append(ClientError(PRODUCER, self.generation, "idempotent produce", err.name(), err.fatal(),
                                               False, value))
        if err.fatal():
            self.failed = True

    def write(self, most: int = 4) -> None:
        """A few records (how many, and where, drawn from its own generator)."""
        from confluent_kafka import KafkaException

        self._poll(0)  # callbacks first: a fatal error is reported before the next produce fails
        if self.failed:
            log.warning("the idempotent producer failed fatally: a new one takes over")
            self._open()
        for _ in range(self.rng.randint(1, most)):
            self.number += 1
            partition = self.rng.randrange(self.partitions)
            value = idempotent_value(self.generation, self.number)
            try:
                self._produce(partition, value)
            except KafkaException as exc:  # fatal: the next write reopens
                log.warning("idempotent producer: %s", exc)
                self._fatal(exc.args[0])
                break
            self.history.idempotent.append((self.topic, partition, value))
        self._poll(0)

    def _poll(self, timeout_s: float) -> None:
        """Serve callbacks; poll raises the producer's fatal error (once error_cb saw it, or not)."""
        from confluent_kafka import KafkaException

        try:
            self.producer.poll(timeout_s)
        except KafkaException as exc:
            self._fatal(exc.args[0])

    def _fatal(self, err: Any) -> None:
        if not self.failed:
            self.history.errors.append(ClientError(PRODUCER, self.generation, "idempotent producer", err.name(), True,
                                                   False, err.str()))
        self.failed = True

    def _produce(self, partition: int, value: str) -> None:
        try:
            self.producer.produce(self.topic, value=value.encode(), partition=partition, on_delivery=self._on_delivery)
        except BufferError:
            self._poll(1.0)
            self.producer.produce(self.topic, value=value.encode(), partition=partition, on_delivery=self._on_delivery)

    def finish(self, timeout_s: float) -> None:
        """Wait for every outstanding acknowledgement (bounded); what is left is reported."""
        from confluent_kafka import KafkaException

        try:
            left = self.producer.flush(timeout_s)
        except KafkaException as exc:
            self._fatal(exc.args[0])
            return
        if left:
            self.history.errors.append(ClientError(PRODUCER, self.generation, "idempotent flush", "TIMED_OUT", False,
                                                   False, f"{left} records unacknowledged after {timeout_s:.0f} s"))

    def close(self) -> None:
        retire(self.producer)  # not destroyed (see clients.retire)
        self.producer = None
