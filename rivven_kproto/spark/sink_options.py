"""Options and input schema of the Kafka sink, validated with Spark's own messages.

The sink takes the write options of Spark's Kafka connector (``kafka.bootstrap.servers``,
``topic``, ``kafka.*`` producer settings) plus ``exactlyOnce`` and ``transactionalIdPrefix``, and
Spark's input schema: ``value`` (string or binary, required), ``key`` (string or binary),
``topic`` (string; the ``topic`` option overrides it), ``partition`` (int) and ``headers``
(``array<struct<key string, value binary>>``). Messages for a bad schema or option are the
connector's (``KafkaWriter.validateQuery``, ``KafkaSourceProvider``), so code written against
Spark's connector sees the same errors. Producer settings are translated from the Java client's
names to librdkafka's, since the executors produce with confluent-kafka.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from rivven_kproto.client.security import from_properties

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
TOPIC_MISSING = ("topic option required when no 'topic' attribute is present. "
                 "Use the topic option for setting a topic.")
NULL_TOPIC = "null topic present in the data. Use the topic option for setting a topic."
VALUE_MISSING = "Required attribute 'value' not found"
# Spark's connector leaves this to the Java producer, whose ConfigException reads so.
BOOTSTRAP_MISSING = 'Missing required configuration "bootstrap.servers" which has no default value.'

# Java producer settings that mean the same to librdkafka under the same name.
_SAME_NAME = frozenset({
    "acks", "compression.type", "linger.ms", "batch.size", "client.id", "retries", "retry.backoff.ms",
    "request.timeout.ms", "delivery.timeout.ms", "max.in.flight.requests.per.connection",
    "enable.idempotence", "transaction.timeout.ms", "batch.num.messages", "socket.timeout.ms",
    "message.max.bytes", "queue.buffering.max.messages", "queue.buffering.max.kbytes", "partitioner",
    "metadata.max.age.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms", "compression.level",
})
# Java names with a different librdkafka spelling.
_RENAMED = {"max.request.size": "message.max.bytes"}
_SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")


@dataclass(frozen=True)
class Columns:
    """Where each of Spark's sink columns sits in the input rows (None: absent)."""

    value: int
    key: int | None = None
    topic: int | None = None
    partition: int | None = None
    headers: int | None = None
    key_is_string: bool = False
    value_is_string: bool = False


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None  # the ``topic`` option: overrides the column
    producer: tuple[tuple[str, str], ...]  # librdkafka settings, picklable for Spark's workers
    exactly_once: bool = False
    transactional_id_prefix: str | None = None
    timeout_s: float = 120.0  # init/commit/flush bound of a task, from kafka.max.block.ms

    def producer_config(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap_servers, **dict(self.producer)}


def _bool(text: str, name: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, got {text!r}")
    return lowered == "true"


def _security(props: dict[str, str]) -> dict[str, str]:
    """The Java client's security settings as librdkafka's (JAAS login modules, PEM stores)."""
    checked = from_properties(props)  # a bad setting fails the query on the driver, not in a task
    out = {"security.protocol": checked.protocol}
    if checked.uses_sasl:
        out.update({"sasl.mechanism": checked.mechanism or "PLAIN", "sasl.username": checked.username or "",
                    "sasl.password": checked.password or ""})
    ca = props.get("ssl.ca.location") or props.get("ssl.truststore.location")
    if ca:
        out["ssl.ca.location"] = ca
    if props.get("ssl.certificate.location"):
        out["ssl.certificate.location"] = props["ssl.certificate.location"]
        out["ssl.key.location"] = props.get("ssl.key.location", props["ssl.certificate.location"])
    elif props.get("ssl.keystore.location"):  # a PEM keystore holds the key and the chain
        out["ssl.certificate.location"] = out["ssl.key.location"] = props["ssl.keystore.location"]
    if props.get("ssl.key.password"):
        out["ssl.key.password"] = props["ssl.key.password"]
    if "ssl.endpoint.identification.algorithm" in props:
        algorithm = props["ssl.endpoint.identification.algorithm"].strip()
        out["ssl.endpoint.identification.algorithm"] = algorithm or "none"
    return out


def parse(options: Mapping[str, str]) -> SinkOptions:
    """Validate the write options; the messages are those of Spark's connector."""
    params = {key.lower(): value for key, value in options.items()}
    if "kafka.key.serializer" in params:
        raise ValueError("Kafka option 'key.serializer' is not supported as keys are serialized with "
                         "ByteArraySerializer.")
    if "kafka.value.serializer" in params:
        raise ValueError("Kafka option 'value.serializer' is not supported as value are serialized with "
                         "ByteArraySerializer.")
    if "kafka.bootstrap.servers" not in params:
        raise ValueError(BOOTSTRAP_MISSING)
    exactly_once = _bool(params.get("exactlyonce", "false"), "exactlyOnce")
    if "kafka.transactional.id" in params:
        raise ValueError("Kafka option 'transactional.id' is not supported: set exactlyOnce=true (and "
                         "transactionalIdPrefix) to write in transactions")
    kafka = {key.removeprefix("kafka."): value for key, value in params.items() if key.startswith("kafka.")}
    # The Java client's key hashing, and its idempotence default: on, unless acks asks for less
    # and enable.idempotence is not set.
    producer: dict[str, str] = {"partitioner": "murmur2_random"}
    producer["enable.idempotence"] = "true" if kafka.get("acks", "all").lower() in ("all", "-1") else "false"
    security_props = {k: v for k, v in kafka.items() if k.startswith(_SECURITY_PREFIXES)}
    if security_props:
        producer.update(_security(security_props))
    for key, value in kafka.items():
        if key in _RENAMED:
            producer[_RENAMED[key]] = value
        elif key in _SAME_NAME:
            producer[key] = value
    if exactly_once:
        if producer.get("enable.idempotence", "true").lower() == "false":
            raise ValueError("exactlyOnce=true needs the idempotent producer (kafka.enable.idempotence=true)")
        if producer.get("acks", "all").lower() not in ("all", "-1"):
            raise ValueError("exactlyOnce=true needs kafka.acks=all")
    block_ms = kafka.get("max.block.ms")
    return SinkOptions(
        bootstrap_servers=kafka["bootstrap.servers"],
        topic=params["topic"].strip() if params.get("topic", "").strip() else None,
        producer=tuple(sorted(producer.items())),
        exactly_once=exactly_once,
        transactional_id_prefix=params.get("transactionalidprefix") or None,
        timeout_s=int(block_ms) / 1000 if block_ms else 120.0,
    )


def _unsupported(name: str, found: object, wanted: str) -> ValueError:
    shown = found.simpleString() if hasattr(found, "simpleString") else str(found)
    return ValueError(f"{name} attribute unsupported type {shown}. {name} must be a(n) {wanted}")


def columns(schema: StructType, options: SinkOptions) -> Columns:
    """Check the input schema as Spark's connector does; where each column is."""
    names = [field.name for field in schema.fields]

    def find(name: str) -> int | None:
        return names.index(name) if name in names else None

    topic, key, value = find("topic"), find("key"), find("value")
    partition, headers = find("partition"), find("headers")
    if options.topic is None:
        if topic is None:
            raise ValueError(TOPIC_MISSING)
        if not isinstance(schema.fields[topic].dataType, StringType):
            raise _unsupported("topic", schema.fields[topic].dataType, "string")
    if key is not None and not isinstance(schema.fields[key].dataType, (StringType, BinaryType)):
        raise _unsupported("key", schema.fields[key].dataType, "string or binary")
    if value is None:
        raise ValueError(VALUE_MISSING)
    if not isinstance(schema.fields[value].dataType, (StringType, BinaryType)):
        raise _unsupported("value", schema.fields[value].dataType, "string or binary")
    if headers is not None and not _headers_type(schema.fields[headers].dataType):
        raise _unsupported("headers", schema.fields[headers].dataType, HEADERS_TYPE.simpleString())
    if partition is not None and not isinstance(schema.fields[partition].dataType, IntegerType):
        raise _unsupported("partition", schema.fields[partition].dataType, "int")
    return Columns(
        value=value,
        key=key,
        topic=topic if options.topic is None else None,
        partition=partition,
        headers=headers,
        key_is_string=key is not None and isinstance(schema.fields[key].dataType, StringType),
        value_is_string=isinstance(schema.fields[value].dataType, StringType),
    )


def _headers_type(found: object) -> bool:
    """``array<struct<key string, value binary>>``, whatever the nullability."""
    if not isinstance(found, ArrayType) or not isinstance(found.elementType, StructType):
        return False
    fields = found.elementType.fields
    return ([f.name for f in fields] == ["key", "value"] and isinstance(fields[0].dataType, StringType)
            and isinstance(fields[1].dataType, BinaryType))
