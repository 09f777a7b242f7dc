"""A broker whose lock session ends (database restart, failover, a cut session) keeps serving (#36).

A broker on PostgreSQL holds its node and coordinator-shard locks on one session. When that
session ends, a coordinator log write could reach the server before the heartbeat noticed: the
write found its shard's lock held by nobody and the broker stopped ("writes coordinator shard N
without holding its lock"; verify-eos seed 48 after a failover, twice). Nobody holding the lock is
not a loss: the write waits, the session and its locks are taken again, and it commits. (A lock
another broker holds still stops the broker: that is a real loss.)

Deterministic here: the test ends the broker's lock session itself (pg_terminate_backend) and
commits a group offset at once.
"""

from __future__ import annotations

from pathlib import Path

import psycopg

from rivven_kproto.broker.storage.postgres.registry import NODE_LOCK_CLASS
from rivven_kproto.codec.errors import Errors
from rivven_kproto.codec.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from rivven_kproto.codec.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic

from . import raw_client
from .broker_process import BrokerProcess
from .test_cluster import create
from .test_eos import BROKER_ENV
from .txn_helpers import TIMEOUT_S, wait_for

TOPIC, GROUP = "lock-session", "lock-session-group"
LOCK_SESSION = ("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
                " AND classid::bigint = %s AND objid::bigint = 1")  # the session holding node 1's lock


def _commit(sock: object, offset: int) -> int:
    request = OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
                                  topics=[OffsetCommitRequestTopic(name=TOPIC, partitions=[OffsetCommitRequestPartition(
                                      partition_index=0, committed_offset=offset, committed_metadata="")])])
    return raw_client.call(sock, request, 2).topics[0].partitions[0].error_code


def _committed(broker: BrokerProcess) -> int:
    request = OffsetFetchRequest(group_id=GROUP, topics=[OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])])
    with raw_client.connect(broker.bootstrap, timeout=TIMEOUT_S) as sock:
        return raw_client.call(sock, request, 2).topics[0].partitions[0].committed_offset


def test_a_coordinator_write_right_after_the_lock_session_ended_commits(tmp_path: Path, postgres_url: str) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", postgres_url, "--node-id", "1"],
                           env=BROKER_ENV).start()
    try:
        create(broker.bootstrap, TOPIC, 1, 1)
        with raw_client.connect(broker.bootstrap, timeout=TIMEOUT_S) as sock, \
                psycopg.connect(postgres_url, autocommit=True) as conn:
            assert _commit(sock, 1) == Errors.NONE  # finds the coordinator's shard loaded
            for attempt in range(3):
                # (The heartbeat takes the locks again within a second of the last end.)
                assert wait_for(lambda: bool(conn.execute(LOCK_SESSION, (NODE_LOCK_CLASS,)).fetchall()), TIMEOUT_S)
                ended = conn.execute(f"SELECT pg_terminate_backend(pid) FROM ({LOCK_SESSION}) s", (NODE_LOCK_CLASS,)).fetchall()
                assert ended == [(True,)], (attempt, ended)
                assert _commit(sock, 10 + attempt) == Errors.NONE
        assert broker.alive(), "the broker stopped"
        assert wait_for(lambda: _committed(broker) == 12, TIMEOUT_S)
        assert "lock is gone" in (tmp_path / "broker.log").read_text()  # a write did find its lock gone
        assert broker.alive(), "the broker stopped"
    finally:
        broker.kill()
