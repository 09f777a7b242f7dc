"""The KIP-848 consumer group protocol with confluent-kafka (librdkafka ``group.protocol=consumer``)
against a real broker process.

The broker sets the session and heartbeat times (``group.consumer.session.timeout.ms`` 3 s and
``group.consumer.heartbeat.interval.ms`` 200 ms here, through its ``KPROTO_*`` environment); every
wait is bounded. Consumers run in the test's thread and are polled in turn, so their rebalance
callbacks run one at a time: an ``on_assign`` of a partition another consumer has not revoked
(``on_revoke``/``on_lost``) yet would be a double ownership, and the tests record and forbid it.
Covered: members joining and leaving, static members, commit and resume, a regex subscription
picking up a topic created later, the group's state recovered after a SIGKILL of the broker, and
the exactly-once consume-transform-produce pipeline (``eos_app.py``) through application and
broker kills. The recovery test runs on both storage engines (PostgreSQL when it is installed).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from rivven_kproto.codec.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)

from . import raw_client
from .broker_process import BrokerProcess, module_broker
from .test_cli import ok
from .test_eos import run_pipeline
from .txn_helpers import create_topics

TIMEOUT_S = 30
BROKER_ENV = {
    "KPROTO_GROUP_CONSUMER_SESSION_TIMEOUT_MS": "3000",
    "KPROTO_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "200",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "kip848", BROKER_ENV)


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", env=BROKER_ENV)
    yield process
    process.kill()


class Group:
    """Consumers of one group, polled in turn; who owns which partition, by their callbacks."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.consumers: dict[str, Consumer] = {}
        self.owner: dict[tuple[str, int], str] = {}
        self.violations: list[str] = []
        self.revocations: dict[str, int] = {}
        self.records: dict[str, list[tuple[str, int, int]]] = {}

    def add(self, name: str, topics: list[str], **config: Any) -> Consumer:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 500,
            **config,
        })
        self.revocations[name] = 0
        self.records[name] = []

        def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                holder = self.owner.get((tp.topic, tp.partition))
                if holder is not None and holder != name:
                    self.violations.append(f"{tp.topic}[{tp.partition}] assigned to {name} while {holder} owns it")
                self.owner[(tp.topic, tp.partition)] = name

        def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
            self.revocations[name] += 1
            for tp in partitions:
                if self.owner.get((tp.topic, tp.partition)) == name:
                    del self.owner[(tp.topic, tp.partition)]

        consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        self.consumers[name] = consumer
        return consumer

    def close(self, name: str) -> None:
        self.consumers.pop(name).close()  # revokes what it owns (on_revoke) and leaves

    def owned(self, name: str) -> set[tuple[str, int]]:
        return {tp for tp, owner in self.owner.items() if owner == name}

    def poll_until(self, predicate: Callable[[], bool], timeout: float = TIMEOUT_S) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, consumer in list(self.consumers.items()):
                message = consumer.poll(0.02)
                if message is not None and message.error() is None:
                    self.records[name].append((message.topic(), message.partition(), message.offset()))
            if predicate():
                return True
        return predicate()

    def close_all(self) -> None:
        for name in list(self.consumers):
            self.close(name)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=f"{i}".encode(), partition=i % partitions)
    assert producer.flush(TIMEOUT_S) == 0


def describe(bootstrap: str, group: str) -> Any:
    """Our ConsumerGroupDescribe v1 (confluent-kafka's description lacks the member epochs)."""
    sock = raw_client.connect(bootstrap)
    try:
        response: ConsumerGroupDescribeResponse = raw_client.call(
            sock, ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 1)
    finally:
        sock.close()
    return response.groups[0]


def assignment_of(described_group: Any) -> dict[str, tuple[int, dict[str, list[int]], dict[str, list[int]]]]:
    """member id -> (epoch, current, target assignment)."""
    return {
        m.member_id: (m.member_epoch,
                      {t.topic_name: t.partitions for t in m.assignment.topic_partitions},
                      {t.topic_name: t.partitions for t in m.target_assignment.topic_partitions})
        for m in described_group.members
    }


def test_rebalance_as_members_join_and_leave(broker: BrokerProcess, topic_name: str) -> None:
    create_topics(broker.bootstrap, {topic_name: 6})
    produce(broker.bootstrap, topic_name, 600, 6)
    everything = {(topic_name, p) for p in range(6)}
    group = Group(broker.bootstrap, f"g-{topic_name}")
    try:
        group.add("c1", [topic_name])
        assert group.poll_until(lambda: group.owned("c1") == everything)
        group.add("c2", [topic_name])
        assert group.poll_until(lambda: len(group.owned("c1")) == 3 and len(group.owned("c2")) == 3)
        group.add("c3", [topic_name])
        assert group.poll_until(lambda: all(len(group.owned(c)) == 2 for c in ("c1", "c2", "c3")))
        described = describe(broker.bootstrap, group.group)
        assert (described.error_code, described.group_state, described.assignor_name) == (0, "Stable", "uniform")
        assert all(epoch == described.group_epoch and current == target
                   for epoch, current, target in assignment_of(described).values())
        # kproto groups list|describe: the group type, epochs, and current vs target assignments.
        listed = {g["group_id"]: g for g in ok(broker.bootstrap, "groups", "list")["groups"]}
        assert (listed[group.group]["type"], listed[group.group]["protocol_type"]) == ("consumer", "consumer")
        (cli,) = ok(broker.bootstrap, "groups", "describe", group.group)["groups"]
        assert (cli["type"], cli["state"], cli["protocol"], cli["group_epoch"]) == (
            "consumer", "Stable", "uniform", described.group_epoch)
        assert sorted(len(m["assignment"]) for m in cli["members"]) == [2, 2, 2]
        assert all(m["assignment"] == m["target_assignment"] and m["member_epoch"] == described.group_epoch
                   for m in cli["members"])
        group.close("c1")
        assert group.poll_until(lambda: set(group.owner) == everything and not group.owned("c1"))
        group.close("c2")
        assert group.poll_until(lambda: group.owned("c3") == everything)
        expected = {(topic_name, p, o) for p in range(6) for o in range(100)}

        def consumed() -> set[tuple[str, int, int]]:  # nothing committed: a moved partition is read again
            return {r for records in group.records.values() for r in records}

        assert group.poll_until(lambda: consumed() >= expected)
        assert consumed() == expected
        assert not group.violations, group.violations
    finally:
        group.close_all()


def test_static_member_rejoins_with_its_partitions(broker: BrokerProcess, topic_name: str) -> None:
    create_topics(broker.bootstrap, {topic_name: 4})
    group = Group(broker.bootstrap, f"g-{topic_name}")
    try:
        group.add("s1", [topic_name], **{"group.instance.id": "i1"})
        group.add("s2", [topic_name], **{"group.instance.id": "i2"})
        assert group.poll_until(lambda: len(group.owned("s1")) == 2 and len(group.owned("s2")) == 2)
        before = describe(broker.bootstrap, group.group)
        s1_partitions = group.owned("s1")
        revocations_of_s2 = group.revocations["s2"]
        group.close("s1")  # a static member leaves temporarily (epoch -2): its partitions wait for it
        assert group.poll_until(lambda: describe(broker.bootstrap, group.group).members[0].member_epoch == -2
                                or any(m.member_epoch == -2 for m in describe(broker.bootstrap, group.group).members))
        group.add("s1-again", [topic_name], **{"group.instance.id": "i1"})
        assert group.poll_until(lambda: group.owned("s1-again") == s1_partitions)
        after = describe(broker.bootstrap, group.group)
        assert after.group_epoch == before.group_epoch  # no rebalance
        assert group.revocations["s2"] == revocations_of_s2
        assert sorted(m.instance_id for m in after.members) == ["i1", "i2"]
        assert not group.violations, group.violations
    finally:
        group.close_all()


def test_commit_and_resume(broker: BrokerProcess, topic_name: str) -> None:
    create_topics(broker.bootstrap, {topic_name: 2})
    produce(broker.bootstrap, topic_name, 40, 2)
    name = f"g-{topic_name}"
    first = Group(broker.bootstrap, name)
    try:
        consumer = first.add("c1", [topic_name])
        assert first.poll_until(lambda: len(first.records["c1"]) >= 20)
        positions: dict[int, int] = {}
        for _, partition, offset in first.records["c1"][:20]:
            positions[partition] = max(positions.get(partition, 0), offset + 1)
        consumer.commit(offsets=[TopicPartition(topic_name, p, o) for p, o in positions.items()], asynchronous=False)
    finally:
        first.close_all()
    second = Group(broker.bootstrap, name)
    try:
        second.add("c2", [topic_name])
        expected = {(topic_name, p, o) for p in range(2) for o in range(positions.get(p, 0), 20)}
        assert second.poll_until(lambda: set(second.records["c2"]) >= expected)
        assert set(second.records["c2"]) == expected
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(TIMEOUT_S)
        assert name in {g.group_id for g in listed.valid}
        classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(TIMEOUT_S)
        assert name not in {g.group_id for g in classic.valid}
    finally:
        second.close_all()


def test_regex_subscription_picks_up_a_new_topic(broker: BrokerProcess) -> None:
    prefix = f"rx-{uuid.uuid4().hex[:8]}"
    first, later = f"{prefix}-a", f"{prefix}-b"
    create_topics(broker.bootstrap, {first: 1})
    produce(broker.bootstrap, first, 5, 1)
    group = Group(broker.bootstrap, f"g-{prefix}")
    try:
        group.add("c1", [f"^{prefix}-.*"])
        assert group.poll_until(lambda: len(group.records["c1"]) == 5)
        create_topics(broker.bootstrap, {later: 2})
        assert group.poll_until(lambda: group.owned("c1") == {(first, 0), (later, 0), (later, 1)})
        produce(broker.bootstrap, later, 4, 2)
        assert group.poll_until(lambda: {t for t, _, _ in group.records["c1"]} == {first, later}
                                and len(group.records["c1"]) == 9)
        member = describe(broker.bootstrap, group.group).members[0]
        assert member.subscribed_topic_regex in (f"^{prefix}-.*", f"(^{prefix}-.*)")  # librdkafka joins its regexes
    finally:
        group.close_all()


@pytest.mark.parametrize("engine", ["native", "postgresql"])
def test_group_state_recovered_after_broker_kill(engine: str, tmp_path: Path, request: pytest.FixtureRequest,
                                                 topic_name: str) -> None:
    """Both storage engines keep the group's records in the coordinator log they already have."""
    storage = ["--storage", request.getfixturevalue("postgres_url")] if engine == "postgresql" else []
    own_broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", storage, env=BROKER_ENV)
    try:
        _recovered_after_kill(own_broker, topic_name)
    finally:
        own_broker.kill()


def _recovered_after_kill(own_broker: BrokerProcess, topic_name: str) -> None:
    own_broker.start()
    port = own_broker.port
    create_topics(own_broker.bootstrap, {topic_name: 4})
    group = Group(own_broker.bootstrap, f"g-{topic_name}")
    try:
        group.add("c1", [topic_name])
        group.add("c2", [topic_name])
        assert group.poll_until(lambda: len(group.owned("c1")) == 2 and len(group.owned("c2")) == 2)
        assert group.poll_until(lambda: describe(own_broker.bootstrap, group.group).group_state == "Stable")
        before = describe(own_broker.bootstrap, group.group)
        revocations = dict(group.revocations)
        own_broker.kill()
        own_broker.start(port or 0)
        after = describe(own_broker.bootstrap, group.group)
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert assignment_of(after) == assignment_of(before)
        # The members carry on with their epochs: no rebalance, nothing revoked, still Stable.
        assert not group.poll_until(lambda: group.revocations != revocations, timeout=2)
        again = describe(own_broker.bootstrap, group.group)
        assert (again.group_state, again.group_epoch) == ("Stable", before.group_epoch)
        assert assignment_of(again) == assignment_of(before)
        assert not group.violations, group.violations
    finally:
        group.close_all()


def test_exactly_once_pipeline_with_the_consumer_protocol(tmp_path: Path, own_broker: BrokerProcess) -> None:
    """eos_app.py with ``group.protocol=consumer``: an application kill and a broker SIGKILL, then
    every input record's transform exactly once in the output for a read_committed reader."""
    # Enough records that the application is still at work at each kill (it commits ~15,000 a second).
    stats = run_pipeline(tmp_path, own_broker, "confluent-kafka-consumer-protocol", 30_000, app_kills=1,
                         broker_kills=1, deadline_s=120)
    print(f"exactly-once pipeline, confluent-kafka group.protocol=consumer: {stats}")
    assert stats["runs"] >= 2
