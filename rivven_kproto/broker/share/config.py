"""Share-group settings (KIP-932): Kafka's broker keys, their defaults and bounds.

``share.auto.offset.reset`` and ``share.isolation.level`` are group configs in Kafka (set with
``kafka-configs --entity-type groups``); this broker has no group configs yet, so they are taken
as broker-wide defaults for every share group (under the same names).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

RESETS = ("latest", "earliest")
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
            if value.lower() not in RESETS:
                raise ShareConfigError(f"{key} must be one of {', '.join(RESETS)}, got {raw!r}")
            changes["auto_offset_reset"] = value.lower()
        elif key == "share.isolation.level":
            if value.lower() not in ISOLATION_LEVELS:
                raise ShareConfigError(f"{key} must be one of {', '.join(ISOLATION_LEVELS)}, got {raw!r}")
            changes["isolation_level"] = value.lower()
    return dataclasses.replace(config, **changes) if changes else config  # type: ignore[arg-type]
