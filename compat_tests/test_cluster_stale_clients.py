"""A client with a stale view of the leaders is served by any broker of the cluster (#19).

Three brokers on one PostgreSQL database. Requests name partitions another broker leads, sent to
a broker that does not lead them (as a client whose metadata predates a leadership change
would): a Produce mixing partitions of all three leaders is acknowledged for every partition, in
the request's order; Fetch and ListOffsets there return what the leaders hold. Everything is read
back once, through the leaders, by confluent-kafka; a leader that cannot be reached answers for
its partitions only. Before the forwarding, each of these partitions was answered
NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from rivven_kproto.codec.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from rivven_kproto.codec.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from rivven_kproto.codec.records.batch import iter_headers
from rivven_kproto.codec.records.records import Record, build_batch, decode_batch

from . import raw_client
from .broker_process import BrokerProcess
from .test_cluster import NODES, all_see, all_values, bootstrap, create, described_by, three_brokers
from .txn_helpers import TIMEOUT_S, wait_for

TOPIC = "stale-view"
PARTITIONS = 6
LATEST = -1


@pytest.fixture
def cluster(tmp_path: Path, postgres_url: str) -> Iterator[dict[int, BrokerProcess]]:
    with three_brokers(tmp_path, postgres_url) as brokers:
        create(bootstrap(brokers), TOPIC, PARTITIONS, 3)
        assert wait_for(lambda: all_see(brokers, set(NODES), TOPIC), TIMEOUT_S)
        yield brokers


def leaders(broker: BrokerProcess) -> dict[int, int]:
    return {p.partition_index: p.leader_id for p in described_by(broker, [TOPIC]).topics[0].partitions}


def batch(value: bytes) -> bytes:
    return build_batch([Record(0, 0, None, value, [])])


def produce(broker: BrokerProcess, partitions: list[int], prefix: bytes) -> list[tuple[int, int, int]]:
    """One record per partition in one Produce (acks=all) to ``broker``: (partition, error, base offset)."""
    request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[TopicProduceData(
        name=TOPIC, partition_data=[PartitionProduceData(index=p, records=batch(prefix + b"-%d" % p))
                                    for p in partitions])])
    with raw_client.connect(broker.bootstrap, timeout=60) as sock:
        response = raw_client.call(sock, request, 9)
    return [(r.index, r.error_code, r.base_offset) for t in response.responses for r in t.partition_responses]


def fetch(broker: BrokerProcess, partitions: list[int]) -> dict[int, tuple[int, list[bytes | None]]]:
    """Fetch from offset 0 at ``broker``: per partition, the error and the values."""
    request = FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=1,
                           topics=[FetchTopic(topic=TOPIC, partitions=[
                               FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                               for p in partitions])], forgotten_topics_data=[])
    with raw_client.connect(broker.bootstrap, timeout=60) as sock:
        response = raw_client.call(sock, request, 11)
    out = {}
    for topic in response.responses:
        for part in topic.partitions:
            data = part.record_bytes()
            found = [r.value for pos, h in iter_headers(data) for r in decode_batch(data[pos:pos + h.size]).records]
            out[part.partition_index] = (part.error_code, found)
    return out


def latest_offsets(broker: BrokerProcess, partitions: list[int]) -> dict[int, tuple[int, int]]:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsTopic(
        name=TOPIC, partitions=[ListOffsetsPartition(partition_index=p, timestamp=LATEST) for p in partitions])])
    with raw_client.connect(broker.bootstrap, timeout=60) as sock:
        response = raw_client.call(sock, request, 7)
    return {p.partition_index: (p.error_code, p.offset) for t in response.topics for p in t.partitions}


def test_any_broker_serves_partitions_led_by_others(cluster: dict[int, BrokerProcess]) -> None:
    layout = leaders(cluster[NODES[0]])
    assert len(set(layout.values())) >= 2, f"one broker leads every partition: {layout}"
    for node in NODES:
        others = [p for p, leader in layout.items() if leader != node]
        assert others, f"node {node} leads every partition"
        # Every partition of the topic, in a scrambled order, some led here and most elsewhere.
        order = [*others[::-1], *[p for p in layout if p not in others]]
        answers = produce(cluster[node], order, b"via-%d" % node)
        assert [p for p, _, _ in answers] == order, "the response must keep the request's order"
        assert all(error == Errors.NONE and offset >= 0 for _, error, offset in answers), answers

    # Fetch and ListOffsets at a broker that leads none of the partitions asked about.
    node = NODES[1]
    elsewhere = [p for p, leader in layout.items() if leader != node]
    fetched = fetch(cluster[node], elsewhere)
    assert set(fetched) == set(elsewhere)
    for p in elsewhere:
        error, found = fetched[p]
        assert error == Errors.NONE
        assert sorted(v or b"" for v in found) == sorted(b"via-%d-%d" % (n, p) for n in NODES)
    offsets = latest_offsets(cluster[node], elsewhere)
    assert offsets == {p: (Errors.NONE, len(NODES)) for p in elsewhere}

    # Read back through the leaders by a real client: each record exactly once.
    everything = all_values(bootstrap(cluster), TOPIC, PARTITIONS, committed=True, expected=len(NODES) * PARTITIONS)
    assert sorted(everything) == sorted(b"via-%d-%d" % (n, p) for n in NODES for p in range(PARTITIONS))


def test_a_leader_that_cannot_be_reached_is_not_leader_for_its_partitions(cluster: dict[int, BrokerProcess]) -> None:
    layout = leaders(cluster[NODES[0]])
    stopped = next(n for n in NODES[1:] if n in layout.values())
    cluster[stopped].kill()
    asking = next(n for n in NODES if n != stopped)
    # (until the other brokers see the dead broker's lease expire, it stays the leader they name)
    answers = produce(cluster[asking], sorted(layout), b"after-kill")
    by_partition = {p: (error, offset) for p, error, offset in answers}
    for p, leader in layout.items():
        error, _ = by_partition[p]
        if leader == stopped:
            assert error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NONE), (p, error)
        else:
            assert error == Errors.NONE, (p, error)
