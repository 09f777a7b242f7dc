"""The sans-IO connection: framing fed whole, byte by byte and back to back; bad frames raise ProtocolError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rivven_kproto.codec.connection import (
    ProtocolError,
    ServerConnection,
    decode_request,
    encode_request,
    encode_response,
    encode_unsupported_api_versions,
)
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic


def frame_of(request, version: int, correlation_id: int = 5) -> bytes:  # noqa: ANN001
    header = RequestHeader(
        request_api_key=request.API_KEY, request_api_version=version, correlation_id=correlation_id, client_id="c"
    )
    return encode_request(header, request)


def test_whole_frame() -> None:
    conn = ServerConnection()
    conn.receive_data(frame_of(MetadataRequest(topics=[MetadataRequestTopic(name="a")]), 9))
    event = conn.next_event()
    assert event is not None
    assert event.api_key == 3 and event.api_version == 9 and event.header.client_id == "c"
    assert event.request == MetadataRequest(topics=[MetadataRequestTopic(name="a")])
    assert conn.next_event() is None


def test_byte_at_a_time_and_pipelined() -> None:
    frames = frame_of(ApiVersionsRequest(), 2, 1) + frame_of(MetadataRequest(topics=None), 12, 2)
    conn = ServerConnection()
    events = []
    for byte in frames:
        conn.receive_data(bytes([byte]))
        event = conn.next_event()
        if event is not None:
            events.append(event)
    assert [(e.api_key, e.header.correlation_id) for e in events] == [(18, 1), (3, 2)]


def test_oversized_frame_rejected_before_it_arrives() -> None:
    conn = ServerConnection(max_frame_size=1024)
    conn.receive_data(struct.pack(">i", 1025))
    with pytest.raises(ProtocolError, match="frame size"):
        conn.next_event()


@pytest.mark.parametrize("size", [-1, 0, 7, 2**31 - 1])
def test_bad_sizes(size: int) -> None:
    conn = ServerConnection()
    conn.receive_data(struct.pack(">i", size) + b"x" * 8)
    with pytest.raises(ProtocolError):
        conn.next_event()


def test_unknown_api_key_and_unsupported_version() -> None:
    for key, version in ((999, 0), (1, 3), (3, 13)):
        conn = ServerConnection()
        body = struct.pack(">hhi", key, version, 1) + b"\x00\x00"
        conn.receive_data(struct.pack(">i", len(body)) + body)
        with pytest.raises(ProtocolError):
            conn.next_event()


def test_newer_api_versions_is_answered_not_closed() -> None:
    conn = ServerConnection()
    body = struct.pack(">hhi", 18, 7, 77) + b"garbage that a v7 body might be"
    conn.receive_data(struct.pack(">i", len(body)) + body)
    event = conn.next_event()
    assert event is not None and event.request is None and event.header.correlation_id == 77
    reply = encode_unsupported_api_versions(77, [ApiVersion(api_key=18, min_version=0, max_version=4)])
    size, correlation = struct.unpack(">ii", reply[:8])
    assert size == len(reply) - 4 and correlation == 77
    assert ApiVersionsResponse.decode(reply[8:], 0).error_code == 35


def test_trailing_bytes_in_frame_are_ignored_like_kafka() -> None:
    frame = frame_of(ApiVersionsRequest(), 1)
    body = frame[4:] + b"\x01\x00\x00"
    conn = ServerConnection()
    conn.receive_data(struct.pack(">i", len(body)) + body)
    event = conn.next_event()
    assert event is not None and event.request == ApiVersionsRequest()


def test_api_versions_response_header_is_v0_even_when_flexible() -> None:
    header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=9)
    reply = encode_response(header, ApiVersionsResponse(api_keys=[]))
    # size, correlation id, then the body straight away (no tagged-field byte of header v1)
    assert reply[8:] == ApiVersionsResponse(api_keys=[]).encode(3)


def test_flexible_response_uses_header_v1() -> None:
    from rivven_kproto.codec.messages.metadata import MetadataResponse

    header = RequestHeader(request_api_key=3, request_api_version=9, correlation_id=9)
    reply = encode_response(header, MetadataResponse())
    assert reply[8:9] == b"\x00"  # empty header tagged fields
    assert reply[9:] == MetadataResponse().encode(9)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_only_ever_raises_protocol_error(data: bytes) -> None:
    conn = ServerConnection(max_frame_size=4096)
    conn.receive_data(struct.pack(">i", len(data)) + data)
    try:
        conn.next_event()
    except ProtocolError:
        pass


def test_a_request_past_the_element_budget_is_a_protocol_error() -> None:
    names = struct.pack(">i", 3) + b"\x00\x00" * 3
    frame = struct.pack(">hhi", 3, 1, 5) + struct.pack(">h", 3) + b"raw" + names
    assert decode_request(frame, max_elements=3).request.topics is not None  # type: ignore[union-attr]
    with pytest.raises(ProtocolError, match="more array elements than one request may carry"):
        decode_request(frame, max_elements=2)
