"""Share-group settings (KIP-932): Kafka's broker keys, their defaults and bounds.

``share.auto.offset.reset`` and ``share.isolation.level`` are group configs in Kafka (set with
``kafka-configs --entity-type groups``); this broker has no group configs yet, so they are taken
as broker-wide defaults for every share group (under the same names). ``share.auto.offset.reset``
is ``latest``, ``earliest`` or, as Kafka 4.2, ``by_duration:<ISO 8601 duration>`` (``PnDTnHnMn.nS``,
not negative): a new share-partition starts at the first record stamped at or after now minus the
duration (ListOffsets by timestamp), or at the log end when there is none.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

RESETS = ("latest", "earliest", "by_duration:<ISO 8601 duration>")
BY_DURATION = "by_duration:"
# java.time.Duration.parse's form (which Kafka uses): days, hours, minutes, seconds with a fraction.
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


class ShareConfigError(ValueError):
    """A share-group setting out of its range."""


@dataclass(frozen=True)
class ShareConfig:
    enabled: bool = True  # group.share.enable (Kafka 4.2: share in group.coordinator.rebalance.protocols)
    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks
    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size: members per share group
    auto_offset_reset: str = "latest"  # share.auto.offset.reset
    isolation_level: str = "read_uncommitted"  # share.isolation.level

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    @property
    def reset_duration_ms(self) -> int | None:
        """The duration of ``by_duration:<duration>`` in milliseconds; None for latest/earliest."""
        if not self.auto_offset_reset.startswith(BY_DURATION):
            return None
        return parse_duration_ms(self.auto_offset_reset[len(BY_DURATION):])


def parse_duration_ms(text: str) -> int:
    """An ISO 8601 duration as java.time.Duration.parse reads it, in milliseconds (the fraction of
    a second cut to milliseconds); ShareConfigError when it is malformed or negative."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or (match.group(3) is not None and not any(match.group(i) for i in (4, 5, 6))) or not any(
            match.group(i) for i in (2, 4, 5, 6)):
        raise ShareConfigError(f"not an ISO 8601 duration like PT1H or P1DT12H: {text!r}")
    sign, days, _, hours, minutes, seconds, fraction = match.groups()
    whole = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60 + int(seconds or 0)
    millis = whole * 1000 + (-1 if (seconds or "").startswith("-") else 1) * int((fraction or "").ljust(3, "0")[:3])
    millis = -millis if sign == "-" else millis
    if millis < 0:
        raise ShareConfigError(f"a negative duration is not allowed: {text!r}")
    return millis


def _reset(raw: str) -> str:
    value = raw.strip()
    lowered = value.lower()
    if lowered in ("latest", "earliest"):
        return lowered
    if lowered.startswith(BY_DURATION):
        duration = value[len(BY_DURATION):].strip()
        try:
            parse_duration_ms(duration)
        except ShareConfigError as exc:
            raise ShareConfigError(f"share.auto.offset.reset {raw!r}: {exc}") from None
        return BY_DURATION + duration.upper()
    raise ShareConfigError(f"share.auto.offset.reset must be one of {', '.join(RESETS)}, got {raw!r}")


# Kafka key -> (field, lowest value); values are integers unless listed below.
_INT_KEYS = {
    "group.share.record.lock.duration.ms": ("record_lock_duration_ms", 1000),
    "group.share.delivery.count.limit": ("delivery_count_limit", 2),
    "group.share.partition.max.record.locks": ("partition_max_record_locks", 100),
    "group.share.session.timeout.ms": ("session_timeout_ms", 1),
    "group.share.heartbeat.interval.ms": ("heartbeat_interval_ms", 1),
    "group.share.max.size": ("max_size", 1),
}
KEYS = frozenset({*_INT_KEYS, "group.share.enable", "group.coordinator.rebalance.protocols",
                  "share.auto.offset.reset", "share.isolation.level"})


def apply_share_keys(config: ShareConfig, props: Mapping[str, str]) -> ShareConfig:
    """Overlay the share keys of ``props`` (others ignored); raises ShareConfigError."""
    changes: dict[str, object] = {}
    for key, raw in props.items():
        value = raw.strip()
        if key in _INT_KEYS:
            name, low = _INT_KEYS[key]
            try:
                number = int(value)
            except ValueError:
                raise ShareConfigError(f"{key} must be an integer, got {raw!r}") from None
            if number < low:
                raise ShareConfigError(f"{key} must be >= {low}, got {number}")
            changes[name] = number
        elif key == "group.share.enable":
            if value.lower() not in ("true", "false"):
                raise ShareConfigError(f"{key} must be true or false, got {raw!r}")
            changes["enabled"] = value.lower() == "true"
        elif key == "group.coordinator.rebalance.protocols":
            changes["enabled"] = "share" in {p.strip().lower() for p in value.split(",")}
        elif key == "share.auto.offset.reset":
            changes["auto_offset_reset"] = _reset(value)
        elif key == "share.isolation.level":
            if value.lower() not in ISOLATION_LEVELS:
                raise ShareConfigError(f"{key} must be one of {', '.join(ISOLATION_LEVELS)}, got {raw!r}")
            changes["isolation_level"] = value.lower()
    return dataclasses.replace(config, **changes) if changes else config  # type: ignore[arg-type]
