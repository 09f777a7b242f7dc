"""Spark's ``format("kafka")`` reading a topic whose partitions three brokers lead (#19).

The three brokers of :mod:`.test_cluster` (one PostgreSQL database) and the ``local[2]`` session
of :mod:`.test_spark`: planning asks any broker for metadata and each partition's offsets from its
leader, and each task (one per partition) fetches from that partition's leader. A broker serves
a partition it does not lead by sending the request on to the leader (a client with a stale view,
checked here with the source's own Fetch) and counts that in ``rivven_forwarded_partitions``: the
counters after the Spark read show that no task's fetch or planning lookup went anywhere but to
the leader. The source's own leader lookup (:meth:`Cluster.leader_of`, what every task calls)
names, for every partition, the broker each broker describes as its leader.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.codec.errors import Errors
from rivven_kproto.spark.wire import Cluster

from .broker_process import BrokerProcess
from .test_cluster import NODES, all_see, bootstrap, create, described_by, produce, three_brokers
from .test_metrics import Scraper
from .test_spark import spark  # noqa: F401 - the module's Spark session fixture
from .txn_helpers import TIMEOUT_S, wait_for

PARTITIONS = 6
RECORDS = 3000


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str) -> Iterator[dict[int, BrokerProcess]]:
    """Three brokers (:func:`three_brokers`), each with its metrics endpoint (every scrape fresh)."""
    config = tmp_path / "metrics.properties"
    config.write_text("kproto.metrics.max.age.ms=0\n")
    with three_brokers(tmp_path, postgres_url, ["--metrics", "127.0.0.1:0", "--config", str(config)]) as brokers:
        yield brokers


def forwarded(cluster: dict[int, BrokerProcess], api: str) -> float:
    """Partitions of ``api`` requests the brokers sent on to a leader, all brokers together."""
    return sum(Scraper(b).samples().get(f'rivven_forwarded_partitions_total{{api="{api}"}}', 0.0)
               for b in cluster.values())


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
    # The same Fetch a task sends, to a broker that does not lead the partition, is served through
    # the leader and counted as forwarded.
    before = forwarded(cluster, "Fetch")
    with Cluster(servers, timeout=TIMEOUT_S) as source_view:
        source_view.metadata([topic])
        for partition, leader in leaders.items():
            other = next(node for node in NODES if node != leader)
            connection = source_view.node(other)
            sent = source_view.send_fetch(connection, topic, partition, 0, isolation_level=0, max_bytes=1 << 20)
            served = source_view.receive_fetch(connection, sent, topic, partition)
            assert served.error_code == Errors.NONE, (partition, leader, other)
    assert forwarded(cluster, "Fetch") == before + PARTITIONS
    counted = {api: forwarded(cluster, api) for api in ("Fetch", "ListOffsets")}

    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", servers).option("subscribe", topic)
          .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    assert df.rdd.getNumPartitions() == PARTITIONS  # one task per Kafka partition
    rows = df.selectExpr("partition", "offset", "value").collect()
    assert len(rows) == RECORDS
    # Every task fetched from its partition's leader, and planning asked the leaders for offsets.
    assert {api: forwarded(cluster, api) for api in ("Fetch", "ListOffsets")} == counted
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
