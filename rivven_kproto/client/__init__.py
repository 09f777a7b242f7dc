"""A small Kafka client on our codec, using trio: for the ``kproto`` CLI and the tests.

It negotiates API versions with whatever broker it meets, so it works against any
Kafka-compatible broker, not only ours. Layers: :mod:`.protocol` (sans-IO framing and
correlation), :mod:`.connection` (one trio connection), :mod:`.client` (bootstrap, metadata,
routing, timeouts), then :mod:`.admin`, :mod:`.producer` and :mod:`.consumer`.
"""

from .client import BrokerInfo, ClusterMetadata, KafkaClient, PartitionInfo, TopicInfo, parse_bootstrap
from .errors import (
    BrokerUnreachableError,
    ClientError,
    ConnectionLostError,
    KafkaResponseError,
    ProtocolViolationError,
    RequestTimeoutError,
    UnsupportedApiError,
)

__all__ = [
    "BrokerInfo",
    "BrokerUnreachableError",
    "ClientError",
    "ClusterMetadata",
    "ConnectionLostError",
    "KafkaClient",
    "KafkaResponseError",
    "PartitionInfo",
    "ProtocolViolationError",
    "RequestTimeoutError",
    "TopicInfo",
    "UnsupportedApiError",
    "parse_bootstrap",
]
