"""The flusher: every fsync and file write of the broker runs off the event loop, and under
``fsync=always`` an answer waits for the round that makes its writes durable."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig, FsyncPolicy
from rivven_kproto.broker.durable import files
from rivven_kproto.broker.durable.work import CriticalWriteFailed
from rivven_kproto.broker.log import LogConfig
from rivven_kproto.broker.txn.state import TxnState
from rivven_kproto.codec.errors import Errors
from rivven_kproto.server.context import RequestContext
from rivven_kproto.server.durability import Durability

from ..broker.log_helpers import make_batch

NOW = 1_700_000_000_000


@pytest.fixture
def on_loop_thread(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """For every fsync: whether it ran on the event loop's thread."""
    real_fsync = os.fsync
    calls: list[bool] = []

    def recording(fd: int) -> None:
        calls.append(threading.current_thread() is threading.main_thread())
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    yield calls


def open_broker(tmp_path: Path, policy: FsyncPolicy, **log: int) -> Broker:
    config = BrokerConfig(data_dir=tmp_path / "data", fsync=policy, log=LogConfig(**log))  # type: ignore[arg-type]
    broker = Broker(config, NOW)
    broker.create_topic("t", 1, 1, {}, NOW)
    return broker


async def test_under_always_a_commit_is_completed_after_its_markers_are_synced_off_the_loop(
        tmp_path: Path, on_loop_thread: list[bool]) -> None:
    broker = open_broker(tmp_path, "always")
    durability = Durability(broker, broker.config)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(durability.run)
        await durability.sync()
        on_loop_thread.clear()
        error, pid, epoch = broker.txn.init_producer_id("app", 60_000, -1, -1, NOW)
        assert error is Errors.NONE
        assert broker.txn.add_partitions("app", pid, epoch, [("t", 0)], NOW) is Errors.NONE
        before = broker.coordinator_writes
        assert broker.txn.end_txn("app", pid, epoch, True, NOW) is Errors.NONE
        # The marker is written, but the completion waits until it is durable.
        assert broker.partition("t", 0).log_end_offset == 1
        assert broker.txn.txns["app"].state is TxnState.PREPARE_COMMIT
        assert on_loop_thread == []
        await durability.after_request(RequestContext(broker, broker.config, NOW), before)
        assert broker.txn.txns["app"].state is TxnState.COMPLETE_COMMIT
        assert on_loop_thread and not any(on_loop_thread)
        nursery.cancel_scope.cancel()
    broker.close()


async def test_under_interval_a_coordinator_write_is_answered_without_waiting(
        tmp_path: Path, on_loop_thread: list[bool]) -> None:
    broker = open_broker(tmp_path, "interval")
    durability = Durability(broker, broker.config)
    on_loop_thread.clear()
    before = broker.coordinator_writes
    error, pid, epoch = broker.txn.init_producer_id("app", 60_000, -1, -1, NOW)
    assert broker.txn.add_partitions("app", pid, epoch, [("t", 0)], NOW) is Errors.NONE
    assert broker.txn.end_txn("app", pid, epoch, False, NOW) is Errors.NONE
    assert broker.txn.txns["app"].state is TxnState.COMPLETE_ABORT  # no wait for the disk
    with trio.fail_after(1):
        await durability.after_request(RequestContext(broker, broker.config, NOW), before)  # no flusher runs: this must not wait for one
    assert on_loop_thread == []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(durability.run)
        await durability.sync()
        nursery.cancel_scope.cancel()
    assert on_loop_thread and not any(on_loop_thread)  # the transaction log and the marker
    broker.close()


async def test_a_roll_leaves_its_producer_snapshot_to_the_flusher(tmp_path: Path, on_loop_thread: list[bool]) -> None:
    broker = open_broker(tmp_path, "interval", segment_bytes=300)
    durability = Durability(broker, broker.config)
    partition = broker.partition("t", 0)
    on_loop_thread.clear()
    for _ in range(6):
        partition.append(make_batch(3, 40), NOW)
    assert len(partition.segment_base_offsets) > 1
    assert not list(partition.engine.directory.glob("*.snapshot"))  # queued, not written on the loop
    assert on_loop_thread == [] and len(broker.work) > 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(durability.run)
        await durability.sync()
        nursery.cancel_scope.cancel()
    assert list(partition.engine.directory.glob("*.snapshot"))
    assert not any(on_loop_thread) and len(broker.work) == 0
    broker.close()


async def test_a_topic_recreated_at_once_survives_the_deletion_of_the_old_one(tmp_path: Path) -> None:
    broker = open_broker(tmp_path, "interval")
    broker.partition("t", 0).append(make_batch(5), NOW)
    broker.delete_topic("t")
    broker.create_topic("t", 1, 1, {}, NOW)  # before the old files are removed
    broker.partition("t", 0).append(make_batch(2), NOW)
    durability = Durability(broker, broker.config)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(durability.run)
        await durability.sync()
        nursery.cancel_scope.cancel()
    assert [p.name for p in (tmp_path / "data").iterdir() if p.name.startswith("t-")] == ["t-0"]
    broker.close()
    reopened = Broker(broker.config, NOW)
    assert reopened.partition("t", 0).log_end_offset == 2
    reopened.close()


async def test_creating_many_partitions_costs_the_loop_no_fsync(
        tmp_path: Path, on_loop_thread: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    """CreateTopics with 50 partitions: the topic table is written by the flusher (a critical job,
    answered after it) and the new directories' entries are fsynced by the flusher, once, before
    any write to them is durable."""
    broker = open_broker(tmp_path, "always")
    durability = Durability(broker, broker.config)
    synced_dirs: list[str] = []
    real_fsync_dir = files.fsync_dir
    monkeypatch.setattr(files, "fsync_dir", lambda path: (synced_dirs.append(str(path)), real_fsync_dir(path))[1])
    on_loop_thread.clear()
    before = broker.work.critical_submitted
    broker.create_topic("wide", 50, 1, {}, NOW)
    assert on_loop_thread == [] and synced_dirs == []
    assert broker.work.critical_submitted == before + 1 and broker.work.critical_pending
    assert "wide" not in (broker.data_dir / "meta" / "topics.json").read_text()  # not yet
    for index in (0, 7):
        partition = broker.partition("wide", index)
        partition.append(make_batch(2), NOW)
        broker.unflushed.add(partition)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(durability.run)
        await durability.after_request(RequestContext(broker, broker.config, NOW), broker.coordinator_writes, before)
        nursery.cancel_scope.cancel()
    assert not broker.work.critical_pending and "wide" in (broker.data_dir / "meta" / "topics.json").read_text()
    assert on_loop_thread and not any(on_loop_thread)
    assert synced_dirs.count(str(broker.data_dir)) == 1  # once, for both written partitions
    broker.close()
    assert Broker(broker.config, NOW).partition("wide", 49).log_end_offset == 0


async def test_a_failed_metadata_write_stops_the_flusher(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory and disk must not disagree about a topic: the broker stops instead."""
    broker = open_broker(tmp_path, "interval")
    durability = Durability(broker, broker.config)

    def disk_full(path: Path, data: bytes, mode: int = 0o644) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("rivven_kproto.broker.durable.work.write_atomic", disk_full)
    broker.create_topic("doomed", 1, 1, {}, NOW)
    with pytest.raises(BaseExceptionGroup) as raised:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(durability.run)
            await durability.sync()
    assert raised.group_contains(CriticalWriteFailed)
    broker.close()
