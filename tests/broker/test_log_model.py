"""Property test: any sequence of appends, reads, restarts and crashes matches an in-memory model."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rivven_kproto.broker.log.partition import Partition
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.records.batch import parse_header
from rivven_kproto.codec.records.records import decode_batch

from .log_helpers import NOW, crash, make_batch, open_log, segment_files, with_offset

_batch = st.tuples(st.integers(1, 4), st.integers(0, 90), st.integers(0, 50))  # records, value size, ts
_ops = st.one_of(
    st.tuples(st.just("append"), st.lists(_batch, min_size=1, max_size=3)),
    st.tuples(st.just("read"), st.integers(0, 10**6), st.integers(0, 700), st.integers(-1, 10**6)),
    st.tuples(st.just("timestamp"), st.integers(0, 60)),
    st.tuples(st.just("delete_records"), st.integers(0, 10**6)),
    st.sampled_from([("restart",), ("crash",), ("flush",), ("garbage",), ("torn",), ("indexes",)]),
)


@dataclass
class Model:
    """The log as a list of stored batches (offsets assigned) plus the log start offset."""

    batches: list[bytes] = field(default_factory=list)
    start: int = 0

    @property
    def end(self) -> int:
        return parse_header(self.batches[-1]).next_offset if self.batches else 0

    def read(self, offset: int, max_bytes: int, upper: int | None) -> bytes:
        out: list[bytes] = []
        total = 0
        for batch in self.batches:
            header = parse_header(batch)
            if header.next_offset <= offset:
                continue
            if upper is not None and header.base_offset >= upper:
                break
            if total + len(batch) > max_bytes:
                if not out:
                    out.append(batch)
                break
            out.append(batch)
            total += len(batch)
        return b"".join(out)

    def _records(self) -> list[tuple[int, int]]:
        return [(o, ts) for batch in self.batches for o, ts, _ in decode_batch(batch, verify_crc=False).iter_absolute()]

    def for_timestamp(self, ts: int) -> tuple[int, int] | None:
        return next(((o, t) for o, t in self._records() if o >= self.start and t >= ts), None)

    def max_timestamp(self) -> tuple[int, int] | None:
        records = self._records()
        if not records:
            return None
        top = max(t for _, t in records)
        return next((o, t) for o, t in records if t == top and o >= self.start) if any(
            o >= self.start and t == top for o, t in records
        ) else (max(self.start, next(o for o, t in records if t == top)), top)


def _check_read(log: Partition, model: Model, offset: int, max_bytes: int, upper: int | None) -> None:
    if offset < model.start or offset > model.end:
        try:
            log.read(offset, max_bytes, upper_bound=upper)
        except KafkaError as exc:
            assert exc.error == Errors.OFFSET_OUT_OF_RANGE
            return
        raise AssertionError("read out of range did not fail")
    past_bound = upper is not None and offset >= upper
    expected = b"" if offset == model.end or past_bound else model.read(offset, max_bytes, upper)
    assert log.read(offset, max_bytes, upper_bound=upper).data == expected


def _damage(path: Path, op: str, model: Model) -> None:
    active = segment_files(path)[-1]
    if op == "indexes":
        for index in segment_files(path, ".index") + segment_files(path, ".timeindex"):
            index.write_bytes(os.urandom(index.stat().st_size + 3))
    elif op == "garbage":
        with active.open("ab") as f:
            f.write(os.urandom(37))
    elif op == "torn" and active.stat().st_size and model.batches:
        os.truncate(active, active.stat().st_size - 1 - len(model.batches[-1]) // 2)
        model.batches.pop()


def _run(path: Path, cfg: dict[str, int], ops: list[tuple]) -> None:
    log = open_log(path, **cfg)
    model = Model()
    clock = 0
    for op in ops:
        clock += 1
        if op[0] == "append":
            data = b"".join(make_batch(n, size, ts=NOW + ts) for n, size, ts in op[1])
            if len(data) > cfg["segment_bytes"]:
                try:
                    log.append(data, NOW + clock)
                except KafkaError as exc:
                    assert exc.error == Errors.RECORD_LIST_TOO_LARGE
                    continue
                raise AssertionError("an append larger than a segment was accepted")
            info = log.append(data, NOW + clock)
            assert info.base_offset == model.end
            pos = 0
            offset = model.end
            while pos < len(data):
                header = parse_header(data, pos)
                model.batches.append(with_offset(data[pos : pos + header.size], offset))
                offset += header.last_offset_delta + 1
                pos += header.size
        elif op[0] == "read":
            offset = op[1] % (model.end + 2) if op[1] % 5 else model.start
            upper = None if op[3] < 0 else op[3] % (model.end + 1)
            _check_read(log, model, offset, op[2], upper)
        elif op[0] == "timestamp":
            assert log.offset_for_timestamp(NOW + op[1]) == model.for_timestamp(NOW + op[1])
        elif op[0] == "delete_records":
            target = op[1] % (model.end + 1)
            model.start = max(model.start, target)
            assert log.delete_records(target) == model.start
        elif op[0] == "flush":
            log.flush(NOW + clock)
            assert log.unflushed_messages == 0
        elif op[0] == "restart":
            log.close()
            log = open_log(path, **cfg)
        else:
            crash(log)
            _damage(path, op[0], model)
            model.start = min(model.start, model.end)
            log = open_log(path, **cfg)
        assert (log.log_start_offset, log.log_end_offset) == (model.start, model.end)
    assert log.read(model.start, 1 << 30).data == model.read(model.start, 1 << 30, None)
    if model.start == 0:
        assert log.max_timestamp_offset() == model.max_timestamp()
    log.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    segment_bytes=st.integers(200, 1200),
    index_interval_bytes=st.integers(0, 300),
    ops=st.lists(_ops, max_size=30),
)
def test_log_matches_model(segment_bytes: int, index_interval_bytes: int, ops: list[tuple]) -> None:
    directory = Path(tempfile.mkdtemp(prefix="kproto-log-"))
    try:
        _run(
            directory / "p",
            {"segment_bytes": segment_bytes, "index_interval_bytes": index_interval_bytes},
            ops,
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
