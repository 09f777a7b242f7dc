"""A commit is visible on all of its partitions at once, whichever brokers lead them (#19).

Three brokers on one PostgreSQL database; node 3 refuses every WriteTxnMarkers
(``KPROTO_FAULT=refuse-txn-markers``, as a leader its coordinator cannot reach would). A
transaction of confluent-kafka's transactional producer over a partition node 3 leads and one
another broker leads is committed: PrepareCommit is durable and the other leader's marker written,
node 3's never arrives. A read_committed consumer (confluent-kafka) still reads the records
on node 3's partition, because node 3 reads the commit decision from the database; before the
commit, nothing of the transaction is visible there. Once node 3 takes markers again (restarted
without the fault) the transaction completes and every record is read exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rivven_kproto.broker.cluster import ranked_for_shard, shard_of
from rivven_kproto.broker.storage.postgres.store import COORDINATOR_SHARDS
from rivven_kproto.testing.postgres import create_database

from .broker_process import BrokerProcess
from .test_cluster import NODES, all_see, bootstrap, described_by, shards_settled, three_brokers
from .txn_helpers import TIMEOUT_S, ConfluentTxn, Raw, consume, create_topics, values, wait_for

REFUSING = 3  # the leader whose markers never arrive
TOPIC = "commit-visibility"
PARTITIONS = 6
RECORDS = 5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, postgres_server: Any) -> Iterator[dict[int, BrokerProcess]]:
    env = {REFUSING: {"KPROTO_FAULT": "refuse-txn-markers"}}
    with three_brokers(tmp_path_factory.mktemp("visibility"), create_database(postgres_server), env=env) as brokers:
        yield brokers


def _topic_led_by_all(cluster: dict[int, BrokerProcess]) -> tuple[str, dict[int, int]]:
    """A new topic with partitions led by the refusing node and by others (leaders hash from the
    topic's random id: a few attempts at most)."""
    for attempt in range(8):
        topic = f"{TOPIC}-{attempt}"
        create_topics(bootstrap(cluster), {topic: PARTITIONS})
        assert wait_for(lambda: all_see(cluster, set(NODES), topic), TIMEOUT_S)  # noqa: B023
        leaders = {p.partition_index: p.leader_id for p in described_by(cluster[1], [topic]).topics[0].partitions}
        if REFUSING in leaders.values() and set(leaders.values()) != {REFUSING}:
            return topic, leaders
    raise AssertionError("no topic had partitions led by every node")


def _transactional_id() -> str:
    """One whose coordinator (the live broker preferred for its shard) is not the refusing node."""
    n = 0
    while ranked_for_shard(list(NODES), shard_of(f"visible-{n}", COORDINATOR_SHARDS))[0] == REFUSING:
        n += 1
    return f"visible-{n}"


def test_a_commit_is_visible_on_a_leader_whose_marker_has_not_arrived(cluster: dict[int, BrokerProcess]) -> None:
    servers = bootstrap(cluster)
    topic, leaders = _topic_led_by_all(cluster)
    transactional_id = _transactional_id()
    coordinator = ranked_for_shard(list(NODES), shard_of(transactional_id, COORDINATOR_SHARDS))[0]
    remote = min(p for p, leader in leaders.items() if leader == REFUSING)
    local = min(p for p, leader in leaders.items() if leader != REFUSING)  # its marker is written
    at_remote, at_coordinator = Raw(cluster[REFUSING].bootstrap), Raw(cluster[coordinator].bootstrap)
    producer = ConfluentTxn(servers, transactional_id, 60_000)
    try:
        producer.init()
        producer.begin()
        for i in range(RECORDS):
            producer.send(topic, remote, f"r{i}".encode())
            producer.send(topic, local, f"l{i}".encode())
        producer.flush()
        # Written and acknowledged, not committed: read_committed sees none of it anywhere.
        assert at_remote.end_offsets(topic, [remote], committed=False) == {remote: RECORDS}
        assert at_remote.end_offsets(topic, [remote], committed=True) == {remote: 0}
        producer.commit()
        assert at_coordinator.describe_transaction(transactional_id).transaction_state == "PrepareCommit"
        # Node 3 has no marker (the high watermark is the records' end), yet the commit shows.
        assert at_remote.end_offsets(topic, [remote], committed=False) == {remote: RECORDS}
        assert at_remote.end_offsets(topic, [remote], committed=True) == {remote: RECORDS}
        seen = values(consume("confluent-kafka", servers, [(topic, remote), (topic, local)], committed=True,
                              expected=2 * RECORDS))
        assert seen == {(topic, remote): [f"r{i}".encode() for i in range(RECORDS)],
                        (topic, local): [f"l{i}".encode() for i in range(RECORDS)]}
        assert at_remote.end_offsets(topic, [remote], committed=False) == {remote: RECORDS}  # still no marker
    finally:
        at_remote.close()
        producer.close()

    # Node 3 takes markers again: the transaction completes, and nothing is read twice.
    cluster[REFUSING].kill()
    cluster[REFUSING].env.pop("KPROTO_FAULT")
    cluster[REFUSING].start()
    assert wait_for(lambda: all_see(cluster, set(NODES), topic) and shards_settled(cluster), 2 * TIMEOUT_S)
    assert wait_for(lambda: at_coordinator.describe_transaction(transactional_id).transaction_state
                    == "CompleteCommit", 2 * TIMEOUT_S)
    at_coordinator.close()
    at_remote = Raw(cluster[REFUSING].bootstrap)
    try:
        assert at_remote.end_offsets(topic, [remote], committed=False) == {remote: RECORDS + 1}  # the marker
    finally:
        at_remote.close()
    seen = values(consume("confluent-kafka", bootstrap(cluster), [(topic, remote)], committed=True, expected=RECORDS))
    assert seen == {(topic, remote): [f"r{i}".encode() for i in range(RECORDS)]}
