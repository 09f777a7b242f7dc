"""A compressed batch is refused on what it declares before its records are walked or rebuilt,
and recompression works on bytes, not records (issue #37 item 8: a valid 1M-record batch cost
seconds of worker CPU before it was refused).

Each test builds a real compressed batch.
"""

from __future__ import annotations

import pytest

from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.log.validation import decompressed_limit, prepare_client_records
from rivven_kproto.codec.compression import Compression, compress
from rivven_kproto.codec.errors import Errors, KafkaError
from rivven_kproto.codec.records.batch import parse_header
from rivven_kproto.codec.records.records import Record, assemble_batch, decode_batch, encode_records

CONFIG = LogConfig(max_message_bytes=100_000)


def batch(codec: Compression, records: list[Record], declared: int | None = None, timestamp: int = 1_700_000_000_000) -> bytes:
    count = len(records) if declared is None else declared
    return assemble_batch(base_offset=0, partition_leader_epoch=-1, attributes=int(codec), last_offset_delta=count - 1,
                          base_timestamp=timestamp, max_timestamp=timestamp + 5, producer_id=-1, producer_epoch=-1,
                          base_sequence=-1, records_count=count,
                          payload=compress(codec, encode_records(records)))


def empty_records(count: int) -> list[Record]:
    return [Record(offset_delta=i, timestamp_delta=0, key=None, value=None) for i in range(count)]


def test_a_declared_count_no_decompressed_batch_can_hold_is_refused_before_decompressing() -> None:
    """Each record takes at least 7 bytes, so a count over limit/7 cannot fit: RECORD_TOO_LARGE
    from the header, where the walk would have decompressed first and then found too few records."""
    declared = decompressed_limit(CONFIG) // 7 + 1
    hostile = batch(Compression.ZSTD, empty_records(10), declared=declared)
    with pytest.raises(KafkaError) as refused:
        prepare_client_records(hostile, CONFIG, None)
    assert refused.value.error == Errors.MESSAGE_TOO_LARGE
    assert "records" in str(refused.value)


def test_a_recompressed_batch_over_max_message_bytes_is_refused_at_once() -> None:
    """Kafka refuses the rebuilt batch when it exceeds max.message.bytes (RecordTooLargeException)."""
    records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=b"x" * 40) for i in range(20_000)]
    compressible = batch(Compression.ZSTD, records)
    assert len(compressible) < CONFIG.max_message_bytes
    with pytest.raises(KafkaError) as refused:
        prepare_client_records(compressible, CONFIG, int(Compression.NONE))
    assert refused.value.error == Errors.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("target", [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
def test_recompression_keeps_every_record_and_header_field(target: Compression) -> None:
    records = [Record(offset_delta=i, timestamp_delta=3 * i, key=b"k%d" % i, value=b"v" * i,
                      headers=[("h", b"%d" % i)]) for i in range(50)]
    original = batch(Compression.ZSTD, records)
    check = prepare_client_records(original, CONFIG, int(target))
    before, after = decode_batch(original), decode_batch(bytes(check.data))
    assert after.records == before.records
    assert after.compression == target
    old, new = parse_header(original, 0), parse_header(check.data, 0)
    assert new._replace(attributes=old.attributes, batch_length=old.batch_length, crc=old.crc) == old
