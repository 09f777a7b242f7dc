"""A minimal blocking Kafka client on our codec, for sending exact (and deliberately bad) requests."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.headers import RequestHeader, ResponseHeader, response_header_version
from rivven_kproto.codec.schema import REQUESTS, RESPONSES


def connect(bootstrap: str, timeout: float = 10.0) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    return sock


def recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        data += chunk
    return bytes(data)


def read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, size)


def call(sock: socket.socket, request: Any, version: int, correlation_id: int = 1) -> Any:
    send(sock, request, version, correlation_id)
    return receive(sock, request.API_KEY, version, correlation_id)


def send(sock: socket.socket, request: Any, version: int, correlation_id: int = 1) -> None:
    """The request only (its answer read later by :func:`receive`, e.g. once a paused broker resumes)."""
    header = RequestHeader(
        request_api_key=request.API_KEY, request_api_version=version, correlation_id=correlation_id, client_id="raw"
    )
    sock.sendall(encode_request(header, request))


def receive(sock: socket.socket, api_key: int, version: int, correlation_id: int = 1) -> Any:
    return decode_response(read_frame(sock), api_key, version, correlation_id)


def decode_response(frame: bytes, api_key: int, version: int, correlation_id: int = 1) -> Any:
    """A response frame (without its size) read by the caller."""
    stream = io.BytesIO(frame)
    response_header = ResponseHeader.decode_from(stream, response_header_version(REQUESTS[api_key], version))
    assert response_header.correlation_id == correlation_id
    return RESPONSES[api_key].decode(frame[stream.tell() :], version)


def closed_by_peer(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True when the broker closes the connection (EOF or reset) within ``timeout``."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
