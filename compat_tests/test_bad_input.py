"""Hostile and unsupported input: the offending connection closes, everyone else keeps working."""

from __future__ import annotations

import os
import struct

from confluent_kafka.admin import AdminClient

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from rivven_kproto.codec.messages.metadata import MetadataRequest
from rivven_kproto.codec.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from rivven_kproto.codec.messages.sasl_authenticate import SaslAuthenticateRequest
from rivven_kproto.codec.messages.sasl_handshake import SaslHandshakeRequest

from . import raw_client
from .broker_process import BrokerProcess


def broker_answers(broker: BrokerProcess) -> bool:
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    return 0 in metadata.brokers


def test_two_gib_frame_closes_only_that_connection(broker: BrokerProcess) -> None:
    bystander = raw_client.connect(broker.bootstrap)
    bad = raw_client.connect(broker.bootstrap)
    bad.sendall(struct.pack(">i", 0x7FFFFFFF) + b"\x00\x12\x00\x00")
    assert raw_client.closed_by_peer(bad)
    response = raw_client.call(bystander, ApiVersionsRequest(), 2)
    assert response.error_code == 0
    assert broker_answers(broker)
    assert "closing connection" in broker.log_text()


def test_random_bytes_and_negative_length(broker: BrokerProcess) -> None:
    # Random bytes behind a size prefix beyond socket.request.max.bytes: a random prefix alone is a
    # legitimate size (the broker then waits for the frame) about 2% of the time.
    garbage = struct.pack(">i", 0x7F000000 + int.from_bytes(os.urandom(2), "big")) + os.urandom(60)
    for payload in (garbage, struct.pack(">i", -5) + b"abcd", struct.pack(">i", 3) + b"abc"):
        sock = raw_client.connect(broker.bootstrap)
        sock.sendall(payload)
        assert raw_client.closed_by_peer(sock), payload
    assert broker_answers(broker)


def test_unknown_api_key_closes_connection(broker: BrokerProcess) -> None:
    sock = raw_client.connect(broker.bootstrap)
    frame = struct.pack(">hhi", 9999, 0, 7) + struct.pack(">h", 3) + b"raw"
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    assert raw_client.closed_by_peer(sock)
    assert "unknown API key 9999" in broker.log_text()
    assert broker_answers(broker)


def test_truncated_body_closes_connection(broker: BrokerProcess) -> None:
    sock = raw_client.connect(broker.bootstrap)
    # Metadata v1 header, then an array count of 1000 topics with no bytes behind it.
    frame = struct.pack(">hhi", 3, 1, 9) + struct.pack(">h", 3) + b"raw" + struct.pack(">i", 1000)
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    assert raw_client.closed_by_peer(sock)
    assert broker_answers(broker)


def test_api_versions_newer_than_ours_gets_v0_error_body(broker: BrokerProcess) -> None:
    sock = raw_client.connect(broker.bootstrap)
    frame = struct.pack(">hhi", 18, 99, 42) + struct.pack(">h", 3) + b"raw" + b"\x00" * 4
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    body = raw_client.read_frame(sock)
    assert struct.unpack(">i", body[:4])[0] == 42  # response header v0: correlation id only
    response = ApiVersionsResponse.decode(body[4:], 0)
    assert response.error_code == 35  # UNSUPPORTED_VERSION
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[18] == (0, 4) and ranges[0] == (0, 12) and ranges[1] == (4, 12)


def test_advertised_apis_are_exactly_those_served(broker: BrokerProcess) -> None:
    sock = raw_client.connect(broker.bootstrap)
    response = raw_client.call(sock, ApiVersionsRequest(client_software_name="raw", client_software_version="1"), 3)
    keys = {k.api_key for k in response.api_keys}
    assert {0, 1, 2, 3, 10, 18, 19, 20, 21, 22, 32, 33, 37, 44, 60} <= keys
    assert 22 in keys  # InitProducerId: idempotent producers
    assert {24, 25, 26, 27, 61, 65, 66} <= keys  # transactions
    assert {8, 9, 11, 12, 13, 14, 15, 16, 42, 47} <= keys  # consumer groups and committed offsets
    for key in keys:  # every advertised API answers its highest version
        assert key in raw_client.REQUESTS


def test_produce_v2_gets_unsupported_version(broker: BrokerProcess, topic_name: str) -> None:
    sock = raw_client.connect(broker.bootstrap)
    raw_client.call(sock, MetadataRequest(topics=None, allow_auto_topic_creation=True), 1)
    request = ProduceRequest(
        acks=1, timeout_ms=1000,
        topic_data=[TopicProduceData(name=topic_name, partition_data=[PartitionProduceData(index=0, records=b"")])],
    )
    response = raw_client.call(sock, request, 2)
    assert response.responses[0].partition_responses[0].error_code == 35


def test_sasl_on_a_plaintext_listener_gets_kafkas_error_and_the_connection_stays(broker: BrokerProcess) -> None:
    sock = raw_client.connect(broker.bootstrap)
    try:
        handshake = raw_client.call(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert handshake.error_code == Errors.ILLEGAL_SASL_STATE
        authenticate = raw_client.call(sock, SaslAuthenticateRequest(auth_bytes=b"\x00u\x00p"), 2)
        assert authenticate.error_code == Errors.ILLEGAL_SASL_STATE
        assert raw_client.call(sock, ApiVersionsRequest(), 2).error_code == 0
    finally:
        sock.close()


def test_a_sasl_client_fails_fast_instead_of_timing_out(broker: BrokerProcess) -> None:
    errors: list[str] = []
    admin = AdminClient(
        {
            "bootstrap.servers": broker.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "secret",
            "error_cb": lambda err: errors.append(str(err)),
        }
    )
    for _ in range(100):
        admin.poll(0.1)
        if errors:
            break
    assert errors and "_AUTHENTICATION" in errors[0] and "Request not valid in current SASL state" in errors[0], errors
