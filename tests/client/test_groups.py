"""Pure helpers of the groups admin: assignment decoding, topic specs and date-times."""

from __future__ import annotations

import datetime

import click
import pytest

from rivven_kproto.broker.groups.consumer_protocol import Assignment, encode_assignment
from rivven_kproto.cli.groups import parse_datetime, parse_topic_spec
from rivven_kproto.client.groups import decode_assignment


@pytest.mark.parametrize("version", [0, 1, 3, 7])
def test_assignments_decode_like_the_broker_encodes_them(version: int) -> None:
    raw = encode_assignment(Assignment(partitions=(("b", (2, 0)), ("a", (1,))), user_data=b"\x00u", version=version))
    assert decode_assignment(raw) == [("a", 1), ("b", 0), ("b", 2)]
    assert decode_assignment(encode_assignment(Assignment())) == []


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\xff\xff\x00\x00\x00\x00", b"\x00\x00\x7f\xff\xff\xff", b"\x00\x00\x00\x00\x00\x01\x00\x05ab"])
def test_bytes_that_are_not_an_assignment_decode_to_none(raw: bytes) -> None:
    assert decode_assignment(raw) is None


def test_topic_specs() -> None:
    assert parse_topic_spec("orders") == ("orders", None)
    assert parse_topic_spec("orders:2,0,2") == ("orders", [0, 2])
    for bad in ("", ":1", "orders:", "orders:x", "orders:-1"):
        with pytest.raises(click.BadParameter):
            parse_topic_spec(bad)


def test_datetimes() -> None:
    assert parse_datetime("2026-11-22T10:00:00Z") == 1795341600000
    assert parse_datetime("2026-11-22T12:00:00+02:00") == 1795341600000
    local = datetime.datetime(2026, 11, 22, 10, 0, 0).astimezone()
    assert parse_datetime("2026-11-22T10:00:00") == int(local.timestamp() * 1000)
    with pytest.raises(click.BadParameter):
        parse_datetime("yesterday")
