"""The verify-eos workload: transactional producers, zombies and read_committed consumers under faults.

Producers are confluent-kafka (or kafka-python) instances driven one transaction at a time from this
thread (the order of the run is then the seed's); consumers poll throughout on their own threads. Faults come
from :mod:`.faults` when the caller supplied the means. Everything the clients were told goes into
the :class:`~.history.History` that :mod:`.checker` judges.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from .clients import ClientFailure, TxnClient, open_client
from .faults import BrokerCommand, CuttingProxy
from .history import (
    ABORTED,
    COMMITTED,
    UNKNOWN,
    ZOMBIE,
    ClientError,
    Commit,
    History,
    Read,
    Transaction,
    value_of,
)
from .idempotent import IdempotentWriter
from .nemesis import COUNTERS, Nemesis
from .transform import TransformStage
from .zombie import Outcome, ZombieProcess

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 60.0
# librdkafka's abort purges its queue, then waits for in-flight batches; one whose connection dies
# after the abort began goes back to the queue, which is not sent while aborting, so that call can
# only time out (compat_tests/test_txn_abort_in_flight.py). A retried call purges it: a short
# timeout, retried, is how an application keeps such an abort from taking its whole timeout.
ABORT_CALL_TIMEOUT_S = 5.0
INIT_ATTEMPTS = 3  # new instances tried when a client bug loses init_transactions
TXN_TIMEOUT_MS = 600_000  # the workload ends transactions itself; none may time out by accident
READY_MARGIN_S = 60.0  # a zombie's start-up beyond its init's retries (process, import, one record)


@dataclass
class Plan:
    producers: int = 3
    topics: int = 2
    partitions: int = 3
    transactions: int = 200
    duration_s: float | None = None  # stop after this long even if transactions remain
    records_per_txn: tuple[int, int] = (1, 6)
    p_abort: float = 0.3
    p_restart: float = 0.06  # a producer abandoned mid-transaction; the next instance fences it
    p_zombie: float = 0.5  # of those, kept to try committing after it was fenced
    p_kill: float = 0.03  # broker SIGKILL + restart (with a broker command)
    p_pause: float = 0.02  # broker SIGSTOP for a moment (with a broker command)
    p_cut: float = 0.03  # every connection through the proxy dropped (with a proxy)
    seed: int = 0
    topic_prefix: str = "verify-eos"
    transform: bool = True  # a consume-transform-produce stage on the first topic
    p_transform_die: float = 0.15  # the stage killed mid-cycle (restarted by the next cycle)
    client: str = "confluent-kafka"  # the transactional producers' library (see .clients)
    idempotent: bool = False  # an idempotent producer (acks=all) writes its own topic at every step
    retry_s: float = 300.0  # how long a call failing with retriable errors is retried


@dataclass
class Means:
    bootstrap: str
    broker: BrokerCommand | None = None
    proxy: CuttingProxy | None = None
    nemesis: Nemesis | None = None  # a cluster's faults (then broker and proxy are not used)


class _Instance:
    """One incarnation of a transactional id: the n-th client opened for producer ``producer``."""

    def __init__(self, library: str, bootstrap: str, tid: str, producer: int, generation: int, linger_ms: int) -> None:
        self.producer_index, self.generation = producer, generation
        self.faults_seen = 0  # the run's fault count when this client last finished a transaction
        self.client: TxnClient = open_client(library, {
            "bootstrap": bootstrap, "transactional_id": tid, "transaction_timeout_ms": TXN_TIMEOUT_MS,
            "linger_ms": linger_ms,
        })


class _Poller(threading.Thread):
    """A read_committed consumer that polls until stopped, in assign or subscribe mode."""

    def __init__(self, bootstrap: str, topics: dict[str, int], mode: str, history: History, lock: threading.Lock) -> None:
        super().__init__(name=f"verify-eos-{mode}", daemon=True)
        self.bootstrap, self.topics, self.mode = bootstrap, topics, mode
        self.history, self.lock = history, lock
        self.stop = threading.Event()
        self.session = 0
        self.failure: BaseException | None = None

    def run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "on_commit": self._committed,
            }
        )
        try:
            if self.mode == "assign":
                consumer.assign([TopicPartition(t, p, 0) for t, n in self.topics.items() for p in range(n)])
            else:
                consumer.subscribe(list(self.topics), on_assign=self._assigned)
            while not self.stop.is_set():
                for msg in consumer.consume(500, 0.2):
                    if msg.error() is not None:
                        continue  # broker gone for a moment: librdkafka reports and recovers
                    read = _read(f"{self.mode}#{self.session}", msg, time.monotonic())
                    with self.lock:
                        self.history.polls.append(read)
        except BaseException as exc:  # noqa: BLE001 - reported by the workload
            self.failure = exc
        finally:
            consumer.close()

    @property
    def group(self) -> str:
        return f"{next(iter(self.topics))}-{self.mode}"

    def _committed(self, error: Any, partitions: Any) -> None:
        """An acknowledged commit: the group's position may not go back past it (position jumps)."""
        if error is not None:
            return
        at = time.monotonic()
        with self.lock:
            for tp in partitions:
                if tp.error is None and tp.offset >= 0:
                    self.history.commits.append(Commit(self.mode, tp.topic, tp.partition, tp.offset, at))

    def _assigned(self, _consumer: Any, _partitions: Any) -> None:
        self.session += 1  # a rebalance restarts from committed offsets: a new monotonic sequence


def run(plan: Plan, means: Means, progress: Callable[[str], None] | None = None) -> History:
    """Drive the workload and return its history (final reads included)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    rng = random.Random(plan.seed)
    history = History(seed=plan.seed, bootstrap=means.bootstrap, client=plan.client, started_at=time.monotonic())
    history.faults = {"broker_kills": 0, "broker_pauses": 0, "connection_cuts": 0, "producer_restarts": 0}
    if means.nemesis is not None:
        means.nemesis.attach(history)
    run_id = f"{plan.seed:x}-{int(time.time() * 1000) % 10**8:x}"
    history.topics = {f"{plan.topic_prefix}-{run_id}-{t}": plan.partitions for t in range(plan.topics)}
    admin = AdminClient({"bootstrap.servers": means.bootstrap})
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in history.topics.items()]).values():
        future.result(CALL_TIMEOUT_S)
    targets = [(t, p) for t, n in history.topics.items() for p in range(n)]
    writer: IdempotentWriter | None = None
    if plan.idempotent:
        idem_topic = f"{plan.topic_prefix}-{run_id}-idem"
        admin.create_topics([NewTopic(idem_topic, plan.partitions, 1)])[idem_topic].result(CALL_TIMEOUT_S)
        history.topics[idem_topic] = plan.partitions  # read by the pollers and the final reads too
        writer = IdempotentWriter(means.bootstrap, idem_topic, plan.partitions, history, plan.seed)
    stage: TransformStage | None = None
    if plan.transform:
        source = next(iter(history.topics))
        sink = f"{plan.topic_prefix}-{run_id}-transformed"
        admin.create_topics([NewTopic(sink, plan.partitions, 1)])[sink].result(CALL_TIMEOUT_S)
        history.transform = {"source": source, "sink": sink, "partitions": plan.partitions}
        stage = TransformStage(means.bootstrap, source, sink, f"{plan.topic_prefix}-{run_id}-transform", plan.retry_s)
    lock = threading.Lock()
    pollers = [_Poller(means.bootstrap, history.topics, mode, history, lock) for mode in ("assign", "subscribe")]
    for poller in pollers:
        poller.start()
    if means.nemesis is not None:
        means.nemesis.targets.topics = list(history.topics)
        means.nemesis.targets.groups = [poller.group for poller in pollers] + (
            [f"{plan.topic_prefix}-{run_id}-transform-group"] if stage is not None else [])
        means.nemesis.targets.transactional_ids = [f"{plan.topic_prefix}-{run_id}-tid-{i}" for i in range(plan.producers)]

    generations = dict.fromkeys(range(plan.producers), 0)
    instances: dict[int, _Instance] = {}
    zombies: list[tuple[ZombieProcess, Transaction]] = []

    def error_entry(inst: _Instance, call: str, error: ClientFailure, expected: bool, detail: str = "") -> None:
        history.errors.append(
            ClientError(inst.producer_index, inst.generation, call, error.name, error.fatal, expected, detail)
        )

    def retrying(inst: _Instance, call: str, fn: Callable[[], None]) -> None:
        deadline = time.monotonic() + plan.retry_s
        while True:
            try:
                fn()
                return
            except ClientFailure as error:
                if not error.fatal and error.retriable and time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                raise

    def instance(index: int) -> _Instance:
        for attempt in range(INIT_ATTEMPTS):
            if index in instances:
                break
            generations[index] += 1
            made = _Instance(
                plan.client, means.bootstrap, f"{plan.topic_prefix}-{run_id}-tid-{index}", index, generations[index],
                rng.choice([5, 5, 60_000]),
            )
            try:
                retrying(made, "init_transactions", partial(made.client.init, CALL_TIMEOUT_S))
            except ClientFailure as error:
                if not error.client_bug or attempt == INIT_ATTEMPTS - 1:
                    raise
                # A known client bug (a request dropped on a cut connection): a new instance.
                error_entry(made, "init_transactions", error, True, error.client_bug)
                made.client.close()
                continue
            made.faults_seen = broker_faults(history)
            instances[index] = made
        return instances[index]

    def fault(kind: str) -> None:
        """One fault, when the means for it were given; counted in the history (``broker_faults``)."""
        if kind == "kill" and means.broker is not None:
            means.broker.restart()
            history.faults["broker_kills"] += 1
        elif kind == "pause" and means.broker is not None:
            means.broker.pause(rng.uniform(0.2, 1.5))
            history.faults["broker_pauses"] += 1
        elif kind == "cut" and means.proxy is not None:
            means.proxy.cut()
            history.faults["connection_cuts"] += 1

    def maybe_faults() -> None:
        if means.nemesis is not None:
            means.nemesis.step()
            return
        for kind, p in (("kill", plan.p_kill), ("pause", plan.p_pause), ("cut", plan.p_cut)):
            if rng.random() < p:
                fault(kind)

    started = time.monotonic()
    for number in range(plan.transactions):
        if plan.duration_s is not None and time.monotonic() - started > plan.duration_s and not (
                means.nemesis is not None and means.nemesis.owes_forced()):
            break  # (a fault forced by --every-fault still to come keeps the run going until it came)
        if progress is not None and number % 50 == 0:
            progress(f"transaction {number}/{plan.transactions}")
        maybe_faults()
        if writer is not None:
            writer.write()
        began_at = time.monotonic()
        index = rng.randrange(plan.producers)
        current = instance(index)
        client = current.client
        txn = Transaction(f"{index}/{current.generation}/{number}", index, current.generation, began_at=began_at)
        history.transactions[txn.key] = txn
        client.begin()
        for i in range(rng.randint(*plan.records_per_txn)):
            topic, partition = rng.choice(targets)
            value = value_of(index, current.generation, number, i)
            txn.values.append((topic, partition, value))
            client.send(topic, partition, value)
        maybe_faults()
        if rng.random() < plan.p_restart:
            # Abandoned mid-transaction: the next instance's init fences it and aborts its work.
            instances.pop(index)
            txn.outcome = ABORTED
            history.faults["producer_restarts"] += 1
            current.client.close()
            if rng.random() < plan.p_zombie:
                # The zombie: a next instance, in a process of its own (see .zombie), opens a
                # transaction (fencing this one) that the instance after it fences in turn.
                generations[index] += 1
                tid = f"{plan.topic_prefix}-{run_id}-tid-{index}"
                started_zombie = _start_zombie(plan.client, means.bootstrap, tid, index, generations[index], txn,
                                               targets, rng, history, lock, plan.retry_s)
                if started_zombie is not None:
                    zombies.append(started_zombie)
            instance(index)
            continue
        commit = rng.random() >= plan.p_abort
        txn.committing_at = time.monotonic()
        try:
            if commit:
                retrying(current, "commit", partial(client.commit, CALL_TIMEOUT_S))
            else:
                retrying(current, "abort", partial(client.abort, ABORT_CALL_TIMEOUT_S))
            txn.outcome = COMMITTED if commit else ABORTED
            txn.ended_at = time.monotonic()
        except ClientFailure as error:
            if error.fatal:
                # Kafka's own answer to a commit when a fault ate AddPartitionsToTxn (the client
                # counts it as sent; a fault since its last transaction may have cut the connection
                # it went out on): EndTxn finds the previous transaction's state (INVALID_TXN_STATE),
                # fatal to the client; this transaction never existed. An abort in that state is
                # answered NONE by our broker (nothing to abort), so it is never expected there.
                after_fault = broker_faults(history) > current.faults_seen
                lost = after_fault and commit and error.name == "INVALID_TXN_STATE"
                client_bug = after_fault and bool(error.client_bug)
                detail = "after a fault" if lost else error.client_bug if client_bug else ""
                error_entry(current, "commit" if commit else "abort", error, lost or client_bug, detail)
                txn.outcome = ABORTED if lost else UNKNOWN
                instances.pop(index).client.close()
            elif error.abortable:
                error_entry(current, "commit", error, True, "abortable")
                try:
                    retrying(current, "abort", partial(client.abort, ABORT_CALL_TIMEOUT_S))
                    txn.outcome = ABORTED
                except ClientFailure as again:
                    error_entry(current, "abort", again, bool(again.client_bug), again.client_bug)
                    instances.pop(index).client.close()
            else:
                error_entry(current, "commit" if commit else "abort", error, False)
                instances.pop(index).client.close()
        current.faults_seen = broker_faults(history)
        with lock:
            history.acks.update(client.acks)
        client.acks.clear()
        for err in client.delivery_errors:
            if txn.outcome == COMMITTED and err.fatal:
                error_entry(current, "produce", err, False)
        client.delivery_errors.clear()
        if zombies and rng.random() < 0.5:
            _zombie_attempt(*zombies.pop(0), targets, rng, history, lock)
        if stage is not None and rng.random() < 0.5:
            stage.cycle(die_midway=rng.random() < plan.p_transform_die, poll_s=0.5)

    if means.nemesis is not None:
        if progress is not None:
            progress("healing the cluster")
        means.nemesis.heal()
    if writer is not None:
        writer.finish(CALL_TIMEOUT_S * 2)
        writer.close()
    for zombie, txn in zombies:
        _zombie_attempt(zombie, txn, targets, rng, history, lock)
    for index in range(plan.producers):
        # An id whose client was dropped after a fatal error may have left a transaction open
        # (it would hold back read_committed readers until its timeout): a new instance's init
        # aborts it, as a restarted application's would.
        instance(index)
    for inst in instances.values():
        inst.client.close()
    for poller in pollers:
        poller.stop.set()
    for poller in pollers:
        poller.join(60)
        if poller.failure is not None:
            raise poller.failure
    if stage is not None:
        if progress is not None:
            progress("draining the transform stage")
        stage.drain(_after_committed(history, stage.source))
        history.faults["transform_restarts"] = stage.restarts
        history.faults["transform_hung_calls"] = stage.hung
        history.transform_stall = (round(stage.longest_cycle_s, 3), round(stage.longest_cycle_at - history.started_at, 3))
        stage.close()
    if progress is not None:
        progress("final reads")
    history.final_committed = read_all(means.bootstrap, history.topics, committed=True)
    history.final_uncommitted = read_all(means.bootstrap, history.topics, committed=False)
    if stage is not None:
        history.transform_output = read_all(means.bootstrap, {stage.sink: plan.partitions}, committed=True)
    return history


def broker_faults(history: History) -> int:
    """Faults so far that can cut a client's connections or fail its requests (kills, pauses, cuts,
    and a cluster's database faults)."""
    return sum(history.faults.get(kind, 0) for kind in {"broker_kills", "broker_pauses", "connection_cuts",
                                                         *COUNTERS.values()})


def _after_committed(history: History, topic: str) -> dict[int, int]:
    """Per partition of ``topic``, the offset after its last acknowledged committed record."""
    after: dict[int, int] = {}
    for txn in history.transactions.values():
        if txn.outcome != COMMITTED:
            continue
        for written_to, _, value in txn.values:
            if written_to == topic and value in history.acks:
                _, partition, offset = history.acks[value]
                if offset is not None:
                    after[partition] = max(after.get(partition, 0), offset + 1)
    return after


def _start_zombie(library: str, bootstrap: str, tid: str, index: int, generation: int, abandoned: Transaction,
                  targets: list[tuple[str, int]], rng: random.Random, history: History,
                  lock: threading.Lock, retry_s: float) -> tuple[ZombieProcess, Transaction] | None:
    """A child process opens instance ``generation`` of ``tid`` and a transaction with one record
    written; None when it could not (what happened is recorded)."""
    key = f"{abandoned.key}/zombie"
    txn = Transaction(key, index, generation, outcome=ZOMBIE)
    history.transactions[key] = txn
    topic, partition = rng.choice(targets)
    txn.values.append((topic, partition, f"{key}/0"))
    zombie = ZombieProcess({
        "library": library, "bootstrap": bootstrap, "transactional_id": tid, "transaction_timeout_ms": TXN_TIMEOUT_MS,
        "linger_ms": 5, "first": [topic, partition, f"{key}/0"], "retry_s": retry_s,
    })
    ready = zombie.wait_ready(retry_s + READY_MARGIN_S)
    if ready.result == "ready":
        with lock:
            history.acks.update(ready.acks)
        return zombie, txn
    _record_zombie(txn, zombie.stop(), "zombie start", history, lock)
    return None


def _zombie_attempt(zombie: ZombieProcess, txn: Transaction, targets: list[tuple[str, int]], rng: random.Random,
                    history: History, lock: threading.Lock) -> None:
    """The fenced instance writes more and tries to commit: Kafka must refuse (fenced)."""
    topic, partition = rng.choice(targets)
    value = f"{txn.key}/1"
    txn.values.append((topic, partition, value))
    _record_zombie(txn, zombie.attempt(topic, partition, value), "zombie commit", history, lock)


def _record_zombie(txn: Transaction, outcome: Outcome, call: str, history: History, lock: threading.Lock) -> None:
    """The zombie's outcome into the history: a commit that returned OK is the broker's anomaly
    (``zombie_write``); a refusal is what Kafka gives; a crash of the client is the client's."""
    with lock:
        history.acks.update(outcome.acks)
    if outcome.result == "committed":
        txn.zombie_commit_ok = True
    elif outcome.result == "hung":
        history.errors.append(ClientError(txn.producer, txn.generation, call, "TIMED_OUT", True, True,
                                          f"the zombie's process gave no answer ({outcome.error})"))
    elif outcome.result != "crashed":
        # Fenced (or a timeout talking to a coordinator that refuses it) is what Kafka gives to the
        # fenced instance; before it was fenced it is any instance, which has no reason to fail.
        history.errors.append(ClientError(txn.producer, txn.generation, call, outcome.error, outcome.fatal,
                                          call != "zombie start"))
    if outcome.crash:
        history.errors.append(ClientError(txn.producer, txn.generation, call, "CLIENT_CRASH", True, True, outcome.crash))
        history.client_crashes.append(f"producer {txn.producer}/{txn.generation} ({call}): {outcome.crash}")
        log.warning("zombie %s: %s", txn.key, outcome.crash)


def _read(consumer: str, msg: Any, at: float = 0.0) -> Read:
    return Read(consumer, msg.topic(), msg.partition(), msg.offset(), msg.value().decode(), at)


def read_all(bootstrap: str, topics: dict[str, int], *, committed: bool) -> list[Read]:
    """Every record of ``topics`` up to the end (the last stable offset under read_committed)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    name = "final-committed" if committed else "final-uncommitted"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": name,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    partitions = [(t, p) for t, n in topics.items() for p in range(n)]
    consumer.assign([TopicPartition(t, p, 0) for t, p in partitions])
    found: list[Read] = []
    at_end: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 300
    try:
        while len(at_end) < len(partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: {len(partitions) - len(at_end)} partitions never reached their end")
            for msg in consumer.consume(1000, 0.5):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add((msg.topic() or "", msg.partition() or 0))
                    continue
                read = _read(name, msg)
                at_end.discard((read.topic, read.partition))
                found.append(read)
    finally:
        consumer.close()
    return found
