"""Sans-IO client side of a Kafka connection: requests out as bytes, responses matched by id.

Kafka answers the requests of one connection in order, but a client may pipeline many, so each
request gets a fresh correlation id and the response frame is matched to it by that id (not by
position), decoded at the version the request was sent at. A waiter that gives up (a timeout)
:meth:`abandons <ClientProtocol.abandon>` its id: the late response is then dropped, while an id
we never sent means the stream is out of step and is a :class:`ProtocolViolationError`.

ApiVersions is special (KIP-511): a broker that does not know our version answers
UNSUPPORTED_VERSION in a v0 body, so a response we cannot decode at the request's version is
decoded again at v0.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from rivven_kproto.codec.connection import encode_request
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.headers import (
    API_VERSIONS_KEY,
    RequestHeader,
    ResponseHeader,
    response_header_version,
)
from rivven_kproto.codec.schema import REQUESTS, RESPONSES, DecodeError, EncodeError, Request, Response

from .errors import ClientError, ProtocolViolationError

DEFAULT_MAX_RESPONSE = 256 * 1024 * 1024
_SIZE = struct.Struct(">i")
_MAX_CORRELATION_ID = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class Pending:
    api_key: int
    version: int


class ClientProtocol:
    """Frames requests and matches response frames to them; holds no socket."""

    def __init__(self, client_id: str | None = "kproto", max_response_size: int = DEFAULT_MAX_RESPONSE) -> None:
        self.client_id = client_id
        self.max_response_size = max_response_size
        self._next_id = 1
        self._pending: dict[int, Pending] = {}
        self._abandoned: set[int] = set()
        self._buffer = bytearray()

    @property
    def in_flight(self) -> int:
        return len(self._pending) + len(self._abandoned)

    def _allocate_id(self) -> int:
        correlation_id = self._next_id
        self._next_id = 1 if correlation_id >= _MAX_CORRELATION_ID else correlation_id + 1
        if correlation_id in self._pending or correlation_id in self._abandoned:
            raise ProtocolViolationError("correlation ids exhausted")  # 2**31 requests in flight
        return correlation_id

    def send_request(self, request: Request, version: int, *, expect_response: bool = True) -> tuple[int, bytes]:
        """(correlation id, bytes to write); the id is awaited unless ``expect_response`` is False."""
        correlation_id = self._allocate_id()
        header = RequestHeader(
            request_api_key=request.API_KEY,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=self.client_id,
        )
        try:
            data = encode_request(header, request)
        except EncodeError as exc:
            raise ClientError(Errors.INVALID_REQUEST, f"cannot encode {type(request).__name__}: {exc}") from None
        if expect_response:
            self._pending[correlation_id] = Pending(request.API_KEY, version)
        return correlation_id, data

    def abandon(self, correlation_id: int) -> None:
        """The waiter is gone: drop its response when it arrives."""
        if self._pending.pop(correlation_id, None) is not None:
            self._abandoned.add(correlation_id)

    def receive_data(self, data: bytes | bytearray) -> None:
        self._buffer += data

    def next_response(self) -> tuple[int, Response] | None:
        """The next complete response as (correlation id, body), or None if more bytes are needed."""
        while True:
            if len(self._buffer) < 4:
                return None
            (size,) = _SIZE.unpack_from(self._buffer, 0)
            if size < 4 or size > self.max_response_size:
                raise ProtocolViolationError(f"response frame size {size} outside [4, {self.max_response_size}]")
            if len(self._buffer) < 4 + size:
                return None
            frame = bytes(self._buffer[4 : 4 + size])
            del self._buffer[: 4 + size]
            (correlation_id,) = _SIZE.unpack_from(frame, 0)
            if correlation_id in self._abandoned:
                self._abandoned.discard(correlation_id)
                continue
            pending = self._pending.pop(correlation_id, None)
            if pending is None:
                raise ProtocolViolationError(f"response with unknown correlation id {correlation_id}")
            return correlation_id, decode_response(frame, pending.api_key, pending.version)


def decode_response(frame: bytes, api_key: int, version: int) -> Response:
    """Decode one response frame (without its size prefix) sent for (api_key, version)."""
    request_cls = REQUESTS[api_key]
    response_cls = RESPONSES[api_key]
    stream = io.BytesIO(frame)
    try:
        ResponseHeader.decode_from(stream, response_header_version(request_cls, version))
        body = frame[stream.tell() :]
        try:
            return response_cls.decode(body, version)
        except DecodeError:
            if api_key != API_VERSIONS_KEY or version == 0:
                raise
            return response_cls.decode(body, 0)  # UNSUPPORTED_VERSION comes in a v0 body
    except DecodeError as exc:
        raise ProtocolViolationError(f"undecodable {response_cls.__name__} v{version}: {exc}") from None

