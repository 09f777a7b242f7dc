"""Sans-IO server side of a Kafka connection, in the style of h11: bytes in, events out.

The I/O layer feeds whatever it reads to :meth:`ServerConnection.receive_data` and pulls
:class:`RequestEvent` objects from :meth:`ServerConnection.next_event`; it turns response objects
into bytes with :meth:`ServerConnection.encode_response`. Anything that means the peer is not
speaking the protocol (an oversized or negative frame length, an unknown API key, an undecodable
header or body) raises :class:`ProtocolError`, after which the connection must be closed.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from .headers import (
    API_VERSIONS_KEY,
    RequestHeader,
    ResponseHeader,
    request_header_version,
    response_header_version,
)
from .messages import api_versions
from .schema import REQUESTS, DecodeError, EncodeError, Request, Response
from .schema.primitives import element_budget
from .splice import Frame, SplicingStream, cut_pieces

DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # socket.request.max.bytes
# Array elements one request may carry in total (topics, partitions, ...): far above what clients
# send for the largest clusters, far below what would cost seconds of decoding and handling.
MAX_REQUEST_ELEMENTS = 25_000
_SIZE = struct.Struct(">i")
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_CORRELATION_AND_NO_TAGS = struct.Struct(">ib")
_HEADER_START = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_PLAIN_HEADER_MIN = _HEADER_START.size


class ProtocolError(Exception):
    """The peer sent bytes that are not a Kafka request we can frame; close the connection."""


@dataclass(slots=True)
class RequestEvent:
    """One framed, decoded request.

    ``request`` is None only for an ApiVersions request newer than we implement: the caller answers
    it with UNSUPPORTED_VERSION in a v0 body (:func:`unsupported_api_versions_response`).
    """

    header: RequestHeader
    request: Request | None
    frame_size: int

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version


MIN_REQUEST_FRAME = 8  # a request header's api key, version and correlation id


class ServerConnection:
    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame_size = max_frame_size
        self.min_frame_size = MIN_REQUEST_FRAME  # 0 while bare SASL tokens are expected
        self._buffer = bytearray()

    def receive_data(self, data: bytes) -> None:
        self._buffer += data

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def pending_frame_size(self) -> int | None:
        """Size of the frame being received, once its 4-byte prefix is in; checked against the limit."""
        if len(self._buffer) < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buffer, 0)
        if size < self.min_frame_size or size > self.max_frame_size:
            raise ProtocolError(f"frame size {size} outside [{self.min_frame_size}, {self.max_frame_size}]")
        return size

    def next_event(self) -> RequestEvent | None:
        """The next complete request, or None if more bytes are needed."""
        frame = self.next_frame()
        return None if frame is None else decode_request(frame)

    def next_frame(self) -> bytes | None:
        """The next complete frame without its size prefix (decode it with :func:`decode_request`)."""
        size = self.pending_frame_size()
        if size is None or len(self._buffer) < 4 + size:
            return None
        frame = bytes(self._buffer[4 : 4 + size])
        del self._buffer[: 4 + size]
        return frame

    def encode_response(self, header: RequestHeader, response: Response) -> bytes:
        return encode_response(header, response)


def frame_api_key(frame: bytes) -> int:
    return int(_KEY_VERSION_CORRELATION.unpack_from(frame, 0)[0])


def decode_request(frame: bytes, max_elements: int = MAX_REQUEST_ELEMENTS) -> RequestEvent:
    """Decode one frame (without its size prefix) into header and body."""
    api_key, version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    request_cls = REQUESTS.get(api_key)
    if request_cls is None:
        raise ProtocolError(f"unknown API key {api_key} (correlation id {correlation_id})")
    if version not in request_cls.VALID_VERSIONS:
        if api_key == API_VERSIONS_KEY and version > request_cls.VALID_VERSIONS.high:
            # KIP-511: we cannot parse the body, but must still answer so the client can fall back.
            header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id)
            return RequestEvent(header, None, len(frame))
        raise ProtocolError(f"unsupported version {version} of API {api_key} (correlation id {correlation_id})")
    stream = io.BytesIO(frame)
    try:
        with element_budget(max_elements):
            header_version = request_header_version(request_cls, version)
            plain = plain_request_header(frame, header_version)
            if plain is None:
                header = RequestHeader.decode_from(stream, header_version)
            else:
                header, body_offset = plain
                stream.seek(body_offset)
            request = request_cls.decode_from(stream, version)
    except DecodeError as exc:
        raise ProtocolError(f"undecodable request (api {api_key} v{version}): {exc}") from None
    # Bytes after the body are ignored, as Kafka does: librdkafka 2.x sends three extra bytes
    # after some Metadata v12 requests (compat_tests/FINDINGS.rst).
    return RequestEvent(header, request, len(frame))


def plain_request_header(frame: bytes, header_version: int) -> tuple[RequestHeader, int] | None:
    """The usual request header (v1/v2: a client id of valid UTF-8, or null; no tagged fields),
    read directly, and where the body starts; None for anything else, which the generic decoder
    reads (with its errors). Every request has a header, and the generic path cost a third of
    decoding a small request."""
    if len(frame) < _PLAIN_HEADER_MIN:
        return None
    api_key, version, correlation_id, length = _HEADER_START.unpack_from(frame, 0)
    end = _PLAIN_HEADER_MIN + max(length, 0)
    if length < -1 or end > len(frame):
        return None
    if length == -1:
        client_id = None
    else:
        try:
            client_id = frame[_PLAIN_HEADER_MIN:end].decode("utf-8")
        except UnicodeDecodeError:
            return None
    if header_version == 2:  # flexible: an empty tagged-field section, one zero byte
        if end >= len(frame) or frame[end] != 0:
            return None
        end += 1
    elif header_version != 1:
        return None
    header = RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=correlation_id, client_id=client_id
    )
    return header, end


def response_header(correlation_id: int, version: int) -> bytes:
    """ResponseHeader's bytes packed directly (every response has one: the generic struct encoder
    cost more than the rest of a small answer): the correlation id, then v1's empty tagged fields."""
    if version == 0:
        return _SIZE.pack(correlation_id)
    return _CORRELATION_AND_NO_TAGS.pack(correlation_id, 0)


def encode_response(header: RequestHeader, response: Response) -> bytes:
    """Size prefix + response header (version chosen by the request) + body."""
    request_cls = REQUESTS[header.request_api_key]
    version = header.request_api_version
    stream = io.BytesIO()
    stream.write(b"\0\0\0\0")
    stream.write(response_header(header.correlation_id, response_header_version(request_cls, version)))
    response.encode_into(stream, version)
    data = stream.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return stream.getvalue()


def encode_response_frame(header: RequestHeader, response: Response) -> bytes | Frame:
    """Like :func:`encode_response`, but ``records`` fields may hold :class:`ExternalBytes`:
    then a :class:`Frame` of pieces whose size prefix counts them; bytes when none was used."""
    request_cls = REQUESTS[header.request_api_key]
    version = header.request_api_version
    stream = SplicingStream()
    stream.write(b"\0\0\0\0")
    stream.write(response_header(header.correlation_id, response_header_version(request_cls, version)))
    response.encode_into(stream, version)
    data = stream.getbuffer()
    external = sum(hole.size for _, hole in stream.holes)
    _SIZE.pack_into(data, 0, len(data) - 4 + external)
    del data
    encoded = stream.getvalue()
    if not stream.holes:
        return encoded
    return Frame(cut_pieces(encoded, stream.holes), len(encoded) + external)


def encode_request(header: RequestHeader, request: Request) -> bytes:
    """Client side: size prefix + request header + body (used by our client, tests and tools)."""
    request_cls = type(request)
    version = header.request_api_version
    if header.request_api_key != request_cls.API_KEY:
        raise EncodeError(f"header api key {header.request_api_key} does not match {request_cls.__name__}")
    stream = io.BytesIO()
    stream.write(b"\0\0\0\0")
    header.encode_into(stream, request_header_version(request_cls, version))
    request.encode_into(stream, version)
    data = stream.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return stream.getvalue()


def unsupported_api_versions_response(supported: list[api_versions.ApiVersion]) -> api_versions.ApiVersionsResponse:
    """UNSUPPORTED_VERSION (35) with our ranges; encoded at v0, which every client can read."""
    return api_versions.ApiVersionsResponse(error_code=35, api_keys=supported)


def encode_unsupported_api_versions(correlation_id: int, supported: list[api_versions.ApiVersion]) -> bytes:
    body = unsupported_api_versions_response(supported).encode(0)
    head = ResponseHeader(correlation_id=correlation_id).encode(0)
    return _SIZE.pack(len(head) + len(body)) + head + body
