"""The commit-decision lookup is a job planned on the loop, run once on a worker thread and applied
back, like a cold read: against a real PostgreSQL partition (whose markers may arrive late) and the
native log (which never waits for a decision)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.broker.log.decisions import plan_decision_lookup
from rivven_kproto.broker.storage.postgres.partition import open_partition as open_pg_partition
from rivven_kproto.broker.storage.postgres.store import PostgresStorage
from rivven_kproto.codec.records.records import Record, build_batch

from .log_helpers import NOW, config, open_log


@pytest.fixture
def storage(postgres_url: str) -> Iterator[PostgresStorage]:
    opened = PostgresStorage(postgres_url)
    yield opened
    opened.close()


def _txn_batch(pid: int, epoch: int) -> bytes:
    records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=b"t") for i in range(2)]
    return build_batch(records, base_timestamp=NOW, producer_id=pid, producer_epoch=epoch, base_sequence=0,
                       is_transactional=True)


def test_a_planned_lookup_runs_on_another_thread_and_releases_what_was_decided(storage: PostgresStorage) -> None:
    pg = open_pg_partition(storage, uuid.uuid4(), "t", 0, config(), NOW, None, new=True)
    pg.append(_txn_batch(7, 3), NOW)  # offsets 0-1, producer 7
    pg.append(_txn_batch(8, 1), NOW)  # offsets 2-3, producer 8
    pg.flush()
    assert pg.last_stable_offset == 0
    asked: list[tuple[list[int], str]] = []

    def lookup(producer_ids: list[int]) -> dict[int, int]:
        asked.append((sorted(producer_ids), threading.current_thread().name))
        return {7: 3, 8: 0}  # 7 decided in the epoch its batches have; 8 in another epoch

    assert plan_decision_lookup([(pg, 0)], lookup, lambda pid, epoch: True) is None  # all decided here
    plan = plan_decision_lookup([(pg, 0)], lookup, lambda pid, epoch: False)
    assert plan is not None and asked == []  # planning asks nothing
    decided: dict[int, int] = {}
    worker = threading.Thread(target=lambda: decided.update(plan.run()), name="decision-worker")
    worker.start()
    worker.join(timeout=60)
    assert asked == [([7, 8], "decision-worker")] and pg.last_stable_offset == 0  # nothing applied yet
    plan.apply(decided)
    assert pg.last_stable_offset == 2  # 7's transaction passed; 8's (other epoch) still holds it back
    assert pg.undecided_transactions(0) == [(8, 1, 2)]
    pg.close()


def test_the_native_log_plans_no_lookup(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(_txn_batch(7, 3), NOW)
    assert log.last_stable_offset == 0
    assert plan_decision_lookup([(log, 0)], lambda ids: {7: 3}, lambda pid, epoch: False) is None
    log.close()
