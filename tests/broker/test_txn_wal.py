"""The transaction coordinator's log file: one open descriptor, fsync on demand, no torn middles."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rivven_kproto.broker.txn.wal import WriteAheadLog


def entry(tid: str, n: int) -> dict[str, object]:
    return {"transactional_id": tid, "n": n}


def test_entries_are_dirty_until_flushed_and_replay_after_reopen(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path, fsync=False)
    assert wal.sync_descriptor() is None  # nothing appended
    wal.append(entry("a", 1))
    wal.append(entry("b", 1))
    assert wal.dirty
    fd = wal.sync_descriptor()
    assert fd is not None and not wal.dirty
    os.fsync(fd)
    os.close(fd)
    wal.append(entry("a", 2))
    wal.close()
    assert not wal.dirty
    assert WriteAheadLog(tmp_path, fsync=False).replay() == {"a": entry("a", 2), "b": entry("b", 1)}


def test_always_mode_is_never_dirty(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path, fsync=True)
    wal.append(entry("a", 1))
    assert not wal.dirty and wal.sync_descriptor() is None
    wal.close()


def test_appends_after_a_compaction_go_to_the_new_file(tmp_path: Path) -> None:
    wal = WriteAheadLog(tmp_path, fsync=False)
    for n in range(5):
        wal.append(entry("a", n))
    wal.compact({"a": entry("a", 4)})
    wal.append(entry("b", 0))  # must not land in the replaced (unlinked) file
    wal.close()
    assert WriteAheadLog(tmp_path, fsync=False).replay() == {"a": entry("a", 4), "b": entry("b", 0)}


def test_a_failed_append_leaves_no_partial_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wal = WriteAheadLog(tmp_path, fsync=False)
    wal.append(entry("a", 1))
    real_write = os.write

    def half_then_fail(fd: int, data: bytes) -> int:
        real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(OSError):
        wal.append(entry("a", 2))
    monkeypatch.undo()
    wal.append(entry("b", 1))  # follows the last good entry, not the torn half
    wal.close()
    assert WriteAheadLog(tmp_path, fsync=False).replay() == {"a": entry("a", 1), "b": entry("b", 1)}
