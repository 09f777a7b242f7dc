"""Forwarding a client's catalog, config or ACL request to the controller in an Envelope (KIP-590).

The follower wraps the request as the client sent it (header and body) with the client's
principal and address; the controller checks that the envelope comes from a broker (ClusterAction
on the cluster), then handles the inner request as that client would have been handled on it (its
ACLs, its principal in the logs), and returns the inner response, which the follower passes on.
The pure halves (wrapping, unwrapping) are here; the sending is ``peers``'.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from rivven_kproto.codec.connection import ProtocolError, RequestEvent, decode_request, encode_request
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.envelope import EnvelopeRequest, EnvelopeResponse
from rivven_kproto.codec.principal_data import decode_principal, encode_principal
from rivven_kproto.codec.schema import Request

ENVELOPE_API_KEY = EnvelopeRequest.API_KEY
ENVELOPE_VERSION = 0
_SIZE = struct.Struct(">i")


def wrap(event: RequestEvent, principal: str, client_host: str) -> EnvelopeRequest:
    """The Envelope carrying ``event`` for the client ``principal`` at ``client_host`` ("/1.2.3.4")."""
    assert event.request is not None
    return wrap_request(event.header, event.request, principal, client_host)


def wrap_request(header: RequestHeader, request: Request, principal: str, client_host: str) -> EnvelopeRequest:
    """The Envelope carrying ``request`` (with ``header``) for the client ``principal``."""
    frame = encode_request(header, request)
    return EnvelopeRequest(request_data=frame[_SIZE.size:], request_principal=encode_principal(principal),
                           client_host_address=_address_bytes(client_host))


def unwrap_response(response: EnvelopeResponse) -> bytes:
    """The inner response frame (size-prefixed) for the client; ProtocolError when the controller
    refused the envelope (the client's connection closes and it retries, as after a lost controller)."""
    if response.error_code or response.response_data is None:
        raise ProtocolError(f"the controller refused the forwarded request: {Errors(response.error_code).name}")
    return _SIZE.pack(len(response.response_data)) + bytes(response.response_data)


@dataclass(frozen=True)
class Unwrapped:
    event: RequestEvent
    principal: str
    client_host: str


def unwrap(request: EnvelopeRequest, allowed_api_keys: frozenset[int]) -> Unwrapped:
    """The client's request inside an Envelope; INVALID_REQUEST for a malformed one or an API that is
    never forwarded."""
    if request.request_principal is None:
        raise KafkaError(Errors.INVALID_REQUEST, "an Envelope without the client's principal")
    principal = decode_principal(bytes(request.request_principal))
    try:
        event = decode_request(bytes(request.request_data))
    except ProtocolError as exc:
        raise KafkaError(Errors.INVALID_REQUEST, f"the forwarded request cannot be decoded: {exc}") from None
    if event.api_key not in allowed_api_keys or event.request is None:
        raise KafkaError(Errors.INVALID_REQUEST, f"API {event.api_key} is not forwarded to the controller")
    return Unwrapped(event, principal, "/" + _address_text(bytes(request.client_host_address)))


def envelope_response(inner: bytes | None, error: Errors = Errors.NONE) -> EnvelopeResponse:
    """The controller's answer: the inner response frame without its size prefix."""
    data = None if inner is None else inner[_SIZE.size:]
    return EnvelopeResponse(response_data=data, error_code=error)


def _address_bytes(client_host: str) -> bytes:
    host = client_host.lstrip("/")
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return socket.inet_pton(family, host)
        except OSError:
            continue
    return b""


def _address_text(raw: bytes) -> str:
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw)
    if len(raw) == 16:
        return socket.inet_ntop(socket.AF_INET6, raw)
    raise KafkaError(Errors.INVALID_REQUEST, f"a client address of {len(raw)} bytes")
