"""Envelope wrapping and unwrapping (KIP-590): the controller sees the client's request, principal
and address exactly as the forwarding broker received them."""

from __future__ import annotations

import pytest

from rivven_kproto.codec.connection import ProtocolError, decode_request, encode_request
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.headers import RequestHeader
from rivven_kproto.codec.messages.create_topics import CreatableTopic, CreateTopicsRequest
from rivven_kproto.codec.messages.envelope import EnvelopeRequest, EnvelopeResponse
from rivven_kproto.codec.principal_data import decode_principal, encode_principal
from rivven_kproto.server.forwarding import envelope_response, unwrap, unwrap_response, wrap
from rivven_kproto.server.handlers import routed_to
from rivven_kproto.server.routes import Controller


def client_request(api_version: int = 5):
    header = RequestHeader(request_api_key=19, request_api_version=api_version, correlation_id=77, client_id="app")
    request = CreateTopicsRequest(topics=[CreatableTopic(name="t", num_partitions=3, replication_factor=1,
                                                         assignments=[], configs=[])],
                                  timeout_ms=1000, validate_only=False)
    frame = encode_request(header, request)
    return decode_request(frame[4:])


def through_the_wire(envelope: EnvelopeRequest) -> EnvelopeRequest:
    header = RequestHeader(request_api_key=58, request_api_version=0, correlation_id=1, client_id="kproto-broker-2")
    return decode_request(encode_request(header, envelope)[4:]).request  # type: ignore[return-value]


CONTROLLER_APIS = routed_to(Controller)


def test_the_controllers_apis_are_those_that_change_the_catalog_configs_acls_or_credentials() -> None:
    """Declared by their handlers (ROUTE = CONTROLLER): CreateTopics, DeleteTopics, CreateAcls,
    DeleteAcls, AlterConfigs, CreatePartitions, IncrementalAlterConfigs, AlterUserScramCredentials."""
    assert CONTROLLER_APIS == frozenset({19, 20, 30, 31, 33, 37, 44, 51})


@pytest.mark.parametrize("host", ["/127.0.0.1", "/::1"])
def test_the_controller_unwraps_the_clients_request_principal_and_address(host: str) -> None:
    event = client_request()
    inner = unwrap(through_the_wire(wrap(event, "User:alice", host)), CONTROLLER_APIS)
    assert inner.principal == "User:alice" and inner.client_host == host
    assert inner.event.header.correlation_id == 77 and inner.event.header.client_id == "app"
    assert inner.event.request == event.request


def test_requests_that_are_never_forwarded_are_refused() -> None:
    envelope = wrap(client_request(), "User:alice", "/127.0.0.1")
    with pytest.raises(KafkaError) as raised:
        unwrap(envelope, frozenset({20}))
    assert raised.value.error == Errors.INVALID_REQUEST
    envelope.request_principal = None
    with pytest.raises(KafkaError):
        unwrap(envelope, CONTROLLER_APIS)


@pytest.mark.parametrize("data", [b"", b"\x00\x01\x05User\x06alice\x00\x00", b"\x00\x00\x09User", b"\x00\x00\x05User"])
def test_malformed_principal_data_is_an_invalid_request(data: bytes) -> None:
    with pytest.raises(KafkaError) as raised:
        decode_principal(data)
    assert raised.value.error == Errors.INVALID_REQUEST


def test_principal_data_is_kafkas_layout() -> None:
    # int16 version 0, compact strings "User" and "alice", token_authenticated false, no tags.
    assert encode_principal("User:alice") == b"\x00\x00\x05User\x06alice\x00\x00"
    assert decode_principal(encode_principal("User:CN=a:b")) == "User:CN=a:b"


def test_the_inner_response_goes_back_size_prefixed_and_a_refusal_closes_the_client_connection() -> None:
    frame = b"\x00\x00\x00\x03abc"
    assert unwrap_response(envelope_response(frame)) == frame
    with pytest.raises(ProtocolError, match="CLUSTER_AUTHORIZATION_FAILED"):
        unwrap_response(EnvelopeResponse(response_data=None, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED))
