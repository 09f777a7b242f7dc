"""Topic metadata: names, ids, partition counts and per-topic config overrides, persisted.

On disk: ``<data_dir>/meta/topics.json``, a JSON object ``{name: {"id": uuid-hex, "partitions": n,
"configs": {key: value}, "replicas": n (absent: 1), "assignments": [[node, ...] per partition]
(absent: none given)}}``, replaced atomically (write temp, fsync, rename, fsync dir) on every
change, so a crash leaves either the old or the new version, never half of one.

Topic configs follow Kafka's schema (``TOPIC_CONFIGS``: type, default, broker synonym, validator)
so that CreateTopics/AlterConfigs accept and reject exactly what a Kafka 3.9 broker does, with
its messages, and DescribeConfigs can report types, sources and synonyms. Configs the log does
not act on are still accepted and stored, as clients (Streams, Connect) set them routinely.
"""

from __future__ import annotations

import enum
import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rivven_kproto.codec.enums import ConfigSource
from rivven_kproto.codec.errors import Errors, KafkaError

from .cluster import catalog_digest
from .durable.work import BlockingWork, Document

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")  # fullmatch: "$" would accept a trailing newline

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
# Kafka's internal topics. Our coordinators keep their state elsewhere, so these names are never
# created (explicitly or automatically) and never appended to by clients, as in Kafka.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__cluster_metadata"})


def validate_topic_name(name: str) -> None:
    """Kafka's rules (1-249 legal characters, not '.' or '..') with Kafka 3.9's messages."""
    reason = _invalid_topic_reason(name)
    if reason is not None:
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {reason}")


def _invalid_topic_reason(name: str) -> str | None:
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_TOPIC_NAME:
        return f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME}"
    if not _LEGAL.fullmatch(name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def collision_key(name: str) -> str:
    """Kafka forbids topics differing only by '.' vs '_' (they collide in metric names)."""
    return name.replace(".", "_")


# -- the topic config schema ----------------------------------------------------------------------


class ConfigType(enum.IntEnum):
    """DescribeConfigs' ConfigType codes (Kafka's ConfigDef.Type on the wire)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One described config: what DescribeConfigs and CreateTopics (v5+) put on the wire."""

    name: str
    value: str | None
    source: ConfigSource
    config_type: ConfigType
    read_only: bool = False
    sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()


Validator = Callable[[str, Any], None]


@dataclass(frozen=True)
class TopicConfigDef:
    """Kafka's definition of one topic config; ``broker_name`` is its broker-level synonym."""

    type: ConfigType
    default: str
    broker_name: str | None
    validator: Validator | None = None
    # False where Kafka's broker synonym has no default (log.roll.ms, ...): no DEFAULT synonym.
    broker_default: bool = True


def _java_str(value: Any) -> str:
    """How Java prints a parsed value in a ConfigException message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format_value(ConfigType.DOUBLE, value)
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]"
    return str(value)


def config_error(name: str, value: Any, why: str | None = None) -> KafkaError:
    """Kafka's ConfigException text, answered as INVALID_CONFIG."""
    suffix = "" if why is None else f": {why}"
    return KafkaError(Errors.INVALID_CONFIG, f"Invalid value {_java_str(value)} for configuration {name}{suffix}")


def _at_least(low: int) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < low:
            raise config_error(name, value, f"Value must be at least {low}")

    return check


def _between(low: int, high: int) -> Validator:
    def check(name: str, value: Any) -> None:
        _at_least(low)(name, value)
        if value > high:
            raise config_error(name, value, f"Value must be no more than {high}")

    return check


def _one_of(*choices: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value not in choices:
            raise config_error(name, value, "String must be one of: " + ", ".join(choices))

    return check


def _list_of(*choices: str) -> Validator:
    element = _one_of(*choices)

    def check(name: str, value: Any) -> None:
        for item in value:
            element(name, item)

    return check


def _gzip_level(name: str, value: Any) -> None:
    if value > 9 or (value < 1 and value != -1):
        raise config_error(name, value, "Value must be between 1 and 9 or equal to -1")


_THROTTLED = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(name: str, value: Any) -> None:
    items = [item.strip() for item in value]
    if not (all(_THROTTLED.fullmatch(item) for item in items) or "".join(items) == "*"):
        raise config_error(
            name,
            value,
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        )


_L = ConfigType.LONG
_I = ConfigType.INT
_B = ConfigType.BOOLEAN
_S = ConfigType.STRING
_LIST = ConfigType.LIST
_LMAX = str(LONG_MAX)

# Kafka 3.9's LogConfig, in its definition order (the order values are parsed and validated).
# message.format.version (deprecated, ignored since 3.0) is left out on purpose.
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "segment.bytes": TopicConfigDef(_I, str(1 << 30), "log.segment.bytes", _at_least(14)),
    "segment.ms": TopicConfigDef(_L, "604800000", "log.roll.ms", _at_least(1), broker_default=False),
    "segment.jitter.ms": TopicConfigDef(_L, "0", "log.roll.jitter.ms", _at_least(0), broker_default=False),
    "segment.index.bytes": TopicConfigDef(_I, "10485760", "log.index.size.max.bytes", _at_least(4)),
    "flush.messages": TopicConfigDef(_L, _LMAX, "log.flush.interval.messages", _at_least(1)),
    "flush.ms": TopicConfigDef(_L, _LMAX, "log.flush.interval.ms", _at_least(0), broker_default=False),
    "retention.bytes": TopicConfigDef(_L, "-1", "log.retention.bytes"),
    "retention.ms": TopicConfigDef(_L, "604800000", "log.retention.ms", _at_least(-1), broker_default=False),
    "max.message.bytes": TopicConfigDef(_I, "1048588", "message.max.bytes", _at_least(0)),
    "index.interval.bytes": TopicConfigDef(_I, "4096", "log.index.interval.bytes", _at_least(0)),
    "delete.retention.ms": TopicConfigDef(_L, "86400000", "log.cleaner.delete.retention.ms", _at_least(0)),
    "min.compaction.lag.ms": TopicConfigDef(_L, "0", "log.cleaner.min.compaction.lag.ms", _at_least(0)),
    "max.compaction.lag.ms": TopicConfigDef(_L, _LMAX, "log.cleaner.max.compaction.lag.ms", _at_least(1)),
    "file.delete.delay.ms": TopicConfigDef(_L, "60000", "log.segment.delete.delay.ms", _at_least(0)),
    "min.cleanable.dirty.ratio": TopicConfigDef(
        ConfigType.DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio", _between(0, 1)
    ),
    "cleanup.policy": TopicConfigDef(_LIST, "delete", "log.cleanup.policy", _list_of("compact", "delete")),
    "unclean.leader.election.enable": TopicConfigDef(_B, "false", "unclean.leader.election.enable"),
    "min.insync.replicas": TopicConfigDef(_I, "1", "min.insync.replicas", _at_least(1)),
    "compression.type": TopicConfigDef(_S, "producer", "compression.type", _one_of(*COMPRESSION_TYPES)),
    "compression.gzip.level": TopicConfigDef(_I, "-1", "compression.gzip.level", _gzip_level),
    "compression.lz4.level": TopicConfigDef(_I, "9", "compression.lz4.level", _between(1, 17)),
    "compression.zstd.level": TopicConfigDef(_I, "3", "compression.zstd.level", _between(-131072, 22)),
    "preallocate": TopicConfigDef(_B, "false", "log.preallocate"),
    "message.timestamp.type": TopicConfigDef(
        _S, "CreateTime", "log.message.timestamp.type", _one_of("CreateTime", "LogAppendTime")
    ),
    "message.timestamp.difference.max.ms": TopicConfigDef(
        _L, _LMAX, "log.message.timestamp.difference.max.ms", _at_least(0)
    ),
    "message.timestamp.before.max.ms": TopicConfigDef(
        _L, _LMAX, "log.message.timestamp.before.max.ms", _at_least(0)
    ),
    "message.timestamp.after.max.ms": TopicConfigDef(_L, _LMAX, "log.message.timestamp.after.max.ms", _at_least(0)),
    "leader.replication.throttled.replicas": TopicConfigDef(_LIST, "", None, _throttled_replicas),
    "follower.replication.throttled.replicas": TopicConfigDef(_LIST, "", None, _throttled_replicas),
    "message.downconversion.enable": TopicConfigDef(_B, "true", "log.message.downconversion.enable"),
    "remote.storage.enable": TopicConfigDef(_B, "false", None),
    "local.retention.ms": TopicConfigDef(_L, "-2", "log.local.retention.ms", _at_least(-2)),
    "local.retention.bytes": TopicConfigDef(_L, "-2", "log.local.retention.bytes", _at_least(-2)),
    "remote.log.copy.disable": TopicConfigDef(_B, "false", None),
    "remote.log.delete.on.disable": TopicConfigDef(_B, "false", None),
}

# Topic configs the native log acts on (rivven_kproto.broker.log.config.LogConfig); their
# effective defaults come from the broker's LogConfig, the others' from TOPIC_CONFIGS.
LOG_CONFIG_KEYS = (
    "segment.bytes",
    "segment.ms",
    "retention.ms",
    "retention.bytes",
    "max.message.bytes",
    "index.interval.bytes",
    "flush.messages",
    "flush.ms",
    "message.timestamp.type",
)

# Topic configs we accept, with Kafka's defaults (those the log acts on come from LogConfig).
TOPIC_CONFIG_DEFAULTS: dict[str, str] = {
    key: spec.default for key, spec in TOPIC_CONFIGS.items() if key not in LOG_CONFIG_KEYS
}

_JAVA_WS = "".join(chr(c) for c in range(33))  # String.trim() strips every char <= ' '
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_LIST_SPLIT = re.compile(r"\s*,\s*")


def parse_config_value(name: str, config_type: ConfigType, raw: str) -> Any:
    """Parse a config string like Kafka's ConfigDef.parseType (trim first; Java number syntax)."""
    trimmed = raw.strip(_JAVA_WS)
    if config_type == ConfigType.BOOLEAN:
        if trimmed.lower() in ("true", "false"):
            return trimmed.lower() == "true"
        raise config_error(name, raw, "Expected value to be either true or false")
    if config_type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        bits = {ConfigType.SHORT: 15, ConfigType.INT: 31, ConfigType.LONG: 63}[config_type]
        if _INTEGER.fullmatch(trimmed) and -(1 << bits) <= int(trimmed) < (1 << bits):
            return int(trimmed)
        raise config_error(name, raw, f"Not a number of type {config_type.name}")
    if config_type == ConfigType.DOUBLE:
        if _DOUBLE.fullmatch(trimmed):
            return float(trimmed.rstrip("fFdD").replace("Infinity", "inf"))
        raise config_error(name, raw, "Not a number of type DOUBLE")
    if config_type == ConfigType.LIST:
        return [] if not trimmed else _LIST_SPLIT.split(trimmed)
    return trimmed


def format_value(config_type: ConfigType, value: Any) -> str:
    """Kafka's ConfigDef.convertToString: the canonical text DescribeConfigs shows."""
    if config_type == ConfigType.BOOLEAN:
        return "true" if value else "false"
    if config_type == ConfigType.LIST:
        return ",".join(value)
    if config_type == ConfigType.DOUBLE:
        number = float(value)
        if number != number:
            return "NaN"
        if number in (float("inf"), float("-inf")):
            return "Infinity" if number > 0 else "-Infinity"
        if number == int(number) and abs(number) < 1e7:
            return f"{number:.1f}"
        return repr(number)
    return str(value)


def validate_topic_config_values(configs: Mapping[str, str]) -> dict[str, Any]:
    """Check names, then values in Kafka's order, then Kafka's cross-field rules; parsed values out.

    Raises ``KafkaError(INVALID_CONFIG)`` with Kafka's message, which CreateTopics and the
    AlterConfigs APIs answer per topic.
    """
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise KafkaError(Errors.INVALID_CONFIG, f"Unknown topic config name: {name}")
    parsed: dict[str, Any] = {}
    for name, spec in TOPIC_CONFIGS.items():
        if name in configs:
            value = parse_config_value(name, spec.type, configs[name])
            if spec.validator is not None:
                spec.validator(name, value)
            parsed[name] = value
    min_lag = parsed.get("min.compaction.lag.ms", 0)
    max_lag = parsed.get("max.compaction.lag.ms", LONG_MAX)
    if min_lag > max_lag:
        raise KafkaError(
            Errors.INVALID_CONFIG,
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})",
        )
    if parsed.get("remote.storage.enable"):
        raise KafkaError(
            Errors.INVALID_CONFIG,
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
        )
    return parsed


def canonical_value(name: str, raw: str) -> str:
    """The override as Kafka's DescribeConfigs shows it (parsed, then printed); raw if unparsable."""
    spec = TOPIC_CONFIGS.get(name)
    if spec is None:
        return raw
    try:
        return format_value(spec.type, parse_config_value(name, spec.type, raw))
    except KafkaError:
        return raw


def describe_topic_configs(
    overrides: Mapping[str, str],
    defaults: Mapping[str, str],
    static: Mapping[str, str],
    *,
    canonical: bool = True,
    dynamic: Mapping[str, list[ConfigSynonym]] | None = None,
) -> list[ConfigEntry]:
    """Every topic config, sorted by name, with Kafka's source and synonym chain.

    ``defaults`` holds the effective value without an override (the broker's static setting
    where there is one); ``static`` the topic keys whose broker synonym is set in the broker's
    configuration (value in topic units); ``dynamic`` the dynamic broker synonyms of a topic key,
    first in the chain after the override. ``canonical=False`` keeps overrides as sent, as Kafka's
    CreateTopics response does.
    """
    entries: list[ConfigEntry] = []
    for name in sorted(TOPIC_CONFIGS):
        spec = TOPIC_CONFIGS[name]
        broker: list[ConfigSynonym] = list((dynamic or {}).get(name, ()))
        if spec.broker_name is not None:
            if name in static:
                broker.append(ConfigSynonym(spec.broker_name, static[name], ConfigSource.STATIC_BROKER_CONFIG))
            if spec.broker_default:
                broker.append(ConfigSynonym(spec.broker_name, spec.default, ConfigSource.DEFAULT_CONFIG))
        if name in overrides:
            raw = overrides[name]
            value = canonical_value(name, raw) if canonical else raw
            synonyms = (ConfigSynonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG), *broker)
            source = ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            value = defaults.get(name, spec.default)
            synonyms = tuple(broker)
            if broker and broker[0].source in (ConfigSource.DYNAMIC_BROKER_CONFIG,
                                               ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG):
                source = broker[0].source
            else:
                source = ConfigSource.STATIC_BROKER_CONFIG if name in static else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, spec.type, synonyms=synonyms))
    return entries


def is_list_config(name: str) -> bool:
    """IncrementalAlterConfigs' APPEND/SUBTRACT apply only to LIST configs."""
    spec = TOPIC_CONFIGS.get(name)
    return spec is not None and spec.type == ConfigType.LIST


@dataclass
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    replication_factor: int = 1  # as created (the store holds the data; replicas are live brokers)
    # Explicit replica assignments by partition (CreateTopics / CreatePartitions); [] where none
    # was given. The first live broker of one leads its partition (see broker.cluster).
    assignments: list[list[int]] = field(default_factory=list)

    def assigned(self, partition: int) -> list[int]:
        """The replicas a client assigned to this partition, in its order ([]: none given)."""
        return self.assignments[partition] if partition < len(self.assignments) else []


class CorruptMetadata(OSError):
    """The topic table cannot be read: the broker must not start and guess."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.strerror = message


DIGESTS_KEPT = 256  # catalog versions remembered for brokers to acknowledge


class TopicStore:
    """The persisted topic table; the broker owns the logs, this owns the names."""

    def __init__(self, meta_dir: Path | Document, work: BlockingWork | None = None) -> None:
        self.document = meta_dir if isinstance(meta_dir, Document) else Document(meta_dir / "topics.json")
        self.path = self.document.path
        self.work = work
        self.topics: dict[str, TopicMeta] = {}
        self.saved: bytes | None = None  # the document as last saved by this process
        self.saves = 0
        self._digests: dict[int, str] = {}  # save number -> digest of what it saved (the recent ones)
        raw = self.document.read()
        if raw is not None:
            self.topics = self.parse(raw)

    def parse(self, raw: bytes) -> dict[str, TopicMeta]:
        """The table a saved document holds (also another broker's, read at its heartbeat)."""
        try:
            return {
                name: TopicMeta(name, uuid.UUID(entry["id"]), entry["partitions"], entry["configs"],
                                int(entry.get("replicas", 1)),
                                [[int(n) for n in nodes] for nodes in entry.get("assignments", [])])
                for name, entry in json.loads(raw).items()
            }
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptMetadata(
                f"{self.path} is corrupt ({type(exc).__name__}: {exc}); restore it from a backup "
                "(the topics' data directories are intact) or start with an empty data directory"
            ) from None

    def save(self) -> None:
        doc = {
            name: {"id": meta.topic_id.hex, "partitions": meta.partitions, "configs": meta.configs}
            | ({"replicas": meta.replication_factor} if meta.replication_factor != 1 else {})
            | ({"assignments": meta.assignments} if any(meta.assignments) else {})
            for name, meta in sorted(self.topics.items())
        }
        self.saved = json.dumps(doc, indent=1).encode()
        self.saves += 1
        self._digests[self.saves] = catalog_digest(self.saved)
        self._digests.pop(self.saves - DIGESTS_KEPT, None)
        self.document.save(self.work, self.saved)

    def digests_since(self, saves: int) -> list[str]:
        """Digests of the catalogs saved after save number ``saves``: a broker that applied any
        of them has seen that change."""
        return [digest for number, digest in self._digests.items() if number > saves]
