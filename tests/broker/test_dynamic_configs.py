"""Dynamic broker configs: Kafka's precedence, applied to running topics, persisted, described."""

from __future__ import annotations

from pathlib import Path

import pytest

from rivven_kproto.broker.broker import Broker
from rivven_kproto.broker.config import BrokerConfig
from rivven_kproto.broker.topics import ConfigSource
from rivven_kproto.codec.errors import Errors, KafkaError

NOW = 1_700_000_000_000


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

    broker.set_broker_configs("", {"log.retention.ms": "1000", "message.max.bytes": "2000"})
    assert [p.config.retention_ms for p in broker.topic("plain").partitions] == [1000, 1000]
    assert broker.topic("plain").log_config.max_message_bytes == 2000
    assert broker.topic("own").log_config.retention_ms == 5000

    broker.set_broker_configs("1", {"log.retention.ms": "2000"})
    assert broker.topic("plain").log_config.retention_ms == 2000
    broker.create_topic("later", 1, 1, {}, NOW)
    assert broker.topic("later").log_config.retention_ms == 2000

    broker.set_broker_configs("1", {})  # AlterConfigs with nothing: this node's values cleared
    assert broker.topic("plain").log_config.retention_ms == 1000
    broker.set_broker_configs("", {})
    assert broker.topic("plain").log_config.retention_ms == static
    broker.close()


def test_the_values_survive_a_restart(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    broker.create_topic("t", 1, 1, {}, NOW)
    broker.set_broker_configs("", {"log.retention.ms": "1000"})
    broker.set_broker_configs("1", {"log.segment.bytes": "1048576"})
    broker.close()
    again = open_broker(tmp_path)
    assert (again.topic("t").log_config.retention_ms, again.topic("t").log_config.segment_bytes) == (1000, 1 << 20)
    assert again.dynamic.level("") == {"log.retention.ms": "1000"}
    again.close()


def test_describe_reports_kafkas_sources_and_synonyms(tmp_path: Path) -> None:
    broker = open_broker(tmp_path)
    broker.create_topic("t", 1, 1, {}, NOW)
    broker.set_broker_configs("", {"log.retention.ms": "1000"})
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

    (default,) = broker.describe_cluster_default_configs()
    assert (default.name, default.value, default.source) == (
        "log.retention.ms", "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    broker.close()


@pytest.mark.parametrize(("values", "error", "message"), [
    ({"num.partitions": "3", "log.retention.ms": "1"}, Errors.INVALID_REQUEST,
     "Cannot update these configs dynamically: Set(num.partitions)"),
    ({"log.retention.ms": "soon"}, Errors.INVALID_CONFIG, "log.retention.ms"),
    ({"message.max.bytes": "-1"}, Errors.INVALID_CONFIG, "message.max.bytes"),
])
def test_refused_changes_change_nothing(tmp_path: Path, values: dict[str, str], error: Errors, message: str) -> None:
    broker = open_broker(tmp_path)
    broker.create_topic("t", 1, 1, {}, NOW)
    before = broker.topic("t").log_config
    with pytest.raises(KafkaError) as info:
        broker.set_broker_configs("", values)
    assert info.value.error == error and message in (info.value.message or "")
    assert broker.topic("t").log_config == before and broker.dynamic.level("") == {}
    broker.set_broker_configs("", {"log.retention.ms": "1000"}, validate_only=True)
    assert broker.dynamic.level("") == {} and broker.topic("t").log_config == before
    broker.close()
