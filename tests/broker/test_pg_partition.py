"""The PostgreSQL partition log answers as the native log does, against a real PostgreSQL server.

A seeded random script of plain, idempotent (with retried duplicates) and transactional appends
and markers runs against both engines; every consumer read (offsets, budgets, both isolation
levels), timestamp lookup, the last stable offset and the aborted ranges must be equal, also after
the PostgreSQL log is reopened from the database (empty cache, state rebuilt from rows).
"""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from rivven_kproto.broker.log.native_engine import open_partition
from rivven_kproto.broker.log.partition import Fetched, Partition
from rivven_kproto.broker.log.region import BatchRegion
from rivven_kproto.broker.storage import StorageUnavailable
from rivven_kproto.broker.storage.postgres import partition as pg_partition
from rivven_kproto.broker.storage.postgres.partition import open_partition as open_pg_partition
from rivven_kproto.broker.storage.postgres.store import PostgresStorage
from rivven_kproto.codec.enums import IsolationLevel
from rivven_kproto.codec.errors import KafkaError
from rivven_kproto.codec.records.batch import iter_headers
from rivven_kproto.codec.records.records import Record, build_batch
from rivven_kproto.codec.splice import ExternalBytesGone
from rivven_kproto.testing.postgres import PostgresServer

from .log_helpers import NOW, config

SEEDS = [int(s) for s in os.environ.get("KPROTO_PG_SEEDS", "1 2 3").split()]


@pytest.fixture
def storage(postgres_url: str) -> Iterator[PostgresStorage]:
    """The engine on a fresh database of the session's throwaway server (the plugin's fixtures)."""
    opened = PostgresStorage(postgres_url)
    yield opened
    opened.close()


def batch(rng: random.Random, ts: int, **kwargs: object) -> bytes:
    records = [
        Record(offset_delta=i, timestamp_delta=rng.randrange(0, 50), key=None, value=rng.randbytes(rng.randrange(1, 300)))
        for i in range(rng.randrange(1, 6))
    ]
    return build_batch(records, base_timestamp=ts, **kwargs)  # type: ignore[arg-type]


def run_script(logs: list[Partition], seed: int, steps: int = 300) -> None:
    rng = random.Random(seed)
    sequences = {pid: 0 for pid in (1, 2, 3, 10, 11, 12)}
    sent: dict[int, list[bytes]] = {pid: [] for pid in (1, 2, 3)}
    open_txns: dict[int, int] = {}  # transactional producer id -> epoch
    for step in range(steps):
        ts = NOW + step * 10 + rng.randrange(-5, 5)
        kind = rng.random()
        if kind < 0.3:
            data = batch(rng, ts)
        elif kind < 0.6:
            pid = rng.choice(list(sent))
            if sent[pid] and rng.random() < 0.2:
                data = rng.choice(sent[pid][-5:])  # a retry of one of the last five: a duplicate
            else:
                data = batch(rng, ts, producer_id=pid, producer_epoch=0, base_sequence=sequences[pid])
                sequences[pid] += _count(data)
                sent[pid].append(data)
        elif kind < 0.85:
            pid = rng.choice((10, 11, 12))
            epoch = open_txns.setdefault(pid, 0)
            data = batch(rng, ts, producer_id=pid, producer_epoch=epoch, base_sequence=sequences[pid],
                         is_transactional=True)
            sequences[pid] += _count(data)
        else:
            if not open_txns:
                continue
            pid = rng.choice(list(open_txns))
            commit = rng.random() < 0.5
            for log in logs:
                log.append_marker(pid, open_txns[pid], commit, 0, ts)
            del open_txns[pid]
            continue
        infos = [log.append(data, ts) for log in logs]
        assert len({(i.base_offset, i.last_offset, i.duplicate) for i in infos}) == 1, infos
        if rng.random() < 0.3:
            for log in logs:
                log.flush(ts)


def _count(data: bytes) -> int:
    return int.from_bytes(data[57:61], "big")


def clipped(fetched: Fetched, start: int) -> Fetched | tuple[object, ...]:
    """After DeleteRecords to ``start`` (> 0) the rows below are gone from the database, so a
    reopened log begins an aborted range that started below ``start`` at that producer's first
    retained batch (and a range may then start after the data returned and not be listed).
    Compared then: what a read_committed client drops (the batches inside an aborted range of
    their producer)."""
    if fetched.aborted is None or start == 0:
        return fetched
    dropped = {
        header.base_offset
        for _, header in iter_headers(fetched.data)
        for a in fetched.aborted
        if not header.is_control  # markers are never delivered anyway
        and header.producer_id == a.producer_id and a.first_offset <= header.base_offset <= a.last_offset
    }
    return dataclasses.replace(fetched, aborted=None), dropped


def sent(fetched: Fetched) -> Fetched:
    """A fetch as the server sends it: a region's bytes taken from its chunks (small ones, so
    several runs of rows are read)."""
    if not isinstance(fetched.data, BatchRegion):
        return fetched
    data = b"".join(fetched.data.chunks(300))
    assert len(data) == fetched.data.size
    fetched.data.release()
    return dataclasses.replace(fetched, data=data)


def assert_same_view(
    native: Partition, pg: Partition, rng: random.Random, *, deleted_below: int = 0
) -> None:
    assert (pg.log_start_offset, pg.log_end_offset, pg.high_watermark, pg.last_stable_offset) == (
        native.log_start_offset, native.log_end_offset, native.high_watermark, native.last_stable_offset)
    end = native.log_end_offset
    for _ in range(150):
        offset = rng.randrange(native.log_start_offset, end + 1)
        budget = rng.choice((1, 100, 1000, 5000, 1 << 20))
        isolation = rng.choice((IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED))
        first = rng.random() < 0.7
        a = clipped(native.fetch(offset, budget, isolation, min_one_batch=first), deleted_below)
        b = clipped(pg.fetch(offset, budget, isolation, min_one_batch=first), deleted_below)
        assert a == b, (offset, budget, isolation, first)
        plan = pg.plan_cold_read(offset, budget, isolation)
        if plan is not None:  # what Fetch reads on a worker thread, cut to the budget
            cut = clipped(pg.fetch(offset, budget, isolation, min_one_batch=first, prefetched=plan.run()),
                          deleted_below)
            assert cut == a, (offset, budget, isolation, first)
        # A client connection's fetch: regions (cached batches, located rows) sent as they are read.
        region = clipped(sent(pg.fetch(offset, budget, isolation, min_one_batch=first, zero_copy=True)), deleted_below)
        assert region == a, (offset, budget, isolation, first)
        plan = pg.plan_cold_read(offset, budget, isolation, zero_copy=True)
        if plan is not None:
            cut = clipped(sent(pg.fetch(offset, budget, isolation, min_one_batch=first, prefetched=plan.run(),
                                        zero_copy=True)), deleted_below)
            assert cut == a, (offset, budget, isolation, first)
    for ts in (NOW - 1, NOW + 500, NOW + 1500, NOW + 10_000):
        assert pg.offset_for_timestamp(ts) == native.offset_for_timestamp(ts)
    assert pg.max_timestamp_offset() == native.max_timestamp_offset()


@pytest.mark.parametrize("seed", SEEDS)
def test_the_postgresql_log_reads_as_the_native_log(
    tmp_path: Path, storage: PostgresStorage, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_partition, "ZERO_COPY_MIN_BYTES", 1)  # every read with data as a region
    topic_id = uuid.uuid4()
    native = open_partition(tmp_path / "t-0", config(), NOW)
    pg = open_pg_partition(storage, topic_id, "t", 0, config(), NOW, None, new=True)
    pg.engine.cache_bytes = 2_000  # small: most reads go to the database
    run_script([native, pg], seed)
    native.flush()
    pg.flush()
    rng = random.Random(seed)
    assert_same_view(native, pg, rng)

    reopened = open_pg_partition(storage, topic_id, "t", 0, config(), NOW, None, new=False)
    assert_same_view(native, reopened, rng)
    assert reopened.producers.aborted == native.producers.aborted
    assert {pid: (e.epoch, e.last_seq) for pid, e in reopened.producers.producers.items()} == {
        pid: (e.epoch, e.last_seq) for pid, e in native.producers.producers.items()}

    middle = (native.log_start_offset + native.log_end_offset) // 2
    assert reopened.delete_records(middle) == native.delete_records(middle) == middle
    again = open_pg_partition(storage, topic_id, "t", 0, config(), NOW, None, new=False)
    assert_same_view(native, again, rng, deleted_below=middle)


def test_a_partition_end_moved_by_another_writer_is_refused(storage: PostgresStorage) -> None:
    """Two logs creating the same partition: the second's commit is refused (it is fenced, and
    its batches are never acknowledged)."""
    topic_id = uuid.uuid4()
    rng = random.Random(7)
    first = open_pg_partition(storage, topic_id, "t", 0, config(), NOW, None, new=True)
    second = open_pg_partition(storage, topic_id, "t", 0, config(), NOW, None, new=True)
    first.append(batch(rng, NOW), NOW)
    first.flush()
    second.append(batch(rng, NOW), NOW)
    second.flush()
    assert second.fenced and second.closed and not first.fenced
    assert first.high_watermark == first.log_end_offset and second.high_watermark == 0


def test_opening_a_partition_fences_the_broker_that_led_it(storage: PostgresStorage) -> None:
    """A broker taking a partition over claims it when it opens it: from then on the previous
    leader's commits are refused, even ones that continue exactly where the log ends."""
    topic_id = uuid.uuid4()
    rng = random.Random(9)
    old_leader = open_pg_partition(storage, topic_id, "t", 0, config(), NOW, None, new=True)
    old_leader.append(batch(rng, NOW), NOW)
    old_leader.flush()
    new_leader = open_pg_partition(storage, topic_id, "t", 0, config(), NOW, None, new=False)
    assert new_leader.log_end_offset == old_leader.log_end_offset
    old_leader.append(batch(rng, NOW), NOW)
    old_leader.flush()
    assert old_leader.fenced
    new_leader.append(batch(rng, NOW), NOW)
    new_leader.flush()
    assert not new_leader.fenced and new_leader.high_watermark == new_leader.log_end_offset
    reopened = open_pg_partition(storage, topic_id, "t", 0, config(), NOW, None, new=False)
    assert reopened.log_end_offset == new_leader.log_end_offset
    assert reopened.read(0, 1 << 20).data == new_leader.read(0, 1 << 20).data


def test_a_commit_the_database_cannot_take_is_kept_for_the_next(
    storage: PostgresStorage, postgres_server: PostgresServer
) -> None:
    """A failed commit (the server crashed) leaves the batches pending: not visible, not lost; a
    later commit, once the server is back, writes them (and what was appended meanwhile)."""
    rng = random.Random(8)
    pg = open_pg_partition(storage, uuid.uuid4(), "t", 0, config(), NOW, None, new=True)
    pg.append(batch(rng, NOW), NOW)
    pending = pg.begin_flush()
    postgres_server.stop("immediate")
    try:
        with pytest.raises(StorageUnavailable):
            storage.commit([pending])
        pg.finish_flush(pending)
        assert pg.high_watermark == 0 and pg.log_end_offset > 0
        pg.append(batch(rng, NOW), NOW)
    finally:
        postgres_server.restart()
    for _ in range(50):  # the pool finds out about its broken connections one use at a time
        try:
            pg.flush()
            break
        except StorageUnavailable:
            time.sleep(0.2)
    assert pg.high_watermark == pg.log_end_offset
    reopened = open_pg_partition(storage, pg.engine.key[0], "t", 0, config(), NOW, None, new=False)
    assert reopened.read(0, 1 << 20).data == pg.read(0, 1 << 20).data
    assert len(list(iter_headers(reopened.read(0, 1 << 20).data))) == 2


def test_retention_by_time_and_by_size(storage: PostgresStorage) -> None:
    """Kafka's retention rules over batches: the oldest go while wholly older than retention.ms,
    and while the partition keeps at least retention.bytes without them; never uncommitted ones."""
    rng = random.Random(9)
    pg = open_pg_partition(storage, uuid.uuid4(), "t", 0, config(retention_ms=1000), NOW, None, new=True)
    for i in range(10):
        pg.append(build_batch([Record(0, 0, None, b"x" * 100)], base_timestamp=NOW + i * 1000), NOW)
    pg.flush()
    pg.append(build_batch([Record(0, 0, None, b"y")], base_timestamp=NOW), NOW)  # old, but not committed
    assert pg.apply_retention(NOW + 5500) == 0 and pg.log_start_offset == 5  # timestamps NOW+5000.. stay
    assert pg.read(5, 1 << 20).data[:8] == (5).to_bytes(8, "big")
    with pytest.raises(KafkaError):
        pg.read(4, 1)
    pg.apply_retention(NOW + 100_000)
    assert pg.log_start_offset == 10  # everything committed is expired; the pending batch stays
    pg.flush()
    size_before = pg.size_bytes
    sized = open_pg_partition(storage, pg.engine.key[0], "t", 0, config(retention_bytes=0), NOW, None, new=False)
    assert sized.log_start_offset == 10 and sized.size_bytes == size_before
    sized.apply_retention(NOW)
    assert sized.log_start_offset == 11 and sized.size_bytes == 0
    kept = open_pg_partition(storage, uuid.uuid4(), "t", 1, config(retention_bytes=250), NOW, None, new=True)
    for _ in range(5):
        kept.append(batch(rng, NOW), NOW)
    kept.flush()
    sizes = [len(b.data) for b in kept.engine._cache]
    kept.apply_retention(NOW)
    expected_drop = 0  # Kafka: drop the oldest while what remains is still at least retention.bytes
    while expected_drop < len(sizes) and sum(sizes[expected_drop + 1:]) >= 250:
        expected_drop += 1
    assert expected_drop > 0 and kept.log_start_offset > 0
    assert kept.size_bytes == sum(sizes[expected_drop:]) >= 250
    reopened = open_pg_partition(storage, kept.engine.key[0], "t", 1, config(), NOW, None, new=False)
    assert reopened.log_start_offset == kept.log_start_offset and reopened.size_bytes == kept.size_bytes


def test_brokers_starting_together_migrate_the_schema_once(postgres_url: str) -> None:
    """The migrations run under an advisory lock: concurrent starts all succeed, each version once."""
    from rivven_kproto.broker.storage.postgres.schema import MIGRATIONS, migrate

    url = postgres_url
    results: list[int | BaseException] = []

    def start() -> None:
        try:
            with psycopg.connect(url) as conn:
                results.append(migrate(conn))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            results.append(exc)

    threads = [threading.Thread(target=start) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == [len(MIGRATIONS)] * 6
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT version FROM kproto_schema_version ORDER BY version").fetchall() == [
            (v,) for v in range(1, len(MIGRATIONS) + 1)]


def test_batches_are_compressed_with_lz4_not_pglz(storage: PostgresStorage, postgres_url: str) -> None:
    """pglz spends most of the server's CPU on uncompressed record batches and keeps nothing
    (schema migration 6): a stored batch that compresses is stored with lz4, one that does not
    is stored as it came, and both read back byte for byte."""
    log = open_pg_partition(storage, uuid.uuid4(), "t", 0, config(), NOW, None, new=True)
    rng = random.Random(6)
    compressible = build_batch([Record(offset_delta=i, timestamp_delta=0, key=None, value=b"v" * 100)
                                for i in range(200)], base_timestamp=NOW)
    random_values = build_batch([Record(offset_delta=i, timestamp_delta=0, key=None, value=rng.randbytes(100))
                                 for i in range(200)], base_timestamp=NOW)
    log.append(compressible, NOW)
    log.append(random_values, NOW)
    log.flush()
    with psycopg.connect(postgres_url) as conn:
        methods = conn.execute("SELECT pg_column_compression(data), octet_length(data) FROM kproto_batches"
                               " WHERE topic_id = %s ORDER BY base_offset", (log.engine.key[0],)).fetchall()
    assert [length for _, length in methods] == [len(compressible), len(random_values)]
    assert methods[0][0] == "lz4", methods
    assert methods[1][0] in ("lz4", None), methods  # lz4 keeps even a small gain; pglz would be "pglz"
    reopened = open_pg_partition(storage, log.engine.key[0], "t", 0, config(), NOW, None, new=False)
    read_back = reopened.read(0, 1 << 20).data  # from the database: a reopened log has no cached tail
    assert len(read_back) == len(compressible) + len(random_values)
    assert read_back == log.read(0, 1 << 20).data


def _txn_batch(pid: int, epoch: int, sequence: int, count: int = 2) -> bytes:
    records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=b"t") for i in range(count)]
    return build_batch(records, base_timestamp=NOW, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                       is_transactional=True)


def _plain() -> bytes:
    return build_batch([Record(offset_delta=0, timestamp_delta=0, key=None, value=b"p")], base_timestamp=NOW)


def test_a_transaction_ends_in_the_last_stable_offset_once_its_marker_is_committed(storage: PostgresStorage) -> None:
    """A marker appended but not committed could still be lost with the broker (and the
    transaction then be aborted): until its commit, read_committed readers do not pass it."""
    pg = open_pg_partition(storage, uuid.uuid4(), "t", 0, config(), NOW, None, new=True)
    pg.append(_plain(), NOW)
    pg.append(_txn_batch(7, 0, 0), NOW)  # offsets 1-2
    pg.flush()
    assert (pg.last_stable_offset, pg.high_watermark) == (1, 3)
    pg.append_marker(7, 0, True, 0, NOW)  # offset 3, in memory only
    assert pg.last_stable_offset == 1
    pg.flush()
    assert pg.last_stable_offset == pg.high_watermark == 4


def test_a_commit_decided_elsewhere_moves_the_last_stable_offset_before_the_marker(storage: PostgresStorage) -> None:
    pg = open_pg_partition(storage, uuid.uuid4(), "t", 0, config(), NOW, None, new=True)
    pg.append(_txn_batch(7, 3, 0), NOW)  # offsets 0-1
    pg.append(_plain(), NOW)  # offset 2
    pg.flush()
    assert pg.last_stable_offset == 0
    assert pg.undecided_transactions(0) == [(7, 3, 0)]
    assert pg.undecided_transactions(3) == []  # a reader at the high watermark waits for nothing
    pg.learn_committed(7, 2, 0)  # another epoch's decision
    pg.learn_committed(7, 3, 5)  # another transaction's
    assert pg.last_stable_offset == 0
    pg.learn_committed(7, 3, 0)
    assert pg.last_stable_offset == pg.high_watermark == 3 and pg.undecided_transactions(0) == []
    fetched = pg.fetch(0, 1 << 20, IsolationLevel.READ_COMMITTED, min_one_batch=True)
    assert [h.base_offset for _, h in iter_headers(bytes(fetched.data))] == [0, 2] and fetched.aborted == []
    pg.append_marker(7, 3, True, 0, NOW)  # offset 3: the marker arrives
    assert pg.last_stable_offset == 3  # not held back again while the marker is committed
    pg.flush()
    assert pg.last_stable_offset == 4
    pg.append(_txn_batch(7, 3, 2), NOW)  # the producer's next transaction is not the one learnt
    pg.flush()
    assert pg.last_stable_offset == 4 and pg.undecided_transactions(0) == [(7, 3, 4)]



def test_a_located_fetch_whose_rows_are_deleted_before_it_is_sent_says_so(storage: PostgresStorage) -> None:
    """A Fetch located in the database (a region read as it is sent): rows deleted meanwhile
    (DeleteRecords, retention) raise ExternalBytesGone for the server to close the connection,
    never a frame shorter or other than its size prefix promised."""
    pg = open_pg_partition(storage, uuid.uuid4(), "t", 0, config(), NOW, None, new=True)
    pg.engine.cache_bytes = 0  # every read below the cache: from the database
    for i in range(20):
        pg.append(build_batch([Record(0, 0, None, bytes([65 + i]) * 4000)], base_timestamp=NOW), NOW)
    pg.flush()
    plan = pg.plan_cold_read(0, 1 << 20, IsolationLevel.READ_UNCOMMITTED, zero_copy=True)
    assert plan is not None
    region = plan.run()
    assert isinstance(region, BatchRegion) and region.size > 20 * 4000
    chunks = region.chunks(10_000)
    first = next(chunks)
    assert first[:8] == (0).to_bytes(8, "big")
    pg.delete_records(15)
    with pytest.raises(ExternalBytesGone):
        list(chunks)
