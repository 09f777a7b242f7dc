"""Client security settings from Kafka's properties, librdkafka's and the Java client's spellings,
checked with a real TLS handshake over a socket pair, and the sans-IO SASL conversation."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
import trustme
from scramp import ScramMechanism

from rivven_kproto.client.security import ClientSecurity, from_properties, sasl_conversation


def handshake(client_context: ssl.SSLContext, server_context: ssl.SSLContext) -> str | None:
    """Run a TLS handshake between the two contexts; the peer's CN as the server saw it (or None)."""
    left, right = socket.socketpair()
    seen: list[str | None] = []

    def serve() -> None:
        with server_context.wrap_socket(right, server_side=True) as server:
            certificate = server.getpeercert()
            seen.append(dict(item[0] for item in certificate["subject"])["commonName"] if certificate else None)

    thread = threading.Thread(target=serve)
    thread.start()
    with client_context.wrap_socket(left, server_hostname="localhost"):
        pass
    thread.join(10)
    return seen[0]


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, object]:
    ca = trustme.CA()
    server = ca.issue_cert("localhost")
    client = ca.issue_cert("client.example", common_name="app-1")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_OPTIONAL
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    client.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "client.pem"))
    return {"server": context, "ca": ca, "client": client, "dir": tmp_path}


def test_librdkafka_and_java_spellings_give_the_same_tls(pki: dict[str, object]) -> None:
    directory, ca, client = pki["dir"], pki["ca"], pki["client"]
    assert isinstance(directory, Path) and isinstance(ca, trustme.CA) and isinstance(client, trustme.LeafCert)
    server = pki["server"]
    assert isinstance(server, ssl.SSLContext)
    spellings = [
        {"ssl.ca.location": str(directory / "ca.pem")},
        {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(directory / "ca.pem")},
        {"ssl.truststore.certificates": ca.cert_pem.bytes().decode()},
    ]
    for trust in spellings:
        security = from_properties({"security.protocol": "SSL", **trust})
        assert security.ssl_context is not None
        assert handshake(security.ssl_context, server) is None  # no client certificate
    identities = [
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(directory / "client.pem")},
        {"ssl.keystore.key": client.private_key_pem.bytes().decode(),
         "ssl.keystore.certificate.chain": client.cert_chain_pems[0].bytes().decode()},
    ]
    for identity in identities:
        security = from_properties({"security.protocol": "SSL", **spellings[0], **identity})
        assert security.ssl_context is not None
        assert handshake(security.ssl_context, server) == "app-1"


def test_other_store_types_and_mechanisms_are_refused() -> None:
    with pytest.raises(ValueError, match="only PEM"):
        from_properties({"security.protocol": "SSL", "ssl.truststore.type": "JKS", "ssl.truststore.location": "x.jks"})
    with pytest.raises(ValueError, match="sasl.mechanism must be one of"):
        from_properties({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"})


def test_sasl_conversation_against_a_scram_server() -> None:
    security = ClientSecurity("SASL_PLAINTEXT", None, "SCRAM-SHA-256", "bob", "bob-pw")
    info = ScramMechanism("SCRAM-SHA-256").make_auth_info("bob-pw", iteration_count=4096)
    server = ScramMechanism("SCRAM-SHA-256").make_server(lambda _user: info)
    conversation = sasl_conversation(security)
    server.set_client_first(next(conversation).decode())
    server.set_client_final(conversation.send(server.get_server_first().encode()).decode())
    with pytest.raises(StopIteration):
        conversation.send(server.get_server_final().encode())  # the client checked the server's proof
    plain = sasl_conversation(ClientSecurity("SASL_PLAINTEXT", None, "PLAIN", "alice", "pw"))
    assert next(plain) == b"\x00alice\x00pw"
