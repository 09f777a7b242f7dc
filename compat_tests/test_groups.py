"""Consumer groups and committed offsets with real clients against a real broker process.

confluent-kafka, kafka-python and aiokafka each run the same lifecycle with three members, every
member a process of its own (``group_member.py``) so that one can be SIGKILLed to stop its
heartbeats: the six partitions are split with no overlap, a member that closes hands its
partitions over, a killed one is expired after ``session.timeout.ms`` (6 s), and a member started
after everyone left resumes from the committed offsets. confluent-kafka also covers static
membership and offsets surviving a broker SIGKILL; kafkajs consumes and commits with a group
(``node/group_consume.js``). Every wait is bounded; every test asserts on the records and offsets.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from rivven_kproto.codec.messages.join_group import (
    JoinGroupRequest,
    JoinGroupRequestProtocol,
    JoinGroupResponse,
)
from rivven_kproto.codec.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment

from . import raw_client
from .broker_process import BrokerProcess, module_broker
from .test_eos import BROKER_ENV

MEMBER_SCRIPT = Path(__file__).parent / "group_member.py"
NODE_DIR = Path(__file__).parent / "node"
CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka"]
PARTITIONS = 6
TIMEOUT_S = 30


class Member:
    """A group member subprocess; its events are collected by a reader thread."""

    def __init__(self, client: str, broker: BrokerProcess, topic: str, group: str, name: str, logs: Path) -> None:
        self.name = name
        self.stderr_path = logs / f"{name}.stderr"
        self._stderr = self.stderr_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, str(MEMBER_SCRIPT), client, broker.bootstrap, topic, group, name],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
        )
        self.lock = threading.Lock()
        self.assignment: set[int] = set()
        self.records: list[tuple[int, int, str]] = []
        self.counts: dict[str, int] = {}
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            event = json.loads(line)
            with self.lock:
                kind = event["event"]
                self.counts[kind] = self.counts.get(kind, 0) + 1
                if kind == "assignment":
                    self.assignment = set(event["partitions"])
                elif kind == "records":
                    self.records.extend(tuple(r) for r in event["records"])
                elif kind == "error":
                    self.errors.append(event["message"])

    def count(self, kind: str) -> int:
        with self.lock:
            return self.counts.get(kind, 0)

    def owned(self) -> set[int]:
        with self.lock:
            return set(self.assignment)

    def consumed(self) -> list[tuple[int, int, str]]:
        with self.lock:
            return list(self.records)

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def commit(self) -> None:
        before = self.count("committed")
        self.send("commit")
        wait_until(lambda: self.count("committed") > before, f"{self.name} to commit", [self])

    def close(self) -> None:
        self.send("close")
        wait_until(lambda: self.count("closed") == 1, f"{self.name} to close", [self])
        self.proc.wait(10)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._stderr.close()

    def diagnostics(self) -> str:
        with self.lock:
            state = f"{self.name}: assignment={sorted(self.assignment)} records={len(self.records)} errors={self.errors}"
        return state + "\n" + self.stderr_path.read_text(errors="replace")[-1500:]


def wait_until(condition: Callable[[], bool], what: str, members: list[Member], timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for member in members:
            assert not member.errors, member.diagnostics()
        if time.monotonic() > deadline:
            details = "\n".join(m.diagnostics() for m in members)
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{details}")
        time.sleep(0.1)


def split_among(members: list[Member]) -> bool:
    """Every partition owned by exactly one of ``members`` and each of them owns some."""
    owned = [m.owned() for m in members]
    return all(owned) and sum(map(len, owned)) == PARTITIONS and set().union(*owned) == set(range(PARTITIONS))


def create_topic(broker: BrokerProcess, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT_S)


def produce(broker: BrokerProcess, topic: str, tag: str, per_partition: int, partitions: int = PARTITIONS) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=f"{tag}-{p}-{i}".encode(), partition=p)
    assert producer.flush(TIMEOUT_S) == 0


def committed(broker: BrokerProcess, group: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {tp.partition: tp.offset for tp in future.result(TIMEOUT_S).topic_partitions}


def describe(broker: BrokerProcess, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    return admin.describe_consumer_groups([group])[group].result(TIMEOUT_S)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """This module's broker starts a group's first rebalance at once (no
    ``group.initial.rebalance.delay.ms``): the waits here are for the split, whichever generation
    makes it."""
    yield from module_broker(tmp_path_factory, "broker", {"KPROTO_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"})


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        member.kill()


@pytest.mark.parametrize("client", CLIENTS)
def test_group_lifecycle(
    broker: BrokerProcess, topic_name: str, client: str, members: list[Member], tmp_path: Path
) -> None:
    create_topic(broker, topic_name)
    produce(broker, topic_name, "a", 10)
    group = f"group-{topic_name}"

    def start(name: str) -> Member:
        member = Member(client, broker, topic_name, group, name, tmp_path)
        members.append(member)
        return member

    # Three members split six partitions: each owns two, none is owned twice, all records are read.
    trio_ = [start(f"m{i}") for i in range(3)]
    wait_until(lambda: split_among(trio_) and all(len(m.owned()) == 2 for m in trio_), "a 3-way split", trio_)
    everything = {(p, o) for p in range(PARTITIONS) for o in range(10)}
    # Each member has read every record of the partitions it owns now (not only somebody, in an
    # earlier generation: with no initial rebalance delay the first member reads alone at first),
    # so its commit covers all of them.
    wait_until(lambda: all({o for q, o, _ in m.consumed() if q == p} >= set(range(10)) for m in trio_ for p in m.owned()),
               "each member to read its own partitions", trio_)
    assert {(p, o) for m in trio_ for p, o, _ in m.consumed()} >= everything
    described = describe(broker, group)
    assert str(described.state) == "ConsumerGroupState.STABLE"
    assert sorted(sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members) == \
        sorted(sorted(m.owned()) for m in trio_)
    for member in trio_:
        member.commit()
    assert committed(broker, group) == dict.fromkeys(range(PARTITIONS), 10)

    # A member that closes leaves the group: its partitions move to the two others.
    trio_[2].close()
    pair = trio_[:2]
    wait_until(lambda: split_among(pair) and all(len(m.owned()) == 3 for m in pair), "a 2-way split", pair)

    # A member killed without leaving stops heartbeating and is expired after the session timeout.
    killed_at = time.monotonic()
    trio_[1].kill()
    survivor = trio_[0]
    wait_until(lambda: survivor.owned() == set(range(PARTITIONS)), "the survivor to own everything", [survivor])
    assert time.monotonic() - killed_at > 4.0, "the killed member was dropped before its session could expire"
    assert len(describe(broker, group).members) == 1

    # The survivor reads new records from the committed positions, commits and leaves.
    produce(broker, topic_name, "b", 1)
    wait_until(lambda: {v for _, _, v in survivor.consumed() if v.startswith("b-")} == {f"b-{p}-0" for p in range(6)},
               "the survivor to read the b records", [survivor])
    survivor.commit()
    survivor.close()
    assert committed(broker, group) == dict.fromkeys(range(PARTITIONS), 11)
    assert str(describe(broker, group).state) == "ConsumerGroupState.EMPTY"

    # A member of the restarted group resumes from the committed offsets, not from the beginning.
    produce(broker, topic_name, "c", 1)
    fresh = start("fresh")
    wait_until(lambda: len(fresh.consumed()) >= PARTITIONS, "the restarted group to read", [fresh])
    assert sorted(fresh.consumed()) == [(p, 11, f"c-{p}-0") for p in range(PARTITIONS)]
    fresh.close()


# -- confluent-kafka: static membership, durability -------------------------------------------------


def poll_until(consumers: list[Consumer], condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for consumer in consumers:
            msg = consumer.poll(0.05)
            assert msg is None or msg.error() is None, msg.error()


def test_static_member_rejoins_without_a_rebalance(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker, topic_name, 4)
    group = f"static-{topic_name}"
    callbacks: dict[str, list[str]] = {"i1": [], "i2": []}

    def subscribe(instance: str) -> Consumer:
        consumer = Consumer({
            "bootstrap.servers": broker.bootstrap, "group.id": group, "group.instance.id": instance,
            "session.timeout.ms": 30_000, "heartbeat.interval.ms": 500, "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        })
        consumer.subscribe(
            [topic_name],
            on_assign=lambda c, ps: callbacks[instance].append("assign:" + ",".join(str(p.partition) for p in ps)),
            on_revoke=lambda c, ps: callbacks[instance].append("revoke"),
        )
        return consumer

    def owned(consumer: Consumer) -> list[int]:
        return sorted(tp.partition for tp in consumer.assignment())

    first, second = subscribe("i1"), subscribe("i2")
    poll_until([first, second], lambda: len(owned(first)) == 2 and len(owned(second)) == 2, "a 2-way split")
    before = describe(broker, group)
    ids = {m.group_instance_id: m.member_id for m in before.members}
    second_partitions = owned(second)
    first_events = list(callbacks["i1"])

    second.close()  # a static member does not send LeaveGroup: it stays in the group
    assert {m.group_instance_id for m in describe(broker, group).members} == {"i1", "i2"}

    again = subscribe("i2")
    poll_until([first, again], lambda: owned(again) == second_partitions, "the static member's partitions")
    for _ in range(20):  # give a rebalance, if one had started, the time to reach the first member
        first.poll(0.05)
    assert callbacks["i1"] == first_events, "the first member went through a rebalance"
    after = describe(broker, group)
    new_ids = {m.group_instance_id: m.member_id for m in after.members}
    assert new_ids["i1"] == ids["i1"] and new_ids["i2"] != ids["i2"]
    assert str(after.state) == "ConsumerGroupState.STABLE"
    assert sorted(tp.partition for m in after.members if m.group_instance_id == "i2"
                  for tp in m.assignment.topic_partitions) == second_partitions
    first.close()
    again.close()


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", tmp_path / "broker.log").start()
    yield process
    process.kill()


def test_committed_offsets_survive_broker_sigkill(own_broker: BrokerProcess) -> None:
    create_topic(own_broker, "durable", 3)
    produce(own_broker, "durable", "d", 5, partitions=3)
    consumer = Consumer({
        "bootstrap.servers": own_broker.bootstrap, "group.id": "durable-group", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
    })
    consumer.subscribe(["durable"])
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(seen) < 15:
        assert time.monotonic() < deadline, seen
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.append((msg.partition(), msg.offset()))
    consumer.commit(asynchronous=False)
    standalone = Consumer({"bootstrap.servers": own_broker.bootstrap, "group.id": "standalone"})
    standalone.commit(offsets=[TopicPartition("durable", p, 2 + p, metadata=f"meta-{p}") for p in range(3)],
                      asynchronous=False)
    own_broker.kill()  # no clean shutdown, no chance to flush: the commits must already be in the OS
    consumer.close()
    standalone.close()

    own_broker.start()
    assert committed(own_broker, "durable-group") == {0: 5, 1: 5, 2: 5}
    assert committed(own_broker, "standalone") == {0: 2, 1: 3, 2: 4}
    check = Consumer({"bootstrap.servers": own_broker.bootstrap, "group.id": "standalone"})
    metadata = {tp.partition: tp.metadata for tp in check.committed(
        [TopicPartition("durable", p) for p in range(3)], timeout=TIMEOUT_S)}
    check.close()
    assert metadata == {p: f"meta-{p}" for p in range(3)}

    produce(own_broker, "durable", "e", 1, partitions=3)
    resumed = Consumer({
        "bootstrap.servers": own_broker.bootstrap, "group.id": "durable-group", "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    resumed.subscribe(["durable"])
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(got) < 3:
            assert time.monotonic() < deadline, got
            msg = resumed.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        resumed.close()
    assert sorted(got) == [(p, 5, f"e-{p}-0".encode()) for p in range(3)]


# -- kafkajs ----------------------------------------------------------------------------------------


def kafkajs_consume(broker: BrokerProcess, topic: str, group: str, count: int) -> Any:
    executable = shutil.which("node")
    assert executable, "node is not on PATH"
    assert (NODE_DIR / "node_modules" / "kafkajs" / "package.json").exists(), (
        "kafkajs is not installed: run `npm install --prefix compat_tests/node`"
    )
    command = [executable, str(NODE_DIR / "group_consume.js"), broker.bootstrap, topic, group, str(count)]
    try:
        done = subprocess.run(command, capture_output=True, timeout=60, check=False, cwd=NODE_DIR)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"node timed out; stderr={exc.stderr!r}") from exc
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, f"node exited {done.returncode}\n{stderr[-4000:]}\n{broker.log_text()[-3000:]}"
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


def test_kafkajs_consumes_and_commits_with_a_group(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker, topic_name, 3)
    produce(broker, topic_name, "k", 3, partitions=3)
    group = f"kafkajs-{topic_name}"
    first = kafkajs_consume(broker, topic_name, group, 9)
    assert sorted((m["partition"], int(m["offset"]), m["value"]) for m in first["messages"]) == [
        (p, i, f"k-{p}-{i}") for p in range(3) for i in range(3)
    ]
    assert (first["groupState"], first["memberCount"]) == ("Stable", 1)
    assert sorted((c["partition"], c["offset"]) for c in first["committed"]) == [(p, "3") for p in range(3)]
    assert committed(broker, group) == {0: 3, 1: 3, 2: 3}

    produce(broker, topic_name, "l", 1, partitions=3)
    second = kafkajs_consume(broker, topic_name, group, 3)
    assert sorted((m["partition"], int(m["offset"]), m["value"]) for m in second["messages"]) == [
        (p, 3, f"l-{p}-0") for p in range(3)
    ]
    assert committed(broker, group) == {0: 4, 1: 4, 2: 4}
    assert str(describe(broker, group).state) == "ConsumerGroupState.EMPTY"


# -- admin clients: listing, describing, altering and deleting groups and offsets ---------------------


def test_admin_group_and_offset_operations(broker: BrokerProcess, topic_name: str) -> None:
    """kafka-python's and confluent-kafka's admin APIs against a live and then an empty group."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    from kafka.admin import MemberToRemove
    from kafka.structs import OffsetAndMetadata

    create_topic(broker, topic_name, 2)
    other = topic_name + "-other"
    create_topic(broker, other, 1)
    group = f"admin-{topic_name}"
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": group, "group.instance.id": "static-1",
        "session.timeout.ms": 30_000, "enable.auto.commit": False,
    })
    consumer.subscribe([topic_name])
    poll_until([consumer], lambda: len(consumer.assignment()) == 2, "the member's assignment")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    try:
        # While a member is subscribed: offsets of its topic cannot be deleted, the group cannot be.
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 7), TopicPartition(other, 0, 3)], asynchronous=False)
        assert {(g["group_id"], g["protocol_type"], g["group_state"], g["group_type"]) for g in admin.list_groups()
                if g["group_id"] == group} == {(group, "consumer", "Stable", "classic")}
        assert group not in {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])}
        description = admin.describe_groups([group])[group]
        assert (description["group_state"], description["protocol_type"], description["protocol_data"]) == (
            "Stable", "consumer", "range")
        [member] = description["members"]
        assert (member["group_instance_id"], member["client_host"]) == ("static-1", "/127.0.0.1")
        assert member["member_metadata"]["topics"] == [topic_name]
        assert member["member_assignment"]["assigned_partitions"] == [{"topic": topic_name, "partitions": [0, 1]}]
        deleted = admin.delete_group_offsets(group, [KTP(topic_name, 0), KTP(other, 0)])
        assert {tp.topic: err.__name__ for tp, err in deleted.items()} == {
            topic_name: "GroupSubscribedToTopicError", other: "NoError",
        }
        offsets = admin.list_group_offsets({group: None})[group]
        assert {(tp.topic, tp.partition): o.offset for tp, o in offsets.items()} == {(topic_name, 0): 7}
        assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}

        # Removing the static member by its instance id empties the group; then it can go.
        removed = admin.remove_group_members(group, [MemberToRemove(group_instance_id="static-1")])
        assert [err.__name__ for err in removed.values()] == ["NoError"]
        description = admin.describe_groups([group])[group]
        assert (description["group_state"], description["members"]) == ("Empty", [])
        altered = admin.alter_group_offsets(group, {KTP(topic_name, 1): OffsetAndMetadata(4, "why", -1)})
        assert [err.__name__ for err in altered.values()] == ["NoError"]
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp.partition: (o.offset, o.metadata) for tp, o in offsets.items()} == {0: (7, ""), 1: (4, "why")}
        assert admin.delete_groups([group, group + "-nope"]) == {group: "OK", group + "-nope": "GroupIdNotFoundError"}
        assert admin.list_group_offsets({group: None})[group] == {}
    finally:
        admin.close()
        consumer.close()

    # confluent-kafka's admin: a standalone commit through alter, read back, delete.
    confluent_admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    standalone = group + "-standalone"
    request = ConsumerGroupTopicPartitions(standalone, [TopicPartition(topic_name, 0, 11)])
    confluent_admin.alter_consumer_group_offsets([request])[standalone].result(TIMEOUT_S)
    assert committed(broker, standalone) == {0: 11}
    listing = confluent_admin.list_consumer_groups().result(TIMEOUT_S)
    assert standalone in {g.group_id for g in listing.valid}
    confluent_admin.delete_consumer_groups([standalone])[standalone].result(TIMEOUT_S)
    assert standalone not in {g.group_id for g in confluent_admin.list_consumer_groups().result(TIMEOUT_S).valid}


SHORT_SESSION_MS = 1000  # own_broker's group.min.session.timeout.ms (BROKER_ENV)


def join_and_go_silent(bootstrap: str, group: str) -> float:
    """A classic member joins ``group`` (session SHORT_SESSION_MS) and then sends nothing more, as a
    crashed client; returns the wall-clock time by which the coordinator has armed its session
    deadline (after the SyncGroup answer: the deadline is at most that plus the session)."""
    protocol = [JoinGroupRequestProtocol(name="range", metadata=b"")]

    def join(member_id: str) -> JoinGroupResponse:
        request = JoinGroupRequest(group_id=group, session_timeout_ms=SHORT_SESSION_MS, rebalance_timeout_ms=5000,
                                   member_id=member_id, protocol_type="consumer", protocols=protocol)
        return raw_client.call(sock, request, 5)

    with raw_client.connect(bootstrap) as sock:
        first = join("")
        joined = join(first.member_id) if first.error_code == 79 else first  # MEMBER_ID_REQUIRED
        assert joined.error_code == 0, joined
        synced = raw_client.call(sock, SyncGroupRequest(
            group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
            assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"")]), 5)
        assert synced.error_code == 0, synced
        return time.time()


@pytest.fixture
def short_session_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", env=BROKER_ENV).start()
    yield process
    process.kill()


def test_a_group_is_deletable_right_after_its_session_timeout(short_session_broker: BrokerProcess) -> None:
    """A member that stops heartbeating is expired at its session deadline, not up to a tick later
    (#42): confluent-kafka's delete_consumer_groups sent just after the session timeout succeeds
    instead of answering NON_EMPTY_GROUP. (Any request at or after the deadline sees the member gone.)"""
    broker = short_session_broker
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for attempt in range(3):
        group = f"expiring-{attempt}"
        armed = join_and_go_silent(broker.bootstrap, group)
        time.sleep(max(0.0, armed + SHORT_SESSION_MS / 1000 - time.time()))  # until the deadline has passed
        admin.delete_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
