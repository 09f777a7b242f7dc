"""Pure helpers of the kproto CLI: addresses, stdin lines, templates, offline segment scanning."""

from __future__ import annotations

import io

import click
import pytest

from rivven_kproto.cli.consume import check_template, format_record, record_json
from rivven_kproto.cli.output import parse_assignments
from rivven_kproto.cli.produce import parse_line, split_lines
from rivven_kproto.cli.segments import Damage, ScannedBatch, scan_segment
from rivven_kproto.client import parse_bootstrap
from rivven_kproto.client.consumer import ConsumedRecord
from rivven_kproto.codec.records.records import Record, build_batch


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap("[::1]:9093") == [("::1", 9093)]
    assert parse_bootstrap("kafka") == [("kafka", 9092)]
    for bad in ("a:x", "a:0", ":9092", "", "a:70000"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


def test_split_lines_keeps_the_incomplete_tail() -> None:
    assert split_lines(b"", b"a\nb\nc") == ([b"a", b"b"], b"c")
    assert split_lines(b"c", b"d\n") == ([b"cd"], b"")
    assert split_lines(b"", b"x") == ([], b"x")


def test_parse_line() -> None:
    assert parse_line(b"k:v:w\r", b":") == (b"k", b"v:w")
    assert parse_line(b"plain", None) == (None, b"plain")
    assert parse_line(b"", None) == (None, b"")
    with pytest.raises(ValueError):
        parse_line(b"no separator", b"::")


def test_parse_assignments() -> None:
    assert parse_assignments(("a=1", "b=x=y", "c="), "--config") == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(click.BadParameter):
        parse_assignments(("novalue",), "--config")


RECORD = ConsumedRecord("t", 1, 42, 1000, b"k", b"\xffv", [("h", b"1"), ("n", None)])


def test_templates_and_json() -> None:
    template = check_template("{partition}:{offset}\\t{key}={value} [{headers}]")
    assert format_record(template, RECORD) == "1:42\tk=\\xffv [h=1,n=null]"
    assert record_json(RECORD)["headers"] == [{"key": "h", "value": "1"}, {"key": "n", "value": None}]
    with pytest.raises(click.BadParameter, match="nope"):
        check_template("{nope}")


def _batch(base_offset: int, count: int) -> bytes:
    records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=b"v") for i in range(count)]
    return build_batch(records, base_offset=base_offset, base_timestamp=0)


def _scan(data: bytes, base_offset: int | None = 0) -> list[ScannedBatch | Damage]:
    return list(scan_segment(io.BytesIO(data), len(data), base_offset))


def test_scan_reports_every_good_batch() -> None:
    first, second = _batch(0, 3), _batch(3, 2)
    items = _scan(first + second)
    assert [(i.position, i.header.base_offset, i.problem) for i in items if isinstance(i, ScannedBatch)] == [
        (0, 0, None),
        (len(first), 3, None),
    ]


def test_scan_finds_a_flipped_byte_by_crc() -> None:
    first, second = _batch(0, 3), bytearray(_batch(3, 2))
    second[-1] ^= 0xFF
    items = _scan(first + bytes(second))
    last = items[-1]
    assert isinstance(last, ScannedBatch) and last.header.base_offset == 3
    assert last.problem is not None and last.problem.startswith("CRC mismatch")


def test_scan_stops_at_a_torn_tail() -> None:
    first, second = _batch(0, 3), _batch(3, 2)
    items = _scan(first + second[:-5])
    assert isinstance(items[-1], Damage) and items[-1].offset == 3 and "torn batch" in items[-1].problem
    items = _scan(first + second[:20])
    assert isinstance(items[-1], Damage) and items[-1].offset is None


def test_scan_checks_offset_order_and_the_segment_base() -> None:
    items = _scan(_batch(5, 2) + _batch(6, 1))
    assert isinstance(items[1], ScannedBatch) and "not above" in (items[1].problem or "")
    items = _scan(_batch(5, 1), base_offset=10)
    assert isinstance(items[0], ScannedBatch) and "below the segment's base offset" in (items[0].problem or "")
