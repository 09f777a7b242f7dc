"""Issue #17 (part): per-listener security settings, mTLS principals through
``ssl.principal.mapping.rules``, SASL with bare v0 tokens, Kafka's bound on unauthenticated frames,
and re-authentication (KIP-368, ``connections.max.reauth.ms``), and certificate DNs spelled as Java
prints them (#37 item 3), against a real broker.

One broker, ACLs on, four listeners: SASL_PLAINTEXT (PLAIN users alice and bob, a SCRAM user carol;
sessions of 1.5 s), INTERNAL (SASL_PLAINTEXT with its own PLAIN user ops only), MTLS (SSL with
required client certificates made by trustme, mapped to names by a rule; no DEFAULT rule) and CERTS
(SSL with required client certificates, the DEFAULT mapping: the principal is the DN).
"""

from __future__ import annotations

import datetime
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from scramp import ScramClient

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.metadata import MetadataRequest
from rivven_kproto.codec.messages.sasl_authenticate import SaslAuthenticateRequest
from rivven_kproto.codec.messages.sasl_handshake import SaslHandshakeRequest

from . import raw_client
from .broker_process import BrokerProcess, server_certificate

LISTENER = re.compile(r"listener (\w+) \(\w+\) listening on [\d.]+:(\d+)")
PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required {};'
SESSION_MS = 1500
TIMEOUT_S = 30


class Broker:
    def __init__(self, process: BrokerProcess, ca: trustme.CA, ca_file: Path, base: Path) -> None:
        self.process, self.ca, self.ca_file, self.base = process, ca, ca_file, base
        self.ports = {"SASL_PLAINTEXT": process.port or 0}  # the first listener
        self.ports.update({name: int(port) for name, port in LISTENER.findall(process.log_text())})

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def sasl(self, listener: str, user: str, password: str, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.address(listener), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password, **extra}

    def mtls(self, common_name: str, organization: str) -> dict[str, Any]:
        cert = self.ca.issue_cert("client.example", common_name=common_name, organization_name=organization,
                                  organization_unit_name="team")
        key_file, cert_file = self.base / f"{common_name}.key", self.base / f"{common_name}.pem"
        cert.private_key_pem.write_to_path(str(key_file))
        cert.cert_chain_pems[0].write_to_path(str(cert_file))
        return {"bootstrap.servers": self.address("MTLS"), "security.protocol": "SSL",
                "ssl.ca.location": str(self.ca_file), "ssl.certificate.location": str(cert_file),
                "ssl.key.location": str(key_file)}

    def certs(self, subject: x509.Name, stem: str) -> dict[str, Any]:
        """A client of the CERTS listener whose certificate has exactly ``subject`` (trustme always
        adds an O and an OU, so the certificate is made with cryptography and signed by the CA)."""
        ca_key = serialization.load_pem_private_key(self.ca.private_key_pem.bytes(), password=None)
        ca_cert = x509.load_pem_x509_certificate(self.ca.cert_pem.bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
        )
        key_file, cert_file = self.base / f"{stem}.key", self.base / f"{stem}.pem"
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return {"bootstrap.servers": self.address("CERTS"), "security.protocol": "SSL",
                "ssl.ca.location": str(self.ca_file), "ssl.certificate.location": str(cert_file),
                "ssl.key.location": str(key_file)}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("sessions")
    ca, keystore, ca_file = server_certificate(base)
    data_dir = base / "data"
    subprocess.run([sys.executable, "-m", "rivven_kproto", "users", "add", "carol", "--data-dir", str(data_dir)],
                   input="carol-pw\n", text=True, check=True, capture_output=True, timeout=60)
    users = PLAIN.format('user_alice="alice-pw" user_bob="bob-pw"')
    ops = PLAIN.format('user_ops="ops-pw"')
    config = base / "server.properties"
    config.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,MTLS://127.0.0.1:0,CERTS://127.0.0.1:0\n"
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT,MTLS:SSL,CERTS:SSL\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:alice;User:bob;User:client-one;User:CN=admin,O=corp\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n"
        f"sasl.jaas.config={users}\n"
        f"listener.name.sasl_plaintext.connections.max.reauth.ms={SESSION_MS}\n"
        f"listener.name.internal.plain.sasl.jaas.config={ops}\n"
        "listener.name.internal.sasl.enabled.mechanisms=PLAIN\n"
        f"listener.name.mtls.ssl.keystore.type=PEM\nlistener.name.mtls.ssl.keystore.location={keystore}\n"
        f"listener.name.mtls.ssl.truststore.type=PEM\nlistener.name.mtls.ssl.truststore.location={ca_file}\n"
        "listener.name.mtls.ssl.client.auth=required\n"
        "listener.name.mtls.ssl.principal.mapping.rules=RULE:^CN=([^,]*),OU=[^,]*,O=Example$/$1/L\n"
        f"listener.name.certs.ssl.keystore.type=PEM\nlistener.name.certs.ssl.keystore.location={keystore}\n"
        f"listener.name.certs.ssl.truststore.type=PEM\nlistener.name.certs.ssl.truststore.location={ca_file}\n"
        "listener.name.certs.ssl.client.auth=required\n"
        "connection.failed.authentication.delay.ms=0\n"
        "kproto.metrics.max.age.ms=0\n"
    )
    process = BrokerProcess(data_dir, base / "broker.log",
                            ["--config", str(config), "--metrics", "127.0.0.1:0"]).start()
    try:
        result = Broker(process, ca, ca_file, base)
        assert set(result.ports) == {"SASL_PLAINTEXT", "INTERNAL", "MTLS", "CERTS"}, process.log_text()
        yield result
    finally:
        assert process.stop() == 0


def authentication_error(config: dict[str, Any]) -> KafkaError | None:
    """None when the client can fetch metadata, else the authentication error librdkafka reports."""
    errors: list[KafkaError] = []
    admin = AdminClient({**config, "error_cb": errors.append})
    for _ in range(120):
        admin.poll(0.1)
        failed = [e for e in errors if e.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL)]
        if failed:
            return failed[0]
        try:
            admin.list_topics(timeout=0.5)
        except KafkaException:
            continue
        return None
    raise AssertionError(f"neither connected nor refused: {errors}")


def produce(config: dict[str, Any], topic: str, count: int = 1, pause_s: float = 0.0) -> list[KafkaError | None]:
    outcomes: list[KafkaError | None] = []
    producer = Producer({**config, "acks": "all", "message.timeout.ms": TIMEOUT_S * 1000})
    for index in range(count):
        producer.produce(topic, str(index).encode(), partition=0, on_delivery=lambda err, _m: outcomes.append(err))
        producer.poll(0)
        time.sleep(pause_s)
    assert producer.flush(TIMEOUT_S) == 0
    return outcomes


def test_each_listener_has_its_own_users(broker: Broker) -> None:
    assert authentication_error(broker.sasl("INTERNAL", "ops", "ops-pw")) is None
    assert authentication_error(broker.sasl("INTERNAL", "alice", "alice-pw")) is not None  # not a user there
    assert authentication_error(broker.sasl("SASL_PLAINTEXT", "ops", "ops-pw")) is not None
    assert authentication_error(broker.sasl("SASL_PLAINTEXT", "alice", "alice-pw")) is None
    scram_on_internal = broker.sasl("INTERNAL", "carol", "carol-pw", **{"sasl.mechanism": "SCRAM-SHA-256"})
    assert authentication_error(scram_on_internal) is not None  # SCRAM is not enabled on INTERNAL


def test_mtls_principals_come_from_the_mapping_rules(broker: Broker) -> None:
    # CN=Client-One,OU=team,O=Example maps to client-one, a super user: it may create and write.
    assert produce(broker.mtls("Client-One", "Example"), "mtls-topic") == [None]
    # CN=Other maps to other, which has no ACL.
    [denied] = produce(broker.mtls("Other", "Example"), "mtls-topic")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # No rule applies to O=Elsewhere (and there is no DEFAULT): the connection is refused.
    with pytest.raises(KafkaException):
        AdminClient(broker.mtls("stranger", "Elsewhere")).list_topics(timeout=5)
    assert "No rules apply to CN=stranger,OU=team,O=Elsewhere" in broker.process.log_text()


def test_a_comma_in_a_common_name_is_escaped_not_a_second_rdn(broker: Broker) -> None:
    """#37 item 3: one CN ``admin,O=corp`` is the principal ``User:CN=admin\\,O\\=corp`` (Java's
    spelling), not the super user ``User:CN=admin,O=corp``."""
    impostor = broker.certs(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "admin,O=corp")]), "impostor")
    admin = AdminClient(broker.sasl("SASL_PLAINTEXT", "alice", "alice-pw"))
    admin.create_topics([NewTopic("certs-topic", 1, 1)])["certs-topic"].result(TIMEOUT_S)
    [denied] = produce(impostor, "certs-topic")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, denied
    # The ACLs of the escaped principal are the ones that apply to it.
    escaped = "User:CN=admin\\,O\\=corp"
    acls = [AclBinding(ResourceType.TOPIC, "certs-topic", ResourcePatternType.LITERAL, escaped, "*", operation,
                       AclPermissionType.ALLOW) for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)]
    for future in admin.create_acls(acls).values():
        future.result(TIMEOUT_S)
    assert produce(impostor, "certs-topic") == [None]
    # The real super user (two RDNs: O=corp, CN=admin) still is one.
    real = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "corp"), x509.NameAttribute(NameOID.COMMON_NAME, "admin")])
    assert produce(broker.certs(real, "real-admin"), "certs-topic-2") == [None]


def test_describe_configs_reports_every_listener(broker: Broker) -> None:
    """#37 item 13: a broker's listeners, as an admin client reads them (was: the first, as PLAINTEXT)."""
    admin = AdminClient(broker.sasl("SASL_PLAINTEXT", "alice", "alice-pw"))
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    listeners = configs["listeners"].value.split(",")
    assert [item.split("://")[0] for item in listeners] == ["SASL_PLAINTEXT", "INTERNAL", "MTLS", "CERTS"]
    assert listeners[0] == "SASL_PLAINTEXT://127.0.0.1:0"  # as configured (Kafka too reports port 0 so)
    assert configs["listener.security.protocol.map"].value == (
        "SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT,MTLS:SSL,CERTS:SSL")
    assert [item.split("://")[0] for item in configs["advertised.listeners"].value.split(",")] == [
        "SASL_PLAINTEXT", "INTERNAL", "MTLS", "CERTS"]


def raw_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack(">i", len(payload)) + payload)


def test_plain_with_bare_v0_tokens(broker: Broker) -> None:
    sock = raw_client.connect(broker.address("SASL_PLAINTEXT"))
    try:
        assert raw_client.call(sock, SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == Errors.NONE
        raw_frame(sock, b"\x00alice\x00alice-pw")
        assert raw_client.read_frame(sock) == b""  # PLAIN's empty reply, size-prefixed
        assert raw_client.call(sock, MetadataRequest(topics=None), 1, correlation_id=2).brokers
    finally:
        sock.close()
    wrong = raw_client.connect(broker.address("SASL_PLAINTEXT"))
    try:
        assert raw_client.call(wrong, SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == Errors.NONE
        raw_frame(wrong, b"\x00alice\x00wrong")
        assert raw_client.closed_by_peer(wrong)
    finally:
        wrong.close()


def test_scram_with_bare_v0_tokens(broker: Broker) -> None:
    sock = raw_client.connect(broker.address("SASL_PLAINTEXT"))
    try:
        assert raw_client.call(sock, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 0).error_code == Errors.NONE
        client = ScramClient(["SCRAM-SHA-256"], "carol", "carol-pw")
        raw_frame(sock, client.get_client_first().encode())
        client.set_server_first(raw_client.read_frame(sock).decode())
        raw_frame(sock, client.get_client_final().encode())
        client.set_server_final(raw_client.read_frame(sock).decode())  # checks the broker's signature
        assert raw_client.call(sock, MetadataRequest(topics=None), 1, correlation_id=2).brokers
    finally:
        sock.close()


def test_a_large_frame_before_authentication_closes_the_connection(broker: Broker) -> None:
    sock = raw_client.connect(broker.address("SASL_PLAINTEXT"))
    try:
        sock.sendall(struct.pack(">i", 600_000) + b"\x00" * 1024)  # beyond sasl.server.max.receive.size
        assert raw_client.closed_by_peer(sock)
    finally:
        sock.close()
    assert "frame size 600000 outside" in broker.process.log_text()


def login(sock: socket.socket, user: str, password: str, correlation_id: int) -> Any:
    handshake = raw_client.call(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1, correlation_id=correlation_id)
    assert handshake.error_code == Errors.NONE
    token = f"\x00{user}\x00{password}".encode()
    return raw_client.call(sock, SaslAuthenticateRequest(auth_bytes=token), 1, correlation_id=correlation_id + 1)


def test_sessions_expire_unless_the_client_reauthenticates(broker: Broker) -> None:
    sock = raw_client.connect(broker.address("SASL_PLAINTEXT"))
    try:
        answer = login(sock, "alice", "alice-pw", 1)
        assert (answer.error_code, answer.session_lifetime_ms) == (Errors.NONE, SESSION_MS)
        time.sleep(SESSION_MS / 1000 + 0.2)  # the session is over, whatever the machine's speed
        header = raw_client.RequestHeader(request_api_key=3, request_api_version=1, correlation_id=3, client_id="raw")
        sock.sendall(raw_client.encode_request(header, MetadataRequest(topics=None)))
        assert raw_client.closed_by_peer(sock)
    finally:
        sock.close()
    assert "the authentication session of User:alice expired" in broker.process.log_text()

    sock = raw_client.connect(broker.address("SASL_PLAINTEXT"))
    try:
        assert login(sock, "alice", "alice-pw", 1).error_code == Errors.NONE
        time.sleep(SESSION_MS / 1000 + 0.2)
        again = login(sock, "alice", "alice-pw", 3)  # a handshake after expiry starts re-authentication
        assert (again.error_code, again.session_lifetime_ms) == (Errors.NONE, SESSION_MS)
        assert raw_client.call(sock, MetadataRequest(topics=None), 1, correlation_id=5).brokers
        other = login(sock, "bob", "bob-pw", 6)
        assert (other.error_code, other.error_message) == (
            Errors.SASL_AUTHENTICATION_FAILED, "Cannot change principals during re-authentication from User.alice: User.bob"
        )
        assert raw_client.closed_by_peer(sock)
    finally:
        sock.close()


def test_librdkafka_reauthenticates_and_keeps_producing(broker: Broker) -> None:
    errors: list[KafkaError] = []
    config = broker.sasl("SASL_PLAINTEXT", "bob", "bob-pw", error_cb=errors.append)
    # About four session lifetimes of producing on the same connections.
    outcomes = produce(config, "reauth-topic", count=30, pause_s=0.2)
    assert outcomes == [None] * 30
    log_text = broker.process.log_text()
    assert "User:bob re-authenticated" in log_text
    assert "the authentication session of User:bob expired" not in log_text
    assert not [e for e in errors if e.code() == KafkaError._AUTHENTICATION], errors


def test_an_untrusted_client_certificate_is_refused_and_others_are_served(broker: Broker) -> None:
    stranger_ca = trustme.CA()
    cert = stranger_ca.issue_cert("client.example", common_name="Client-One", organization_name="Example",
                                  organization_unit_name="team")
    key_file, cert_file = broker.base / "untrusted.key", broker.base / "untrusted.pem"
    cert.private_key_pem.write_to_path(str(key_file))
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    config = {**broker.mtls("Client-One", "Example"), "ssl.certificate.location": str(cert_file),
              "ssl.key.location": str(key_file)}
    with pytest.raises(KafkaException):
        AdminClient(config).list_topics(timeout=5)
    assert re.search(r"TLS handshake with 127\.0\.0\.1:\d+ on MTLS failed", broker.process.log_text())
    assert produce(broker.mtls("Client-One", "Example"), "mtls-topic") == [None]  # the trusted one still works


def test_an_unknown_mechanism_gets_kafkas_answer_and_the_connection_closes(broker: Broker) -> None:
    sock = raw_client.connect(broker.address("SASL_PLAINTEXT"))
    try:
        answer = raw_client.call(sock, SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert answer.error_code == Errors.UNSUPPORTED_SASL_MECHANISM
        assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
        assert raw_client.closed_by_peer(sock)
    finally:
        sock.close()


METRICS = re.compile(r"metrics on (http://[\d.]+:\d+)/metrics")


def test_a_reauthentication_mechanism_is_never_log_text_or_a_label_unless_enabled(broker: Broker) -> None:
    """Issue #37 item 10: the name a client gives when re-authenticating was logged and labelled
    as sent, so a newline forged a log line and every new name made a metrics series."""
    forged = [f"PLAIN\nFORGED-{i} User:admin granted everything" for i in range(3)]
    for mechanism in forged:
        sock = raw_client.connect(broker.address("SASL_PLAINTEXT"))
        try:
            assert login(sock, "alice", "alice-pw", 1).error_code == Errors.NONE
            handshake = raw_client.call(sock, SaslHandshakeRequest(mechanism=mechanism), 1, correlation_id=3)
            assert handshake.error_code == Errors.NONE  # Kafka answers, then fails the SaslAuthenticate
            answer = raw_client.call(sock, SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-pw"), 1,
                                     correlation_id=4)
            assert answer.error_code == Errors.SASL_AUTHENTICATION_FAILED
            assert raw_client.closed_by_peer(sock)
        finally:
            sock.close()
    lines = broker.process.log_text().splitlines()  # the failure is logged before it is answered
    assert not [line for line in lines if line.startswith("FORGED")], lines[-10:]
    url = METRICS.findall(broker.process.log_text())[-1]
    with urllib.request.urlopen(url + "/metrics", timeout=TIMEOUT_S) as scrape:
        text = scrape.read().decode()
    labels = set(re.findall(r'rivven_authentication_failures_total\{[^}]*mechanism="([^"]*)"', text))
    assert labels and labels <= {"PLAIN", "SCRAM-SHA-256", "TLS", "none"}, labels  # TLS: refused certificates
