"""Reads of sealed segments prepared on the loop and run elsewhere give exactly the inline read."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from rivven_kproto.broker.log.native_engine import LARGE_READ_BYTES
from rivven_kproto.broker.log.span import whole_batches
from rivven_kproto.codec.enums import IsolationLevel
from rivven_kproto.codec.errors import KafkaError
from rivven_kproto.codec.records.batch import iter_headers

from .log_helpers import NOW, make_batch, open_log

UNCOMMITTED = IsolationLevel.READ_UNCOMMITTED


def filled(tmp_path: Path, batches: int = 40):  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, segment_bytes=600, index_interval_bytes=100)
    for n in range(batches):
        log.append(make_batch(1 + n % 4, 20 + n % 7), NOW)
    assert len(log.segment_base_offsets) > 4
    return log


@pytest.mark.parametrize("max_bytes", [1, 150, 700, 5000, 1 << 20])
@pytest.mark.parametrize("min_one", [True, False])
def test_a_cold_read_cut_to_any_budget_equals_the_inline_read(tmp_path: Path, max_bytes: int, min_one: bool) -> None:
    log = filled(tmp_path)
    sealed_end = log.segment_base_offsets[-1]
    for offset in range(log.log_start_offset, sealed_end):
        plan = log.plan_cold_read(offset, 1 << 20, UNCOMMITTED)
        assert plan is not None
        cold = log.fetch(offset, max_bytes, UNCOMMITTED, min_one_batch=min_one, prefetched=plan.run())
        inline = log.fetch(offset, max_bytes, UNCOMMITTED, min_one_batch=min_one)
        assert cold == inline, offset
        assert plan.files == []  # its duplicated descriptors are closed


def test_the_active_segment_and_the_end_are_read_inline(tmp_path: Path) -> None:
    log = filled(tmp_path)
    assert log.plan_cold_read(log.segment_base_offsets[-1], 1 << 20, UNCOMMITTED) is None
    assert log.plan_cold_read(log.log_end_offset, 1 << 20, UNCOMMITTED) is None
    assert log.plan_cold_read(log.log_start_offset - 1, 1 << 20, UNCOMMITTED) is None


def test_a_cold_read_survives_the_deletion_of_its_segments(tmp_path: Path) -> None:
    log = filled(tmp_path)
    plan = log.plan_cold_read(0, 1 << 20, UNCOMMITTED)
    assert plan is not None
    expected = log.read(0, 1 << 20).data
    log.delete_records(log.segment_base_offsets[-1])  # retention removes every sealed segment
    assert not [p for p in tmp_path.glob("*.log") if int(p.stem) == 0]
    ran_on: list[bool] = []

    def run() -> None:
        ran_on.append(threading.current_thread() is threading.main_thread())
        assert plan.run() == expected

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert ran_on == [False]
    # The offset is gone by now: the prefetched bytes are not used, the read says out of range.
    with pytest.raises(KafkaError, match="outside"):
        log.fetch(0, 1 << 20, UNCOMMITTED, min_one_batch=True, prefetched=expected)


def test_whole_batches_keeps_whole_batches_only() -> None:
    data = b"".join(make_batch(2, 30) for _ in range(3))
    sizes = [h.size for _, h in iter_headers(data)]
    assert whole_batches(data, 0, True) == data[: sizes[0]]
    assert whole_batches(data, 0, False) == b""
    assert whole_batches(data, sizes[0] + sizes[1], False) == data[: sizes[0] + sizes[1]]
    assert whole_batches(data, len(data) + 5, False) is data


def test_a_large_read_of_the_active_segment_goes_off_the_loop_too(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(40):
        log.append(make_batch(10, 1000), NOW)  # ~10 KB a batch, one segment
    assert len(log.segment_base_offsets) == 1 and log.size_bytes > LARGE_READ_BYTES
    assert log.plan_cold_read(0, LARGE_READ_BYTES - 1, UNCOMMITTED) is None  # a small budget: inline
    plan = log.plan_cold_read(0, 1 << 20, UNCOMMITTED)
    assert plan is not None
    log.append(make_batch(3), NOW)  # appended after planning: not in this read, never torn
    cold = log.fetch(0, 1 << 20, UNCOMMITTED, min_one_batch=True, prefetched=plan.run())
    inline = log.fetch(0, 1 << 20, UNCOMMITTED, min_one_batch=True)
    assert inline.data.startswith(cold.data) and len(cold.data) == len(inline.data) - len(make_batch(3))
    assert cold.high_watermark == inline.high_watermark
