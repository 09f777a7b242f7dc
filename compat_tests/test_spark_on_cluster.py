"""Spark's ``format("kafka")`` reading a topic whose partitions three brokers lead (#19).

The three brokers of :mod:`.test_cluster` (one PostgreSQL database) and the ``local[2]`` session
of :mod:`.test_spark`: planning asks any broker for metadata and each partition's offsets from its
leader, and each task (one per partition) fetches from that partition's leader. A broker answers
NOT_LEADER_OR_FOLLOWER for a partition it does not lead (checked here with the source's own Fetch),
so a complete, ordered read shows that every task's fetches reached the leader. Which broker a task connected to is not reported by the
source; the test checks that the source's own leader lookup (:meth:`Cluster.leader_of`, what
every task calls) names, for every partition, the broker each broker describes as its leader.
"""

from __future__ import annotations

from collections import defaultdict

from rivven_kproto.codec.errors import Errors
from rivven_kproto.spark.wire import Cluster

from .broker_process import BrokerProcess
from .test_cluster import NODES, all_see, bootstrap, cluster, create, described_by, produce  # noqa: F401 - fixture
from .test_spark import spark  # noqa: F401 - the module's Spark session fixture
from .txn_helpers import TIMEOUT_S, wait_for

PARTITIONS = 6
RECORDS = 3000


def test_spark_reads_partitions_led_by_different_brokers(spark, cluster: dict[int, BrokerProcess]) -> None:  # noqa: ANN001, F811
    servers = bootstrap(cluster)
    topic = "cl-spark"
    create(servers, topic, PARTITIONS, 1)
    assert wait_for(lambda: all_see(cluster, set(NODES), topic), TIMEOUT_S)
    layouts = [{p.partition_index: p.leader_id for p in described_by(b, [topic]).topics[0].partitions}
               for b in cluster.values()]
    assert all(layout == layouts[0] for layout in layouts), layouts
    leaders = layouts[0]
    assert sorted(leaders) == list(range(PARTITIONS))
    assert len(set(leaders.values())) >= 2, f"one broker leads everything: {leaders}"
    print(f"leaders of {topic}: {leaders}")

    # What every task does to find its broker: the source's lookup names each partition's leader.
    with Cluster(servers, timeout=TIMEOUT_S) as source_view:
        for partition, leader in leaders.items():
            assert source_view.leader_of(topic, partition).address == cluster[leader].bootstrap

    acknowledged = produce(servers, topic, PARTITIONS, RECORDS, "sp")
    assert len(acknowledged) == RECORDS
    # Only the leader serves a partition: the same Fetch a task sends, to any other broker, is refused.
    with Cluster(servers, timeout=TIMEOUT_S) as source_view:
        source_view.metadata([topic])
        for partition, leader in leaders.items():
            other = next(node for node in NODES if node != leader)
            connection = source_view.node(other)
            sent = source_view.send_fetch(connection, topic, partition, 0, isolation_level=0, max_bytes=1 << 20)
            refused = source_view.receive_fetch(connection, sent, topic, partition)
            assert refused.error_code == Errors.NOT_LEADER_OR_FOLLOWER, (partition, leader, other)

    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", servers).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    assert df.rdd.getNumPartitions() == PARTITIONS  # one task per Kafka partition
    rows = df.selectExpr("partition", "offset", "value").collect()
    assert len(rows) == RECORDS
    assert sorted(bytes(r["value"]) for r in rows) == sorted(acknowledged)
    by_partition: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for r in rows:
        by_partition[r["partition"]].append((r["offset"], bytes(r["value"])))
    assert sorted(by_partition) == list(range(PARTITIONS))
    for partition, got in by_partition.items():
        got.sort()
        assert [offset for offset, _ in got] == list(range(len(got)))  # dense, from 0
        # produce() sends value i to partition i % 6, in order: each partition keeps that order.
        assert [value for _, value in got] == [f"sp{topic}-{i}".encode() for i in range(partition, RECORDS, PARTITIONS)]
