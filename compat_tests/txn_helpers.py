"""Shared pieces of the transaction compatibility tests.

One small adapter per client library (confluent-kafka, kafka-python, aiokafka) for a
transactional producer, a plain producer and an assign-only consumer, so the same scenario runs
against each library's own implementation of the protocol; and ``Raw``, our codec over a socket,
for the admin APIs the libraries do not expose (ListOffsets by isolation level,
DescribeTransactions, ListTransactions, DescribeProducers, WriteTxnMarkers) and for a client that
misbehaves on purpose.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import aiokafka
import aiokafka.errors
import kafka
import kafka.errors
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from rivven_kproto.codec.messages.describe_producers import DescribeProducersRequest, TopicRequest
from rivven_kproto.codec.messages.describe_transactions import DescribeTransactionsRequest
from rivven_kproto.codec.messages.end_txn import EndTxnRequest
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest
from rivven_kproto.codec.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from rivven_kproto.codec.messages.list_transactions import ListTransactionsRequest
from rivven_kproto.codec.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from rivven_kproto.codec.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from rivven_kproto.codec.records.records import Record, build_batch

from . import raw_client

TIMEOUT_S = 30
CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka"]

TP = tuple[str, int]
T = TypeVar("T")


def create_topics(bootstrap: str, topics: dict[str, int], config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, count, 1, config=config or {}) for name, count in topics.items()]
    )
    for future in futures.values():
        future.result(TIMEOUT_S)


def bounded(fn: Callable[[], T], timeout: float = TIMEOUT_S) -> T:
    """Run a blocking client call that has no timeout of its own; TimeoutError if it hangs."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"{fn} did not return within {timeout}s")
    if "error" in box:
        raise box["error"]
    return box["result"]


# -- transactional and plain producers -------------------------------------------------------------


class TxnProducer:
    """init/begin/send/flush/commit/abort/close over one library's transactional producer."""

    client = ""

    def init(self) -> None:
        raise NotImplementedError

    def begin(self) -> None:
        raise NotImplementedError

    def send(self, topic: str, partition: int, value: bytes) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    @staticmethod
    def is_fenced(exc: BaseException) -> bool:
        raise NotImplementedError


class ConfluentTxn(TxnProducer):
    client = "confluent-kafka"

    def __init__(
        self, bootstrap: str, transactional_id: str, timeout_ms: int = 60_000, **config: Any
    ) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": transactional_id,
                "transaction.timeout.ms": timeout_ms,
                "linger.ms": config.pop("linger_ms", 2),
                **config,
            }
        )
        self.errors: list[KafkaError] = []

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)

    def init(self) -> None:
        self.producer.init_transactions(TIMEOUT_S)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, partition: int, value: bytes) -> None:
        self.producer.produce(topic, value=value, partition=partition, on_delivery=self._delivered)
        self.producer.poll(0)

    def flush(self) -> None:
        try:
            left = self.producer.flush(TIMEOUT_S)
        except SystemError as exc:
            # confluent-kafka raises a fatal error from inside the delivery callback it is running,
            # and Python reports that as SystemError caused by the real KafkaException.
            if isinstance(exc.__cause__, KafkaException):
                raise exc.__cause__ from None
            if self.errors:  # sometimes without the cause ("returned NULL without setting an
                raise KafkaException(self.errors[0]) from exc  # exception"): the delivery error is it
            raise
        if self.errors:
            raise KafkaException(self.errors[0])
        assert left == 0, f"{left} messages not delivered"

    def commit(self) -> None:
        self.producer.commit_transaction(TIMEOUT_S)

    def abort(self) -> None:
        self.producer.abort_transaction(TIMEOUT_S)

    def close(self) -> None:
        try:
            self.producer.flush(0)
        except (KafkaException, SystemError):
            pass  # a fenced or failed producer reports its fatal error again
        self.producer = None  # destroyed now, not at interpreter exit after the broker is gone

    @staticmethod
    def is_fenced(exc: BaseException) -> bool:
        if not isinstance(exc, KafkaException):
            return False
        # A delivery report carries the broker's code without librdkafka's fatal flag (the flag
        # is on the producer's later calls); either way the code alone says the instance is fenced.
        error = exc.args[0]
        return error.code() in (
            KafkaError._FENCED,
            KafkaError.PRODUCER_FENCED,
            KafkaError.INVALID_PRODUCER_EPOCH,
        )


class KafkaPythonTxn(TxnProducer):
    client = "kafka-python"

    def __init__(
        self, bootstrap: str, transactional_id: str, timeout_ms: int = 60_000, **config: Any
    ) -> None:
        self.producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id=transactional_id,
            transaction_timeout_ms=timeout_ms,
            linger_ms=config.pop("linger_ms", 2),
            max_block_ms=TIMEOUT_S * 1000,
            **config,
        )
        self.futures: list[Any] = []

    def init(self) -> None:
        bounded(self.producer.init_transactions)

    def begin(self) -> None:
        self.producer.begin_transaction()

    def send(self, topic: str, partition: int, value: bytes) -> None:
        self.futures.append(self.producer.send(topic, value=value, partition=partition))

    def flush(self) -> None:
        self.producer.flush(TIMEOUT_S)
        futures, self.futures = self.futures, []
        for future in futures:
            future.get(TIMEOUT_S)

    def commit(self) -> None:
        bounded(self.producer.commit_transaction)

    def abort(self) -> None:
        bounded(self.producer.abort_transaction)

    def close(self) -> None:
        self.producer.close(timeout=2)

    @staticmethod
    def is_fenced(exc: BaseException) -> bool:
        if isinstance(exc, (kafka.errors.ProducerFencedError, kafka.errors.InvalidProducerEpochError)):
            return True
        # Once fenced, every transactional method raises a plain KafkaError naming the cause.
        return isinstance(exc, kafka.errors.KafkaError) and "ProducerFencedError" in str(exc)


class AsyncRunner:
    """An event loop owned by one adapter: its objects are built and driven on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Any, timeout: float = TIMEOUT_S) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def close_loop(self) -> None:
        self.loop.close()


class AioTxn(TxnProducer, AsyncRunner):
    client = "aiokafka"

    def __init__(
        self, bootstrap: str, transactional_id: str, timeout_ms: int = 60_000, **config: Any
    ) -> None:
        AsyncRunner.__init__(self)

        async def make() -> aiokafka.AIOKafkaProducer:
            return aiokafka.AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                transactional_id=transactional_id,
                transaction_timeout_ms=timeout_ms,
                linger_ms=config.get("linger_ms", 2),
                **{k: v for k, v in config.items() if k != "linger_ms"},
            )

        self.producer = self.run(make())
        self.futures: list[asyncio.Future[Any]] = []

    def init(self) -> None:
        self.run(self.producer.start())

    def begin(self) -> None:
        self.run(self.producer.begin_transaction())

    def send(self, topic: str, partition: int, value: bytes) -> None:
        self.futures.append(self.run(self.producer.send(topic, value=value, partition=partition)))

    def flush(self) -> None:
        self.run(self.producer.flush())
        futures, self.futures = self.futures, []
        self.run(asyncio.gather(*futures))

    def commit(self) -> None:
        self.run(self.producer.commit_transaction())

    def abort(self) -> None:
        self.run(self.producer.abort_transaction())

    def close(self) -> None:
        try:
            self.run(self.producer.stop(), timeout=10)
        except Exception:  # noqa: BLE001 - a fenced producer may fail to stop cleanly
            pass
        self.close_loop()

    @staticmethod
    def is_fenced(exc: BaseException) -> bool:
        return isinstance(exc, (aiokafka.errors.ProducerFenced, aiokafka.errors.InvalidProducerEpoch))


def txn_producer(
    client: str,
    bootstrap: str,
    transactional_id: str,
    timeout_ms: int = 60_000,
    compression_type: str | None = None,
    linger_ms: int = 2,
) -> TxnProducer:
    if client == "confluent-kafka":
        extra = {"compression.type": compression_type} if compression_type else {}
        return ConfluentTxn(bootstrap, transactional_id, timeout_ms, linger_ms=linger_ms, **extra)
    kind = KafkaPythonTxn if client == "kafka-python" else AioTxn
    return kind(
        bootstrap,
        transactional_id,
        timeout_ms,
        linger_ms=linger_ms,
        **({"compression_type": compression_type} if compression_type else {}),
    )


class PlainProducer:
    """A non-transactional producer of the same library: send(topic, partition, value), flush()."""

    def __init__(self, client: str, bootstrap: str) -> None:
        self.client = client
        if client == "confluent-kafka":
            self.impl: Any = Producer(
                {"bootstrap.servers": bootstrap, "linger.ms": 2, "enable.idempotence": False}
            )
        elif client == "kafka-python":
            self.impl = kafka.KafkaProducer(bootstrap_servers=bootstrap, linger_ms=2)
        else:
            self.runner = AsyncRunner()

            async def make() -> aiokafka.AIOKafkaProducer:
                producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=2)
                await producer.start()
                return producer

            self.impl = self.runner.run(make())
        self.pending: list[Any] = []

    def send(self, topic: str, partition: int, value: bytes) -> None:
        if self.client == "confluent-kafka":
            self.impl.produce(topic, value=value, partition=partition)
        elif self.client == "kafka-python":
            self.pending.append(self.impl.send(topic, value=value, partition=partition))
        else:
            self.pending.append(self.runner.run(self.impl.send(topic, value=value, partition=partition)))

    def flush(self) -> None:
        if self.client == "confluent-kafka":
            assert self.impl.flush(TIMEOUT_S) == 0
        elif self.client == "kafka-python":
            self.impl.flush(TIMEOUT_S)
            for future in self.pending:
                future.get(TIMEOUT_S)
        else:
            self.runner.run(asyncio.gather(*self.pending))
        self.pending = []

    def close(self) -> None:
        if self.client == "confluent-kafka":
            assert self.impl.flush(TIMEOUT_S) == 0
            self.impl = None
        elif self.client == "kafka-python":
            self.impl.close(timeout=2)
        elif self.client == "aiokafka":
            self.runner.run(self.impl.stop())
            self.runner.close_loop()


# -- consumers (assign, no groups) -----------------------------------------------------------------

Seen = dict[TP, list[tuple[int, bytes | None]]]


class AssignedConsumer:
    """One library's consumer assigned to ``partitions`` from offset 0."""

    def __init__(self, client: str, bootstrap: str, partitions: Iterable[TP], *, committed: bool) -> None:
        self.client = client
        self.partitions = list(partitions)
        isolation = "read_committed" if committed else "read_uncommitted"
        if client == "confluent-kafka":
            self.impl: Any = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "unused-with-assign",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "isolation.level": isolation,
                    "fetch.wait.max.ms": 100,
                }
            )
            self.impl.assign([TopicPartition(t, p, 0) for t, p in self.partitions])
        elif client == "kafka-python":
            self.impl = kafka.KafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level=isolation,
                fetch_max_wait_ms=100,
            )
            self.impl.assign([kafka.TopicPartition(t, p) for t, p in self.partitions])
            self.impl.seek_to_beginning()
        else:
            self.runner = AsyncRunner()

            async def make() -> aiokafka.AIOKafkaConsumer:
                consumer = aiokafka.AIOKafkaConsumer(
                    bootstrap_servers=bootstrap,
                    group_id=None,
                    enable_auto_commit=False,
                    auto_offset_reset="earliest",
                    isolation_level=isolation,
                    fetch_max_wait_ms=100,
                )
                await consumer.start()
                consumer.assign([aiokafka.TopicPartition(t, p) for t, p in self.partitions])
                await consumer.seek_to_beginning()
                return consumer

            self.impl = self.runner.run(make())
        self.seen: Seen = defaultdict(list)

    def _poll_once(self) -> list[tuple[TP, int, bytes | None]]:
        if self.client == "confluent-kafka":
            msgs = self.impl.consume(500, 0.2)
            for msg in msgs:
                assert msg.error() is None, msg.error()
            return [((m.topic(), m.partition()), m.offset(), m.value()) for m in msgs]
        if self.client == "kafka-python":
            batches = self.impl.poll(timeout_ms=200)
        else:
            batches = self.runner.run(self.impl.getmany(timeout_ms=200))
        return [
            ((tp.topic, tp.partition), r.offset, r.value) for tp, records in batches.items() for r in records
        ]

    def poll_for(self, seconds: float) -> int:
        """Poll for ``seconds``; returns how many records arrived."""
        count, deadline = 0, time.monotonic() + seconds
        while time.monotonic() < deadline:
            for tp, offset, value in self._poll_once():
                self.seen[tp].append((offset, value))
                count += 1
        return count

    def poll_until(self, expected: int, idle_s: float = 1.0, timeout: float = TIMEOUT_S) -> Seen:
        """Poll until ``expected`` records arrived and then nothing more for ``idle_s``."""
        deadline = time.monotonic() + timeout
        idle_since = time.monotonic()
        while time.monotonic() < deadline:
            got = self._poll_once()
            for tp, offset, value in got:
                self.seen[tp].append((offset, value))
            if got:
                idle_since = time.monotonic()
            elif self.total >= expected and time.monotonic() - idle_since >= idle_s:
                break
        return self.seen

    @property
    def total(self) -> int:
        return sum(map(len, self.seen.values()))

    def close(self) -> None:
        if self.client == "confluent-kafka":
            self.impl.close()
        elif self.client == "kafka-python":
            self.impl.close(autocommit=False)
        else:
            self.runner.run(self.impl.stop())
            self.runner.close_loop()


def consume(client: str, bootstrap: str, partitions: Iterable[TP], *, committed: bool, expected: int) -> Seen:
    consumer = AssignedConsumer(client, bootstrap, partitions, committed=committed)
    try:
        return consumer.poll_until(expected)
    finally:
        consumer.close()


def values(seen: Seen) -> dict[TP, list[bytes | None]]:
    """Per partition: the values, after checking the offsets only ever increase."""
    for tp, records in seen.items():
        offsets = [offset for offset, _ in records]
        assert offsets == sorted(set(offsets)), f"{tp}: offsets out of order or repeated: {offsets}"
    return {tp: [value for _, value in records] for tp, records in seen.items() if records}


# -- our codec over a socket -----------------------------------------------------------------------

READ_COMMITTED = 1
LATEST = -1


class Raw:
    """Requests by hand: admin views of transactions, and a client that disappears mid-transaction."""

    def __init__(self, bootstrap: str) -> None:
        self.sock = raw_client.connect(bootstrap)
        self.correlation = 0

    def call(self, request: Any, version: int) -> Any:
        self.correlation += 1
        return raw_client.call(self.sock, request, version, self.correlation)

    def close(self) -> None:
        self.sock.close()

    def end_offsets(self, topic: str, partitions: Iterable[int], *, committed: bool) -> dict[int, int]:
        """ListOffsets latest: the high watermark, or the last stable offset under read_committed."""
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=READ_COMMITTED if committed else 0,
            topics=[
                ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsPartition(partition_index=p, timestamp=LATEST) for p in partitions
                    ],
                )
            ],
        )
        result = {}
        for partition in self.call(request, 5).topics[0].partitions:
            assert partition.error_code == Errors.NONE, partition
            result[partition.partition_index] = partition.offset
        return result

    def describe_transaction(self, transactional_id: str) -> Any:
        response = self.call(DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0)
        (state,) = response.transaction_states
        return state

    def list_transactions(
        self, states: list[str] | None = None, producer_ids: list[int] | None = None, duration_ms: int = -1
    ) -> dict[str, Any]:
        request = ListTransactionsRequest(
            state_filters=states or [], producer_id_filters=producer_ids or [], duration_filter=duration_ms
        )
        response = self.call(request, 1)
        assert response.error_code == Errors.NONE
        return {t.transactional_id: t for t in response.transaction_states}

    def describe_producers(self, topic: str, partition: int) -> list[Any]:
        request = DescribeProducersRequest(topics=[TopicRequest(name=topic, partition_indexes=[partition])])
        (result,) = self.call(request, 0).topics[0].partitions
        assert result.error_code == Errors.NONE, result
        return list(result.active_producers)

    def write_txn_markers(
        self, producer_id: int, epoch: int, commit: bool, partitions: dict[str, list[int]]
    ) -> dict[TP, int]:
        request = WriteTxnMarkersRequest(
            markers=[
                WritableTxnMarker(
                    producer_id=producer_id,
                    producer_epoch=epoch,
                    transaction_result=commit,
                    topics=[
                        WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in partitions.items()
                    ],
                    coordinator_epoch=0,
                )
            ]
        )
        (marker,) = self.call(request, 1).markers
        return {(t.name, p.partition_index): p.error_code for t in marker.topics for p in t.partitions}

    # the transactional client side

    def init_producer_id(self, transactional_id: str, timeout_ms: int) -> tuple[int, int]:
        response = self.call(
            InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms), 4
        )
        assert response.error_code == Errors.NONE, response
        return response.producer_id, response.producer_epoch

    def add_partitions(
        self, transactional_id: str, pid: int, epoch: int, partitions: dict[str, list[int]]
    ) -> set[int]:
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in partitions.items()
            ],
        )
        response = self.call(request, 3)
        return {
            p.partition_error_code
            for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }

    def produce(
        self,
        topic: str,
        partition: int,
        values: list[bytes],
        *,
        pid: int = -1,
        epoch: int = -1,
        seq: int = -1,
        transactional: bool = False,
        transactional_id: str | None = None,
    ) -> tuple[int, int]:
        """(error code, base offset) of one batch."""
        records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=v) for i, v in enumerate(values)]
        batch = build_batch(
            records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional
        )
        request = ProduceRequest(
            transactional_id=transactional_id,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                TopicProduceData(
                    name=topic, partition_data=[PartitionProduceData(index=partition, records=batch)]
                )
            ],
        )
        result = self.call(request, 9).responses[0].partition_responses[0]
        return result.error_code, result.base_offset

    def end_txn(self, transactional_id: str, pid: int, epoch: int, commit: bool) -> int:
        request = EndTxnRequest(
            transactional_id=transactional_id, producer_id=pid, producer_epoch=epoch, committed=commit
        )
        return self.call(request, 3).error_code


def wait_for(predicate: Callable[[], bool], timeout: float = TIMEOUT_S, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()
