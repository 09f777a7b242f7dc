"""Partition on real files: appends, reads, rolls, restarts, validation and LogAppendTime."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.broker.log.validation import RecordValidationError
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.records.batch import TIMESTAMP_TYPE_MASK, compute_crc, crc_ok, parse_header
from rivven_kproto.codec.records.records import decode_batch

from .log_helpers import NOW, headers, make_batch, open_log, read_all, segment_files, with_offset


def test_round_trip_bytes_identical_but_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    batch = make_batch(3)
    first = log.append(batch, NOW)
    second = log.append(batch, NOW)
    assert (first.base_offset, first.last_offset, second.base_offset, second.last_offset) == (0, 2, 3, 5)
    assert first.log_append_time == -1 and first.max_timestamp == NOW + 2
    assert read_all(log) == batch + with_offset(batch, 3)
    log.close()


def test_producer_epoch_minus_one_is_patched_to_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    batch = make_batch(2, epoch=-1)
    log.append(batch, NOW)
    data = read_all(log)
    assert parse_header(data).partition_leader_epoch == 0
    assert data[16:] == batch[16:] and crc_ok(data, 0, parse_header(data))


def test_offsets_contiguous_over_many_appends(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2000, index_interval_bytes=100)
    expected = 0
    for i in range(40):
        info = log.append(make_batch(1 + i % 7, value_size=i * 3), NOW + i)
        assert info.base_offset == expected
        expected = info.last_offset + 1
    assert log.log_end_offset == expected
    found = headers(read_all(log))
    assert [h.base_offset for h in found] == [0] + [h.next_offset for h in found[:-1]]
    assert found[-1].next_offset == expected
    assert len(log.segment_base_offsets) > 1


def test_read_in_the_middle_of_a_batch_starts_at_the_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch(5), NOW)
    log.append(make_batch(5), NOW)
    assert [h.base_offset for h in headers(log.read(2, 1 << 20).data)] == [0, 5]
    assert [h.base_offset for h in headers(log.read(7, 1 << 20).data)] == [5]


def test_first_batch_larger_than_max_bytes_is_returned_whole(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    big = make_batch(4, value_size=500)
    log.append(big, NOW)
    log.append(make_batch(1), NOW)
    result = log.read(0, 100)
    assert result.data == big
    assert log.read(0, 100, min_one_batch=False).data == b""
    assert headers(log.read(0, len(big) + 10).data)[-1].base_offset == 0


def test_max_bytes_limits_whole_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    batch = make_batch(1, value_size=50)
    for _ in range(5):
        log.append(batch, NOW)
    assert len(headers(log.read(0, 3 * len(batch) + 5).data)) == 3
    assert len(headers(log.read(0, 3 * len(batch)).data)) == 3


def test_upper_bound_is_respected(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(4):
        log.append(make_batch(2), NOW)
    assert [h.base_offset for h in headers(log.read(0, 1 << 20, upper_bound=4).data)] == [0, 2]
    assert [h.base_offset for h in headers(log.read(0, 1 << 20, upper_bound=5).data)] == [0, 2, 4]
    assert log.read(6, 1 << 20, upper_bound=6).data == b""
    assert log.read(0, 1 << 20, upper_bound=0).data == b""


def test_offsets_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch(2), NOW)
    assert log.read(2, 100).data == b""
    with pytest.raises(KafkaError) as err:
        log.read(3, 100)
    assert err.value.error == Errors.OFFSET_OUT_OF_RANGE
    with pytest.raises(KafkaError):
        log.read(-1, 100)


def test_roll_by_bytes_and_lookup_after_roll_and_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1000, index_interval_bytes=150)
    for i in range(30):
        log.append(make_batch(1 + i % 3, value_size=40), NOW + i)
    bases = log.segment_base_offsets
    assert len(bases) > 3 and len(segment_files(tmp_path)) == len(bases)
    assert all(p.stat().st_size <= 1000 for p in segment_files(tmp_path))
    assert not segment_files(tmp_path, ".index")  # indexes are in memory until a flush writes them
    log.flush()
    assert any(p.stat().st_size > 0 for p in segment_files(tmp_path, ".index"))

    def check_lookups(log: Partition) -> None:
        for offset in range(log.log_end_offset):
            first = headers(log.read(offset, 1).data)[0]
            assert first.base_offset <= offset < first.next_offset

    check_lookups(log)
    end, everything = log.log_end_offset, read_all(log)
    log.close()
    log = open_log(tmp_path, segment_bytes=1000, index_interval_bytes=150)
    assert (log.log_end_offset, log.segment_base_offsets, read_all(log)) == (end, bases, everything)
    check_lookups(log)
    assert log.append(make_batch(1), NOW).base_offset == end


def test_roll_by_time_uses_batch_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=1000)
    log.append(make_batch(1, ts=NOW), NOW)
    log.append(make_batch(1, ts=NOW + 1000), NOW + 1000)
    assert log.segment_base_offsets == [0]
    log.append(make_batch(1, ts=NOW + 1001), NOW + 1001)
    assert log.segment_base_offsets == [0, 2]


def test_roll_by_time_with_log_append_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=500, message_timestamp_type="LogAppendTime")
    log.append(make_batch(1, ts=0), NOW)
    log.append(make_batch(1, ts=0), NOW + 400)
    log.append(make_batch(1, ts=0), NOW + 501)
    assert log.segment_base_offsets == [0, 2]


def test_restart_keeps_everything(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=10)
    for i in range(10):
        log.append(make_batch(i + 1), NOW + i)
    log.flush(NOW)
    before = read_all(log), log.log_end_offset, log.max_timestamp_offset(), log.offset_for_timestamp(NOW + 5)
    log.close()
    assert (tmp_path / "clean-shutdown").exists()
    log = open_log(tmp_path, index_interval_bytes=10)
    assert not (tmp_path / "clean-shutdown").exists()
    after = read_all(log), log.log_end_offset, log.max_timestamp_offset(), log.offset_for_timestamp(NOW + 5)
    assert after == before
    assert log.recovery_point == log.log_end_offset


def _with_records_count(batch: bytes, count: int) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(">i", buf, 57, count)
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    return bytes(buf)


def _with_magic(batch: bytes, magic: int) -> bytes:
    return batch[:16] + bytes([magic]) + batch[17:]


def _bad_crc(batch: bytes) -> bytes:
    return batch[:-1] + bytes([batch[-1] ^ 0xFF])


@pytest.mark.parametrize(
    ("mangle", "error"),
    [
        (_bad_crc, Errors.CORRUPT_MESSAGE),
        (lambda b: _with_magic(b, 1), Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT),
        (lambda b: _with_magic(b, 0), Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT),
        (lambda b: _with_magic(b, 3), Errors.CORRUPT_MESSAGE),
        (lambda b: _with_records_count(b, 2), Errors.INVALID_RECORD),
        (lambda b: b[:-5], Errors.CORRUPT_MESSAGE),
        (lambda b: b[:40], Errors.CORRUPT_MESSAGE),
        (lambda b: b"", Errors.INVALID_RECORD),
        (lambda b: b + make_batch(1, value_size=2000), Errors.MESSAGE_TOO_LARGE),
        (lambda b: b + _bad_crc(b), Errors.CORRUPT_MESSAGE),
        (lambda b: make_batch(1, is_control=True), Errors.INVALID_RECORD),
    ],
)
def test_invalid_appends_write_nothing(tmp_path: Path, mangle: object, error: Errors) -> None:
    assert callable(mangle)
    log = open_log(tmp_path, max_message_bytes=1000)
    good = make_batch(3)
    log.append(good, NOW)
    with pytest.raises(KafkaError) as err:
        log.append(mangle(good), NOW)
    assert err.value.error == error
    assert log.log_end_offset == 3 and log.size_bytes == len(good)
    assert segment_files(tmp_path)[0].stat().st_size == len(good)
    assert log.append(good, NOW).base_offset == 3


def test_append_larger_than_segment_is_rejected(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=100)
    with pytest.raises(KafkaError) as err:
        log.append(make_batch(1, value_size=200), NOW)
    assert err.value.error == Errors.RECORD_LIST_TOO_LARGE


def test_log_append_time_rewrites_timestamps_with_valid_crc(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    batch = make_batch(3, ts=5)
    info = log.append(batch, NOW)
    assert info.log_append_time == NOW and info.max_timestamp == NOW
    data = read_all(log)
    header = parse_header(data)
    assert header.max_timestamp == NOW and header.attributes & TIMESTAMP_TYPE_MASK
    assert crc_ok(data, 0, header)
    decoded = decode_batch(data)
    assert decoded.max_timestamp == NOW and [r.value for r in decoded.records] == [
        bytes([i]) * 10 for i in range(3)
    ]


def test_producer_set_log_append_time_bit_is_invalid_timestamp(tmp_path: Path) -> None:
    """Kafka's LogValidator: "Producer should not set timestamp type to LogAppendTime"."""
    log = open_log(tmp_path)
    with pytest.raises(RecordValidationError) as raised:
        log.append(make_batch(2, ts=NOW, timestamp_type=1), NOW + 50)
    assert raised.value.error == Errors.INVALID_TIMESTAMP
    assert [index for index, _ in raised.value.record_errors] == [0, 1]
    assert log.log_end_offset == 0


def test_batch_max_timestamp_is_the_records_own(tmp_path: Path) -> None:
    """A producer's header max timestamp is not trusted: Kafka writes the records' largest."""
    log = open_log(tmp_path)
    data = bytearray(make_batch(3, ts=NOW))
    struct.pack_into(">q", data, 35, NOW + 10**9)
    struct.pack_into(">I", data, 17, compute_crc(data, 0, len(data)))
    log.append(bytes(data), NOW)
    header = parse_header(read_all(log))
    assert header.max_timestamp == NOW + 2 and crc_ok(read_all(log), 0, header)


def test_append_keeping_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch(2, base_offset=10), NOW, assign_offsets=False)
    assert log.log_end_offset == 12
    with pytest.raises(KafkaError):
        log.append(make_batch(1, base_offset=11), NOW, assign_offsets=False)
    assert headers(log.read(0, 1 << 20).data)[0].base_offset == 10


def test_timestamp_lookups(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400, index_interval_bytes=50)
    for i in range(20):
        log.append(make_batch(2, ts=NOW + 10 * i), NOW)
    # record-exact, as Kafka: batch i holds offsets 2i, 2i+1 stamped NOW+10i, NOW+10i+1
    assert log.offset_for_timestamp(0) == (0, NOW)
    assert log.offset_for_timestamp(NOW + 55) == (12, NOW + 60)
    assert log.offset_for_timestamp(NOW + 61) == (13, NOW + 61)
    assert log.offset_for_timestamp(NOW + 10_000) is None
    assert log.max_timestamp_offset() == (39, NOW + 191)


def test_flush_moves_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=200)
    for _ in range(5):
        log.append(make_batch(2), NOW)
    assert log.unflushed_messages == 10
    log.flush(NOW + 7)
    assert (log.unflushed_messages, log.recovery_point, log.last_flush_ms) == (0, 10, NOW + 7)
    assert (tmp_path / "recovery-point").read_text() == "0\n10\n"


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    for _ in range(10):
        log.append(make_batch(2, value_size=30), NOW)
    log.flush()
    log.engine.truncate_to(9)  # mid-batch: the batch [8, 9] goes whole
    assert log.log_end_offset == 8 and log.recovery_point == 8
    assert headers(read_all(log))[-1].next_offset == 8
    assert log.append(make_batch(1), NOW).base_offset == 8
    log.close()
    log = open_log(tmp_path, segment_bytes=300)
    assert log.log_end_offset == 9
    log.engine.truncate_to(0)
    assert (log.log_end_offset, read_all(log), log.segment_base_offsets) == (0, b"", [0])


def test_delete_removes_the_directory(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-3")
    log.append(make_batch(), NOW)
    log.delete()
    assert not (tmp_path / "t-3").exists()


def test_config_from_topic_config() -> None:
    cfg = LogConfig.from_topic_config(
        {"segment.bytes": " 1024 ", "retention.ms": "-1", "flush.messages": str((1 << 63) - 1), "x.y": "z"}
    )
    assert (cfg.segment_bytes, cfg.retention_ms, cfg.flush_messages) == (1024, -1, None)
    assert LogConfig.from_topic_config({"message.timestamp.type": "LogAppendTime"}).log_append_time
    for bad in (
        {"segment.bytes": "abc"},
        {"segment.bytes": "5"},
        {"segment.bytes": str(1 << 31)},
        {"retention.ms": "-2"},
        {"message.timestamp.type": "Now"},
        {"flush.messages": "0"},
    ):
        with pytest.raises(KafkaError) as err:
            LogConfig.from_topic_config(bad)
        assert err.value.error == Errors.INVALID_CONFIG


def test_offsets_beyond_an_int32_of_the_segment_roll(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch(1), NOW, assign_offsets=False)
    far = (1 << 31) + 5
    log.append(make_batch(1, base_offset=far), NOW, assign_offsets=False)
    assert log.segment_base_offsets == [0, far]
    assert headers(log.read(1, 1 << 20).data)[0].base_offset == far  # offset 1 falls in the gap


def test_roll_by_time_without_timestamps_uses_the_clock_argument(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=100)
    log.append(make_batch(1, ts=-1), NOW)
    log.append(make_batch(1, ts=-1), NOW + 100)
    log.append(make_batch(1, ts=-1), NOW + 101)
    assert log.segment_base_offsets == [0, 2]
