"""The typed broker config: defaults, server.properties, KPROTO_* env and flags, in that precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from rivven_kproto.broker.config import BrokerConfig, ConfigError, load_config, parse_host_port


def test_defaults() -> None:
    config = load_config()
    assert (config.listen_host, config.listen_port) == ("127.0.0.1", 9092)
    assert config.advertised == ("localhost", 9092)
    assert config.data_dir == Path("kproto-data")
    assert config.node_id == 0 and config.fsync == "interval" and config.auto_create_topics
    assert config.socket_request_max_bytes == 100 * 1024 * 1024


def test_a_node_id_from_any_source_is_kept_otherwise_the_store_may_assign_one(tmp_path: Path) -> None:
    assert load_config().assign_node_id
    assert not load_config(None, {"KPROTO_NODE_ID": "4"}).assign_node_id
    assert not load_config(None, None, {"node.id": "0"}).assign_node_id
    props = tmp_path / "server.properties"
    props.write_text("broker.id=2\n")
    assert (load_config(props).node_id, load_config(props).assign_node_id) == (2, False)
    assert not BrokerConfig().assign_node_id  # built in code: the node id given (0 by default)


def test_file_then_env_then_flags(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "# comment\nnum.partitions=3\nauto.create.topics.enable=false\nlog.segment.bytes: 1048576\n"
        "log.retention.hours=2\nlisteners=PLAINTEXT://0.0.0.0:9093\nlog.dirs=/var/kproto\n"
    )
    config = load_config(props)
    assert config.num_partitions == 3 and not config.auto_create_topics
    assert config.log.segment_bytes == 1048576 and config.log.retention_ms == 2 * 3_600_000
    assert (config.listen_host, config.listen_port) == ("0.0.0.0", 9093)
    assert config.data_dir == Path("/var/kproto")

    env = {"KPROTO_NUM_PARTITIONS": "5", "KPROTO_FSYNC": "always", "HOME": "/root"}
    config = load_config(props, env)
    assert config.num_partitions == 5 and config.fsync == "always"

    config = load_config(props, env, {"listen": "127.0.0.1:0", "fsync": "never", "data.dir": None})
    assert config.listen_port == 0 and config.fsync == "never" and config.data_dir == Path("/var/kproto")
    assert config.with_port(4242).advertised == ("localhost", 4242)


@pytest.mark.parametrize(
    "props",
    [
        {"num.partitions": "zero"},
        {"num.partitions": "0"},
        {"auto.create.topics.enable": "maybe"},
        {"fsync": "sometimes"},
        {"log.segment.bytes": "-5"},
        {"listen": "nohostport"},
    ],
)
def test_bad_values_are_config_errors(props: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        load_config(None, None, props)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.properties")


def test_parse_host_port() -> None:
    assert parse_host_port("PLAINTEXT://example:19092") == ("example", 19092)
    assert parse_host_port(":9092") == ("0.0.0.0", 9092)
    assert BrokerConfig(advertised_port=1).advertised == ("localhost", 1)


def test_listener_name_keys_apply_to_that_listener_only(tmp_path: Path) -> None:
    plain = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_{0}="{0}-pw";'
    config_file = tmp_path / "server.properties"
    config_file.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093\n"
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:SASL_SSL\n"
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n"
        f"sasl.jaas.config={plain.format('everyone')}\n"
        f"listener.name.internal.plain.sasl.jaas.config={plain.format('ops')}\n"
        "listener.name.internal.sasl.enabled.mechanisms=PLAIN\n"
        "listener.name.internal.scram-sha-512.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
        "listener.name.internal.ssl.principal.mapping.rules=RULE:^CN=([^,]*).*$/$1/L,DEFAULT\n"
        "connections.max.reauth.ms=60000\n"
    )
    config = load_config(config_file)
    outside, internal = config.security_for("SASL_PLAINTEXT"), config.security_for("internal")
    assert outside.plain_users == (("everyone", "everyone-pw"),)
    assert outside.sasl_mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert internal.plain_users == (("ops", "ops-pw"),) and internal.sasl_mechanisms == ("PLAIN",)
    assert len(internal.principal_mapping) == 2 and len(outside.principal_mapping) == 1
    assert outside.reauthentication_ms == internal.reauthentication_ms == 60000
    # A later layer (the environment) changes the global keys under the listener's own.
    layered = load_config(config_file, {"KPROTO_CONNECTIONS_MAX_REAUTH_MS": "5000"})
    assert layered.security_for("INTERNAL").reauthentication_ms == 5000


@pytest.mark.parametrize(
    ("key", "value"),
    [("ssl.principal.mapping.rules", "RULE:^CN=(.*$/$1/"), ("listener.name.x.ssl.principal.mapping.rules", "NOPE"),
     ("connections.max.reauth.ms", "-1")],
)
def test_bad_security_values_are_config_errors(key: str, value: str) -> None:
    with pytest.raises(ConfigError):
        load_config(None, None, {key: value})


def test_storage_engine_from_file_env_and_flags(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("kproto.storage=postgresql://a@127.0.0.1/one\nkproto.storage.standby=true\n")
    config = load_config(props)
    assert (config.storage, config.storage_standby) == ("postgresql://a@127.0.0.1/one", True)
    config = load_config(props, {"KPROTO_STORAGE": "postgresql://b@127.0.0.1/two"})
    assert config.storage == "postgresql://b@127.0.0.1/two"
    assert load_config(props, {}, {"storage": "native"}).storage is None  # the native log in --data-dir
    assert load_config().storage is None and not load_config().storage_standby
    with pytest.raises(ConfigError, match="storage must be native or postgresql://"):
        load_config(None, None, {"storage": "mysql://x/y"})


def test_the_metrics_listener_has_its_own_connection_cap_and_idle_timeout() -> None:
    """Issue #37 item 6: defaults 16 connections and 10 s; both settable, and at least 1."""
    config = load_config()
    assert (config.metrics_max_connections, config.metrics_connections_max_idle_ms) == (16, 10_000)
    config = load_config(None, None, {"kproto.metrics.max.connections": "4",
                                      "kproto.metrics.connections.max.idle.ms": "2500"})
    assert (config.metrics_max_connections, config.metrics_connections_max_idle_ms) == (4, 2500)
    with pytest.raises(ConfigError):
        load_config(None, None, {"kproto.metrics.max.connections": "0"})
