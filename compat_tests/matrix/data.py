"""Records the scenarios write, in a client-neutral shape, and the comparisons that make a cell pass.

Every client reads records back into :class:`Rec`; a cell passes only when what it read equals, field
by field and offset by offset, what was written (or what the log says should be visible).

A :class:`Profile` says what a client's API can express, so each dataset holds the richest records
that client can send: kcat takes one set of headers per run and text lines without timestamps,
for instance. The cell's detail line says which features it exercised.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

Header = tuple[str, bytes | None]


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None  # None: the client does not set one (or does not report it)
    offset: int | None = None

    def as_json(self) -> dict[str, Any]:
        """The JSON shape the kafkajs driver reads and writes (bytes as base64, null kept)."""
        return {
            "partition": self.partition,
            "key": b64(self.key),
            "value": b64(self.value),
            "headers": [[name, b64(value)] for name, value in self.headers],
            "timestamp": None if self.timestamp is None else str(self.timestamp),
            "offset": None if self.offset is None else str(self.offset),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Rec:
        return cls(
            partition=int(data["partition"]),
            key=unb64(data["key"]),
            value=unb64(data["value"]),
            headers=tuple((name, unb64(value)) for name, value in data.get("headers") or []),
            timestamp=None if data.get("timestamp") is None else int(data["timestamp"]),
            offset=None if data.get("offset") is None else int(data["offset"]),
        )


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


@dataclass(frozen=True)
class Profile:
    """What a client can express when producing (the consumer side reads whatever is stored)."""

    binary: bool = True  # arbitrary bytes in keys, values and header values
    timestamps: bool = True  # a CreateTime chosen per record
    record_headers: bool = True  # headers chosen per record (else one set per partition)
    empty_bytes: bool = True  # b"" distinct from null
    null_header_values: bool = True
    interleaved_header_names: bool = True  # [a, b, a] kept in that order
    null_key_and_value: bool = True  # a record with neither key nor value


def now_ms() -> int:
    return int(time.time() * 1000)


def kcat_headers(partition: int) -> tuple[Header, ...]:
    """One set of headers per partition, as test_kcat sends them (duplicate names included)."""
    from ..test_kcat import headers_for  # noqa: PLC0415 - only kcat's profile needs it

    return tuple((name, value.encode()) for name, value in headers_for(partition))


def roundtrip(profile: Profile, partitions: int = 3, per_partition: int = 8, tag: str = "") -> list[Rec]:
    """Compressible values, some null keys and values, headers: the codec rows' data."""
    base_ts = now_ms() - 60_000
    records = []
    for p in range(partitions):
        for i in range(per_partition):
            key = None if i == 2 else f"key-{tag}{p}-{i}".encode()
            value = None if i == 5 else (f"value-{tag}{p}-{i} " * (8 + i)).encode()
            if profile.record_headers:
                headers: tuple[Header, ...] = (
                    () if i == 0 else (("h", f"v{i}".encode()), ("n", str(p).encode()))
                )
            else:
                headers = kcat_headers(p)
            ts = base_ts + p * 1000 + i if profile.timestamps else None
            records.append(Rec(p, key, value, headers, ts))
    return records


def tricky(profile: Profile) -> tuple[list[Rec], list[str]]:
    """Null and empty keys/values and awkward headers on partition 0; and what was exercised."""
    base_ts = now_ms() - 30_000
    exercised = ["null key", "null value"]
    empty = b"" if profile.empty_bytes else b"e"
    rows: list[tuple[bytes | None, bytes | None]] = [
        (None, b"null-key"),
        (b"null-value", None),
        (None, None) if profile.null_key_and_value else (b"both", b"set"),
        (empty, empty),
        (b"k", b"v"),
    ]
    if profile.null_key_and_value:
        exercised.append("null key and value")
    if profile.empty_bytes:
        exercised.append("empty key and value")
    headers: list[tuple[Header, ...]]
    if profile.record_headers:
        binary = bytes(range(256)) if profile.binary else b"\xc3\xa9t\xc3\xa9"
        dup: tuple[Header, ...] = (
            (("dup", b"1"), ("x", b"y"), ("dup", b"2"))
            if profile.interleaved_header_names
            else (("dup", b"1"), ("dup", b"2"), ("x", b"y"))
        )
        headers = [
            (),
            (("empty", b""),),
            dup,
            (("ключ", "значение".encode()), ("bin", binary)),
            (("nullval", None), ("h", b"")) if profile.null_header_values else (("h", b""),),
        ]
        exercised += [
            "no headers",
            "empty header value",
            "duplicate header names",
            "unicode name, binary value",
        ]
        if profile.null_header_values:
            exercised.append("null header value")
    else:
        headers = [kcat_headers(0)] * len(rows)
        exercised.append("duplicate header names (one header set per run)")
    records = [
        Rec(0, key, value, hdrs, base_ts + i if profile.timestamps else None)
        for i, ((key, value), hdrs) in enumerate(zip(rows, headers, strict=True))
    ]
    return records, exercised


def simple(count: int, partition: int = 0, prefix: str = "r") -> list[Rec]:
    return [Rec(partition, f"{prefix}-k{i}".encode(), f"{prefix}-v{i}".encode()) for i in range(count)]


def by_partition(records: Iterable[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for record in records:
        out.setdefault(record.partition, []).append(record)
    return out


def summary(record: Rec) -> str:
    return f"p{record.partition}@{record.offset} key={record.key!r:.40} value={record.value!r:.40}"


def assert_same(
    got: list[Rec],
    expected: list[Rec],
    *,
    offsets: dict[int, list[int]] | None = None,
    check_timestamps: bool = True,
) -> None:
    """``got`` holds exactly ``expected``: per partition, in order, every field equal.

    Offsets are those given per partition, or contiguous from 0 (a fresh topic, plain records).
    """
    got_parts, want_parts = by_partition(got), by_partition(expected)
    counts = {p: len(r) for p, r in got_parts.items()}
    wanted = {p: len(r) for p, r in want_parts.items()}
    if counts != wanted:
        raise AssertionError(f"records per partition: got {counts}, expected {wanted}")
    for partition, want in want_parts.items():
        have = got_parts[partition]
        want_offsets = (offsets or {}).get(partition, list(range(len(want))))
        have_offsets = [r.offset for r in have]
        if have_offsets != want_offsets:
            raise AssertionError(
                f"partition {partition} offsets: got {have_offsets}, expected {want_offsets}"
            )
        for have_rec, want_rec in zip(have, want, strict=True):
            checks = {
                "key": (have_rec.key, want_rec.key),
                "value": (have_rec.value, want_rec.value),
                "headers": (list(have_rec.headers), list(want_rec.headers)),
            }
            if check_timestamps and want_rec.timestamp is not None:
                checks["timestamp"] = (have_rec.timestamp, want_rec.timestamp)
            for what, (h, w) in checks.items():
                if h != w:
                    raise AssertionError(f"{summary(have_rec)}: {what} {h!r:.120} != expected {w!r:.120}")


def values(records: Iterable[Rec]) -> list[bytes | None]:
    return [r.value for r in records]


def with_offsets(records: list[Rec], offsets: list[int]) -> list[Rec]:
    return [replace(r, offset=o) for r, o in zip(records, offsets, strict=True)]
