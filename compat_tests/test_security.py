"""Issue #17 (part): TLS and SASL listeners against a real broker and real clients.

One broker with four listeners (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), a CA and server
certificate made by trustme, PLAIN users from Kafka's JAAS line and SCRAM users added offline with
``kproto users add``. confluent-kafka and kafka-python connect with their usual settings.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition

from rivven_kproto.codec.messages.api_versions import ApiVersionsRequest
from rivven_kproto.codec.messages.metadata import MetadataRequest

from . import raw_client
from .broker_process import BrokerProcess

LISTENER = re.compile(r"listener (\w+) \(\w+\) listening on [\d.]+:(\d+)")
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_admin="adm";'


class Secured:
    def __init__(self, broker: BrokerProcess, ca: Path, ports: dict[str, int]) -> None:
        self.broker, self.ca, self.ports = broker, ca, ports

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def client(self, listener: str, **extra: Any) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap.servers": self.address(listener), "security.protocol": listener}
        if "SSL" in listener:
            config["ssl.ca.location"] = str(self.ca)
        return {**config, **extra}


def add_scram_user(data_dir: Path, name: str, password: str, mechanism: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "rivven_kproto", "users", "add", name, "--mechanism", mechanism, "--data-dir", str(data_dir)],
        input=password + "\n", text=True, check=True, capture_output=True, timeout=60,
    )


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("secured")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    keystore, ca_file = base / "server.pem", base / "ca.pem"
    server.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca.cert_pem.write_to_path(str(ca_file))
    data_dir = base / "data"
    add_scram_user(data_dir, "bob", "bob-secret", "SCRAM-SHA-512")
    add_scram_user(data_dir, "carol", "carol-secret", "SCRAM-SHA-256")
    config = base / "server.properties"
    config.write_text(
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0\n"
        f"ssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={JAAS}\n"
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}\n"
    )
    broker = BrokerProcess(data_dir, base / "broker.log", ["--config", str(config)]).start()
    try:
        ports = {"PLAINTEXT": broker.port or 0, **{name: int(port) for name, port in LISTENER.findall(broker.log_text())}}
        assert set(ports) == {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}, broker.log_text()
        yield Secured(broker, ca_file, ports)
    finally:
        assert broker.stop() == 0


def round_trip(config: dict[str, Any], topic: str) -> list[bytes]:
    producer = Producer({**config, "acks": "all"})
    producer.produce(topic, value=b"one", partition=0)
    producer.produce(topic, value=b"two", partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
            if len(values) == 2:
                break
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize(
    ("listener", "mechanism", "user", "password"),
    [
        ("SSL", None, None, None),
        ("SASL_SSL", "PLAIN", "alice", "alice-secret"),
        ("SASL_PLAINTEXT", "PLAIN", "alice", "alice-secret"),
        ("SASL_SSL", "SCRAM-SHA-512", "bob", "bob-secret"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256", "carol", "carol-secret"),
    ],
)
def test_confluent_kafka_round_trip(secured: Secured, listener: str, mechanism: str | None, user: str | None, password: str | None) -> None:
    extra = {} if mechanism is None else {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    topic = f"sec-{listener}-{mechanism}".lower().replace("_", "-")
    # The client only works if Metadata advertised this listener's port back to it.
    assert round_trip(secured.client(listener, **extra), topic) == [b"one", b"two"]


def test_kafka_python_scram_over_tls(secured: Secured) -> None:
    settings = dict(
        bootstrap_servers=secured.address("SASL_SSL"), security_protocol="SASL_SSL", ssl_cafile=str(secured.ca),
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-secret",
    )
    producer = KafkaProducer(**settings)
    producer.send("sec-kafka-python", b"hello", partition=0).get(30)
    producer.close()
    consumer = KafkaConsumer(**settings, group_id=None)
    consumer.assign([KafkaPythonPartition("sec-kafka-python", 0)])
    consumer.seek_to_beginning()
    records = [r.value for batch in consumer.poll(10_000).values() for r in batch]
    consumer.close()
    assert records == [b"hello"]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_fails_authentication_and_is_logged_without_the_password(secured: Secured, mechanism: str) -> None:
    errors: list[KafkaError] = []
    admin = AdminClient(secured.client(
        "SASL_SSL", **{"sasl.mechanism": mechanism, "sasl.username": "bob" if "SCRAM" in mechanism else "alice",
                       "sasl.password": "not-the-password", "error_cb": errors.append},
    ))
    for _ in range(100):
        admin.poll(0.1)
        if errors:
            break
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    log = secured.broker.log_text()
    assert "authentication of 'alice'" in log or "authentication of 'bob'" in log
    assert "not-the-password" not in log


def test_requests_before_authentication_close_the_connection(secured: Secured) -> None:
    sock = raw_client.connect(secured.address("SASL_PLAINTEXT"))
    try:
        assert raw_client.call(sock, ApiVersionsRequest(), 2).error_code == 0  # allowed before SASL
        header = raw_client.RequestHeader(request_api_key=3, request_api_version=1, correlation_id=2, client_id="raw")
        sock.sendall(raw_client.encode_request(header, MetadataRequest(topics=None)))
        assert raw_client.closed_by_peer(sock)
    finally:
        sock.close()
    assert "API 3 before SASL authentication" in secured.broker.log_text()


def test_a_plaintext_client_on_the_tls_port_is_closed_and_others_are_served(secured: Secured) -> None:
    sock = raw_client.connect(secured.address("SSL"))
    try:
        header = raw_client.RequestHeader(request_api_key=18, request_api_version=2, correlation_id=1, client_id="raw")
        sock.sendall(raw_client.encode_request(header, ApiVersionsRequest()))
        assert raw_client.closed_by_peer(sock, timeout=30)
    finally:
        sock.close()
    assert "TLS handshake with" in secured.broker.log_text()
    assert round_trip(secured.client("PLAINTEXT"), "sec-still-serving") == [b"one", b"two"]


@pytest.mark.parametrize(
    ("listener", "lines"),
    [
        ("SASL_SSL", ["sasl.mechanism=SCRAM-SHA-512", "sasl.username=bob", "sasl.password=bob-secret"]),
        ("SASL_PLAINTEXT", ["sasl.mechanism=PLAIN",
                            'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="alice" password="alice-secret";']),
        ("SSL", []),
    ],
)
def test_kproto_cli_with_a_command_config(secured: Secured, tmp_path: Path, listener: str, lines: list[str]) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("\n".join([f"security.protocol={listener}", f"ssl.ca.location={secured.ca}", *lines]) + "\n")
    base = [sys.executable, "-m", "rivven_kproto", "--bootstrap", secured.address(listener), "--command-config", str(properties)]
    produced = subprocess.run([*base, "produce", "sec-cli", "--partition", "0"], input="from-cli\n", text=True,
                              capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    read = subprocess.run([*base, "consume", "sec-cli", "--from-beginning", "-e"], text=True, capture_output=True, timeout=60)
    assert read.returncode == 0, read.stderr
    assert "from-cli" in read.stdout.splitlines()


def test_kproto_cli_with_a_wrong_password_fails_in_one_line(secured: Secured, tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.username=carol\nsasl.password=nope\n")
    result = subprocess.run(
        [sys.executable, "-m", "rivven_kproto", "--bootstrap", secured.address("SASL_PLAINTEXT"),
         "--command-config", str(properties), "topics", "list"],
        text=True, capture_output=True, timeout=60,
    )
    assert result.returncode == 1 and result.stderr.startswith("error: SASL_AUTHENTICATION_FAILED"), result.stderr
    assert "Traceback" not in result.stderr
