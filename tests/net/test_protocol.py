"""The sans-IO client protocol: framing, correlation-id matching, abandoned and unknown ids."""

from __future__ import annotations

import struct

import pytest

from rivven_kproto.codec.connection import ServerConnection, encode_response, encode_unsupported_api_versions
from rivven_kproto.codec.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataResponse, MetadataResponseBroker
from rivven_kproto.net.errors import ProtocolViolationError
from rivven_kproto.net.protocol import ClientProtocol


def _metadata_response(node: int) -> MetadataResponse:
    return MetadataResponse(brokers=[MetadataResponseBroker(node_id=node, host="h", port=1)], topics=[])


def _answer(request_bytes: bytes, response: MetadataResponse) -> bytes:
    server = ServerConnection()
    server.receive_data(request_bytes)
    event = server.next_event()
    assert event is not None
    return encode_response(event.header, response)


def test_pipelined_responses_are_matched_by_id_in_any_order() -> None:
    protocol = ClientProtocol("test")
    first_id, first = protocol.send_request(MetadataRequest(topics=None), 12)
    second_id, second = protocol.send_request(MetadataRequest(topics=[]), 9)
    assert first_id != second_id
    assert protocol.in_flight == 2
    wire = _answer(second, _metadata_response(2)) + _answer(first, _metadata_response(1))
    for byte in wire:  # one byte at a time
        protocol.receive_data(bytes([byte]))
        item = protocol.next_response()
        if item is not None:
            correlation_id, response = item
            assert isinstance(response, MetadataResponse)
            assert response.brokers[0].node_id == (1 if correlation_id == first_id else 2)
    assert protocol.in_flight == 0


def test_abandoned_responses_are_dropped_and_unknown_ids_rejected() -> None:
    protocol = ClientProtocol()
    gone_id, gone = protocol.send_request(MetadataRequest(topics=None), 12)
    kept_id, kept = protocol.send_request(MetadataRequest(topics=None), 12)
    protocol.abandon(gone_id)
    protocol.receive_data(_answer(gone, _metadata_response(1)) + _answer(kept, _metadata_response(2)))
    item = protocol.next_response()
    assert item is not None and item[0] == kept_id
    protocol.receive_data(_answer(kept, _metadata_response(3)))  # answered twice: out of step
    with pytest.raises(ProtocolViolationError, match="unknown correlation id"):
        protocol.next_response()


def test_frame_size_is_bounded() -> None:
    protocol = ClientProtocol(max_response_size=1000)
    protocol.receive_data(struct.pack(">i", 1001))
    with pytest.raises(ProtocolViolationError, match="outside"):
        protocol.next_response()


def test_undecodable_body_is_a_protocol_violation() -> None:
    protocol = ClientProtocol()
    correlation_id, _ = protocol.send_request(MetadataRequest(topics=None), 12)
    protocol.receive_data(struct.pack(">ii", 6, correlation_id) + b"\0\x05")
    with pytest.raises(ProtocolViolationError, match="undecodable MetadataResponse v12"):
        protocol.next_response()


def test_api_versions_error_arrives_in_a_v0_body() -> None:
    protocol = ClientProtocol()
    correlation_id, _ = protocol.send_request(ApiVersionsRequest(), 4)
    supported = [ApiVersion(api_key=18, min_version=0, max_version=3)]
    protocol.receive_data(encode_unsupported_api_versions(correlation_id, supported))
    item = protocol.next_response()
    assert item is not None
    response = item[1]
    assert isinstance(response, ApiVersionsResponse)
    assert response.error_code == 35 and response.api_keys == supported
