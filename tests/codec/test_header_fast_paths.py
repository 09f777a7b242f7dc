"""The request and response headers read and written directly (every request has them) must give
exactly what the generic struct codec gives, and leave anything unusual to it."""

from __future__ import annotations

import io
import struct

import pytest

from rivven_kproto.codec.connection import (
    ProtocolError,
    decode_request,
    encode_request,
    plain_request_header,
    response_header,
)
from rivven_kproto.codec.headers import RequestHeader, ResponseHeader
from rivven_kproto.codec.messages.heartbeat import HeartbeatRequest

CORRELATION_IDS = [0, 1, -1, 2**31 - 1, -(2**31)]
CLIENT_IDS = [None, "", "rdkafka", "ünïcødé-clïent", "c" * 300]


@pytest.mark.parametrize("version", [0, 1])
def test_response_header_bytes_are_the_struct_codec_s(version: int) -> None:
    for correlation_id in CORRELATION_IDS:
        assert response_header(correlation_id, version) == ResponseHeader(correlation_id=correlation_id).encode(version)


@pytest.mark.parametrize("header_version", [1, 2])
def test_plain_request_headers_read_as_the_struct_codec_reads_them(header_version: int) -> None:
    for client_id in CLIENT_IDS:
        for correlation_id in CORRELATION_IDS:
            header = RequestHeader(request_api_key=12, request_api_version=4, correlation_id=correlation_id,
                                   client_id=client_id)
            frame = header.encode(header_version) + b"body"
            plain = plain_request_header(frame, header_version)
            assert plain is not None
            stream = io.BytesIO(frame)
            assert plain == (RequestHeader.decode_from(stream, header_version), stream.tell())


def test_unusual_headers_are_left_to_the_struct_codec() -> None:
    tagged = RequestHeader(request_api_key=12, request_api_version=4, correlation_id=3, client_id="c",
                           unknown_tagged_fields={5: b"x"}).encode(2)
    start = struct.pack(">hhi", 12, 4, 3)
    for frame, header_version in (
        (tagged, 2),
        (start + struct.pack(">h", 2) + b"\xff\xfe" + b"\0", 2),  # invalid UTF-8
        (start + struct.pack(">h", 50) + b"short", 1),  # runs past the frame
        (start + struct.pack(">h", -2), 1),  # a negative length other than null
        (start + struct.pack(">h", 1) + b"c", 2),  # no tagged-field section
        (start[:6], 1),
    ):
        assert plain_request_header(frame, header_version) is None, frame
    header = RequestHeader.decode_from(io.BytesIO(tagged), 2)
    assert header.unknown_tagged_fields == {5: b"x"}


def test_decoding_a_request_gives_the_same_event_either_way() -> None:
    heartbeat = HeartbeatRequest(group_id="g", generation_id=3, member_id="m")
    for version in (3, 4):  # header v1 and v2
        for client_id in CLIENT_IDS:
            frame = encode_request(RequestHeader(request_api_key=12, request_api_version=version, correlation_id=9,
                                                 client_id=client_id), heartbeat)[4:]
            event = decode_request(frame)
            assert event.header.client_id == client_id and event.request == heartbeat
    tagged = RequestHeader(request_api_key=12, request_api_version=4, correlation_id=9, client_id="c",
                           unknown_tagged_fields={7: b"y"}).encode(2) + heartbeat.encode(4)
    event = decode_request(tagged)
    assert event.header.unknown_tagged_fields == {7: b"y"} and event.request == heartbeat
    bad = struct.pack(">hhih", 12, 4, 9, 2) + b"\xff\xfe" + b"\0" + heartbeat.encode(4)
    with pytest.raises(ProtocolError, match="UTF-8"):
        decode_request(bad)
