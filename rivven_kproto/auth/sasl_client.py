"""The client's side of a SASL exchange (PLAIN, SCRAM-SHA-256/512), sans-IO.

Shared by the trio client (``client/``, and through it the Spark source) and the broker's own
requests to the other brokers of its cluster (``server/peers.py``), which may not import each other.
"""

from __future__ import annotations

import ssl
from collections.abc import Generator
from dataclasses import dataclass


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
