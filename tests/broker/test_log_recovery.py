"""Crash recovery, damaged indexes, retention and DeleteRecords of Partition, on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.codec.errors import Errors, KafkaError

from .log_helpers import NOW, crash, headers, make_batch, open_log, read_all, segment_files


def _fill(log: Partition, count: int, records: int = 2, value_size: int = 30) -> list[int]:
    """Append ``count`` batches; return the byte size of the log after each append."""
    sizes = []
    for i in range(count):
        log.append(make_batch(records, value_size=value_size, ts=NOW + i), NOW + i)
        sizes.append(log.size_bytes)
    return sizes


def test_crash_then_garbage_is_cut_exactly(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=50)
    _fill(log, 10)
    everything, end = read_all(log), log.log_end_offset
    crash(log)
    active = segment_files(tmp_path)[-1]
    good_size = active.stat().st_size
    with active.open("ab") as f:
        f.write(os.urandom(300))
    log = open_log(tmp_path, index_interval_bytes=50)
    assert active.stat().st_size == good_size
    assert (read_all(log), log.log_end_offset) == (everything, end)
    assert log.append(make_batch(1), NOW).base_offset == end


def test_crash_with_zero_filled_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    _fill(log, 3)
    everything = read_all(log)
    crash(log)
    with segment_files(tmp_path)[-1].open("ab") as f:
        f.write(bytes(4096))
    assert read_all(open_log(tmp_path)) == everything


def test_torn_last_batch_is_dropped(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sizes = _fill(log, 5)
    crash(log)
    os.truncate(segment_files(tmp_path)[-1], sizes[-1] - 7)
    log = open_log(tmp_path)
    assert log.log_end_offset == 8 and log.size_bytes == sizes[-2]
    assert headers(read_all(log))[-1].next_offset == 8


def test_flipped_byte_cuts_that_batch_and_all_after(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500, index_interval_bytes=60)
    _fill(log, 20)
    bases = log.segment_base_offsets
    assert len(bases) >= 4
    crash(log)
    victim = segment_files(tmp_path)[1]
    found = headers(victim.read_bytes())
    position = found[0].size + found[1].size + 30  # inside the third batch of segment 2
    with victim.open("r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x01]))
    log = open_log(tmp_path, segment_bytes=500, index_interval_bytes=60)
    assert log.log_end_offset == found[2].base_offset
    assert log.segment_base_offsets == bases[:2]
    assert len(segment_files(tmp_path)) == 2 and len(segment_files(tmp_path, ".index")) == 2
    assert headers(read_all(log))[-1].next_offset == found[2].base_offset


def test_recovery_starts_at_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600, index_interval_bytes=40)
    _fill(log, 14)  # the recovery point lands inside a segment, after an index entry
    log.flush(NOW)
    flushed = log.log_end_offset
    _fill(log, 6)
    everything, end = read_all(log), log.log_end_offset
    crash(log)
    with segment_files(tmp_path)[-1].open("ab") as f:
        f.write(b"\x00\x01garbage" * 10)
    log = open_log(tmp_path, segment_bytes=600, index_interval_bytes=40)
    assert (read_all(log), log.log_end_offset) == (everything, end)
    assert log.recovery_point == end > flushed


def test_clean_shutdown_skips_recovery_but_still_catches_a_torn_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sizes = _fill(log, 4)
    log.close()
    os.truncate(segment_files(tmp_path)[-1], sizes[-1] - 3)
    log = open_log(tmp_path)
    assert log.size_bytes == sizes[-2] and log.log_end_offset == 6


@pytest.mark.parametrize("damage", ["delete", "garble", "truncate", "past-end"])
def test_damaged_indexes_are_rebuilt(tmp_path: Path, damage: str) -> None:
    log = open_log(tmp_path, segment_bytes=800, index_interval_bytes=40)
    _fill(log, 30)
    everything, bases = read_all(log), log.segment_base_offsets
    log.close()
    for suffix in (".index", ".timeindex"):
        for path in segment_files(tmp_path, suffix):
            if damage == "delete":
                path.unlink()
            elif damage == "garble":
                path.write_bytes(os.urandom(path.stat().st_size + 5))
            elif damage == "truncate":
                os.truncate(path, path.stat().st_size // 2 + 1)
            else:
                path.write_bytes(path.read_bytes() + (1000).to_bytes(4, "big") + (10**6).to_bytes(8, "big"))
    log = open_log(tmp_path, segment_bytes=800, index_interval_bytes=40)
    assert (read_all(log), log.segment_base_offsets) == (everything, bases)
    for offset in range(log.log_end_offset):
        first = headers(log.read(offset, 1).data)[0]
        assert first.base_offset <= offset < first.next_offset
    assert log.offset_for_timestamp(NOW + 17) == (33, NOW + 17)
    assert all(p.stat().st_size > 0 for p in segment_files(tmp_path, ".index"))


def test_strays_and_bad_checkpoints_are_ignored(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    _fill(log, 3)
    everything = read_all(log)
    crash(log)
    (tmp_path / "recovery-point").write_text("not a number")
    (tmp_path / "log-start-offset.tmp").write_text("0\n5\n")
    (tmp_path / "00000000000000000099.index").write_bytes(b"12345678")
    log = open_log(tmp_path)
    assert read_all(log) == everything and log.log_start_offset == 0
    assert not (tmp_path / "log-start-offset.tmp").exists()
    assert not (tmp_path / "00000000000000000099.index").exists()


def test_retention_by_time_survives_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300, retention_ms=1000)
    for i in range(12):
        log.append(make_batch(2, value_size=30, ts=NOW + 200 * i), NOW + 200 * i)
    bases = log.segment_base_offsets
    assert log.apply_retention(NOW + 200 * 11) > 0
    remaining = log.segment_base_offsets
    assert remaining[0] > 0 and remaining == bases[len(bases) - len(remaining) :]
    assert log.log_start_offset == remaining[0]
    first = headers(log.read(remaining[0], 1).data)[0]
    assert NOW + 200 * 11 - first.max_timestamp <= 1000 + 400
    with pytest.raises(KafkaError):
        log.read(0, 100)
    log.close()
    log = open_log(tmp_path, segment_bytes=300, retention_ms=1000)
    assert log.log_start_offset == remaining[0] and log.segment_base_offsets == remaining
    assert log.apply_retention(NOW + 10**9) == len(remaining) - 1  # never the active segment


def test_retention_by_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300, retention_bytes=700, retention_ms=-1)
    _fill(log, 20)
    assert log.apply_retention(NOW + 10**12) > 0
    assert 700 <= log.size_bytes < 700 + 300
    assert sum(p.stat().st_size for p in segment_files(tmp_path)) == log.size_bytes
    assert log.log_start_offset == log.segment_base_offsets[0] > 0
    crash(log)
    assert open_log(tmp_path).log_start_offset == log.segment_base_offsets[0]


def test_delete_records(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    _fill(log, 12)
    bases = log.segment_base_offsets
    assert log.delete_records(bases[2] + 1) == bases[2] + 1
    assert log.segment_base_offsets == bases[2:]
    with pytest.raises(KafkaError) as err:
        log.read(bases[2], 100)
    assert err.value.error == Errors.OFFSET_OUT_OF_RANGE
    assert headers(log.read(bases[2] + 1, 1).data)[0].base_offset == bases[2]  # batch straddles the start
    assert log.delete_records(5) == bases[2] + 1  # never backwards
    with pytest.raises(KafkaError) as err:
        log.delete_records(log.log_end_offset + 1)
    assert err.value.error == Errors.OFFSET_OUT_OF_RANGE
    assert log.delete_records(-1) == log.log_end_offset == 24
    assert log.read(24, 100).data == b""
    log.close()
    log = open_log(tmp_path, segment_bytes=300)
    assert log.log_start_offset == 24 and len(log.segment_base_offsets) == 1
    assert log.append(make_batch(1), NOW).base_offset == 24


def test_retention_without_timestamps_falls_back_to_file_times(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=200, retention_ms=60_000)
    for _ in range(4):
        log.append(make_batch(1, value_size=60, ts=-1), NOW)
    assert len(log.segment_base_offsets) == 4
    mtime_ms = segment_files(tmp_path)[0].stat().st_mtime_ns // 1_000_000
    assert log.apply_retention(mtime_ms + 1_000) == 0
    assert log.apply_retention(mtime_ms + 61_000) == 3


def test_overlapping_segment_is_dropped(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    _fill(log, 2)
    everything = read_all(log)
    log.close()
    first = segment_files(tmp_path)[0]
    (tmp_path / "00000000000000000001.log").write_bytes(first.read_bytes())
    log = open_log(tmp_path, segment_bytes=300)
    assert read_all(log) == everything and log.segment_base_offsets == [0]
