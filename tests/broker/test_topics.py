"""Topic names, the topic-config schema and the Broker's topic/config operations (Kafka 3.9 rules)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig, load_config
from rivven_kproto.broker.log.config import LogConfig
from rivven_kproto.broker.topics import (
    TOPIC_CONFIG_DEFAULTS,
    TOPIC_CONFIGS,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    canonical_value,
    format_value,
    is_list_config,
    parse_config_value,
    validate_topic_config_values,
    validate_topic_name,
)
from rivven_kproto.codec.errors import Errors, KafkaError

NOW = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(BrokerConfig(data_dir=tmp_path / "data", num_partitions=2), NOW)
    yield broker
    broker.close()


def error_of(call: object, *args: object, **kwargs: object) -> KafkaError:
    with pytest.raises(KafkaError) as info:
        call(*args, **kwargs)  # type: ignore[operator]
    return info.value


# -- names ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is invalid: the empty string is not allowed"),
        (".", "Topic name is invalid: '.' is not allowed"),
        ("..", "Topic name is invalid: '..' is not allowed"),
        (
            "a" * 250,
            f"Topic name is invalid: the length of '{'a' * 250}' is longer than the max allowed length 249",
        ),
        (
            "a b",
            "Topic name is invalid: 'a b' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        ),
        (
            "é",
            "Topic name is invalid: 'é' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'",
        ),
    ],
)
def test_illegal_topic_names(name: str, message: str) -> None:
    exc = error_of(validate_topic_name, name)
    assert (exc.error, exc.message) == (Errors.INVALID_TOPIC_EXCEPTION, message)


@pytest.mark.parametrize("name", ["a", "A-b_c.9", "a" * 249, "..."])
def test_legal_topic_names(name: str) -> None:
    validate_topic_name(name)


# -- config parsing and validation ----------------------------------------------------------------


def test_parse_like_java() -> None:
    assert parse_config_value("x", ConfigType.INT, " 42 ") == 42
    assert parse_config_value("x", ConfigType.LONG, "+7") == 7
    assert parse_config_value("x", ConfigType.BOOLEAN, " TRUE") is True
    assert parse_config_value("x", ConfigType.LIST, "compact , delete") == ["compact", "delete"]
    assert parse_config_value("x", ConfigType.LIST, "  ") == []
    assert parse_config_value("x", ConfigType.DOUBLE, "0.25") == 0.25
    assert parse_config_value("x", ConfigType.STRING, " gzip ") == "gzip"
    for bad in ("1_000", "1.0", "٣", "2147483648", ""):
        exc = error_of(parse_config_value, "segment.bytes", ConfigType.INT, bad)
        assert exc.message == f"Invalid value {bad} for configuration segment.bytes: Not a number of type INT"
    exc = error_of(parse_config_value, "preallocate", ConfigType.BOOLEAN, "yes")
    assert (
        exc.message
        == "Invalid value yes for configuration preallocate: Expected value to be either true or false"
    )


def test_format_value() -> None:
    assert format_value(ConfigType.DOUBLE, 1.0) == "1.0"
    assert format_value(ConfigType.DOUBLE, 0.5) == "0.5"
    assert format_value(ConfigType.LIST, ["compact", "delete"]) == "compact,delete"
    assert format_value(ConfigType.BOOLEAN, False) == "false"
    assert canonical_value("cleanup.policy", "compact , delete") == "compact,delete"
    assert canonical_value("retention.ms", " 1000 ") == "1000"
    assert canonical_value("min.cleanable.dirty.ratio", "1") == "1.0"


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
        (
            {"segment.bytes": "13"},
            "Invalid value 13 for configuration segment.bytes: Value must be at least 14",
        ),
        ({"segment.ms": "0"}, "Invalid value 0 for configuration segment.ms: Value must be at least 1"),
        ({"retention.ms": "x"}, "Invalid value x for configuration retention.ms: Not a number of type LONG"),
        (
            {"min.insync.replicas": "0"},
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
        (
            {"cleanup.policy": "compact,nope"},
            "Invalid value nope for configuration cleanup.policy: String must be one of: compact, delete",
        ),
        (
            {"compression.type": "brotli"},
            "Invalid value brotli for configuration compression.type: String must be one of: "
            "uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        (
            {"message.timestamp.type": "Now"},
            "Invalid value Now for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime",
        ),
        (
            {"min.cleanable.dirty.ratio": "1.5"},
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
        ),
        (
            {"compression.gzip.level": "0"},
            "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1",
        ),
        (
            {"leader.replication.throttled.replicas": "0:1,x"},
            "Invalid value [0:1, x] for configuration leader.replication.throttled.replicas: "
            "leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following "
            "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
        ),
        (
            {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        ),
        (
            {"remote.storage.enable": "true"},
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
        ),
    ],
)
def test_invalid_topic_configs(configs: dict[str, str], message: str) -> None:
    exc = error_of(validate_topic_config_values, configs)
    assert (exc.error, exc.message) == (Errors.INVALID_CONFIG, message)


def test_valid_topic_configs() -> None:
    parsed = validate_topic_config_values(
        {
            "cleanup.policy": "compact,delete",
            "compression.type": "zstd",
            "retention.ms": "-1",
            "leader.replication.throttled.replicas": "*",
            "follower.replication.throttled.replicas": "0:1,1:1",
            "min.cleanable.dirty.ratio": "0.1",
            "unclean.leader.election.enable": "False",
        }
    )
    assert parsed["cleanup.policy"] == ["compact", "delete"]
    assert parsed["retention.ms"] == -1
    assert parsed["unclean.leader.election.enable"] is False
    # An empty cleanup.policy is an empty list, which Kafka 3.9 accepts.
    assert validate_topic_config_values({"cleanup.policy": ""}) == {"cleanup.policy": []}


def test_schema_defaults_are_valid_and_consistent() -> None:
    validate_topic_config_values({key: spec.default for key, spec in TOPIC_CONFIGS.items()})
    assert set(TOPIC_CONFIG_DEFAULTS) < set(TOPIC_CONFIGS)
    assert "segment.bytes" not in TOPIC_CONFIG_DEFAULTS  # the log's own settings come from LogConfig
    assert [key for key in TOPIC_CONFIGS if is_list_config(key)] == [
        "cleanup.policy",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    ]


# -- Broker: creation ----------------------------------------------------------------------------


def test_create_topic_check_order(broker: Broker) -> None:
    broker.create_topic("a.b", 1, 1, {}, NOW)
    cases = [
        (("a.b", 0, 0, {"x": "y"}), Errors.TOPIC_ALREADY_EXISTS, "Topic 'a.b' already exists."),
        (("a_b", 1, 1, {}), Errors.INVALID_TOPIC_EXCEPTION, "Topic 'a_b' collides with existing topic: a.b"),
        (("bad name", 1, 1, {}), Errors.INVALID_TOPIC_EXCEPTION, None),
        (("t", 0, 0, {"x": "y"}), Errors.INVALID_CONFIG, "Unknown topic config name: x"),
        (("t", 0, 0, {}), Errors.INVALID_REPLICATION_FACTOR, None),
        (
            ("t", 0, 1, {}),
            Errors.INVALID_PARTITIONS,
            "Number of partitions was set to an invalid non-positive value.",
        ),
        (("t", -2, 1, {}), Errors.INVALID_PARTITIONS, None),
        (("t", 1, -2, {}), Errors.INVALID_REPLICATION_FACTOR, None),
        (
            ("t", 0, 3, {}),
            Errors.INVALID_PARTITIONS,
            None,
        ),
        (
            ("t", 1, 3, {}),
            Errors.INVALID_REPLICATION_FACTOR,
            "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached "
            "because only 1 broker(s) are registered.",
        ),
    ]
    for args, error, message in cases:
        exc = error_of(broker.create_topic, *args, NOW)
        assert exc.error == error, args
        if message is not None:
            assert exc.message == message
    assert list(broker.topics) == ["a.b"]


def test_create_topic_defaults_and_validate_only(broker: Broker) -> None:
    assert broker.create_topic("v", -1, -1, {}, NOW, validate_only=True) is None
    assert "v" not in broker.topics
    topic = broker.create_topic("t", -1, -1, {"retention.ms": "1000"}, NOW)
    assert topic is not None and len(topic.partitions) == 2
    assert topic.log_config.retention_ms == 1000


def test_default_replication_factor_is_honoured(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path, default_replication_factor=3), NOW)
    try:
        assert error_of(broker.create_topic, "t", 1, -1, {}, NOW).error == Errors.INVALID_REPLICATION_FACTOR
        assert broker.create_topic("t", 1, 1, {}, NOW) is not None
    finally:
        broker.close()


def test_create_partitions_messages(broker: Broker) -> None:
    broker.create_topic("t", 2, 1, {}, NOW)
    exc = error_of(broker.create_partitions, "t", 2, NOW)
    assert (exc.error, exc.message) == (Errors.INVALID_PARTITIONS, "Topic already has 2 partition(s).")
    exc = error_of(broker.create_partitions, "t", 1, NOW)
    assert exc.message == "The topic t currently has 2 partition(s); 1 would not be an increase."
    broker.create_partitions("t", 3, NOW, validate_only=True)
    assert len(broker.topic("t").partitions) == 2
    broker.create_partitions("t", 3, NOW)
    assert len(broker.topic("t").partitions) == 3


# -- Broker: config descriptions ------------------------------------------------------------------


def entries_by_name(entries: list) -> dict:  # type: ignore[type-arg]
    return {entry.name: entry for entry in entries}


def test_describe_topic_configs_sources_and_synonyms(broker: Broker) -> None:
    broker.create_topic("t", 1, 1, {"cleanup.policy": "compact , delete", "retention.ms": "1000"}, NOW)
    entries = entries_by_name(broker.describe_topic_configs("t"))
    assert list(entries) == sorted(TOPIC_CONFIGS)
    policy = entries["cleanup.policy"]
    assert (policy.value, policy.source, policy.config_type) == (
        "compact,delete",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigType.LIST,
    )
    assert policy.synonyms == (
        ConfigSynonym("cleanup.policy", "compact,delete", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
    )
    # retention.ms's broker synonym log.retention.ms has no default in Kafka: no DEFAULT synonym.
    assert entries["retention.ms"].synonyms == (
        ConfigSynonym("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
    )
    segment = entries["segment.bytes"]
    assert (segment.value, segment.source, segment.config_type) == (
        str(1 << 30),
        ConfigSource.DEFAULT_CONFIG,
        ConfigType.INT,
    )
    assert segment.synonyms == (
        ConfigSynonym("log.segment.bytes", str(1 << 30), ConfigSource.DEFAULT_CONFIG),
    )
    assert not any(entry.read_only or entry.sensitive for entry in entries.values())
    # CreateTopics (v5+) reports overrides as sent.
    raw = entries_by_name(
        broker.topic_config_description({"cleanup.policy": "compact , delete"}, canonical=False)
    )
    assert raw["cleanup.policy"].value == "compact , delete"


def test_describe_topic_configs_static_broker_setting(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path, log=LogConfig(segment_bytes=1 << 20))
    broker = Broker(config, NOW)
    try:
        broker.create_topic("t", 1, 1, {}, NOW)
        segment = entries_by_name(broker.describe_topic_configs("t"))["segment.bytes"]
        assert (segment.value, segment.source) == (str(1 << 20), ConfigSource.STATIC_BROKER_CONFIG)
        assert segment.synonyms == (
            ConfigSynonym("log.segment.bytes", str(1 << 20), ConfigSource.STATIC_BROKER_CONFIG),
            ConfigSynonym("log.segment.bytes", str(1 << 30), ConfigSource.DEFAULT_CONFIG),
        )
    finally:
        broker.close()


def test_describe_broker_configs(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path, num_partitions=4, node_id=3), NOW)
    try:
        entries = entries_by_name(broker.describe_broker_configs())
    finally:
        broker.close()
    assert list(entries) == sorted(entries)
    for name in (
        "num.partitions",
        "auto.create.topics.enable",
        "socket.request.max.bytes",
        "connections.max.idle.ms",
        "broker.id",
        "node.id",
        "log.dirs",
        "default.replication.factor",
        "fsync",
    ):
        assert entries[name].read_only, name
    for name in ("log.segment.bytes", "log.retention.ms", "log.retention.bytes", "message.max.bytes"):
        assert not entries[name].read_only, name  # dynamic broker configs
    partitions = entries["num.partitions"]
    assert (partitions.value, partitions.source, partitions.config_type) == (
        "4",
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigType.INT,
    )
    assert partitions.synonyms == (
        ConfigSynonym("num.partitions", "4", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("num.partitions", "1", ConfigSource.DEFAULT_CONFIG),
    )
    auto = entries["auto.create.topics.enable"]
    assert (auto.value, auto.source, auto.config_type) == (
        "true",
        ConfigSource.DEFAULT_CONFIG,
        ConfigType.BOOLEAN,
    )
    assert entries["node.id"].value == entries["broker.id"].value == "3"
    assert entries["log.dirs"].value == str(tmp_path)


def test_set_topic_configs_replaces_and_persists(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path), NOW)
    broker.create_topic("t", 1, 1, {"retention.ms": "1000", "cleanup.policy": "compact"}, NOW)
    exc = error_of(broker.set_topic_configs, "t", {"segment.ms": "0"})
    assert exc.error == Errors.INVALID_CONFIG
    broker.set_topic_configs("t", {"segment.bytes": "1048576"}, validate_only=True)
    assert broker.topic("t").meta.configs == {"retention.ms": "1000", "cleanup.policy": "compact"}
    broker.set_topic_configs("t", {"segment.bytes": "1048576"})
    assert broker.topic("t").log_config.segment_bytes == 1 << 20
    assert broker.topic("t").log_config.retention_ms == LogConfig().retention_ms
    broker.close()
    reopened = Broker(BrokerConfig(data_dir=tmp_path), NOW)
    try:
        assert reopened.topic("t").meta.configs == {"segment.bytes": "1048576"}
    finally:
        reopened.close()


def test_a_topic_whose_partitions_fail_to_open_is_not_created(tmp_path: Path) -> None:
    """All or none: the open-files limit (or the disk) failing the 4th partition leaves no topic,
    no partition directories and no open files behind, and the request gets the error."""
    broker = Broker(BrokerConfig(data_dir=tmp_path), 1000)
    real_open = broker.storage.open_partition
    opened: list[object] = []

    def open_partition(*args: object, **kwargs: object) -> object:
        if len(opened) == 3:
            raise OSError(24, "Too many open files")
        opened.append(real_open(*args, **kwargs))  # type: ignore[arg-type]
        return opened[-1]

    broker.storage.open_partition = open_partition  # type: ignore[method-assign]
    error = error_of(broker.create_topic, "many", 8, 1, {}, 1000)
    assert error.error == Errors.UNKNOWN_SERVER_ERROR and "none were created" in (error.message or "")
    assert "many" not in broker.topics and "many" not in broker.store.topics
    assert all(p.closed for p in opened)  # type: ignore[attr-defined]
    assert not [d for d in tmp_path.iterdir() if d.name.startswith("many-") and not d.name.endswith("-deleted")]
    broker.storage.open_partition = real_open  # type: ignore[method-assign]
    assert broker.create_topic("many", 8, 1, {}, 1000) is not None  # the name is free again
    broker.close()


def test_describe_broker_configs_reports_every_listener(tmp_path: Path) -> None:
    """#37 item 13: all the listeners, their advertised addresses and protocols, in Kafka's spelling
    (was: the first listener only, always as PLAINTEXT)."""
    properties = tmp_path / "server.properties"
    properties.write_text(
        "listeners=EXTERNAL://127.0.0.1:9092,INTERNAL://[::1]:9093,CLIENT://:9094\n"
        "listener.security.protocol.map=EXTERNAL:SASL_PLAINTEXT,INTERNAL:SSL,CLIENT:PLAINTEXT\n"
        "advertised.listeners=EXTERNAL://kafka.example:19092,CLIENT://client.example:19094\n"
        f"log.dirs={tmp_path / 'data'}\n"
    )
    broker = Broker(load_config(properties), NOW)
    try:
        entries = entries_by_name(broker.describe_broker_configs())
    finally:
        broker.close()
    values = {name: (entries[name].value, entries[name].source, entries[name].read_only)
              for name in ("listeners", "advertised.listeners", "listener.security.protocol.map")}
    static = ConfigSource.STATIC_BROKER_CONFIG
    assert values == {
        "listeners": ("EXTERNAL://127.0.0.1:9092,INTERNAL://[::1]:9093,CLIENT://0.0.0.0:9094", static, True),
        # INTERNAL has no advertised address of its own: the broker's advertised host (the first
        # listener's) with its own port, as the server advertises it.
        "advertised.listeners": (
            "EXTERNAL://kafka.example:19092,INTERNAL://kafka.example:9093,CLIENT://client.example:19094", static, True),
        "listener.security.protocol.map": ("EXTERNAL:SASL_PLAINTEXT,INTERNAL:SSL,CLIENT:PLAINTEXT", static, True),
    }


def test_describe_broker_configs_default_listener(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path), NOW)
    try:
        entries = entries_by_name(broker.describe_broker_configs())
    finally:
        broker.close()
    assert (entries["listeners"].value, entries["listeners"].source) == (
        "PLAINTEXT://127.0.0.1:9092", ConfigSource.DEFAULT_CONFIG)
    assert entries["listener.security.protocol.map"].value == (
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT")  # Kafka's default
    assert entries["advertised.listeners"].value == "PLAINTEXT://localhost:9092"
