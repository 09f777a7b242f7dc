"""Dynamic broker configs: the log defaults an operator changes at run time, as Kafka's are.

``kafka-configs --alter --entity-type brokers --entity-default`` (the cluster default, resource
name "") or ``--entity-name <node id>`` (this broker) set Kafka's broker names of the topic
defaults (``log.retention.ms``, ``message.max.bytes``, ...). Precedence, as Kafka's: this node's
value, then the cluster default, then the static configuration, then Kafka's default; a topic's own
override still wins over all of them. The values are kept in the metadata store (a document, so
either engine), applied to every topic without an override at once, and reloaded at start.
The other keys Kafka 4.1 accepts dynamically (``dynamic_keys``) are stored and described and act on
nothing here. Everything else a broker has is read-only: changing it is INVALID_REQUEST naming the keys.

As Kafka 4.1's controller with Eligible Leader Replicas (KIP-966, on by default for new clusters),
the cluster default always holds ``min.insync.replicas`` (the static value, 1, until changed):
removing it there (also by an AlterConfigs that leaves it out) or setting it on a broker id is
INVALID_CONFIG.
"""

from __future__ import annotations

from pathlib import Path

from rivven_kproto.codec.errors import Errors, KafkaError

from .config_levels import parse_levels, save_level
from .durable.work import BlockingWork, Document
from .dynamic_keys import PER_BROKER, TOPIC_SYNONYMS, config_type
from .log.config import LogConfig
from .topics import (
    TOPIC_CONFIGS,
    ConfigType,
    parse_config_value,
    validate_topic_config_values,
)

FILE_NAME = "broker_configs.json"
CLUSTER_DEFAULT = ""  # the resource name of the cluster-wide default
MIN_ISR = "min.insync.replicas"
# What the cluster default holds before anyone sets anything (Kafka 4.1's controller writes it).
CLUSTER_SEEDED = {MIN_ISR: TOPIC_CONFIGS[MIN_ISR].default}

# The topic defaults the log honours, by their broker names (log.retention.ms -> retention.ms).
TOPIC_KEY_OF: dict[str, str] = {
    spec.broker_name: name
    for name, spec in TOPIC_CONFIGS.items()
    if spec.broker_name is not None and name in LogConfig.topic_keys()
}


class DynamicBrokerConfigs:
    """The persisted dynamic values: the cluster default and per node id, by broker key."""

    def __init__(self, document: Path | Document, work: BlockingWork | None = None) -> None:
        self.document = document if isinstance(document, Document) else Document(document)
        self.work = work
        self.levels: dict[str, dict[str, str]] = {}
        self.reload(self.document.read())

    def reload(self, raw: bytes | None) -> None:
        """Take the values as stored (at start, and on a broker following the controller)."""
        self.levels = parse_levels(raw, self.document)

    def level(self, name: str) -> dict[str, str]:
        """The values set for ``name`` ("" for the cluster default, else a node id)."""
        seeded = CLUSTER_SEEDED if name == CLUSTER_DEFAULT else {}
        return {**seeded, **self.levels.get(name, {})}

    def effective(self, node_id: int) -> dict[str, str]:
        """Topic keys and values in force on ``node_id``: its own over the cluster default."""
        merged = {**self.levels.get(CLUSTER_DEFAULT, {}), **self.levels.get(str(node_id), {})}
        return {TOPIC_KEY_OF[key]: value for key, value in merged.items() if key in TOPIC_KEY_OF}

    def replace(self, name: str, values: dict[str, str], base: LogConfig) -> None:
        """Set ``name``'s values to exactly ``values`` (AlterConfigs), after Kafka's checks:
        read-only keys INVALID_REQUEST, bad values INVALID_CONFIG; then save."""
        self.check(values, base, name)
        save_level(self.document, self.work, self.levels, name, values)

    @staticmethod
    def check(values: dict[str, str], base: LogConfig, name: str | None = None) -> None:
        """Kafka's checks of a level's new values (``name``: the level, None: not known)."""
        read_only = [key for key in values if config_type(key) is None]
        if read_only:
            raise KafkaError(
                Errors.INVALID_REQUEST, "Cannot update these configs dynamically: Set(" + ", ".join(read_only) + ")"
            )
        if name == CLUSTER_DEFAULT:
            per_broker = [key for key in values if key in PER_BROKER]
            if per_broker:
                raise KafkaError(Errors.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
                                 "broker id must be specified: " + ",".join(per_broker))
            if MIN_ISR not in values:
                raise KafkaError(Errors.INVALID_CONFIG,
                                 f"Cluster-level {MIN_ISR} cannot be removed while ELR is enabled.")
        elif MIN_ISR in values:
            raise KafkaError(Errors.INVALID_CONFIG, f"Broker-level {MIN_ISR} cannot be altered while ELR is enabled.")
        for key, value in values.items():
            topic_key = TOPIC_SYNONYMS.get(key)
            try:
                if topic_key is not None:
                    validate_topic_config_values({topic_key: value})
                    LogConfig.from_topic_config({topic_key: value}, base)
                else:
                    kind = config_type(key)
                    if kind in (ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE, ConfigType.BOOLEAN):
                        parse_config_value(key, kind, value)
            except KafkaError as exc:
                message = exc.message or ""
                raise KafkaError(exc.error, message.replace(topic_key, key) if topic_key else message) from None
