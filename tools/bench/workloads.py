"""The workloads, each a bounded run of confluent-kafka against one bootstrap address.

A workload returns its own figures (messages, seconds, latencies); the runner adds the broker's
CPU and memory around it. Every loop is bounded by a message count and a deadline.
"""

from __future__ import annotations

import io
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.headers import RequestHeader, ResponseHeader, response_header_version
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse

DEADLINE_S = 300
WARM_UP_TIMEOUT_S = 300  # one message to each partition, before the clock starts
STAMP = struct.Struct(">q")
METADATA_VERSION = 12


@dataclass
class Figures:
    messages: int
    seconds: float
    payload_bytes: int
    latencies_ms: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / self.seconds / 1e6 if self.seconds else 0.0

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def metadata_frame(topic: str | None, correlation: int, client_id: str = "bench") -> bytes:
    """A Metadata request (v12) for ``topic`` (all topics for None), framed by our codec."""
    request = MetadataRequest(topics=None if topic is None else [MetadataRequestTopic(name=topic)],
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    header = RequestHeader(request_api_key=MetadataRequest.API_KEY, request_api_version=METADATA_VERSION,
                           correlation_id=correlation, client_id=client_id)
    return encode_request(header, request)


def decode_metadata(answer: bytes) -> MetadataResponse:
    body = io.BytesIO(answer)
    ResponseHeader.decode_from(body, response_header_version(MetadataRequest, METADATA_VERSION))
    return MetadataResponse.decode(answer[body.tell():], METADATA_VERSION)


def described_by(address: str, topic: str | None) -> MetadataResponse:
    """Metadata for ``topic`` (all topics for None) as the broker at ``address`` itself answers it (a client library
    would ask whichever broker it knows)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(metadata_frame(topic, 1))
        (length,) = struct.unpack(">i", _read_exactly(sock, 4))
        return decode_metadata(_read_exactly(sock, length))


def _described_everywhere(addresses: list[str], topic: str, partitions: int) -> bool:
    for address in addresses:
        found = [t for t in described_by(address, topic).topics if t.name == topic]
        if not found or found[0].error_code != 0 or len(found[0].partitions) != partitions:
            return False
    return True


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    """Create ``topic`` and wait for the metadata to catch up; with several brokers in ``bootstrap``
    (a cluster on one database), until each of them describes it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(120)  # 10,000 partitions on a busy disk
    addresses = bootstrap.split(",")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # metadata catches up with the creation
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if found is not None and found.error is None and len(found.partitions) == partitions and (
                len(addresses) == 1 or _described_everywhere(addresses, topic, partitions)):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} did not appear with {partitions} partitions")


def _produce_all(producer: Producer, topic: str, count: int, partitions: int, value: bytes,
                 failures: list[Any], pool: bytes | None = None) -> None:
    """``count`` messages of ``value``, or (``pool``) each its own ``len(value)`` bytes of the pool."""
    deadline = time.monotonic() + DEADLINE_S
    size = len(value)
    for i in range(count):
        payload = value if pool is None else pool[i * size:(i + 1) * size]
        while True:
            try:
                producer.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.005)
                if time.monotonic() > deadline:
                    raise TimeoutError("produce did not drain before the deadline") from None
    left = producer.flush(DEADLINE_S)
    if left or failures:
        raise RuntimeError(f"{left} messages undelivered, {len(failures)} failed: {failures[:3]}")


def _warm_up(producer: Producer, topic: str, partitions: int) -> None:
    """One delivered message per partition before the clock starts: connections, producer id and
    leaders are in place, so the figures measure the stream, not the client's start-up."""
    for partition in range(partitions):
        producer.produce(topic, b"warm-up", partition=partition)
    # librdkafka sends one Produce request per partition: 10,000 of them take ~1 min on a busy machine.
    if producer.flush(WARM_UP_TIMEOUT_S):
        raise RuntimeError(f"warm-up messages to {topic} were not delivered")


def produce(bootstrap: str, topic: str, count: int, partitions: int, size: int = 100,
            client: dict[str, str] | None = None, topic_config: dict[str, str] | None = None,
            incompressible: bool = False) -> Figures:
    """acks=all, idempotent, linger.ms=5, 1 MiB batches; ``client``: settings over the defaults (a
    secured listener's address and security properties). The topic is created over ``bootstrap``.
    ``incompressible``: every message its own random bytes (the default repeats one byte, which
    PostgreSQL's TOAST compresses to almost nothing)."""
    create_topic(bootstrap, topic, partitions, topic_config)
    failures: list[Any] = []
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
        "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
        "on_delivery": lambda err, msg: failures.append(err) if err is not None else None,
        **(client or {}),
    })
    _warm_up(producer, topic, partitions)
    pool = os.urandom(count * size) if incompressible else None
    start = time.perf_counter()
    _produce_all(producer, topic, count, partitions, b"v" * size, failures, pool)
    return Figures(count, time.perf_counter() - start, count * size)


def consume(bootstrap: str, topic: str, count: int, partitions: int, isolation: str, size: int = 100,
            client: dict[str, str] | None = None) -> Figures:
    """assign() every partition from offset 0 and read ``count`` messages; the consumer connects
    (a metadata request) before the clock starts."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{isolation}", "enable.auto.commit": False,
        "isolation.level": isolation, "enable.partition.eof": False, **(client or {}),
    })
    try:
        consumer.list_topics(topic, timeout=10)
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = 0
        deadline = time.monotonic() + DEADLINE_S
        while got < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {got} of {count} before the deadline")
            batch = consumer.consume(min(10_000, count - got), 1.0)
            for message in batch:
                if message.error() is not None:
                    raise KafkaException(message.error())
            got += len(batch)
        return Figures(got, time.perf_counter() - start, got * size, extra={"consumed": got})
    finally:
        consumer.close()


def transactions(bootstrap: str, topic: str, count: int, per_txn: int = 10, size: int = 100,
                 budget_s: float | None = None) -> Figures:
    """``count`` transactions of ``per_txn`` messages, or fewer when ``budget_s`` seconds run out
    first; latencies are commit_transaction calls."""
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}", "linger.ms": 5})
    producer.init_transactions(30)
    value = b"t" * size
    latencies: list[float] = []
    start = time.perf_counter()
    deadline = time.monotonic() + DEADLINE_S
    for _ in range(count):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(latencies)} of {count} transactions before the deadline")
        if budget_s is not None and time.perf_counter() - start > budget_s:
            break
        producer.begin_transaction()
        for _ in range(per_txn):
            producer.produce(topic, value, partition=0)
        began = time.perf_counter()
        producer.commit_transaction(30)
        latencies.append((time.perf_counter() - began) * 1000)
    seconds, done = time.perf_counter() - start, len(latencies)
    return Figures(done * per_txn, seconds, done * per_txn * size, latencies,
                   {"txn_per_s": done / seconds, "transactions": done})


def concurrent_transactions(bootstrap: str, topic: str, count: int, producers: int = 16, per_txn: int = 10,
                            partitions: int = 8, size: int = 100) -> Figures:
    """``producers`` transactional producers at once (an exactly-once pipeline's shape), ``count``
    transactions in all of ``per_txn`` messages each, every producer on its own partition."""
    create_topic(bootstrap, topic, partitions)
    clients = [Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}-{i}", "linger.ms": 5})
               for i in range(producers)]
    for client in clients:
        client.init_transactions(30)
    value = b"t" * size
    latencies: list[list[float]] = [[] for _ in clients]
    errors: list[BaseException] = []
    share = count // producers

    def run(index: int) -> None:
        producer, mine = clients[index], latencies[index]
        deadline = time.monotonic() + DEADLINE_S
        try:
            for _ in range(share):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"producer {index}: {len(mine)} of {share} transactions before the deadline")
                producer.begin_transaction()
                for _ in range(per_txn):
                    producer.produce(topic, value, partition=index % partitions)
                began = time.perf_counter()
                producer.commit_transaction(30)
                mine.append((time.perf_counter() - began) * 1000)
        except BaseException as exc:  # noqa: BLE001 - re-raised by the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(producers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start
    if errors:
        raise errors[0]
    done = share * producers
    return Figures(done * per_txn, seconds, done * per_txn * size, [x for mine in latencies for x in mine],
                   {"txn_per_s": done / seconds, "producers": producers})


def transactions_with_offsets(bootstrap: str, topic: str, count: int, per_txn: int = 10, size: int = 100) -> Figures:
    """Consume-transform-produce: each transaction writes ``per_txn`` outputs for ``per_txn`` inputs
    read by a group member and commits the group's offsets with them (send_offsets_to_transaction)."""
    source, sink = f"{topic}-in", f"{topic}-out"
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, sink, 1)
    feeder = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failures: list[Any] = []
    _produce_all(feeder, source, count * per_txn, 1, b"i" * size, failures)
    if failures:
        raise RuntimeError(f"feeding the input failed: {failures[0]}")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(source, 0, 0)])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}", "linger.ms": 5})
    producer.init_transactions(30)
    latencies: list[float] = []
    done = 0
    start = time.perf_counter()
    deadline = time.monotonic() + DEADLINE_S
    try:
        while done < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{done} of {count} transactions before the deadline")
            inputs = consumer.consume(per_txn, 1.0)
            if not inputs:
                continue
            producer.begin_transaction()
            for message in inputs:
                if message.error() is not None:
                    raise KafkaException(message.error())
                producer.produce(sink, message.value(), partition=0)
            next_offset = (inputs[-1].offset() or 0) + 1
            producer.send_offsets_to_transaction(
                [TopicPartition(source, 0, next_offset)], consumer.consumer_group_metadata(), 30)
            began = time.perf_counter()
            producer.commit_transaction(30)
            latencies.append((time.perf_counter() - began) * 1000)
            done += 1
    finally:
        consumer.close()
    seconds = time.perf_counter() - start
    return Figures(done * per_txn, seconds, done * per_txn * size, latencies, {"txn_per_s": done / seconds})


def end_to_end(bootstrap: str, topic: str, rate: int, seconds: float, size: int = 1024) -> Figures:
    """``rate`` messages/s of ``size`` bytes for ``seconds``; latency from produce() to consume."""
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 0})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-latency", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, 0, 0)])
    total = int(rate * seconds)
    latencies: list[float] = []
    done = threading.Event()

    def read() -> None:
        deadline = time.monotonic() + seconds + 60
        while len(latencies) < total and time.monotonic() < deadline:
            message = consumer.poll(0.2)  # returns at the first message (consume(n) waits for n)
            value = message.value() if message is not None and message.error() is None else None
            if value is not None:
                latencies.append((time.perf_counter_ns() - STAMP.unpack_from(value)[0]) / 1e6)
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    padding = b"l" * (size - STAMP.size)
    start = time.perf_counter()
    for i in range(total):
        due = start + i / rate
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        producer.produce(topic, STAMP.pack(time.perf_counter_ns()) + padding, partition=0)
        producer.poll(0)
    producer.flush(30)
    done.wait(seconds + 90)
    consumer.close()
    return Figures(len(latencies), time.perf_counter() - start, len(latencies) * size, latencies,
                   {"sent": total})


def with_idle_connections(bootstrap: str, connections: int, run: Callable[[], Figures]) -> Figures:
    """``run`` while ``connections`` idle clients stay connected (each made one ApiVersions call)."""
    host, port = bootstrap.rsplit(":", 1)
    # ApiVersions v0, correlation id 1, client id "idle": a real request, so the broker sets up a
    # full connection, then silence.
    request = struct.pack(">hhih", 18, 0, 1, 4) + b"idle"
    frame = struct.pack(">i", len(request)) + request
    sockets: list[socket.socket] = []
    try:
        for _ in range(connections):
            sock = socket.create_connection((host, int(port)), timeout=10)
            sock.sendall(frame)
            sockets.append(sock)
        for sock in sockets:
            (length,) = struct.unpack(">i", _read_exactly(sock, 4))
            _read_exactly(sock, length)
        figures = run()
        figures.extra["idle_connections"] = len(sockets)
        return figures
    finally:
        for sock in sockets:
            sock.close()


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed an idle connection")
        data += chunk
    return data


def while_scraped(url: str | None, run: Callable[[], Figures], every_s: float = 0.1) -> Figures:
    """Run a workload while a thread GETs the broker's metrics endpoint every ``every_s``."""
    import urllib.request

    assert url is not None
    stop = threading.Event()
    scrapes: list[int] = []

    def scrape() -> None:
        while not stop.wait(every_s):
            with urllib.request.urlopen(url, timeout=10) as answer:
                scrapes.append(len(answer.read()))

    thread = threading.Thread(target=scrape, daemon=True)
    thread.start()
    try:
        figures = run()
    finally:
        stop.set()
        thread.join(10)
    figures.extra.update(scrapes=len(scrapes), scrape_bytes=max(scrapes, default=0))
    return figures


def under_cpu_hog(run: Callable[[], Figures]) -> Figures:
    """Run a workload while another process spins on one core (the busy-machine case: a neighbour
    takes half of this 2-core machine), to see how each broker degrades."""
    import subprocess
    import sys

    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
    try:
        figures = run()
    finally:
        hog.kill()
        hog.wait()
    figures.extra["cpu_hog"] = 1
    return figures
