"""The inter-broker listener, mechanism and credentials (Kafka's ``inter.broker.listener.name``,
``security.inter.broker.protocol``, ``sasl.mechanism.inter.broker.protocol``) and the settings
Kafka refuses at start."""

from __future__ import annotations

from pathlib import Path

import pytest

from rivven_kproto.broker.config import ConfigError, load_config

STORAGE = "postgresql://kproto@127.0.0.1/kproto"  # the check runs for brokers sharing a store
PLAIN = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="b-pw" user_broker="b-pw";'
SCRAM = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="s-pw";'


def _load(tmp_path: Path, text: str, storage: str | None = STORAGE) -> object:
    path = tmp_path / "server.properties"
    path.write_text(text + (f"\nstorage={storage}\n" if storage else "\n"))
    return load_config(path)


def test_the_first_listener_without_a_setting(tmp_path: Path) -> None:
    config = load_config(None)
    client = config.inter_broker()
    assert client.listener.name == "PLAINTEXT" and client.mechanism is None
    path = tmp_path / "p"
    path.write_text("listeners=EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0\n"
                    "listener.security.protocol.map=EXTERNAL:SSL,INTERNAL:PLAINTEXT\n")
    assert load_config(path).inter_broker().listener.name == "EXTERNAL"


def test_named_listener_with_its_own_sasl_credentials_and_trust(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, (
        "listeners=CLIENTS://127.0.0.1:0,INTERNAL://127.0.0.1:0\n"
        "listener.security.protocol.map=CLIENTS:SSL,INTERNAL:SASL_SSL\n"
        "inter.broker.listener.name=internal\n"
        "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512\n"
        f"listener.name.internal.plain.sasl.jaas.config={PLAIN}\n"
        f"listener.name.internal.scram-sha-512.sasl.jaas.config={SCRAM}\n"
        "listener.name.internal.ssl.truststore.location=/tmp/ca.pem\n"
        "ssl.endpoint.identification.algorithm=\n"
        f"storage={STORAGE}\n")))
    client = config.inter_broker()
    assert client.listener.name == "INTERNAL" and client.listener.protocol == "SASL_SSL"
    assert (client.mechanism, client.username, client.password) == ("SCRAM-SHA-512", "broker", "s-pw")
    assert client.security.truststore_location == Path("/tmp/ca.pem")
    assert client.security.endpoint_identification is False
    # The listener's PLAIN users are still the server's (the JAAS line serves both).
    assert dict(config.security_for("INTERNAL").plain_users) == {"broker": "b-pw"}
    assert config.security_for("CLIENTS").login_credentials == ()


def test_plain_is_the_default_mechanism_and_an_unprefixed_jaas_line_serves(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, f"listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.jaas.config={PLAIN}\n"
                                          f"storage={STORAGE}\n"))
    client = config.inter_broker()
    assert (client.mechanism, client.username, client.password) == ("PLAIN", "broker", "b-pw")
    scram = load_config(_write(tmp_path, (
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\nsasl.mechanism.inter.broker.protocol=SCRAM-SHA-256\n"
        f"sasl.jaas.config={SCRAM}\nstorage={STORAGE}\n")))
    assert scram.inter_broker().username == "broker" and scram.inter_broker().password == "s-pw"


def test_security_inter_broker_protocol_names_the_listener(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0\n"
                                          f"security.inter.broker.protocol=SSL\nstorage={STORAGE}\n"))
    assert config.inter_broker().listener.name == "SSL"


@pytest.mark.parametrize(("text", "message"), [
    ("listeners=PLAINTEXT://127.0.0.1:0\ninter.broker.listener.name=INTERNAL", "is not among the listeners"),
    ("listeners=PLAINTEXT://127.0.0.1:0\nsecurity.inter.broker.protocol=SSL", "is not among the listeners"),
    ("listeners=SSL://127.0.0.1:0\ninter.broker.listener.name=SSL\nsecurity.inter.broker.protocol=SSL",
     "only one of"),
    ("listeners=SASL_SSL://127.0.0.1:0\n"
     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"x\";",
     "give this broker's credentials"),
    (f"listeners=SASL_SSL://127.0.0.1:0\nsasl.mechanism.inter.broker.protocol=SCRAM-SHA-256\nsasl.jaas.config={PLAIN}",
     "give this broker's credentials"),
    (f"listeners=SASL_SSL://127.0.0.1:0\nsasl.enabled.mechanisms=SCRAM-SHA-256\nsasl.jaas.config={PLAIN}",
     "not in sasl.enabled.mechanisms"),
    ("listeners=PLAINTEXT://127.0.0.1:0\nsasl.mechanism.inter.broker.protocol=GSSAPI", "not supported"),
    ("listeners=PLAINTEXT://127.0.0.1:0\nsecurity.inter.broker.protocol=TLS", "must be one of"),
    ("listeners=SSL://127.0.0.1:0\nssl.endpoint.identification.algorithm=http", "https or empty"),
])
def test_inconsistent_settings_are_refused_at_start(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


def test_a_broker_alone_needs_no_inter_broker_credentials(tmp_path: Path) -> None:
    """The native log has no other brokers: a SASL listener without the broker's own credentials is fine."""
    _load(tmp_path, "listeners=SASL_SSL://127.0.0.1:0\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"x\";",
          storage=None)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(text)
    return path
