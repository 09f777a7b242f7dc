"""The Spark source's bulk Arrow decoder against the codec's record-by-record decoder.

No Spark here (only pyarrow): the vectorised decoder must give exactly the reference decoder's
rows for every codec, null keys/values, headers, LogAppendTime, offset windows, transaction
filtering and partial trailing batches, and on corrupted records it must fail the way the
reference decoder fails (RecordFormatError), never with anything else.
"""

from __future__ import annotations

import random
import struct

import crc32c
import pytest

from rivven_kproto.codec.compression import CompressionError  # noqa: E402
from rivven_kproto.codec.records.control import ControlType, build_control_batch  # noqa: E402
from rivven_kproto.codec.records.records import Record, RecordFormatError, build_batch  # noqa: E402
from rivven_kproto.spark.decode import (  # noqa: E402
    decode_fast,
    decode_reference,
    decode_rows,
    kafka_arrow_schema,
    select_batches,
)


def random_log(rng: random.Random) -> tuple[bytes, list[tuple[int, int]], int]:
    """Batches of several producers and codecs, markers, and the aborted list a broker would send."""
    out = b""
    offset = 0
    aborted = []
    for _ in range(rng.randrange(1, 8)):
        producer = rng.choice([-1, 7, 8])
        if producer >= 0 and rng.random() < 0.15:
            kind = rng.choice([ControlType.ABORT, ControlType.COMMIT])
            out += build_control_batch(kind, producer_id=producer, producer_epoch=0, coordinator_epoch=0,
                                       base_offset=offset, timestamp=1_000)
            offset += 1
            continue
        count = rng.randrange(1, 40)
        records = [
            Record(
                offset_delta=i,
                timestamp_delta=rng.randrange(-5, 20_000),
                key=None if rng.random() < 0.3 else rng.randbytes(rng.randrange(0, 200)),
                value=None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 5, 100, 300, 20_000])),
                headers=[] if rng.random() < 0.5 else [
                    (f"h{j}", None if rng.random() < 0.2 else rng.randbytes(j)) for j in range(rng.randrange(1, 3))
                ],
            )
            for i in range(count)
        ]
        out += build_batch(
            records,
            base_offset=offset,
            compression=rng.choice([0, 1, 2, 3, 4]),
            base_timestamp=1_700_000_000_000,
            producer_id=producer,
            producer_epoch=0 if producer >= 0 else -1,
            is_transactional=producer >= 0 and rng.random() < 0.8,
            timestamp_type=1 if rng.random() < 0.2 else 0,
        )
        if producer >= 0 and rng.random() < 0.3:
            aborted.append((producer, offset))
        offset += count
    return out, aborted, offset


@pytest.mark.parametrize("seed", range(12))
def test_fast_decoder_equals_reference(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(15):
        log, aborted, end_offset = random_log(rng)
        if rng.random() < 0.3:
            log = log[: rng.randrange(len(log))]  # Fetch may cut the last batch
        start = rng.randrange(end_offset) if rng.random() < 0.5 else 0
        end = rng.randrange(start, end_offset + 1) if rng.random() < 0.5 else end_offset
        for read_committed in (False, True):
            shown, _, _ = select_batches(log, aborted, read_committed)
            for include_headers in (False, True):
                kwargs = dict(topic="t", partition=3, start=start, end=end, include_headers=include_headers)
                fast = decode_fast(log, shown, **kwargs)
                reference = decode_reference(log, shown, **kwargs)
                if reference is None:
                    assert fast is None
                else:
                    assert fast is not None and fast.schema == kafka_arrow_schema(include_headers)
                    assert fast.equals(reference)


def test_read_committed_drops_aborted_and_markers_and_keeps_the_rest() -> None:
    def batch(offset: int, producer: int, values: list[bytes], transactional: bool = True) -> bytes:
        records = [Record(offset_delta=i, timestamp_delta=i, key=None, value=v) for i, v in enumerate(values)]
        return build_batch(records, base_offset=offset, producer_id=producer, producer_epoch=0 if producer >= 0 else -1,
                           is_transactional=transactional and producer >= 0, base_timestamp=1_000)

    def marker(offset: int, producer: int, kind: ControlType) -> bytes:
        return build_control_batch(kind, producer_id=producer, producer_epoch=0, coordinator_epoch=0,
                                   base_offset=offset, timestamp=1_000)

    log = (
        batch(0, 1, [b"a0", b"a1"])  # producer 1: aborted
        + batch(2, -1, [b"plain"])
        + batch(3, 2, [b"c0"])  # producer 2: committed
        + batch(4, 1, [b"a2"])
        + marker(5, 1, ControlType.ABORT)
        + marker(6, 2, ControlType.COMMIT)
        + batch(7, 1, [b"next"])  # producer 1 again, a later (committed) transaction
    )
    aborted = [(1, 0)]
    shown, next_offset, seen = select_batches(log, aborted, True)
    rows = decode_rows(log, shown, topic="t", partition=0, start=0, end=100, include_headers=False)
    assert rows is not None
    assert [(r["offset"], r["value"]) for r in rows.to_pylist()] == [(2, b"plain"), (3, b"c0"), (7, b"next")]
    assert (next_offset, seen) == (8, 7)
    shown, _, _ = select_batches(log, aborted, False)
    rows = decode_rows(log, shown, topic="t", partition=0, start=0, end=100, include_headers=False)
    assert rows is not None and [r["offset"] for r in rows.to_pylist()] == [0, 1, 2, 3, 4, 7]
    # A window starting inside the aborted transaction: the broker lists it (first offset 0 < 1).
    shown, _, _ = select_batches(log[log.index(batch(2, -1, [b"plain"])) :], aborted, True)
    rows = decode_rows(log[log.index(batch(2, -1, [b"plain"])) :], shown, topic="t", partition=0, start=2,
                       end=100, include_headers=False)
    assert rows is not None and [r["offset"] for r in rows.to_pylist()] == [2, 3, 7]


def _fix_crcs(buf: bytearray) -> None:
    pos = 0
    while pos + 61 <= len(buf):
        size = 12 + struct.unpack_from(">i", buf, pos + 8)[0]
        if size < 61 or pos + size > len(buf):
            return
        struct.pack_into(">I", buf, pos + 17, crc32c.crc32c(bytes(buf[pos + 21 : pos + size])))
        pos += size


def test_corrupt_records_fail_like_the_reference_decoder() -> None:
    rng = random.Random(5)
    batches = []
    for k in range(4):
        records = [
            Record(offset_delta=i, timestamp_delta=i * 7, key=None if i % 3 == 0 else b"k%d" % i,
                   value=b"v" * rng.randrange(0, 150), headers=[("a", b"b")] if i % 4 == 0 else [])
            for i in range(30)
        ]
        batches.append(build_batch(records, base_offset=k * 30))
    clean = b"".join(batches)
    outcomes = {"rows": 0, "error": 0}
    for _ in range(1500):
        buf = bytearray(clean)
        for _ in range(rng.randrange(1, 4)):
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        _fix_crcs(buf)  # get past the CRC check so that the record parsers are exercised
        data = bytes(buf)

        def run(decoder, data=data):  # noqa: ANN001, ANN202
            try:
                shown, _, _ = select_batches(data, [], False)
                return "rows", decoder(data, shown, topic="t", partition=0, start=0, end=10**9, include_headers=True)
            except (RecordFormatError, CompressionError) as exc:
                return "error", type(exc).__name__

        fast, reference = run(decode_rows), run(decode_reference)
        assert fast[0] == reference[0]
        if fast[0] == "rows" and reference[1] is not None:
            assert fast[1] is not None and fast[1].equals(reference[1])
        else:
            assert fast[1] == reference[1]
        outcomes[fast[0]] += 1
    assert outcomes["rows"] and outcomes["error"]


def test_crc_mismatch_is_reported() -> None:
    data = bytearray(build_batch([Record(offset_delta=0, timestamp_delta=0, key=None, value=b"x")]))
    data[-1] ^= 1
    with pytest.raises(RecordFormatError, match="CRC"):
        select_batches(bytes(data), [], False)


@pytest.mark.parametrize("count", [1, 3, 70])
def test_headers_few_and_many(count: int) -> None:
    records = [
        Record(offset_delta=i, timestamp_delta=0, key=b"k", value=b"v",
               headers=[(f"h{j}-é", None if j % 3 == 0 else b"x" * j) for j in range(count if i % 2 else 0)])
        for i in range(9)
    ]
    log = build_batch(records, compression=3)
    shown, _, _ = select_batches(log, [], False)
    for include_headers in (False, True):
        kwargs = dict(topic="t", partition=0, start=0, end=100, include_headers=include_headers)
        fast = decode_fast(log, shown, **kwargs)
        assert fast is not None and fast.equals(decode_reference(log, shown, **kwargs))
