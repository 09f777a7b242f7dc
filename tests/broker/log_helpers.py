"""Shared builders for the partition-log tests: real batches, real directories, simulated crashes."""

from __future__ import annotations

from pathlib import Path

from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.native_engine import open_partition
from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.codec.records.batch import BatchHeader, iter_headers
from rivven_kproto.codec.records.records import Record, build_batch

NOW = 1_700_000_000_000


def make_batch(
    records: int = 1, value_size: int = 10, ts: int = NOW, *, epoch: int = 0, **kwargs: object
) -> bytes:
    """A RecordBatch v2 as a producer sends it (base offset 0) with ``records`` small records."""
    built = [
        Record(offset_delta=i, timestamp_delta=i, key=None, value=bytes([i % 251]) * value_size)
        for i in range(records)
    ]
    return build_batch(built, base_timestamp=ts, partition_leader_epoch=epoch, **kwargs)  # type: ignore[arg-type]


def config(**overrides: object) -> LogConfig:
    return LogConfig(**overrides)  # type: ignore[arg-type]


def open_log(path: Path, now: int = NOW, **overrides: object) -> Partition:
    return open_partition(path, config(**overrides), now)


def crash(log: Partition) -> None:
    """Drop a log the way kill -9 does: file descriptors closed, no flush, no marker."""
    for segment in log.engine._segments:
        segment.close()


def headers(data: bytes) -> list[BatchHeader]:
    found = list(iter_headers(data))
    assert sum(h.size for _, h in found) == len(data), "read returned a partial batch"
    return [h for _, h in found]


def read_all(log: Partition) -> bytes:
    return log.read(log.log_start_offset, 1 << 30).data


def with_offset(batch: bytes, offset: int) -> bytes:
    return offset.to_bytes(8, "big", signed=True) + batch[8:]


def segment_files(path: Path, suffix: str = ".log") -> list[Path]:
    return sorted(path.glob("*" + suffix))
