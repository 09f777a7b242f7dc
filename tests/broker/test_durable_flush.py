"""The flush split for the worker thread: begin on the log's thread, sync anywhere, finish back.

The log keeps changing between ``begin_flush`` and ``finish_flush`` (appends, rolls, retention,
deletion, truncation): the recovery point may only cover what the captured descriptors held.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from rivven_kproto.broker.durable.flush import sync_all

from .log_helpers import NOW, crash, make_batch, open_log, read_all


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_sync_on_another_thread_while_the_log_appends_and_rolls(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    for _ in range(4):
        log.append(make_batch(2, value_size=30), NOW)
    pending = log.begin_flush()
    assert pending.end_offset == 8 and pending.descriptors
    worker = threading.Thread(target=pending.sync)
    worker.start()
    for _ in range(6):  # rolls segments while the fsync may be running
        log.append(make_batch(2, value_size=30), NOW)
    worker.join()
    log.finish_flush(pending, NOW + 5)
    assert pending.synced and not pending.descriptors
    assert (log.recovery_point, log.last_flush_ms) == (8, NOW + 5)  # not the later appends
    assert (tmp_path / "recovery-point").read_text() == "0\n8\n"
    log.flush()
    assert log.recovery_point == 20


def test_the_duplicated_descriptors_are_closed(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300, index_interval_bytes=50)
    for _ in range(6):
        log.append(make_batch(2, value_size=30), NOW)
    before = open_descriptors()
    pending = log.begin_flush()
    assert open_descriptors() == before + len(pending.descriptors) > before
    sync_all([pending])
    log.finish_flush(pending)
    assert open_descriptors() <= before  # indexes hold no descriptor: a flush writes them by path


def test_a_truncation_meanwhile_keeps_the_recovery_point_down(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    for _ in range(5):
        log.append(make_batch(2, value_size=30), NOW)
    pending = log.begin_flush()
    log.engine.truncate_to(4)
    for _ in range(5):
        log.append(make_batch(2, value_size=30), NOW)  # offsets 4..13: the old 4..9 are gone
    sync_all([pending])
    log.finish_flush(pending)
    assert log.recovery_point == 0  # not advanced: the captured offsets 4..9 were truncated
    crash(log)
    recovered = open_log(tmp_path, segment_bytes=300)
    assert recovered.log_end_offset == 14 and len(read_all(recovered)) > 0


def test_deleted_segments_and_a_deleted_partition_do_not_break_the_sync(tmp_path: Path) -> None:
    log = open_log(tmp_path / "p", segment_bytes=300)
    for _ in range(6):
        log.append(make_batch(2, value_size=30), NOW)
    pending = log.begin_flush()
    log.delete_records(8)  # deletes the oldest segments under the captured descriptors
    log.delete()
    sync_all([pending])  # fsyncs unlinked files and skips the vanished directory
    log.finish_flush(pending)
    assert pending.synced and not pending.descriptors and not (tmp_path / "p").exists()


def test_a_failed_sync_leaves_nothing_marked_durable(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    log.append(make_batch(2, value_size=30), NOW)
    log.flush()
    log.append(make_batch(2, value_size=30), NOW)
    pending = log.begin_flush()
    pending.release()  # as if the worker failed before any fsync: descriptors gone, not synced
    log.finish_flush(pending)
    assert log.recovery_point == 2
    log.flush()
    assert log.recovery_point == 4
