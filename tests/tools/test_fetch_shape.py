"""tools.bench.fetch_shape's reading of a Fetch response's record set: whole batches counted, a
partial batch at the end (as Kafka may send one) left out."""

from __future__ import annotations

from rivven_kproto.codec.records.records import Record, build_batch
from tools.bench.fetch_shape import batches


def batch(base_offset: int, count: int) -> bytes:
    return build_batch([Record(i, 0, None, b"v" * 10) for i in range(count)], base_offset=base_offset,
                       base_timestamp=1)


def test_whole_batches_are_counted_with_their_records() -> None:
    first, second = batch(0, 3), batch(3, 5)
    assert batches(first + second) == [(len(first), 3), (len(second), 5)]


def test_a_partial_batch_at_the_end_is_not_counted() -> None:
    first, second = batch(0, 3), batch(3, 5)
    assert batches(first + second[:-1]) == [(len(first), 3)]
    assert batches(first[:40]) == []
