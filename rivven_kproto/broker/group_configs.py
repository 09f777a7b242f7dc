"""Group configs (Kafka's GROUP config resource, 32): settings an operator sets per group.

``kafka-configs --alter --entity-type groups --entity-name G --add-config share.auto.offset.reset=earliest``
is an IncrementalAlterConfigs on the resource (GROUP, "G"). Kafka 4.2's keys are the ones below;
an unknown key, a value that does not parse or is out of range is INVALID_CONFIG, with the messages
of Kafka's ``GroupConfig``. A group need not exist to be configured, and its configs outlive it.

A value set here wins over the broker's for that group only: the share keys act on the group's share
partitions (where they start, what they deliver, how long a lock lasts) and on its members' session
and heartbeat interval; ``consumer.*`` act on a KIP-848 consumer group's members; ``streams.*`` are
stored and described and act on nothing here (no streams groups). The values are one metadata
document (either engine), written by the controller and followed by the other brokers at their
heartbeat, like the dynamic broker configs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rivven_kproto.codec.enums import ConfigSource
from rivven_kproto.codec.errors import Errors, KafkaError

from .config import BrokerConfig
from .config_levels import parse_levels, save_level
from .durable.work import BlockingWork, Document
from .share.config import ShareConfig, ShareConfigError, apply_share_keys
from .topics import ConfigEntry, ConfigSynonym, ConfigType, config_error, parse_config_value

FILE_NAME = "group_configs.json"


@dataclass(frozen=True)
class GroupKey:
    """One group config: its type, the broker's value it overrides, its lowest value (ints)."""

    config_type: ConfigType
    default: Callable[[ShareConfig, int, int], str]  # (share config, consumer session, consumer heartbeat)
    low: int = 1


def _share(field: str) -> Callable[[ShareConfig, int, int], str]:
    return lambda share, session, heartbeat: str(getattr(share, field))


GROUP_KEYS: dict[str, GroupKey] = {
    "consumer.heartbeat.interval.ms": GroupKey(ConfigType.INT, lambda share, session, heartbeat: str(heartbeat)),
    "consumer.session.timeout.ms": GroupKey(ConfigType.INT, lambda share, session, heartbeat: str(session)),
    "share.auto.offset.reset": GroupKey(ConfigType.STRING, _share("auto_offset_reset")),
    "share.heartbeat.interval.ms": GroupKey(ConfigType.INT, _share("heartbeat_interval_ms")),
    "share.isolation.level": GroupKey(ConfigType.STRING, _share("isolation_level")),
    "share.record.lock.duration.ms": GroupKey(ConfigType.INT, _share("record_lock_duration_ms"), low=1000),
    "share.session.timeout.ms": GroupKey(ConfigType.INT, _share("session_timeout_ms")),
    "streams.heartbeat.interval.ms": GroupKey(ConfigType.INT, lambda share, session, heartbeat: "5000"),
    "streams.num.standby.replicas": GroupKey(ConfigType.INT, lambda share, session, heartbeat: "0", low=0),
    "streams.session.timeout.ms": GroupKey(ConfigType.INT, lambda share, session, heartbeat: "45000"),
}
# The group key -> the broker key that bounds it and Kafka's default bounds (min, max) there; a
# broker configured outside those (a test's short session) widens them to its own value.
BOUNDS: dict[str, tuple[str, int, int]] = {
    "consumer.heartbeat.interval.ms": ("group.consumer.%s.heartbeat.interval.ms", 5_000, 15_000),
    "consumer.session.timeout.ms": ("group.consumer.%s.session.timeout.ms", 45_000, 60_000),
    "share.heartbeat.interval.ms": ("group.share.%s.heartbeat.interval.ms", 5_000, 15_000),
    "share.session.timeout.ms": ("group.share.%s.session.timeout.ms", 45_000, 60_000),
    "share.record.lock.duration.ms": ("group.share.%s.record.lock.duration.ms", 15_000, 60_000),
    "streams.heartbeat.interval.ms": ("group.streams.%s.heartbeat.interval.ms", 5_000, 15_000),
    "streams.session.timeout.ms": ("group.streams.%s.session.timeout.ms", 45_000, 60_000),
}
# (session key, heartbeat key): the session must be longer than the interval.
SESSION_PAIRS = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                 ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
                 ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"))
# Group key -> the share key ``apply_share_keys`` reads (the two spell some differently).
SHARE_KEY_OF = {
    "share.auto.offset.reset": "share.auto.offset.reset",
    "share.isolation.level": "share.isolation.level",
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "share.session.timeout.ms": "group.share.session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.heartbeat.interval.ms",
}


class GroupConfigs:
    """The persisted overrides, by group id, and the settings they make for each group."""

    def __init__(self, document: Path | Document, work: BlockingWork | None, share: ShareConfig,
                 consumer_session_ms: int, consumer_heartbeat_ms: int) -> None:
        self.document = document if isinstance(document, Document) else Document(document)
        self.work = work
        self.share_base = share
        self.consumer_base = (consumer_session_ms, consumer_heartbeat_ms)
        self.groups: dict[str, dict[str, str]] = {}
        self._share_of: dict[str, ShareConfig] = {}
        self.reload(self.document.read())

    def reload(self, raw: bytes | None) -> None:
        """Take the values as stored (at start, and on a broker following the controller)."""
        self._share_of = {}
        self.groups = parse_levels(raw, self.document)

    def level(self, group_id: str) -> dict[str, str]:
        """The overrides set for ``group_id`` (a copy)."""
        return dict(self.groups.get(group_id, {}))

    def replace(self, group_id: str, values: dict[str, str]) -> None:
        """Set the group's overrides to exactly ``values`` after Kafka's checks; then save."""
        self.check(values)
        self._share_of.pop(group_id, None)
        save_level(self.document, self.work, self.groups, group_id, values)

    def share(self, group_id: str) -> ShareConfig:
        """The share settings in force for ``group_id``: its overrides over the broker's."""
        found = self._share_of.get(group_id)
        if found is None:
            overrides = self.groups.get(group_id)
            found = self.share_base if not overrides else apply_share_keys(
                self.share_base, {SHARE_KEY_OF[k]: v for k, v in overrides.items() if k in SHARE_KEY_OF})
            self._share_of[group_id] = found
        return found

    def consumer_timeouts(self, group_id: str) -> tuple[int, int]:
        """(session timeout, heartbeat interval) of a KIP-848 consumer group's members."""
        overrides = self.groups.get(group_id)
        if not overrides:
            return self.consumer_base
        session, heartbeat = self.consumer_base
        return (int(overrides.get("consumer.session.timeout.ms", session)),
                int(overrides.get("consumer.heartbeat.interval.ms", heartbeat)))

    def defaults(self) -> dict[str, str]:
        """Every group key's value where the group sets nothing (the broker's)."""
        return {key: spec.default(self.share_base, *self.consumer_base) for key, spec in GROUP_KEYS.items()}

    def describe(self, group_id: str) -> list[ConfigEntry]:
        """DescribeConfigs of a group: every key, GROUP_CONFIG where set, else DEFAULT_CONFIG (Kafka's)."""
        overrides = self.groups.get(group_id, {})
        entries = []
        for key, value in sorted(self.defaults().items()):
            spec = GROUP_KEYS[key]
            if key in overrides:
                value = overrides[key]
                synonyms: tuple[ConfigSynonym, ...] = (ConfigSynonym(key, value, ConfigSource.GROUP_CONFIG),)
                entries.append(ConfigEntry(key, value, ConfigSource.GROUP_CONFIG, spec.config_type, synonyms=synonyms))
            else:
                entries.append(ConfigEntry(key, value, ConfigSource.DEFAULT_CONFIG, spec.config_type))
        return entries

    def check(self, values: dict[str, str]) -> None:
        """Kafka's GroupConfig.validate: names, then each value over the defaults, then the bounds."""
        for key in values:
            if key not in GROUP_KEYS:
                raise KafkaError(Errors.INVALID_CONFIG, f"Unknown group config name: {key}")
        merged = {**self.defaults(), **values}
        numbers: dict[str, int] = {}
        for key, spec in GROUP_KEYS.items():
            raw = merged[key]
            if spec.config_type == ConfigType.INT:
                numbers[key] = _int(key, raw, spec.low)
        for key in ("share.auto.offset.reset", "share.isolation.level"):
            if key in values:
                try:
                    apply_share_keys(self.share_base, {key: values[key]})
                except ShareConfigError as exc:
                    raise KafkaError(Errors.INVALID_CONFIG,
                                     f"Invalid value {values[key]} for configuration {key}: {exc}") from None
        for key, (broker_key, low, high) in BOUNDS.items():
            own = int(GROUP_KEYS[key].default(self.share_base, *self.consumer_base))
            if numbers[key] < min(low, own):
                raise KafkaError(Errors.INVALID_CONFIG, f"{key} must be greater than or equal to {broker_key % 'min'}")
            if numbers[key] > max(high, own):
                raise KafkaError(Errors.INVALID_CONFIG, f"{key} must be less than or equal to {broker_key % 'max'}")
        for session, heartbeat in SESSION_PAIRS:
            if numbers[session] <= numbers[heartbeat]:
                raise KafkaError(Errors.INVALID_CONFIG, f"{session} must be greater than {heartbeat}")


def open_group_configs(storage: Any, work: BlockingWork, config: BrokerConfig) -> GroupConfigs:
    """The broker's group configs, from its store's document, over its own share and group settings."""
    return GroupConfigs(storage.document(FILE_NAME), work, config.share,
                        config.groups.consumer_session_timeout_ms, config.groups.consumer_heartbeat_interval_ms)


def _int(key: str, raw: str, low: int) -> int:
    """Parse as Kafka's ConfigDef parses an INT, then its lower bound, with Kafka's messages."""
    number: int = parse_config_value(key, ConfigType.INT, raw)
    if number < low:
        raise config_error(key, number, f"Value must be at least {low}")
    return number
