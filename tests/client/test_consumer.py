"""Which records a consumer sees: control batches never, aborted transactions not in read_committed."""

from __future__ import annotations

from rivven_kproto.client.consumer import visible_records
from rivven_kproto.codec.records.control import ControlType, build_control_batch
from rivven_kproto.codec.records.records import Record, RecordBatch, build_batch, decode_batch


def _data(base_offset: int, count: int, producer_id: int = -1, transactional: bool = False) -> RecordBatch:
    records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=f"{base_offset + i}".encode()) for i in range(count)]
    raw = build_batch(
        records,
        base_offset=base_offset,
        base_timestamp=1000,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
    )
    return decode_batch(raw)


def _marker(base_offset: int, kind: ControlType, producer_id: int) -> RecordBatch:
    raw = build_control_batch(kind, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0, base_offset=base_offset, timestamp=1000)
    return decode_batch(raw)


LOG = [
    _data(0, 2, producer_id=1, transactional=True),  # aborted below
    _data(2, 2, producer_id=2, transactional=True),  # committed
    _data(4, 1),  # plain
    _marker(5, ControlType.ABORT, 1),
    _marker(6, ControlType.COMMIT, 2),
    _data(7, 1, producer_id=1, transactional=True),  # producer 1's next transaction
    _data(8, 1, producer_id=3),  # idempotent, not transactional
]
ABORTED = [(1, 0)]


def _offsets(batches: list[RecordBatch], aborted: list[tuple[int, int]] | None, read_committed: bool) -> list[int]:
    return [offset for offset, _, _ in visible_records(batches, aborted, read_committed)]


def test_read_uncommitted_skips_only_control_batches() -> None:
    assert _offsets(LOG, ABORTED, read_committed=False) == [0, 1, 2, 3, 4, 7, 8]


def test_read_committed_drops_aborted_ranges_until_their_marker() -> None:
    assert _offsets(LOG, ABORTED, read_committed=True) == [2, 3, 4, 7, 8]


def test_an_aborted_transaction_starts_at_its_first_offset() -> None:
    # Producer 1's batch at 0 precedes the aborted transaction starting at 7: it stays visible.
    log = [_data(0, 1, producer_id=1, transactional=True), _marker(1, ControlType.COMMIT, 1), *LOG[5:6], _marker(8, ControlType.ABORT, 1)]
    assert _offsets(log, [(1, 7)], read_committed=True) == [0]
    assert _offsets(log, None, read_committed=True) == [0, 7]


def test_timestamps_come_with_the_records() -> None:
    assert [ts for _, ts, _ in visible_records(LOG[:1], None, False)] == [1000, 1000]
