"""The fuzz harness's short run (the long one is documented in README): zero findings, and it bites."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from rivven_kproto.codec.records.records import Record, encode_record
from tools.fuzz.__main__ import run_random
from tools.fuzz.targets import TARGETS, Finding, batch_target, kio_record_timestamps

SHORT_RUN_INPUTS = 5_000


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_short_random_run_finds_nothing(target: str, tmp_path: Path) -> None:
    assert run_random(target, SHORT_RUN_INPUTS, seed=15, artifacts=tmp_path) == 0
    assert not list(tmp_path.iterdir())


def test_the_independent_reader_refuses_what_kafka_refuses() -> None:
    good = b"".join(encode_record(Record(offset_delta=i, timestamp_delta=i, key=None, value=b"v")) for i in range(3))
    assert kio_record_timestamps(good, 3, 100) == [100, 101, 102]
    with pytest.raises(ValueError, match="offset delta"):
        kio_record_timestamps(good[: len(good) // 3] * 3, 3, 100)  # three records with offset delta 0
    with pytest.raises(ValueError, match="bytes after the last record"):
        kio_record_timestamps(good, 2, 100)


def test_an_accepted_invalid_batch_would_be_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """With record validation switched off, the batch target reports the bad batch it then accepts."""
    import tools.fuzz.targets as targets

    monkeypatch.setattr(targets, "validate_records", lambda data, batches, config: _NoCheck())
    three_records = b"".join(encode_record(Record(offset_delta=i, timestamp_delta=0, key=None, value=b"v")) for i in range(3))
    with pytest.raises(Finding):
        batch_target(struct.pack(">Bii", 0, 1, 0) + three_records)  # three records declared as one


class _NoCheck:
    max_timestamps = (-1,)
