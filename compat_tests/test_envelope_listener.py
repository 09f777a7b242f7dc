"""Envelopes are taken on the brokers' own listener only (#37 item 4).

An Envelope carries a client's request with the principal and address the forwarding broker vouches
for (KIP-590): accepted from anyone else, it lets a client act as any principal. Kafka takes them
only where brokers talk to each other; on any other listener the connection is closed. Here: a
CLIENT listener for applications, an INTERNAL one named by ``inter.broker.listener.name``.
"""

from __future__ import annotations

import re
from pathlib import Path

from rivven_kproto.codec.connection import decode_request, encode_request
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.create_topics import CreatableTopic, CreateTopicsRequest
from rivven_kproto.codec.messages.metadata import MetadataRequest
from rivven_kproto.server.forwarding import unwrap_response, wrap

from . import raw_client
from .broker_process import BrokerProcess

INTERNAL = re.compile(r"listener INTERNAL \(PLAINTEXT\) listening on [\d.]+:(\d+)")


def forged_envelope(topic: str):  # noqa: ANN201 - an EnvelopeRequest
    """A CreateTopics "from User:admin at 10.0.0.1", wrapped as a broker would wrap it."""
    header = RequestHeader(request_api_key=19, request_api_version=5, correlation_id=9, client_id="forger")
    request = CreateTopicsRequest(topics=[CreatableTopic(name=topic, num_partitions=1, replication_factor=1,
                                                         assignments=[], configs=[])],
                                  timeout_ms=5000, validate_only=False)
    return wrap(decode_request(encode_request(header, request)[4:]), "User:admin", "/10.0.0.1")


def test_an_envelope_on_a_client_listener_closes_the_connection(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("listeners=CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0\n"
                      "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT\n"
                      "inter.broker.listener.name=INTERNAL\n")
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--config", str(config)]).start()
    try:
        with raw_client.connect(broker.bootstrap) as client_side:
            client_side.sendall(encode_request(
                RequestHeader(request_api_key=58, request_api_version=0, correlation_id=1, client_id="forger"),
                forged_envelope("forged")))
            assert raw_client.closed_by_peer(client_side), "an Envelope on the client listener was answered"
        internal = f"127.0.0.1:{INTERNAL.findall(broker.log_text())[-1]}"
        with raw_client.connect(internal) as broker_side:
            unwrap_response(raw_client.call(broker_side, forged_envelope("forwarded"), 0))  # answered
        with raw_client.connect(broker.bootstrap) as client_side:
            listed = raw_client.call(client_side, MetadataRequest(topics=None), 12)
        assert {topic.name for topic in listed.topics} == {"forwarded"}  # never "forged"
    finally:
        broker.kill()
