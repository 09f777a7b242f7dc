"""Dynamic broker configs as ``kafka-configs --entity-type brokers`` would set them: the cluster
default (through ``kproto configs --broker-defaults``: confluent-kafka refuses a broker resource
with an empty name) and this broker's own values (confluent-kafka's AdminClient); their effect on
topics without an override, Kafka's sources in DescribeConfigs, refusal of read-only keys, a restart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from .broker_process import BrokerProcess

TIMEOUT_S = 30


def set_configs(admin: AdminClient, broker_name: str, values: dict[str, str]) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in values.items()]
    resource = ConfigResource(ResourceType.BROKER, broker_name, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def kproto(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rivven_kproto", "--bootstrap", bootstrap, "--format", "json", *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def described(admin: AdminClient, kind: ResourceType, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(TIMEOUT_S)


def test_cluster_default_and_broker_values_reach_topics_and_survive_a_restart(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", tmp_path / "broker.log").start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic("dyn-plain", 1, 1),
                                           NewTopic("dyn-own", 1, 1, config={"retention.ms": "5000"})]).values():
            future.result(TIMEOUT_S)

        done = kproto(broker.bootstrap, "configs", "set", "--broker-defaults", "log.retention.ms=3600000")
        assert done.returncode == 0, done.stderr
        plain = described(admin, ResourceType.TOPIC, "dyn-plain")["retention.ms"]
        assert (plain.value, plain.source) == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        own = described(admin, ResourceType.TOPIC, "dyn-own")["retention.ms"]
        assert (own.value, own.source) == ("5000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        done = kproto(broker.bootstrap, "configs", "describe", "--broker-defaults")
        assert done.returncode == 0, done.stderr
        assert [(e["name"], e["value"]) for e in json.loads(done.stdout)["configs"]] == [
            ("log.retention.ms", "3600000"), ("min.insync.replicas", "1")]  # Kafka 4.1 keeps the latter there

        set_configs(admin, "0", {"log.retention.ms": "7200000"})
        mine = described(admin, ResourceType.BROKER, "0")["log.retention.ms"]
        assert (mine.value, mine.source, mine.is_read_only) == (
            "7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)

        with pytest.raises(KafkaException) as info:
            set_configs(admin, "0", {"num.partitions": "3"})
        assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
        assert "num.partitions" in info.value.args[0].str()
        assert described(admin, ResourceType.BROKER, "0")["num.partitions"].is_read_only

        broker.restart()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        plain = described(admin, ResourceType.TOPIC, "dyn-plain")["retention.ms"]
        assert (plain.value, plain.source) == ("7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    finally:
        broker.stop()


def test_per_broker_keys_kafka_accepts_dynamically(broker: BrokerProcess) -> None:
    """librdkafka's admin tests set ``sasl.kerberos.min.time.before.relogin`` on broker "0" (#42):
    accepted as Kafka accepts it, described back as this broker's dynamic value (it changes
    nothing here); at the cluster default Kafka wants a broker id for it."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    set_configs(admin, "0", {"sasl.kerberos.min.time.before.relogin": "58000", "num.io.threads": "4"})
    configs = described(admin, ResourceType.BROKER, "0")
    relogin = configs["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source, relogin.is_read_only) == (
        "58000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    assert configs["num.io.threads"].value == "4"
    resource = ConfigResource(ResourceType.BROKER, "0", set_config={"sasl.kerberos.min.time.before.relogin": "59000"})
    admin.alter_configs([resource])[resource].result(TIMEOUT_S)  # the legacy AlterConfigs too
    assert described(admin, ResourceType.BROKER, "0")["sasl.kerberos.min.time.before.relogin"].value == "59000"
