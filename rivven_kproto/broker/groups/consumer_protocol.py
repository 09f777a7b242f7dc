"""The consumer protocol's embedded bytes: ConsumerProtocolSubscription / ConsumerProtocolAssignment.

Consumers put a subscription in JoinGroup's protocol metadata and the leader's assignments in
SyncGroup; the coordinator treats both as opaque bytes, except that OffsetDelete must know which
topics a Stable group is subscribed to. Layout (big-endian, no tagged fields, versions 0-3)::

    Subscription: version:int16 topics:[string] user_data:nullable bytes
                  v1+: owned_partitions:[topic:string partitions:[int32]]
                  v2+: generation_id:int32   v3+: rack_id:nullable string
    Assignment:   version:int16 assigned_partitions:[topic:string partitions:[int32]]
                  user_data:nullable bytes

A newer version is parsed with the newest layout we know and the rest ignored, as Kafka does (new
versions only append fields). Every length is checked against the bytes left before anything is
allocated; bad input raises :class:`ConsumerProtocolError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

PROTOCOL_TYPE = "consumer"
MAX_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(ValueError):
    """Bytes that are not a consumer-protocol subscription or assignment."""


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 0


@dataclass(frozen=True)
class Assignment:
    partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    user_data: bytes | None = None
    version: int = 0


@dataclass
class _Reader:
    data: bytes
    pos: int = 0
    _size: int = field(init=False)

    def __post_init__(self) -> None:
        self._size = len(self.data)

    def take(self, count: int) -> bytes:
        if count < 0 or self.pos + count > self._size:
            raise ConsumerProtocolError(f"needs {count} bytes at {self.pos}, only {self._size - self.pos} left")
        chunk = self.data[self.pos : self.pos + count]
        self.pos += count
        return chunk

    def int16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def string(self, nullable: bool = False) -> str | None:
        length = self.int16()
        if length == -1 and nullable:
            return None
        try:
            return self.take(length).decode()
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError(f"string is not UTF-8: {exc}") from None

    def bytes_(self) -> bytes | None:
        length = self.int32()
        return None if length == -1 else self.take(length)

    def count(self, item_size: int) -> int:
        """An array length, bounded by what the remaining bytes could hold."""
        length = self.int32()
        if length < 0 or length * item_size > self._size - self.pos:
            raise ConsumerProtocolError(f"array of {length} does not fit in the remaining bytes")
        return length

    def topic_partitions(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        out = []
        for _ in range(self.count(6)):
            topic = self.string() or ""
            out.append((topic, tuple(self.int32() for _ in range(self.count(4)))))
        return tuple(out)


def decode_subscription(data: bytes) -> Subscription:
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise ConsumerProtocolError(f"negative subscription version {version}")
    topics = tuple(reader.string() or "" for _ in range(reader.count(2)))
    user_data = reader.bytes_()
    owned: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id, rack_id = -1, None
    if version >= 1:
        owned = reader.topic_partitions()
    if version >= 2:
        generation_id = reader.int32()
    if version >= 3:
        rack_id = reader.string(nullable=True)
    return Subscription(topics, user_data, owned, generation_id, rack_id, version)


def subscription_topics(data: bytes) -> tuple[str, ...]:
    """Only the v0 prefix (version, topics), as Kafka reads it: every later version extends it."""
    reader = _Reader(data)
    if reader.int16() < 0:
        raise ConsumerProtocolError("negative subscription version")
    return tuple(reader.string() or "" for _ in range(reader.count(2)))


def decode_assignment(data: bytes) -> Assignment:
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise ConsumerProtocolError(f"negative assignment version {version}")
    partitions = reader.topic_partitions()
    return Assignment(partitions, reader.bytes_(), version)


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def _bytes(value: bytes | None) -> bytes:
    return _I32.pack(-1) if value is None else _I32.pack(len(value)) + value


def _topic_partitions(items: tuple[tuple[str, tuple[int, ...]], ...]) -> bytes:
    out = [_I32.pack(len(items))]
    for topic, partitions in items:
        out += [_string(topic), _I32.pack(len(partitions)), *(_I32.pack(p) for p in partitions)]
    return b"".join(out)


def encode_subscription(subscription: Subscription) -> bytes:
    """The bytes a consumer would send (used by tests and tools; the broker only decodes)."""
    version = subscription.version
    out = [_I16.pack(version), _I32.pack(len(subscription.topics))]
    out += [_string(topic) for topic in subscription.topics]
    out.append(_bytes(subscription.user_data))
    if version >= 1:
        out.append(_topic_partitions(subscription.owned_partitions))
    if version >= 2:
        out.append(_I32.pack(subscription.generation_id))
    if version >= 3:
        out.append(_string(subscription.rack_id))
    return b"".join(out)


def encode_assignment(assignment: Assignment) -> bytes:
    return b"".join(
        [_I16.pack(assignment.version), _topic_partitions(assignment.partitions), _bytes(assignment.user_data)]
    )
