"""The brokers of a cluster talk to each other on a secured inter-broker listener (#19).

Three ``kproto serve`` processes on one PostgreSQL database whose only listener is SASL_SSL
(a trustme CA; the server certificate names 127.0.0.1), with Kafka's authorizer, the super user
``User:broker`` (the brokers' own principal: ``username``/``password`` in the listener's JAAS
line) and no ACL at all for ANONYMOUS. A confluent-kafka transactional producer (as the super
user ``admin``) writes to partitions led by all three brokers and commits: the coordinator's
WriteTxnMarkers to the other leaders, and their AddPartitionsToTxn to the coordinator, go over
TLS with SASL PLAIN, so a read_committed consumer reads every record exactly once. With wrong
credentials configured on the coordinator (a broker starts with them, as Kafka's does: its own
listener still accepts the right ones), the other leaders refuse its markers; read_committed
consumers see the committed records there all the same, as those leaders read the commit
decision from the database. And an SSL-only cluster with
``ssl.client.auth=required``: the brokers present their certificate (CN=broker, mapped to
``User:broker`` by ``ssl.principal.mapping.rules``) to each other. And a cluster whose brokers
log in to each other with SCRAM-SHA-256 (the credential created by the admin once it runs): the
transaction over three leaders, and an ACL change forwarded by a follower in an Envelope.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from .broker_process import BrokerProcess, server_certificate
from .test_cluster import NODES, described_by
from .txn_helpers import TIMEOUT_S, ConfluentTxn, wait_for

COORDINATOR = NODES[0]  # three_brokers-style start: node 1 first takes the coordinator lease
TOPIC, PARTITIONS, PER_PARTITION = "ib-txn", 6, 20
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def _jaas(broker_password: str) -> str:
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required'
            f' username="broker" password="{broker_password}" user_broker="broker-pw" user_admin="admin-pw";')


def _ssl_config(path: Path, keystore: Path, ca_file: Path) -> Path:
    path.write_text(
        "listeners=SSL://127.0.0.1:0\n"
        "ssl.client.auth=required\n"
        "ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/,DEFAULT\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={keystore}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca_file}\n"
        f"authorizer.class.name={STANDARD}\n"
        "super.users=User:broker\n")
    return path


def _config(path: Path, keystore: Path, ca_file: Path, broker_password: str) -> Path:
    path.write_text(
        "listeners=SASL_SSL://127.0.0.1:0\n"
        "inter.broker.listener.name=SASL_SSL\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        "sasl.mechanism.inter.broker.protocol=PLAIN\n"
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={_jaas(broker_password)}\n"
        + _tls_and_authorizer(keystore, ca_file))
    return path


def _tls_and_authorizer(keystore: Path, ca_file: Path) -> str:
    """The SASL_SSL clusters' common lines: PEM key and trust stores, the authorizer, super users."""
    return ("ssl.keystore.type=PEM\n"
            f"ssl.keystore.location={keystore}\n"
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={ca_file}\n"
            f"authorizer.class.name={STANDARD}\n"
            "super.users=User:broker;User:admin\n"
            "connection.failed.authentication.delay.ms=0\n")


class SecureCluster:
    def __init__(self, brokers: dict[int, BrokerProcess], ca_file: Path, mtls: tuple[Path, Path] | None) -> None:
        self.brokers = brokers
        self.ca_file = ca_file
        self.mtls = mtls  # the client's certificate and key (an SSL cluster), else SASL as admin

    def servers(self, node: int | None = None) -> str:
        """Broker ``node``'s bootstrap address, or every broker's."""
        return self.brokers[node].bootstrap if node else ",".join(b.bootstrap for b in self.brokers.values())

    def client(self, node: int | None = None) -> dict[str, Any]:
        servers = self.servers(node)
        if self.mtls is not None:
            return {"bootstrap.servers": servers, "security.protocol": "SSL", "ssl.ca.location": str(self.ca_file),
                    "ssl.certificate.location": str(self.mtls[0]), "ssl.key.location": str(self.mtls[1])}
        return {"bootstrap.servers": servers, "security.protocol": "SASL_SSL", "ssl.ca.location": str(self.ca_file),
                "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-pw"}

    def brokers_seen(self, node: int) -> set[int]:
        try:
            return set(AdminClient(self.client(node)).list_topics(timeout=5).brokers)
        except KafkaException:
            return set()

    def leaders(self, node: int) -> dict[int, int]:
        try:
            topic = AdminClient(self.client(node)).list_topics(TOPIC, timeout=5).topics[TOPIC]
        except KafkaException:
            return {}
        return {p: meta.leader for p, meta in topic.partitions.items()} if topic.error is None else {}


class PlainClients(SecureCluster):
    """Clients on the PLAINTEXT listener (each broker's first), as ANONYMOUS."""

    def client(self, node: int | None = None) -> dict[str, Any]:
        return {"bootstrap.servers": self.servers(node)}


@pytest.fixture
def certificates(tmp_path: Path) -> tuple[Path, Path]:
    _, keystore, ca_file = server_certificate(tmp_path)
    return keystore, ca_file


@contextmanager
def _cluster(tmp_path: Path, storage: str, certificates: tuple[Path, Path],
             coordinator_password: str) -> Iterator[SecureCluster]:
    keystore, ca_file = certificates
    good = _config(tmp_path / "broker.properties", keystore, ca_file, "broker-pw")
    coordinator = _config(tmp_path / "coordinator.properties", keystore, ca_file, coordinator_password)
    with _started(tmp_path, storage, {n: coordinator if n == COORDINATOR else good for n in NODES}, ca_file,
                  None) as cluster:
        yield cluster


@contextmanager
def _started(tmp_path: Path, storage: str, configs: dict[int, Path], ca_file: Path,
             mtls: tuple[Path, Path] | None) -> Iterator[SecureCluster]:
    brokers: dict[int, BrokerProcess] = {}
    try:
        for node in NODES:
            brokers[node] = BrokerProcess(tmp_path / f"n{node}-data", tmp_path / f"n{node}.log",
                                          ["--storage", storage, "--node-id", str(node), "--config",
                                           str(configs[node])]).start()
        cluster = SecureCluster(brokers, ca_file, mtls)
        assert wait_for(lambda: all(cluster.brokers_seen(n) == set(NODES) for n in NODES), TIMEOUT_S), \
            "the brokers never met"
        admin = AdminClient(cluster.client(COORDINATOR))  # kept alive until the result is in
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(TIMEOUT_S)
        assert wait_for(lambda: all(len(cluster.leaders(n)) == PARTITIONS for n in NODES), TIMEOUT_S)
        yield cluster
    finally:
        for broker in brokers.values():
            broker.kill()


def _commit_everywhere(cluster: SecureCluster) -> list[bytes]:
    """One transaction over every partition (led by all three brokers), committed; its values."""
    producer = ConfluentTxn(cluster.client()["bootstrap.servers"], "ib-txn-id",
                            **{k: v for k, v in cluster.client().items() if k != "bootstrap.servers"})
    producer.init()
    producer.begin()
    sent = [f"p{p}-{i}".encode() for p in range(PARTITIONS) for i in range(PER_PARTITION)]
    for value in sent:
        producer.send(TOPIC, int(value[1:2]), value)
    producer.flush()
    producer.commit()
    producer.close()
    return sent


def _read_committed(cluster: SecureCluster, partitions: list[int], expected: int) -> list[bytes]:
    """read_committed values of these partitions, until ``expected`` arrived (or TIMEOUT_S)."""
    consumer = Consumer({**cluster.client(), "group.id": "ib-reader", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in partitions])
    seen: list[bytes] = []
    try:
        wait_for(lambda: _poll(consumer, seen) >= expected, TIMEOUT_S, interval=0)
    finally:
        consumer.close()
    return seen


def _poll(consumer: Consumer, seen: list[bytes]) -> int:
    for message in consumer.consume(100, 0.2):
        if message.error() is None and message.value() is not None:
            seen.append(message.value())
    return len(seen)


def _end_offsets(cluster: SecureCluster, partitions: list[int], isolation: str) -> dict[int, int]:
    """The end offsets of these partitions as their leaders say: the high watermark
    (read_uncommitted) or the last stable offset (read_committed)."""
    consumer = Consumer({**cluster.client(), "group.id": "ib-lso", "isolation.level": isolation})
    try:
        return {p: int(consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=TIMEOUT_S)[1])
                for p in partitions}
    finally:
        consumer.close()


def test_markers_go_over_the_secured_inter_broker_listener(tmp_path: Path, postgres_url: str,
                                                           certificates: tuple[Path, Path]) -> None:
    with _cluster(tmp_path, postgres_url, certificates, "broker-pw") as cluster:
        leaders = cluster.leaders(COORDINATOR)
        assert set(leaders.values()) - {COORDINATOR}, f"the coordinator leads every partition: {leaders}"
        sent = _commit_everywhere(cluster)
        seen = _read_committed(cluster, list(range(PARTITIONS)), len(sent))
        assert sorted(seen) == sorted(sent)  # every record, exactly once


def test_wrong_inter_broker_credentials_leave_remote_markers_unwritten(
        tmp_path: Path, postgres_url: str, certificates: tuple[Path, Path]) -> None:
    with _cluster(tmp_path, postgres_url, certificates, "not-the-password") as cluster:
        leaders = cluster.leaders(COORDINATOR)
        remote = {p: leader for p, leader in leaders.items() if leader != COORDINATOR}
        assert remote, f"the coordinator leads every partition: {leaders}"
        _commit_everywhere(cluster)  # EndTxn is answered once the decision is logged, as in Kafka
        coordinator = cluster.brokers[COORDINATOR]
        assert wait_for(lambda: "SASL PLAIN as broker refused" in coordinator.log_text(), TIMEOUT_S), \
            coordinator.log_text()
        # The other leaders never got the markers: their partitions end with the records, no
        # marker after them. The commit is decided all the same (its PrepareCommit is durable):
        # they read that decision from the database, and read_committed consumers see every record.
        assert _end_offsets(cluster, list(remote), "read_uncommitted") == dict.fromkeys(remote, PER_PARTITION)
        assert sorted(_read_committed(cluster, list(range(PARTITIONS)), PER_PARTITION * PARTITIONS)) == sorted(
            f"p{p}-{i}".encode() for p in range(PARTITIONS) for i in range(PER_PARTITION))
        assert _end_offsets(cluster, list(remote), "read_uncommitted") == dict.fromkeys(remote, PER_PARTITION)


def test_ssl_only_brokers_present_their_certificate_to_each_other(tmp_path: Path, postgres_url: str) -> None:
    import trustme

    ca = trustme.CA()
    certificate = ca.issue_cert("127.0.0.1", "localhost", common_name="broker")  # DN CN=broker,OU=...,O=trustme
    keystore, ca_file, cert_file, key_file = (tmp_path / name for name in ("broker.pem", "ca.pem", "cert.pem",
                                                                             "key.pem"))
    certificate.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    certificate.cert_chain_pems[0].write_to_path(str(cert_file))
    certificate.private_key_pem.write_to_path(str(key_file))
    ca.cert_pem.write_to_path(str(ca_file))
    config = _ssl_config(tmp_path / "ssl.properties", keystore, ca_file)
    with _started(tmp_path, postgres_url, dict.fromkeys(NODES, config), ca_file, (cert_file, key_file)) as cluster:
        leaders = cluster.leaders(COORDINATOR)
        assert set(leaders.values()) - {COORDINATOR}, f"the coordinator leads every partition: {leaders}"
        sent = _commit_everywhere(cluster)
        assert sorted(_read_committed(cluster, list(range(PARTITIONS)), len(sent))) == sorted(sent)


def _scram_config(path: Path, keystore: Path, ca_file: Path) -> Path:
    """Clients log in with PLAIN (``admin``); the brokers with SCRAM-SHA-256 as ``broker``, whose
    credential the admin creates once the cluster runs (as with Kafka's kafka-configs.sh)."""
    path.write_text(
        "listeners=SASL_SSL://127.0.0.1:0\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n"
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256\n"
        "listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule"
        ' required user_admin="admin-pw";\n'
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule"
        ' required username="broker" password="broker-pw";\n'
        + _tls_and_authorizer(keystore, ca_file))
    return path


def test_brokers_authenticate_to_each_other_with_scram(tmp_path: Path, postgres_url: str,
                                                       certificates: tuple[Path, Path]) -> None:
    keystore, ca_file = certificates
    config = _scram_config(tmp_path / "scram.properties", keystore, ca_file)
    with _started(tmp_path, postgres_url, dict.fromkeys(NODES, config), ca_file, None) as cluster:
        admin = AdminClient(cluster.client(COORDINATOR))
        upsert = UserScramCredentialUpsertion(
            "broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"broker-pw")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(TIMEOUT_S)
        leaders = cluster.leaders(COORDINATOR)
        assert set(leaders.values()) - {COORDINATOR}, f"the coordinator leads every partition: {leaders}"
        # Markers to the other leaders, and their AddPartitionsToTxn to the coordinator, log in with SCRAM.
        sent = _commit_everywhere(cluster)
        assert sorted(_read_committed(cluster, list(range(PARTITIONS)), len(sent))) == sorted(sent)

        # An ACL change sent to a follower reaches the controller in an Envelope over the same link,
        # authorized as the client (admin, a super user).
        follower = next(n for n in NODES if n != COORDINATOR)
        properties = tmp_path / "admin.properties"
        properties.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=admin\n"
                              f"sasl.password=admin-pw\nssl.ca.location={ca_file}\n")
        kproto = [sys.executable, "-m", "rivven_kproto", "--command-config", str(properties), "--format", "json"]
        added = subprocess.run([*kproto, "--bootstrap", cluster.brokers[follower].bootstrap, "acls", "add",
                                "--allow-principal", "User:zoe", "--operation", "read", "--topic", TOPIC],
                               text=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        assert added.returncode == 0, added.stderr
        listed = subprocess.run([*kproto, "--bootstrap", cluster.brokers[COORDINATOR].bootstrap, "acls", "list",
                                 "--principal", "User:zoe"], text=True, capture_output=True, timeout=60,
                                stdin=subprocess.DEVNULL)
        assert listed.returncode == 0, listed.stderr
        assert [a["operation"] for a in json.loads(listed.stdout)] == ["read"]


INTERNAL = re.compile(r"listener INTERNAL \(SASL_PLAINTEXT\) listening on [\d.]+:(\d+)")


def test_clients_and_brokers_on_separate_listeners(tmp_path: Path, postgres_url: str) -> None:
    """Clients on a PLAINTEXT listener as ANONYMOUS (ACLs for their topic, transactional id and
    group, but no ClusterAction); the brokers on an INTERNAL SASL listener as the super user. The
    coordinator's markers to the other leaders are allowed only there: a transaction over three
    leaders read exactly once shows they went over INTERNAL."""
    config = tmp_path / "split.properties"
    config.write_text(
        "listeners=CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0\n"
        "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT\n"
        "inter.broker.listener.name=INTERNAL\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        "listener.name.internal.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule"
        ' required username="broker" password="broker-pw" user_broker="broker-pw";\n'
        f"authorizer.class.name={STANDARD}\n"
        "super.users=User:broker\n")
    brokers: dict[int, BrokerProcess] = {}
    try:
        for node in NODES:
            brokers[node] = BrokerProcess(tmp_path / f"n{node}-data", tmp_path / f"n{node}.log",
                                          ["--storage", postgres_url, "--node-id", str(node), "--config",
                                           str(config)]).start()
        servers = ",".join(b.bootstrap for b in brokers.values())

        def seen(node: int) -> set[int]:
            try:
                return set(AdminClient({"bootstrap.servers": brokers[node].bootstrap}).list_topics(timeout=5).brokers)
            except KafkaException:
                return set()

        assert wait_for(lambda: all(seen(n) == set(NODES) for n in NODES), TIMEOUT_S), "the brokers never met"
        internal = INTERNAL.findall(brokers[COORDINATOR].log_text())[-1]
        properties = tmp_path / "broker.properties"
        properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=broker\n"
                              "sasl.password=broker-pw\n")
        kproto = [sys.executable, "-m", "rivven_kproto", "--bootstrap", f"127.0.0.1:{internal}", "--command-config",
                  str(properties)]
        for args in (["topics", "create", TOPIC, "--partitions", str(PARTITIONS)],
                     ["acls", "add", "--allow-principal", "User:ANONYMOUS", "--producer", "--consumer", "--topic", TOPIC,
                      "--transactional-id", "ib-txn-id", "--group", "ib-reader", "--idempotent"]):
            done = subprocess.run([*kproto, *args], text=True, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
            assert done.returncode == 0, done.stderr

        def leaders() -> dict[int, int]:
            try:
                topic = AdminClient({"bootstrap.servers": servers}).list_topics(TOPIC, timeout=5).topics[TOPIC]
            except KafkaException:
                return {}
            return {p: m.leader for p, m in topic.partitions.items()} if topic.error is None else {}

        def allowed_everywhere() -> bool:  # each broker applied the ACLs (read with its heartbeat)
            answers = [described_by(b, [TOPIC]).topics for b in brokers.values()]
            return all(len(t) == 1 and t[0].error_code == 0 and len(t[0].partitions) == PARTITIONS for t in answers)

        assert wait_for(allowed_everywhere, TIMEOUT_S), "the ACLs never reached every broker"
        cluster = PlainClients(brokers, tmp_path, None)
        sent = _commit_everywhere(cluster)
        assert sorted(_read_committed(cluster, list(range(PARTITIONS)), len(sent))) == sorted(sent)
        assert len(set(leaders().values())) >= 2, f"one broker leads every partition: {leaders()}"
    finally:
        for broker in brokers.values():
            broker.kill()
