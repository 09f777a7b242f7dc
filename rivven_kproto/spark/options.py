"""Options of the Spark Kafka source: parsing and validation, with Spark's own messages.

Names and semantics follow Spark's Structured Streaming + Kafka integration guide (option names
are case-insensitive). Validation messages are Spark's ``KafkaSourceProvider`` messages word for
word, so that code and tests written against Spark's connector see the same errors.
"""

from __future__ import annotations

import functools
import json
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from rivven_kproto.client.security import ClientSecurity, from_properties
from rivven_kproto.codec.enums import EARLIEST, LATEST, READ_COMMITTED, READ_UNCOMMITTED

STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")
STRATEGY_KEYS_TEXT = "subscribe, subscribepattern, assign"
FIXED_SCHEMA_MESSAGE = "Kafka source has a fixed schema and cannot be set with a custom one"

# Offsets as Spark's source options give them: "earliest", "latest", a per-partition JSON of
# offsets (-2 earliest, -1 latest), a global timestamp or a per-partition JSON of timestamps.
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends before it is resolved against the broker."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamps" | "timestamp"
    offsets: dict[TopicPartition, int] = field(default_factory=dict)  # offsets or timestamps
    timestamp: int = 0
    strategy_on_no_match: str = "error"  # for timestamps: "error" or "latest"


@dataclass(frozen=True)
class KafkaOptions:
    bootstrap_servers: str
    strategy: str  # "subscribe" | "subscribepattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assign: tuple[TopicPartition, ...] = ()
    isolation_level: int = READ_UNCOMMITTED
    include_headers: bool = False
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    starting: OffsetSpec | None = None  # None: the default of the query kind
    ending: OffsetSpec | None = None
    request_timeout_s: float = 30.0
    fetch_max_bytes: int = 16 * 1024 * 1024
    poll_timeout_ms: int = 120_000
    # Kafka's client security properties from the kafka.-prefixed options (security.protocol,
    # sasl.*, ssl.*), kept as text so the options stay picklable for Spark's workers.
    security_properties: tuple[tuple[str, str], ...] = ()

    @property
    def security(self) -> ClientSecurity | None:
        return _security(self.security_properties) if self.security_properties else None

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == READ_COMMITTED

    def topic_matches(self, name: str) -> bool:
        if self.strategy == "subscribe":
            return name in self.topics
        if self.strategy == "subscribepattern":
            return re.fullmatch(self.pattern, name) is not None
        return any(t == name for t, _ in self.assign)


@functools.lru_cache(maxsize=8)
def _security(properties: tuple[tuple[str, str], ...]) -> ClientSecurity:
    """One ClientSecurity (and TLS context) per process and settings; ValueError names a bad key."""
    try:
        return from_properties(dict(properties))
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot load the TLS settings: {exc}") from None


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _bool(value: str, name: str) -> bool:
    text = value.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"For input string: \"{value}\" (option {name} must be true or false)")


def _partition_json(text: str) -> tuple[TopicPartition, ...]:
    """Spark's ``assign`` JSON: {"topicA":[0,1],"topicB":[2,4]}."""
    try:
        value = json.loads(text)
        if not isinstance(value, dict) or not all(
            isinstance(ps, list) and all(isinstance(p, int) for p in ps) for ps in value.values()
        ):
            raise ValueError
    except ValueError:
        raise ValueError(f"Expected e.g. {{\"topicA\":[0,1],\"topicB\":[0,1]}}, got {text}") from None
    return tuple(sorted((str(t), int(p)) for t, ps in value.items() for p in ps))


def _offsets_json(text: str, what: str = "offsets") -> dict[TopicPartition, int]:
    """Spark's per-partition JSON: {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}."""
    example = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}' if what == "offsets" else (
        '{"topicA":{"0": 1000, "1": 1000}, "topicB": {"0": 2000, "1": 2000}}'
    )
    try:
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError
        out = {}
        for topic, partitions in value.items():
            if not isinstance(partitions, dict):
                raise ValueError
            for partition, offset in partitions.items():
                if not isinstance(offset, int) or isinstance(offset, bool):
                    raise ValueError
                out[(str(topic), int(partition))] = offset
    except ValueError:
        raise ValueError(f"Expected e.g. {example}, got {text}") from None
    return out


def _offset_spec(params: dict[str, str], global_ts_key: str, by_ts_key: str, offsets_key: str) -> OffsetSpec | None:
    """Spark's order of preference: global timestamp, per-partition timestamps, offsets."""
    strategy = params.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError(f"No enum constant for startingOffsetsByTimestampStrategy: {strategy.upper()}")
    if global_ts_key in params:
        text = params[global_ts_key].strip()
        try:
            return OffsetSpec("timestamp", timestamp=int(text), strategy_on_no_match=strategy)
        except ValueError:
            raise ValueError(f"Expected a single long value, got {text}") from None
    if by_ts_key in params:
        return OffsetSpec("timestamps", _offsets_json(params[by_ts_key].strip(), "timestamps"),
                          strategy_on_no_match=strategy)
    if offsets_key in params:
        text = params[offsets_key].strip()
        lowered = text.lower()
        if lowered == "earliest":
            return OffsetSpec("earliest")
        if lowered == "latest":
            return OffsetSpec("latest")
        return OffsetSpec("offsets", _offsets_json(text))
    return None


def _validate_general(params: dict[str, str]) -> None:
    strategies = [k for k in STRATEGY_KEYS if k in params]
    if not strategies:
        raise ValueError(
            "One of the following options must be specified for Kafka source: "
            f"{STRATEGY_KEYS_TEXT}. See the docs for more details."
        )
    if len(strategies) > 1:
        raise ValueError(
            "Only one of the following options can be specified for Kafka source: "
            f"{STRATEGY_KEYS_TEXT}. See the docs for more details."
        )
    (strategy,) = strategies
    value = params[strategy]
    if strategy == "assign" and not value.strip().startswith("{"):
        raise ValueError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
    if strategy == "subscribe" and not [t for t in value.split(",") if t.strip()]:
        raise ValueError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
    if strategy == "subscribepattern" and not value.strip():
        raise ValueError(
            f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'"
        )
    if "minpartitions" in params and int(params["minpartitions"]) <= 0:
        raise ValueError("minPartitions must be positive")
    if "maxrecordsperpartition" in params and int(params["maxrecordsperpartition"]) <= 0:
        raise ValueError("maxRecordsPerPartition must be positive")
    if "kafka.auto.offset.reset" in params:
        raise ValueError(
            "Kafka option 'auto.offset.reset' is not supported.\n"
            "Instead set the source option 'startingoffsets' to 'earliest' or 'latest'\n"
            "to specify where to start. Structured Streaming manages which offsets are consumed\n"
            "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
            "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
            "'startingoffsets' only applies when a new Streaming query is started, and\n"
            "that resuming will always pick up from where the query left off. See the docs for more\n"
            "details."
        )
    if "kafka.key.deserializer" in params:
        raise ValueError(
            "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte arrays "
            "with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys."
        )
    if "kafka.value.deserializer" in params:
        raise ValueError(
            "Kafka option 'value.deserializer' is not supported as values are deserialized as byte "
            "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the values."
        )
    for unsupported in ("enable.auto.commit", "interceptor.classes"):
        if f"kafka.{unsupported}" in params:
            raise ValueError(f"Kafka option '{unsupported}' is not supported")
    if "kafka.bootstrap.servers" not in params:
        raise ValueError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    if "minoffsetspertrigger" in params and "maxoffsetspertrigger" in params:
        low, high = int(params["minoffsetspertrigger"]), int(params["maxoffsetspertrigger"])
        if low > high:
            raise ValueError(f"The value of minOffsetPerTrigger({low}) is higher than the maxOffsetsPerTrigger({high}).")
    level = params.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise ValueError(
            f"Invalid value {params['kafka.isolation.level']} for configuration isolation.level: "
            "String must be one of: read_committed, read_uncommitted"
        )


def _check_start_end(starting: OffsetSpec | None, ending: OffsetSpec | None) -> None:
    if starting is None or ending is None or starting.kind != ending.kind:
        return
    if starting.kind in ("offsets", "timestamps"):
        if set(starting.offsets) != set(ending.offsets):
            raise ValueError(
                "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET] The specified start offset "
                "and end offset should have the same topic-partitions. Topic-partitions for start offset: "
                f"{show_partitions(starting.offsets)}, topic-partitions for end offset: {show_partitions(ending.offsets)}."
            )
        for tp, start in starting.offsets.items():
            end = ending.offsets[tp]
            if start > end and start >= 0 and end >= 0:
                what = "offset" if starting.kind == "offsets" else "timestamp"
                raise ValueError(
                    f"[UNRESOLVED_START_{what.upper()}_GREATER_THAN_END_{what.upper()}] The specified start "
                    f"{what} {start} is greater than the end {what} {end} for topic {tp[0]} partition {tp[1]}."
                )


def show_partitions(tps: object) -> str:
    """Scala's rendering of a set of TopicPartitions: Set(topicA-0, topicB-1)."""
    return "Set(" + ", ".join(f"{t}-{p}" for t, p in sorted(tps)) + ")"  # type: ignore[call-overload]


def parse(options: Mapping[str, str], *, streaming: bool | None) -> KafkaOptions:
    """Validate and parse; ``streaming`` None checks only what batch and stream share."""
    params = _lower(options)
    if streaming:
        if "endingoffsets" in params:
            raise ValueError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in params:
            raise ValueError("ending timestamp not valid in streaming queries")
    starting = _offset_spec(params, "startingtimestamp", "startingoffsetsbytimestamp", "startingoffsets")
    ending = _offset_spec(params, "endingtimestamp", "endingoffsetsbytimestamp", "endingoffsets")
    if streaming is False:
        if starting is not None and starting.kind == "latest":
            raise ValueError("starting offset can't be latest for batch queries on Kafka")
        if starting is not None and starting.kind == "offsets":
            for (topic, partition), offset in starting.offsets.items():
                if offset == LATEST:
                    raise ValueError(f"startingOffsets for {topic}-{partition} can't be latest for batch queries on Kafka")
        if ending is not None and ending.kind == "earliest":
            raise ValueError("ending offset can't be earliest for batch queries on Kafka")
        if ending is not None and ending.kind == "offsets":
            for (topic, partition), offset in ending.offsets.items():
                if offset == EARLIEST:
                    raise ValueError(f"ending offset for {topic}-{partition} can't be earliest for batch queries on Kafka")
    _validate_general(params)
    if streaming is False:
        _check_start_end(starting, ending)

    strategy = next(k for k in STRATEGY_KEYS if k in params)
    topics: tuple[str, ...] = ()
    pattern = ""
    assign: tuple[TopicPartition, ...] = ()
    if strategy == "subscribe":
        topics = tuple(t.strip() for t in params["subscribe"].split(",") if t.strip())
    elif strategy == "subscribepattern":
        pattern = params["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"Invalid subscribePattern {pattern!r}: {exc}") from None
    else:
        assign = _partition_json(params["assign"])
    level = params.get("kafka.isolation.level", "read_uncommitted").strip().lower()
    security_properties = tuple(sorted(
        (key.removeprefix("kafka."), value) for key, value in params.items()
        if key.startswith(("kafka.security.", "kafka.sasl.", "kafka.ssl."))
    ))
    if security_properties:
        _security(security_properties)  # a bad setting fails the query here, not in a task
    max_trigger = params.get("maxoffsetspertrigger")
    timeout_ms = params.get("kafka.request.timeout.ms")
    return KafkaOptions(
        bootstrap_servers=params["kafka.bootstrap.servers"],
        strategy=strategy,
        topics=topics,
        pattern=pattern,
        assign=assign,
        isolation_level=READ_COMMITTED if level == "read_committed" else READ_UNCOMMITTED,
        include_headers=_bool(params.get("includeheaders", "false"), "includeHeaders"),
        fail_on_data_loss=_bool(params.get("failondataloss", "true"), "failOnDataLoss"),
        min_partitions=int(params["minpartitions"]) if "minpartitions" in params else None,
        max_records_per_partition=(
            int(params["maxrecordsperpartition"]) if "maxrecordsperpartition" in params else None
        ),
        max_offsets_per_trigger=int(max_trigger) if max_trigger is not None else None,
        starting=starting,
        ending=ending,
        request_timeout_s=int(timeout_ms) / 1000 if timeout_ms else 30.0,
        fetch_max_bytes=int(params.get("kafka.max.partition.fetch.bytes", 16 * 1024 * 1024)),
        poll_timeout_ms=int(params.get("kafkaconsumer.polltimeoutms", 120_000)),
        security_properties=security_properties,
    )
