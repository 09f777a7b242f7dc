"""A leader whose partition another broker claimed answers no OFFSET_OUT_OF_RANGE past its end (#36).

Verify-eos seed 49: a broker resumed from a long pause claimed its partitions back at once, while
the broker that had led them meanwhile served them for another heartbeat or two (it acts on a
change of the live brokers once two heartbeats agree). A consumer that had read the new leader's
newest record fetched the next offset from the old one, past its end: OFFSET_OUT_OF_RANGE, and
auto.offset.reset=earliest sent the group back to offset 0 (27 committed records read again).
A fetch past a partition's end on a cluster now waits for the next heartbeat, which checks that
partition's claim in the store; a lost claim answers NOT_LEADER_OR_FOLLOWER, and the partition is
read again from the store.

Deterministic here: one broker on PostgreSQL; the test plays the other broker by claiming the
partition's row and moving its end in the database.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
from confluent_kafka import Producer

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic

from . import raw_client
from .broker_process import BrokerProcess
from .test_cluster import create
from .test_eos import BROKER_ENV
from .txn_helpers import TIMEOUT_S, wait_for

TOPIC = "stale-leader"
WRITTEN, MOVED = 5, 3  # records this broker wrote; offsets "another broker" added past them


def fetch_at(broker: BrokerProcess, offset: int) -> tuple[int, int]:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                           topics=[FetchTopic(topic=TOPIC, partitions=[
                               FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[])
    with raw_client.connect(broker.bootstrap) as sock:
        response: FetchResponse = raw_client.call(sock, request, 11)
    (partition,) = response.responses[0].partitions
    return partition.error_code, partition.high_watermark


def test_a_fetch_past_the_end_of_a_claimed_partition_is_not_out_of_range(tmp_path: Path, postgres_url: str) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", postgres_url, "--node-id", "1"],
                           env=BROKER_ENV).start()
    try:
        create(broker.bootstrap, TOPIC, 1, 1)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        for i in range(WRITTEN):
            producer.produce(TOPIC, f"r{i}".encode(), partition=0)
        assert producer.flush(TIMEOUT_S) == 0
        assert fetch_at(broker, WRITTEN) == (Errors.NONE, WRITTEN)
        with psycopg.connect(postgres_url, autocommit=True) as conn:  # another writer claims the row, appends 3
            moved = conn.execute("UPDATE kproto_partitions SET writer = gen_random_uuid(), next_offset = next_offset + %s"
                                 " WHERE partition = 0 AND next_offset = %s", (MOVED, WRITTEN)).rowcount
        assert moved == 1
        # Inside the real end, past this broker's: answered once the claim was checked, from the
        # partition read again from the store (it still leads it, alone), or NOT_LEADER_OR_FOLLOWER.
        answer = fetch_at(broker, WRITTEN + 1)
        assert answer in ((Errors.NONE, WRITTEN + MOVED), (Errors.NOT_LEADER_OR_FOLLOWER, -1)), (
            f"fetch past the stale end answered {Errors(answer[0]).name} (high watermark {answer[1]})")
        assert wait_for(lambda: fetch_at(broker, WRITTEN + 1) == (Errors.NONE, WRITTEN + MOVED), TIMEOUT_S)
        assert fetch_at(broker, WRITTEN + MOVED + 1)[0] == Errors.OFFSET_OUT_OF_RANGE  # really past the end now
    finally:
        broker.kill()
