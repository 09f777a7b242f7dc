"""On PostgreSQL, deleting a share group or a topic deletes its share state from the database
(the partitions' share-state logs, ``share/<topic id>/<partition>``), with the real CLI and
client: a group made again with the same id starts afresh (share.auto.offset.reset, earliest on
this broker: every record again), and no row of the group or of the topic is left behind."""

from __future__ import annotations

from pathlib import Path

import psycopg
from confluent_kafka.admin import AdminClient

from .broker_process import BrokerProcess
from .test_cli import ok
from .test_share_group_admin import consume_all_and_leave, wait_empty
from .test_share_groups import BROKER_ENV, fresh, produce
from .txn_helpers import TIMEOUT_S, wait_for


def share_rows(url: str, containing: bytes = b"") -> int:
    """Rows of share-state logs (entries and snapshots), those holding ``containing`` if given."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM kproto_coordinator_log WHERE name LIKE 'share/%%/%%'"
            "        AND position(%s::bytea in payload) > 0)"
            "     + (SELECT count(*) FROM kproto_coordinator_snapshots WHERE name LIKE 'share/%%/%%'"
            "        AND position(%s::bytea in payloads) > 0)", (containing, containing)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_deleted_share_group_leaves_no_state_and_starts_afresh(tmp_path: Path, postgres_url: str) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", postgres_url],
                           env=BROKER_ENV).start()
    try:
        topic, group, other = fresh("sh-gone"), fresh("g"), fresh("kept")
        records = [b"v%d" % i for i in range(5)]
        produce(broker.bootstrap, topic, records)
        assert sorted(consume_all_and_leave(broker, other, topic, len(records))) == records
        assert sorted(consume_all_and_leave(broker, group, topic, len(records))) == records
        wait_empty(broker, group)
        assert share_rows(postgres_url, group.encode()) > 0
        assert ok(broker.bootstrap, "share-groups", "delete", group) == {"deleted": [group]}
        assert wait_for(lambda: share_rows(postgres_url, group.encode()) == 0, TIMEOUT_S), \
            "rows of the deleted group's share state are left"
        assert share_rows(postgres_url, other.encode()) > 0  # another group's state stays
        assert sorted(consume_all_and_leave(broker, group, topic, len(records))) == records  # afresh
    finally:
        broker.kill()


def test_a_deleted_topic_leaves_no_share_state(tmp_path: Path, postgres_url: str) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", postgres_url],
                           env=BROKER_ENV).start()
    try:
        topic, group = fresh("sh-topic-gone"), fresh("g")
        produce(broker.bootstrap, topic, [b"a", b"b"])
        consume_all_and_leave(broker, group, topic, 2)
        assert share_rows(postgres_url) > 0
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics([topic])[topic].result(TIMEOUT_S)
        assert wait_for(lambda: share_rows(postgres_url) == 0, TIMEOUT_S), "share-state rows of a deleted topic"
    finally:
        broker.kill()
