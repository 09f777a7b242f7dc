"""The consume-transform-produce stage of verify-eos: exactly one output per committed input.

A consumer group reads the workload's first topic (read_committed, no auto-commit); each cycle
writes ``T:<input>`` to the output topic and the consumed offsets in one transaction
(send_offsets_to_transaction). The stage is killed mid-cycle at random (its records and offsets
left in an open transaction) and restarted: the new instance's init fences the old one, and the
group resumes from the last committed offsets. At the end it drains the input.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .clients import retire

log = logging.getLogger(__name__)

PREFIX = "T:"
CALL_TIMEOUT_S = 60.0
ABORT_CALL_TIMEOUT_S = 5.0  # retried: see the workload's ABORT_CALL_TIMEOUT_S
HUNG_GRACE_S = 15.0  # a call still running this long after its own timeout is hung (a client bug)


class Hung(Exception):
    """A client call outlived its own timeout (librdkafka#5511-like; compat_tests/FINDINGS.rst)."""


def output_of(value: str) -> str:
    return PREFIX + value


def _close_quietly(consumer: Any) -> None:
    try:
        consumer.close()
    except Exception:  # noqa: BLE001 - a consumer of a dead broker may fail to close
        log.debug("closing an abandoned consumer failed", exc_info=True)


class TransformStage:
    def __init__(self, bootstrap: str, source: str, sink: str, name: str, retry_s: float = 300.0) -> None:
        """``retry_s``: how long a call is retried while it fails with retriable errors."""
        self.bootstrap, self.source, self.sink, self.name = bootstrap, source, sink, name
        self.retry_s = retry_s
        self.longest_cycle_s = 0.0  # liveness: the longest transaction of the stage, begin to commit or failure
        self.longest_cycle_at = 0.0  # time.monotonic() when it began
        self.hung = 0  # calls that outlived their timeout: the stage was then restarted, as a supervisor would
        self._stuck: list[threading.Thread] = []  # their threads, blocked in the client library
        self._leaked: list[Any] = []  # consumers of hung stages
        self.consumer: Any = None
        self.producer: Any = None
        self.restarts = 0
        self.cycles = 0
        self.at_end: set[tuple[str, int]] = set()  # partitions this consumer has read to their end

    def _open(self) -> None:
        from confluent_kafka import Consumer, Producer

        self.consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"{self.name}-group",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "metadata.recovery.strategy": "none",  # librdkafka#5511, as the producer below
            }
        )
        self.consumer.subscribe([self.source])
        self.producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": f"{self.name}-tx",
                "transaction.timeout.ms": 600_000,
                "linger.ms": 5,
                # librdkafka#5511: send_offsets_to_transaction can hang after a re-bootstrap
                # (compat_tests/FINDINGS.rst); a single-address bootstrap loses nothing without it.
                "metadata.recovery.strategy": "none",
            }
        )
        self._retrying(lambda: self.producer.init_transactions(CALL_TIMEOUT_S), "init_transactions")

    def _bounded(self, call: Any, what: str = "a transactional call") -> None:
        """``call`` on a thread of its own; :class:`Hung` when it outlives its timeout (it is left
        blocked in the client, its handle abandoned, as a watchdog killing the process would)."""
        outcome: list[BaseException | None] = []

        def run() -> None:
            try:
                call()
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                outcome.append(exc)

        worker = threading.Thread(target=run, name="verify-eos-transform-call", daemon=True)
        worker.start()
        worker.join(CALL_TIMEOUT_S + HUNG_GRACE_S)
        if not outcome:
            self._stuck.append(worker)
            raise Hung(f"{what} of the transform stage did not return in {CALL_TIMEOUT_S + HUNG_GRACE_S:.0f} s")
        if outcome[0] is not None:
            raise outcome[0]

    def _retrying(self, call: Any, what: str = "a transactional call") -> None:
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + self.retry_s
        while True:
            try:
                self._bounded(call, what)
                return
            except KafkaException as exc:
                error = exc.args[0]
                if not error.fatal() and error.retriable() and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                raise

    def cycle(self, *, die_midway: bool = False, max_records: int = 50, poll_s: float = 1.0) -> tuple[int, bool]:
        """One transaction's worth: (records transformed, whether the input looked drained)."""
        from confluent_kafka import KafkaError

        if self.producer is None:
            self._open()
        records: list[Any] = []
        at_end = self.at_end
        deadline = time.monotonic() + poll_s
        while len(records) < max_records and time.monotonic() < deadline:
            for message in self.consumer.consume(max_records - len(records), 0.2):
                error = message.error()
                if error is None:
                    records.append(message)
                    at_end.discard((message.topic(), message.partition()))
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add((message.topic(), message.partition()))
            assigned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
            if not records and assigned and assigned <= at_end:
                return 0, True
        drained = False
        if not records:
            return 0, drained
        began = time.monotonic()
        try:
            return self._transact(records, die_midway)
        finally:
            if time.monotonic() - began > self.longest_cycle_s:
                self.longest_cycle_s, self.longest_cycle_at = time.monotonic() - began, began

    def _transact(self, records: list[Any], die_midway: bool) -> tuple[int, bool]:
        """Write ``records``' outputs and the consumed offsets in one transaction."""
        from confluent_kafka import KafkaException

        try:
            self.producer.begin_transaction()
            for message in records:
                self.producer.produce(self.sink, output_of(message.value().decode()).encode())
            if die_midway:
                self._abandon()
                return 0, False
            positions = self.consumer.position(self.consumer.assignment())
            self._retrying(
                lambda: self.producer.send_offsets_to_transaction(
                    positions, self.consumer.consumer_group_metadata(), CALL_TIMEOUT_S
                ), "send_offsets_to_transaction")
            self._retrying(lambda: self.producer.commit_transaction(CALL_TIMEOUT_S), "commit_transaction")
        except KafkaException as exc:
            error = exc.args[0]
            log.info("transform stage: %s; restarting it", error)
            if error.txn_requires_abort() and not error.fatal():
                try:
                    self._retrying(lambda: self.producer.abort_transaction(ABORT_CALL_TIMEOUT_S), "abort_transaction")
                except KafkaException:
                    pass
            self._abandon()
            return 0, False
        except Hung as exc:
            log.warning("transform stage: %s; restarting it", exc)
            self.hung += 1
            self._abandon(close_consumer=False)
            return 0, False
        self.cycles += 1
        return len(records), False

    def _abandon(self, close_consumer: bool = True) -> None:
        """Die as a killed process would: no commit, no abort, no consumer leave-group handshake."""
        self.restarts += 1
        retire(self.producer)  # fenced by the next stage: not destroyed (see clients.retire)
        consumer, self.consumer, self.producer = self.consumer, None, None
        self.at_end = set()
        if not close_consumer:
            # Closed on a thread of its own (it may block on what the hung call waits for): left
            # open, its heartbeats would keep it in the group, and the group's next rebalance would
            # wait for it for max.poll.interval.ms.
            self._leaked.append(consumer)
            closing = threading.Thread(target=_close_quietly, args=(consumer,), name="verify-eos-transform-close",
                                       daemon=True)
            self._stuck.append(closing)
            closing.start()
            return
        try:
            consumer.close()  # its uncommitted position is lost: the group resumes from committed offsets
        except Exception:  # noqa: BLE001 - a consumer of a dead broker may fail to close
            pass

    def drain(self, until: dict[int, int] | None = None, timeout_s: float = 300.0) -> bool:
        """Transform until the input is exhausted: a cycle found every partition at its end, and
        the consumer is past ``until`` (partition -> offset after the last committed input). A
        commit's markers may land after the producer's commit returned (as with Kafka), so an
        end reached before them is not the end."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done, drained = self.cycle(poll_s=3.0)
            if drained and done == 0 and self._past(until or {}):
                return True
        log.warning("the transform stage did not drain its input in %.0f s", timeout_s)
        return False  # the transform check reports the inputs left without an output

    def _past(self, until: dict[int, int]) -> bool:
        from confluent_kafka import TopicPartition

        if not until:
            return True
        partitions = [TopicPartition(self.source, p) for p in until]
        offsets = {tp.partition: tp.offset for tp in self.consumer.position(partitions)}
        unset = [TopicPartition(self.source, p) for p, offset in offsets.items() if offset < 0]
        if unset:
            # A consumer that has read nothing since its assignment (a restarted stage whose group
            # had already committed the whole input) has no position: it stands at the group's
            # committed offset. Without this the drain waited out its whole timeout (300 s).
            offsets.update({tp.partition: tp.offset for tp in self.consumer.committed(unset, CALL_TIMEOUT_S)})
        return all(offsets[p] >= after for p, after in until.items())

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
        retire(self.producer)
        self.consumer = self.producer = None
