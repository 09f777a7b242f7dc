"""The sans-IO SASL exchange the client, the Spark source and the inter-broker requests carry."""

from __future__ import annotations

import pytest

from rivven_kproto.auth.sasl_client import ClientSecurity, SaslRefused, sasl_exchange
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from rivven_kproto.codec.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

PLAIN = ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", "secret")


def test_plain_is_a_handshake_then_one_token() -> None:
    exchange = sasl_exchange(PLAIN)
    request, version, response_cls = next(exchange)
    assert isinstance(request, SaslHandshakeRequest) and request.mechanism == "PLAIN"
    assert (version, response_cls) == (1, SaslHandshakeResponse)
    request, version, response_cls = exchange.send(SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"]))
    assert isinstance(request, SaslAuthenticateRequest) and bytes(request.auth_bytes) == b"\0alice\0secret"
    assert (version, response_cls) == (None, SaslAuthenticateResponse)
    with pytest.raises(StopIteration):
        exchange.send(SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=b""))


def test_a_refused_mechanism_raises_with_the_brokers_code() -> None:
    exchange = sasl_exchange(PLAIN)
    next(exchange)
    with pytest.raises(SaslRefused) as refused:
        exchange.send(SaslHandshakeResponse(error_code=Errors.UNSUPPORTED_SASL_MECHANISM, mechanisms=["SCRAM-SHA-256"]))
    assert refused.value.error_code == Errors.UNSUPPORTED_SASL_MECHANISM


def test_refused_credentials_carry_the_brokers_message() -> None:
    exchange = sasl_exchange(PLAIN)
    next(exchange)
    exchange.send(SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"]))
    with pytest.raises(SaslRefused) as refused:
        exchange.send(SaslAuthenticateResponse(error_code=Errors.SASL_AUTHENTICATION_FAILED,
                                               error_message="Invalid username or password", auth_bytes=b""))
    assert refused.value.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert refused.value.message == "Invalid username or password"


def test_scram_answers_that_are_not_genuine_are_refused() -> None:
    exchange = sasl_exchange(ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", "alice", "secret"))
    next(exchange)
    request, _, _ = exchange.send(SaslHandshakeResponse(error_code=0, mechanisms=["SCRAM-SHA-256"]))
    client_first = bytes(request.auth_bytes).decode()
    nonce = client_first.split("r=", 1)[1]
    server_first = f"r={nonce}server,s=c2l4dGVlbi1ieXRlLXNsdA==,i=4096".encode()
    exchange.send(SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=server_first))
    with pytest.raises(SaslRefused) as refused:
        exchange.send(SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=b"v=bm90IGdlbnVpbmU="))
    assert refused.value.error_code == Errors.SASL_AUTHENTICATION_FAILED
