"""Issue #22: Fetch responses sent with sendfile (PLAINTEXT) or read (TLS) carry every record exactly.

One broker with a PLAINTEXT and an SSL listener (trustme CA). Topics with small segments, so that
reads span segments and every fetch of a consumer catching up starts in a sealed one (the worker
thread locates the batches; the event loop sends them with sendfile). confluent-kafka,
kafka-python and kcat consume over both listeners and every record is compared; the zero-copy
counter shows which path served them. Then segments are deleted (DeleteRecords, retention) while a
response larger than the socket buffers is still being sent: its bytes stay whole. Large TLS
responses left unread cost the broker little memory (they are sent from the segments in chunks).
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import socket
import ssl
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition

from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.headers import RequestHeader, ResponseHeader, response_header_version
from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from rivven_kproto.codec.records.records import decode_batches

from . import raw_client
from .broker_process import BrokerProcess, server_certificate
from .test_metrics import Scraper
from .test_security import LISTENER

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
TIMEOUT_S = 60.0
SIZES = (100, 1500, 9000, 30000)
COUNT = 400
ZERO_COPY = "rivven_bytes_sent_zero_copy_total"


class Broker:
    def __init__(self, process: BrokerProcess, ca: Path, ports: dict[str, int]) -> None:
        self.process, self.ca, self.ports = process, ca, ports
        self.scraper = Scraper(process)

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def zero_copy_bytes(self) -> float:
        return self.scraper.samples().get(ZERO_COPY, 0.0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("zerocopy")
    ca, keystore, ca_file = server_certificate(base)
    config = base / "server.properties"
    config.write_text(
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"
        "log.retention.check.interval.ms=100\nkproto.metrics.max.age.ms=0\n"
    )
    process = BrokerProcess(base / "data", base / "broker.log", ["--config", str(config), "--metrics", "127.0.0.1:0"]).start()
    try:
        ports = {"PLAINTEXT": process.port or 0, **{name: int(port) for name, port in LISTENER.findall(process.log_text())}}
        yield Broker(process, ca_file, ports)
    finally:
        assert process.stop() == 0, process.log_text()[-3000:]


def client_config(broker: Broker, listener: str) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": broker.address(listener), "security.protocol": listener}
    if listener == "SSL":
        config["ssl.ca.location"] = str(broker.ca)
    return config


def value_of(i: int) -> bytes:
    size = SIZES[i % len(SIZES)]
    pattern = hashlib.sha256(str(i).encode()).hexdigest().encode()
    return (f"{i:06d}:".encode() + pattern * (size // len(pattern) + 1))[:size]


def create_topic(broker: Broker, topic: str, segment_bytes: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.address("PLAINTEXT")})
    config = {"segment.bytes": str(segment_bytes), "max.message.bytes": str(4 << 20)}
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values():
        future.result(TIMEOUT_S)


def produce(broker: Broker, topic: str, values: list[bytes]) -> None:
    # Batches of at most 64 KiB: a batch larger than segment.bytes is refused.
    producer = Producer({"bootstrap.servers": broker.address("PLAINTEXT"), "acks": "all", "linger.ms": 20,
                         "batch.size": 65536})
    failed: list[Any] = []
    for i, value in enumerate(values):
        producer.produce(topic, key=str(i % COUNT).encode(), value=value, partition=0,
                         on_delivery=lambda error, _: failed.append(error) if error else None)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert failed == []


@pytest.fixture(scope="module")
def topic(broker: Broker) -> str:
    """~4 MB in segments of 128 KiB."""
    name = f"zc-{uuid.uuid4().hex[:6]}"
    create_topic(broker, name, 128 * 1024)
    produce(broker, name, [value_of(i) for i in range(COUNT)])
    segments = list((broker.process.data_dir / f"{name}-0").glob("*.log"))
    assert len(segments) > 10
    return name


Consumed = list[tuple[int, bytes | None, bytes | None]]


def confluent(broker: Broker, listener: str, topic: str, count: int, isolation: str = "read_uncommitted") -> Consumed:
    consumer = Consumer({**client_config(broker, listener), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: Consumed = []
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(500, 1.0):
                assert message.error() is None, message.error()
                got.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return got


def kafka_python(broker: Broker, listener: str, topic: str, count: int, isolation: str = "read_uncommitted") -> Consumed:
    extra: dict[str, Any] = {"security_protocol": listener}
    if listener == "SSL":
        extra.update(ssl_cafile=str(broker.ca), ssl_check_hostname=False)
    consumer = KafkaConsumer(bootstrap_servers=broker.address(listener), enable_auto_commit=False,
                             isolation_level=isolation, max_partition_fetch_bytes=4 << 20, **extra)
    partition = KafkaPythonPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got: Consumed = []
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend((r.offset, r.key, r.value) for r in records)
    finally:
        consumer.close()
    return got


def kcat(broker: Broker, listener: str, topic: str, count: int, isolation: str = "read_uncommitted") -> Consumed:
    security = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={broker.ca}"] if listener == "SSL" else []
    done = subprocess.run(
        [KCAT, "-b", broker.address(listener), "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
         "-X", f"isolation.level={isolation}", "-X", "broker.address.family=v4", *security, "-f", "%o|%k|%s\n"],
        capture_output=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    got: Consumed = []
    for line in done.stdout.splitlines():
        offset, key, value = line.split(b"|")
        got.append((int(offset), key, value))
    return got


CLIENTS = {"confluent-kafka": confluent, "kafka-python": kafka_python, "kcat": kcat}


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SSL"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_every_record_of_a_multi_segment_topic_arrives(broker: Broker, topic: str, client: str, listener: str) -> None:
    before = broker.zero_copy_bytes()
    got = CLIENTS[client](broker, listener, topic, COUNT)
    assert got == [(i, str(i).encode(), value_of(i)) for i in range(COUNT)]
    spliced = broker.zero_copy_bytes() - before
    if listener == "PLAINTEXT":
        assert spliced >= 0.9 * sum(len(value_of(i)) for i in range(COUNT))  # (the rest: small tail reads)
    else:
        assert spliced == 0  # TLS: read into Python and encrypted


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SSL"])
@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "kcat"])
def test_read_committed_skips_aborted_transactions_in_zero_copy_regions(
        broker: Broker, client: str, listener: str, transactional_topic: tuple[str, list[int]]) -> None:
    name, committed = transactional_topic
    before = broker.zero_copy_bytes()
    got = CLIENTS[client](broker, listener, name, len(committed), "read_committed")
    assert [(key, value) for _, key, value in got] == [(str(i).encode(), value_of(i * 4 + 2)) for i in committed]
    spliced = broker.zero_copy_bytes() - before
    assert spliced > 0 if listener == "PLAINTEXT" else spliced == 0


@pytest.fixture(scope="module")
def transactional_topic(broker: Broker) -> tuple[str, list[int]]:
    """Ten transactions of ~80 KB (each one region), every other one aborted, in 128 KiB segments."""
    name = f"zc-txn-{uuid.uuid4().hex[:6]}"
    create_topic(broker, name, 128 * 1024)
    producer = Producer({"bootstrap.servers": broker.address("PLAINTEXT"), "transactional.id": name, "linger.ms": 20,
                         "batch.size": 65536})
    producer.init_transactions(TIMEOUT_S)
    committed: list[int] = []
    for txn in range(10):
        producer.begin_transaction()
        keys = list(range(txn * 1000, txn * 1000 + 9))
        for i in keys:
            producer.produce(name, key=str(i).encode(), value=value_of(i * 4 + 2), partition=0)  # 9000 B each
        if txn % 2:
            producer.abort_transaction(TIMEOUT_S)
        else:
            producer.commit_transaction(TIMEOUT_S)
            committed.extend(keys)
    return name, committed


def fetch_frame_prefix(broker: Broker, topic: str) -> tuple[socket.socket, int]:
    """Send a Fetch of everything on a socket with a tiny receive buffer; read only the size prefix."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(TIMEOUT_S)
    sock.connect(("127.0.0.1", broker.ports["PLAINTEXT"]))
    request = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                           topics=[FetchTopic(topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=0,
                                                                                      partition_max_bytes=50 << 20)])],
                           forgotten_topics_data=[])
    header = RequestHeader(request_api_key=1, request_api_version=11, correlation_id=7, client_id="zc")
    sock.sendall(encode_request(header, request))
    (size,) = struct.unpack(">i", raw_client.recv_exact(sock, 4))
    return sock, size


def decode_fetch(frame: bytes) -> FetchResponse:
    stream = io.BytesIO(frame)
    ResponseHeader.decode_from(stream, response_header_version(FetchRequest, 11))
    return FetchResponse.decode(frame[stream.tell():], 11)


@pytest.mark.parametrize("how", ["delete-records", "retention"])
def test_segments_deleted_while_a_large_fetch_is_sent(broker: Broker, how: str) -> None:
    name = f"zc-del-{how}-{uuid.uuid4().hex[:6]}"
    create_topic(broker, name, 1 << 20)
    count = 120
    big = [value_of(i)[:6] + bytes([65 + i % 26]) * 200_000 for i in range(count)]  # 24 MB in 1 MiB segments
    produce(broker, name, big)
    directory = broker.process.data_dir / f"{name}-0"
    assert len(list(directory.glob("*.log"))) > 20
    sock, size = fetch_frame_prefix(broker, name)
    try:
        # The broker can have buffered at most its send buffer's maximum (plus our tiny receive
        # buffer): the bulk of this response is still unsent while the segments go.
        send_max = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
        assert size > send_max + (1 << 20)
        admin = AdminClient({"bootstrap.servers": broker.address("PLAINTEXT")})
        if how == "delete-records":
            for future in admin.delete_records([TopicPartition(name, 0, count)]).values():
                assert future.result(TIMEOUT_S).low_watermark == count
        else:
            resource = ConfigResource("topic", name, set_config={"retention.bytes": "1"})
            for future in admin.alter_configs([resource]).values():
                future.result(TIMEOUT_S)
        deadline = time.monotonic() + TIMEOUT_S
        while len(list(directory.glob("*.log"))) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(list(directory.glob("*.log"))) == 1, sorted(p.name for p in directory.iterdir())
        response = decode_fetch(raw_client.recv_exact(sock, size))
    finally:
        sock.close()
    partition = response.responses[0].partitions[0]
    assert partition.error_code == Errors.NONE
    values = [record.value for batch in decode_batches(partition.record_bytes()) for record in batch.records]
    assert values == big
    # The deleted offsets are gone for the next fetch: a correct error, not stale bytes.
    with raw_client.connect(broker.address("PLAINTEXT")) as again:
        request = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                               topics=[FetchTopic(topic=name, partitions=[FetchPartition(partition=0, fetch_offset=0,
                                                                                         partition_max_bytes=1 << 20)])],
                               forgotten_topics_data=[])
        error = raw_client.call(again, request, 11).responses[0].partitions[0].error_code
    assert error == Errors.OFFSET_OUT_OF_RANGE


UNREAD = 4  # TLS connections whose large Fetch response is never read
# What the broker may grow by while they wait (measured: ~4 MiB; before #37 item 7 each response
# was built whole in memory, plaintext and ciphertext: ~100 MiB for these four).
UNREAD_GROWTH_BOUND = 40 << 20
PG_RECORDS = 80  # of 200 KB: a 16 MB Fetch on the PostgreSQL engine


def rss_bytes(broker: Broker) -> int:
    assert broker.process.process is not None
    status = Path(f"/proc/{broker.process.process.pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    assert match is not None
    return int(match.group(1)) * 1024


def tls_fetch(broker: Broker, topic: str, receive_buffer: int | None = None) -> ssl.SSLSocket:
    """A TLS connection (``receive_buffer``: a tiny one, so the kernel holds little) that sent a
    Fetch of the whole partition."""
    context = ssl.create_default_context(cafile=str(broker.ca))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(TIMEOUT_S)
    sock.connect(("127.0.0.1", broker.ports["SSL"]))
    secured = context.wrap_socket(sock, server_hostname="127.0.0.1")
    request = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=50 << 20, isolation_level=0, session_id=0,
                           session_epoch=-1, topics=[FetchTopic(topic=topic, partitions=[FetchPartition(
                               partition=0, fetch_offset=0, partition_max_bytes=50 << 20)])], forgotten_topics_data=[])
    header = RequestHeader(request_api_key=1, request_api_version=11, correlation_id=7, client_id="tls-unread")
    secured.sendall(encode_request(header, request))
    return secured


def test_unread_tls_fetches_do_not_pile_up_in_broker_memory(broker: Broker) -> None:
    """Issue #37 item 7: four unread 30 MiB Fetch responses on a TLS listener raised the broker from
    65 to 493 MiB (each built whole in memory, then encrypted whole). Now a TLS response's record
    bytes are read from the segments and sent a chunk at a time: a reader that does not read holds
    a bounded amount, and one that does gets every byte."""
    name = f"zc-tls-{uuid.uuid4().hex[:6]}"
    create_topic(broker, name, 1 << 20)
    big = [value_of(i)[:6] + bytes([65 + i % 26]) * 200_000 for i in range(40)]  # 8 MB in 1 MiB segments
    produce(broker, name, big)
    growth = unread_tls_fetches_growth(broker, name, big)
    assert growth < UNREAD_GROWTH_BOUND, f"grew by {growth >> 20} MiB"


@pytest.fixture
def pg_broker(tmp_path: Path, postgres_url: str) -> Iterator[Broker]:
    """A broker on the PostgreSQL engine with a PLAINTEXT and an SSL listener."""
    ca, keystore, ca_file = server_certificate(tmp_path)
    config = tmp_path / "server.properties"
    config.write_text("listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0\n"
                      f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\nkproto.metrics.max.age.ms=0\n")
    process = BrokerProcess(tmp_path / "data", tmp_path / "broker.log",
                            ["--config", str(config), "--storage", postgres_url, "--metrics", "127.0.0.1:0"]).start()
    try:
        ports = {"PLAINTEXT": process.port or 0, **{name: int(port) for name, port in LISTENER.findall(process.log_text())}}
        yield Broker(process, ca_file, ports)
    finally:
        assert process.stop() == 0, process.log_text()[-3000:]


def test_unread_tls_fetches_do_not_pile_up_on_the_postgresql_engine(pg_broker: Broker) -> None:
    """Issue #37 item 7 on the PostgreSQL engine: a Fetch there was read from the database whole and
    built in memory (four unread 16 MB responses: about 4 x 16 MB held, and more in copies). Now
    its batches are located first (sizes only) and read from the database a chunk at a time as the
    connection takes them; a reader that reads gets every byte."""
    name = f"pg-tls-{uuid.uuid4().hex[:6]}"
    create_topic(pg_broker, name, 1 << 20)
    big = [value_of(i)[:6] + bytes([65 + i % 26]) * 200_000 for i in range(PG_RECORDS)]  # 16 MB, below the cache
    produce(pg_broker, name, big)
    growth = unread_tls_fetches_growth(pg_broker, name, big)
    assert growth < UNREAD_GROWTH_BOUND, f"grew by {growth >> 20} MiB"


def unread_tls_fetches_growth(broker: Broker, name: str, values: list[bytes]) -> int:
    """How much the broker grew (peak RSS) while ``UNREAD`` TLS connections left a whole-partition
    Fetch unread and one more read its answer (checked: every value, in order)."""
    before = rss_bytes(broker)
    unread: list[ssl.SSLSocket] = []
    peak = before
    try:
        for _ in range(UNREAD):
            sock = tls_fetch(broker, name, receive_buffer=4096)
            unread.append(sock)
            (size,) = struct.unpack(">i", raw_client.recv_exact(sock, 4))  # the broker is sending it now
            assert size > 8_000_000
            peak = max(peak, rss_bytes(broker))
        reader = tls_fetch(broker, name)
        try:
            response = decode_fetch(raw_client.read_frame(reader))
        finally:
            reader.close()
        peak = max(peak, rss_bytes(broker))
    finally:
        for sock in unread:
            sock.close()
    partition = response.responses[0].partitions[0]
    assert partition.error_code == Errors.NONE
    assert [record.value for batch in decode_batches(partition.record_bytes()) for record in batch.records] == values
    return peak - before


def test_every_record_arrives_from_the_postgresql_engine_over_both_listeners(pg_broker: Broker) -> None:
    """The PostgreSQL engine's located reads (rows read as they are sent) and in-memory tail
    (cached batches referenced) carry every record exactly, by plain socket and by TLS, to
    confluent-kafka (at read_committed: the last stable offset's bound) and kcat."""
    name = f"pg-zc-{uuid.uuid4().hex[:6]}"
    create_topic(pg_broker, name, 1 << 20)
    values = [value_of(i) for i in range(COUNT)] * 3  # ~12 MB: the oldest below the 4 MiB cache
    produce(pg_broker, name, values)
    expected = [(i, str(i % COUNT).encode(), value) for i, value in enumerate(values)]
    for listener in ("PLAINTEXT", "SSL"):
        assert confluent(pg_broker, listener, name, len(values), "read_committed") == expected, listener
        assert kcat(pg_broker, listener, name, len(values)) == expected, listener
