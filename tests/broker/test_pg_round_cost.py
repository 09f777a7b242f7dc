"""A round's cost on the PostgreSQL engine does not grow with what it holds: two round trips (BEGIN
and the round's one statement in a pipeline, then COMMIT), however many partitions and coordinator
logs it commits; and what it commits is what the statements one by one committed (the rows, the
ends, the decisions; a refused partition left out, the rest committed).

Round trips are counted in libpq's own trace of the connection: each Sync (extended protocol) or
Query (simple protocol) the client sends is one wait for the server's answer.
"""

from __future__ import annotations

import contextlib
import random
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from psycopg import pq
from psycopg_pool import ConnectionPool

from rivven_kproto.broker.storage.postgres.partition import open_partition as open_pg_partition
from rivven_kproto.broker.storage.postgres.store import PostgresStorage
from rivven_kproto.codec.records.records import Record, build_batch

from .log_helpers import NOW, config
from .test_coordinator_shards import holding_a_shard

PARTITIONS = 8


@contextlib.contextmanager
def traced(storage: PostgresStorage, url: str) -> Iterator[Path]:
    """The engine's pool as one connection whose protocol messages libpq writes to the file."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "trace"
        with path.open("w") as sink:
            def configure(conn: object) -> None:
                pgconn = conn.pgconn  # type: ignore[attr-defined]
                pgconn.trace(sink.fileno())
                pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

            storage.pool.pool.close()
            storage.pool.pool = ConnectionPool(url, min_size=1, max_size=1, open=False, configure=configure)
            storage.pool.pool.open(wait=True)
            yield path


def sent(path: Path) -> tuple[int, int]:
    """(round trips, statements) the client sent so far."""
    lines = [line.split("\t") for line in path.read_text().splitlines()]
    messages = [fields[2].split(" ")[0] for fields in lines if len(fields) > 2 and fields[0] == "F"]
    return (sum(m in ("Sync", "Query") for m in messages), sum(m in ("Execute", "Query") for m in messages))


def a_batch(rng: random.Random, producer_id: int = -1) -> bytes:
    records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=rng.randbytes(50)) for i in range(3)]
    return build_batch(records, base_timestamp=NOW, producer_id=producer_id)


def test_a_round_of_many_logs_costs_two_round_trips(postgres_url: str) -> None:
    rng = random.Random(3)
    with holding_a_shard(postgres_url) as (storage, held), traced(storage, postgres_url) as trace:
        topic_id = uuid.uuid4()
        logs = [open_pg_partition(storage, topic_id, "t", i, config(), NOW, None, new=True)
                for i in range(PARTITIONS)]
        txn_log = storage.coordinator_log(f"txn/{held}", None, held)  # type: ignore[arg-type]
        txn_log.open()
        for log_ in logs:
            log_.append(a_batch(rng), NOW)
            log_.append(a_batch(rng), NOW)
        txn_log.append(b"prepare-commit")
        txn_log.record_decision(7, 3)
        txn_log.append(b"complete-commit")
        txn_log.record_decision(8, 1)
        txn_log.record_decision(8, None)
        items = [log_.begin_flush() for log_ in logs] + [txn_log.begin_sync()]
        before = sent(trace)
        storage.commit(items)  # type: ignore[arg-type]
        after = sent(trace)
        for log_, item in zip(logs, items, strict=False):
            log_.finish_flush(item, NOW)  # type: ignore[arg-type]
        round_trips, statements = after[0] - before[0], after[1] - before[1]
        # BEGIN and the round's statement, then COMMIT
        assert round_trips == 2 and statements == 3, (round_trips, statements, trace.read_text()[-3000:])
        assert all(item.synced and not item.fenced for item in items)  # type: ignore[union-attr]
        assert storage.committed_decisions([7, 8]) == {7: 3}
        with storage.pool.connection() as conn:
            rows = conn.execute("SELECT partition, count(*) FROM kproto_batches WHERE topic_id = %s GROUP BY 1",
                                (topic_id,)).fetchall()
            ends = conn.execute("SELECT partition, next_offset FROM kproto_partitions WHERE topic_id = %s",
                                (topic_id,)).fetchall()
            entries = conn.execute("SELECT payload FROM kproto_coordinator_log WHERE name = %s ORDER BY seq",
                                   (f"txn/{held}",)).fetchall()
        assert dict(rows) == {i: 2 for i in range(PARTITIONS)}
        assert dict(ends) == {i: 6 for i in range(PARTITIONS)}
        assert [bytes(p) for (p,) in entries] == [b"prepare-commit", b"complete-commit"]
        assert all(log_.high_watermark == 6 for log_ in logs)


def test_a_refused_partition_leaves_the_rest_of_the_round_committed(postgres_url: str) -> None:
    """Another writer claimed one partition: only its writes are refused, in the same round."""
    rng = random.Random(4)
    with holding_a_shard(postgres_url) as (storage, _):
        topic_id = uuid.uuid4()
        logs = [open_pg_partition(storage, topic_id, "t", i, config(), NOW, None, new=True) for i in range(3)]
        for log_ in logs:
            log_.append(a_batch(rng), NOW)
            log_.flush()
        open_pg_partition(storage, topic_id, "t", 1, config(), NOW, None, new=False)  # claims partition 1
        for log_ in logs:
            log_.append(a_batch(rng), NOW)
        items = [log_.begin_flush() for log_ in logs]
        storage.commit(items)
        for log_, item in zip(logs, items, strict=True):
            log_.finish_flush(item, NOW)
        assert [log_.fenced for log_ in logs] == [False, True, False]
        assert [log_.high_watermark for log_ in logs] == [6, 3, 6]
        with storage.pool.connection() as conn:
            ends = dict(conn.execute("SELECT partition, next_offset FROM kproto_partitions WHERE topic_id = %s",
                                     (topic_id,)).fetchall())
        assert ends == {0: 6, 1: 3, 2: 6}
