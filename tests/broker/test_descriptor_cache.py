"""Partitions share a bounded cache of open segment files; indexes live in memory until a flush.

A log whose file the cache closed still appends, reads, rolls, retains and recovers; a flush syncs
by path what it can no longer sync by descriptor, and writes the index entries it owes.
"""

from __future__ import annotations

import os
from pathlib import Path

from rivven_kproto.broker.durable.flush import sync_all
from rivven_kproto.broker.log.descriptor_cache import DescriptorCache
from rivven_kproto.broker.log.index import OFFSET_ENTRY
from rivven_kproto.broker.log.native_engine import open_partition
from rivven_kproto.broker.log.partition import Partition

from .log_helpers import NOW, config, crash, headers, make_batch, read_all


def _batches(data: bytes) -> list[bytes]:
    found, position = [], 0
    for header in headers(data):
        found.append(data[position : position + header.size])
        position += header.size
    return found


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def open_logs(root: Path, count: int, files: DescriptorCache, **overrides: object) -> list[Partition]:
    return [open_partition(root / f"p-{i}", config(**overrides), NOW, files=files) for i in range(count)]


def test_many_partitions_hold_at_most_the_cache_capacity(tmp_path: Path) -> None:
    files = DescriptorCache(8)
    before = open_descriptors()
    logs = open_logs(tmp_path, 60, files)
    for round_ in range(3):
        for i, log in enumerate(logs):
            log.append(make_batch(1, value_size=20 + i + round_), NOW)
            assert open_descriptors() - before <= 8
    assert len(files) == 8 and files.evictions >= 60 * 3 - 8
    for i, log in enumerate(logs):
        values = [len(batch) for batch in _batches(read_all(log))]
        assert values == [len(make_batch(1, value_size=20 + i + r)) for r in range(3)]
    for log in logs:
        log.flush()
        assert open_descriptors() - before <= 8  # a flush of a closed file syncs it by path
    for log in logs:
        log.close()
    assert open_descriptors() == before and len(files) == 0
    reopened = open_logs(tmp_path, 60, files)
    assert all(log.log_end_offset == 3 for log in reopened)
    assert open_descriptors() - before <= 8


def test_a_file_the_cache_closed_is_synced_by_its_path(tmp_path: Path) -> None:
    files = DescriptorCache(4)
    first, *others = open_logs(tmp_path, 6, files)
    first.append(make_batch(3), NOW)
    for log in others:
        log.append(make_batch(1), NOW)  # pushes ``first``'s file out of the cache, unsynced
    active = first.engine._active
    assert not active.is_open()
    pending = first.begin_flush()
    assert pending.paths == [active.log_path] and pending.descriptors == []
    sync_all([pending])
    first.finish_flush(pending)
    assert pending.synced and first.recovery_point == 3
    assert (tmp_path / "p-0" / "recovery-point").read_text() == "0\n3\n"
    first.append(make_batch(1), NOW)  # reopened on use
    assert active.is_open() and first.begin_flush().paths == []


def test_sealed_segments_reopen_for_reads_retention_and_recovery(tmp_path: Path) -> None:
    files = DescriptorCache(4)
    log = open_partition(tmp_path / "p", config(segment_bytes=300, index_interval_bytes=60), NOW, files=files)
    for i in range(30):
        log.append(make_batch(2, value_size=30, ts=NOW + i), NOW)
    assert len(log.segment_base_offsets) > 8 and len(files) == 4
    everything = read_all(log)  # spans every segment, reopening the closed ones
    assert [h.base_offset for h in headers(everything)] == list(range(0, 60, 2))
    for offset in range(60):
        first = headers(log.read(offset, 1).data)[0]
        assert first.base_offset <= offset < first.next_offset
    assert log.offset_for_timestamp(NOW + 17) == (33, NOW + 17)  # batch 16: offsets 32, 33 at +16, +17
    log.flush()
    start = log.segment_base_offsets[3]
    log.delete_records(start)
    assert log.log_start_offset == start and log.segment_base_offsets[0] == start
    crash(log)  # kill -9 after the flush: recovery starts from the flushed indexes
    recovered = open_partition(tmp_path / "p", config(segment_bytes=300, index_interval_bytes=60), NOW,
                                  files=files)
    assert (recovered.log_start_offset, recovered.log_end_offset) == (start, 60)
    assert read_all(recovered) == everything[everything.index(log.read(start, 1).data):]


def test_index_entries_reach_the_file_at_flushes_only(tmp_path: Path) -> None:
    log = open_partition(tmp_path, config(index_interval_bytes=50), NOW, files=DescriptorCache(8))
    for _ in range(5):
        log.append(make_batch(2, value_size=30), NOW)
    index = log.engine._active.index
    path = index.path
    assert len(index) >= 3 and (not path.exists() or path.stat().st_size == 0)
    pending = log.begin_flush()
    pending.release()  # the worker failed before writing anything: the entries are owed again
    log.finish_flush(pending)
    assert not pending.synced and (not path.exists() or path.stat().st_size == 0)
    log.flush()
    expected = b"".join(OFFSET_ENTRY.pack(o, p) for o, p in zip(index.offsets, index.positions, strict=True))
    assert path.read_bytes() == expected
    log.engine.truncate_to(4)  # drops index entries: the next flush cuts the file to match
    log.flush()
    kept = b"".join(OFFSET_ENTRY.pack(o, p) for o, p in zip(index.offsets, index.positions, strict=True))
    assert path.read_bytes() == kept and len(kept) < len(expected)


def test_a_crash_before_any_flush_rebuilds_the_indexes_from_the_log(tmp_path: Path) -> None:
    files = DescriptorCache(4)
    log = open_partition(tmp_path, config(segment_bytes=400, index_interval_bytes=50), NOW, files=files)
    for _ in range(12):
        log.append(make_batch(2, value_size=30), NOW)
    everything = read_all(log)
    crash(log)  # the page cache kept the log; the in-memory indexes are gone
    recovered = open_partition(tmp_path, config(segment_bytes=400, index_interval_bytes=50), NOW, files=files)
    assert recovered.log_end_offset == 24 and read_all(recovered) == everything
    assert len(recovered.engine._active.index) > 0
    for offset in range(24):
        assert headers(recovered.read(offset, 1).data)[0].next_offset > offset
