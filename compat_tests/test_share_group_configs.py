"""Per-group configs (Kafka's GROUP config resource) set with confluent-kafka's AdminClient, as
``kafka-configs --entity-type groups`` sets them, acting on share groups read by ``ShareConsumer``.

The broker keeps its defaults (``share.auto.offset.reset=latest``, ``share.isolation.level=
read_uncommitted``), so a group that gets records produced before it joined, or that never gets an
aborted transaction's records, does so only through its own configs. Every wait is bounded.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from .broker_process import BrokerProcess, module_broker
from .test_cli import failed, kproto, ok
from .test_share_groups import SENTINEL, TIMEOUT_S, consumer, fresh, has_sentinel, poll_until, produce, values
from .txn_helpers import create_topics

BROKER_ENV = {"KPROTO_GROUP_SHARE_HEARTBEAT_INTERVAL_MS": "200"}  # fast assignment; defaults otherwise


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from module_broker(tmp_path_factory, "share-configs", BROKER_ENV)


def set_group_configs(bootstrap: str, group: str, **configs: str | None) -> None:
    """IncrementalAlterConfigs on the group: SET each value, DELETE each None."""
    entries = [ConfigEntry(key.replace("_", "."), value,
                           incremental_operation=AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET)
               for key, value in configs.items()]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)])
    for future in futures.values():
        future.result(TIMEOUT_S)


def describe_group(bootstrap: str, group: str) -> dict[str, ConfigEntry]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    result: dict[str, ConfigEntry] = future.result(TIMEOUT_S)
    return result


def refusal(bootstrap: str, group: str, **configs: str) -> KafkaError:
    with pytest.raises(KafkaException) as caught:
        set_group_configs(bootstrap, group, **configs)
    error: KafkaError = caught.value.args[0]
    return error


def test_a_group_set_to_earliest_gets_what_was_produced_before_it_joined(broker: BrokerProcess) -> None:
    topic, group = fresh("cfg-earliest"), fresh("g")
    create_topics(broker.bootstrap, {topic: 1})
    before = [b"before%d" % i for i in range(5)]
    produce(broker.bootstrap, topic, before)
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest")
    described = describe_group(broker.bootstrap, group)
    assert described["share.auto.offset.reset"].value == "earliest"
    assert described["share.auto.offset.reset"].source == ConfigSource.GROUP_CONFIG.value
    assert described["share.isolation.level"].value == "read_uncommitted"  # the broker's, as DEFAULT_CONFIG
    assert described["share.isolation.level"].source == ConfigSource.DEFAULT_CONFIG.value
    share = consumer(broker.bootstrap, group, topic)
    try:
        produce(broker.bootstrap, topic, [SENTINEL])
        got = poll_until(share, has_sentinel)
        assert values(got) == [*before, SENTINEL]
    finally:
        share.close()


def test_a_read_committed_group_never_gets_an_aborted_transaction(broker: BrokerProcess) -> None:
    topic, group = fresh("cfg-committed"), fresh("g")
    create_topics(broker.bootstrap, {topic: 1})
    set_group_configs(broker.bootstrap, group, share_auto_offset_reset="earliest",
                      share_isolation_level="read_committed")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": fresh("tx"), "linger.ms": 0})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"aborted")
    producer.flush(TIMEOUT_S)
    producer.abort_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed")
    producer.commit_transaction(TIMEOUT_S)
    produce(broker.bootstrap, topic, [SENTINEL])
    share = consumer(broker.bootstrap, group, topic)
    try:
        assert values(poll_until(share, has_sentinel)) == [b"committed", SENTINEL]
    finally:
        share.close()


def test_bad_group_configs_get_kafkas_errors_and_change_nothing(broker: BrokerProcess) -> None:
    group = fresh("g")
    assert refusal(broker.bootstrap, group, share_auto_offset_reset="sometimes").code() == KafkaError.INVALID_CONFIG
    assert refusal(broker.bootstrap, group, share_record_lock_duration_ms="10").code() == KafkaError.INVALID_CONFIG
    assert refusal(broker.bootstrap, group, share_isolation_level="serializable").code() == KafkaError.INVALID_CONFIG
    assert refusal(broker.bootstrap, group, no_such_key="1").code() == KafkaError.INVALID_CONFIG
    # Within the broker's bounds, as Kafka's GroupConfig checks them (group.share.min.session.timeout.ms).
    error = refusal(broker.bootstrap, group, share_session_timeout_ms="1000")
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms" in error.str()
    assert all(entry.source == ConfigSource.DEFAULT_CONFIG.value for entry in describe_group(broker.bootstrap, group).values())


def test_kproto_configs_sets_describes_and_deletes_a_groups_configs(broker: BrokerProcess) -> None:
    group = fresh("g")
    assert ok(broker.bootstrap, "configs", "set", "--group", group, "share.auto.offset.reset=by_duration:PT1H") == {
        "resource": {"type": "group", "name": group}, "set": {"share.auto.offset.reset": "by_duration:PT1H"}}
    own = ok(broker.bootstrap, "configs", "describe", "--group", group, "--overrides")["configs"]
    assert [(c["name"], c["value"], c["source"]) for c in own] == [
        ("share.auto.offset.reset", "by_duration:PT1H", "GROUP_CONFIG")]
    failed(kproto(broker.bootstrap, "configs", "set", "--group", group, "share.isolation.level=dirty"), 1,
           "error: INVALID_CONFIG: ")
    ok(broker.bootstrap, "configs", "delete", "--group", group, "share.auto.offset.reset")
    assert ok(broker.bootstrap, "configs", "describe", "--group", group, "--overrides")["configs"] == []


def test_group_configs_survive_kill_9_and_delete_restores_the_default(broker: BrokerProcess) -> None:
    group = fresh("g")
    set_group_configs(broker.bootstrap, group, share_record_lock_duration_ms="20000", share_isolation_level="read_committed")
    port = broker.port
    broker.kill()  # acknowledged, so durable
    broker.start(port or 0)
    described = describe_group(broker.bootstrap, group)
    assert (described["share.record.lock.duration.ms"].value, described["share.isolation.level"].value) == (
        "20000", "read_committed")
    set_group_configs(broker.bootstrap, group, share_isolation_level=None)
    described = describe_group(broker.bootstrap, group)
    assert described["share.isolation.level"].value == "read_uncommitted"
    assert described["share.isolation.level"].source == ConfigSource.DEFAULT_CONFIG.value
    assert described["share.record.lock.duration.ms"].value == "20000"
