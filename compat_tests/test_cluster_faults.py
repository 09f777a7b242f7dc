"""Database errors a cluster's brokers meet while following each other (#19): they are retried at
the next heartbeat, and never stop a broker.

Three brokers on one PostgreSQL database; a trigger the test installs makes the followers'
acknowledgement of a new topic catalog fail (as a database that refuses a write would), while
everything else works.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
from confluent_kafka.admin import AdminClient, NewTopic

from rivven_kproto.broker.cluster import catalog_digest
from rivven_kproto.testing.postgres import PostgresServer, create_database

from .broker_process import BrokerProcess
from .test_cluster import NODES, all_see, described_by, three_brokers
from .test_eos import BROKER_ENV
from .txn_helpers import TIMEOUT_S, wait_for

REFUSE_ACKNOWLEDGEMENTS = """
CREATE FUNCTION kproto_test_refuse_ack() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.catalog_seen IS DISTINCT FROM OLD.catalog_seen THEN
        RAISE EXCEPTION 'catalog acknowledgements refused by the test';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER kproto_test_refuse_ack BEFORE UPDATE ON kproto_brokers
    FOR EACH ROW EXECUTE FUNCTION kproto_test_refuse_ack();
"""
ALLOW_ACKNOWLEDGEMENTS = "DROP TRIGGER kproto_test_refuse_ack ON kproto_brokers"
FAILED = "following the cluster failed"


def test_a_follower_whose_catalog_acknowledgement_fails_keeps_serving(tmp_path: Path, postgres_url: str) -> None:
    with three_brokers(tmp_path, postgres_url) as brokers, psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(REFUSE_ACKNOWLEDGEMENTS)
        # The controller answers once every broker applied the catalog, or after its wait (10 s:
        # the request's timeout is ours, well above it).
        admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
        admin.create_topics([NewTopic("cf-topic", 3, 1)], request_timeout=4 * TIMEOUT_S)["cf-topic"].result(4 * TIMEOUT_S)
        followers = [brokers[2], brokers[3]]
        assert wait_for(lambda: all(FAILED in b.log_text() or not b.alive() for b in followers), TIMEOUT_S)
        assert all(b.alive() for b in brokers.values()), "a follower stopped on a failed acknowledgement"
        assert wait_for(lambda: all_see(brokers, set(NODES), "cf-topic"), TIMEOUT_S)

        conn.execute(ALLOW_ACKNOWLEDGEMENTS)

        def acknowledged() -> bool:
            (catalog,) = conn.execute("SELECT data FROM kproto_documents WHERE name = 'topics.json'").fetchone() or (b"",)
            rows = conn.execute("SELECT catalog_seen FROM kproto_brokers WHERE node_id IN (2, 3)").fetchall()
            return len(rows) == 2 and all(seen == catalog_digest(bytes(catalog)) for (seen,) in rows)

        # Retried at a later heartbeat: both followers acknowledge the catalog they follow.
        assert wait_for(acknowledged, TIMEOUT_S)
        assert all(b.alive() for b in brokers.values())


def test_brokers_of_another_database_on_the_same_server_hold_no_node_id_here(
        tmp_path: Path, postgres_server: PostgresServer) -> None:
    """Node locks are a database's own: a broker serving another database of the same PostgreSQL
    server as node 0 neither keeps a broker of this one from taking node 0 nor counts as alive here."""
    other, here = create_database(postgres_server), create_database(postgres_server)
    brokers = [BrokerProcess(tmp_path / f"{name}-data", tmp_path / f"{name}.log", ["--storage", url], env=BROKER_ENV)
               for name, url in (("other", other), ("here", here))]
    try:
        elsewhere = brokers[0].start()
        assert "node id 0 assigned from the database" in elsewhere.log_text()
        this = brokers[1].start()
        assert "node id 0 assigned from the database" in this.log_text()
        assert [b.node_id for b in described_by(this).brokers] == [0]
    finally:
        for broker in brokers:
            broker.kill()
