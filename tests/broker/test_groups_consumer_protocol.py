"""The pure decoder of ConsumerProtocolSubscription/Assignment v0-3 (and newer, by prefix)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rivven_kproto.broker.groups.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscription_topics,
)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trip_every_version(version: int) -> None:
    sub = Subscription(
        topics=("a", "bé"),
        user_data=b"\x00\x01" if version != 2 else None,
        owned_partitions=(("a", (0, 3)),) if version >= 1 else (),
        generation_id=7 if version >= 2 else -1,
        rack_id="r1" if version >= 3 else None,
        version=version,
    )
    data = encode_subscription(sub)
    assert decode_subscription(data) == sub
    assert subscription_topics(data) == ("a", "bé")


def test_known_bytes_of_a_v0_subscription() -> None:
    # version 0, topics ["t"], user_data null: what every Kafka consumer has sent since 0.9
    data = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    assert decode_subscription(data) == Subscription(("t",))


def test_newer_version_is_read_by_its_known_prefix() -> None:
    v3 = encode_subscription(Subscription(("x",), None, (), 1, "rack", version=3))
    v9 = struct.pack(">h", 9) + v3[2:] + b"future fields"
    decoded = decode_subscription(v9)
    assert decoded.topics == ("x",) and decoded.rack_id == "rack" and decoded.version == 9


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\xff\xff",  # negative version
        b"\x00\x00\x7f\xff\xff\xff",  # two billion topics in no bytes
        b"\x00\x00\x00\x00\x00\x01\x00\x05ab",  # a topic name longer than the data
        b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe",  # not UTF-8
    ],
)
def test_bad_subscriptions_raise_our_error(data: bytes) -> None:
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(data)
    with pytest.raises(ConsumerProtocolError):
        subscription_topics(data)


def test_assignment_round_trip() -> None:
    assignment = Assignment((("t", (0, 1, 2)), ("u", ())), b"ud", version=1)
    assert decode_assignment(encode_assignment(assignment)) == assignment
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(b"\x00\x00\x00\x00\x00\x02")


@given(st.binary(max_size=64))
def test_arbitrary_bytes_only_ever_raise_our_error(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment, subscription_topics):
        try:
            decode(data)
        except ConsumerProtocolError:
            pass
