"""Kafka's descriptions of topic and broker configs (DescribeConfigs, CreateTopics v5+).

A config's value, source and synonyms chain (dynamic per-node, dynamic cluster default, static,
default) follow Kafka's DescribeConfigs answer; kept apart from ``Broker``, which only supplies its
static config, the dynamic configs in force and the log defaults they make.
"""

from __future__ import annotations

from typing import Protocol

from rivven_kproto.codec.enums import ConfigSource

from .config import BrokerConfig
from .dynamic_configs import CLUSTER_DEFAULT, DynamicBrokerConfigs
from .dynamic_keys import TOPIC_SYNONYMS
from .dynamic_keys import config_type as dynamic_config_type
from .dynamic_keys import is_sensitive as dynamic_config_sensitive
from .log.config import LogConfig
from .security.listeners import describe_listeners
from .topics import (
    TOPIC_CONFIG_DEFAULTS,
    ConfigEntry,
    ConfigSynonym,
    ConfigType,
    describe_topic_configs,
)


class DescribedBroker(Protocol):
    """What a description reads of the broker (``Broker`` has these)."""

    config: BrokerConfig
    log_defaults: LogConfig  # the static log settings with the dynamic broker configs over them
    dynamic: DynamicBrokerConfigs
    shard_count: int


def topic_config_description(
    broker: DescribedBroker, overrides: dict[str, str], *, canonical: bool = True
) -> list[ConfigEntry]:
    """What a topic with these overrides would report; CreateTopics passes canonical=False."""
    static_values = log_config_strings(broker.config.log)
    static = {key: value for key, value in static_values.items() if _KAFKA_LOG_DEFAULTS.get(key) != value}
    effective = log_config_strings(broker.log_defaults)
    dynamic = {TOPIC_SYNONYMS[key]: chain for key, chain in dynamic_synonyms(broker).items() if key in TOPIC_SYNONYMS}
    # Dynamic values of the configs the log does not act on (min.insync.replicas, ...) are
    # still the topics' values, as Kafka describes them.
    unapplied = {key: chain[0].value for key, chain in dynamic.items() if key not in effective and chain[0].value}
    return describe_topic_configs(overrides, {**TOPIC_CONFIG_DEFAULTS, **unapplied, **effective}, static,
                                  canonical=canonical, dynamic=dynamic)


def dynamic_synonyms(broker: DescribedBroker) -> dict[str, list[ConfigSynonym]]:
    """Per broker key, its dynamic synonyms in precedence order (this node, then the default):
    the head of the chain both a broker's and a topic's description report."""
    chain: dict[str, list[ConfigSynonym]] = {}
    for level, source in ((str(broker.config.node_id), ConfigSource.DYNAMIC_BROKER_CONFIG),
                          (CLUSTER_DEFAULT, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)):
        for key, value in broker.dynamic.level(level).items():
            chain.setdefault(key, []).append(ConfigSynonym(key, value, source))
    return chain


def describe_broker_configs(broker: DescribedBroker) -> list[ConfigEntry]:
    """The broker settings we honour, sorted by name (Kafka's describe of a broker id).

    The log defaults are dynamic (not read-only): their chain is this node's dynamic value,
    the cluster default, the static setting (where it differs from our default), the default;
    the value and source are the chain's first. Everything else is read-only.
    """
    current = _broker_settings(broker.config)
    default = _broker_settings(BrokerConfig())
    # Ours, read from the store: group and transactional ids hash to this many coordinator shards.
    current["coordinator.shards"] = default["coordinator.shards"] = (ConfigType.INT, str(broker.shard_count))
    dynamic = dynamic_synonyms(broker)
    for name in dynamic.keys() - current.keys():  # accepted dynamically, acted on nowhere here
        current[name] = default[name] = (dynamic_config_type(name) or ConfigType.STRING, None)
    entries = []
    for name in sorted(current):
        config_type, value = current[name]
        default_value = default[name][1]
        synonyms = list(dynamic.get(name, ()))
        if value != default_value:
            synonyms.append(ConfigSynonym(name, value, ConfigSource.STATIC_BROKER_CONFIG))
        if default_value is not None:
            synonyms.append(ConfigSynonym(name, default_value, ConfigSource.DEFAULT_CONFIG))
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        value = synonyms[0].value if synonyms else value
        entries.append(_broker_entry(name, value, source, config_type, dynamic_config_type(name) is None,
                                     tuple(synonyms)))
    return entries


def describe_cluster_default_configs(broker: DescribedBroker) -> list[ConfigEntry]:
    """The broker resource "": only the cluster-wide dynamic defaults that are set (Kafka's answer)."""
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return [
        _broker_entry(name, value, source, dynamic_config_type(name) or ConfigType.STRING, False,
                      (ConfigSynonym(name, value, source),))
        for name, value in sorted(broker.dynamic.level(CLUSTER_DEFAULT).items())
    ]


def _broker_entry(name: str, value: str | None, source: ConfigSource, config_type: ConfigType, read_only: bool,
                  synonyms: tuple[ConfigSynonym, ...]) -> ConfigEntry:
    """A broker config as DescribeConfigs reports it: a password's value (and its synonyms') null."""
    if not dynamic_config_sensitive(name):
        return ConfigEntry(name, value, source, config_type, read_only=read_only, synonyms=synonyms)
    hidden = tuple(ConfigSynonym(s.name, None, s.source) for s in synonyms)
    return ConfigEntry(name, None, source, config_type, read_only=read_only, sensitive=True, synonyms=hidden)


def log_config_strings(config: LogConfig) -> dict[str, str]:
    long_max = str((1 << 63) - 1)
    return {
        "segment.bytes": str(config.segment_bytes),
        "segment.ms": str(config.segment_ms),
        "retention.ms": str(config.retention_ms),
        "retention.bytes": str(config.retention_bytes),
        "max.message.bytes": str(config.max_message_bytes),
        "index.interval.bytes": str(config.index_interval_bytes),
        "flush.messages": long_max if config.flush_messages is None else str(config.flush_messages),
        "flush.ms": long_max if config.flush_ms is None else str(config.flush_ms),
        "message.timestamp.type": config.message_timestamp_type,
    }


# Kafka's own defaults for the log settings (its LogConfig), to tell a static broker override
# (log.segment.bytes=... in server.properties) from a default when describing topic configs.
_KAFKA_LOG_DEFAULTS = log_config_strings(LogConfig())


def _broker_settings(config: BrokerConfig) -> dict[str, tuple[ConfigType, str | None]]:
    """Broker configs we honour, by their Kafka names (``fsync`` is ours), as strings."""
    log_config = config.log
    listeners = describe_listeners((config.primary_listener, *config.extra_listeners), config.advertised_host)
    long_max = str((1 << 63) - 1)
    return {
        **{name: (ConfigType.STRING, value) for name, value in listeners.items()},
        "node.id": (ConfigType.INT, str(config.node_id)),
        "broker.id": (ConfigType.INT, str(config.node_id)),
        "log.dirs": (ConfigType.STRING, str(config.data_dir)),
        "num.partitions": (ConfigType.INT, str(config.num_partitions)),
        "default.replication.factor": (ConfigType.INT, str(config.default_replication_factor)),
        "auto.create.topics.enable": (ConfigType.BOOLEAN, str(config.auto_create_topics).lower()),
        "delete.topic.enable": (ConfigType.BOOLEAN, str(config.delete_topic_enable).lower()),
        "fsync": (ConfigType.STRING, config.fsync),
        "log.flush.interval.ms": (ConfigType.LONG, str(config.flush_interval_ms)),
        "log.flush.interval.messages": (
            ConfigType.LONG,
            long_max if log_config.flush_messages is None else str(log_config.flush_messages),
        ),
        "log.retention.check.interval.ms": (ConfigType.LONG, str(config.retention_check_interval_ms)),
        "socket.request.max.bytes": (ConfigType.INT, str(config.socket_request_max_bytes)),
        "connections.max.idle.ms": (ConfigType.LONG, str(config.connections_max_idle_ms)),
        "log.segment.bytes": (ConfigType.INT, str(log_config.segment_bytes)),
        "log.roll.ms": (ConfigType.LONG, str(log_config.segment_ms)),
        "log.retention.ms": (ConfigType.LONG, str(log_config.retention_ms)),
        "log.retention.bytes": (ConfigType.LONG, str(log_config.retention_bytes)),
        "message.max.bytes": (ConfigType.INT, str(log_config.max_message_bytes)),
        "log.index.interval.bytes": (ConfigType.INT, str(log_config.index_interval_bytes)),
        "log.message.timestamp.type": (ConfigType.STRING, log_config.message_timestamp_type),
        "log.cleanup.policy": (ConfigType.LIST, "compact" if log_config.compact else "delete"),
    }
