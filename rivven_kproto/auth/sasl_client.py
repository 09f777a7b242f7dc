"""The client's side of a SASL exchange (PLAIN, SCRAM-SHA-256/512), sans-IO.

Shared by the trio connection driver (``net/``: the client's, and the broker's own requests to
the other brokers of its cluster, ``server/peers.py``) and the Spark source's blocking
client (``spark/wire.py``), which may not import each other: each only carries the requests
:func:`sasl_exchange` yields.
"""

from __future__ import annotations

import ssl
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from rivven_kproto.codec.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from rivven_kproto.codec.schema import Request, Response

SASL_HANDSHAKE_VERSION = 1  # KIP-152: SaslAuthenticate requests follow the handshake
# What the exchange yields: a request, its version (None: the newest both ends speak, or the
# driver's own choice when it negotiated none) and the response class to decode the answer with.
SaslStep = tuple[Request, int | None, type[Response]]


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def sasl_conversation(security: ClientSecurity) -> Generator[bytes, bytes, None]:
    """The client's side of one SASL exchange: yields each token to send and is sent each reply.

    Raises ScramException when the broker's SCRAM answers are not genuine (its final signature).
    """
    assert security.mechanism is not None and security.username is not None and security.password is not None
    if security.mechanism == "PLAIN":
        yield f"\0{security.username}\0{security.password}".encode()
        return
    from scramp import ScramClient  # only for SCRAM: a client without it starts faster (kproto verbs)

    client = ScramClient([security.mechanism], security.username, security.password)
    server_first = yield client.get_client_first().encode()
    client.set_server_first(server_first.decode())
    server_final = yield client.get_client_final().encode()
    client.set_server_final(server_final.decode())


class SaslRefused(Exception):
    """The broker refused the mechanism or the credentials, or its SCRAM answers are not genuine;
    ``error_code`` is Kafka's, ``message`` the broker's (or ours) for the driver's own error."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def sasl_exchange(security: ClientSecurity) -> Generator[SaslStep, Any, None]:
    """SaslHandshake v1, then SaslAuthenticate rounds (KIP-152), as the Java client does, sans-IO:
    a driver sends each step it yields and sends the decoded response back in. Raises
    :class:`SaslRefused` when the broker refuses."""
    from scramp import ScramException  # only with SASL: a client without it starts faster (kproto verbs)

    assert security.mechanism is not None
    handshake = yield SaslHandshakeRequest(mechanism=security.mechanism), SASL_HANDSHAKE_VERSION, SaslHandshakeResponse
    if handshake.error_code:
        raise SaslRefused(handshake.error_code, Errors.for_code(handshake.error_code).message)
    conversation = sasl_conversation(security)
    try:
        token = next(conversation)
        while True:
            answer = yield SaslAuthenticateRequest(auth_bytes=token), None, SaslAuthenticateResponse
            if answer.error_code:
                error = Errors.for_code(answer.error_code)
                raise SaslRefused(answer.error_code, answer.error_message or error.message)
            token = conversation.send(bytes(answer.auth_bytes))
    except StopIteration:
        return
    except ScramException as exc:
        raise SaslRefused(Errors.SASL_AUTHENTICATION_FAILED, f"the broker's SCRAM answers are not genuine: {exc}") from None
