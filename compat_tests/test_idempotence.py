"""Idempotent producers through a proxy that breaks Produce: exactly once, in order, across faults.

Every client connection goes through :mod:`.fault_proxy` (the broker advertises the proxy), which
drops Produce responses after the broker wrote the batch, tears requests and responses in half and
holds responses past the client's request timeout. Idempotent producers of three client libraries
must end with exactly the sent messages, once each, in order per partition; the same traffic with
idempotence off must show duplicates (so the proxy demonstrably bites). A SIGKILL of the broker in
the middle of an idempotent run must not create duplicates either: the producer state is rebuilt
at start-up. Finally the epoch and sequence rules, request by request, with our own codec.
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rivven_kproto.codec.connection import decode_request
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.headers import ResponseHeader, response_header_version
from rivven_kproto.codec.messages.create_topics import CreatableTopic, CreateTopicsRequest
from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest
from rivven_kproto.codec.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from rivven_kproto.codec.messages.produce import (
    PartitionProduceData,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
)
from rivven_kproto.codec.records.batch import parse_header
from rivven_kproto.codec.records.records import Record, build_batch, decode_batches

from . import raw_client
from .broker_process import BrokerProcess
from .fault_proxy import CUT_REQUEST, CUT_RESPONSE, DELAY_RESPONSE, DROP_RESPONSE, FaultProxy, FaultSchedule

PARTITIONS = 3
TIMEOUT_S = 60
# Client request timeout and the proxy's hold on a delayed response (longer, so the client gives up).
REQUEST_TIMEOUT_MS = 1500
DELAY_S = 3.0
ALL_FAULTS = {DROP_RESPONSE: 4, CUT_REQUEST: 3, CUT_RESPONSE: 3, DELAY_RESPONSE: 2}


@dataclass
class Proxied:
    proxy: FaultProxy
    broker: BrokerProcess


def start_proxied(base: Path, proxy: FaultProxy) -> BrokerProcess:
    broker = BrokerProcess(
        base / "data", base / "broker.log", ["--advertised-listener", f"127.0.0.1:{proxy.port}"]
    )
    broker.start()
    proxy.upstream_port = broker.port
    return broker


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxied]:
    with FaultProxy() as proxy:
        broker = start_proxied(tmp_path_factory.mktemp("idempotence"), proxy)
        try:
            yield Proxied(proxy, broker)
        finally:
            if broker.alive():
                assert broker.stop() == 0, broker.log_text()[-4000:]


@pytest.fixture
def setup(proxied: Proxied) -> Proxied:
    proxied.proxy.reset(FaultSchedule(), enabled=False)
    proxied.proxy.record_produce = False
    proxied.proxy.withhold_produce_responses = False
    return proxied


def value(i: int) -> bytes:
    return b"%08d" % i


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT_S)


def faults(seed: int, budget: dict[str, int], probability: float = 0.2) -> FaultSchedule:
    return FaultSchedule(seed=seed, probability=probability, budget=budget, delay_s=DELAY_S, skip_first=3)


def read_all(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    """Every stored record up to the high watermark, per partition; offsets must be contiguous."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.max.bytes": 4 * 1024 * 1024,
        }
    )
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)[1]
            for p in range(PARTITIONS)
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        values: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        next_offset = dict.fromkeys(range(PARTITIONS), 0)
        deadline = time.monotonic() + TIMEOUT_S
        while any(next_offset[p] < ends[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, f"read {next_offset} of {ends}"
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                assert msg.error() is None, msg.error()
                p = msg.partition()
                assert msg.offset() == next_offset[p], (
                    f"partition {p}: offset {msg.offset()} after {next_offset[p]}"
                )
                next_offset[p] += 1
                values[p].append(msg.value())
    finally:
        consumer.close()
    return values


def anomalies(stored: dict[int, list[bytes]], sent: int) -> dict[str, int]:
    """Counts of what exactly-once-in-order forbids; all zero when the log holds exactly the sent set."""
    duplicates = missing = unexpected = out_of_order = 0
    for p, got in stored.items():
        expected = [value(i) for i in range(p, sent, PARTITIONS)]
        duplicates += len(got) - len(set(got))
        missing += len(set(expected) - set(got))
        unexpected += len(set(got) - set(expected))
        out_of_order += sum(1 for a, b in zip(got, got[1:], strict=False) if a >= b)
    return {
        "duplicates": duplicates,
        "missing": missing,
        "unexpected": unexpected,
        "out_of_order": out_of_order,
    }


def report(proxy: FaultProxy, **extra: object) -> None:
    """What the proxy did, in the test's captured output (shown with -s or on failure)."""
    print("fault proxy:", proxy.stats(), *(f"{k}={v}" for k, v in extra.items()))


def answers_per_batch(exchanges: list[tuple[bytes, bytes]]) -> dict[tuple, list[tuple[int, int]]]:
    """(partition, producer id, epoch, first seq, last seq) -> the broker's (error, base offset) per attempt."""
    answers: dict[tuple, list[tuple[int, int]]] = {}
    for request_frame, response_frame in exchanges:
        event = decode_request(request_frame)
        stream = io.BytesIO(response_frame)
        ResponseHeader.decode_from(stream, response_header_version(ProduceRequest, event.api_version))
        response = ProduceResponse.decode(response_frame[stream.tell() :], event.api_version)
        by_partition = {
            (t.name, p.index): (p.error_code, p.base_offset)
            for t in response.responses
            for p in t.partition_responses
        }
        for topic in event.request.topic_data:
            for data in topic.partition_data:
                h = parse_header(data.records)
                key = (data.index, h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence)
                answers.setdefault(key, []).append(by_partition[(topic.name, data.index)])
    return answers


def deduplicated_retries(proxy: FaultProxy) -> int:
    """Batches the broker accepted more than once: every acceptance must carry the same base offset."""
    retried = 0
    for key, attempts in answers_per_batch(list(proxy.produce_exchanges)).items():
        accepted = {offset for error, offset in attempts if error == Errors.NONE}
        assert len(accepted) <= 1, f"batch {key} answered with different offsets: {attempts}"
        retried += sum(1 for error, _ in attempts if error == Errors.NONE) > 1
    return retried


CLEAN = {"duplicates": 0, "missing": 0, "unexpected": 0, "out_of_order": 0}


def start_faults(proxy: FaultProxy, seed: int) -> None:
    proxy.reset(faults(seed, ALL_FAULTS))
    proxy.record_produce = True


def check_idempotent_run(proxy: FaultProxy, topic: str, count: int, elapsed: float, **extra: object) -> None:
    """Every kind of fault happened, some batch reached the broker twice, and the log is exactly right."""
    proxy.enabled = False
    proxy.record_produce = False
    retried = deduplicated_retries(proxy)
    injected = proxy.injected
    report(proxy, count=count, elapsed=f"{elapsed:.1f}s", deduplicated_retries=retried, **extra)
    assert all(injected[kind] > 0 for kind in ALL_FAULTS), injected
    assert proxy.stats().get("delay_abandoned", 0) > 0, "no delayed response outlasted the client's timeout"
    assert retried > 0, "no batch was accepted twice: the faults never made the broker deduplicate"
    assert anomalies(read_all(proxy.bootstrap, topic), count) == CLEAN, (injected, retried)


# -- confluent-kafka ------------------------------------------------------------------------------


def confluent_producer(bootstrap: str, *, idempotent: bool, batch: int = 500) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": idempotent,
            "acks": "all",
            "retries": 1_000_000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 200,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
            "max.in.flight.requests.per.connection": 5,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,  # librdkafka: the broker's ack timeout
            "socket.timeout.ms": REQUEST_TIMEOUT_MS,  # librdkafka: its own in-flight timeout (then reconnect)
            "message.timeout.ms": TIMEOUT_S * 1000,
            "linger.ms": 5,
            "batch.num.messages": batch,  # small batches: more Produce requests for the proxy to break
        }
    )


def confluent_send(producer: Producer, topic: str, count: int, acked: list[int] | None = None) -> list[str]:
    """Send ``count`` numbered messages, message i to partition i % 3; returns the delivery errors."""
    errors: list[str] = []

    def on_delivery(err, msg) -> None:  # noqa: ANN001 - librdkafka callback
        if err is not None:
            errors.append(str(err))
        elif acked is not None:
            acked.append(int(msg.value()))

    i = 0
    while i < count:
        try:
            producer.produce(topic, value=value(i), partition=i % PARTITIONS, on_delivery=on_delivery)
            i += 1
        except BufferError:
            producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(TIMEOUT_S)
    assert remaining == 0, f"{remaining} messages still undelivered"
    return errors


# Measured on the 2 shared cores: 100_000 messages with all 12 faults produce in 5.5-8 s, about
# 220 Produce requests; the whole test (with the read-back) takes 6-9 s.
CONFLUENT_COUNT = 100_000


def test_confluent_kafka_idempotent_exactly_once_through_faults(setup: Proxied, topic_name: str) -> None:
    proxy = setup.proxy
    create_topic(proxy.bootstrap, topic_name)
    start_faults(proxy, seed=1)
    started = time.monotonic()
    errors = confluent_send(confluent_producer(proxy.bootstrap, idempotent=True), topic_name, CONFLUENT_COUNT)
    elapsed = time.monotonic() - started
    assert errors == []
    check_idempotent_run(proxy, topic_name, CONFLUENT_COUNT, elapsed)


def test_confluent_kafka_without_idempotence_duplicates(setup: Proxied, topic_name: str) -> None:
    """The control experiment: the same faults without idempotence write retried batches twice."""
    proxy = setup.proxy
    create_topic(proxy.bootstrap, topic_name)
    budget = {DROP_RESPONSE: 4, CUT_RESPONSE: 2}
    proxy.reset(faults(2, budget))
    count = 20_000
    errors = confluent_send(
        confluent_producer(proxy.bootstrap, idempotent=False, batch=100), topic_name, count
    )
    proxy.enabled = False
    assert errors == []
    injected = proxy.injected
    assert all(injected[kind] > 0 for kind in budget), (injected, proxy.stats())
    found = anomalies(read_all(proxy.bootstrap, topic_name), count)
    report(proxy, count=count, **found)
    assert found["duplicates"] > 0, (found, injected)
    assert found["missing"] == 0 and found["unexpected"] == 0, found


# -- kafka-python ---------------------------------------------------------------------------------

# kafka-python 3.x is fast enough for the full count: 100_000 messages in about 5 s, ~150 requests.
KAFKA_PYTHON_COUNT = 100_000


def test_kafka_python_idempotent_exactly_once_through_faults(setup: Proxied, topic_name: str) -> None:
    from kafka import KafkaProducer

    proxy = setup.proxy
    create_topic(proxy.bootstrap, topic_name)
    start_faults(proxy, seed=3)
    producer = KafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        enable_idempotence=True,
        acks="all",
        max_in_flight_requests_per_connection=5,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=TIMEOUT_S * 1000,
        retry_backoff_ms=50,
        reconnect_backoff_ms=50,
        reconnect_backoff_max_ms=500,
        linger_ms=5,
        batch_size=4096,  # small batches: more Produce requests for the proxy to break
    )
    started = time.monotonic()
    try:
        futures = [
            producer.send(topic_name, value=value(i), partition=i % PARTITIONS)
            for i in range(KAFKA_PYTHON_COUNT)
        ]
        producer.flush(TIMEOUT_S)
        failed = [f.exception for f in futures if not f.succeeded()]
    finally:
        producer.close(10)
    elapsed = time.monotonic() - started
    assert failed == [], failed[:5]
    check_idempotent_run(proxy, topic_name, KAFKA_PYTHON_COUNT, elapsed)


# -- aiokafka -------------------------------------------------------------------------------------

# 100_000 messages in 5-6 s, 150-350 Produce requests.
AIOKAFKA_COUNT = 100_000


def test_aiokafka_idempotent_exactly_once_through_faults(setup: Proxied, topic_name: str) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaTimeoutError

    proxy = setup.proxy
    create_topic(proxy.bootstrap, topic_name)
    start_faults(proxy, seed=4)
    send_timeouts: list[int] = []

    async def scenario() -> list[BaseException]:
        producer = AIOKafkaProducer(
            bootstrap_servers=proxy.bootstrap,
            enable_idempotence=True,
            acks="all",
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            retry_backoff_ms=50,
            linger_ms=5,
            max_batch_size=4096,  # small batches: more Produce requests for the proxy to break
        )
        await producer.start()
        try:
            futures = []
            deadline = time.monotonic() + TIMEOUT_S
            for i in range(AIOKAFKA_COUNT):
                while True:
                    try:
                        futures.append(
                            await producer.send(topic_name, value=value(i), partition=i % PARTITIONS)
                        )
                        break
                    except KafkaTimeoutError:
                        # The partition's batch is full and still waiting for a (delayed) response:
                        # aiokafka gives up after request_timeout_ms without queueing the message.
                        send_timeouts.append(i)
                        assert time.monotonic() < deadline
            results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), TIMEOUT_S)
        finally:
            await producer.stop()
        return [r for r in results if isinstance(r, BaseException)]

    started = time.monotonic()
    failed = asyncio.run(scenario())
    elapsed = time.monotonic() - started
    assert failed == [], failed[:5]
    check_idempotent_run(proxy, topic_name, AIOKAFKA_COUNT, elapsed, send_timeouts=len(send_timeouts))


# -- a broker crash in the middle -----------------------------------------------------------------


def test_confluent_kafka_idempotent_across_sigkill(tmp_path: Path) -> None:
    """SIGKILL the broker while an idempotent producer sends (and retries), restart on the same port."""
    count, topic = 40_000, "crash-idempotent"
    schedule = faults(5, {DROP_RESPONSE: 2, CUT_RESPONSE: 2})
    with FaultProxy(schedule) as proxy:
        proxy.record_produce = True
        broker = start_proxied(tmp_path, proxy)
        try:
            create_topic(proxy.bootstrap, topic)
            acked: list[int] = []
            outcome: dict[str, list[str]] = {}
            producer = confluent_producer(proxy.bootstrap, idempotent=True)
            thread = threading.Thread(
                target=lambda: outcome.setdefault("errors", confluent_send(producer, topic, count, acked))
            )
            thread.start()
            deadline = time.monotonic() + TIMEOUT_S
            while len(acked) < count // 4 and time.monotonic() < deadline and thread.is_alive():
                time.sleep(0.02)
            assert len(acked) < count, "the producer finished before the crash; send more"
            # From now on the broker's answers are swallowed: what it writes stays unacknowledged, so
            # after the crash the producer must retry batches the log already holds.
            proxy.withhold_produce_responses = True
            # Only a few requests are in flight at a time: wait for one unanswered request, plus
            # what follows within 0.5 s (less than the client's 1.5 s in-flight timeout).
            while proxy.stats().get("withheld", 0) < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            settle = time.monotonic() + 0.5
            while proxy.stats().get("withheld", 0) < 5 and time.monotonic() < settle:
                time.sleep(0.01)
            port = broker.port
            broker.kill()
            before_crash = len(proxy.produce_exchanges)
            proxy.withhold_produce_responses = False
            acked_before_crash, withheld = len(acked), proxy.stats().get("withheld", 0)
            assert withheld >= 1
            broker.start(port or 0)
            thread.join(TIMEOUT_S + 10)
            assert not thread.is_alive()
            proxy.enabled = False
            assert outcome.get("errors") == [], outcome
            assert sorted(acked) == list(range(count))
            stored = read_all(proxy.bootstrap, topic)
            retried = deduplicated_retries(proxy)
            exchanges = list(proxy.produce_exchanges)
            accepted_before = answers_per_batch(exchanges[:before_crash])
            accepted_after = answers_per_batch(exchanges[before_crash:])
            across = [
                key
                for key in accepted_before.keys() & accepted_after.keys()
                if (Errors.NONE, accepted_before[key][0][1]) in accepted_after[key]
            ]
            report(
                proxy,
                acked_before_crash=acked_before_crash,
                withheld=withheld,
                deduplicated_retries=retried,
                deduplicated_across_restart=len(across),
            )
            # The withheld answers were acceptances the client never saw: retried after the restart,
            # those batches must be recognised from the rebuilt producer state, with the same offsets.
            assert across, "no batch accepted before the crash was retried after it"
            assert anomalies(stored, count) == CLEAN, (acked_before_crash, proxy.stats())
        finally:
            broker.kill()


# -- the rules, request by request ----------------------------------------------------------------

PRODUCE_VERSION = 9
# What a produce from a producer id with no state on the partition, first sequence != 0, gets.
# Kafka <= 2.4 answered UNKNOWN_PRODUCER_ID (59). Kafka >= 2.5 (KIP-360), and this broker, accept the batch: ProducerAppendInfo.checkSequence, "If there is
# no current producer epoch (possibly because all producer records have been deleted due to
# retention or the DeleteRecords API) accept writes with any sequence number"; Kafka 4 only refuses
# it (OUT_OF_ORDER_SEQUENCE_NUMBER) for transactions-v2 producers. See FINDINGS.rst.
UNKNOWN_PID_ANSWER = Errors.NONE  # Kafka 2.5+: no state for the producer here, any sequence starts it


class Raw:
    def __init__(self, bootstrap: str, topic: str) -> None:
        self.sock = raw_client.connect(bootstrap)
        self.topic = topic
        self.correlation = 0

    def call(self, request, version: int):  # noqa: ANN001, ANN201 - any codec message
        self.correlation += 1
        return raw_client.call(self.sock, request, version, self.correlation)

    def init_producer_id(self) -> tuple[int, int]:
        response = self.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
        assert response.error_code == Errors.NONE
        return response.producer_id, response.producer_epoch

    def produce(self, pid: int, epoch: int, seq: int, count: int = 1) -> tuple[int, int]:
        """(error code, base offset) of one batch of ``count`` records to partition 0."""
        records = [
            Record(offset_delta=i, timestamp_delta=0, key=None, value=b"s%d-e%d" % (seq + i, epoch))
            for i in range(count)
        ]
        batch = build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        request = ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                TopicProduceData(
                    name=self.topic, partition_data=[PartitionProduceData(index=0, records=batch)]
                )
            ],
        )
        partition = self.call(request, PRODUCE_VERSION).responses[0].partition_responses[0]
        return partition.error_code, partition.base_offset

    def end_offset(self) -> int:
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[
                ListOffsetsTopic(
                    name=self.topic, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)]
                )
            ],
        )
        partition = self.call(request, 5).topics[0].partitions[0]
        assert partition.error_code == Errors.NONE
        return partition.offset

    def fetch_batches(self) -> list:
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            topics=[
                FetchTopic(
                    topic=self.topic,
                    partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
                )
            ],
        )
        partition = self.call(request, 11).responses[0].partitions[0]
        assert partition.error_code == Errors.NONE
        return decode_batches(partition.records or b"")


def test_epochs_and_sequences_request_by_request(setup: Proxied, topic_name: str) -> None:
    raw = Raw(setup.broker.bootstrap, topic_name)
    created = raw.call(
        CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=topic_name, num_partitions=1, replication_factor=1, assignments=[], configs=[]
                )
            ],
            timeout_ms=10000,
        ),
        4,
    )
    assert created.topics[0].error_code == Errors.NONE

    pid, epoch = raw.init_producer_id()
    assert pid >= 0 and epoch == 0
    other_pid, _ = raw.init_producer_id()
    assert other_pid != pid, "a second InitProducerId without a transactional id gets a fresh producer id"

    assert raw.produce(pid, 0, 0) == (Errors.NONE, 0)
    # The same batch again: a duplicate, answered with its original offset and not written twice.
    assert raw.produce(pid, 0, 0) == (Errors.NONE, 0)
    assert raw.end_offset() == 1
    # Three more, then a retry of one still among the last five batches.
    assert [raw.produce(pid, 0, seq) for seq in (1, 2, 3)] == [
        (Errors.NONE, 1),
        (Errors.NONE, 2),
        (Errors.NONE, 3),
    ]
    assert raw.produce(pid, 0, 2) == (Errors.NONE, 2)
    assert raw.end_offset() == 4

    # A gap in the sequence (4 expected).
    assert raw.produce(pid, 0, 9)[0] == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    # A new epoch must start at 0; then the old epoch is fenced, whatever its sequence.
    assert raw.produce(pid, 1, 0) == (Errors.NONE, 4)
    assert raw.produce(pid, 0, 4)[0] == Errors.INVALID_PRODUCER_EPOCH
    assert raw.produce(pid, 0, 1)[0] == Errors.INVALID_PRODUCER_EPOCH
    assert raw.produce(pid, 2, 7)[0] == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert raw.produce(pid, 1, 1) == (Errors.NONE, 5)
    assert raw.end_offset() == 6

    stored = [(b.base_offset, b.producer_id, b.producer_epoch, b.base_sequence) for b in raw.fetch_batches()]
    assert stored == [
        (0, pid, 0, 0),
        (1, pid, 0, 1),
        (2, pid, 0, 2),
        (3, pid, 0, 3),
        (4, pid, 1, 0),
        (5, pid, 1, 1),
    ]

    # A producer id the partition has never seen, not starting at sequence 0.
    made_up = pid + 1_000_003
    error, _ = raw.produce(made_up, 0, 3)
    assert error == UNKNOWN_PID_ANSWER
    assert raw.end_offset() == (7 if UNKNOWN_PID_ANSWER == Errors.NONE else 6)
