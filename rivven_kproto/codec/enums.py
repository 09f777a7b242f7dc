"""Protocol enumerations every layer speaks: one definition for broker, clients and the Spark source."""

from __future__ import annotations

import enum


class IsolationLevel(enum.IntEnum):
    """Fetch and ListOffsets ``isolation_level``."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class OffsetSpec(enum.IntEnum):
    """ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants)."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3


class ConfigResourceType(enum.IntEnum):
    """A config resource's type in DescribeConfigs, (Incremental)AlterConfigs and
    ListConfigResources (Kafka's ``ConfigResource.Type``; not the ACL resource types)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(enum.IntEnum):
    """Where a config value comes from, as DescribeConfigs (v1+) and CreateTopics (v5+) say it."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class AlterConfigOp(enum.IntEnum):
    """IncrementalAlterConfigs' ``config_operation`` (Kafka's ``AlterConfigOp.OpType``)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


READ_UNCOMMITTED = IsolationLevel.READ_UNCOMMITTED
READ_COMMITTED = IsolationLevel.READ_COMMITTED
LATEST = OffsetSpec.LATEST
EARLIEST = OffsetSpec.EARLIEST
MAX_TIMESTAMP = OffsetSpec.MAX_TIMESTAMP
