"""Issue #15 (part): limits a hostile or careless client cannot get past, against a real broker.

* ``fetch.max.bytes``: one Fetch asking for 2 GiB gets at most the broker's cap (Kafka's rule:
  min of the request's max_bytes and the broker's, the first batch whole), not a response the size
  of the log built in memory.
* Topic names: a name with a trailing newline is refused (a ``$`` anchor used to accept it and
  create a ``name\\n-0`` directory).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest
from rivven_kproto.codec.messages.create_topics import CreatableTopic, CreateTopicsRequest
from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic
from rivven_kproto.codec.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from rivven_kproto.codec.records.batch import iter_headers
from rivven_kproto.codec.records.records import Record, build_batch

from . import raw_client
from .broker_process import BrokerProcess
from .txn_helpers import Raw, create_topics

FETCH_MAX_BYTES = 64 * 1024
INT32_MAX = (1 << 31) - 1
PROBE_MAX_TRIPS = 200_000
# Round trips of another client that must fit inside one 24,000-topic request (it is answered in
# 48 slices, each followed by a turn of the event loop: about 260 seen; with the loop held, 0).
PROBE_TRIPS_DURING = 10


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base: Path = tmp_path_factory.mktemp("capped")
    config = base / "server.properties"
    config.write_text(f"fetch.max.bytes={FETCH_MAX_BYTES}\n")
    broker = BrokerProcess(base / "data", base / "broker.log", ["--config", str(config)]).start()
    yield broker
    broker.stop()


def fetch(bootstrap: str, topic: str, max_bytes: int) -> bytes:
    sock = raw_client.connect(bootstrap)
    try:
        request = FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
            topics=[FetchTopic(topic=topic, partitions=[
                FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=max_bytes)
            ])],
        )
        partition = raw_client.call(sock, request, 11).responses[0].partitions[0]
        assert partition.error_code == Errors.NONE
        return bytes(partition.records or b"")
    finally:
        sock.close()


def test_fetch_response_is_capped_by_fetch_max_bytes(capped: BrokerProcess) -> None:
    create_topics(capped.bootstrap, {"big": 1})
    producer = Producer({"bootstrap.servers": capped.bootstrap, "linger.ms": 5, "batch.size": 16384})
    for _ in range(400):
        producer.produce("big", b"x" * 1000, partition=0)
    assert producer.flush(30) == 0
    data = fetch(capped.bootstrap, "big", INT32_MAX)
    batches = [h for _, h in iter_headers(data)]
    assert batches and len(data) <= FETCH_MAX_BYTES  # 400 KB in the log, at most 64 KiB returned
    # A client asking for less than the cap still gets what it asked for.
    assert len(fetch(capped.bootstrap, "big", 20_000)) <= 20_000 + batches[0].size


def test_topic_name_with_a_trailing_newline_is_refused(capped: BrokerProcess) -> None:
    sock = raw_client.connect(capped.bootstrap)
    try:
        request = CreateTopicsRequest(
            topics=[CreatableTopic(name="evil\n", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=5000,
        )
        (result,) = raw_client.call(sock, request, 4).topics
    finally:
        sock.close()
    assert result.error_code == Errors.INVALID_TOPIC_EXCEPTION
    assert not any("\n" in path.name for path in capped.data_dir.iterdir())


def test_an_administrative_abort_leaves_a_log_line_naming_the_client(capped: BrokerProcess) -> None:
    create_topics(capped.bootstrap, {"marked": 1})
    raw = Raw(capped.bootstrap)
    try:
        assert raw.write_txn_markers(4242, 0, False, {"marked": [0]}) == {("marked", 0): Errors.NONE}
    finally:
        raw.close()
    lines = [line for line in capped.log_text().splitlines() if "WriteTxnMarkers ABORT for producer 4242" in line]
    assert len(lines) == 1 and "127.0.0.1" in lines[0] and "marked[0]" in lines[0]


@pytest.mark.parametrize("internal", ["__consumer_offsets", "__transaction_state", "__cluster_metadata"])
def test_internal_topic_names_are_never_created_or_appended_to(capped: BrokerProcess, internal: str) -> None:
    sock = raw_client.connect(capped.bootstrap)
    try:
        metadata = raw_client.call(
            sock, MetadataRequest(
                topics=[MetadataRequestTopic(name=internal)],
                allow_auto_topic_creation=True,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            ), 9
        )
        assert metadata.topics[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        request = CreateTopicsRequest(
            topics=[CreatableTopic(name=internal, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=5000,
        )
        (created,) = raw_client.call(sock, request, 4).topics
        assert created.error_code == Errors.INVALID_REQUEST
        produce = ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                TopicProduceData(
                    name=internal,
                    partition_data=[PartitionProduceData(index=0, records=build_batch([Record(0, 0, None, b"x")]))],
                )
            ],
        )
        (answer,) = raw_client.call(sock, produce, 9).responses[0].partition_responses
        assert answer.error_code == Errors.INVALID_TOPIC_EXCEPTION
    finally:
        sock.close()
    assert not any(path.name.startswith(internal) for path in capped.data_dir.iterdir())


def test_a_request_with_millions_of_elements_is_refused_without_stalling_others(capped: BrokerProcess) -> None:
    """Metadata v1 with 4M empty topic names (8 MB): the connection is closed, unread, at once."""
    count = 4_000_000
    frame = struct.pack(">hhi", 3, 1, 99) + struct.pack(">h", 3) + b"raw" + struct.pack(">i", count) + b"\x00\x00" * count
    bystander = raw_client.connect(capped.bootstrap)
    hostile = raw_client.connect(capped.bootstrap)
    try:
        hostile.sendall(struct.pack(">i", len(frame)) + frame)
        assert raw_client.closed_by_peer(hostile, timeout=60)
        assert raw_client.call(bystander, ApiVersionsRequest(), 2).error_code == Errors.NONE
    finally:
        hostile.close()
        bystander.close()
    assert "more array elements than one request may carry" in capped.log_text()


def test_a_large_legal_request_is_still_served(capped: BrokerProcess) -> None:
    """20,000 topics in one Metadata request: within the element budget, decoded off the event loop."""
    topics = [MetadataRequestTopic(name=f"absent-{i}") for i in range(20_000)]
    sock = raw_client.connect(capped.bootstrap, timeout=60)
    try:
        request = MetadataRequest(
            topics=topics,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        response = raw_client.call(sock, request, 9)
    finally:
        sock.close()
    assert len(response.topics) == 20_000
    assert {t.error_code for t in response.topics} == {Errors.UNKNOWN_TOPIC_OR_PARTITION}


class _Probe(threading.Thread):
    """ApiVersions round trips, one after another, each noted with the phase it began and ended in."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.sock = raw_client.connect(bootstrap, timeout=60)
        self.phase = 0  # set by the test: 1 while the large request is in flight, 2 after its answer
        self.trips: list[tuple[int, int]] = []
        self.answered = threading.Event()  # the first round trip is done: the probe is being served

    def run(self) -> None:
        for _ in range(PROBE_MAX_TRIPS):
            if self.phase == 2:
                return
            began = self.phase
            assert raw_client.call(self.sock, ApiVersionsRequest(), 2).error_code == Errors.NONE
            self.trips.append((began, self.phase))
            self.answered.set()


def test_other_clients_are_answered_while_a_large_metadata_request_is_served(capped: BrokerProcess) -> None:
    """Issue #37 item 5: one client's 24,000-topic Metadata request (decoded, answered and encoded
    in slices and on worker threads) never holds the event loop for the whole request: another
    connection's round trips begin and end between its send and the first byte of its answer."""
    request = MetadataRequest(
        topics=[MetadataRequestTopic(name=f"absent-{i}") for i in range(24_000)], allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False, include_topic_authorized_operations=False,
    )
    probe = _Probe(capped.bootstrap)
    hostile = raw_client.connect(capped.bootstrap, timeout=120)
    try:
        probe.start()
        assert probe.answered.wait(timeout=60)
        raw_client.send(hostile, request, 9)
        probe.phase = 1
        size = raw_client.recv_exact(hostile, 4)  # the answer has begun: served
        probe.phase = 2
        body = raw_client.recv_exact(hostile, struct.unpack(">i", size)[0])
        probe.join(timeout=60)
    finally:
        probe.phase = 2
        hostile.close()
        probe.sock.close()
    assert len(raw_client.decode_response(body, MetadataRequest.API_KEY, 9).topics) == 24_000
    during = [trip for trip in probe.trips if trip == (1, 1)]
    assert len(during) >= PROBE_TRIPS_DURING, f"only {len(during)} round trips while the request was served"
