"""Security changes made on the controller reach every broker of a cluster (#19).

Three ``kproto serve`` processes on one PostgreSQL database, each with one SASL_PLAINTEXT
listener (PLAIN super user ``admin`` from the JAAS line; SCRAM users created through the admin
API) and Kafka's authorizer. The admin (``kproto`` over SASL, bootstrapped at the controller)
creates a SCRAM user and ACLs there; a confluent-kafka client bootstrapped at another broker
authenticates as that user and produces to a partition that broker leads. Revoking the ACL, then
deleting the user, on the controller is refused by that broker within a few heartbeats; so is a
record above a ``max.message.bytes`` set on the controller, for the topic and as a dynamic broker
default.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from .broker_process import BrokerProcess
from .test_cluster import NODES, three_brokers
from .test_security_sessions import authentication_error
from .txn_helpers import TIMEOUT_S, wait_for

# username/password: the brokers' own credentials (inter-broker SASL, as the super user admin)
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw"'
        ' user_admin="admin-pw";')
CONTROLLER = NODES[0]  # three_brokers starts node 1 first: it takes the coordinator lease
TOPIC = "sec-data"
PLAIN_TOPIC = "sec-plain"  # no overrides: the dynamic broker default applies to it
USER, PASSWORD, MECHANISM = "erin", "erin-pw", "SCRAM-SHA-512"


class SecuredCluster:
    def __init__(self, brokers: dict[int, BrokerProcess], base: Path) -> None:
        self.brokers = brokers
        self.properties = base / "admin.properties"
        self.properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\n"
                                   "sasl.password=admin-pw\n")

    def kproto(self, node: int, *args: str, stdin: str = "") -> Any:
        """``kproto`` as the super user, every request to broker ``node`` (its bootstrap) or as
        the client routes it (topic creation and topic configs to the controller); parsed JSON."""
        done = subprocess.run(
            [sys.executable, "-m", "rivven_kproto", "--bootstrap", self.brokers[node].bootstrap, "--command-config",
             str(self.properties), "--format", "json", *args],
            input=stdin, text=True, capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else None

    def sees_all(self) -> bool:
        """Every broker lists the three (Metadata as each one answers it)."""
        try:
            return all({b["node_id"] for b in self.kproto(node, "cluster", "info")["brokers"]} == set(NODES)
                       for node in NODES)
        except AssertionError:
            return False

    def client(self, node: int, user: str = "admin", password: str = "admin-pw", mechanism: str = "PLAIN") -> dict[
            str, Any]:
        return {"bootstrap.servers": self.brokers[node].bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}

    def topics_listed(self, node: int) -> set[str]:
        """The topics broker ``node`` lists."""
        return {t["name"] for t in self.kproto(node, "topics", "list")["topics"]}

    def leaders(self, node: int, topic: str) -> dict[int, int]:
        """Partition -> leader, as broker ``node`` describes ``topic`` (empty while it has not seen it)."""
        try:
            described = self.kproto(node, "topics", "describe", topic)
        except AssertionError:
            return {}
        return {p["partition"]: p["leader"] for t in described["topics"] for p in t["partitions"]}


def produce(config: dict[str, Any], topic: str, partition: int, value: bytes = b"v") -> KafkaError | None:
    """One record, acks=all, to ``partition``; its delivery error (None: acknowledged)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({**config, "acks": "all", "message.timeout.ms": 10_000, "message.max.bytes": 2_000_000})
    producer.produce(topic, value, partition=partition, on_delivery=lambda err, _m: outcome.append(err))
    producer.flush(TIMEOUT_S)
    assert outcome, "no delivery report"
    return outcome[0]


def error_code(error: KafkaError | None) -> int | None:
    return None if error is None else error.code()


@pytest.fixture
def secured(tmp_path: Path, postgres_url: str) -> Iterator[SecuredCluster]:
    config = tmp_path / "server.properties"
    config.write_text(
        # One listener, so every broker registers (and Metadata names) its SASL address.
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
        f"sasl.jaas.config={JAAS}\n"
        "connection.failed.authentication.delay.ms=0\n"
    )
    with three_brokers(tmp_path, postgres_url, ["--config", str(config)],
                       lambda brokers: SecuredCluster(brokers, tmp_path).sees_all()) as brokers:
        yield SecuredCluster(brokers, tmp_path)


def test_acl_user_and_config_changes_on_the_controller_reach_the_other_brokers(secured: SecuredCluster) -> None:
    secured.kproto(CONTROLLER, "topics", "create", TOPIC, "--partitions", "6")
    secured.kproto(CONTROLLER, "topics", "create", PLAIN_TOPIC, "--partitions", "6")
    # A partition of each topic led by a broker that is not the controller, as that broker says.
    assert wait_for(lambda: all(len(secured.leaders(n, t)) == 6 for n in NODES for t in (TOPIC, PLAIN_TOPIC)),
                    TIMEOUT_S)
    led = {topic: [(leader, p) for p, leader in sorted(secured.leaders(CONTROLLER, topic).items())
                   if leader != CONTROLLER] for topic in (TOPIC, PLAIN_TOPIC)}
    assert led[TOPIC] and led[PLAIN_TOPIC], f"the controller leads every partition: {led}"
    follower, partition = led[TOPIC][0]
    user = secured.client(follower, USER, PASSWORD, MECHANISM)

    # A SCRAM user created on the controller can log in on the follower (it reads the credentials
    # the controller stored at its next heartbeat); without an ACL it may not write.
    assert authentication_error(user) is not None
    secured.kproto(CONTROLLER, "users", "add", USER, "--mechanism", MECHANISM, stdin=PASSWORD + "\n")
    assert wait_for(lambda: authentication_error(user) is None, TIMEOUT_S), "the follower never learnt the user"
    assert error_code(produce(user, TOPIC, partition)) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # An ACL added on the controller allows on the follower, and once removed there refuses again.
    secured.kproto(CONTROLLER, "acls", "add", "--allow-principal", f"User:{USER}", "--operation", "write",
                   "--operation", "describe", "--topic", TOPIC)
    assert wait_for(lambda: produce(user, TOPIC, partition) is None, TIMEOUT_S), "the follower never applied the ACL"
    removed = secured.kproto(CONTROLLER, "acls", "remove", "--principal", f"User:{USER}", "--operation", "write",
                             "--topic", TOPIC)
    assert [a["operation"] for a in removed] == ["write"]
    assert wait_for(lambda: error_code(produce(user, TOPIC, partition)) == KafkaError.TOPIC_AUTHORIZATION_FAILED,
                    TIMEOUT_S), "a revoked ACL still allows on the follower"

    # A follower forwards ACL changes to the controller in an Envelope carrying the client's
    # principal (KIP-590): the controller authorizes the client, not the forwarding broker.
    user_properties = secured.properties.parent / "user.properties"
    user_properties.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={MECHANISM}\n"
                               f"sasl.username={USER}\nsasl.password={PASSWORD}\n")
    forwarded_acl = ["acls", "add", "--allow-principal", "User:zoe", "--operation", "read", "--topic", TOPIC]
    refused = subprocess.run(
        [sys.executable, "-m", "rivven_kproto", "--bootstrap", secured.brokers[follower].bootstrap,
         "--command-config", str(user_properties), *forwarded_acl], text=True, capture_output=True, timeout=60)
    assert refused.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr, refused.stderr
    assert not secured.kproto(CONTROLLER, "acls", "list", "--principal", "User:zoe")
    secured.kproto(follower, *forwarded_acl)  # as the super user, through the follower
    assert [a["operation"] for a in secured.kproto(CONTROLLER, "acls", "list", "--principal", "User:zoe")] == ["read"]

    # A Metadata request at the follower auto-creates a topic through the controller when its
    # client may create topics (the follower checks, as the controller would), not otherwise.
    assert produce(user, "sec-auto-refused", 0) is not None
    assert produce(secured.client(follower), "sec-auto", 0) is None
    assert wait_for(lambda: "sec-auto" in secured.topics_listed(CONTROLLER), TIMEOUT_S)
    assert "sec-auto-refused" not in secured.topics_listed(CONTROLLER)

    # A user deleted on the controller cannot log in on the follower any more.
    secured.kproto(CONTROLLER, "users", "remove", USER, "--mechanism", MECHANISM)
    assert wait_for(lambda: authentication_error(user) is not None, TIMEOUT_S), "a deleted user still logs in"

    # max.message.bytes set on the controller: for the topic (the topic catalog), and as the
    # dynamic broker default (its own document) for a topic without an override.
    admin = secured.client(follower)
    big = b"x" * 5000
    assert produce(admin, TOPIC, partition, big) is None
    secured.kproto(CONTROLLER, "configs", "set", "--topic", TOPIC, "max.message.bytes=1000")
    assert wait_for(lambda: error_code(produce(admin, TOPIC, partition, big)) == KafkaError.MSG_SIZE_TOO_LARGE,
                    TIMEOUT_S), "the topic's max.message.bytes never applied on its leader"
    plain_leader, plain_partition = led[PLAIN_TOPIC][0]
    plain_admin = secured.client(plain_leader)
    assert produce(plain_admin, PLAIN_TOPIC, plain_partition, big) is None
    secured.kproto(CONTROLLER, "configs", "set", "--broker-defaults", "message.max.bytes=1000")
    assert wait_for(
        lambda: error_code(produce(plain_admin, PLAIN_TOPIC, plain_partition, big)) == KafkaError.MSG_SIZE_TOO_LARGE,
        TIMEOUT_S), "the dynamic broker default never applied on another broker"
