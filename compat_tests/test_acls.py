"""Issue #17 (part): ACL authorization with Kafka's model, against a real broker and real clients.

A broker with ``authorizer.class.name`` set, a SASL_PLAINTEXT listener (PLAIN users admin, alice,
bob; SCRAM users created through the KIP-554 admin APIs; ``super.users=User:admin``) and a
PLAINTEXT one (principal ``User:ANONYMOUS``). The admin manages ACLs and SCRAM users with
confluent-kafka's AdminClient and ``kproto``; alice's and bob's clients get Kafka's
authorization errors until an ACL allows them, and again once it is deleted.
"""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.describe_log_dirs import DescribeLogDirsRequest
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic
from rivven_kproto.codec.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)

from .broker_process import BrokerProcess
from .test_security_sessions import authentication_error
from .txn_helpers import Raw

LISTENER = re.compile(r"listener SASL_PLAINTEXT \(SASL_PLAINTEXT\) listening on [\d.]+:(\d+)")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-pw" user_alice="alice-pw" user_bob="bob-pw";')
TIMEOUT_S = 30


class Cluster:
    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.sasl_port = int(LISTENER.findall(broker.log_text())[-1])

    def config(self, user: str, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-pw", **extra,
        }

    def admin(self) -> AdminClient:
        return AdminClient(self.config("admin"))

    def admin_cli(self, directory: Path) -> list[str]:
        """``kproto`` as the super user admin, through the SASL listener (--command-config)."""
        properties = directory / "admin.properties"
        properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\n"
                              "sasl.password=admin-pw\n")
        return [sys.executable, "-m", "rivven_kproto", "--bootstrap", f"127.0.0.1:{self.sasl_port}",
                "--command-config", str(properties)]


def start(base: Path) -> BrokerProcess:
    config = base / "server.properties"
    config.write_text(
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n"
        f"sasl.jaas.config={JAAS}\n"
        "connection.failed.authentication.delay.ms=0\n"
    )
    return BrokerProcess(base / "data", base / "broker.log", ["--config", str(config)]).start()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    broker = start(tmp_path_factory.mktemp("acls"))
    try:
        result = Cluster(broker)
        admin = result.admin()  # kept alive until its futures are done
        for future in admin.create_topics([NewTopic("orders", 1), NewTopic("payments", 1)]).values():
            future.result(TIMEOUT_S)
        yield result
    finally:
        broker.stop()


def produce(config: dict[str, Any], topic: str) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 10_000, "acks": "all"})
    producer.produce(topic, b"v", partition=0, on_delivery=lambda err, _m: outcome.append(err))
    producer.flush(TIMEOUT_S)
    assert outcome, "no delivery report"
    return outcome[0]


def binding(principal: str, resource: ResourceType, name: str, operation: AclOperation,
            pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def test_nothing_is_allowed_without_an_acl(cluster: Cluster) -> None:
    error = produce(cluster.config("alice"), "orders")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    listed = AdminClient(cluster.config("alice")).list_topics(timeout=TIMEOUT_S).topics
    assert "orders" not in listed and "payments" not in listed  # topics without Describe are left out
    assert set(cluster.admin().list_topics(timeout=TIMEOUT_S).topics) >= {"orders", "payments"}  # super user


def test_acls_allow_then_deleting_them_denies_again(cluster: Cluster) -> None:
    admin = cluster.admin()
    acls = [
        binding("User:alice", ResourceType.TOPIC, "ord", AclOperation.WRITE, ResourcePatternType.PREFIXED),
        binding("User:alice", ResourceType.TOPIC, "orders", AclOperation.READ),
        binding("User:alice", ResourceType.GROUP, "alice-group", AclOperation.READ),
    ]
    for future in admin.create_acls(acls).values():
        future.result(TIMEOUT_S)
    assert produce(cluster.config("alice"), "orders") is None
    error = produce(cluster.config("bob"), "orders")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    error = produce(cluster.config("alice"), "payments")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    consumer = Consumer(cluster.config("alice", **{"group.id": "alice-group", "auto.offset.reset": "earliest"}))
    consumer.assign([TopicPartition("orders", 0, 0)])
    message = None
    for _ in range(30):
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            break
    assert message is not None and message.error() is None and message.value() == b"v"
    consumer.commit(message=message, asynchronous=False)  # Read on the group and the topic
    consumer.close()

    described = admin.describe_acls(
        AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None, AclOperation.ANY,
                         AclPermissionType.ANY)
    ).result(TIMEOUT_S)
    assert sorted((b.restype, b.name, b.operation) for b in described) == sorted(
        (b.restype, b.name, b.operation) for b in acls
    )
    write_filter = AclBindingFilter(ResourceType.TOPIC, "ord", ResourcePatternType.PREFIXED, "User:alice", None,
                                    AclOperation.WRITE, AclPermissionType.ALLOW)
    (deleted,) = [f.result(TIMEOUT_S) for f in admin.delete_acls([write_filter]).values()]
    assert [(b.name, b.operation) for b in deleted] == [("ord", AclOperation.WRITE)]
    error = produce(cluster.config("alice"), "orders")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Who changed the ACLs, and how, is in the log (#37 item 13).
    log_text = cluster.broker.log_text()
    assert re.search(r"ACLs created by User:admin: .*name=alice-group", log_text), log_text[-2000:]
    assert re.search(r"ACLs deleted by User:admin: \(pattern=ResourcePattern\(resourceType=TOPIC, name=ord, "
                     r"patternType=PREFIXED\), entry=\(principal=User:alice, host=\*, operation=WRITE", log_text)


def test_authorized_operations_are_the_clients_own(cluster: Cluster) -> None:
    """After the previous test alice keeps Read on "orders" (Describe is implied); admin has everything."""
    def operations(user: str) -> set[AclOperation]:
        admin = AdminClient(cluster.config(user))
        futures = admin.describe_topics(TopicCollection(["orders"]), include_authorized_operations=True)
        (description,) = [f.result(TIMEOUT_S) for f in futures.values()]
        return set(description.authorized_operations)

    assert operations("alice") == {AclOperation.READ, AclOperation.DESCRIBE}
    assert {AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER_CONFIGS} <= operations("admin")


def test_a_transactional_id_needs_its_own_acl(cluster: Cluster) -> None:
    producer = Producer(cluster.config("bob", **{"transactional.id": "bob-tx"}))
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_txn_offset_commit_needs_write_on_the_transactional_id_first(cluster: Cluster) -> None:
    """#37 item 2: Read on a group and a topic is not enough to commit offsets into (and so open,
    then fence by its timeout) another client's transaction: Write on its transactional id is
    checked first, as Kafka does."""
    from rivven_kproto.codec.messages.txn_offset_commit import (
        TxnOffsetCommitRequest,
        TxnOffsetCommitRequestPartition,
        TxnOffsetCommitRequestTopic,
    )

    admin = cluster.admin()
    reads = [binding("User:ANONYMOUS", ResourceType.GROUP, "anon-offsets", AclOperation.READ),
             binding("User:ANONYMOUS", ResourceType.TOPIC, "orders", AclOperation.READ)]
    write = binding("User:ANONYMOUS", ResourceType.TRANSACTIONAL_ID, "victim-tx", AclOperation.WRITE)
    for future in admin.create_acls(reads).values():
        future.result(TIMEOUT_S)
    raw = Raw(cluster.broker.bootstrap)  # the PLAINTEXT listener: User:ANONYMOUS

    def commit() -> int:
        request = TxnOffsetCommitRequest(
            transactional_id="victim-tx", group_id="anon-offsets", producer_id=4242, producer_epoch=0,
            topics=[TxnOffsetCommitRequestTopic(name="orders", partitions=[
                TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_metadata=None)])])
        (topic,) = raw.call(request, 3).topics
        return int(topic.partitions[0].error_code)

    try:
        assert commit() == Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        for future in admin.create_acls([write]).values():
            future.result(TIMEOUT_S)
        assert commit() == Errors.INVALID_PRODUCER_ID_MAPPING  # authorized: on to the coordinator's checks
    finally:
        raw.close()
        filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, None, b.operation,
                                    b.permission_type) for b in [*reads, write]]
        for future in admin.delete_acls(filters).values():
            future.result(TIMEOUT_S)


def test_anonymous_clients_cannot_abort_transactions_or_manage_acls(cluster: Cluster) -> None:
    raw = Raw(cluster.broker.bootstrap)  # the PLAINTEXT listener: User:ANONYMOUS
    try:
        assert raw.write_txn_markers(4242, 0, False, {"orders": [0]}) == {("orders", 0): Errors.CLUSTER_AUTHORIZATION_FAILED}
        # Sizes need Describe on the cluster; an id names a topic, but its layout needs Describe on it.
        log_dirs = raw.call(DescribeLogDirsRequest(topics=None), 4)
        assert (log_dirs.error_code, log_dirs.results) == (Errors.CLUSTER_AUTHORIZATION_FAILED, [])
        assert raw.call(MetadataRequest(topics=None), 12).topics == []  # all topics: the hidden are left out
        orders_id = uuid.UUID(json.loads((cluster.broker.data_dir / "meta" / "topics.json").read_text())["orders"]["id"])
        (by_id,) = raw.call(MetadataRequest(topics=[MetadataRequestTopic(topic_id=orders_id, name=None)]), 12).topics
        assert (by_id.error_code, by_id.name, by_id.topic_id, by_id.partitions) == (
            Errors.TOPIC_AUTHORIZATION_FAILED, None, orders_id, []
        )
    finally:
        raw.close()
    anonymous = AdminClient({"bootstrap.servers": cluster.broker.bootstrap})
    futures = anonymous.create_acls([binding("User:*", ResourceType.TOPIC, "*", AclOperation.ALL)])
    with pytest.raises(KafkaException) as raised:
        for future in futures.values():
            future.result(TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_acls_survive_a_restart(tmp_path: Path) -> None:
    broker = start(tmp_path)
    try:
        cluster = Cluster(broker)
        admin = cluster.admin()
        for future in admin.create_acls([binding("User:bob", ResourceType.TOPIC, "kept", AclOperation.ALL)]).values():
            future.result(TIMEOUT_S)
        assert broker.stop() == 0
        broker.start()
        cluster = Cluster(broker)
        assert produce(cluster.config("bob"), "kept") is None  # All on the topic includes Write
    finally:
        if broker.alive():
            broker.stop()


def test_without_an_authorizer_acl_apis_answer_security_disabled(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_acls([binding("User:x", ResourceType.TOPIC, "t", AclOperation.READ)])
    with pytest.raises(KafkaException) as raised:
        for future in futures.values():
            future.result(TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.SECURITY_DISABLED


def test_kproto_acls_add_list_remove(cluster: Cluster, tmp_path: Path) -> None:
    base = [*cluster.admin_cli(tmp_path), "--format", "json"]

    def kproto(*args: str) -> Any:
        result = subprocess.run([*base, *args], text=True, capture_output=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    kproto("acls", "add", "--principal", "User:bob", "--operation", "write", "--operation", "describe", "--topic", "payments")
    listed = kproto("acls", "list", "--principal", "User:bob", "--topic", "payments")
    assert sorted(a["operation"] for a in listed) == ["describe", "write"]
    assert produce(cluster.config("bob"), "payments") is None
    removed = kproto("acls", "remove", "--principal", "User:bob", "--operation", "write", "--topic", "payments")
    assert [a["operation"] for a in removed] == ["write"]
    error = produce(cluster.config("bob"), "payments")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def scram_login_error(cluster: Cluster, user: str, password: str, mechanism: str) -> KafkaError | None:
    """None when the user can log in with this password, else the authentication error."""
    return authentication_error({**cluster.config(user), "sasl.mechanism": mechanism, "sasl.password": password})


def test_scram_users_through_the_admin_api(cluster: Cluster) -> None:
    admin = cluster.admin()
    upsert = UserScramCredentialUpsertion("scram-carl", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carl-pw")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(TIMEOUT_S)
    described = admin.describe_user_scram_credentials(["scram-carl"])["scram-carl"].result(TIMEOUT_S)
    [info] = described.scram_credential_infos
    assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_512, 8192)
    assert scram_login_error(cluster, "scram-carl", "carl-pw", "SCRAM-SHA-512") is None
    assert scram_login_error(cluster, "scram-carl", "wrong", "SCRAM-SHA-512") is not None
    assert scram_login_error(cluster, "scram-carl", "carl-pw", "SCRAM-SHA-256") is not None  # no such credential

    # Kafka's validation, error by error, and the missing user in describe.
    too_few = UserScramCredentialUpsertion("scram-dora", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1024), b"pw")
    with pytest.raises(KafkaException) as raised:
        admin.alter_user_scram_credentials([too_few])["scram-dora"].result(TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    with pytest.raises(KafkaException) as raised:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND

    # alice (no Alter on the Cluster) may not change credentials; the super user deletes them.
    as_alice = AdminClient(cluster.config("alice"))
    with pytest.raises(KafkaException) as raised:
        as_alice.alter_user_scram_credentials([upsert])["scram-carl"].result(TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    deletion = UserScramCredentialDeletion("scram-carl", ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([deletion])["scram-carl"].result(TIMEOUT_S)
    assert scram_login_error(cluster, "scram-carl", "carl-pw", "SCRAM-SHA-512") is not None


def test_kproto_users_add_list_remove_through_the_broker(cluster: Cluster, tmp_path: Path) -> None:
    base = cluster.admin_cli(tmp_path)

    def kproto(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *args], input=stdin, text=True, capture_output=True, timeout=60)

    added = kproto("users", "add", "scram-erin", "--mechanism", "SCRAM-SHA-256", "--iterations", "4096", stdin="erin-pw\n")
    assert added.returncode == 0, added.stderr
    assert scram_login_error(cluster, "scram-erin", "erin-pw", "SCRAM-SHA-256") is None
    listed = kproto("users", "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert {"user": "scram-erin", "mechanism": "SCRAM-SHA-256", "iterations": 4096} in json.loads(listed.stdout)
    removed = kproto("users", "remove", "scram-erin", "--mechanism", "SCRAM-SHA-256")
    assert removed.returncode == 0, removed.stderr
    assert scram_login_error(cluster, "scram-erin", "erin-pw", "SCRAM-SHA-256") is not None
    again = kproto("users", "remove", "scram-erin", "--mechanism", "SCRAM-SHA-256")
    assert again.returncode != 0 and "RESOURCE_NOT_FOUND" in again.stderr


def test_kproto_acls_producer_and_consumer_convenience_sets(cluster: Cluster, tmp_path: Path) -> None:
    base = [*cluster.admin_cli(tmp_path), "--format", "json"]

    def kproto(*args: str) -> Any:
        result = subprocess.run([*base, *args], text=True, capture_output=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    added = kproto("acls", "add", "--allow-principal", "User:bob", "--producer", "--topic", "conv",
                   "--transactional-id", "bob-conv", "--idempotent")
    assert sorted((a["resource_type"], a["operation"]) for a in added) == [
        ("cluster", "idempotent-write"), ("topic", "create"), ("topic", "describe"), ("topic", "write"),
        ("transactional-id", "describe"), ("transactional-id", "write"),
    ]
    producer = Producer(cluster.config("bob", **{"transactional.id": "bob-conv"}))
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce("conv", b"in-a-transaction", partition=0)
    producer.commit_transaction(TIMEOUT_S)

    added = kproto("acls", "add", "--allow-principal", "User:bob", "--consumer", "--topic", "conv", "--group", "bob-group")
    assert sorted((a["resource_type"], a["operation"]) for a in added) == [
        ("group", "read"), ("topic", "describe"), ("topic", "read"),
    ]
    consumer = Consumer(cluster.config("bob", **{"group.id": "bob-group", "auto.offset.reset": "earliest",
                                                 "isolation.level": "read_committed", "enable.auto.commit": False}))
    try:
        consumer.subscribe(["conv"])
        message = None
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.error() is None and message.value() == b"in-a-transaction"
        consumer.commit(message, asynchronous=False)
    finally:
        consumer.close()
    removed = kproto("acls", "remove", "--allow-principal", "User:bob", "--consumer", "--topic", "conv", "--group", "bob-group")
    assert len(removed) == 3
    # Kafka's spellings of operations are accepted; an unknown one is a usage error.
    assert kproto("acls", "add", "--allow-principal", "User:bob", "--operation", "DescribeConfigs", "--topic", "conv")[0]["operation"] == "describe-configs"
    bad = subprocess.run([*base, "acls", "add", "--allow-principal", "User:bob", "--operation", "Fly", "--topic", "conv"],
                         text=True, capture_output=True, timeout=60)
    assert bad.returncode == 2 and "unknown operation Fly" in bad.stderr


def test_nothing_denied_leaves_a_trace(cluster: Cluster) -> None:
    """bob has no ACL: his produce, auto-create, offset commit and transaction are refused with
    Kafka's errors, and afterwards the log, the topic list, the group's offsets and the transaction
    coordinator show no sign of them."""
    from confluent_kafka import OFFSET_INVALID, ConsumerGroupTopicPartitions

    admin = cluster.admin()
    before = admin.list_topics(timeout=TIMEOUT_S)
    payments_end = Consumer(cluster.config("admin", **{"group.id": "probe"})).get_watermark_offsets(
        TopicPartition("payments", 0), timeout=TIMEOUT_S)[1]

    error = produce(cluster.config("bob"), "payments")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    error = produce(cluster.config("bob"), "bob-would-create-this")  # auto-creation needs Create
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # librdkafka gives a commit without a coordinator up after session.timeout.ms (45 s by default):
    # FindCoordinator is refused for bob every time, so waiting longer only costs time.
    consumer = Consumer(cluster.config("bob", **{"group.id": "bob-group-denied", "enable.auto.commit": False,
                                                 "session.timeout.ms": 6_000}))
    with pytest.raises(KafkaException) as raised:
        consumer.commit(offsets=[TopicPartition("payments", 0, 1)], asynchronous=False)
    # FindCoordinator answers GROUP_AUTHORIZATION_FAILED; librdkafka reports a commit without a
    # coordinator as _WAIT_COORD. What matters below: nothing was committed.
    assert raised.value.args[0].code() in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError._WAIT_COORD)
    consumer.close()

    producer = Producer(cluster.config("bob", **{"transactional.id": "bob-denied-tx"}))
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(TIMEOUT_S)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    after = admin.list_topics(timeout=TIMEOUT_S)
    assert set(after.topics) == set(before.topics) and "bob-would-create-this" not in after.topics
    end = Consumer(cluster.config("admin", **{"group.id": "probe"})).get_watermark_offsets(
        TopicPartition("payments", 0), timeout=TIMEOUT_S)[1]
    assert end == payments_end
    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("bob-group-denied", [TopicPartition("payments", 0)])]
    )["bob-group-denied"].result(TIMEOUT_S)
    assert [tp.offset for tp in committed.topic_partitions] == [OFFSET_INVALID]
    # The admin (a super user) sees every transactional id, its own included: bob's was never registered.
    Producer(cluster.config("admin", **{"transactional.id": "admin-visible-tx"})).init_transactions(TIMEOUT_S)
    listed = subprocess.run([*cluster.admin_cli(cluster.broker.data_dir.parent), "--format", "json", "txns", "list"],
                            text=True, capture_output=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    ids = [entry["transactional_id"] for entry in json.loads(listed.stdout)["transactions"]]
    assert "bob-denied-tx" not in ids and "admin-visible-tx" in ids


def test_scram_credentials_and_acls_survive_kill_9(tmp_path: Path) -> None:
    broker = start(tmp_path)
    try:
        cluster = Cluster(broker)
        admin = cluster.admin()
        for future in admin.create_acls([binding("User:nine", ResourceType.TOPIC, "kept9", AclOperation.ALL)]).values():
            future.result(TIMEOUT_S)
        upsert = UserScramCredentialUpsertion("nine", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"nine-pw")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(TIMEOUT_S)
        broker.kill()  # SIGKILL right after both were acknowledged
        broker.start()
        cluster = Cluster(broker)
        nine = {**cluster.config("nine"), "sasl.mechanism": "SCRAM-SHA-256", "sasl.password": "nine-pw"}
        assert produce(nine, "kept9") is None  # authenticated by the kept credential, allowed by the kept ACL
    finally:
        if broker.alive():
            broker.stop()


def test_refused_write_txn_markers_are_logged_once_a_request_and_rate_limited(cluster: Cluster) -> None:
    """Issue #37 item 11: one anonymous request of 8,000 markers logged 8,000 lines. Now a refusal
    is one line a request, and refusals are rate-limited as the protocol warnings are."""
    before = cluster.broker.log_text().count("WriteTxnMarkers refused")
    markers = [WritableTxnMarker(producer_id=5000 + i, producer_epoch=0, transaction_result=False,
                                 topics=[WritableTxnMarkerTopic(name="orders", partition_indexes=[0])], coordinator_epoch=0)
               for i in range(2000)]
    raw = Raw(cluster.broker.bootstrap)
    try:
        answer = raw.call(WriteTxnMarkersRequest(markers=markers), 1)
        assert len(answer.markers) == 2000
        assert {p.error_code for m in answer.markers for t in m.topics for p in t.partitions} == {
            Errors.CLUSTER_AUTHORIZATION_FAILED}
        assert cluster.broker.log_text().count("WriteTxnMarkers refused") - before == 1  # answered after logging
        for _ in range(30):
            raw.call(WriteTxnMarkersRequest(markers=markers[:1]), 1)
    finally:
        raw.close()
    assert cluster.broker.log_text().count("WriteTxnMarkers refused") - before <= 10  # the burst of an interval


def test_secrets_are_private_on_disk_and_a_loose_data_directory_warns(cluster: Cluster, tmp_path: Path) -> None:
    """Issue #37 item 12: meta/scram.json and meta/acls.json were 0644 in a 0755 directory (salted
    keys allow an offline dictionary attack). The data directory is made 0700, secrets 0600."""
    admin = cluster.admin()
    for future in admin.create_acls([binding("User:alice", ResourceType.TOPIC, "modes", AclOperation.READ)]).values():
        future.result(TIMEOUT_S)
    upsert = UserScramCredentialUpsertion("modes-user", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(TIMEOUT_S)
    data_dir = cluster.broker.data_dir
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    for name in ("scram.json", "acls.json"):
        assert stat.S_IMODE((data_dir / "meta" / name).stat().st_mode) == 0o600, name

    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    broker = BrokerProcess(loose, tmp_path / "loose.log").start()
    try:
        assert re.search(r"data directory .*loose is mode 0?755", broker.log_text()), broker.log_text()[-2000:]
    finally:
        broker.stop()
