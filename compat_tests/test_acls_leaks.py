"""Issue #37 item 9: what a client may learn of topics it cannot Describe, and two missed checks.

One secured broker for the module (as ``test_acls.py``: an authorizer, a SASL_PLAINTEXT listener
with PLAIN users, ``super.users=User:admin``). Two topics: ``leak-open``, which the users below
may Describe, and ``leak-secret``, which only the admin may. Each test gives its own user the ACLs
it needs, so the tests do not depend on each other's. Kafka 4.x is the reference:

- DescribeTransactions leaves out the partitions of topics the caller cannot Describe;
- OffsetDelete needs Read on each topic (per partition TOPIC_AUTHORIZATION_FAILED);
- a KIP-848 member naming a topic it cannot Describe is refused (TOPIC_AUTHORIZATION_FAILED), and a
  regex resolves only to topics its principal may Describe (KAFKA-18813);
- ConsumerGroupDescribe of a group assigned a topic the caller cannot Describe answers
  TOPIC_AUTHORIZATION_FAILED for that group instead of naming it (KAFKA-18813);
- an idempotent InitProducerId needs IdempotentWrite on the cluster or Write on some topic, and a
  DENY on the topics counts as Kafka's ``authorizeByResourceType`` counts it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kafka
import kafka.errors
import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from .broker_process import BrokerProcess
from .test_acls import Cluster

USERS = ("admin", "tina", "olga", "nick", "rex", "dora", "ivan")
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{u}-pw"' for u in USERS) + ";")
BROKER_ENV = {"KPROTO_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "200"}
TIMEOUT_S = 30
OPEN, SECRET = "leak-open", "leak-secret"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base: Path = tmp_path_factory.mktemp("acl-leaks")
    config = base / "server.properties"
    config.write_text(
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0\n"
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        f"sasl.jaas.config={JAAS}\n"
    )
    broker = BrokerProcess(base / "data", base / "broker.log", ["--config", str(config)], env=BROKER_ENV).start()
    try:
        result = Cluster(broker)
        admin = result.admin()
        for future in admin.create_topics([NewTopic(OPEN, 2), NewTopic(SECRET, 2)]).values():
            future.result(TIMEOUT_S)
        yield result
    finally:
        broker.stop()


def allow(cluster: Cluster, user: str, *grants: tuple[ResourceType, str, AclOperation],
          permission: AclPermissionType = AclPermissionType.ALLOW,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> None:
    acls = [AclBinding(kind, name, pattern, f"User:{user}", "*", operation, permission)
            for kind, name, operation in grants]
    admin = cluster.admin()  # kept alive until its futures are done
    for future in admin.create_acls(acls).values():
        future.result(TIMEOUT_S)


def kafka_python_admin(cluster: Cluster, user: str) -> Any:
    return kafka.KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{cluster.sasl_port}", security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_plain_username=user, sasl_plain_password=f"{user}-pw",
        request_timeout_ms=TIMEOUT_S * 1000,
    )


def group_consumer(config: dict[str, Any], group: str) -> Consumer:
    return Consumer({**config, "group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 500})


def poll_until(consumer: Consumer, done: Callable[[list[KafkaError]], bool],
               timeout: float = TIMEOUT_S) -> list[KafkaError]:
    """Poll until ``done(errors so far)`` or the timeout; the errors the consumer reported."""
    errors: list[KafkaError] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done(errors):
        try:
            message = consumer.poll(0.2)
        except KafkaException as exc:
            errors.append(exc.args[0])
            continue
        if message is not None and message.error() is not None:
            errors.append(message.error())
    return errors


def test_describe_transactions_leaves_out_topics_the_caller_cannot_describe(cluster: Cluster) -> None:
    """kafka-python's describe_transactions as tina (Describe on the transactional id and on
    leak-open only): the admin's open transaction on both topics shows leak-open alone."""
    producer = Producer(cluster.config("admin", **{"transactional.id": "leak-tx"}))
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(OPEN, b"o", partition=0)
    producer.produce(SECRET, b"s", partition=1)
    assert producer.flush(TIMEOUT_S) == 0  # the partitions are in the transaction now
    allow(cluster, "tina", (ResourceType.TRANSACTIONAL_ID, "leak-tx", AclOperation.DESCRIBE),
          (ResourceType.TOPIC, OPEN, AclOperation.DESCRIBE))
    try:
        as_admin = kafka_python_admin(cluster, "admin").describe_transactions(["leak-tx"])["leak-tx"]
        assert {(tp.topic, tp.partition) for tp in as_admin.topic_partitions} == {(OPEN, 0), (SECRET, 1)}
        as_tina = kafka_python_admin(cluster, "tina").describe_transactions(["leak-tx"])["leak-tx"]
        assert as_tina.state == "Ongoing"
        assert {(tp.topic, tp.partition) for tp in as_tina.topic_partitions} == {(OPEN, 0)}
    finally:
        producer.abort_transaction(TIMEOUT_S)


def test_offset_delete_needs_read_on_each_topic(cluster: Cluster) -> None:
    """kafka-python's delete_group_offsets as olga (Delete on the group, Read on leak-open only):
    leak-secret's partition answers TOPIC_AUTHORIZATION_FAILED and its offset stays."""
    admin = cluster.admin()
    committed = [TopicPartition(OPEN, 0, 5), TopicPartition(SECRET, 0, 7)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("olga-group", committed)])[
        "olga-group"].result(TIMEOUT_S)
    allow(cluster, "olga", (ResourceType.GROUP, "olga-group", AclOperation.DELETE),
          (ResourceType.GROUP, "olga-group", AclOperation.DESCRIBE), (ResourceType.TOPIC, OPEN, AclOperation.READ))
    client = kafka_python_admin(cluster, "olga")
    results = client.delete_group_offsets("olga-group", [kafka.TopicPartition(OPEN, 0), kafka.TopicPartition(SECRET, 0)])
    assert results == {kafka.TopicPartition(OPEN, 0): kafka.errors.NoError,
                       kafka.TopicPartition(SECRET, 0): kafka.errors.TopicAuthorizationFailedError}
    left = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "olga-group", [TopicPartition(OPEN, 0), TopicPartition(SECRET, 0)])])["olga-group"].result(TIMEOUT_S)
    assert {(tp.topic, tp.offset) for tp in left.topic_partitions} == {(OPEN, -1001), (SECRET, 7)}


def test_a_kip848_member_naming_a_topic_it_cannot_describe_is_refused(cluster: Cluster) -> None:
    """confluent-kafka (group.protocol=consumer) as nick, subscribed by name to both topics with
    Read on leak-open only: TOPIC_AUTHORIZATION_FAILED, and leak-secret is never assigned."""
    allow(cluster, "nick", (ResourceType.GROUP, "nick-group", AclOperation.READ),
          (ResourceType.TOPIC, OPEN, AclOperation.READ))
    consumer = group_consumer(cluster.config("nick"), "nick-group")
    try:
        consumer.subscribe([OPEN, SECRET])
        assigned: set[str] = set()

        def refused_or_assigned(errors: list[KafkaError]) -> bool:
            assigned.update(tp.topic for tp in consumer.assignment())
            return bool(assigned) or bool(errors)

        errors = poll_until(consumer, refused_or_assigned)
        assert not assigned
        assert [e.code() for e in errors][:1] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors
    finally:
        consumer.close()


def described_group(cluster: Cluster, user: str, group: str) -> Any:
    """confluent-kafka's describe_consumer_groups (ConsumerGroupDescribe for a KIP-848 group)."""
    admin = AdminClient(cluster.config(user))  # kept alive until its future is done
    return admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)


def test_a_kip848_regex_resolves_only_to_topics_the_member_may_describe(cluster: Cluster) -> None:
    """As rex with Read on leak-open only, a regex matching both topics gets leak-open's
    partitions alone. librdkafka drops partitions of topics it cannot see from what it consumes, so
    the group's own view (described by the admin) is checked: leak-secret was assigned to rex
    before, and no member allowed to read it could have had those partitions."""
    allow(cluster, "rex", (ResourceType.GROUP, "rex-group", AclOperation.READ),
          (ResourceType.TOPIC, OPEN, AclOperation.READ))
    consumer = group_consumer(cluster.config("rex"), "rex-group")
    try:
        consumer.subscribe(["^leak-.*"])
        errors = poll_until(consumer, lambda _errors: bool(consumer.assignment()))
        assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == {(OPEN, 0), (OPEN, 1)}, errors
        (member,) = described_group(cluster, "admin", "rex-group").members
        assert {(tp.topic, tp.partition) for tp in member.assignment.topic_partitions} == {(OPEN, 0), (OPEN, 1)}
    finally:
        consumer.close()


def test_consumer_group_describe_does_not_name_topics_the_caller_cannot_describe(cluster: Cluster) -> None:
    """The admin's KIP-848 group consumes both topics; dora (Describe on the group and leak-open)
    describes it with confluent-kafka's describe_consumer_groups: TOPIC_AUTHORIZATION_FAILED for the
    group, as Kafka 4.0 answers, where the admin sees both topics."""
    consumer = group_consumer(cluster.config("admin"), "dora-watched")
    allow(cluster, "dora", (ResourceType.GROUP, "dora-watched", AclOperation.DESCRIBE),
          (ResourceType.TOPIC, OPEN, AclOperation.DESCRIBE))
    try:
        consumer.subscribe([OPEN, SECRET])
        poll_until(consumer, lambda _errors: len(consumer.assignment()) == 4)
        assert len(consumer.assignment()) == 4

        as_admin = described_group(cluster, "admin", "dora-watched")
        (member,) = as_admin.members
        assert {tp.topic for tp in member.assignment.topic_partitions} == {OPEN, SECRET}
        with pytest.raises(KafkaException) as raised:
            described_group(cluster, "dora", "dora-watched")
        assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def idempotent_init_error(cluster: Cluster, user: str, topic: str) -> KafkaError | None:
    """The first error an idempotent confluent-kafka producer reports (None: a record was delivered)."""
    errors: list[KafkaError] = []
    delivered: list[KafkaError | None] = []
    producer = Producer(cluster.config(user, **{"enable.idempotence": True, "message.timeout.ms": 10_000,
                                                "error_cb": errors.append}))
    producer.produce(topic, b"v", partition=0, on_delivery=lambda err, _m: delivered.append(err))
    deadline = time.monotonic() + TIMEOUT_S
    while not delivered and time.monotonic() < deadline:
        try:
            producer.poll(0.2)
        except KafkaException as exc:  # a fatal error (the producer id refused) is raised by poll
            return exc.args[0]  # type: ignore[no-any-return]
    fatal = [e for e in errors if e.code() != KafkaError._TRANSPORT]
    if fatal:
        return fatal[0]
    assert delivered, "no delivery report"
    return delivered[0]


def test_idempotent_init_producer_id_counts_denies_on_the_topics(cluster: Cluster) -> None:
    """ivan: IdempotentWrite DENIED on the cluster; Write ALLOWED on leak-open but DENIED on the
    ``leak-`` prefix. Kafka's "Write on some topic" finds no ALLOW left standing and answers
    CLUSTER_AUTHORIZATION_FAILED (we ignored topic DENYs: the producer got an id). With the DENY
    gone, Write on leak-open implies idempotence again, as Kafka 3+ does."""
    allow(cluster, "ivan", (ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE),
          permission=AclPermissionType.DENY)
    allow(cluster, "ivan", (ResourceType.TOPIC, OPEN, AclOperation.WRITE))
    allow(cluster, "ivan", (ResourceType.TOPIC, "leak-", AclOperation.WRITE), permission=AclPermissionType.DENY,
          pattern=ResourcePatternType.PREFIXED)
    error = idempotent_init_error(cluster, "ivan", OPEN)
    assert error is not None and error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, error
    deny = AclBindingFilter(ResourceType.TOPIC, "leak-", ResourcePatternType.PREFIXED, "User:ivan", None,
                            AclOperation.WRITE, AclPermissionType.DENY)
    admin = cluster.admin()
    for future in admin.delete_acls([deny]).values():
        future.result(TIMEOUT_S)
    assert idempotent_init_error(cluster, "ivan", OPEN) is None
