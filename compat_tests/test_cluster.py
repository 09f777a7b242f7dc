"""Several brokers serving one PostgreSQL database (#19): real broker processes, real clients.

Three ``kproto serve`` processes with distinct ``--node-id`` values on one database form a
cluster: Metadata lists the live brokers, partitions are led by different brokers, the broker
holding the coordinator lease is the controller, the coordinator shards (groups, transactions)
spread over the brokers, and a transaction's coordinator sends the markers of partitions others
lead to their leaders (see also test_cluster_shards.py). Killing brokers (the controller among
them) with SIGKILL loses nothing acknowledged and duplicates nothing committed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from rivven_kproto.broker.cluster import ranked_for_shard, shard_of
from rivven_kproto.broker.storage.postgres.store import COORDINATOR_SHARDS
from rivven_kproto.codec.messages.find_coordinator import FindCoordinatorRequest
from rivven_kproto.codec.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse
from rivven_kproto.testing.postgres import PostgresServer

from . import raw_client
from .broker_process import BrokerProcess
from .test_eos import BROKER_ENV, run_pipeline
from .test_postgres_storage import produce_acknowledged
from .txn_helpers import TIMEOUT_S, consume, txn_producer, values, wait_for

NODES = (1, 2, 3)


@contextmanager
def three_brokers(
    base: Path, storage: str, extra_args: Sequence[str] = (),
    met: Callable[[dict[int, BrokerProcess]], bool] | None = None, env: dict[int, dict[str, str]] | None = None,
    storage_for: dict[int, str] | None = None,
) -> Iterator[dict[int, BrokerProcess]]:
    """Three brokers on the database ``storage``; node 1 starts first and holds the coordinator lease.
    (Group settings as the exactly-once pipeline's broker has them: short sessions allowed.) Logs
    and data directories go to ``base``; every broker is killed on the way out. ``extra_args`` go
    to every broker (a ``--config`` with listeners of its own: then ``met`` tells when every
    broker sees the others, since :func:`all_see` speaks PLAINTEXT to the first listener); ``env``:
    more environment for some nodes (a test fault); ``storage_for``: another URL of the same database
    for some nodes (through a proxy)."""
    brokers: dict[int, BrokerProcess] = {}
    try:
        for node in NODES:
            broker = BrokerProcess(base / f"n{node}-data", base / f"n{node}.log",
                                   ["--storage", (storage_for or {}).get(node, storage), "--node-id", str(node),
                                    *extra_args],
                                   env={**BROKER_ENV, **(env or {}).get(node, {})})
            brokers[node] = broker.start()
        check = met or (lambda started: all_see(started, set(NODES)))
        assert wait_for(lambda: check(brokers), TIMEOUT_S), "the brokers never met"
        if met is None:  # (PLAINTEXT on the first listener) the coordinator shards stop moving
            assert wait_for(lambda: shards_settled(brokers), 2 * TIMEOUT_S, interval=0.2), "the shards never settled"
        yield brokers
    finally:
        for broker in brokers.values():
            broker.kill()


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str) -> Iterator[dict[int, BrokerProcess]]:
    """Three brokers on one fresh database (:func:`three_brokers`)."""
    with three_brokers(tmp_path, postgres_url) as brokers:
        yield brokers


def shards_settled(brokers: dict[int, BrokerProcess]) -> bool:
    """Every live broker says each coordinator shard is held by the live broker preferred for it
    (the shards spread at start, by handovers: a test then finds coordinators that stay put)."""
    live = sorted(node for node, broker in brokers.items() if broker.alive())
    probes: dict[int, str] = {}
    n = 0
    while len(probes) < COORDINATOR_SHARDS:
        probes.setdefault(shard_of(f"probe-{n}", COORDINATOR_SHARDS), f"probe-{n}")
        n += 1
    keys = [probes[shard] for shard in range(COORDINATOR_SHARDS)]
    wanted = [ranked_for_shard(live, shard)[0] for shard in range(COORDINATOR_SHARDS)]
    for node in live:
        try:
            with raw_client.connect(brokers[node].bootstrap) as sock:
                response = raw_client.call(sock, FindCoordinatorRequest(key_type=0, coordinator_keys=keys), 4)
        except OSError:
            return False
        if [c.node_id if c.error_code == 0 else None for c in response.coordinators] != wanted:
            return False
    return True


def bootstrap(brokers: dict[int, BrokerProcess]) -> str:
    return ",".join(b.bootstrap for b in brokers.values() if b.alive())


def described_by(broker: BrokerProcess, topics: list[str] | None = None, *,
                 auto_create: bool = False) -> MetadataResponse:
    """Metadata as this very broker answers it (a client library would ask any broker it knows)."""
    request = MetadataRequest(topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
                              allow_auto_topic_creation=auto_create, include_topic_authorized_operations=False)
    with raw_client.connect(broker.bootstrap) as sock:
        return raw_client.call(sock, request, 12)


def all_see(brokers: dict[int, BrokerProcess], nodes: set[int], topic: str | None = None) -> bool:
    """Every live broker lists ``nodes`` and no other live broker (and describes ``topic``, every
    partition led by one of ``nodes``). A broker that died may stay listed: it is for a minute
    after its last heartbeat, leading nothing (registry.LISTED_AFTER_LOSS_S)."""
    running = {node for node, broker in brokers.items() if broker.alive()}
    for broker in brokers.values():
        if not broker.alive():
            continue
        try:
            answer = described_by(broker, [topic] if topic else None)
        except OSError:
            return False
        listed = {b.node_id for b in answer.brokers}
        if not nodes <= listed or (listed - nodes) & running:
            return False
        if topic is not None and (not answer.topics or answer.topics[0].error_code != 0):
            return False
        if topic is not None and any(p.leader_id not in nodes for p in answer.topics[0].partitions):
            return False
    return True


def create(servers: str, topic: str, partitions: int, replication_factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, partitions, replication_factor)])[topic].result(TIMEOUT_S)


def produce(servers: str, topic: str, partitions: int, count: int, prefix: str) -> set[bytes]:
    """Idempotent acks=all produce to every broker's partitions; the values acknowledged."""
    return produce_acknowledged(servers, topic, partitions, count, prefix, **{"message.timeout.ms": TIMEOUT_S * 4 * 1000})


def all_values(servers: str, topic: str, partitions: int, *, committed: bool, expected: int) -> list[bytes]:
    seen = values(consume("confluent-kafka", servers, [(topic, p) for p in range(partitions)],
                          committed=committed, expected=expected))
    return [v for vs in seen.values() for v in vs if v is not None]


def test_three_brokers_lead_partitions_and_coordinate_transactions(cluster: dict[int, BrokerProcess]) -> None:
    servers = bootstrap(cluster)
    with pytest.raises(KafkaException, match="INVALID_REPLICATION_FACTOR"):
        create(servers, "cl-too-many", 1, 4)
    create(servers, "cl-data", 6, 3)
    # Every broker describes the same layout once it has seen the catalog (within a heartbeat).
    assert wait_for(lambda: all_see(cluster, set(NODES), "cl-data"), TIMEOUT_S)
    layouts = []
    for broker in cluster.values():
        (topic,) = described_by(broker, ["cl-data"]).topics
        assert len(topic.partitions) == 6
        assert all(len(p.replica_nodes) == 3 and p.isr_nodes == p.replica_nodes for p in topic.partitions)
        layouts.append({p.partition_index: p.leader_id for p in topic.partitions})
    assert all(layout == layouts[0] for layout in layouts)
    assert len(set(layouts[0].values())) >= 2, f"one broker leads everything: {layouts[0]}"

    acknowledged = produce(servers, "cl-data", 6, 3000, "idem")
    assert len(acknowledged) == 3000
    got = all_values(servers, "cl-data", 6, committed=False, expected=3000)
    assert sorted(got) == sorted(acknowledged)

    # A transaction over partitions led by all three brokers: the coordinator (node 1) writes
    # its own markers and asks the other leaders for theirs.
    create(servers, "cl-txn", 6, 1)
    assert wait_for(lambda: all_see(cluster, set(NODES), "cl-txn"), TIMEOUT_S)
    producer = txn_producer("confluent-kafka", servers, "cl-txn-id")
    producer.init()
    committed: list[bytes] = []
    for round_ in range(4):
        producer.begin()
        batch = [f"t{round_}-{i}".encode() for i in range(30)]
        for i, value in enumerate(batch):
            producer.send("cl-txn", i % 6, value)
        producer.flush()
        if round_ % 2 == 0:
            producer.commit()
            committed += batch
        else:
            producer.abort()
    producer.close()
    seen = all_values(servers, "cl-txn", 6, committed=True, expected=len(committed))
    assert sorted(seen) == sorted(committed)

    # Group offsets committed through the coordinator, read back by a consumer bootstrapped at
    # another broker.
    first = Consumer({"bootstrap.servers": cluster[2].bootstrap, "group.id": "cl-group",
                      "enable.auto.commit": False})
    try:
        first.commit(offsets=[TopicPartition("cl-data", p, 100 + p) for p in range(6)], asynchronous=False)
    finally:
        first.close()
    second = Consumer({"bootstrap.servers": cluster[3].bootstrap, "group.id": "cl-group"})
    try:
        offsets = second.committed([TopicPartition("cl-data", p) for p in range(6)], timeout=TIMEOUT_S)
        assert [tp.offset for tp in offsets] == [100 + p for p in range(6)]
    finally:
        second.close()

    # The operator's view: every broker, what it leads, which one coordinates.
    done = subprocess.run([sys.executable, "-m", "rivven_kproto", "--bootstrap", cluster[3].bootstrap, "--format", "json",
                           "cluster", "info"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["controller_id"] == 1
    brokers = {b["node_id"]: b for b in info["brokers"]}
    assert set(brokers) == set(NODES) and brokers[1]["controller"] and not brokers[2]["controller"]
    assert sum(b["partitions_led"] for b in brokers.values()) == 12  # cl-data and cl-txn
    assert brokers[2]["partitions_led"] == sum(1 for leader in layouts[0].values() if leader == 2) + sum(
        1 for p in described_by(cluster[2], ["cl-txn"]).topics[0].partitions if p.leader_id == 2)

    check_explicit_replica_assignments(cluster)


def test_a_producer_on_a_follower_auto_creates_a_topic(cluster: dict[int, BrokerProcess]) -> None:
    """A producer bootstrapped only at a broker that is not the controller sends to a topic that
    does not exist: that broker asks the controller to create it (Metadata's auto-creation, as
    Kafka's brokers forward it), and every record acknowledged is read back through the cluster."""
    follower = cluster[2]
    assert described_by(follower).controller_id == 1
    acknowledged = produce(follower.bootstrap, "cl-auto", 1, 300, "auto")
    assert len(acknowledged) == 300
    # librdkafka asks any broker it is connected to by then: mostly the follower it was
    # bootstrapped at, which asks the controller; sometimes the controller itself.
    logs = {node: broker.log_text() for node, broker in cluster.items()}
    said = {node: [line for line in text.splitlines() if "cl-auto" in line] for node, text in logs.items()}
    assert (any("auto-created topic cl-auto on the controller (node 1)" in logs[node] for node in (2, 3))
            or "auto-created topic cl-auto for client" in logs[1]), f"no broker logged the auto-creation: {said}"
    assert wait_for(lambda: all_see(cluster, set(NODES), "cl-auto"), TIMEOUT_S)
    # The follower's part, whoever librdkafka asked: a Metadata request that may create a topic,
    # sent to the follower itself.
    described_by(follower, ["cl-auto-raw"], auto_create=True)
    assert "auto-created topic cl-auto-raw on the controller (node 1)" in follower.log_text()
    assert wait_for(lambda: all_see(cluster, set(NODES), "cl-auto-raw"), TIMEOUT_S)
    assert sorted(all_values(bootstrap(cluster), "cl-auto", 1, committed=False, expected=300)) == sorted(acknowledged)


def test_killing_the_coordinator_and_leaders_loses_nothing(cluster: dict[int, BrokerProcess]) -> None:
    servers = bootstrap(cluster)
    create(servers, "cl-kill", 6, 1)
    assert wait_for(lambda: all_see(cluster, set(NODES), "cl-kill"), TIMEOUT_S)
    acknowledged = produce(servers, "cl-kill", 6, 600, "before")
    producer = txn_producer("confluent-kafka", servers, "cl-kill-id")
    producer.init()
    committed: list[bytes] = []

    def transaction(name: str) -> None:
        producer.begin()
        batch = [f"{name}-{i}".encode() for i in range(24)]
        for i, value in enumerate(batch):
            producer.send("cl-kill", i % 6, value)
        producer.flush()
        producer.commit()
        committed.extend(batch)

    transaction("t0")
    cluster[1].kill()  # the coordinator, and the leader of some partitions
    assert wait_for(lambda: all_see(cluster, {2, 3}), TIMEOUT_S)
    transaction("t1")  # a new coordinator took the lease and loaded the transactions
    acknowledged |= produce(bootstrap(cluster), "cl-kill", 6, 600, "after")
    cluster[1].start()  # back: it leads its partitions again (claiming them from the others)
    assert wait_for(lambda: all_see(cluster, set(NODES)), TIMEOUT_S)
    transaction("t2")
    acknowledged |= produce(bootstrap(cluster), "cl-kill", 6, 600, "rejoined")
    producer.close()
    servers = bootstrap(cluster)
    everything = all_values(servers, "cl-kill", 6, committed=False, expected=len(acknowledged) + len(committed))
    plain = [v for v in everything if not v.startswith(b"t")]
    assert sorted(plain) == sorted(acknowledged)  # nothing acknowledged lost, nothing twice
    visible = [v for v in all_values(servers, "cl-kill", 6, committed=True, expected=len(acknowledged) + len(committed))
               if v.startswith(b"t")]
    assert sorted(visible) == sorted(committed)


def test_a_database_restart_loses_nothing_and_the_brokers_carry_on(
    cluster: dict[int, BrokerProcess], postgres_server: PostgresServer
) -> None:
    """PostgreSQL crashes while a producer sends to partitions of all three leaders, then starts
    again: the brokers keep what they could not commit, acknowledge it once committed, and go on
    serving without a restart; the coordinator keeps its lease (the others wait for it)."""
    servers = bootstrap(cluster)
    create(servers, "cl-outage", 6, 1)
    assert wait_for(lambda: all_see(cluster, set(NODES), "cl-outage"), TIMEOUT_S)
    acknowledged = produce(servers, "cl-outage", 6, 300, "before")
    postgres_server.stop("immediate")
    restarted = threading.Event()

    def start_later() -> None:
        time.sleep(3)
        postgres_server.restart()
        restarted.set()

    starter = threading.Thread(target=start_later)
    starter.start()
    try:
        acknowledged |= produce(servers, "cl-outage", 6, 600, "during")
    finally:
        starter.join()
    assert restarted.is_set()
    assert wait_for(lambda: all_see(cluster, set(NODES)), TIMEOUT_S)
    assert all(broker.alive() for broker in cluster.values())
    assert described_by(cluster[2]).controller_id == 1
    transaction = txn_producer("confluent-kafka", servers, "cl-outage-id")  # the coordinator serves again
    transaction.init()
    transaction.begin()
    for i in range(6):
        transaction.send("cl-outage", i, f"txn-{i}".encode())
    transaction.flush()
    transaction.commit()
    transaction.close()
    got = all_values(servers, "cl-outage", 6, committed=True, expected=len(acknowledged) + 6)
    assert sorted(v for v in got if not v.startswith(b"txn-")) == sorted(acknowledged)
    assert sorted(v for v in got if v.startswith(b"txn-")) == [f"txn-{i}".encode() for i in range(6)]


class RollingKills:
    """``run_pipeline``'s broker, played by the cluster: each kill SIGKILLs one broker (first the
    one holding the coordinator lease, then another that leads input partitions) and restarts it
    on its port; the clients' bootstrap list names all three."""

    def __init__(self, brokers: dict[int, BrokerProcess]) -> None:
        self.brokers = brokers
        self.ports = {node: broker.port for node, broker in brokers.items()}
        self.port = self.ports[NODES[0]]
        self.victim: int | None = None
        self.kills: list[int] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports.values())

    def start(self, port: int = 0) -> RollingKills:
        if self.victim is not None:
            self.brokers[self.victim].start(self.ports[self.victim])
            self.victim = None
        return self

    def kill(self) -> None:
        alive = [node for node in NODES if self.brokers[node].alive()]
        coordinator = described_by(self.brokers[alive[0]]).controller_id
        self.victim = coordinator if not self.kills else next(n for n in alive if n not in (coordinator, *self.kills))
        self.kills.append(self.victim)
        self.brokers[self.victim].kill()


def test_exactly_once_pipeline_on_the_cluster(tmp_path: Path, cluster: dict[int, BrokerProcess]) -> None:
    """The exactly-once pipeline (test_eos) against three brokers: the application killed and
    restarted, the coordinator's broker and then a leader's killed and restarted mid-stream;
    every input record's transform exactly once in the output, in order."""
    target = RollingKills(cluster)
    stats = run_pipeline(tmp_path, target, "confluent-kafka", 20_000, app_kills=2, broker_kills=2,  # type: ignore[arg-type]
                         deadline_s=240)
    print(f"exactly-once pipeline on 3 brokers: {stats}; brokers killed: {target.kills}")
    assert len(target.kills) == 2 and target.kills[0] == 1 and target.kills[1] != 1


def test_two_brokers_from_one_directory_need_no_data_dir(tmp_path: Path, postgres_url: str) -> None:
    """The README's cluster command as written: two brokers with ``--storage`` and ``--node-id``
    started from one directory without ``--data-dir`` both serve (#41 item 4: the second stopped on
    the ``./kproto-data`` lock). The database holds everything; no local data directory is made.
    A topic created with ``--replication-factor 2`` is reported with 2."""
    work = tmp_path / "work"
    work.mkdir()
    brokers = {node: BrokerProcess(None, tmp_path / f"n{node}.log", ["--storage", postgres_url, "--node-id", str(node)],
                                   env=BROKER_ENV, cwd=work) for node in (1, 2)}
    try:
        for broker in brokers.values():
            broker.start()
        assert wait_for(lambda: all_see(brokers, {1, 2}), TIMEOUT_S), "the brokers never met"
        # kproto topics create prints the replication factor the cluster created (#41: it printed 1).
        created = subprocess.run(
            [sys.executable, "-m", "rivven_kproto", "--bootstrap", brokers[2].bootstrap, "topics", "create",
             "shared-cwd", "--partitions", "2", "--replication-factor", "2"],
            capture_output=True, text=True, timeout=TIMEOUT_S, cwd=work,
        )
        assert created.returncode == 0, created.stderr
        assert created.stdout.strip() == "created topic shared-cwd (2 partitions, replication factor 2)", created.stdout
        assert len(produce_acknowledged(brokers[1].bootstrap, "shared-cwd", 2, 10)) == 10
        assert list(work.iterdir()) == []
    finally:
        for broker in brokers.values():
            broker.kill()


def test_brokers_without_a_node_id_take_the_lowest_free_ones(tmp_path: Path, postgres_url: str) -> None:
    """No --node-id on PostgreSQL: a broker takes the lowest node id whose lock it can take. Two
    started at once get distinct ids and Metadata lists both; after one is killed, a new broker
    takes its id again."""
    brokers = {name: BrokerProcess(tmp_path / f"{name}-data", tmp_path / f"{name}.log", ["--storage", postgres_url],
                                   env=BROKER_ENV) for name in ("a", "b", "c")}
    failures: list[BaseException] = []

    def start(broker: BrokerProcess) -> None:
        try:
            broker.start()
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread below
            failures.append(exc)

    def node_of(broker: BrokerProcess) -> int:
        """The node id the broker serves as: Metadata's entry at its own address."""
        (node,) = [b.node_id for b in described_by(broker).brokers if b.port == broker.port]
        return node

    try:
        starting = [threading.Thread(target=start, args=(brokers[name],)) for name in ("a", "b")]
        for thread in starting:
            thread.start()
        for thread in starting:
            thread.join()
        assert not failures, failures
        a, b = brokers["a"], brokers["b"]
        assert wait_for(lambda: all_see({0: a, 1: b}, {0, 1}), TIMEOUT_S), "the brokers never met"
        assert {node_of(a), node_of(b)} == {0, 1}
        for broker in (a, b):
            assert f"node id {node_of(broker)} assigned from the database" in broker.log_text()
        freed, kept = node_of(a), node_of(b)
        a.kill()
        assert wait_for(lambda: all_see({kept: b}, {kept}), TIMEOUT_S)
        c = brokers["c"].start()
        assert wait_for(lambda: all_see({freed: c, kept: b}, {0, 1}), TIMEOUT_S)
        assert node_of(c) == freed
    finally:
        for broker in brokers.values():
            broker.kill()


def check_explicit_replica_assignments(cluster: dict[int, BrokerProcess]) -> None:
    """CreateTopics / CreatePartitions with replica assignments naming other live brokers (#42):
    accepted, kept (the first replica leads, the replicas listed in the given order by every
    broker) and counted as the replication factor; a broker that is not live is refused. (Run
    by the first test on its cluster: a cluster of its own would cost CI its start-up.)"""
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    with pytest.raises(KafkaException, match="INVALID_REPLICA_ASSIGNMENT.*broker 7, but no such broker"):
        admin.create_topics([NewTopic("cl-bad", 1, replica_assignment=[[1, 7]])])["cl-bad"].result(TIMEOUT_S)
    assignment = [[2, 3, 1], [3, 1, 2]]
    admin.create_topics([NewTopic("cl-assigned", 2, replica_assignment=assignment)])["cl-assigned"].result(TIMEOUT_S)
    admin.create_partitions([NewPartitions("cl-assigned", 3, replica_assignment=[[1, 2, 3]])])[
        "cl-assigned"].result(TIMEOUT_S)
    wanted = [*assignment, [1, 2, 3]]

    def laid_out(broker: BrokerProcess) -> bool:
        (topic,) = described_by(broker, ["cl-assigned"]).topics
        return [(p.leader_id, list(p.replica_nodes)) for p in topic.partitions] == [(r[0], r) for r in wanted]

    assert wait_for(lambda: all(laid_out(b) for b in cluster.values()), TIMEOUT_S), [
        described_by(b, ["cl-assigned"]).topics[0].partitions for b in cluster.values()]
    described = admin.describe_topics(TopicCollection(["cl-assigned"]))["cl-assigned"].result(TIMEOUT_S)
    assert [[n.id for n in p.replicas] for p in described.partitions] == wanted
    acknowledged = produce(bootstrap(cluster), "cl-assigned", 3, 60, "assigned")
    got = all_values(bootstrap(cluster), "cl-assigned", 3, committed=False, expected=60)
    assert sorted(got) == sorted(acknowledged)
