"""Share groups (KIP-932, queues for Kafka) with confluent-kafka's ``ShareConsumer`` (librdkafka's
share consumer) against a real broker process.

The broker is told ``share.auto.offset.reset=earliest``, a 1.5 s acquisition lock and a 200 ms
heartbeat interval through its ``KPROTO_*`` environment. Absence ("never delivered again") is
checked without sleeping: a sentinel record is produced after the records that must not come back,
and the consumer reads until the sentinel; anything delivered before it is what the broker handed
out. Every wait is bounded.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from rivven_kproto.codec.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from rivven_kproto.codec.messages.share_group_describe import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)

from . import raw_client
from .broker_process import BrokerProcess, module_broker
from .txn_helpers import create_topics

TIMEOUT_S = 30
SENTINEL = b"sentinel"
BROKER_ENV = {
    "KPROTO_SHARE_AUTO_OFFSET_RESET": "earliest",
    "KPROTO_GROUP_SHARE_RECORD_LOCK_DURATION_MS": "1500",
    "KPROTO_GROUP_SHARE_HEARTBEAT_INTERVAL_MS": "200",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "share", BROKER_ENV)


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in values:
        producer.produce(topic, value=value)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0


def consumer(bootstrap: str, group: str, topic: str, **config: Any) -> ShareConsumer:
    share = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **config})
    share.subscribe([topic])
    return share


def poll_until(share: ShareConsumer, done: Any, timeout: float = TIMEOUT_S) -> list[Any]:
    """Poll (acknowledging nothing itself) until ``done(messages so far)``; fails after ``timeout``."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while not done(got):
        assert time.monotonic() < deadline, f"timed out with {[m.value() for m in got]}"
        for message in share.poll(0.5):
            assert message.error() is None, message.error()
            got.append(message)
    return got


def values(messages: list[Any]) -> list[bytes]:
    return [m.value() for m in messages]


def has_sentinel(messages: list[Any]) -> bool:
    return any(m.value() == SENTINEL for m in messages)


def test_implicit_acknowledgement_is_not_redelivered(broker: BrokerProcess) -> None:
    topic, group = fresh("share-implicit"), fresh("g")
    records = [b"r%d" % i for i in range(20)]
    produce(broker.bootstrap, topic, records)
    first = consumer(broker.bootstrap, group, topic)
    got = poll_until(first, lambda got: len(got) >= len(records))
    assert sorted(values(got)) == sorted(records)
    # The next polls carry the acknowledgements on their ShareFetch (piggy-backed) ...
    produce(broker.bootstrap, topic, [SENTINEL])
    assert values(poll_until(first, has_sentinel)) == [SENTINEL]
    # ... and librdkafka 2.16's close() does not send those of the last poll: a commit does.
    result = first.commit_sync(TIMEOUT_S)
    assert result and all(error is None for error in result.values()), result
    first.close()
    produce(broker.bootstrap, topic, [SENTINEL])
    second = consumer(broker.bootstrap, group, topic)
    try:
        assert values(poll_until(second, has_sentinel)) == [SENTINEL]
    finally:
        second.close()


def test_explicit_accept_release_reject(broker: BrokerProcess) -> None:
    topic, group = fresh("share-explicit"), fresh("g")
    produce(broker.bootstrap, topic, [b"r%d" % i for i in range(9)])
    share = consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        got = poll_until(share, lambda got: len(got) >= 9)
        kinds = {}
        for message in got:
            index = int(message.value()[1:])
            kind = AcknowledgeType.ACCEPT if index < 3 else AcknowledgeType.RELEASE if index < 6 else AcknowledgeType.REJECT
            kinds[message.value()] = kind
            share.acknowledge(message, kind)
        share.commit_sync(TIMEOUT_S)
        again = poll_until(share, lambda got: len(got) >= 3)
        assert sorted(values(again)) == [b"r3", b"r4", b"r5"]  # released: delivered again, and only they
        assert {m.delivery_count() for m in again} == {2}
        for message in again:
            share.acknowledge(message, AcknowledgeType.ACCEPT)
        share.commit_sync(TIMEOUT_S)
        produce(broker.bootstrap, topic, [SENTINEL])
        tail = poll_until(share, has_sentinel)
        assert values(tail) == [SENTINEL]  # rejected (archived) and accepted ones never come back
        for message in tail:
            share.acknowledge(message, AcknowledgeType.ACCEPT)
        share.commit_sync(TIMEOUT_S)
    finally:
        share.close()


def test_lock_expiry_redelivers_to_another_member(broker: BrokerProcess) -> None:
    topic, group = fresh("share-expiry"), fresh("g")
    produce(broker.bootstrap, topic, [b"r%d" % i for i in range(5)])
    holder = consumer(broker.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
    other = consumer(broker.bootstrap, group, topic)
    try:
        held = poll_until(holder, lambda got: len(got) >= 5)
        assert {m.delivery_count() for m in held} == {1}
        # The holder neither acknowledges nor polls: after the 1.5 s lock the records are released.
        redelivered = poll_until(other, lambda got: len(got) >= 5)
        assert sorted(values(redelivered)) == sorted(values(held))
        assert {m.delivery_count() for m in redelivered} == {2}
    finally:
        other.close()
        holder.close()


def test_two_consumers_on_one_partition_get_disjoint_records(broker: BrokerProcess) -> None:
    topic, group = fresh("share-two"), fresh("g")
    create_topics(broker.bootstrap, {topic: 1})
    records = [b"r%d" % i for i in range(300)]
    a = consumer(broker.bootstrap, group, topic, **{"max.poll.records": 20})
    b = consumer(broker.bootstrap, group, topic, **{"max.poll.records": 20})
    got: dict[str, list[bytes]] = {"a": [], "b": []}
    try:
        produce(broker.bootstrap, topic, records)
        deadline = time.monotonic() + TIMEOUT_S
        while len(got["a"]) + len(got["b"]) < len(records):
            assert time.monotonic() < deadline, {k: len(v) for k, v in got.items()}
            for name, share in (("a", a), ("b", b)):
                for message in share.poll(0.2):
                    assert message.error() is None, message.error()
                    got[name].append(message.value())
        assert not set(got["a"]) & set(got["b"])
        assert sorted(got["a"] + got["b"]) == sorted(records)
        described = describe(broker, group)
        assert described.group_state == "Stable" and len(described.members) == 2
        assert all(m.assignment.topic_partitions[0].partitions == [0] for m in described.members)
        assert (group, "share", "Stable", "share") in list_groups(broker, ["share"])
        assert group not in {listed[0] for listed in list_groups(broker, ["consumer"])}
    finally:
        a.close()
        b.close()


def list_groups(broker: BrokerProcess, types: list[str]) -> set[tuple[str, str, str, str]]:
    sock = raw_client.connect(broker.bootstrap)
    try:
        response: ListGroupsResponse = raw_client.call(sock, ListGroupsRequest(types_filter=types), 5)
    finally:
        sock.close()
    return {(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in response.groups}


def describe(broker: BrokerProcess, group: str) -> Any:
    sock = raw_client.connect(broker.bootstrap)
    try:
        response: ShareGroupDescribeResponse = raw_client.call(
            sock, ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 1)
    finally:
        sock.close()
    (described,) = response.groups
    assert described.error_code == 0, described
    return described


def test_read_committed_never_delivers_aborted_records(tmp_path: Path) -> None:
    env = {**BROKER_ENV, "KPROTO_SHARE_ISOLATION_LEVEL": "read_committed"}
    process = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", env=env).start()
    try:
        topic = fresh("share-txn")
        create_topics(process.bootstrap, {topic: 1})
        producer = Producer({"bootstrap.servers": process.bootstrap, "transactional.id": fresh("tx")})
        producer.init_transactions(TIMEOUT_S)
        for batch, commit in ((0, True), (1, False), (2, True), (3, False), (4, True)):
            producer.begin_transaction()
            for i in range(5):
                producer.produce(topic, value=(b"c" if commit else b"a") + b"%d-%d" % (batch, i))
            producer.flush(TIMEOUT_S)
            (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce(topic, value=SENTINEL)
        producer.commit_transaction(TIMEOUT_S)
        share = consumer(process.bootstrap, fresh("g"), topic)
        try:
            got = values(poll_until(share, has_sentinel))
        finally:
            share.close()
        assert not [v for v in got if v.startswith(b"a")], got
        assert sorted(v for v in got if v.startswith(b"c")) == sorted(
            b"c%d-%d" % (batch, i) for batch in (0, 2, 4) for i in range(5))
    finally:
        process.kill()


def test_kill_9_loses_nothing_acquired_and_redelivers_nothing_accepted(tmp_path: Path) -> None:
    kill_9_round(BrokerProcess(tmp_path / "data", tmp_path / "broker.log", env=BROKER_ENV).start())


def kill_9_round(process: BrokerProcess) -> None:
    """Half the records accepted, half acquired and left; kill -9; restart: only the left half
    comes back (the native log and PostgreSQL engines share this check)."""
    try:
        topic, group = fresh("share-kill"), fresh("g")
        create_topics(process.bootstrap, {topic: 1})
        produce(process.bootstrap, topic, [b"r%d" % i for i in range(10)])
        share = consumer(process.bootstrap, group, topic, **{"share.acknowledgement.mode": "explicit"})
        got = poll_until(share, lambda got: len(got) >= 10)
        accepted = {m.value() for m in got if int(m.value()[1:]) % 2 == 0}
        for message in got:
            if message.value() in accepted:
                share.acknowledge(message, AcknowledgeType.ACCEPT)
        result = share.commit_sync(TIMEOUT_S)
        assert all(error is None for error in result.values()), result
        port = process.port
        process.kill()  # the odd records are acquired but not acknowledged
        share.close()  # against a dead broker: nothing more reaches it
        process.start(port or 0)
        produce(process.bootstrap, topic, [SENTINEL])
        after = consumer(process.bootstrap, group, topic)
        try:
            redelivered = values(poll_until(after, has_sentinel))
        finally:
            after.close()
        assert sorted(redelivered) == sorted([*(b"r%d" % i for i in range(1, 10, 2)), SENTINEL])
    finally:
        process.kill()
