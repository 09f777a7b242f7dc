"""The consumer-protocol bytes and Kafka's range assignor used by ``kproto consume --group``."""

from __future__ import annotations

import struct

from rivven_kproto.client.groups import decode_assignment
from rivven_kproto.client.membership import (
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
)


def test_subscription_round_trip_and_newer_versions() -> None:
    assert decode_subscription(encode_subscription(["a", "bé"])) == ["a", "bé"]
    # A v1 subscription (what Java and librdkafka send) appends owned partitions: still readable.
    v1 = struct.pack(">hih", 1, 1, 1) + b"t" + struct.pack(">i", -1) + struct.pack(">i", 0)
    assert decode_subscription(v1) == ["t"]
    assert decode_subscription(b"\x00") == []
    assert decode_subscription(struct.pack(">hih", 0, 1, 50) + b"short") == []


def test_assignment_bytes_are_what_the_group_tools_decode() -> None:
    partitions = [("b", 1), ("a", 2), ("a", 0)]
    data = encode_assignment(partitions)
    assert decode_assignment(data) == sorted(partitions)
    assert data.endswith(struct.pack(">i", -1))  # null user data
    assert decode_assignment(encode_assignment([])) == []


def test_range_assignor_matches_kafka() -> None:
    # Kafka's RangeAssignor: members in id order, the first (partitions % members) get one more.
    plan = range_assign({"m2": ["t"], "m1": ["t"], "m3": ["t"]}, {"t": 7})
    assert plan == {"m1": [("t", 0), ("t", 1), ("t", 2)], "m2": [("t", 3), ("t", 4)], "m3": [("t", 5), ("t", 6)]}
    # Per topic, among that topic's subscribers only; more members than partitions leaves some idle.
    plan = range_assign({"a": ["x", "y"], "b": ["y"], "c": ["y"]}, {"x": 2, "y": 2})
    assert plan == {"a": [("x", 0), ("x", 1), ("y", 0)], "b": [("y", 1)], "c": []}
    assert range_assign({"a": ["gone"]}, {}) == {"a": []}
