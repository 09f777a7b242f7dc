"""The broker's one typed configuration object, filled from a properties file, env and flags.

Precedence: command-line flags > ``KPROTO_*`` environment variables > ``--config`` file > defaults.
The file uses Kafka's ``server.properties`` keys where one exists (``num.partitions``,
``auto.create.topics.enable``, ``log.segment.bytes``, ``log.retention.ms``, ...); an environment
variable is the same key upper-cased with dots as underscores behind ``KPROTO_``
(``KPROTO_NUM_PARTITIONS=3``), plus ``KPROTO_LISTEN``, ``KPROTO_ADVERTISED_LISTENER``,
``KPROTO_DATA_DIR``, ``KPROTO_FSYNC`` and ``KPROTO_STORAGE``.

Durability (``fsync``): ``interval`` (default) acknowledges a write once it is in the operating
system, so it survives ``kill -9`` of the broker, and fsyncs every ``log.flush.interval.ms``
(1 s), so a power loss can lose at most about that much. ``always`` acknowledges acks=all/1 writes
only after fsync (group commit: concurrent producers share one fsync). ``never`` leaves flushing
to the OS (still safe against a broker crash, not against power loss).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rivven_kproto.auth.scram import SASL_MECHANISMS
from rivven_kproto.codec.errors import KafkaError

from .groups.config import MIGRATION_POLICIES, GroupConfig
from .log.config import LogConfig
from .security.jaas import PLAIN_MODULE, SCRAM_MODULE, login_credentials, plain_users
from .security.listeners import PROTOCOLS, Listener, ListenerError, build_listeners
from .security.principal_mapping import MappingRule, parse_rules
from .share.config import KEYS as SHARE_KEYS
from .share.config import ShareConfig, ShareConfigError, apply_share_keys

log = logging.getLogger(__name__)

FsyncPolicy = Literal["always", "interval", "never"]
FSYNC_POLICIES: tuple[FsyncPolicy, ...] = ("always", "interval", "never")


MAX_TRANSACTION_VERSION = 2  # Kafka 4.x's TransactionVersion.TV_2


class ConfigError(ValueError):
    """A configuration value that cannot be used; the CLI prints it as one line."""


AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer")


@dataclass(frozen=True)
class SecurityConfig:
    """TLS (PEM, Kafka's KIP-651 keys) and SASL settings, shared by every listener that uses them."""

    keystore_location: Path | None = None  # key and certificate chain in one PEM file
    keystore_certificate_chain: str | None = None  # inline PEM
    keystore_key: str | None = None  # inline PEM
    key_password: str | None = None
    truststore_location: Path | None = None
    truststore_certificates: str | None = None
    client_auth: str = "none"  # none | requested | required
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    sasl_mechanisms: tuple[str, ...] = SASL_MECHANISMS
    plain_users: tuple[tuple[str, str], ...] = ()
    failed_authentication_delay_ms: int = 100
    principal_mapping: tuple[MappingRule, ...] = (MappingRule(None),)  # ssl.principal.mapping.rules
    reauthentication_ms: int = 0  # connections.max.reauth.ms (KIP-368); 0: sessions never expire
    # The broker's own credentials (``username``/``password`` of a JAAS line), for its requests to
    # the other brokers: (mechanism, username, password); mechanism "PLAIN", "SCRAM" (an unprefixed
    # ScramLoginModule line) or that of a ``listener.name.<l>.<mechanism>.sasl.jaas.config`` key.
    login_credentials: tuple[tuple[str, str, str], ...] = ()
    endpoint_identification: bool = True  # ssl.endpoint.identification.algorithm: https (default) or empty

    def credentials_for(self, mechanism: str) -> tuple[str, str] | None:
        for wanted in (mechanism, "SCRAM" if mechanism.startswith("SCRAM-") else mechanism):
            for name, username, password in reversed(self.login_credentials):
                if name == wanted:
                    return username, password
        return None


@dataclass(frozen=True)
class InterBrokerClient:
    """How this broker connects to the others (Kafka's inter-broker listener): that listener, the
    SASL mechanism and credentials it authenticates with (when the listener uses SASL), and the
    listener's security settings (trust store, key store for mTLS, host-name check) for TLS."""

    listener: Listener
    security: SecurityConfig
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None


@dataclass(frozen=True)
class BrokerConfig:
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str = "localhost"
    advertised_port: int | None = None  # None: the actual listening port
    data_dir: Path = Path("kproto-data")
    node_id: int = 0
    # No node.id configured (load_config): a shared store (PostgreSQL) assigns the lowest free
    # one; the native log keeps node_id.
    assign_node_id: bool = False
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics: bool = True
    delete_topic_enable: bool = True
    fsync: FsyncPolicy = "interval"
    flush_interval_ms: int = 1000
    socket_request_max_bytes: int = 100 * 1024 * 1024
    fetch_max_bytes: int = 55 * 1024 * 1024  # Kafka's fetch.max.bytes: the broker's cap on a Fetch response
    connections_max_idle_ms: int = 600_000
    # Kafka's max.connections / max.connections.per.ip; None: as many as the descriptor limit
    # allows after a reserve for the log (see server/connection_limits.py).
    max_connections: int | None = None
    max_connections_per_ip: int | None = None
    retention_check_interval_ms: int = 300_000
    producer_id_expiration_ms: int = 86_400_000
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 7 * 24 * 3_600_000
    transaction_check_interval_ms: int = 200
    # The finalized ``transaction.version`` feature (KIP-584) in ApiVersions: 2 (Kafka 4.0's default)
    # turns transactions V2 (KIP-890 part 2) on for clients that use its request versions; 0 or 1
    # keeps every client on V1 semantics (the request versions stay advertised, as Kafka's do).
    transaction_version: int = 2
    log: LogConfig = field(default_factory=LogConfig)
    groups: GroupConfig = field(default_factory=GroupConfig)
    share: ShareConfig = field(default_factory=ShareConfig)  # share groups (KIP-932), see broker/share
    security_protocol: str = "PLAINTEXT"  # of the listener above
    listener_name: str = "PLAINTEXT"
    extra_listeners: tuple[Listener, ...] = ()  # further entries of ``listeners``
    security: SecurityConfig = field(default_factory=SecurityConfig)
    # ``listener.name.<name>.``-prefixed security keys: (LISTENER NAME, ((field, value), ...)),
    # applied over ``security`` for that listener only, as Kafka does.
    listener_security: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()
    # The metrics endpoint (/metrics, /healthz, /readyz); None: off. Per-partition and per-group
    # series can be switched off for large clusters (kproto.metrics.partitions=false).
    metrics_listen: tuple[str, int] | None = None
    storage: str | None = None  # None: the native log in data_dir; "postgresql://...": that database
    storage_standby: bool = False  # another broker serves the database: wait to take over instead of failing
    # How long start-up waits for a database that is starting, restarting or failing over
    # (kproto.storage.start.wait.ms) before it gives up.
    storage_start_wait_ms: int = 60_000
    metrics_per_partition: bool = True
    # How old a /metrics rendering may be when a scrape reuses it (kproto.metrics.max.age.ms): -1,
    # the default, reuses one for 100 times as long as it took to render (at most 5 s), so scraping,
    # however often, costs the event loop about 1%; 0 renders every scrape.
    metrics_max_age_ms: int = -1
    # The metrics listener's own connection cap (kproto.metrics.max.connections; further ones are
    # closed at once) and how long one connection may stay open (kproto.metrics.connections.max.idle.ms).
    metrics_max_connections: int = 16
    metrics_connections_max_idle_ms: int = 10_000
    # ACL authorization (authorizer.class.name set), super.users, allow.everyone.if.no.acl.found.
    authorizer_enabled: bool = False
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False
    # The listener the brokers of a cluster connect to each other on: inter.broker.listener.name,
    # or the listener named as security.inter.broker.protocol (None, None: the first listener).
    inter_broker_listener_name: str | None = None
    security_inter_broker_protocol: str | None = None
    # sasl.mechanism.inter.broker.protocol; None: PLAIN (Kafka's default is GSSAPI, not supported here)
    inter_broker_sasl_mechanism: str | None = None

    def with_port(self, port: int) -> BrokerConfig:
        return dataclasses.replace(self, listen_port=port)

    def security_for(self, listener_name: str) -> SecurityConfig:
        """The security settings of one listener: the global ones with its own keys over them."""
        for name, overrides in self.listener_security:
            if name == listener_name.upper():
                return dataclasses.replace(self.security, **dict(overrides))  # type: ignore[arg-type]
        return self.security

    def inter_broker_listener(self) -> Listener:
        """The listener the brokers of a cluster connect to each other on (and the only one that
        takes their Envelopes); ConfigError when the setting names none of the listeners."""
        listeners = (self.primary_listener, *self.extra_listeners)
        if self.inter_broker_listener_name is not None and self.security_inter_broker_protocol is not None:
            raise ConfigError("only one of inter.broker.listener.name and security.inter.broker.protocol may be set")
        name = self.inter_broker_listener_name or self.security_inter_broker_protocol
        listener = listeners[0] if name is None else next((lis for lis in listeners if lis.name == name), None)
        if listener is None:
            key = "inter.broker.listener.name" if self.inter_broker_listener_name else "security.inter.broker.protocol"
            raise ConfigError(f"{key}={name} is not among the listeners ({', '.join(lis.name for lis in listeners)})")
        return listener

    def inter_broker(self) -> InterBrokerClient:
        """This broker's side of its connections to the other brokers; ConfigError for a setting
        Kafka would refuse at start (the listener is not among the listeners, SASL without usable
        credentials or with a mechanism the listener does not enable)."""
        listener = self.inter_broker_listener()
        security = self.security_for(listener.name)
        if not listener.uses_sasl:
            return InterBrokerClient(listener, security)
        mechanism = self.inter_broker_sasl_mechanism or "PLAIN"
        if mechanism not in security.sasl_mechanisms:
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol {mechanism} is not in sasl.enabled.mechanisms of"
                              f" listener {listener.name} ({', '.join(security.sasl_mechanisms)})")
        credentials = security.credentials_for(mechanism)
        if credentials is None:
            raise ConfigError(
                f"the inter-broker listener {listener.name} uses SASL {mechanism}: give this broker's credentials as"
                f' username="..." password="..." in listener.name.{listener.name.lower()}.{mechanism.lower()}'
                ".sasl.jaas.config")
        return InterBrokerClient(listener, security, mechanism, *credentials)

    @property
    def advertised(self) -> tuple[str, int]:
        return self.advertised_host, self.advertised_port or self.listen_port

    @property
    def primary_listener(self) -> Listener:
        return Listener(
            self.listener_name, self.security_protocol, self.listen_host, self.listen_port,
            self.advertised_host, self.advertised_port,
        )


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT``, tolerating Kafka's ``PLAINTEXT://HOST:PORT`` listener form."""
    text = text.strip().split(",")[0]
    if "://" in text:
        text = text.split("://", 1)[1]
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"expected HOST:PORT, got {text!r}")
    if int(port) > 65535:
        raise ConfigError(f"port {port} of {text!r} is outside 0-65535")
    if host.startswith("[") != host.endswith("]") or any(c.isspace() for c in host):
        raise ConfigError(f"malformed host in {text!r}")
    return host or "0.0.0.0", int(port)


def read_properties(path: Path) -> dict[str, str]:
    """Java-style ``key=value`` lines; ``#``/``!`` comments; ``:`` also separates."""
    props: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                key, value = line.split(sep, 1)
                props[key.strip()] = value.strip()
                break
    return props


_BROKER_LOG_KEYS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "message.max.bytes": "max.message.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.message.timestamp.type": "message.timestamp.type",
}

# Group coordinator settings: Kafka key -> (GroupConfig field, unit in ms, lowest value).
_GROUP_KEYS = {
    "group.min.session.timeout.ms": ("min_session_timeout_ms", 1, 1),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", 1, 1),
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", 1, 0),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", 1, 0),
    "offsets.retention.minutes": ("offsets_retention_ms", 60_000, 1),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", 1, 1),
    "group.consumer.session.timeout.ms": ("consumer_session_timeout_ms", 1, 1),
    "group.consumer.heartbeat.interval.ms": ("consumer_heartbeat_interval_ms", 1, 1),
}


def _bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    return lowered == "true"


def _int(key: str, value: str, low: int = 0) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigError(f"{key} must be an integer, got {value!r}") from None
    if number < low:
        raise ConfigError(f"{key} must be >= {low}, got {number}")
    return number


def _apply(config: BrokerConfig, props: Mapping[str, str], *, warn_unknown: bool = False) -> BrokerConfig:
    """Overlay Kafka-named properties on ``config``; unknown keys are ignored (with a warning, as Kafka)."""
    changes: dict[str, object] = {}
    log_props: dict[str, str] = {}
    group_changes: dict[str, int | str] = {}
    share_props: dict[str, str] = {}
    security_changes: dict[str, object] = {}
    listener_changes: dict[str, dict[str, object]] = {}
    if "://" in props.get("listeners", ""):
        try:
            first, *rest = build_listeners(props)
        except ListenerError as exc:
            raise ConfigError(str(exc)) from None
        changes.update(
            listen_host=first.host, listen_port=first.port, security_protocol=first.protocol,
            listener_name=first.name, extra_listeners=tuple(rest),
        )
        if first.advertised_host is not None:
            changes["advertised_host"], changes["advertised_port"] = first.advertised_host, first.advertised_port
        props = {k: v for k, v in props.items() if k not in ("listeners", "advertised.listeners", "listener.security.protocol.map")}
    for key, value in props.items():
        if key in ("listeners", "listen"):
            changes["listen_host"], changes["listen_port"] = parse_host_port(value)
        elif key in ("advertised.listeners", "advertised.listener"):
            changes["advertised_host"], changes["advertised_port"] = parse_host_port(value)
        elif key in ("log.dirs", "log.dir", "data.dir"):
            changes["data_dir"] = Path(value.split(",")[0])
        elif key in ("node.id", "broker.id"):
            changes["node_id"] = _int(key, value)
            changes["assign_node_id"] = False
        elif key == "num.partitions":
            changes["num_partitions"] = _int(key, value, 1)
        elif key == "default.replication.factor":
            changes["default_replication_factor"] = _int(key, value, 1)
        elif key == "auto.create.topics.enable":
            changes["auto_create_topics"] = _bool(key, value)
        elif key == "delete.topic.enable":
            changes["delete_topic_enable"] = _bool(key, value)
        elif key == "fsync":
            if value not in FSYNC_POLICIES:
                raise ConfigError(f"fsync must be one of {', '.join(FSYNC_POLICIES)}, got {value!r}")
            changes["fsync"] = value
        elif key == "log.flush.interval.ms":
            changes["flush_interval_ms"] = _int(key, value, 1)
        elif key == "socket.request.max.bytes":
            changes["socket_request_max_bytes"] = _int(key, value, 1)
        elif key == "fetch.max.bytes":
            changes["fetch_max_bytes"] = _int(key, value, 1024)
        elif key == "connections.max.idle.ms":
            changes["connections_max_idle_ms"] = _int(key, value, 1)
        elif key == "authorizer.class.name":
            if value.strip() and value.strip() not in AUTHORIZERS:
                raise ConfigError(f"authorizer.class.name={value}: use one of {', '.join(AUTHORIZERS)} (or leave it empty)")
            changes["authorizer_enabled"] = bool(value.strip())
        elif key == "super.users":
            changes["super_users"] = tuple(u.strip() for u in value.split(";") if u.strip())
        elif key == "inter.broker.listener.name":
            changes["inter_broker_listener_name"] = value.strip().upper() or None
        elif key == "security.inter.broker.protocol":
            protocol = value.strip().upper()
            if protocol and protocol not in PROTOCOLS:
                raise ConfigError(f"{key} must be one of {', '.join(PROTOCOLS)}, got {value!r}")
            changes["security_inter_broker_protocol"] = protocol or None
        elif key == "sasl.mechanism.inter.broker.protocol":
            mechanism = value.strip().upper()
            if mechanism not in SASL_MECHANISMS:
                raise ConfigError(f"{key}: {value} not supported (use {', '.join(SASL_MECHANISMS)})")
            changes["inter_broker_sasl_mechanism"] = mechanism
        elif key == "allow.everyone.if.no.acl.found":
            changes["allow_everyone_if_no_acl_found"] = _bool(key, value)
        elif key in ("storage", "kproto.storage"):
            if value.strip() and not value.strip().startswith(("postgresql://", "postgres://", "native")):
                raise ConfigError(f"storage must be native or postgresql://USER[:PASSWORD]@HOST[:PORT]/DB, got {value!r}")
            changes["storage"] = None if value.strip() in ("", "native") else value.strip()
        elif key in ("standby", "storage.standby", "kproto.storage.standby"):
            changes["storage_standby"] = _bool(key, value)
        elif key in ("kproto.storage.start.wait.ms", "storage.start.wait.ms"):
            changes["storage_start_wait_ms"] = _int(key, value, 0)
        elif key in ("metrics", "kproto.metrics.listen"):
            changes["metrics_listen"] = parse_host_port(value) if value.strip() else None
        elif key in ("kproto.metrics.partitions", "metrics.partitions"):
            changes["metrics_per_partition"] = _bool(key, value)
        elif key in ("kproto.metrics.max.age.ms", "metrics.max.age.ms"):
            changes["metrics_max_age_ms"] = _int(key, value, -1)
        elif key in ("kproto.metrics.max.connections", "metrics.max.connections"):
            changes["metrics_max_connections"] = _int(key, value, 1)
        elif key in ("kproto.metrics.connections.max.idle.ms", "metrics.connections.max.idle.ms"):
            changes["metrics_connections_max_idle_ms"] = _int(key, value, 1)
        elif key == "max.connections":
            changes["max_connections"] = _int(key, value, 1)
        elif key == "max.connections.per.ip":
            changes["max_connections_per_ip"] = _int(key, value, 1)
        elif key == "transaction.max.timeout.ms":
            changes["transaction_max_timeout_ms"] = _int(key, value, 1)
        elif key == "transactional.id.expiration.ms":
            changes["transactional_id_expiration_ms"] = _int(key, value, 1)
        elif key == "transaction.abort.timed.out.transaction.cleanup.interval.ms":
            changes["transaction_check_interval_ms"] = _int(key, value, 1)
        elif key == "transaction.version":
            level = _int(key, value)
            if level > MAX_TRANSACTION_VERSION:
                raise ConfigError(f"{key} must be 0, 1 or 2, got {value!r}")
            changes["transaction_version"] = level
        elif key == "producer.id.expiration.ms":
            changes["producer_id_expiration_ms"] = _int(key, value, 1)
        elif key == "log.retention.check.interval.ms":
            changes["retention_check_interval_ms"] = _int(key, value, 1)
        elif key in ("log.retention.hours", "log.retention.minutes"):
            factor = 3_600_000 if key.endswith("hours") else 60_000
            log_props.setdefault("retention.ms", str(_int(key, value) * factor))
        elif key in _BROKER_LOG_KEYS:
            log_props[_BROKER_LOG_KEYS[key]] = value
        elif key == "group.consumer.migration.policy":
            policy = value.strip().lower()
            if policy not in MIGRATION_POLICIES:
                raise ConfigError(f"{key} must be one of {', '.join(MIGRATION_POLICIES)}, got {value!r}")
            group_changes["consumer_migration_policy"] = policy
        elif key in _GROUP_KEYS:
            name, unit, low = _GROUP_KEYS[key]
            group_changes[name] = _int(key, value, low) * unit
        elif key in SHARE_KEYS:
            share_props[key] = value
        elif key.startswith("listener.name.") and key.count(".") >= 3:
            listener_name = key.split(".")[2].upper()
            prefix = key.split(".", 3)[3].split(".", 1)[0].upper()
            _security_key(_listener_key(key), value, listener_changes.setdefault(listener_name, {}),
                          prefix if prefix in SASL_MECHANISMS else "")
        elif key.startswith(("ssl.", "sasl.")) or key in _SECURITY_KEYS:
            _security_key(key, value, security_changes)
        elif warn_unknown:
            log.warning("The configuration '%s' was supplied but isn't a known config.", key)
    if security_changes:
        changes["security"] = dataclasses.replace(config.security, **security_changes)  # type: ignore[arg-type]
    if listener_changes:
        merged = {name: dict(overrides) for name, overrides in config.listener_security}
        for name, overrides in listener_changes.items():
            merged.setdefault(name, {}).update(overrides)
        changes["listener_security"] = tuple((name, tuple(sorted(o.items()))) for name, o in sorted(merged.items()))
    if share_props:
        try:
            changes["share"] = apply_share_keys(config.share, share_props)
        except ShareConfigError as exc:
            raise ConfigError(str(exc)) from None
    if group_changes:
        changes["groups"] = dataclasses.replace(config.groups, **group_changes)  # type: ignore[arg-type]
    if log_props:
        try:
            changes["log"] = LogConfig.from_topic_config(log_props, config.log)
        except KafkaError as exc:
            raise ConfigError(exc.message) from None
    return dataclasses.replace(config, **changes)  # type: ignore[arg-type]


_SECURITY_KEYS = ("connection.failed.authentication.delay.ms", "connections.max.reauth.ms")


def _login_credentials(jaas: str, changes: dict[str, object], mechanism: str) -> None:
    """Keep a JAAS line's ``username``/``password``: the broker's own, for inter-broker SASL."""
    credentials = login_credentials(jaas)
    if credentials is None:
        return
    if not mechanism:
        mechanism = "PLAIN" if PLAIN_MODULE in jaas else "SCRAM" if SCRAM_MODULE in jaas else ""
    if mechanism:
        previous = changes.get("login_credentials", ())
        assert isinstance(previous, tuple)
        changes["login_credentials"] = (*previous, (mechanism, *credentials))


def _listener_key(key: str) -> str:
    """``listener.name.<name>.[<mechanism>.]<key>`` without its prefixes."""
    key = key.split(".", 3)[3]
    if key.startswith(("plain.", "scram-sha-256.", "scram-sha-512.")):
        key = key.split(".", 1)[1]
    return key


def _security_key(key: str, value: str, changes: dict[str, object], mechanism: str = "") -> None:
    """TLS and SASL keys (for every listener, or, from a ``listener.name.`` key, for one;
    ``mechanism``: of a ``listener.name.<l>.<mechanism>.`` key)."""
    if key == "sasl.jaas.config":
        _login_credentials(value, changes, mechanism)
    if key in ("ssl.keystore.type", "ssl.truststore.type"):
        if value.strip().upper() != "PEM":
            raise ConfigError(f"{key}={value}: only PEM key and trust stores are supported")
    elif key == "ssl.keystore.location":
        changes["keystore_location"] = Path(value)
    elif key == "ssl.keystore.certificate.chain":
        changes["keystore_certificate_chain"] = value
    elif key == "ssl.keystore.key":
        changes["keystore_key"] = value
    elif key == "ssl.key.password":
        changes["key_password"] = value
    elif key == "ssl.truststore.location":
        changes["truststore_location"] = Path(value)
    elif key == "ssl.truststore.certificates":
        changes["truststore_certificates"] = value
    elif key == "ssl.client.auth":
        if value not in ("none", "requested", "required"):
            raise ConfigError(f"ssl.client.auth must be none, requested or required, got {value!r}")
        changes["client_auth"] = value
    elif key == "ssl.enabled.protocols":
        changes["enabled_protocols"] = tuple(p.strip() for p in value.split(",") if p.strip())
    elif key == "sasl.enabled.mechanisms":
        mechanisms = tuple(m.strip().upper() for m in value.split(",") if m.strip())
        unknown = [m for m in mechanisms if m not in SASL_MECHANISMS]
        if unknown:
            raise ConfigError(f"sasl.enabled.mechanisms: {', '.join(unknown)} not supported (use {', '.join(SASL_MECHANISMS)})")
        changes["sasl_mechanisms"] = mechanisms
    elif key == "ssl.principal.mapping.rules":
        try:
            changes["principal_mapping"] = parse_rules(value)
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    elif key == "connections.max.reauth.ms":
        changes["reauthentication_ms"] = _int(key, value, 0)
    elif key == "ssl.endpoint.identification.algorithm":
        if value.strip().lower() not in ("", "https"):
            raise ConfigError(f"{key} must be https or empty, got {value!r}")
        changes["endpoint_identification"] = bool(value.strip())
    elif key == "sasl.jaas.config" and SCRAM_MODULE in value:
        pass  # a broker's ScramLoginModule line carries no users: SCRAM credentials are in the store
    elif key == "sasl.jaas.config":
        try:
            changes["plain_users"] = tuple(sorted(plain_users(value).items()))
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    elif key == "connection.failed.authentication.delay.ms":
        changes["failed_authentication_delay_ms"] = _int(key, value, 0)
    else:
        log.warning("The configuration '%s' was supplied but isn't a known config.", key)


def load_config(
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, str | None] | None = None,
) -> BrokerConfig:
    """Build the config from file, then ``KPROTO_*`` env, then flags (Kafka-named keys)."""
    config = BrokerConfig(assign_node_id=True)  # until one of them names the node id
    if config_file is not None:
        config = _apply(config, read_properties(config_file), warn_unknown=True)
    if env:
        from_env = {
            key[len("KPROTO_") :].lower().replace("_", "."): value
            for key, value in env.items()
            if key.startswith("KPROTO_") and key != "KPROTO_BOOTSTRAP"
        }
        config = _apply(config, from_env)
    if flags:
        config = _apply(config, {k: v for k, v in flags.items() if v is not None})
    if config.storage is not None:  # brokers sharing a store connect to each other: refuse a setting Kafka refuses
        config.inter_broker()
    return config
