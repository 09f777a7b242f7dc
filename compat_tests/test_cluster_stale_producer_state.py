"""A leader whose partition another broker claimed answers no OUT_OF_ORDER_SEQUENCE_NUMBER from its
stale producer state (#36).

Verify-eos seed 77: after kills and a database restart, a broker still served a partition another
broker had written the idempotent producer's next batches to; it checked the producer's next batch
against what it knew (an older last sequence) and answered OUT_OF_ORDER_SEQUENCE_NUMBER, which is
fatal to librdkafka's idempotent producer. On a cluster that answer now waits for the next
heartbeat, which checks the partition's claim in the store: a lost claim answers
NOT_LEADER_OR_FOLLOWER (retriable: the client finds the leader again).

Deterministic here: one broker on PostgreSQL; the test plays the other broker by claiming the
partition's row and moving its end in the database.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse

from .broker_process import BrokerProcess
from .test_cluster import create
from .test_eos import BROKER_ENV
from .txn_helpers import Raw

TOPIC = "stale-producer"
WRITTEN, MOVED = 5, 3  # records this broker wrote (sequences 0-4); the other leader's (5-7)


def test_a_batch_after_the_other_leaders_is_not_out_of_order(tmp_path: Path, postgres_url: str) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", postgres_url, "--node-id", "1"],
                           env=BROKER_ENV).start()
    raw = Raw(broker.bootstrap)
    try:
        create(broker.bootstrap, TOPIC, 1, 1)
        init: InitProducerIdResponse = raw.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 4)
        pid, epoch = init.producer_id, init.producer_epoch
        values = [f"r{i}".encode() for i in range(WRITTEN)]
        assert raw.produce(TOPIC, 0, values, pid=pid, epoch=epoch, seq=0) == (Errors.NONE, 0)
        with psycopg.connect(postgres_url, autocommit=True) as conn:  # another leader claims the row, appends 3
            moved = conn.execute("UPDATE kproto_partitions SET writer = gen_random_uuid(), next_offset = next_offset + %s"
                                 " WHERE partition = 0 AND next_offset = %s", (MOVED, WRITTEN)).rowcount
        assert moved == 1
        # The producer's next batch after the other leader's (sequence 8): this broker's state ends
        # at sequence 4. Answered once the claim was checked: the partition moved.
        error, _ = raw.produce(TOPIC, 0, [b"next"], pid=pid, epoch=epoch, seq=WRITTEN + MOVED)
        assert error == Errors.NOT_LEADER_OR_FOLLOWER, f"answered {Errors(error).name} from a stale producer state"
    finally:
        raw.close()
        broker.kill()
