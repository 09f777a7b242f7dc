"""Which broker configs Kafka 4.1 lets AlterConfigs / IncrementalAlterConfigs change at run time.

Kafka's broker accepts dynamically (DynamicBrokerConfig's set): the broker synonyms of topic
configs (``log.retention.ms``, ``min.insync.replicas``, ...), the log cleaner's, thread pools,
connection limits, the listeners and their TLS/SASL settings, replication throttles, producer-id
expiry, remote-log tuning and metric reporters. This broker acts on the topic synonyms the log
honours (``dynamic_configs.TOPIC_KEY_OF``); every other key here is accepted, type-checked, stored
and described, and changes nothing (a client that sets one, as librdkafka's tests set
``sasl.kerberos.min.time.before.relogin`` on a broker, is answered as Kafka answers it).

Listener and TLS/SASL keys are per broker: Kafka refuses them at the cluster-default level
("broker id must be specified"). Passwords are described as sensitive, with a null value.
"""

from __future__ import annotations

from .topics import TOPIC_CONFIGS, ConfigType

_B, _I, _L, _D, _S, _LIST, _C, _P = (ConfigType.BOOLEAN, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE,
                                     ConfigType.STRING, ConfigType.LIST, ConfigType.CLASS, ConfigType.PASSWORD)

# The broker synonyms of topic configs, by broker key: the topic key each one is the default of.
TOPIC_SYNONYMS: dict[str, str] = {
    spec.broker_name: name for name, spec in TOPIC_CONFIGS.items() if spec.broker_name is not None
}

# Keys only a broker id may carry (Kafka's per-broker listener, TLS and SASL configs).
PER_BROKER: dict[str, ConfigType] = {
    "listeners": _S,
    "advertised.listeners": _S,
    "listener.security.protocol.map": _S,
    "principal.builder.class": _C,
    "ssl.protocol": _S,
    "ssl.provider": _S,
    "ssl.cipher.suites": _LIST,
    "ssl.enabled.protocols": _LIST,
    "ssl.keystore.type": _S,
    "ssl.keystore.location": _S,
    "ssl.keystore.password": _P,
    "ssl.keystore.key": _P,
    "ssl.keystore.certificate.chain": _P,
    "ssl.key.password": _P,
    "ssl.truststore.type": _S,
    "ssl.truststore.location": _S,
    "ssl.truststore.password": _P,
    "ssl.truststore.certificates": _P,
    "ssl.keymanager.algorithm": _S,
    "ssl.trustmanager.algorithm": _S,
    "ssl.endpoint.identification.algorithm": _S,
    "ssl.secure.random.implementation": _S,
    "ssl.client.auth": _S,
    "ssl.engine.factory.class": _C,
    "sasl.mechanism.inter.broker.protocol": _S,
    "sasl.jaas.config": _P,
    "sasl.enabled.mechanisms": _LIST,
    "sasl.kerberos.service.name": _S,
    "sasl.kerberos.kinit.cmd": _S,
    "sasl.kerberos.ticket.renew.window.factor": _D,
    "sasl.kerberos.ticket.renew.jitter": _D,
    "sasl.kerberos.min.time.before.relogin": _L,
    "sasl.kerberos.principal.to.local.rules": _LIST,
    "sasl.login.refresh.window.factor": _D,
    "sasl.login.refresh.window.jitter": _D,
    "sasl.login.refresh.min.period.seconds": _I,
    "sasl.login.refresh.buffer.seconds": _I,
    # Replication throttles: per broker (Kafka's DynamicConfig.Broker).
    "leader.replication.throttled.rate": _L,
    "follower.replication.throttled.rate": _L,
    "replica.alter.log.dirs.io.max.bytes.per.second": _L,
}

# Keys a broker id or the cluster default may carry, besides the topic synonyms.
ANY_LEVEL: dict[str, ConfigType] = {
    "log.cleaner.threads": _I,
    "log.cleaner.dedupe.buffer.size": _L,
    "log.cleaner.io.buffer.load.factor": _D,
    "log.cleaner.io.buffer.size": _I,
    "log.cleaner.io.max.bytes.per.second": _D,
    "log.cleaner.backoff.ms": _L,
    "num.io.threads": _I,
    "num.network.threads": _I,
    "num.replica.fetchers": _I,
    "num.recovery.threads.per.data.dir": _I,
    "background.threads": _I,
    "max.connections": _I,
    "max.connections.per.ip": _I,
    "max.connections.per.ip.overrides": _S,
    "max.connection.creation.rate": _I,
    "metric.reporters": _LIST,
    "config.providers": _LIST,
    "producer.id.expiration.ms": _I,
    "transaction.partition.verification.enable": _B,
    "remote.log.index.file.cache.total.size.bytes": _L,
    "remote.log.manager.copy.max.bytes.per.second": _L,
    "remote.log.manager.fetch.max.bytes.per.second": _L,
    "remote.log.reader.threads": _I,
    "remote.log.manager.copier.thread.pool.size": _I,
    "remote.log.manager.expiration.thread.pool.size": _I,
    "remote.fetch.max.wait.ms": _I,
    "remote.list.offsets.request.timeout.ms": _L,
}


def config_type(key: str) -> ConfigType | None:
    """The type of a key Kafka's broker accepts dynamically (None: it is read-only)."""
    topic_key = TOPIC_SYNONYMS.get(key)
    if topic_key is not None:
        return TOPIC_CONFIGS[topic_key].type
    return PER_BROKER.get(key) or ANY_LEVEL.get(key)


def is_sensitive(key: str) -> bool:
    return config_type(key) == ConfigType.PASSWORD
