"""Issue #15 item 4: connection limits and running out of file descriptors, against a real broker.

* ``max.connections.per.ip``: a connection beyond the limit is closed at once; others are served.
* ``max.connections``: beyond it the broker stops accepting (clients wait in the backlog, as with
  Kafka's blocked acceptor) and serves the waiting client once a connection closes.
* Unset, the limit leaves a reserve of the process's descriptors for the log: filling every
  connection slot never starves appends and flushes.
* Partitions hold no descriptors of their own: thousands fit under a limit of 1,024.
* Forced past the descriptor limit (``max.connections`` above it), accept and the flusher meet
  EMFILE: the broker logs a one-line warning, keeps serving the connections it has, loses nothing
  acknowledged, and recovers when descriptors are free again.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.headers import RequestHeader, ResponseHeader, response_header_version
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest
from rivven_kproto.codec.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from rivven_kproto.codec.records.records import Record, build_batch
from rivven_kproto.codec.schema import REQUESTS, RESPONSES

from . import raw_client
from .broker_process import BrokerProcess
from .txn_helpers import Raw, create_topics

ANSWER_TIMEOUT_S = 30.0
NO_ANSWER_WAIT_S = 1.0
RETRIES = 300  # how long a client in the backlog is watched for an (unexpected) answer


def start(tmp_path: Path, properties: str, open_files_limit: int | None = None) -> BrokerProcess:
    config = tmp_path / "server.properties"
    config.write_text(properties)
    return BrokerProcess(
        tmp_path / "data", tmp_path / "broker.log", ["--config", str(config)], open_files_limit=open_files_limit
    ).start()


@contextlib.contextmanager
def running(tmp_path: Path, properties: str, open_files_limit: int | None = None) -> Iterator[BrokerProcess]:
    broker = start(tmp_path, properties, open_files_limit)
    try:
        yield broker
    finally:
        if broker.alive():
            assert broker.stop() == 0, broker.log_text()[-3000:]


def answers(sock: socket.socket, timeout: float = ANSWER_TIMEOUT_S) -> bool:
    """True when ApiVersions on ``sock`` is answered within ``timeout``."""
    sock.settimeout(timeout)
    try:
        return raw_client.call(sock, ApiVersionsRequest(), 2).error_code == Errors.NONE
    except (TimeoutError, ConnectionError):
        return False


def produce_and_read(bootstrap: str, topic: str, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(200):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) >= count:
                break
    finally:
        consumer.close()
    return values


def served_once_the_broker_saw_the_close(broker: BrokerProcess) -> socket.socket:
    """A new connection is refused until the broker has processed a close: retry (bounded)."""
    for _ in range(RETRIES):
        sock = raw_client.connect(broker.bootstrap)
        if answers(sock):
            return sock
        sock.close()
        time.sleep(0.1)
    raise AssertionError("no connection slot came free")


def test_max_connections_per_ip_closes_the_extra_connection(tmp_path: Path) -> None:
    with running(tmp_path, "max.connections.per.ip=3\n") as broker:
        held = [raw_client.connect(broker.bootstrap) for _ in range(3)]
        assert all(answers(sock) for sock in held)
        extra = raw_client.connect(broker.bootstrap)
        assert raw_client.closed_by_peer(extra)
        held.pop().close()
        replacement = served_once_the_broker_saw_the_close(broker)
        for sock in [*held, replacement]:
            sock.close()
        assert "max.connections.per.ip=3 reached" in broker.log_text()


def test_max_connections_makes_new_clients_wait_for_a_free_slot(tmp_path: Path) -> None:
    with running(tmp_path, "max.connections=4\n") as broker:
        held = [raw_client.connect(broker.bootstrap) for _ in range(4)]
        assert all(answers(sock) for sock in held)
        waiting = raw_client.connect(broker.bootstrap)  # completes in the kernel's backlog
        assert not answers(waiting, NO_ANSWER_WAIT_S)
        held.pop().close()
        # The request sent while waiting is read once the broker accepts the connection.
        waiting.settimeout(ANSWER_TIMEOUT_S)
        assert raw_client.read_frame(waiting)
        for sock in [*held, waiting]:
            sock.close()


def test_the_default_limit_keeps_descriptors_for_the_log(tmp_path: Path) -> None:
    limit = 200
    with running(tmp_path, "", open_files_limit=limit) as broker:
        create_topics(broker.bootstrap, {"kept": 1})
        raw = Raw(broker.bootstrap)
        held = [raw_client.connect(broker.bootstrap) for _ in range(limit)]
        try:
            # More clients than descriptors: the broker accepts what its limit allows, and appends
            # and flushes keep working through a connection it already has.
            assert raw.produce("kept", 0, [b"a", b"b"])[0] == Errors.NONE
            assert raw.end_offsets("kept", [0], committed=False) == {0: 2}
        finally:
            raw.close()
            for sock in held:
                sock.close()
        assert produce_and_read(broker.bootstrap, "kept", 3)[:2] == [b"a", b"b"]
        text = broker.log_text()
        assert "cannot accept" not in text and "postponed" not in text and "Traceback" not in text


def wait_for_log(broker: BrokerProcess, text: str) -> None:
    for _ in range(RETRIES):
        if text in broker.log_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never appeared in the broker log:\n{broker.log_text()[-3000:]}")


def send_produce(sock: socket.socket, topic: str, values: list[bytes]) -> None:
    records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=v) for i, v in enumerate(values)]
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=build_batch(records))])],
    )
    header = RequestHeader(request_api_key=0, request_api_version=9, correlation_id=7, client_id="raw")
    sock.sendall(encode_request(header, request))


def produce_answer(sock: socket.socket, timeout: float) -> int | None:
    """The error code of the Produce answer on ``sock``, or None if none came within ``timeout``."""
    sock.settimeout(timeout)
    try:
        frame = raw_client.read_frame(sock)
    except TimeoutError:
        return None
    stream = io.BytesIO(frame)
    ResponseHeader.decode_from(stream, response_header_version(REQUESTS[0], 9))
    response = RESPONSES[0].decode(frame[stream.tell() :], 9)
    return int(response.responses[0].partition_responses[0].error_code)


@pytest.mark.parametrize("fsync", ["interval", "always"])
def test_running_out_of_descriptors_is_survived(tmp_path: Path, fsync: str) -> None:
    limit = 128
    with running(tmp_path, f"max.connections=100000\nfsync={fsync}\n", open_files_limit=limit) as broker:
        create_topics(broker.bootstrap, {"scarce": 1})
        producer = raw_client.connect(broker.bootstrap)
        assert answers(producer)
        held = [raw_client.connect(broker.bootstrap) for _ in range(limit + 20)]
        try:
            wait_for_log(broker, "cannot accept a connection (Too many open files)")
            send_produce(producer, "scarce", [b"x", b"y"])
            if fsync == "interval":  # acknowledged once written; the flusher then meets EMFILE
                assert produce_answer(producer, ANSWER_TIMEOUT_S) == Errors.NONE
                wait_for_log(broker, "flush postponed")
            else:  # acks=all waits for an fsync, which cannot happen until descriptors are free
                wait_for_log(broker, "flush postponed")
                assert produce_answer(producer, NO_ANSWER_WAIT_S) is None
        finally:
            for sock in held:
                sock.close()
        if fsync == "always":
            assert produce_answer(producer, ANSWER_TIMEOUT_S) == Errors.NONE
        producer.close()
        assert produce_and_read(broker.bootstrap, "scarce", 2)[:2] == [b"x", b"y"]
        text = broker.log_text()
        assert "Traceback" not in text
        assert len([line for line in text.splitlines() if "cannot accept" in line]) <= 20


def test_partitions_do_not_take_descriptors_from_connections(tmp_path: Path) -> None:
    """Issue #22: partitions hold no descriptors of their own (segment files share a cache of an
    eighth of the limit, indexes are in memory), so a topic of 1,000 partitions and 2,000 more by
    CreatePartitions fit under an open-files limit of 1,024; appends to every partition keep the
    broker's descriptors below the limit and new connections are still served."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    with running(tmp_path, "", open_files_limit=1024) as broker:
        create_topics(broker.bootstrap, {"huge": 1000})
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions("huge", 3000)])["huge"].result(ANSWER_TIMEOUT_S * 4)
        assert len(list((tmp_path / "data").glob("huge-*"))) == 3000
        raw = Raw(broker.bootstrap)
        try:
            for partition in range(0, 3000, 7):
                assert raw.produce("huge", partition, [b"still", b"served"])[0] == Errors.NONE
        finally:
            raw.close()
        assert broker.process is not None
        assert len(os.listdir(f"/proc/{broker.process.pid}/fd")) < 1024 // 2
        sock = raw_client.connect(broker.bootstrap)
        try:
            assert answers(sock)
        finally:
            sock.close()


METRICS_HELD = 150  # idle connections opened to the metrics port: more than the descriptors the broker has
METRICS_CAP = 16  # kproto.metrics.max.connections (the default)


def test_idle_metrics_connections_cannot_take_the_brokers_descriptors(tmp_path: Path) -> None:
    """Issue #37 item 6: 300 idle connections to the metrics port took every descriptor (Kafka clients
    timed out, acks waited on postponed flushes, a traceback every 0.1 s). The metrics listener now
    holds at most kproto.metrics.max.connections, closes the others at once (one log line per
    interval), and its connections count in the descriptor budget: a producer still gets its acks
    while they are held, and /healthz answers once they are gone."""
    from .test_metrics import Scraper

    limit = 128
    properties = "kproto.metrics.listen=127.0.0.1:0\nkproto.metrics.connections.max.idle.ms=600000\nfsync=always\n"
    started = time.monotonic()
    with running(tmp_path, properties, open_files_limit=limit) as broker:
        create_topics(broker.bootstrap, {"acked": 1})
        scraper = Scraper(broker)
        host, port = scraper.base.removeprefix("http://").rsplit(":", 1)
        held = [socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT_S) for _ in range(METRICS_HELD)]
        try:
            wait_for_log(broker, "refusing a metrics connection")
            # The refused ones are closed by the broker; the first ones stay open (idle, within the cap).
            assert sum(raw_client.closed_by_peer(sock, ANSWER_TIMEOUT_S) for sock in held[METRICS_CAP:]) == (
                METRICS_HELD - METRICS_CAP)
            assert produce_and_read(broker.bootstrap, "acked", 3)[:3] == [b"0", b"1", b"2"]
        finally:
            for sock in held:
                sock.close()
        for _ in range(RETRIES):  # a slot is free once the broker has seen a close
            with contextlib.suppress(OSError):
                if scraper.get("/healthz") == (200, "ok\n"):
                    break
            time.sleep(0.1)
        else:
            raise AssertionError("/healthz never answered after the metrics connections closed")
        text = broker.log_text()
    elapsed = time.monotonic() - started
    assert "Traceback" not in text and "postponed" not in text and "cannot accept" not in text
    refusals = [line for line in text.splitlines() if "refusing a metrics connection" in line]
    assert 1 <= len(refusals) <= 2 + elapsed / 10  # once per 10 s interval
