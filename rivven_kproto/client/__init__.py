"""A small Kafka client on our codec, using trio: for the ``kproto`` CLI and the tests.

It negotiates API versions with whatever broker it meets, so it works against any
Kafka-compatible broker, not only ours. Layers: the connection driver it shares with the
broker's requests to its peers (:mod:`rivven_kproto.net`: sans-IO framing and correlation, one
trio connection), :mod:`.client` (bootstrap, metadata, routing, timeouts), then :mod:`.admin`,
:mod:`.producer` and :mod:`.consumer`.
"""

from rivven_kproto.net.errors import (
    BrokerUnreachableError,
    ClientError,
    ConnectionLostError,
    KafkaResponseError,
    ProtocolViolationError,
    RequestTimeoutError,
    UnsupportedApiError,
)

from .client import BrokerInfo, ClusterMetadata, KafkaClient, PartitionInfo, TopicInfo, parse_bootstrap

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
