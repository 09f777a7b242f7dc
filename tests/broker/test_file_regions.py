"""Fetch reads as file regions locate exactly the batches the bytes path copies (issue #22)."""

from __future__ import annotations

import ctypes
import mmap
import os
import random
from pathlib import Path

import pytest

from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.broker.log.region import ZERO_COPY_MIN_BYTES, FileRegion, locate_span
from rivven_kproto.broker.log.span import read_span
from rivven_kproto.codec.enums import IsolationLevel

from .log_helpers import NOW, make_batch, open_log

UNCOMMITTED = IsolationLevel.READ_UNCOMMITTED


def filled(tmp_path: Path, batches: int = 120, seed: int = 22) -> Partition:
    """Batches from 100 B to ~20 KiB (some below, some above the header-only walk's threshold)
    across segments of 64 KiB."""
    rng = random.Random(seed)
    log = open_log(tmp_path, segment_bytes=64 * 1024, index_interval_bytes=4096)
    for _ in range(batches):
        log.append(make_batch(rng.randint(1, 8), rng.choice([10, 90, 700, 2500])), NOW)
    assert len(log.segment_base_offsets) > 5
    return log


def span_files(log: Partition, offset: int) -> tuple[list[tuple[int, int]], int]:
    segments = log.engine._segments  # noqa: SLF001 - the same files read_region names
    i = max(n for n, s in enumerate(segments) if s.base_offset <= offset)
    return [(s.descriptor, s.size) for s in segments[i:]], segments[i].index_position(offset)


@pytest.mark.parametrize("max_bytes", [1, 61, 3000, 40_000, 200_000, 1 << 30])
@pytest.mark.parametrize("min_one", [True, False])
def test_locating_batches_finds_what_reading_copies(tmp_path: Path, max_bytes: int, min_one: bool) -> None:
    log = filled(tmp_path)
    end = log.log_end_offset
    for offset in range(0, end, 7):
        for upper_bound in (None, offset + 3, end - 40):
            files, scan_from = span_files(log, offset)
            expected = read_span(files, scan_from, offset, max_bytes, upper_bound, min_one)
            region = locate_span(files, scan_from, offset, max_bytes, upper_bound, min_one, owned=False)
            got = b"" if region is None else region.read()
            assert got == expected, (offset, upper_bound)
            if region is not None:
                region.release()
                assert region.parts == []


@pytest.mark.parametrize("min_one", [True, False])
def test_a_fetch_with_zero_copy_returns_the_same_batches_as_a_region(tmp_path: Path, min_one: bool) -> None:
    log = filled(tmp_path)
    regions = 0
    for offset in range(0, log.log_end_offset, 5):
        for max_bytes in (500, 50_000, 300_000):
            copied = log.fetch(offset, max_bytes, UNCOMMITTED, min_one_batch=min_one)
            zero = log.fetch(offset, max_bytes, UNCOMMITTED, min_one_batch=min_one, zero_copy=True)
            assert isinstance(copied.data, bytes)
            if isinstance(zero.data, FileRegion):
                regions += 1
                assert zero.data.size >= 0
                assert zero.data.read() == copied.data
                assert (zero.high_watermark, zero.log_start_offset) == (copied.high_watermark, copied.log_start_offset)
                zero.data.release()
            else:
                assert zero == copied
    assert regions > 20  # the large reads did come back as regions


def test_small_reads_stay_bytes(tmp_path: Path) -> None:
    log = filled(tmp_path)
    small = log.fetch(0, ZERO_COPY_MIN_BYTES - 1, UNCOMMITTED, min_one_batch=True, zero_copy=True)
    assert isinstance(small.data, bytes) and small.data


@pytest.mark.parametrize("budget", [1, 9000, 70_000, 1 << 20])
def test_a_cold_region_cut_to_a_budget_equals_the_inline_read(tmp_path: Path, budget: int) -> None:
    log = filled(tmp_path)
    for offset in range(0, log.segment_base_offsets[-1], 9):
        plan = log.plan_cold_read(offset, 1 << 20, UNCOMMITTED, zero_copy=True)
        assert plan is not None
        prefetched = plan.run()
        zero = log.fetch(offset, budget, UNCOMMITTED, min_one_batch=True, prefetched=prefetched)
        inline = log.fetch(offset, budget, UNCOMMITTED, min_one_batch=True)
        got = zero.data.read() if isinstance(zero.data, FileRegion) else zero.data
        assert got == inline.data, offset
        if isinstance(zero.data, FileRegion):
            zero.data.release()
        if isinstance(prefetched, FileRegion):
            assert prefetched.parts == [] or prefetched is zero.data  # cut away or handed on, never leaked


def test_a_region_survives_the_deletion_of_its_segments(tmp_path: Path) -> None:
    log = filled(tmp_path)
    expected = log.read(0, 1 << 30).data
    region = log.read_region(0, 1 << 30, upper_bound=log.log_end_offset, min_one_batch=True)
    assert region is not None and len(region.parts) == len(log.segment_base_offsets)
    log.delete_records(log.segment_base_offsets[-1])  # the work runs inline here: files unlinked
    assert [int(p.stem) for p in tmp_path.glob("*.log")] == [log.segment_base_offsets[-1]]
    filler = [os.open(tmp_path / f"filler-{n}", os.O_RDWR | os.O_CREAT) for n in range(8)]  # reuse freed fds
    try:
        assert region.read() == expected
    finally:
        region.release()
        for fd in filler:
            os.close(fd)


def test_an_unsent_region_closes_its_descriptors_when_dropped(tmp_path: Path) -> None:
    log = filled(tmp_path)
    region = log.read_region(0, 1 << 30, upper_bound=log.log_end_offset, min_one_batch=True)
    assert region is not None
    fds = [fd for fd, _, _ in region.parts]
    del region
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def _cached(fd: int, position: int, length: int) -> bool:
    """Whether every page of these bytes is in the page cache (mincore on a private mapping: it
    reports without reading, where a probing read would start readahead itself)."""
    page = mmap.PAGESIZE
    start = position - position % page
    size = position + length - start
    mapped = mmap.mmap(fd, size, access=mmap.ACCESS_COPY, offset=start)
    try:
        anchor = ctypes.c_char.from_buffer(mapped)
        vector = (ctypes.c_ubyte * ((size + page - 1) // page))()
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.mincore(ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(size), vector) == 0
        del anchor
        return all(flag & 1 for flag in vector)
    finally:
        mapped.close()


def test_a_cold_region_is_brought_into_the_page_cache_by_the_worker(tmp_path: Path) -> None:
    """Batches of ~1 MB, so locating them reads a header page each; no readahead (RANDOM) and the
    pages dropped: only the worker's warming can have brought the rest of the region in."""
    log = open_log(tmp_path, segment_bytes=4 << 20)
    for _ in range(12):
        log.append(make_batch(8, 120_000), NOW)
    log.flush()
    for segment in log.engine._segments:  # noqa: SLF001 - the descriptors the region duplicates
        os.posix_fadvise(segment.descriptor, 0, 0, os.POSIX_FADV_RANDOM)
        os.posix_fadvise(segment.descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    first = log.engine._segments[0]  # noqa: SLF001
    if _cached(first.descriptor, 0, first.size):
        pytest.skip("this file system keeps the pages (tmpfs?): nothing to bring in")
    plan = log.plan_cold_read(0, 1 << 20, UNCOMMITTED, zero_copy=True)
    assert plan is not None
    region = plan.run()
    assert isinstance(region, FileRegion)
    assert all(_cached(fd, position, length) for fd, position, length in region.parts)
    region.release()
