"""The coordinators' durable log: appends, syncs handed to the flusher, rolls, torn writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rivven_kproto.broker.durable.log import MAGIC, DurableLog
from rivven_kproto.broker.durable.work import BlockingWork


def reopened(directory: Path) -> list[bytes]:
    return DurableLog(directory, "t").open()


def test_appends_are_synced_only_through_begin_sync_and_replay_after_reopen(tmp_path: Path) -> None:
    log = DurableLog(tmp_path, "t")
    assert log.open() == []
    first = log.begin_sync()  # the new file and its directory entry
    assert first is not None and first.directory == tmp_path
    first.sync()
    assert log.begin_sync() is None  # nothing appended since
    log.append(b"a1")
    log.append(b"b1")
    pending = log.begin_sync()
    assert pending is not None and len(pending.descriptors) == 1 and pending.directory is None
    pending.sync()
    log.append(b"a2")
    assert log.appended == 3
    # no close(): what a kill -9 leaves is what the OS has
    assert reopened(tmp_path) == [b"a1", b"b1", b"a2"]


def test_a_roll_moves_appends_to_a_new_file_and_the_snapshot_replaces_the_old(tmp_path: Path) -> None:
    work = BlockingWork()
    log = DurableLog(tmp_path, "t", work)
    log.open()
    for n in range(5):
        log.append(b"a%d" % n)
    log.roll([b"a4"])
    log.append(b"b0")
    # Before the queued snapshot job runs, the old file still replays (a crash here loses nothing).
    assert reopened_without_cleanup(tmp_path) == [b"a0", b"a1", b"a2", b"a3", b"a4", b"b0"]
    pending = log.begin_sync()
    assert pending is not None and pending.directory == tmp_path
    assert len(pending.descriptors) == 2  # the rolled file still owed an fsync, and the new one
    pending.sync()
    for job in work.take():
        job()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t-0000000001.log", "t-0000000001.snapshot"]
    assert reopened(tmp_path) == [b"a4", b"b0"]


def reopened_without_cleanup(directory: Path) -> list[bytes]:
    """Replay a copy, so that the original directory keeps its files."""
    copy = directory.parent / (directory.name + "-copy")
    copy.mkdir()
    for path in directory.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    return reopened(copy)


def test_a_failed_append_leaves_no_partial_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = DurableLog(tmp_path, "t")
    log.open()
    log.append(b"a1")
    real_write = os.write

    def half_then_fail(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(OSError):
        log.append(b"a2-long-enough-to-be-torn")
    monkeypatch.undo()
    log.append(b"b1")  # follows the last good entry, not the torn half
    assert reopened(tmp_path) == [b"a1", b"b1"]


def test_a_torn_tail_is_cut_and_later_appends_replay(tmp_path: Path) -> None:
    log = DurableLog(tmp_path, "t")
    log.open()
    log.append(b"kept")
    path = log.current_path
    good = path.stat().st_size
    log.append(b"torn-entry")
    data = path.read_bytes()
    path.write_bytes(data[: good + 5])
    log = DurableLog(tmp_path, "t")
    assert log.open() == [b"kept"]
    assert path.stat().st_size == good
    log.append(b"after")
    assert reopened(tmp_path) == [b"kept", b"after"]


def test_damage_in_an_older_file_ends_the_replay_there(tmp_path: Path) -> None:
    work = BlockingWork()  # snapshots never written: replay must read both files
    log = DurableLog(tmp_path, "t", work)
    log.open()
    log.append(b"one")
    log.append(b"two")
    older = log.current_path
    log.roll([b"one", b"two"])
    log.append(b"three")
    data = bytearray(older.read_bytes())
    data[-1] ^= 0xFF  # inside "two"
    older.write_bytes(bytes(data))
    assert reopened(tmp_path) == [b"one"]
    assert (tmp_path / "t-0000000001.log.damaged").exists()  # kept aside, not applied over a gap


def test_an_empty_file_from_a_crash_at_creation_gets_its_magic(tmp_path: Path) -> None:
    (tmp_path / "t-0000000000.log").write_bytes(b"")
    log = DurableLog(tmp_path, "t")
    assert log.open() == []
    assert (tmp_path / "t-0000000000.log").read_bytes() == MAGIC
