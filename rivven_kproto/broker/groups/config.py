"""Group coordinator settings, by their Kafka broker config names, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass

MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    offset_metadata_max_bytes: int = 4_096  # offset.metadata.max.bytes (Kafka counts UTF-16 chars)
    offsets_retention_ms: int = 7 * 24 * 3_600_000  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    # KIP-848 consumer groups: the broker, not the client, sets these.
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    # KIP-848 online migration between classic and consumer groups: disabled, upgrade, downgrade
    # or bidirectional (group.consumer.migration.policy).
    consumer_migration_policy: str = "bidirectional"
    # How long a member that joined but never completed a rebalance may stay (Kafka's constant).
    new_member_join_timeout_ms: int = 300_000
    # Rewrite the log as a snapshot once it is this big and twice the last snapshot.
    compact_bytes: int = 8 * 1024 * 1024

    @property
    def upgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("downgrade", "bidirectional")
