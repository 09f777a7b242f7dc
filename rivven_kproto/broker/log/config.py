"""Per-topic settings of the native log, with Kafka's topic-config names and semantics.

Only the settings the log itself acts on live here; other topic configs (cleanup.policy,
min.insync.replicas, ...) belong to the topic-metadata layer, which passes the whole dict and lets
``LogConfig.from_topic_config`` pick what it understands.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from rivven_kproto.codec.errors import Errors, KafkaError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
GIB = 1 << 30
WEEK_MS = 7 * 24 * 60 * 60 * 1000

TimestampType = Literal["CreateTime", "LogAppendTime"]
TIMESTAMP_TYPES: tuple[TimestampType, ...] = ("CreateTime", "LogAppendTime")

# Kafka 3.x's floor (LegacyRecord.RECORD_OVERHEAD_V0). Kafka 4 raised it to 1 MiB and added an
# internal override for tests; we keep the old floor so small segments stay possible.
MIN_SEGMENT_BYTES = 14


@dataclass(frozen=True)
class LogConfig:
    """Settings of one partition's log; ``None`` for the flush settings means "never by that rule"."""

    segment_bytes: int = GIB
    segment_ms: int = WEEK_MS
    retention_ms: int = WEEK_MS
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    index_interval_bytes: int = 4096
    flush_messages: int | None = None
    flush_ms: int | None = None
    message_timestamp_type: TimestampType = "CreateTime"
    # cleanup.policy includes compact: produced records must carry a key (LogValidator's rule).
    compact: bool = False

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def topic_keys(cls) -> frozenset[str]:
        """The topic configs the log itself honours (the rest belong to other layers)."""
        return frozenset(_PARSERS)

    @classmethod
    def from_topic_config(
        cls, configs: Mapping[str, str | int | None], base: LogConfig | None = None
    ) -> LogConfig:
        """Overlay Kafka topic configs (string values, as in CreateTopics) on ``base`` (defaults).

        Unknown keys are ignored because they belong to other layers; a known key with a bad value
        raises ``KafkaError(INVALID_CONFIG)``, which is what CreateTopics/AlterConfigs answer.
        """
        changes: dict[str, object] = {}
        for key, (field, parse) in _PARSERS.items():
            value = configs.get(key)
            if value is not None:
                changes[field] = parse(key, value)
        return dataclasses.replace(base or cls(), **changes)  # type: ignore[arg-type]


def _invalid(key: str, value: object, why: str) -> KafkaError:
    return KafkaError(Errors.INVALID_CONFIG, f"Invalid value {value!r} for configuration {key}: {why}")


def _long(key: str, value: str | int, low: int, high: int = LONG_MAX) -> int:
    """Parse like Java's ``Long.parseLong`` on the trimmed string, then range-check."""
    if isinstance(value, bool):
        raise _invalid(key, value, "expected a number")
    try:
        number = value if isinstance(value, int) else int(str(value).strip(), 10)
    except ValueError:
        raise _invalid(key, value, "not a number") from None
    if not low <= number <= high:
        raise _invalid(key, value, f"value must be in [{low}, {high}]")
    return number


def _segment_bytes(key: str, value: str | int) -> int:
    # Positions in the offset index are int32, so a segment may not outgrow Int.MAX.
    return _long(key, value, MIN_SEGMENT_BYTES, INT_MAX)


def _positive_ms(key: str, value: str | int) -> int:
    return _long(key, value, 1)


def _retention(key: str, value: str | int) -> int:
    return _long(key, value, -1)


def _any_long(key: str, value: str | int) -> int:
    return _long(key, value, -LONG_MAX - 1)


def _non_negative_int(key: str, value: str | int) -> int:
    return _long(key, value, 0, INT_MAX)


def _flush_messages(key: str, value: str | int) -> int | None:
    number = _long(key, value, 1)
    return None if number == LONG_MAX else number


def _flush_ms(key: str, value: str | int) -> int | None:
    number = _long(key, value, 0)
    return None if number == LONG_MAX else number


def _timestamp_type(key: str, value: str | int) -> TimestampType:
    text = str(value).strip()
    for name in TIMESTAMP_TYPES:
        if text == name:
            return name
    raise _invalid(key, value, f"must be one of {', '.join(TIMESTAMP_TYPES)}")


def _compact(key: str, value: str | int) -> bool:
    return "compact" in (part.strip() for part in str(value).split(","))


_PARSERS = {
    "segment.bytes": ("segment_bytes", _segment_bytes),
    "segment.ms": ("segment_ms", _positive_ms),
    "retention.ms": ("retention_ms", _retention),
    "retention.bytes": ("retention_bytes", _any_long),
    "max.message.bytes": ("max_message_bytes", _non_negative_int),
    "index.interval.bytes": ("index_interval_bytes", _non_negative_int),
    "flush.messages": ("flush_messages", _flush_messages),
    "flush.ms": ("flush_ms", _flush_ms),
    "message.timestamp.type": ("message_timestamp_type", _timestamp_type),
    "cleanup.policy": ("compact", _compact),
}
