"""Group coordinator settings come from Kafka's broker config names (file, env or flags)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rivven_kproto.broker.config import ConfigError, load_config
from rivven_kproto.broker.groups import GroupConfig


def test_kafka_defaults() -> None:
    assert load_config().groups == GroupConfig()
    assert (GroupConfig().min_session_timeout_ms, GroupConfig().initial_rebalance_delay_ms) == (6_000, 3_000)


def test_group_keys_from_file_and_env(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "group.min.session.timeout.ms=1000\ngroup.initial.rebalance.delay.ms=0\noffsets.retention.minutes=2\n"
    )
    env = {"KPROTO_GROUP_MAX_SESSION_TIMEOUT_MS": "60000", "KPROTO_OFFSET_METADATA_MAX_BYTES": "10"}
    groups = load_config(props, env).groups
    assert (groups.min_session_timeout_ms, groups.max_session_timeout_ms) == (1000, 60_000)
    assert (groups.initial_rebalance_delay_ms, groups.offsets_retention_ms, groups.offset_metadata_max_bytes) == (
        0, 120_000, 10)


@pytest.mark.parametrize("key", ["group.min.session.timeout.ms", "offsets.retention.minutes"])
def test_bad_group_values(tmp_path: Path, key: str) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"{key}=0\n")
    with pytest.raises(ConfigError):
        load_config(props)


def test_migration_policy(tmp_path: Path) -> None:
    """group.consumer.migration.policy: Kafka's values (case-insensitive), bidirectional by default."""
    assert GroupConfig().consumer_migration_policy == "bidirectional"
    groups = load_config(None, {"KPROTO_GROUP_CONSUMER_MIGRATION_POLICY": "Upgrade"}).groups
    assert (groups.consumer_migration_policy, groups.upgrade_enabled, groups.downgrade_enabled) == (
        "upgrade", True, False)
    props = tmp_path / "server.properties"
    props.write_text("group.consumer.migration.policy=sideways\n")
    with pytest.raises(ConfigError, match="disabled, upgrade, downgrade, bidirectional"):
        load_config(props)
