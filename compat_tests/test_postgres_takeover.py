"""A partition claimed by another writer while this broker's commit for it is under way (#36 A).

On PostgreSQL a leader's commit of a partition is refused once another broker claimed the
partition ("its end moved"): everything appended to it meanwhile is dropped, a transaction marker
included. The transaction coordinator must learn that the marker was lost and write it again (at
the partition's new leader) before it completes the transaction; otherwise the producer's next
marker on that partition decides the whole open range: an aborted transaction becomes visible
through a later COMMIT.

One broker on a real PostgreSQL server; the test plays the other broker: it holds the partition's
row locked (the broker's commit waits), and changes the row's writer before letting go, as a broker
taking the partition over does.
"""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg

from .broker_process import BrokerProcess
from .txn_helpers import TIMEOUT_S, Raw, consume, create_topics, values, wait_for

TOPIC = "takeover"
TID = "takeover-txn"


def commit_waiting(watcher: psycopg.Connection) -> bool:
    """A session waits for a row lock on kproto_partitions (the broker's commit, behind the test's)."""
    row = watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                          " AND query LIKE '%kproto_partitions%'").fetchone()
    return bool(row and row[0])


def _send(results: dict[str, object], name: str, call: object) -> threading.Thread:
    def run() -> None:
        try:
            results[name] = call()  # type: ignore[operator]
        except (OSError, EOFError, ConnectionError) as exc:
            results[name] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_an_abort_marker_refused_with_a_partition_taken_over_is_written_again(tmp_path: Path, postgres_url: str) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", ["--storage", postgres_url]).start()
    try:
        create_topics(broker.bootstrap, {TOPIC: 1})
        raw = Raw(broker.bootstrap)
        pid, epoch = raw.init_producer_id(TID, 60_000)
        assert raw.add_partitions(TID, pid, epoch, {TOPIC: [0]}) == {0}
        assert raw.produce(TOPIC, 0, [b"aborted-0"], pid=pid, epoch=epoch, seq=0, transactional=True,
                           transactional_id=TID) == (0, 0)
        results: dict[str, object] = {}
        with psycopg.connect(postgres_url) as holder, psycopg.connect(postgres_url, autocommit=True) as watcher:
            holder.execute("SELECT * FROM kproto_partitions FOR UPDATE")  # the broker's next commit waits

            producing = Raw(broker.bootstrap)
            threads = [_send(results, "produce", lambda: producing.produce(
                TOPIC, 0, [b"aborted-1"], pid=pid, epoch=epoch, seq=1, transactional=True, transactional_id=TID))]
            assert wait_for(lambda: commit_waiting(watcher), TIMEOUT_S), f"the broker's commit never started: {results}"
            ending = Raw(broker.bootstrap)
            threads.append(_send(results, "abort", lambda: ending.end_txn(TID, pid, epoch, False)))
            # The abort marker is appended (while the commit waits) when the transaction is PrepareAbort.
            observer = Raw(broker.bootstrap)
            assert wait_for(lambda: observer.describe_transaction(TID).transaction_state == "PrepareAbort",
                            TIMEOUT_S), "the abort never started"
            # Another writer claims the partition; the broker's waiting commit is refused.
            holder.execute("UPDATE kproto_partitions SET writer = gen_random_uuid()")
            holder.commit()
        for thread in threads:
            thread.join(TIMEOUT_S)
        assert results.get("abort") == 0, results
        # The refused write was never acknowledged: NOT_LEADER_OR_FOLLOWER (the client retries at the leader).
        assert results.get("produce") == (6, -1), results

        # The transaction completes only once its marker is durable on the partition's new log.
        assert wait_for(lambda: observer.describe_transaction(TID).transaction_state == "CompleteAbort", TIMEOUT_S)
        # The producer's next transaction commits: the aborted records stay hidden.
        assert raw.add_partitions(TID, pid, epoch, {TOPIC: [0]}) == {0}
        errors: list[int] = []

        def produced() -> bool:  # NOT_LEADER_OR_FOLLOWER until the broker opened the partition again
            errors.append(raw.produce(TOPIC, 0, [b"committed-0"], pid=pid, epoch=epoch, seq=1, transactional=True,
                                      transactional_id=TID)[0])
            return errors[-1] == 0

        assert wait_for(produced, TIMEOUT_S, interval=0.5), errors
        assert set(errors) <= {0, 6}, errors
        assert raw.end_txn(TID, pid, epoch, True) == 0
        seen = consume("confluent-kafka", broker.bootstrap, [(TOPIC, 0)], committed=True, expected=1)
        assert values(seen) == {(TOPIC, 0): [b"committed-0"]}
    finally:
        broker.kill()
