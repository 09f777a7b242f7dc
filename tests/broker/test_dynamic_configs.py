"""Dynamic broker configs: Kafka's precedence, applied to running topics, persisted, described."""

from __future__ import annotations

from pathlib import Path

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.topics import ConfigSource
from rivven_kproto.codec.errors import Errors, KafkaError

NOW = 1_700_000_000_000
SEEDED = {"min.insync.replicas": "1"}  # the cluster default Kafka 4.1's controller writes (KIP-966)


def open_broker(path: Path) -> Broker:
    return Broker(BrokerConfig(data_dir=path, node_id=1), NOW)


def entry(entries: list, name: str):  # noqa: ANN201 - a ConfigEntry
    (found,) = [e for e in entries if e.name == name]
    return found


def test_precedence_node_over_cluster_default_over_static_and_topic_override_over_all(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    broker.create_topic("plain", 2, 1, {}, NOW)
    broker.create_topic("own", 1, 1, {"retention.ms": "5000"}, NOW)
    static = broker.topic("plain").log_config.retention_ms

    broker.set_broker_configs("", {**SEEDED, "log.retention.ms": "1000", "message.max.bytes": "2000"})
    assert [p.config.retention_ms for p in broker.topic("plain").partitions] == [1000, 1000]
    assert broker.topic("plain").log_config.max_message_bytes == 2000
    assert broker.topic("own").log_config.retention_ms == 5000

    broker.set_broker_configs("1", {"log.retention.ms": "2000"})
    assert broker.topic("plain").log_config.retention_ms == 2000
    broker.create_topic("later", 1, 1, {}, NOW)
    assert broker.topic("later").log_config.retention_ms == 2000

    broker.set_broker_configs("1", {})  # AlterConfigs with nothing: this node's values cleared
    assert broker.topic("plain").log_config.retention_ms == 1000
    broker.set_broker_configs("", SEEDED)  # all but the min.insync.replicas Kafka 4.1 keeps there
    assert broker.topic("plain").log_config.retention_ms == static
    broker.close()


def test_the_values_survive_a_restart(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    broker.create_topic("t", 1, 1, {}, NOW)
    broker.set_broker_configs("", {**SEEDED, "log.retention.ms": "1000"})
    broker.set_broker_configs("1", {"log.segment.bytes": "1048576"})
    broker.close()
    again = open_broker(tmp_path)
    assert (again.topic("t").log_config.retention_ms, again.topic("t").log_config.segment_bytes) == (1000, 1 << 20)
    assert again.dynamic.level("") == {**SEEDED, "log.retention.ms": "1000"}
    again.close()


def test_describe_reports_kafkas_sources_and_synonyms(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    broker.create_topic("t", 1, 1, {}, NOW)
    broker.set_broker_configs("", {**SEEDED, "log.retention.ms": "1000"})
    broker.set_broker_configs("1", {"log.retention.ms": "2000"})

    retention = entry(broker.describe_broker_configs(), "log.retention.ms")
    assert (retention.value, retention.source, retention.read_only) == ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert [(s.value, s.source) for s in retention.synonyms][:2] == [
        ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG), ("1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    assert entry(broker.describe_broker_configs(), "node.id").read_only

    topic = entry(broker.describe_topic_configs("t"), "retention.ms")
    assert (topic.value, topic.source) == ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [(s.name, s.source) for s in topic.synonyms][:2] == [
        ("log.retention.ms", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.ms", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]

    assert [(d.name, d.value, d.source) for d in broker.describe_cluster_default_configs()] == [
        ("log.retention.ms", "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("min.insync.replicas", "1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    broker.close()


@pytest.mark.parametrize(("values", "error", "message"), [
    ({"num.partitions": "3", "log.retention.ms": "1"}, Errors.INVALID_REQUEST,
     "Cannot update these configs dynamically: Set(num.partitions)"),
    ({**SEEDED, "log.retention.ms": "soon"}, Errors.INVALID_CONFIG, "log.retention.ms"),
    ({**SEEDED, "message.max.bytes": "-1"}, Errors.INVALID_CONFIG, "message.max.bytes"),
    ({**SEEDED, "num.io.threads": "many"}, Errors.INVALID_CONFIG, "num.io.threads"),
    ({"log.retention.ms": "1000"}, Errors.INVALID_CONFIG,
     "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."),
    ({**SEEDED, "sasl.kerberos.min.time.before.relogin": "60000"}, Errors.INVALID_REQUEST,
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "sasl.kerberos.min.time.before.relogin"),
])
def test_refused_changes_change_nothing(tmp_path: Path, values: dict[str, str], error: Errors, message: str) -> None:
    broker = open_broker(tmp_path)
    broker.create_topic("t", 1, 1, {}, NOW)
    before = broker.topic("t").log_config
    with pytest.raises(KafkaError) as info:
        broker.set_broker_configs("", values)
    assert info.value.error == error and message in (info.value.message or "")
    assert broker.topic("t").log_config == before and broker.dynamic.level("") == SEEDED
    broker.set_broker_configs("", {**SEEDED, "log.retention.ms": "1000"}, validate_only=True)
    assert broker.dynamic.level("") == SEEDED and broker.topic("t").log_config == before
    broker.close()


def test_kafka_41_min_insync_replicas_is_a_cluster_default_topics_report(tmp_path: Path) -> None:
    """Kafka 4.1 (KIP-966): the cluster default holds min.insync.replicas; topics report it as
    DYNAMIC_DEFAULT_BROKER_CONFIG with that synonym first, then Kafka's default; it is not set per broker."""
    broker = open_broker(tmp_path)
    broker.create_topic("t", 1, 1, {}, NOW)
    min_isr = entry(broker.describe_topic_configs("t"), "min.insync.replicas")
    assert (min_isr.value, min_isr.source) == ("1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in min_isr.synonyms] == [
        ("min.insync.replicas", "1", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("min.insync.replicas", "1", ConfigSource.DEFAULT_CONFIG)]
    broker.set_broker_configs("", {"min.insync.replicas": "2"})
    assert entry(broker.describe_topic_configs("t"), "min.insync.replicas").value == "2"
    with pytest.raises(KafkaError, match="Broker-level min.insync.replicas cannot be altered"):
        broker.set_broker_configs("1", {"min.insync.replicas": "2"})
    broker.close()


def test_per_broker_keys_kafka_accepts_are_stored_and_described(tmp_path: Path) -> None:
    """Keys Kafka's broker takes dynamically but this one does not act on (#42): kept, described
    (a password as a sensitive null), and still read back after a restart."""
    broker = open_broker(tmp_path)
    broker.set_broker_configs("1", {"sasl.kerberos.min.time.before.relogin": "60000", "ssl.key.password": "secret"})
    relogin = entry(broker.describe_broker_configs(), "sasl.kerberos.min.time.before.relogin")
    assert (relogin.value, relogin.source, relogin.read_only) == ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    password = entry(broker.describe_broker_configs(), "ssl.key.password")
    assert (password.value, password.sensitive, [s.value for s in password.synonyms]) == (None, True, [None])
    broker.close()
    again = open_broker(tmp_path)
    assert again.dynamic.level("1")["sasl.kerberos.min.time.before.relogin"] == "60000"
    again.close()
