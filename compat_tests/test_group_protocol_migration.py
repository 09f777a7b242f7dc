"""KIP-848 online migration with confluent-kafka: a classic group upgraded to a consumer group when a
``group.protocol=consumer`` member joins, and downgraded when that member leaves.

One broker (``group.consumer.migration.policy`` left at Kafka's default, bidirectional). A classic
consumer (eager ``range``) starts alone and owns every partition; a consumer-protocol one joins the
same group: the group converts online, both consume their share; the broker is killed and
restarted in between (the converted group is replayed). Each record is committed as soon as it is
read, so no record is lost or read twice; when the consumer-protocol member leaves, the group is
classic again and the classic member gets every partition back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupType, KafkaException
from confluent_kafka.admin import AdminClient

from .broker_process import BrokerProcess
from .test_consumer_group_protocol import BROKER_ENV, TIMEOUT_S, Group, describe, produce
from .txn_helpers import create_topics

PARTITIONS = 4
MIGRATION_ENV = {**BROKER_ENV, "KPROTO_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"}
CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 6000, "heartbeat.interval.ms": 200,
           "partition.assignment.strategy": "range"}


@pytest.fixture
def migration_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", env=MIGRATION_ENV).start()
    yield process
    process.kill()


class CommittingGroup(Group):
    """Commits each record right after reading it, so a partition that moves on resumes past it."""

    def poll_until(self, predicate: Callable[[], bool], timeout: float = TIMEOUT_S) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, consumer in list(self.consumers.items()):
                message = consumer.poll(0.02)
                if message is None or message.error() is not None:
                    continue
                self.records[name].append((message.topic(), message.partition(), message.offset()))
                try:
                    consumer.commit(message=message, asynchronous=False)
                except KafkaException as exc:  # a rebalance raced the commit: the test then fails on a re-read
                    self.violations.append(f"{name} could not commit {message.offset()}: {exc}")
            if predicate():
                return True
        return predicate()


def group_type(bootstrap: str, group_id: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for kind, label in ((ConsumerGroupType.CONSUMER, "consumer"), (ConsumerGroupType.CLASSIC, "classic")):
        if group_id in {g.group_id for g in admin.list_consumer_groups(types={kind}).result(TIMEOUT_S).valid}:
            return label
    return "none"


def test_classic_group_upgraded_and_downgraded_online(migration_broker: BrokerProcess, topic_name: str) -> None:
    broker = migration_broker
    create_topics(broker.bootstrap, {topic_name: PARTITIONS})
    everything = {(topic_name, p) for p in range(PARTITIONS)}
    group = CommittingGroup(broker.bootstrap, f"g-{topic_name}")

    def read() -> list[tuple[str, int, int]]:
        return [r for records in group.records.values() for r in records]

    try:
        produce(broker.bootstrap, topic_name, 40, PARTITIONS)
        group.add("old", [topic_name], **CLASSIC)
        assert group.poll_until(lambda: group.owned("old") == everything and len(read()) == 40)
        assert group_type(broker.bootstrap, group.group) == "classic"

        group.add("new", [topic_name])  # group.protocol=consumer: the group is upgraded online
        assert group.poll_until(lambda: len(group.owned("old")) == 2 and len(group.owned("new")) == 2), (
            group.owner, broker.log_text()[-3000:])
        assert group_type(broker.bootstrap, group.group) == "consumer"
        before = describe(broker.bootstrap, group.group)
        assert sorted(m.member_type for m in before.members) == [0, 1]  # one classic, one consumer member

        port = broker.port
        broker.kill()  # the converted group must come back from the log
        broker.start(port or 0)
        after = describe(broker.bootstrap, group.group)
        assert (after.error_code, after.group_epoch, len(after.members)) == (0, before.group_epoch, 2)

        produce(broker.bootstrap, topic_name, 40, PARTITIONS)
        assert group.poll_until(lambda: len(read()) >= 80)
        assert not group.poll_until(lambda: len(read()) > 80, timeout=1)
        assert group.records["old"][40:] and group.records["new"], "both members consume"
        assert len(set(read())) == 80, "no record is read twice"

        group.close("new")  # the last consumer-protocol member leaves: classic again
        assert group.poll_until(lambda: group.owned("old") == everything), (group.owner, broker.log_text()[-3000:])
        assert group_type(broker.bootstrap, group.group) == "classic"
        produce(broker.bootstrap, topic_name, 40, PARTITIONS)
        assert group.poll_until(lambda: len(read()) >= 120)
        assert not group.poll_until(lambda: len(read()) > 120, timeout=1)
        assert len(set(read())) == 120, "nothing lost, nothing read twice"
        assert not group.violations, group.violations
    finally:
        group.close_all()
