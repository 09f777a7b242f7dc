"""A Produce over several partitions, one of which moves before the commit: that one answers
NOT_LEADER_OR_FOLLOWER, the others are acknowledged (#36).

On a cluster a broker's commit leaves out a partition another broker claimed meanwhile (nothing of
it is written) and commits the rest. The broker used to close the connection instead, so the
client could not tell which batches of the request were written: librdkafka marks them all
"possibly persisted", and an idempotent producer later failed fatally on a sequence desync
(verify-eos seed 17). Kafka answers a produce whose leader changed while it waited for acks with
NOT_LEADER_OR_FOLLOWER for that partition.

Deterministic here: one broker on PostgreSQL; the test holds the partitions' rows locked, so the
broker's commit waits (seen in pg_stat_activity), claims partition 0's row (as another broker
would), then lets the commit through.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from rivven_kproto.codec.records.records import Record, build_batch

from . import raw_client
from .broker_process import BrokerProcess
from .test_cluster import create
from .test_eos import BROKER_ENV
from .test_postgres_takeover import commit_waiting
from .txn_helpers import TIMEOUT_S, wait_for

TOPIC = "moved-partition"
PRODUCE_VERSION = 9


def _request() -> ProduceRequest:
    batch = build_batch([Record(offset_delta=0, timestamp_delta=0, key=None, value=b"v")])
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[TopicProduceData(
        name=TOPIC, partition_data=[PartitionProduceData(index=index, records=batch) for index in (0, 1)])])


def test_a_partition_claimed_before_the_commit_answers_not_leader_the_rest_is_acknowledged(
        tmp_path: Path, postgres_url: str) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", postgres_url, "--node-id", "1"],
                           env=BROKER_ENV).start()
    try:
        create(broker.bootstrap, TOPIC, 2, 1)
        with raw_client.connect(broker.bootstrap, timeout=TIMEOUT_S) as sock, \
                psycopg.connect(postgres_url) as holder, psycopg.connect(postgres_url, autocommit=True) as watcher:
            first = raw_client.call(sock, _request(), PRODUCE_VERSION)
            assert [p.error_code for p in first.responses[0].partition_responses] == [Errors.NONE, Errors.NONE]
            holder.execute("SELECT * FROM kproto_partitions FOR UPDATE")  # the broker's next commit waits

            raw_client.send(sock, _request(), PRODUCE_VERSION, correlation_id=2)
            assert wait_for(lambda: commit_waiting(watcher), TIMEOUT_S), "the broker's commit never started"
            claimed = holder.execute("UPDATE kproto_partitions SET writer = gen_random_uuid()"
                                     " WHERE partition = 0 AND next_offset = 1").rowcount
            assert claimed == 1
            holder.commit()  # another writer claimed partition 0; the waiting commit goes on
            answer = raw_client.receive(sock, ProduceRequest.API_KEY, PRODUCE_VERSION, correlation_id=2)
        by_partition = {p.index: (p.error_code, p.base_offset) for p in answer.responses[0].partition_responses}
        assert by_partition == {0: (Errors.NOT_LEADER_OR_FOLLOWER, -1), 1: (Errors.NONE, 1)}
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            ends: dict[int, int] = dict(conn.execute("SELECT partition, next_offset FROM kproto_partitions"
                                                     " WHERE partition IN (0, 1) ORDER BY partition").fetchall())
        assert ends == {0: 1, 1: 2}  # partition 0's second batch was never written; partition 1's was
    finally:
        broker.kill()
